"""The Go peer: Apache RocketMQ's Go client (github.com/apache/rocketmq-client-go/v2 at the version
tests/peers/go/go.mod pins), from the Go module proxy, unchanged, driven by tests/peers/go.

scripts/peers.sh downloads the module into `~/.cache/rocketcluster/go-rocketmq-client-<version>/mod`
and builds tests/peers/go into `interop-<hash of the sources>` beside it; `ensure_go()` runs it
(`peers.sh go`) when the binary for the current sources is missing. `GoProc` is a `PeerProc` whose
command is that binary with a role (`produce`, `consume`, `pull`, `transact`, `request`, `respond`); it
prints JSON lines that `PeerProc` parses, in the shape the Java driver prints.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.interop import interop_harness
from tests.interop.interop_harness import PeerProc, Record
from tests.peers import REPO

__all__ = ["GO_DIR", "GoProc", "check_intact", "ensure_go", "go"]

#: A UNIQ_KEY as the Go client makes it: 16 bytes in hex, the counter part in lower case.
GO_UNIQ_KEY_RE = re.compile(r"^[0-9A-Fa-f]{32}$")

SOURCES = REPO / "tests" / "peers" / "go"
_REQUIRE = re.compile(r"^require github\.com/apache/rocketmq-client-go/v2 (\S+)$", re.MULTILINE)


def check_intact(record: Record, producer_origin: str) -> None:
    """interop_harness.check_intact, with room for the Go client's UNIQ_KEY (partly lower-case hex)."""
    interop_harness.check_intact(record, producer_origin, GO_UNIQ_KEY_RE)


def client_version() -> str:
    found = _REQUIRE.search((SOURCES / "go.mod").read_text())
    assert found, "tests/peers/go/go.mod must pin rocketmq-client-go/v2 on one require line"
    return found.group(1)


GO_DIR = Path(
    os.environ.get(
        "ROCKETCLUSTER_GO_DIR", Path.home() / ".cache" / "rocketcluster" / f"go-rocketmq-client-{client_version()}"
    )
)


def sources_hash() -> str:
    """What peers.sh names the build after: go.mod, go.sum, then the *.go files in byte order, one name
    a line, then their contents."""
    files = ["go.mod", "go.sum", *sorted(p.name for p in SOURCES.glob("*.go"))]
    digest = hashlib.sha256("".join(f"{name}\n" for name in files).encode())
    for name in files:
        digest.update((SOURCES / name).read_bytes())
    return digest.hexdigest()[:16]


def binary() -> Path:
    return GO_DIR / f"interop-{sources_hash()}"


def ensure_go() -> str | None:
    """Build the Go peer with `peers.sh go` if needed; None when it is ready, else why not."""
    if binary().exists():
        return None
    env = {**os.environ, "ROCKETCLUSTER_GO_DIR": str(GO_DIR)}
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "peers.sh"), "go"], env=env, capture_output=True, text=True, timeout=900
    )
    if proc.returncode != 0:
        return f"scripts/peers.sh go failed (rc {proc.returncode}): {proc.stderr.strip()[-500:]}"
    return None if binary().exists() else "scripts/peers.sh go finished but left no build of tests/peers/go"


@dataclass
class GoProc(PeerProc):
    """One run of the Go driver; HOME (where the client writes its logs) is `home`."""

    def start(self) -> GoProc:
        self.home.mkdir(parents=True, exist_ok=True)
        cmd = ["timeout", "-k", "5", str(int(self.timeout)), str(binary()), *self.args]
        env = {"HOME": str(self.home), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
        self.proc = subprocess.Popen(cmd, env=env, cwd=self.home, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return self


def go(args: list[str], home: Path, timeout: float = 90.0) -> GoProc:
    """A GoProc, not started yet: `go([...], home).start().wait()` or with `run_all`."""
    return GoProc("rocketmq-client-go", args, home, timeout)
