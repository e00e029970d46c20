"""Harness for the HA fault tests: real `mqnamesrv` / `mqbroker -c conf` processes, each broker host in
its own network namespace, so that a link can be cut with iptables inside a namespace.

Topology (created by `NetLab.setup()`, removed by `teardown()`): a hub namespace holds a bridge; the
test process's (root) namespace and one namespace per broker host hang off it with veth pairs, all in
one /24 (root .1, hosts .2, .3 ...). The NameServer and the SDK clients run in the root namespace.
Needs root with `ip` and `iptables` (scripts/system-deps.sh installs them). Without them
`NetLab.loopback()` runs every host on 127.0.0.1 with distinct ports instead: the kill and fail-over
scenario still runs, the link-cut one skips (it needs a namespace to cut in). Test modules import it as
`tests.ha.netns_harness`.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from broker.protocol.codes import RequestCode
from broker.protocol.command import RemotingCommand
from broker.transport.client import connect
from broker.transport.connection import RemotingConnection
from tests.local_cluster import SMALL_INDEX

BIN = Path(sys.executable).parent  # the venv's bin: mqnamesrv and mqbroker live next to python
FILE_SIZE = 1 << 20
LAB_PREFIX = "ha"  # a lab's namespaces and root veth are named ha<pid of the test process><host>
_SETUP_LOCK = Path(tempfile.gettempdir()) / "rocketcluster-netlab.lock"
_LAB_NAME = re.compile(rf"^{LAB_PREFIX}(\d+)(\w+?)(?:@\S+)?$")


def _sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), check=check, capture_output=True, text=True, timeout=30)


@dataclass
class NetLab:
    hosts: list[str]
    prefix: str = field(default_factory=lambda: f"{LAB_PREFIX}{os.getpid()}")
    ips: dict[str, str] = field(default_factory=dict)
    root_ip: str = ""
    _made: list[str] = field(default_factory=list)
    on_loopback: bool = False

    @classmethod
    def loopback(cls, hosts: list[str]) -> NetLab:
        """The fallback: no namespaces, every host on 127.0.0.1 (ports are shifted per host)."""
        lab = cls(hosts=hosts, on_loopback=True, root_ip="127.0.0.1")
        lab.ips = {h: "127.0.0.1" for h in hosts}
        return lab

    def port(self, host: str, port: int) -> int:
        """The listen port of `port` on `host` (shifted on loopback, where hosts share one stack)."""
        return port + 100 * self.hosts.index(host) if self.on_loopback else port

    def netns(self, host: str) -> str | None:
        return None if self.on_loopback else self.ns(host)

    @staticmethod
    def available() -> str | None:
        """None when namespaces can be built here, else why not (RC_HA_LOOPBACK=1 forces the fallback)."""
        if os.environ.get("RC_HA_LOOPBACK"):
            return "RC_HA_LOOPBACK is set"
        if os.geteuid() != 0:
            return "network namespaces need root"
        for tool in ("ip", "iptables"):
            if _sh("sh", "-c", f"command -v {tool}", check=False).returncode != 0:
                return f"{tool} is missing (run scripts/system-deps.sh)"
        probe = f"hap{os.getpid() % 100000}"
        made = _sh("ip", "netns", "add", probe, check=False)
        if made.returncode != 0:
            return f"ip netns add failed: {made.stderr.strip()}"
        _sh("ip", "netns", "del", probe, check=False)
        return None

    def ns(self, host: str) -> str:
        return f"{self.prefix}{host}"

    def setup(self) -> None:
        # Labs of parallel test workers pick their subnets one at a time: a subnet counts as taken only once
        # its root veth holds the .1 address.
        with open(_SETUP_LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            sweep_stale_labs()
            subnet = free_subnet()
            hub = self.ns("hub")
            self._add_ns(hub)
            _sh("ip", "netns", "exec", hub, "ip", "link", "add", "br0", "type", "bridge")
            _sh("ip", "netns", "exec", hub, "ip", "link", "set", "br0", "up")
            self.root_ip = f"{subnet}.1"
            self._veth(f"{self.prefix}r", None, self.root_ip)
        for i, host in enumerate(self.hosts, start=2):
            self._add_ns(self.ns(host))
            self.ips[host] = f"{subnet}.{i}"
            self._veth(f"{self.prefix}{host}", self.ns(host), self.ips[host])

    def _add_ns(self, name: str) -> None:
        _sh("ip", "netns", "del", name, check=False)  # a leftover of an interrupted run
        _sh("ip", "netns", "add", name)
        self._made.append(name)
        _sh("ip", "netns", "exec", name, "ip", "link", "set", "lo", "up")

    def _veth(self, name: str, ns: str | None, ip: str) -> None:
        """A veth pair: `name` (in `ns`, or the root namespace) with `ip`, its peer on the hub bridge."""
        hub = self.ns("hub")
        peer = f"{name}h"
        _sh("ip", "link", "del", name, check=False)
        _sh("ip", "link", "add", name, "type", "veth", "peer", "name", peer)
        _sh("ip", "link", "set", peer, "netns", hub)
        _sh("ip", "netns", "exec", hub, "ip", "link", "set", peer, "master", "br0", "up")
        run = ["ip"] if ns is None else ["ip", "netns", "exec", ns, "ip"]
        if ns is not None:
            _sh("ip", "link", "set", name, "netns", ns)
        _sh(*run, "addr", "add", f"{ip}/24", "dev", name)
        _sh(*run, "link", "set", name, "up")

    def _iptables(self, host: str, op: str, other_ip: str) -> None:
        ns = self.ns(host)
        _sh("ip", "netns", "exec", ns, "iptables", op, "INPUT", "-s", other_ip, "-j", "DROP")
        _sh("ip", "netns", "exec", ns, "iptables", op, "OUTPUT", "-d", other_ip, "-j", "DROP")

    def cut(self, host: str, other: str) -> None:
        """Drop every packet between two hosts (inside `host`'s namespace); others still reach both."""
        assert not self.on_loopback, "cutting a link needs network namespaces"
        self._iptables(host, "-I", self.ips[other])

    def heal(self, host: str, other: str) -> None:
        self._iptables(host, "-D", self.ips[other])

    def teardown(self) -> None:
        if self.on_loopback:
            return
        for name in reversed(self._made):
            _sh("ip", "netns", "del", name, check=False)  # deleting a namespace deletes its veth ends
        _sh("ip", "link", "del", f"{self.prefix}r", check=False)
        self._made.clear()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale_labs() -> None:
    """Remove the namespaces and root veths of labs whose test process is gone (killed before teardown).

    A leftover root veth keeps its /24 route: a new lab on the same subnet would send its packets into
    the dead lab's bridge, and its brokers would look unreachable.
    """
    names = _sh("ip", "netns", "list", check=False).stdout.split()
    links = [line.split()[0] for line in _sh("ip", "-br", "link", check=False).stdout.splitlines() if line]
    for name in names:
        m = _LAB_NAME.match(name)
        if m and not _pid_alive(int(m.group(1))):
            _sh("ip", "netns", "del", name, check=False)
    for link in links:
        m = _LAB_NAME.match(link)
        if m and m.group(2) == "r" and not _pid_alive(int(m.group(1))):
            _sh("ip", "link", "del", link.split("@")[0], check=False)


def free_subnet() -> str:
    """A 10.213.X /24 that no interface of the root namespace uses."""
    used = _sh("ip", "-4", "-o", "addr", check=False).stdout
    for x in range(1, 255):
        if f" 10.213.{x}." not in used:
            return f"10.213.{x}"
    raise RuntimeError("every 10.213.X/24 subnet is taken: remove the stale ha* interfaces")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return int(s.getsockname()[1])


class Proc:
    """One real process (optionally inside a namespace) with its log file."""

    def __init__(self, name: str, argv: list[str], log_path: Path, netns: str | None = None) -> None:
        self.name = name
        self.argv = (["ip", "netns", "exec", netns] if netns else []) + argv
        self.log_path = log_path
        self.popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115 (the child owns it while it runs)
        # `ip netns exec` execs the command: the pid is the server's own, so kill -9 hits it directly
        self.popen = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()

    def kill9(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            os.kill(self.popen.pid, signal.SIGKILL)
            self.popen.wait(10)

    def stop(self, timeout: float = 15.0) -> None:
        if self.popen is None or self.popen.poll() is not None:
            return
        os.kill(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill9()

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def broker_conf(path: Path, **props: Any) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


class Brokers:
    """Starts the NameServer and brokers as processes; stops whatever is left at the end."""

    def __init__(self, lab: NetLab, root: Path) -> None:
        self.lab = lab
        self.root = root
        self.procs: list[Proc] = []
        self.namesrv_port = 0

    @property
    def namesrv_addr(self) -> str:
        return f"{self.lab.root_ip}:{self.namesrv_port}"

    def start_namesrv(self) -> Proc:
        self.namesrv_port = free_port()
        conf = broker_conf(self.root / "namesrv.conf", listenPort=self.namesrv_port, kvConfigPath=self.root / "kv.json")
        p = Proc("namesrv", [str(BIN / "mqnamesrv"), "-c", str(conf)], self.root / "namesrv.log")
        p.start()
        self.procs.append(p)
        return p

    def broker(self, host: str, name: str, broker_id: int, role: str, port: int, **extra: Any) -> tuple[Proc, str]:
        """A broker process (not started) in `host`'s namespace; returns it and its address."""
        ip = self.lab.ips[host]
        port = self.lab.port(host, port)
        store = self.root / f"{name}-{broker_id}"
        props: dict[str, Any] = {
            "brokerClusterName": "HAFault",
            "brokerName": name,
            "brokerId": broker_id,
            "brokerRole": role,
            "brokerIP1": ip,
            "listenPort": port,
            "namesrvAddr": self.namesrv_addr,
            "storePathRootDir": store,
            "mappedFileSizeCommitLog": FILE_SIZE,
            **SMALL_INDEX,
            "haSendHeartbeatInterval": 500,
            "haHousekeepingInterval": 2000,
            "syncFlushTimeout": 1000,
            "slaveSyncInterval": 1000,
            "flushConsumerOffsetInterval": 500,
            "diskMaxUsedSpaceRatio": 95,
        }
        props.update(extra)
        conf = broker_conf(self.root / f"{name}-{broker_id}.conf", **props)
        p = Proc(
            f"{name}-{broker_id}",
            [str(BIN / "mqbroker"), "-c", str(conf)],
            self.root / f"{name}-{broker_id}.log",
            self.lab.netns(host),
        )
        self.procs.append(p)
        return p, f"{ip}:{port}"

    def stop_all(self) -> None:
        for p in reversed(self.procs):
            p.stop()


_connections: dict[str, RemotingConnection] = {}


async def request(
    addr: str, code: int, ext: dict[str, Any] | None = None, body: bytes = b"", timeout: float = 5.0
) -> RemotingCommand:
    """One request over a cached connection to `addr` (reconnecting when the last one closed)."""
    conn = _connections.get(addr)
    if conn is None or conn.closed.done():
        conn = _connections[addr] = await connect(addr, timeout=2.0)
    cmd = RemotingCommand(code=code, ext_fields={k: str(v) for k, v in (ext or {}).items()}, body=body)
    try:
        return await conn.invoke(cmd, timeout)
    except Exception:
        _connections.pop(addr, None)
        conn.close()
        raise


def close_connections() -> None:
    for conn in _connections.values():
        conn.close()
    _connections.clear()


async def runtime_info(addr: str) -> dict[str, str]:
    resp = await request(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    table: dict[str, str] = orjson.loads(resp.body)["table"]
    return table


async def wait_for(check: Any, timeout: float, what: str, procs: list[Proc] | None = None) -> Any:
    """Poll the async `check()` until it returns something truthy (exceptions count as not yet)."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            value = await check()
            if value:
                return value
        except Exception as exc:  # not up yet, connection refused...
            last = exc
        await asyncio.sleep(0.1)
    logs = "\n".join(f"--- {p.name}\n{p.tail()}" for p in procs or [])
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})\n{logs}")


def commit_log_bytes(store_root: Path, start: int, end: int) -> bytes:
    """Bytes [start, end) of a CommitLog read from its files on disk (named by their start offset)."""
    out = bytearray()
    offset = start
    while offset < end:
        base = offset - offset % FILE_SIZE
        path = store_root / "commitlog" / f"{base:020d}"
        with open(path, "rb") as fh:
            fh.seek(offset - base)
            chunk = fh.read(min(end - offset, base + FILE_SIZE - offset))
        assert chunk, f"{path} has nothing at {offset}"
        out += chunk
        offset += len(chunk)
    return bytes(out)
