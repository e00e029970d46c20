"""The two brokers of bench/vs_rocketmq.py as processes: a NameServer, a master and (SYNC_MASTER) a slave,
either ours (bench.cluster.server_command) or Apache RocketMQ's from the jars scripts/reference-rocketmq.sh
fetched, each from the same broker.conf keys (bench.vs_table.broker_props) on free loopback ports.

With `grpc` (bench/vs_grpc.py) the master serves RocketMQ 5's gRPC API too: ours with `enableProxy=true` and
`grpcServerPort`, Apache's as its proxy in local mode (`ProxyStartup -pm local`, the broker inside the proxy's JVM,
from the jars `scripts/reference-rocketmq.sh VERSION grpc` put in proxy-lib).

"Ready" is the same test for both: the broker answers GET_BROKER_CONFIG on its port and its NameServer
lists it in GET_BROKER_CLUSTER_INFO (with `grpc`, and the gRPC port accepts connections), timed from just before
the process is spawned. (Not
GET_BROKER_RUNTIME_INFO: Apache RocketMQ fails it until its store statistics have a first sample, ~1 s.)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from bench.cluster import server_command
from bench.proc import rss_mib
from bench.vs_table import broker_props, conf_text, grpc_props, namesrv_props, proxy_config
from broker.protocol.codes import RequestCode
from broker.protocol.command import RemotingCommand
from broker.protocol.signature import Credentials, sign_command
from broker.transport.client import connect
from broker.transport.loop import run

__all__ = ["KINDS", "Cluster", "ensure_reference", "reference_dir"]

REPO = Path(__file__).resolve().parent.parent
KINDS = ("ours", "reference")
CACHE = Path(os.environ.get("ROCKETCLUSTER_REFERENCE_DIR", Path.home() / ".cache" / "rocketcluster"))
#: The reference broker's JVM: the brief's 1 GiB heap. Java 17 needs no --add-opens for what we run:
#: both servers boot, take sends, batches and pulls, recover after kill -9 and shut down with none
#: (their logs show no InaccessibleObjectException; RocketMQ 5.x unmaps through Unsafe.invokeCleaner).
REFERENCE_JVM = ["-Xms1g", "-Xmx1g"]
NAMESRV_MAIN = "org.apache.rocketmq.namesrv.NamesrvStartup"
BROKER_MAIN = "org.apache.rocketmq.broker.BrokerStartup"
PROXY_MAIN = "org.apache.rocketmq.proxy.ProxyStartup"


def reference_dir(version: str) -> Path:
    return CACHE / f"apache-rocketmq-{version}"


def ensure_reference(version: str, grpc: bool = False) -> Path:
    """scripts/reference-rocketmq.sh VERSION [grpc] (a no-op once done): the jars and the compiled LoadGen
    (with `grpc`, also the proxy's jars and GrpcLoadGen)."""
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "reference-rocketmq.sh"), version, *(["grpc"] if grpc else [])],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"scripts/reference-rocketmq.sh {version} failed:\n{proc.stderr[-2000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


def free_block(size: int) -> int:
    """The first of `size` consecutive free loopback ports (a broker uses listenPort - 2 .. + 1)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = int(s.getsockname()[1])
        if base + size > 65000:
            continue
        try:
            for port in range(base + 1, base + size):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise SystemExit("no block of free ports")


@dataclass
class Server:
    """One server process; its output goes to `log`."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    started: float

    def alive(self) -> bool:
        return self.proc.poll() is None

    def rss(self) -> tuple[float, float, float]:
        """(VmRSS, own memory: RssAnon + RssShmem, PSS) in MiB, helper processes included."""
        m = rss_mib(self.proc.pid)
        return (
            m["VmRSS"] + m["children"],
            m["RssAnon"] + m["RssShmem"] + m["children_own"],
            m["Pss"] + m["children_pss"],
        )

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.alive():
            self.proc.send_signal(sig)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def tail(self) -> str:
        lines = self.log.read_text(errors="replace").splitlines()
        return "\n".join(line for line in lines if "|-INFO" not in line and "|-WARN" not in line)[-3000:]


