#!/usr/bin/env python3
"""Write a one-layer image archive (docker-archive v1.2 format, which `ctr images import` reads)
to stdout, from host files, without any registry or Docker engine.

    mkimage.py --tag rocketcluster.local/pause:3.10 --entrypoint /pause --user 65535:65535 \
        /path/to/pause=/pause  [HOSTPATH=IMAGEPATH | @symlink:TARGET=IMAGEPATH]...

Used for the node tier's two tiny images: the pod sandbox (pause) and the volume helper (busybox).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
import tarfile


def _layer(specs: list[str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs: set[str] = set()
        for spec in specs:
            src, dst = spec.split("=", 1)
            dst = dst.lstrip("/")
            parts = dst.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    info = tarfile.TarInfo(d)
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
            if src.startswith("@symlink:"):
                info = tarfile.TarInfo(dst)
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, src[len("@symlink:") :], 0o777
                tar.addfile(info)
            else:
                info = tar.gettarinfo(src, arcname=dst)
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                with open(src, "rb") as f:
                    tar.addfile(info, f)
    return buf.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tag", required=True)
    ap.add_argument("--entrypoint", nargs="*", default=[])
    ap.add_argument("--user", default="")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    layer = _layer(a.files)
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": a.entrypoint or None, "User": a.user, "Env": ["PATH=/bin:/usr/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created_by": "e2e/mkimage.py"}],
    }
    cfg = json.dumps(config, sort_keys=True).encode()
    cfg_name = hashlib.sha256(cfg).hexdigest() + ".json"
    manifest = json.dumps([{"Config": cfg_name, "RepoTags": [a.tag], "Layers": ["layer.tar"]}]).encode()
    with tarfile.open(fileobj=sys.stdout.buffer, mode="w|") as out:
        for name, data in (("layer.tar", layer), (cfg_name, cfg), ("manifest.json", manifest)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            out.addfile(info, io.BytesIO(data))


if __name__ == "__main__":
    main()
