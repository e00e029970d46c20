"""`make run`'s supervisor (started by scripts/run-local.sh): a NameServer and a broker on 127.0.0.1, in the
foreground, until Ctrl-C.

- "running" is printed once the broker has recovered its store, serves requests and is registered with the
  NameServer: mqbroker's "boot success" line, then `rocketcluster-probe broker` (a port that accepts
  connections is not enough: after a crash the store recovers behind an open port).
- One process that dies (kill -9, a crash) is reported with its log's last lines; the other keeps running.
- Ctrl-C stops the broker (it unregisters and flushes), then the NameServer, and exits 0. When `make` started
  us we take the terminal's foreground for our own process group, so Ctrl-C reaches only us and make does not
  report a graceful stop as "Error 130"; the terminal goes back to make's group on the way out.

The servers run in their own sessions, so the terminal's signals reach them only as our TERM (a second
signal would make them skip the graceful part). Settings, from the environment (tests use them):
RUN_DATA_DIR (.data), RUN_NAMESRV_PORT (9876), RUN_BROKER_PORT (10911), RUN_HA_PORT (broker port + 1;
0 = any free port), RUN_NAMESRV_CONF and RUN_BROKER_CONF (the config files to start from:
conf/namesrv.properties and conf/broker.conf). The files the servers read are written under the data dir
with these settings appended (later keys win).

Logs: each server writes its own, size-rotated, under <data dir>/logs (logRoot; namesrv.log, broker.log and
their .1 ... backups), appending, so a restart or a crash leaves the earlier runs' lines there. Their
console (stdout and stderr) comes to us through a pipe: we look for the ready line in it, keep its last
lines for a crash report, and show the warnings and errors of the start (an unknown config key) here.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from broker.logs.formats import TEXT_LINE

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
READY_LINE = "boot success"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# Recovery of a large store after a crash takes a while; a broker that logs nothing for this long is stuck.
START_TIMEOUT_S = 300.0
CONSOLE_LINES = 5000  # of a server's console kept for the ready line and crash reports (its log file has all)
LOUD_LEVELS = ("WARNING", "ERROR", "CRITICAL")


@dataclass(frozen=True)
class Settings:
    data: Path
    namesrv_port: int
    broker_port: int
    ha_port: int
    namesrv_conf: Path = REPO / "conf" / "namesrv.properties"
    broker_conf: Path = REPO / "conf" / "broker.conf"

    @classmethod
    def from_env(cls) -> Settings:
        data = Path(os.environ.get("RUN_DATA_DIR") or REPO / ".data").resolve()
        broker_port = int(os.environ.get("RUN_BROKER_PORT") or 10911)
        return cls(
            data=data,
            namesrv_port=int(os.environ.get("RUN_NAMESRV_PORT") or 9876),
            broker_port=broker_port,
            ha_port=int(os.environ.get("RUN_HA_PORT") or broker_port + 1),
            namesrv_conf=Path(os.environ.get("RUN_NAMESRV_CONF") or REPO / "conf" / "namesrv.properties"),
            broker_conf=Path(os.environ.get("RUN_BROKER_CONF") or REPO / "conf" / "broker.conf"),
        )

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.broker_port}"


def effective_conf(source: Path, dest: Path, overrides: dict[str, str]) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    lines = [source.read_text(), "", f"# Appended by scripts/run_local.py (later keys win); edit {source} instead"]
    lines += [f"{key}={value}" for key, value in overrides.items()]
    dest.write_text("\n".join(lines) + "\n")
    return dest


def port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def exit_description(code: int) -> str:
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with status {code}"


def is_loud(line: str) -> bool:
    """A console line to show on our terminal while starting: a warning or error (text or JSON format), or
    a line that is no log record at all (a traceback of a crash before logging started)."""
    match = TEXT_LINE.match(line)
    if match is not None:
        return match["level"] in LOUD_LEVELS
    if line.startswith("{"):
        with contextlib.suppress(ValueError, AttributeError):
            return json.loads(line).get("level") in LOUD_LEVELS
    return READY_LINE not in line


@dataclass
class Server:
    name: str
    argv: list[str]
    log: Path  # the file the server writes itself (logRoot in its config)
    proc: subprocess.Popen[bytes] | None = None
    reported: bool = False
    echo: bool = True  # show the loud console lines on our terminal (while starting)
    _console: deque[str] = field(default_factory=lambda: deque(maxlen=CONSOLE_LINES), repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _reader: threading.Thread | None = field(default=None, repr=False)

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            self.argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        assert self.proc.stdout is not None
        # drained all the time: a full pipe would stop the server at its next log line
        self._reader = threading.Thread(
            target=self._read, args=(self.proc.stdout,), name=f"{self.name}-console", daemon=True
        )
        self._reader.start()

    def _read(self, stream: IO[bytes]) -> None:
        with stream:
            for raw in iter(stream.readline, b""):
                line = raw.decode(errors="replace").rstrip("\n")
                with self._lock:
                    self._console.append(line)
                if self.echo and is_loud(line):
                    print(f"{self.name}: {line}", file=sys.stderr, flush=True)

    def console(self) -> list[str]:
        with self._lock:
            return list(self._console)

    def tail(self, lines: int = 8) -> str:
        if self.exit_code is not None and self._reader is not None:
            self._reader.join(1.0)  # the last lines of a process that just exited
        return "\n".join("    " + line for line in self.console()[-lines:])

    @property
    def exit_code(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def wait_for_line(self, text: str, timeout: float, progress: str | None = None) -> None:
        deadline = time.monotonic() + timeout
        told = False
        started = time.monotonic()
        while not any(text in line for line in self.console()):
            Stop.check()
            code = self.exit_code
            if code is not None:
                raise StartFailed(
                    f"{self.name} {exit_description(code)} while starting. The end of {self.log}:\n{self.tail()}"
                )
            if progress and not told and time.monotonic() - started > 2.0:
                print(progress, flush=True)
                told = True
            if time.monotonic() > deadline:
                raise StartFailed(f"{self.name} did not start within {timeout:.0f} s; see {self.log}")
            time.sleep(0.05)

    def stop(self, timeout: float = 60.0) -> int | None:
        """TERM and wait (the broker flushes and unregisters); KILL only when it overstays `timeout`."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                print(f"{self.name} did not stop within {timeout:.0f} s of SIGTERM; killing it", flush=True)
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