async def _answers(addr: str, code: int, needle: bytes = b"", credentials: Credentials | None = None) -> bool:
    try:
        conn = await connect(addr, timeout=1.0)
    except Exception:  # ConnectError: not listening yet
        return False
    try:
        cmd = RemotingCommand(code=code)
        if credentials is not None:
            sign_command(cmd, credentials)
        resp = await conn.invoke(cmd, 2.0)
        return resp.code == 0 and needle in (resp.body or b"")
    except Exception:
        return False
    finally:
        conn.close()


async def _until_ready(
    server: Server, addr: str, namesrv: str, timeout: float, credentials: Credentials | None = None
) -> float:
    while True:
        if await _answers(addr, RequestCode.GET_BROKER_CONFIG, credentials=credentials) and await _answers(
            namesrv, RequestCode.GET_BROKER_CLUSTER_INFO, addr.encode()
        ):
            return time.monotonic() - server.started
        if not server.alive():
            raise RuntimeError(f"{server.name} exited with {server.proc.returncode}:\n{server.tail()}")
        if time.monotonic() - server.started > timeout:
            raise RuntimeError(f"{server.name} not ready after {timeout:.0f} s:\n{server.tail()}")
        await asyncio.sleep(0.05)


async def _until_listening(server: Server, port: int, timeout: float) -> None:
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            if not server.alive():
                raise RuntimeError(f"{server.name} exited with {server.proc.returncode}:\n{server.tail()}") from None
            if time.monotonic() - server.started > timeout:
                raise RuntimeError(f"{server.name}: nothing on gRPC port {port} after {timeout:.0f} s") from None
            await asyncio.sleep(0.05)
            continue
        writer.close()
        return


