"""The logs of real `mqbroker` / `mqnamesrv` processes, killed with SIGKILL and started again.

Their log file (logRoot) keeps the earlier runs' lines, rotates at logFileMaxSize keeping logFileMaxIndex
backups, and every line of it, the index helper's included, parses with one regex (text) or json.loads
(logFormat=json); the non-default config is logged once a start, and a secret never reaches the log.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.logs.formats import TEXT_LINE

BIN = Path(sys.executable).parent
START_TIMEOUT_S = 120.0
HANDED_OVER = "loaded 0 index files (handed over by the broker)"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Proc:
    """One server process: stdout read for the ready line, stderr (the console log) kept in a file."""

    def __init__(self, program: str, conf: Path, console: Path) -> None:
        self.console = console
        with console.open("ab") as err:
            self.proc = subprocess.Popen(
                [str(BIN / program), "-c", str(conf)], stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL
            )

    def wait_ready(self) -> str:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline().decode()
            if "boot success" in line:
                return line
            if not line and self.proc.poll() is not None:
                break
        raise AssertionError(f"no boot success (exit {self.proc.poll()}):\n{self.console.read_text()}")

    def kill(self, signum: int = signal.SIGKILL) -> None:
        self.proc.send_signal(signum)
        self.proc.wait(60)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for p in started:
        if p.proc.poll() is None:
            p.kill()


def wait_for(path: Path, text: str, count: int, timeout: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().count(text) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not {count} times in {path}:\n{path.read_text() if path.exists() else ''}")


def broker_conf(tmp: Path, **extra: str) -> Path:
    keys = {
        "brokerName": "logs-a",
        "listenPort": str(free_port()),
        "haListenPort": "0",
        "brokerIP1": "127.0.0.1",
        "bindAddress": "127.0.0.1",
        "storePathRootDir": str(tmp / "store"),
        # 128 MiB files (sparse): the size from which the index helper process runs
        "mappedFileSizeCommitLog": str(128 << 20),
        "logRoot": str(tmp / "logs"),
        **extra,
    }
    conf = tmp / "broker.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in keys.items()))
    return conf


def test_broker_log_survives_kill_9_in_one_format_with_its_helper_and_config_printed_once(
    tmp_path: Path, procs: list[Proc]
) -> None:
    conf = broker_conf(tmp_path, secretKey="hunter2-not-for-logs")
    log, console = tmp_path / "logs" / "broker.log", tmp_path / "console.txt"
    for run in (1, 2):
        broker = Proc("mqbroker", conf, console)
        procs.append(broker)
        broker.wait_ready()
        wait_for(log, HANDED_OVER, run)  # the index helper's line, relayed by the broker
        broker.kill(signal.SIGKILL if run == 1 else signal.SIGTERM)
    text = log.read_text()
    lines = text.splitlines()
    assert [line for line in lines if not TEXT_LINE.match(line)] == []
    console_lines = console.read_text().splitlines()
    assert console_lines and [line for line in console_lines if not TEXT_LINE.match(line)] == []
    # both runs are there, the killed one first
    assert text.count("boot success") == 2 and text.count("effective configuration,") == 2
    assert text.count("unknown broker config key 'secretKey'") == 2
    assert "hunter2" not in text and "hunter2" not in console.read_text()
    header = next(i for i, line in enumerate(lines) if "effective configuration," in line)
    printed = []
    for line in lines[header + 1 :]:
        match = TEXT_LINE.match(line)
        if match is None or not match["message"].startswith("| "):
            break
        printed.append(match["message"])
    assert "| brokerName=logs-a" in printed and f"| logRoot={tmp_path / 'logs'}" in printed
    assert printed == sorted(printed)
    # after the kill: the broker's recovery says abnormal, and nothing says "clean" about that exit
    second = text[text.index("boot success") :]
    assert "loaded 0 index files (last exit abnormal)" in second
    assert "last exit clean" not in second
    assert text.count(HANDED_OVER) == 2
    assert "shutdown ok" in lines[-1] or "shutdown ok" in text[text.rindex("boot success") :]


def test_json_log_rotates_at_the_size_keeping_n_backups(tmp_path: Path, procs: list[Proc]) -> None:
    conf = broker_conf(tmp_path, logFormat="json", logFileMaxSize="1024", logFileMaxIndex="2")
    logs, console = tmp_path / "logs", tmp_path / "console.txt"
    for run in (1, 2, 3):
        broker = Proc("mqbroker", conf, console)
        procs.append(broker)
        assert json.loads(broker.wait_ready())["message"].startswith("The broker[logs-a")  # stdout too
        # Read on the console, which is never rotated: in the 1 KiB file the line may already sit in a backup.
        wait_for(console, HANDED_OVER, run)
        broker.kill()
    assert sorted(p.name for p in logs.iterdir()) == ["broker.log", "broker.log.1", "broker.log.2"]
    for path in logs.iterdir():
        lines = path.read_text().splitlines()
        assert path.stat().st_size <= 1024 or len(lines) == 1, path
        for line in lines:
            entry = json.loads(line)
            assert {"time", "level", "logger", "message"} <= set(entry), line
    for line in console.read_text().splitlines():
        json.loads(line)


def test_nameserver_log_survives_kill_9_and_prints_its_config_once(tmp_path: Path, procs: list[Proc]) -> None:
    port = free_port()
    conf = tmp_path / "namesrv.properties"
    conf.write_text(
        f"listenPort={port}\nbindAddress=127.0.0.1\nkvConfigPath={tmp_path / 'kv.json'}\nlogRoot={tmp_path / 'logs'}\n"
    )
    log = tmp_path / "logs" / "namesrv.log"
    for signum in (signal.SIGKILL, signal.SIGTERM):
        namesrv = Proc("mqnamesrv", conf, tmp_path / "console.txt")
        procs.append(namesrv)
        assert namesrv.wait_ready().startswith("The Name Server boot success")
        wait_for(log, "boot success", len(procs))
        namesrv.kill(signum)
    lines = log.read_text().splitlines()
    assert [line for line in lines if not TEXT_LINE.match(line)] == []
    text = "\n".join(lines)
    assert text.count("effective configuration, 4 keys not at their default") == 2
    assert text.count(f"| listenPort={port}") == 2 and text.count("boot success") == 2
    assert "shutdown OK" in lines[-1]


@pytest.mark.parametrize(("program", "conf"), [("mqbroker", "broker.conf"), ("mqnamesrv", "namesrv.properties")])
def test_an_unknown_log_format_is_refused_naming_the_key(tmp_path: Path, program: str, conf: str) -> None:
    path = tmp_path / conf
    path.write_text(f"listenPort=0\nlogFormat=xml\nlogRoot={tmp_path / 'logs'}\n")
    result = subprocess.run(
        [str(BIN / program), "-c", str(path)], capture_output=True, text=True, timeout=60, env=dict(os.environ)
    )
    assert result.returncode == 1
    assert "logFormat" in result.stderr and "'xml'" in result.stderr and "text" in result.stderr
    assert not (tmp_path / "logs").exists()
