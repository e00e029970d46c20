"""Drive the real third-party RocketMQ clients installed by scripts/peers.sh.

Used by golden and interop tests (through the fixtures in tests/conftest.py): `PEERS` names each
client and knows how to run its script under tests/peers/{py,js}/; `CaptureServer` is a tiny
fake NameServer + broker on 127.0.0.1 ephemeral ports that records every frame a client sends and
answers just enough (route, heartbeat, send, rebalance, empty pulls) for the client to complete a
send and a consumer start; `capture()` runs one client against it. Client processes always get a
temporary HOME (they write logs and offsets there) and run under `timeout`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from broker.protocol.bodies import ConsumerIdList, HeartbeatData
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import FrameDecoder, RemotingCommand, encode
from broker.protocol.headers import (
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    SendMessageResponseHeader,
    parse_send_request_header,
)

__all__ = [
    "PEERS",
    "PEERS_DIR",
    "REPO",
    "Capture",
    "CaptureServer",
    "CapturedFrame",
    "Peer",
    "PeerRun",
    "capture",
    "ensure_peers",
]

REPO = Path(__file__).resolve().parents[2]
PEERS_DIR = Path(os.environ.get("ROCKETCLUSTER_PEERS_DIR", Path.home() / ".cache" / "rocketcluster" / "peers"))
HERE = Path(__file__).resolve().parent
BROKER_NAME = "broker-golden"
CLUSTER = "GoldenCluster"


@dataclass(frozen=True)
class Peer:
    """One installed client: `prefix` is its venv or npm prefix, `kind` is "py" or "js"."""

    name: str
    kind: str
    prefix: Path

    @property
    def installed(self) -> bool:
        return (self.prefix / ".ok").exists()

    def command(self, script: str, args: list[str]) -> list[str]:
        if self.kind == "py":
            return [str(self.prefix / "bin" / "python"), str(HERE / "py" / script), *args]
        node = shutil.which("node") or "node"
        return [node, str(HERE / "js" / script), *args]

    def env(self, home: str) -> dict[str, str]:
        env = {"HOME": home, "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
        if self.kind == "js":
            env["NODE_PATH"] = str(self.prefix / "node_modules")
        return env


PEERS: dict[str, Peer] = {
    "rocketmq-0.4.4": Peer("rocketmq-0.4.4", "py", PEERS_DIR / "rocketmq-0.4.4"),
    "rocketmq-python-cvs-2.1.0.3": Peer("rocketmq-python-cvs-2.1.0.3", "py", PEERS_DIR / "rocketmq-python-cvs-2.1.0.3"),
    "ali-ons-3.12.0": Peer("ali-ons-3.12.0", "js", PEERS_DIR / "ali-ons-3.12.0"),
}


def ensure_peers() -> str | None:
    """Install missing peers with scripts/peers.sh; returns None when all are there, else why not."""
    if all(peer.installed for peer in PEERS.values()):
        return None
    env = {**os.environ, "ROCKETCLUSTER_PEERS_DIR": str(PEERS_DIR)}
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "peers.sh")], env=env, capture_output=True, text=True, timeout=600
    )
    if proc.returncode != 0:
        return f"scripts/peers.sh failed (rc {proc.returncode}): {proc.stderr.strip()[-500:]}"
    return None


@dataclass
class CapturedFrame:
    role: str  # "namesrv" or "broker"
    frame: bytes  # the frame without its 4-byte length prefix, exactly as received
    cmd: RemotingCommand

    @property
    def raw_header(self) -> dict[str, Any]:
        """The JSON header as the client wrote it, before our extFields normalisation."""
        header_len = int.from_bytes(self.frame[:4], "big") & 0xFFFFFF
        value: dict[str, Any] = orjson.loads(self.frame[4 : 4 + header_len])
        return value


@dataclass
class Capture:
    frames: list[CapturedFrame] = field(default_factory=list)

    def requests(self, code: int, role: str | None = None) -> list[CapturedFrame]:
        return [f for f in self.frames if f.cmd.code == code and not f.cmd.is_response and role in (None, f.role)]


class _Conn(asyncio.Protocol):
    def __init__(self, server: CaptureServer, role: str) -> None:
        self.server = server
        self.role = role
        self.decoder = FrameDecoder()
        self.pending = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        # Keep the exact frame bytes as well as the decoded command, for the golden assertions.
        self.pending += data
        for cmd in self.decoder.feed(data):
            length = int.from_bytes(self.pending[:4], "big")
            self.server.capture.frames.append(CapturedFrame(self.role, self.pending[4 : 4 + length], cmd))
            self.pending = self.pending[4 + length :]
            if not cmd.is_response:
                asyncio.get_running_loop().create_task(self.server.answer(self, cmd))

    def send(self, cmd: RemotingCommand) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(encode(cmd))


class CaptureServer:
    """A fake NameServer and broker that records frames; one topic route for every topic asked."""

    def __init__(self, pull_hold: float = 0.5) -> None:
        self.capture = Capture()
        self.pull_hold = pull_hold
        self.namesrv_port = 0
        self.broker_port = 0
        self._servers: list[asyncio.Server] = []
        self._queue_offset = 0
        self._client_ids: set[str] = set()

    async def __aenter__(self) -> CaptureServer:
        loop = asyncio.get_running_loop()
        for role in ("namesrv", "broker"):
            server = await loop.create_server(lambda r=role: _Conn(self, r), "127.0.0.1", 0)  # type: ignore[misc]
            self._servers.append(server)
            port = server.sockets[0].getsockname()[1]
            if role == "namesrv":
                self.namesrv_port = port
            else:
                self.broker_port = port
        return self

    async def __aexit__(self, *exc: object) -> None:
        for server in self._servers:
            server.close()
        for server in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2)

    def route(self) -> bytes:
        # Quoted brokerAddrs keys are accepted by every client; topicSynFlag is the pre-4.9 spelling.
        return orjson.dumps(
            {
                "brokerDatas": [
                    {
                        "brokerAddrs": {"0": f"127.0.0.1:{self.broker_port}"},
                        "brokerName": BROKER_NAME,
                        "cluster": CLUSTER,
                    }
                ],
                "filterServerTable": {},
                "queueDatas": [
                    {
                        "brokerName": BROKER_NAME,
                        "perm": 6,
                        "readQueueNums": 4,
                        "topicSynFlag": 0,
                        "topicSysFlag": 0,
                        "writeQueueNums": 4,
                    }
                ],
            }
        )

    def offset_msg_id(self, offset: int) -> str:
        return f"7F000001{self.broker_port:08X}{offset:016X}"

    async def answer(self, conn: _Conn, cmd: RemotingCommand) -> None:
        reply = await self._reply(conn.role, cmd)
        if reply is not None and not cmd.is_oneway:
            conn.send(reply)

    async def _reply(self, role: str, cmd: RemotingCommand) -> RemotingCommand | None:
        code = cmd.code
        if role == "namesrv":
            if code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
                return cmd.response(ResponseCode.SUCCESS, body=self.route())
            return cmd.response(ResponseCode.SUCCESS)
        if code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            header = parse_send_request_header(code, cmd.ext_fields)
            self._queue_offset += 1
            ext = SendMessageResponseHeader(
                msg_id=self.offset_msg_id(self._queue_offset * 100),
                queue_id=header.queue_id,
                queue_offset=self._queue_offset,
            ).to_ext_fields()
            return cmd.response(ResponseCode.SUCCESS, ext_fields=ext)
        if code == RequestCode.HEART_BEAT:
            with contextlib.suppress(Exception):
                self._client_ids.add(HeartbeatData.from_json(cmd.body).client_id)
            return cmd.response(ResponseCode.SUCCESS)
        if code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
            body = ConsumerIdList(tuple(sorted(self._client_ids))).to_json()
            return cmd.response(ResponseCode.SUCCESS, body=body)
        if code == RequestCode.QUERY_CONSUMER_OFFSET:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, remark="Not found")
        if code in (RequestCode.GET_MAX_OFFSET, RequestCode.GET_MIN_OFFSET, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP):
            return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": "0"})
        if code == RequestCode.PULL_MESSAGE:
            # Hold like a short long-poll so clients do not spin, then report nothing new.
            await asyncio.sleep(self.pull_hold)
            offset = PullMessageRequestHeader.from_ext_fields(cmd.ext_fields).queue_offset
            ext = PullMessageResponseHeader(
                suggest_which_broker_id=0, next_begin_offset=offset, min_offset=0, max_offset=0
            ).to_ext_fields()
            return cmd.response(ResponseCode.PULL_NOT_FOUND, remark="OFFSET_OVERFLOW_ONE", ext_fields=ext)
        return cmd.response(ResponseCode.SUCCESS)


@dataclass
class PeerRun:
    peer: str
    returncode: int
    stdout: str
    stderr: str
    capture: Capture
    results: list[dict[str, Any]] = dataclasses.field(default_factory=list)


async def capture(
    peer: Peer,
    topic: str = "GoldenTopic",
    *,
    count: int = 1,
    linger: float = 2.0,
    timeout: float = 60.0,
) -> PeerRun:
    """Run `peer`'s produce script against a fresh CaptureServer and return what it sent."""
    async with CaptureServer() as server:
        home = tempfile.mkdtemp(prefix=f"peer-{peer.name}-")
        try:
            args = [
                "--namesrv", f"127.0.0.1:{server.namesrv_port}",
                "--topic", topic,
                "--count", str(count),
                "--linger", str(linger),
            ]  # fmt: skip
            script = "produce.py" if peer.kind == "py" else "produce.js"
            cmd = ["timeout", "-k", "5", str(int(timeout)), *peer.command(script, args)]
            proc = await asyncio.create_subprocess_exec(
                *cmd,
                env=peer.env(home),
                cwd=home,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await asyncio.wait_for(proc.communicate(), timeout + 10)
        finally:
            shutil.rmtree(home, ignore_errors=True)
        stdout = out.decode(errors="replace")
        results = [orjson.loads(line) for line in stdout.splitlines() if line.startswith("{")]
        rc = proc.returncode if proc.returncode is not None else -1
        return PeerRun(peer.name, rc, stdout, err.decode(errors="replace"), server.capture, results)
