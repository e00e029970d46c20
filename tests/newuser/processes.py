"""Real `mqnamesrv` and `mqbroker` processes on loopback, as a user starts them, each with its own files.

`await Servers(tmp_path).namesrv()` / `.broker(name, **broker_conf)` start the console scripts with a
properties file under the test's tmp dir, wait for the line the process prints once it is ready ("boot
success"), and `close()` ends whatever is still running. A broker's store is small (16 MiB CommitLog files,
a small IndexFile) unless the test says otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.newuser.user_harness import BIN, user_env

__all__ = ["Server", "Servers", "free_port"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Server:
    name: str
    argv: list[str]
    log: Path
    port: int
    proc: asyncio.subprocess.Process | None = None
    ready_text: str = "boot success"

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self, timeout: float = 60.0) -> None:
        with self.log.open("ab") as out:
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv, stdout=out, stderr=asyncio.subprocess.STDOUT, env=user_env()
            )
        await self.wait_log(self.ready_text, timeout, start=self._log_size_at_start())

    def _log_size_at_start(self) -> int:
        # a restart appends to the same log: only lines after this point count
        text = self.log.read_text(errors="replace")
        return text.rfind(self.ready_text) + 1 if self.ready_text in text else 0

    async def wait_log(self, text: str, timeout: float = 60.0, start: int = 0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            content = self.log.read_text(errors="replace")
            if text in content[start:]:
                return content
            if self.proc is not None and self.proc.returncode is not None:
                raise AssertionError(f"{self.name} exited {self.proc.returncode} before logging {text!r}:\n{content}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name} did not log {text!r} in {timeout} s:\n{content[-3000:]}")
            await asyncio.sleep(0.05)

    def signal(self, signum: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(signum)

    async def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        await self.proc.wait()

    async def stop(self) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGCONT)  # a test may have stopped it
            self.proc.terminate()
        try:
            await asyncio.wait_for(self.proc.wait(), 30)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()


SMALL_STORE = {
    "mappedFileSizeCommitLog": str(16 << 20),
    "maxHashSlotNum": "20000",
    "maxIndexNum": "80000",
    "registerNameServerPeriod": "1000",
}


@dataclass
class Servers:
    root: Path
    started: list[Server] = field(default_factory=list)

    async def namesrv(self) -> Server:
        port = free_port()
        conf = self.root / f"namesrv-{port}.properties"
        conf.write_text(f"listenPort={port}\nbindAddress=127.0.0.1\nkvConfigPath={self.root / 'kv.json'}\n")
        server = Server("mqnamesrv", [str(BIN / "mqnamesrv"), "-c", str(conf)], self.root / f"namesrv-{port}.log", port)
        return await self._start(server)

    def broker_server(self, name: str, namesrv_addr: str, port: int | None = None, **conf: str) -> Server:
        port = port or free_port()
        props = {
            "brokerClusterName": "UserCluster",
            "brokerName": name,
            "listenPort": str(port),
            "haListenPort": "0",
            "brokerIP1": "127.0.0.1",
            "bindAddress": "127.0.0.1",
            "namesrvAddr": namesrv_addr,
            "storePathRootDir": str(self.root / name / "store"),
            "autoCreateTopicEnable": "true",
            **SMALL_STORE,
            **conf,
        }
        path = self.root / f"{name}.conf"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return Server(name, [str(BIN / "mqbroker"), "-c", str(path)], self.root / f"{name}.log", port)

    async def broker(self, name: str, namesrv_addr: str, **conf: str) -> Server:
        return await self._start(self.broker_server(name, namesrv_addr, **conf))

    async def _start(self, server: Server) -> Server:
        self.started.append(server)
        await server.start()
        return server

    async def close(self) -> None:
        for server in reversed(self.started):
            await server.stop()
