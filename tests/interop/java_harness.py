"""The Java peer: Apache RocketMQ's Java client 5.3.3 from Maven Central, unchanged, driven by tests/peers/java.

scripts/peers.sh fetches `rocketmq-client` and `rocketmq-tools` with their dependencies into
`~/.cache/rocketcluster/java-rocketmq-5.3.3/lib` and compiles tests/peers/java into
`classes-<hash of the sources>` beside it; `ensure_java()` runs it (`peers.sh java`) when either is
missing, so an edited driver is rebuilt on the next run. `JavaProc` is a `PeerProc` whose command is a
JVM running `Interop <role> ...`: it gets a tmp HOME (also as `user.home`, where the client writes
its logs and broadcasting offsets) and prints JSON lines that `PeerProc` parses.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.interop import interop_harness
from tests.interop.interop_harness import PeerProc, Record, ServerPair
from tests.peers import REPO

__all__ = [
    "JAVA_BROKER_CONF",
    "JAVA_DIR",
    "JavaProc",
    "check_intact",
    "client_log_lines",
    "ensure_java",
    "java",
    "java_classpath",
    "java_mqadmin",
    "java_server_pair",
]

JAVA_ROCKETMQ_VERSION = "5.3.3"
JAVA_PEER = f"java-rocketmq-{JAVA_ROCKETMQ_VERSION}"
JAVA_DIR = Path(
    os.environ.get(
        "ROCKETCLUSTER_JAVA_DIR", Path.home() / ".cache" / "rocketcluster" / f"java-rocketmq-{JAVA_ROCKETMQ_VERSION}"
    )
)
SOURCES = REPO / "tests" / "peers" / "java"
#: Startup matters more than peak speed for a driver that runs seconds: C1 only, the serial GC.
JVM_OPTIONS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m"]
#: In the stack trace of a JVM whose client could not list the host's network interfaces.
STARTUP_RACE = "NetworkUtil.getLocalAddress"
#: broker.conf of the Java modules: check-backs within ~2 s of a transaction left unknown (the
#: defaults would make a test wait half a minute) and SQL92 subscriptions allowed.
JAVA_BROKER_CONF = {
    "transactionTimeOut": "1000",
    "transactionCheckInterval": "1000",
    "enablePropertyFilter": "true",
}

#: A UNIQ_KEY as Java 5.x makes it: the client's IPv4 (4 bytes) or IPv6 (16 bytes) address, pid,
#: class-loader hash, time and counter, in hex: 32 or 56 digits.
JAVA_UNIQ_KEY_RE = re.compile(r"^[0-9A-F]{32}(?:[0-9A-F]{24})?$")


def check_intact(record: Record, producer_origin: str) -> None:
    """interop_harness.check_intact, with room for the longer UNIQ_KEY of a Java client on IPv6."""
    interop_harness.check_intact(record, producer_origin, JAVA_UNIQ_KEY_RE)


def sources_hash() -> str:
    """What peers.sh names the build after: the sorted file names, one a line, then their contents."""
    files = sorted(p.name for p in SOURCES.glob("*.java"))
    digest = hashlib.sha256("".join(f"{name}\n" for name in files).encode())
    for name in files:
        digest.update((SOURCES / name).read_bytes())
    return digest.hexdigest()[:16]


def classes_dir() -> Path:
    return JAVA_DIR / f"classes-{sources_hash()}"


def java_classpath() -> str:
    return f"{classes_dir()}:{JAVA_DIR / 'lib'}/*"


def installed() -> bool:
    return (JAVA_DIR / "lib" / ".ok").exists() and (classes_dir() / ".ok").exists()


def ensure_java() -> str | None:
    """Install (or rebuild) the Java peer with `peers.sh java`; None when it is ready, else why not."""
    if installed():
        return None
    env = {**os.environ, "ROCKETCLUSTER_JAVA_DIR": str(JAVA_DIR)}
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "peers.sh"), "java"], env=env, capture_output=True, text=True, timeout=900
    )
    if proc.returncode != 0:
        return f"scripts/peers.sh java failed (rc {proc.returncode}): {proc.stderr.strip()[-500:]}"
    return None if installed() else "scripts/peers.sh java finished but left no build of tests/peers/java"


def client_log_lines(home: Path) -> list[str]:
    """What the Java client logged under `user.home`: rocketmq_client.log, or tools_default.log when
    rocketmq-tools' logging configuration is the one found first on the classpath (it is, here)."""
    lines: list[str] = []
    for log in sorted((home / "logs" / "rocketmqlogs").glob("*.log")):
        lines.extend(log.read_text(errors="replace").splitlines())
    return lines


