"""The kind tier's scripts, run for real: the runc-caps wrapper on OCI config files, and cluster.sh's argument checks.

runc-caps is run with RUNC_CAPS_REAL=/bin/true standing in for runc: a real runc would need a container bundle and
root, and what is checked here is only what the wrapper does to the files before it hands over. One test runs the
real runc (`--version`) through it when runc is installed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
WRAPPER = REPO / "e2e" / "kind" / "node" / "usr" / "local" / "bin" / "runc-caps"
CLUSTER = REPO / "e2e" / "kind" / "cluster.sh"

CAP_NAMES = [
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
]
ALL_CAPS = [f"CAP_{n}" for n in CAP_NAMES]


def _bounding_set() -> set[str]:
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("CapBnd:"))
    bits = int(line.split()[1], 16)
    return {cap for i, cap in enumerate(ALL_CAPS) if bits >> i & 1}


def _run(*args: str, real: str = "/bin/true") -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "RUNC_CAPS_REAL": real}
    return subprocess.run(["sh", str(WRAPPER), *args], capture_output=True, text=True, env=env, timeout=30)


def _privileged_config() -> dict[str, object]:
    """The shape Docker writes for --privileged: every capability in every set, on one line."""
    sets = {k: list(ALL_CAPS) for k in ("bounding", "effective", "inheritable", "permitted", "ambient")}
    return {"ociVersion": "1.0.2", "process": {"args": ["/sbin/init"], "capabilities": sets}}


def _write(path: Path, obj: object) -> None:
    path.write_text(json.dumps(obj, separators=(",", ":")))


@pytest.mark.parametrize("form", ["--bundle", "-b", "--bundle="])
def test_create_drops_exactly_the_capabilities_missing_from_the_bounding_set(tmp_path: Path, form: str) -> None:
    _write(tmp_path / "config.json", _privileged_config())
    bundle = [f"--bundle={tmp_path}"] if form.endswith("=") else [form, str(tmp_path)]
    p = _run("--root", "/run/x", "--log-format", "json", "create", *bundle, "--pid-file", "/run/p", "id1")
    assert p.returncode == 0, p.stderr
    caps = json.loads((tmp_path / "config.json").read_text())["process"]["capabilities"]
    have = _bounding_set()
    for name, values in caps.items():
        assert values == [c for c in ALL_CAPS if c in have], name


def test_a_capability_alone_in_its_list_leaves_an_empty_list(tmp_path: Path) -> None:
    missing = [c for c in ALL_CAPS if c not in _bounding_set()]
    if not missing:
        pytest.skip("root holds every capability here: the wrapper has nothing to drop")
    _write(tmp_path / "config.json", {"process": {"capabilities": {"ambient": [missing[0]], "bounding": ["CAP_KILL"]}}})
    assert _run("run", "--bundle", str(tmp_path), "id").returncode == 0
    caps = json.loads((tmp_path / "config.json").read_text())["process"]["capabilities"]
    assert caps == {"ambient": [], "bounding": ["CAP_KILL"]}


def test_exec_edits_the_process_file_and_other_commands_touch_nothing(tmp_path: Path) -> None:
    process = tmp_path / "process.json"
    _write(process, _privileged_config()["process"])
    assert _run("exec", "--process", str(process), "id").returncode == 0
    after = json.loads(process.read_text())["capabilities"]["permitted"]
    assert set(after) == _bounding_set() & set(ALL_CAPS)

    _write(tmp_path / "config.json", _privileged_config())
    before = (tmp_path / "config.json").read_text()
    for cmd in (["state", "id"], ["delete", "--force", "id"], ["kill", "id", "9"], ["--version"]):
        assert _run(*cmd, "--bundle", str(tmp_path)).returncode == 0
    assert (tmp_path / "config.json").read_text() == before


@pytest.mark.parametrize(
    "content",
    [b"", b'{"process":{"capabilities":{"bounding":["CAP_SYS_RES', b"\x00\xff garbage \xfe", b"[" * 100_000],
    ids=["empty", "truncated", "binary", "oversized"],
)
def test_malformed_configs_are_handed_to_runc_as_they_are(tmp_path: Path, content: bytes) -> None:
    """The wrapper is no validator: runc reports a bad config itself. The wrapper must not fail or hang first."""
    (tmp_path / "config.json").write_bytes(content)
    p = _run("create", "--bundle", str(tmp_path), "id")
    assert p.returncode == 0, p.stderr


def test_missing_bundle_and_process_files_pass_through(tmp_path: Path) -> None:
    assert _run("create", "--bundle", str(tmp_path / "nope"), "id").returncode == 0
    assert _run("exec", "--process", str(tmp_path / "nope.json"), "id").returncode == 0
    assert _run("exec", "id", "true").returncode == 0


def test_the_real_runc_runs_behind_the_wrapper() -> None:
    runc = shutil.which("runc") or ("/usr/sbin/runc" if Path("/usr/sbin/runc").exists() else None)
    if runc is None:
        pytest.skip("runc is not installed")
    p = _run("--version", real=runc)
    assert p.returncode == 0 and "runc version" in p.stdout, p.stdout + p.stderr


@pytest.mark.parametrize("nodes", ["0", "abc", "100", "3;touch /tmp/x", "-1", " 3", "3" * 5000])
def test_cluster_up_refuses_a_bad_node_count_before_doing_anything(nodes: str) -> None:
    p = subprocess.run(["bash", str(CLUSTER), "up", nodes], capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and "NODES must be 1..99" in p.stderr, p.stderr


def test_cluster_script_names_its_commands_on_an_unknown_one() -> None:
    for args in ([], ["bogus"], ["--help"]):
        p = subprocess.run(["bash", str(CLUSTER), *args], capture_output=True, text=True, timeout=30)
        assert p.returncode != 0 and "usage:" in p.stderr, p.stderr
