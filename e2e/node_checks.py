"""What the node-tier tests use to prove nothing acknowledged was lost and status told the truth.

- `broker_pid`: the broker process of a pod, found on this machine (the harness's node), to kill it abruptly;
- `Producer`: a thread that sends numbered messages and records every acknowledged key (SEND_OK: stored as the
  broker's flush and replication settings ask);
- `read_back`: every message a topic holds, read by a fresh pull consumer from each queue's start;
- `assert_all_read`: every acknowledged message is among those read (and what was not acknowledged, said);
- `StatusTimeline`: the RocketCluster's phase and conditions, polled in the background, to check that a
  Ready seen once recovery is over never turns back;
- `wait_answering`: a NameServer address (a nodePort) polled until it answers.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker.client import BlockingAdmin, Message, SendStatus
from broker.client.blocking import BlockingProducer, BlockingPullConsumer
from broker.client.errors import NameServerUnreachable

if TYPE_CHECKING:
    from e2e.conftest import Kube

__all__ = ["Producer", "StatusTimeline", "assert_all_read", "broker_pid", "read_back", "wait_answering"]


def wait_answering(kube: Kube, namesrv: str, timeout: float = 60) -> None:
    """Poll the NameServer at `namesrv` until it answers a cluster query. A Service's ClusterIP or nodePort answers
    a moment after the cluster is Ready: the node refuses connections to it until kube-proxy has written the rules
    for the pod's new endpoint, which is the node's own work, shows in no object's status, and takes longer while
    the node is busy."""

    def answers() -> bool:
        try:
            with BlockingAdmin(namesrv) as admin:
                admin.cluster_info()
        except NameServerUnreachable:
            return False
        return True

    kube.wait_for(f"the NameServer at {namesrv} answering", answers, timeout=timeout, interval=1)


def broker_pid(pod: str) -> int:
    """The pid, on this node, of the broker process of `pod` (the pod's env names it)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if b"mqbroker" in cmdline and f"POD_NAME={pod}".encode() in environ.split(b"\0"):
            return int(proc.name)
    raise AssertionError(f"no broker process of {pod} on this node")


@dataclass
class Producer:
    """Sends `<prefix><n>` to `topic` every `interval` seconds until closed; failures are counted, not fatal
    (sends fail while a group has no master). Only SEND_OK acknowledges a message: a master answers
    FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE for a message its replicas may not hold (one in flight when
    it loses its mastership, say), which a RocketMQ producer must treat as not stored."""

    namesrv: str
    topic: str
    prefix: str = "k"
    interval: float = 0.02
    acked: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    not_ok: list[str] = field(default_factory=list)  # "<key> <status>" of each reply other than SEND_OK
    _stop: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> Producer:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        with BlockingProducer(f"safety-{uuid.uuid4().hex[:6]}", self.namesrv) as producer:
            i = 0
            while not self._stop.is_set():
                key = f"{self.prefix}{i:07d}"
                try:
                    result = producer.send(Message(self.topic, key.encode(), keys=key))
                except Exception as exc:
                    self.failures.append(f"{type(exc).__name__}: {exc}")
                else:
                    if result.status is SendStatus.SEND_OK:
                        self.acked.append(key)
                    else:
                        self.not_ok.append(f"{key} {result.status.value}")
                i += 1
                time.sleep(self.interval)

    def wait_for(self, count: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked) < count:
            assert time.monotonic() < deadline, (
                f"only {len(self.acked)} of {count} sends acknowledged: {self.failures[-3:]}"
            )
            time.sleep(0.1)


def read_back(namesrv: str, topic: str, quiet_seconds: float = 5.0, limit_seconds: float = 120.0) -> list[str]:
    """The keys of every message `topic` holds, from every queue's first offset, with duplicates."""
    reader = BlockingPullConsumer(f"safety-readers-{uuid.uuid4().hex[:6]}", namesrv)
    keys: list[str] = []
    try:
        queues = reader.fetch_queues(topic)
        reader.assign(queues)
        reader.start()
        for q in queues:
            reader.seek_to_begin(q)
        deadline = time.monotonic() + limit_seconds
        last_new = time.monotonic()
        while time.monotonic() - last_new < quiet_seconds and time.monotonic() < deadline:
            batch = reader.poll(1.0)
            if batch:
                keys += [m.keys[0] for m in batch if m.keys]
                last_new = time.monotonic()
    finally:
        reader.shutdown()
    return keys


def assert_all_read(what: str, producer: Producer, keys: list[str]) -> None:
    """Every message `producer` had acknowledged is among `keys`; the replies other than SEND_OK are printed
    (those messages may be lost by design, and are not checked)."""
    unreadable = set(producer.acked) - set(keys)
    print(
        f"\n{what}: {len(producer.acked)} acknowledged, {len(unreadable)} unreadable, {len(keys)} read; "
        f"{len(producer.not_ok)} replies other than SEND_OK: {producer.not_ok[:10]}"
    )
    assert not unreadable, f"{len(unreadable)} acknowledged messages cannot be read: {sorted(unreadable)[:10]}"


@dataclass
class StatusTimeline:
    """(monotonic time, phase, {condition: (status, reason)}) of one RocketCluster, every `interval` s."""

    kube: Kube
    namespace: str
    name: str
    interval: float = 0.5
    seen: list[tuple[float, str, dict[str, tuple[str, str]]]] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)  # the Ready condition's message of each poll
    _stop: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> StatusTimeline:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                obj: dict[str, Any] = self.kube.get("-n", self.namespace, "rmq", self.name)
            except AssertionError:
                obj = {}
            status = obj.get("status") or {}
            conditions = {c["type"]: (c["status"], c.get("reason", "")) for c in status.get("conditions", [])}
            self.seen.append((time.monotonic(), str(status.get("phase")), conditions))
            ready = next((c for c in status.get("conditions", []) if c["type"] == "Ready"), {})
            self.messages.append(str(ready.get("message", "")))
            self._stop.wait(self.interval)

    def condition(self, type_: str) -> tuple[str, str] | None:
        return self.seen[-1][2].get(type_) if self.seen else None

    def ever(self, type_: str, status: str, reason: str | None = None, since: float = 0.0) -> bool:
        return any(
            (c := conds.get(type_)) is not None and c[0] == status and (reason is None or c[1] == reason)
            for at, _, conds in self.seen
            if at >= since
        )

    def ready_lost_after(self, since: float) -> list[str]:
        """Each Ready=True (seen after `since`) that a later poll found False: what it turned into."""
        flips = []
        was_ready = False
        for at, phase, conds in self.seen:
            if at < since:
                continue
            ready = conds.get("Ready", ("", ""))[0] == "True"
            if was_ready and not ready:
                why = self.messages[self.seen.index((at, phase, conds))]
                flips.append(f"{phase} {conds.get('Ready')} at +{at - since:.1f} s: {why}")
            was_ready = ready
        return flips

    def summary(self) -> str:
        """The phases in order, each with how long it lasted: what a reader of the test log wants."""
        out: list[str] = []
        start = self.seen[0][0] if self.seen else 0.0
        for at, phase, conds in self.seen:
            label = f"{phase}/{conds.get('Ready', ('?', '?'))[1]}"
            if conds.get("Degraded", ("False", ""))[0] == "True":
                label += f" (Degraded: {conds['Degraded'][1]})"
            if not out or not out[-1].startswith(label + " "):
                out.append(f"{label} from +{at - start:.1f} s")
        return "; ".join(out)
