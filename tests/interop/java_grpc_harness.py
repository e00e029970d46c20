"""The Java 5.x gRPC peer: Apache RocketMQ's `rocketmq-client-java` 5.0.8 from Maven Central, unchanged, driven by
tests/peers/java/grpc.

scripts/peers.sh (`peers.sh java5grpc`) fetches the shaded client jar into
`~/.cache/rocketcluster/java-grpc-client-5.0.8/lib` and compiles tests/peers/java/grpc/*.java with ../Json.java into
`classes-<hash of those sources>` beside it; `ensure_java_grpc()` runs it when either is missing. `grpc5` makes a
`PeerProc` whose command is a JVM running `Grpc5 <role> <endpoint> ...` with a tmp HOME (also `user.home`); it prints
JSON lines that `PeerProc` parses. The 5.0.8 jar logs nothing (its shaded logback does not bind to its shaded SLF4J
1.7, so SLF4J falls back to no-op: apache/rocketmq-clients#1022); what a failed run says is the driver's stack trace
on stderr, which `describe()` shows.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.interop.interop_harness import PeerProc
from tests.peers import REPO

__all__ = ["JAVA_GRPC_VERSION", "Grpc5Proc", "ensure_java_grpc", "grpc5"]

JAVA_GRPC_VERSION = "5.0.8"
JAVA_GRPC_DIR = Path(
    os.environ.get(
        "ROCKETCLUSTER_JAVA_GRPC_DIR",
        Path.home() / ".cache" / "rocketcluster" / f"java-grpc-client-{JAVA_GRPC_VERSION}",
    )
)
SOURCES = REPO / "tests" / "peers" / "java"
#: Startup matters more than peak speed for a driver that runs seconds: C1 only, the serial GC.
JVM_OPTIONS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m"]


def sources_hash() -> str:
    """What peers.sh names the build after: the file names (grpc/*.java sorted, then Json.java), one a line, then
    their contents in that order."""
    files = [*sorted(f"grpc/{p.name}" for p in (SOURCES / "grpc").glob("*.java")), "Json.java"]
    digest = hashlib.sha256("".join(f"{name}\n" for name in files).encode())
    for name in files:
        digest.update((SOURCES / name).read_bytes())
    return digest.hexdigest()[:16]


def classes_dir() -> Path:
    return JAVA_GRPC_DIR / f"classes-{sources_hash()}"


def installed() -> bool:
    return (JAVA_GRPC_DIR / "lib" / ".ok").exists() and (classes_dir() / ".ok").exists()


def ensure_java_grpc() -> str | None:
    """Install (or rebuild) the peer with `peers.sh java5grpc`; None when it is ready, else why not."""
    if installed():
        return None
    env = {**os.environ, "ROCKETCLUSTER_JAVA_GRPC_DIR": str(JAVA_GRPC_DIR)}
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "peers.sh"), "java5grpc"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode != 0:
        return f"scripts/peers.sh java5grpc failed (rc {proc.returncode}): {proc.stderr.strip()[-500:]}"
    return None if installed() else "scripts/peers.sh java5grpc finished but left no build of tests/peers/java/grpc"


@dataclass
class Grpc5Proc(PeerProc):
    """One JVM running `Grpc5 <args>`."""

    def start(self) -> Grpc5Proc:
        self.home.mkdir(parents=True, exist_ok=True)
        java = shutil.which("java") or "java"
        classpath = f"{classes_dir()}:{JAVA_GRPC_DIR / 'lib'}/*"
        cmd = [
            "timeout", "-k", "5", str(int(self.timeout)),
            java, *JVM_OPTIONS, f"-Duser.home={self.home}", "-cp", classpath, "Grpc5", *self.args,
        ]  # fmt: skip
        env = {"HOME": str(self.home), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
        self.proc = subprocess.Popen(cmd, env=env, cwd=self.home, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return self


def grpc5(args: list[str], home: Path, timeout: float = 120.0) -> Grpc5Proc:
    """A Grpc5Proc, not started yet."""
    return Grpc5Proc(f"rocketmq-client-java-{JAVA_GRPC_VERSION}", args, home, timeout)
