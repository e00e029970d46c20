"""Harness of the interop tests: our NameServer and broker as real subprocesses, real clients against them.

`ServerPair` starts `.venv/bin/mqnamesrv -c FILE` and `.venv/bin/mqbroker -c FILE` exactly as a user
does (free loopback ports, a tmp storePathRootDir, brokerIP1=127.0.0.1) and stops them with SIGTERM.
`PeerProc` runs one driver script of a third-party client (tests/peers/{py,js}/interop.*) under
`timeout` with a tmp HOME and parses the JSON lines it prints. `SdkConsumer` / `sdk_produce` are the
same roles played by our own Python SDK. Every client writes and reads the message content defined
by `fields()`, so a test can compare what arrived with what was meant, field by field.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from broker.client import (
    Admin,
    BlockingAdmin,
    BlockingProducer,
    BlockingPullConsumer,
    BlockingPushConsumer,
    ClientConfig,
    ConsumeStatus,
    Message,
    MessageExt,
)
from broker.client.message import MessageQueue
from tests.local_cluster import SMALL_INDEX
from tests.peers import PEERS, REPO
from tests.tls_certs import make_pki

__all__ = [
    "CONSUMER_EXIT",
    "PEER_ORIGINS",
    "USER_PROPS",
    "PeerProc",
    "Record",
    "SdkConsumer",
    "ServerPair",
    "check_intact",
    "fields",
    "home_for",
    "run_all",
    "sdk_produce",
    "sdk_pull_all",
]

BIN = REPO / ".venv" / "bin"
CLUSTER = "InteropCluster"
BROKER_NAME = "broker-interop"
#: Short origin tags used in topic, group and key names, per peer of tests/peers.PEERS.
PEER_ORIGINS = {"rocketmq-0.4.4": "cpp044", "rocketmq-python-cvs-2.1.0.3": "cvs", "ali-ons-3.12.0": "alions"}
#: How each peer's consumer process ends so its offsets reach the broker: 0.4.4 shuts down cleanly;
#: the cvs build segfaults in shutdown, so it waits for its 5 s offset-persist timer instead.
CONSUMER_EXIT = {
    "rocketmq-0.4.4": ["--shutdown"],
    "rocketmq-python-cvs-2.1.0.3": ["--linger", "6"],
    "ali-ons-3.12.0": [],
}
#: User properties every test message carries (see `fields`).
USER_PROPS = ("color", "city", "seq", "shard", "origin")
UNIQ_KEY_RE = re.compile(r"^[0-9A-F]{32}$")


def fields(origin: str, topic: str, i: int, shards: int = 3) -> dict[str, Any]:
    """Message i of a run: must stay identical to `fields` in tests/peers/py/interop.py and js/interop.js."""
    return {
        "topic": topic,
        "tags": f"tag{i % 2}",
        "keys": f"key-{origin}-{i}",
        # Every fifth message is ~12 KiB: above the 4 KiB where clients compress (sysFlag bit 0).
        "body": f"héllo wörld 世界 🚀 {origin} #{i}" * (400 if i % 5 == 4 else 1),
        "props": {"color": "blue", "city": "Zürich", "seq": str(i), "shard": str(i % shards), "origin": origin},
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _write_properties(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
    return path


class ServerPair:
    """A NameServer and a broker subprocess, the way `mqnamesrv -c` / `mqbroker -c` are run by users."""

    def __init__(self, root: Path, extra: dict[str, str] | None = None) -> None:
        self.root = root
        #: More broker.conf entries (they override the defaults below), e.g. short transaction timings.
        self.extra = dict(extra or {})
        self.namesrv_port = free_port()
        self.broker_port = free_port()
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    def start(self) -> None:
        ns_conf = _write_properties(
            self.root / "namesrv.properties",
            {
                "listenPort": str(self.namesrv_port),
                "bindAddress": "127.0.0.1",
                "kvConfigPath": str(self.root / "kv.json"),
                # UPDATE_NAMESRV_CONFIG persists here: the file the NameServer is started with.
                "configStorePath": str(self.root / "namesrv.properties"),
            },
        )
        self._spawn("mqnamesrv", ns_conf, "The Name Server boot success")
        broker_conf = _write_properties(
            self.root / "broker.conf",
            {
                "brokerClusterName": CLUSTER,
                "brokerName": BROKER_NAME,
                "brokerId": "0",
                "listenPort": str(self.broker_port),
                "haListenPort": str(free_port()),
                "brokerIP1": "127.0.0.1",
                "namesrvAddr": self.namesrv_addr,
                "storePathRootDir": str(self.root / "store"),
                "mappedFileSizeCommitLog": str(16 << 20),
                **SMALL_INDEX,
                "mappedFileSizeConsumeQueue": str(300_000 * 20 // 100),
                "defaultTopicQueueNums": "4",
                # Retries go through delay level 3 + reconsumeTimes: keep every level at 1 s so a
                # redelivery test does not wait the production default of 10 s.
                "messageDelayLevel": " ".join(["1s"] * 18),
                **self.extra,
            },
        )
        self._spawn("mqbroker", broker_conf, "boot success")

    def _spawn(self, program: str, conf: Path, ready_line: str, timeout: float = 30.0) -> None:
        log = self.root / f"{program}.log"
        self.logs.append(log)
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [str(BIN / program), "-c", str(conf)], stdout=out, stderr=subprocess.STDOUT, cwd=self.root
            )
        self.procs.append(proc)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready_line in log.read_text(errors="replace"):
                return
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError(f"{program} did not start (rc {proc.poll()}):\n{self.log_tail(log)}")

    @staticmethod
    def log_tail(log: Path, chars: int = 3000) -> str:
        return log.read_text(errors="replace")[-chars:] if log.exists() else "(no log)"

    def stop(self) -> None:
        # Broker first so it can still unregister from the NameServer; SIGTERM is the graceful path.
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)

    def create_topics(self, topics: Iterable[str], queues: int = 4) -> None:
        """Create topics like `mqadmin updateTopic -c` and wait until the NameServer routes them.

        ali-ons cannot send to or subscribe a topic the NameServer does not know (it gives up on
        TOPIC_NOT_EXIST instead of falling back to TBW102), so the tests create topics up front.
        """
        wanted = set(topics)
        with BlockingAdmin(self.namesrv_addr) as admin:
            for topic in sorted(wanted):
                admin.create_topic(topic, cluster=CLUSTER, read_queue_nums=queues, write_queue_nums=queues)
            deadline = time.monotonic() + 20
            while not wanted <= set(admin.topic_list()):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"topics never reached the NameServer: {wanted - set(admin.topic_list())}")
                time.sleep(0.1)


class TlsServerPair(ServerPair):
    """ServerPair whose NameServer and broker both take `tls` keys (mqnamesrv -c / mqbroker -c files)."""

    def __init__(self, root: Path, tls: dict[str, str]) -> None:
        super().__init__(root, extra=tls)
        self.tls = tls

    def _spawn(self, program: str, conf: Path, ready_line: str, timeout: float = 30.0) -> None:
        if program == "mqnamesrv":
            with conf.open("a") as out:
                out.writelines(f"{k}={v}\n" for k, v in self.tls.items())
        super()._spawn(program, conf, ready_line, timeout)


def enforcing_servers(root: Path) -> tuple[TlsServerPair, Path]:
    """A NameServer and broker (not started yet) that serve TLS only, with a certificate of a test CA under `root`,
    and that CA's certificate, for clients to trust. Their own connections verify the CA too."""
    pki = make_pki(root / "pki")
    cert, key = pki.issue("broker")
    keys = {
        "tls.server.mode": "enforcing",
        "tls.server.certPath": str(cert),
        "tls.server.keyPath": str(key),
        "tls.test.mode.enable": "false",
        "tls.client.authServer": "true",
        "tls.client.trustCertPath": str(pki.ca_cert),
    }
    return TlsServerPair(root, keys), pki.ca_cert


