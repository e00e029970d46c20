"""A real `mqnamesrv` + `mqbroker` pair in subprocesses, and a raw-frame client: what a hostile client sees.

Used by the hostile-client tests (tests/server/test_hostile_*.py). The broker runs in its own process so that its
RSS (`/proc/<pid>/status` VmRSS) is its own; the client writes frames by hand on plain sockets, so it can
stop in the middle of one, trickle it, or never read what the broker answers.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from broker.protocol.codes import RequestCode
from broker.protocol.command import FrameDecoder, RemotingCommand, encode
from tests.local_cluster import SMALL_INDEX

__all__ = ["BrokerProcs", "RawClient", "free_port", "pull_header", "rss_mib", "running_pair", "send_header"]

READY = "boot success"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mib(pid: int) -> float:
    """The process's resident set (VmRSS), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def send_header(topic: str, queue_id: int, group: str = "HostilePG", queues: int = 4) -> dict[str, str]:
    """SEND_MESSAGE_V2's short header keys (a producerGroup ... j reconsumeTimes)."""
    return {"a": group, "b": topic, "c": "TBW102", "d": str(queues), "e": str(queue_id), "f": "0",
            "g": str(int(time.time() * 1000)), "h": "0", "i": "", "j": "0"}  # fmt: skip


def pull_header(topic: str, queue_id: int, offset: int, group: str, *, suspend_ms: int = 0) -> dict[str, str]:
    """PULL_MESSAGE with the subscription in the header ("*"); with `suspend_ms` the broker holds it."""
    sys_flag = 4 | (2 if suspend_ms else 0)  # FLAG_SUBSCRIPTION, FLAG_SUSPEND
    return {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
            "maxMsgNums": "32", "sysFlag": str(sys_flag), "commitOffset": "0",
            "suspendTimeoutMillis": str(suspend_ms), "subscription": "*", "subVersion": "0"}  # fmt: skip


class RawClient:
    """Blocking request/response over one TCP connection."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.decoder = FrameDecoder()
        self.opaque = 0

    def request(self, code: int, ext: dict[str, str], body: bytes = b"") -> RemotingCommand:
        self.opaque += 1
        self.sock.sendall(encode(RemotingCommand(code=code, opaque=self.opaque, ext_fields=ext, body=body)))
        while True:
            data = self.sock.recv(1 << 20)
            assert data, "the server closed the connection"
            for cmd in self.decoder.feed(data):
                if cmd.opaque == self.opaque:
                    return cmd

    def send(self, topic: str, queue_id: int, body: bytes) -> RemotingCommand:
        return self.request(RequestCode.SEND_MESSAGE_V2, send_header(topic, queue_id), body)

    def timed_send(self, topic: str, queue_id: int, body: bytes) -> tuple[RemotingCommand, float]:
        """The reply and how long it took, in ms."""
        started = time.perf_counter()
        reply = self.send(topic, queue_id, body)
        return reply, (time.perf_counter() - started) * 1000

    def close(self) -> None:
        self.sock.close()


@dataclass
class BrokerProcs:
    root: Path
    namesrv_port: int
    broker_port: int
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def spawn(self, program: str, conf: Path) -> None:
        log = self.root / f"{program}.log"
        with log.open("ab") as out:
            out.write(b"--- start ---\n")
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", f"broker.cli.{program}", "-c", str(conf)],
                stdout=out, stderr=subprocess.STDOUT, cwd=self.root,
            )  # fmt: skip
        self.procs[program] = proc
        deadline = time.monotonic() + 30
        while READY not in self.log(program):
            assert proc.poll() is None and time.monotonic() < deadline, self.log(program)[-3000:]
            time.sleep(0.05)

    def log(self, program: str) -> str:
        """The program's output since it was last started."""
        return (self.root / f"{program}.log").read_text(errors="replace").split("--- start ---")[-1]

    def pid(self, program: str) -> int:
        return self.procs[program].pid

    def kill9(self, program: str) -> None:
        proc = self.procs[program]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)

    def stop(self) -> None:
        for proc in reversed(list(self.procs.values())):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()


def _write(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


@contextmanager
def running_pair(root: Path, **broker_conf: str) -> Iterator[BrokerProcs]:
    """Start a NameServer and a broker (ASYNC_FLUSH, small files) with extra broker.conf keys; stop both."""
    procs = BrokerProcs(root, free_port(), free_port())
    ns_conf = _write(root / "namesrv.properties", {"listenPort": str(procs.namesrv_port), "bindAddress": "127.0.0.1"})
    conf = {
        "brokerClusterName": "HostileCluster",
        "brokerName": "broker-hostile",
        "brokerId": "0",
        "brokerIP1": "127.0.0.1",
        "listenPort": str(procs.broker_port),
        "haListenPort": str(free_port()),
        "namesrvAddr": f"127.0.0.1:{procs.namesrv_port}",
        "storePathRootDir": str(root / "store"),
        "mappedFileSizeCommitLog": str(64 << 20),
        "defaultTopicQueueNums": "4",
        **SMALL_INDEX,
        **broker_conf,
    }
    broker_conf_path = _write(root / "broker.conf", conf)
    try:
        procs.spawn("mqnamesrv", ns_conf)
        procs.spawn("mqbroker", broker_conf_path)
        yield procs
    finally:
        procs.stop()