class StartFailed(Exception):
    pass


class Stop:
    """The first stop signal asks for a graceful stop; checked by every wait loop."""

    signal: int | None = None

    @classmethod
    def install(cls) -> None:
        for signum in STOP_SIGNALS:
            signal.signal(signum, cls._handle)

    @classmethod
    def _handle(cls, signum: int, _frame: object) -> None:
        cls.signal = cls.signal or signum

    @classmethod
    def check(cls) -> None:
        if cls.signal is not None:
            raise StartFailed(f"{signal.Signals(cls.signal).name} while starting: stopping")


def _set_foreground(fd: int, pgrp: int) -> None:
    # a background group that sets the terminal's foreground gets SIGTTOU; here we mean to
    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        os.tcsetpgrp(fd, pgrp)
    finally:
        signal.signal(signal.SIGTTOU, previous)


@contextlib.contextmanager
def terminal_foreground() -> Iterator[None]:
    """Make our process group the terminal's foreground while we run, when we share it with `make`.

    Ctrl-C's SIGINT then reaches only us: make, left in the background group, is not interrupted, so it neither
    kills us early nor prints "Error 130" for a graceful stop."""
    fd = sys.stdin.fileno() if sys.stdin is not None and sys.stdin.isatty() else -1
    if fd < 0 or os.getpgrp() == os.getpid():
        yield  # no terminal, or a shell's job control already gave us our own group
        return
    original = os.tcgetpgrp(fd)
    try:
        os.setpgid(0, 0)
        _set_foreground(fd, os.getpgrp())
    except OSError:
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            _set_foreground(fd, original)