def create_tls_topic(namesrv: str, ca: Path, topic: str) -> None:
    """`topic` (4 queues) on the cluster, through our SDK over TLS trusting `ca`; back once the NameServer lists it."""

    async def create() -> None:
        cc = ClientConfig(namesrv_addr=namesrv, use_tls=True, tls_ca_file=str(ca))
        async with Admin(client_config=cc) as admin:
            await admin.create_topic(topic, cluster=CLUSTER, read_queue_nums=4, write_queue_nums=4)
            for _ in range(200):
                if topic in await admin.topic_list():
                    return
                await asyncio.sleep(0.1)
        raise AssertionError(f"{topic} never reached the NameServer")

    asyncio.run(create())


@dataclass
class Record:
    """One delivery as a consumer saw it, in the same shape for every client."""

    topic: str
    tags: str | None
    keys: str | None
    body: bytes
    id: str
    queue_id: int
    queue_offset: int
    reconsume_times: int
    props: dict[str, str]
    born_ts: int = 0
    store_ts: int = 0

    @classmethod
    def from_event(cls, event: dict[str, Any]) -> Record:
        return cls(
            topic=event["topic"],
            tags=event.get("tags"),
            keys=event.get("keys"),
            body=base64.b64decode(event["body_b64"]),
            id=event.get("id") or "",
            queue_id=int(event["queue_id"]),
            queue_offset=int(event["queue_offset"]),
            reconsume_times=int(event["reconsume_times"]),
            props={str(k): str(v) for k, v in (event.get("props") or {}).items()},
            born_ts=int(event.get("born_ts") or 0),
            store_ts=int(event.get("store_ts") or 0),
        )

    @classmethod
    def from_message(cls, msg: MessageExt) -> Record:
        return cls(
            topic=msg.topic,
            tags=msg.tags,
            keys=" ".join(msg.keys) or None,
            body=bytes(msg.body),
            id=msg.msg_id,
            queue_id=msg.queue_id,
            queue_offset=msg.queue_offset,
            reconsume_times=msg.reconsume_times,
            props=dict(msg.properties),
            born_ts=msg.born_timestamp,
            store_ts=msg.store_timestamp,
        )

    @property
    def origin(self) -> str:
        return self.props.get("origin", "?")

    @property
    def seq(self) -> int:
        return int(self.props.get("seq", "-1"))