@dataclass
class JavaProc(PeerProc):
    """One JVM running `Interop <args>`; `system_props` become -D options (e.g. rocketmq.serialize.type)."""

    system_props: dict[str, str] = field(default_factory=dict)

    def start(self) -> JavaProc:
        self.home.mkdir(parents=True, exist_ok=True)
        java = shutil.which("java") or "java"
        props = [f"-D{k}={v}" for k, v in {"user.home": str(self.home), **self.system_props}.items()]
        cmd = [
            "timeout", "-k", "5", str(int(self.timeout)),
            java, *JVM_OPTIONS, *props, "-cp", java_classpath(), "Interop", *self.args,
        ]  # fmt: skip
        env = {"HOME": str(self.home), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
        self.proc = subprocess.Popen(cmd, env=env, cwd=self.home, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return self

    def wait(self) -> JavaProc:
        super().wait()
        if self.returncode != 0 and not self.events and STARTUP_RACE in self.stderr:
            # ClientConfig's constructor lists the host's network interfaces; one removed meanwhile
            # (other tests' network namespaces and veth pairs come and go) fails it before anything
            # was sent, so one more run is the same run.
            self.events.clear()
            self.start()
            super().wait()
        return self

    def describe(self) -> str:
        # Stack frames say little here; the WARN/ERROR lines before them say what went wrong.
        lines = [line for line in client_log_lines(self.home) if not line.lstrip().startswith("at ")]
        tail = "\n".join(line[:300] for line in lines[-12:]) or "(no client log)"
        return f"{super().describe()}\nclient log:\n{tail}"


def java_mqadmin(namesrv: str, home: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Apache RocketMQ's own mqadmin (`MQAdminStartup`, unchanged) against `namesrv`: its stdout and stderr.
    It exits 0 even when a command failed, so callers read the text. `env` adds variables (ROCKETMQ_HOME, whose
    conf/tools.yml holds the credentials it signs with)."""
    full_env = {"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", **(env or {})}
    cmd = [
        shutil.which("java") or "java", *JVM_OPTIONS, f"-Duser.home={home}", "-cp", f"{JAVA_DIR / 'lib'}/*",
        "org.apache.rocketmq.tools.command.MQAdminStartup", *args, "-n", namesrv,
    ]  # fmt: skip
    for _attempt in range(2):
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=full_env, cwd=home)
        out = done.stdout + done.stderr
        # The tools give each request a fixed 3 s (no option or property changes it); on a loaded machine a cold
        # JVM can spend that warming up, so a timeout gets one more try. Any other failure is returned as it is.
        if "RemotingTimeoutException" not in out:
            break
    return out


def java(args: list[str], home: Path, timeout: float = 90.0, props: dict[str, str] | None = None) -> JavaProc:
    """A JavaProc, not started yet: `java([...], home).start().wait()` or with `run_all`."""
    return JavaProc(JAVA_PEER, args, home, timeout, system_props=dict(props or {}))


def java_server_pair(root: Path) -> Iterator[ServerPair]:
    """Body of a module fixture: one NameServer + broker pair with `JAVA_BROKER_CONF`."""
    pair = ServerPair(root, extra=JAVA_BROKER_CONF)
    try:
        pair.start()
        yield pair
    finally:
        pair.stop()