def wait_registered(settings: Settings, broker: Server, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    probe = [str(BIN / "rocketcluster-probe"), "broker", "--addr", settings.broker_addr]
    while True:
        Stop.check()
        result = subprocess.run(probe, capture_output=True, text=True, check=False)
        if result.returncode == 0:
            return
        if broker.exit_code is not None:
            raise StartFailed(
                f"mqbroker {exit_description(broker.exit_code)}. The end of {broker.log}:\n{broker.tail()}"
            )
        if time.monotonic() > deadline:
            raise StartFailed(f"the broker is up but not ready after {timeout:.0f} s: {result.stdout.strip()}")
        time.sleep(0.2)


def banner(settings: Settings, logs: Path) -> str:
    ns = settings.namesrv_addr
    where = f"NameServer {ns}, broker broker-a {settings.broker_addr}, data in {settings.data / 'store'}"
    return f"""RocketCluster is running: {where}
Logs: {logs / "namesrv.log"}, {logs / "broker.log"}

Send and receive a message from another shell:
  export NAMESRV_ADDR={ns}
  .venv/bin/mqadmin sendMessage -t TopicTest -p "hello rocketcluster" -c TagA -k key1
  .venv/bin/mqadmin consumeMessage -t TopicTest -c 1
  .venv/bin/mqadmin clusterList

Ctrl-C stops both."""


def supervise(servers: list[Server]) -> None:
    """Until a stop signal: report a server that exits; return when one arrives or nothing is left."""
    while True:
        if Stop.signal is not None:
            print(f"\n{signal.Signals(Stop.signal).name}: stopping the broker, then the NameServer", flush=True)
            return
        for server in servers:
            code = server.exit_code
            if code is not None and not server.reported:
                server.reported = True
                others = [s.name for s in servers if s.exit_code is None]
                still = f"; {', '.join(others)} keeps running (Ctrl-C stops it)" if others else ""
                print(
                    f"{server.name} {exit_description(code)}{still}. The end of {server.log}:\n{server.tail()}",
                    file=sys.stderr,
                    flush=True,
                )
        if all(s.exit_code is not None for s in servers):
            return
        time.sleep(0.1)


def main() -> int:
    settings = Settings.from_env()
    logs = settings.data / "logs"
    ports = [settings.namesrv_port, settings.broker_port] + ([settings.ha_port] if settings.ha_port else [])
    for port in ports:
        if port_in_use(port):
            print(
                f"port {port} on 127.0.0.1 is already in use (another NameServer or broker running?); stop it first",
                file=sys.stderr,
            )
            return 1
    namesrv_conf = effective_conf(
        settings.namesrv_conf,
        settings.data / "conf" / "namesrv.properties",
        {
            "listenPort": str(settings.namesrv_port),
            "kvConfigPath": str(settings.data / "namesrv" / "kvConfig.json"),
            "logRoot": str(logs),
        },
    )
    broker_conf = effective_conf(
        settings.broker_conf,
        settings.data / "conf" / "broker.conf",
        {
            "listenPort": str(settings.broker_port),
            "haListenPort": str(settings.ha_port),
            "namesrvAddr": settings.namesrv_addr,
            "storePathRootDir": str(settings.data / "store"),
            "logRoot": str(logs),
        },
    )
    namesrv = Server("mqnamesrv", [str(BIN / "mqnamesrv"), "-c", str(namesrv_conf)], logs / "namesrv.log")
    broker = Server("mqbroker", [str(BIN / "mqbroker"), "-c", str(broker_conf)], logs / "broker.log")
    servers = [namesrv, broker]
    Stop.install()
    with terminal_foreground():
        try:
            namesrv.start()
            namesrv.wait_for_line(READY_LINE, START_TIMEOUT_S)
            broker.start()
            broker.wait_for_line(
                READY_LINE, START_TIMEOUT_S, progress="waiting for the broker: it is recovering its store..."
            )
            wait_registered(settings, broker)
        except StartFailed as exc:
            print(exc, file=sys.stderr, flush=True)
            clean = stop_all(servers)
            return 0 if Stop.signal is not None and clean else 1
        for server in servers:
            server.echo = False  # from here on the log files have it all; the terminal stays quiet
        print(banner(settings, logs), flush=True)
        supervise(servers)
        if Stop.signal is None:
            print("both servers have exited", file=sys.stderr)
            return 1
        clean = stop_all(servers)
    return 0 if clean else 1


def stop_all(servers: list[Server]) -> bool:
    """Broker first, so it can still unregister from the NameServer; True when every stop was graceful."""
    clean = True
    for server in reversed(servers):
        if server.exit_code is not None:
            continue  # already gone (and reported)
        code = server.stop()
        if code not in (0, None):
            clean = False
            print(f"{server.name} {exit_description(code)} while stopping; see {server.log}", file=sys.stderr)
        else:
            print(f"{server.name} stopped", flush=True)
    return clean


if __name__ == "__main__":
    sys.exit(main())
