"""`make run` is ready when it says so, reports a crash without taking the other server down, and stops on
Ctrl-C as a clean exit (no `make: *** ... Error 130`).

`make run` runs in a pseudo-terminal (terminal.py) with its data dir and ports moved to the test's
(RUN_DATA_DIR, RUN_*_PORT); `make -o .venv/.installed` keeps make from rebuilding the venv.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.newuser.processes import free_port
from tests.newuser.terminal import TerminalRun
from tests.newuser.user_harness import BIN, user_env

REPO = Path(__file__).resolve().parents[2]
RUNNING = "RocketCluster is running"


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _tree(pid: int) -> list[int]:
    pids = [pid]
    for child in _children(pid):
        pids += _tree(child)
    return pids


class MakeRun:
    def __init__(self, data: Path) -> None:
        self.data = data
        self.namesrv_port = free_port()
        self.broker_port = free_port()
        self.env = user_env(
            RUN_DATA_DIR=str(data),
            RUN_NAMESRV_PORT=str(self.namesrv_port),
            RUN_BROKER_PORT=str(self.broker_port),
            RUN_HA_PORT="0",
            TERM="dumb",
        )
        self.term: TerminalRun | None = None

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    def start(self) -> TerminalRun:
        self.term = TerminalRun(["make", "--no-print-directory", "-o", ".venv/.installed", "run"], self.env, REPO)
        return self.term

    def server_pid(self, name: str) -> int:
        assert self.term is not None
        for pid in _tree(self.term.proc.pid):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(part.endswith(name.encode()) for part in cmdline[:2]):
                return pid
        raise AssertionError(f"no {name} process under make")

    def close(self) -> None:
        if self.term is None:
            return
        pids = _tree(self.term.proc.pid)
        for pid in reversed(pids):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.term.close()


@pytest.fixture
def make_run(tmp_path: Path) -> Iterator[MakeRun]:
    run = MakeRun(tmp_path / "data")
    try:
        yield run
    finally:
        run.close()


def _mqadmin(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "mqadmin"), *args], env=env, capture_output=True, text=True, timeout=120)


def test_ctrl_c_is_a_clean_exit_of_make(make_run: MakeRun) -> None:
    term = make_run.start()
    term.wait_output(RUNNING, 120)
    term.ctrl_c()
    code = term.wait(120)
    out = term.output
    assert code == 0, out
    assert "Error" not in out and "Interrupt" not in out, out
    assert "mqbroker stopped" in out and "mqnamesrv stopped" in out
    assert out.index("mqbroker stopped") < out.index("mqnamesrv stopped")
    # the broker shut down gracefully: it flushed, unregistered and removed its abort file
    assert not (make_run.data / "store" / "abort").exists()
    assert "shutdown ok" in (make_run.data / "logs" / "broker.log").read_text()


def test_a_killed_broker_is_reported_and_the_nameserver_keeps_running(make_run: MakeRun) -> None:
    term = make_run.start()
    term.wait_output(RUNNING, 120)
    env = user_env(NAMESRV_ADDR=make_run.namesrv_addr)
    os.kill(make_run.server_pid("mqbroker"), signal.SIGKILL)
    term.wait_output("mqbroker was killed by SIGKILL; mqnamesrv keeps running (Ctrl-C stops it)", 30)
    assert term.proc.poll() is None  # make run is still going
    listed = _mqadmin("clusterList", env=env)
    assert listed.returncode == 0, listed.stderr  # the NameServer answers
    term.ctrl_c()
    assert term.wait(120) == 0, term.output
    assert "mqnamesrv stopped" in term.output and "Error" not in term.output


PUT_MANY = """
import asyncio, sys
from rocketcluster import Message, Producer

async def main() -> None:
    async with Producer("ReadinessProducer") as producer:
        for batch in range(int(sys.argv[1]) // 100):
            await producer.send_batch([Message("ReadyTopic", b"r" * 1024) for _ in range(100)])
asyncio.run(main())
"""

SEND_ONCE_AND_SQL = """
import asyncio
from rocketcluster import ConsumeStatus, Message, MessageSelector, Producer, PushConsumer

async def main() -> None:
    # no retry and a short budget: a send that fails here fails because the broker was not ready
    async with Producer("ReadyProducer", retry_times_when_send_failed=0, send_msg_timeout=3) as producer:
        result = await producer.send(Message("ReadyTopic", b"first after running"))
    print(result.status.name)
    consumer = PushConsumer("ReadySqlGroup")
    consumer.subscribe("ReadyTopic", MessageSelector.by_sql("a IS NULL OR a > 5"))
    consumer.register_listener(lambda msgs: ConsumeStatus.CONSUME_SUCCESS)
    await consumer.start()  # the broker checks the SQL expression here (enablePropertyFilter)
    await consumer.shutdown()
    print("sql subscription accepted")
asyncio.run(main())
"""


def test_running_means_recovered_registered_and_serving(make_run: MakeRun) -> None:
    env = user_env(NAMESRV_ADDR=make_run.namesrv_addr)
    term = make_run.start()
    term.wait_output(RUNNING, 120)
    created = _mqadmin("updateTopic", "-c", "DefaultCluster", "-t", "ReadyTopic", env=env)
    assert created.returncode == 0, created.stderr
    filled = subprocess.run([sys.executable, "-c", PUT_MANY, "20000"], env=env, capture_output=True, timeout=300)
    assert filled.returncode == 0, filled.stderr.decode()

    # a crash: the broker restarts with an abort file and recovers its store behind an open port
    os.kill(make_run.server_pid("mqbroker"), signal.SIGKILL)
    term.wait_output("mqbroker was killed by SIGKILL", 30)
    term.ctrl_c()
    assert term.wait(120) == 0, term.output
    assert (make_run.data / "store" / "abort").exists()

    term = make_run.start()
    term.wait_output(RUNNING, 300)
    # "running" comes after the broker's "boot success", not when its port opens (that is before recovery)
    log = (make_run.data / "logs" / "broker.log").read_text()
    assert "boot success" in log[log.rindex("load config properties file OK") :], log[-3000:]
    sent = subprocess.run(
        [sys.executable, "-c", SEND_ONCE_AND_SQL], env=env, capture_output=True, text=True, timeout=120
    )
    assert sent.returncode == 0, sent.stderr
    assert sent.stdout.splitlines() == ["SEND_OK", "sql subscription accepted"]
    log = (make_run.data / "logs" / "broker.log").read_text()
    last_start = log.rindex("load config properties file OK")
    restart = log[last_start:]
    # recovery came first, then "boot success": the moment make run printed "running"
    assert "(after a crash)" in restart, restart[:3000]
    assert restart.index("store loaded") < restart.index("boot success")
    term.ctrl_c()
    assert term.wait(120) == 0, term.output