async def _until_gone(addr: str, namesrv: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and await _answers(namesrv, RequestCode.GET_BROKER_CLUSTER_INFO, addr.encode()):
        await asyncio.sleep(0.05)


def runtime_info(addr: str) -> dict[str, str]:
    """The broker's GET_BROKER_RUNTIME_INFO table ({} when it does not answer)."""

    async def ask() -> dict[str, str]:
        conn = await connect(addr)
        try:
            resp = await conn.invoke(RemotingCommand(code=RequestCode.GET_BROKER_RUNTIME_INFO), 5.0)
            table: dict[str, str] = orjson.loads(resp.body or b"{}").get("table", {})
            return table
        finally:
            conn.close()

    try:
        return run(ask())
    except Exception:
        return {}


@dataclass
class Cluster:
    """A NameServer and a master (+ a slave for SYNC_MASTER) of one kind, under `root`."""

    kind: str
    root: Path
    reference: Path  # the version directory of scripts/reference-rocketmq.sh (its jars)
    flush: str = "ASYNC_FLUSH"
    role: str = "ASYNC_MASTER"
    grpc: bool = False
    #: broker.conf keys on top of bench.vs_table.broker_props (bench/vs_auth.py: authentication on)
    extra: dict[str, object] = field(default_factory=dict)
    #: a SUPER user's, when `extra` turns authentication on: the readiness probe signs with them
    credentials: Credentials | None = None
    servers: dict[str, Server] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.ports['namesrv']}"

    def addr(self, name: str = "master") -> str:
        return f"127.0.0.1:{self.ports[name]}"

    @property
    def grpc_endpoint(self) -> str:
        return f"127.0.0.1:{self.ports['grpc']}"

    def _spawn(self, name: str, java_main: str, conf: Path, java_args: list[str] | None = None) -> Server:
        home = self.root / f"home-{name}"
        (home / "conf").mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "NAMESRV_ADDR": "", "HOME": str(home)}
        if self.kind == "reference":
            # ROCKETMQ_HOME must be set; nothing under it is read (the logging setup is in the jars).
            shutil.copy(conf, home / "conf" / conf.name)
            env["ROCKETMQ_HOME"] = str(home)
            java = shutil.which("java") or "java"
            lib = self.reference / ("proxy-lib" if java_main == PROXY_MAIN else "lib")
            cmd = [java, *REFERENCE_JVM, f"-Duser.home={home}", "-cp", f"{lib}/*", java_main]
            cmd += ["-c", str(conf)] if java_args is None else java_args
        else:
            cmd = server_command("mqnamesrv" if java_main == NAMESRV_MAIN else "mqbroker", conf)
        log = self.root / f"{name}.log"
        started = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env, cwd=home)
        server = Server(f"{self.kind} {name}", proc, log, started)
        self.servers[name] = server
        return server

    def start(self, timeout: float = 120.0) -> float:
        """Start every server; the master's start-to-ready time in seconds."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.ports["namesrv"] = free_block(1)
        conf = self.root / "namesrv.properties"
        conf.write_text(conf_text(namesrv_props(self.ports["namesrv"], self.root / "namesrv")))
        ns = self._spawn("namesrv", NAMESRV_MAIN, conf)
        while "boot success" not in ns.log.read_text(errors="replace"):
            if not ns.alive() or time.monotonic() - ns.started > timeout:
                raise RuntimeError(f"{ns.name} did not start:\n{ns.tail()}")
            time.sleep(0.02)
        ready = self.start_broker("master", timeout)
        if self.role == "SYNC_MASTER":
            self.start_broker("slave", timeout)
        return ready

    def start_broker(self, name: str, timeout: float = 120.0) -> float:
        if name not in self.ports:
            self.ports[name] = free_block(4) + 2  # listenPort - 2 (Java's fast channel) .. + 1 (HA)
        props = broker_props(
            root=self.root / name,
            listen_port=self.ports[name],
            namesrv=self.namesrv,
            flush=self.flush,
            role="SLAVE" if name == "slave" else self.role,
        )
        props.update(self.extra)
        grpc = self.grpc and name == "master"
        if grpc:
            self.ports.setdefault("grpc", free_block(1))
            props.update(grpc_props(self.ports["grpc"]))
        conf = self.root / f"{name}.conf"
        conf.write_text(conf_text(props))
        if grpc and self.kind == "reference":
            self.ports.setdefault("proxy_remoting", free_block(1))
            pconf = self.root / "rmq-proxy.json"
            pconf.write_bytes(
                orjson.dumps(
                    proxy_config(
                        grpc_port=self.ports["grpc"], remoting_port=self.ports["proxy_remoting"], namesrv=self.namesrv
                    )
                )
            )
            server = self._spawn(name, PROXY_MAIN, conf, ["-pm", "local", "-bc", str(conf), "-pc", str(pconf)])
        else:
            server = self._spawn(name, BROKER_MAIN, conf)
        ready = run(_until_ready(server, self.addr(name), self.namesrv, timeout, self.credentials))
        if grpc:
            run(_until_listening(server, self.ports["grpc"], timeout))
            ready = time.monotonic() - server.started
        return ready

    def kill_and_restart(self, timeout: float = 600.0) -> float:
        """kill -9 the master, wait until its NameServer has dropped it, start it again on the same store:
        the seconds from the new process's start to ready."""
        self.servers["master"].stop(signal.SIGKILL)
        run(_until_gone(self.addr(), self.namesrv, 30.0))
        return self.start_broker("master", timeout)

    def rss(self) -> tuple[float, float, float]:
        """NameServer + master: (VmRSS, own memory, PSS) in MiB."""
        parts = [self.servers[name].rss() for name in ("namesrv", "master")]
        return sum(p[0] for p in parts), sum(p[1] for p in parts), sum(p[2] for p in parts)

    def stop(self) -> None:
        for name in ("slave", "master", "namesrv"):
            if name in self.servers:
                with contextlib.suppress(Exception):
                    self.servers[name].stop()