def check_intact(record: Record, producer_origin: str, uniq_key: re.Pattern[str] | None = None) -> None:
    """Everything the producer set arrived byte for byte; a message id and a UNIQ_KEY of the producer's client's
    shape (`uniq_key`; by default the shape our SDK and the C++/Node.js clients make) are there."""
    want = fields(producer_origin, record.topic, record.seq)
    assert record.body == want["body"].encode(), record
    assert record.tags == want["tags"], record
    assert record.keys == want["keys"], record
    assert {k: record.props.get(k) for k in USER_PROPS} == want["props"], record
    assert record.id, f"no message id: {record}"
    assert (uniq_key or UNIQ_KEY_RE).match(record.props.get("UNIQ_KEY", "")), f"no UNIQ_KEY: {record}"
    assert record.reconsume_times == 0, record


@dataclass
class PeerProc:
    """One run of a peer's interop driver (a subprocess under `timeout`, HOME in `home`)."""

    peer: str
    args: list[str]
    home: Path
    timeout: float = 90.0
    extra_env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    events: list[dict[str, Any]] = field(default_factory=list)

    def start(self) -> PeerProc:
        peer = PEERS[self.peer]
        script = "interop.py" if peer.kind == "py" else "interop.js"
        self.home.mkdir(parents=True, exist_ok=True)
        cmd = ["timeout", "-k", "5", str(int(self.timeout)), *peer.command(script, self.args)]
        self.proc = subprocess.Popen(
            cmd,
            env=peer.env(str(self.home)) | self.extra_env,
            cwd=self.home,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        return self

    def wait(self) -> PeerProc:
        assert self.proc is not None
        try:
            out, err = self.proc.communicate(timeout=self.timeout + 15)
        except subprocess.TimeoutExpired:  # `timeout` itself hung: should not happen, but never block
            self.proc.kill()
            out, err = self.proc.communicate()
        self.returncode = self.proc.returncode
        self.stdout, self.stderr = out.decode(errors="replace"), err.decode(errors="replace")
        for line in self.stdout.splitlines():
            if line.startswith("{"):
                with contextlib.suppress(orjson.JSONDecodeError):
                    self.events.append(orjson.loads(line))
        return self

    def of(self, event: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") == event]

    def records(self, event: str = "msg") -> list[Record]:
        return [Record.from_event(e) for e in self.of(event)]

    def describe(self) -> str:
        """For assertion messages: how the run ended and the end of what it printed."""
        head = f"{self.peer} {self.args[0]} rc={self.returncode}"
        return f"{head}\nstdout:\n{self.stdout[-2000:]}\nstderr:\n{self.stderr[-2000:]}"


def run_all(procs: list[PeerProc]) -> list[PeerProc]:
    """Start every process, then wait for all (they run concurrently)."""
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.wait()
    return procs


def sdk_message(origin: str, topic: str, i: int, shards: int = 3) -> Message:
    f = fields(origin, topic, i, shards)
    return Message(topic, f["body"], tags=f["tags"], keys=f["keys"], properties=f["props"])


def sdk_produce(namesrv: str, sends: Iterable[tuple[str, str]], count: int, origin: str = "sdk") -> list[Any]:
    """Our SDK's producer, as the peers' `produce` subcommand: (mode, topic) with mode sync, oneway or batch."""
    results: list[Any] = []
    with BlockingProducer(f"PID-iop-{origin}", namesrv) as producer:
        for mode, topic in sends:
            msgs = [sdk_message(origin, topic, i) for i in range(count)]
            if mode == "batch":
                results.extend(producer.send_batch(msgs))
            elif mode == "oneway":
                for msg in msgs:
                    producer.send_oneway(msg)
            else:
                results.extend(producer.send(msg) for msg in msgs)
    return results


class SdkConsumer:
    """Our SDK's push consumer, collecting deliveries as `Record`s until `expect` succeeded."""

    def __init__(self, namesrv: str, group: str, topics: Iterable[str], expect: int) -> None:
        self.expect = expect
        self.records: list[Record] = []
        self._lock = threading.Lock()
        self._done = threading.Event()
        self.consumer = BlockingPushConsumer(group, namesrv, consume_from_where=4)  # CONSUME_FROM_FIRST_OFFSET
        for topic in topics:
            self.consumer.subscribe(topic, "*")
        self.consumer.register_listener(self._on_messages)

    def _on_messages(self, msgs: list[MessageExt]) -> ConsumeStatus:
        records = [Record.from_message(m) for m in msgs]
        with self._lock:
            self.records.extend(records)
            if len(self.records) >= self.expect:
                self._done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    def start(self) -> SdkConsumer:
        self.consumer.start()
        return self

    def wait(self, timeout: float = 60.0) -> SdkConsumer:
        try:
            self._done.wait(timeout)
        finally:
            self.consumer.shutdown()
        return self


def sdk_pull_all(
    namesrv: str, group: str, topic: str, expect: int, queues: int = 4, timeout: float = 15.0
) -> list[Record]:
    """Our SDK's pull consumer reads every queue of `topic` from offset 0: all it finds once `expect`
    records arrived and one more poll came back empty, or whatever it had at `timeout`."""
    consumer = BlockingPullConsumer(group, namesrv)
    consumer.assign([MessageQueue(topic, BROKER_NAME, q) for q in range(queues)])
    consumer.start()
    records: list[Record] = []
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            batch = consumer.poll(1.0)
            records.extend(Record.from_message(m) for m in batch)
            if not batch and len(records) >= expect:
                break
    finally:
        consumer.shutdown()
    return records


def home_for(root: Path, name: str) -> Path:
    """A fresh HOME per peer process: clients write logs (and ali-ons offsets) under it."""
    path = root / "home" / name
    path.mkdir(parents=True, exist_ok=True)
    return path
