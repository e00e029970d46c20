"""Spark-on-Kubernetes jobs against a RocketCluster, for e2e/test_spark_k8s.py.

- `spark_image_on_node()`: the Spark image of this tree, built and imported into the node (or reused).
- `Shop`: the RocketCluster `shop` of examples/spark/k8s/rocketcluster.yaml in a test namespace, and a
  client for it from the node (NameServer and broker pod IPs are routed there): topics, sends, reads.
- `Orders`: deterministic order messages (JSON body, tag, key) and what the pipelines must make of them.
- `SparkJobs`: examples/spark/submit.sh run with the host's spark-submit, and the driver and executor
  pods it starts.
- `Volume`: the job volume as the node sees it, and Parquet read from it (the streaming file sink's
  output only through its `_spark_metadata` log, so uncommitted files never count).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa  # type: ignore[import-untyped]  # the spark extra; no stubs
import pyarrow.dataset as ds  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from broker.client import Admin, ClientConfig, Message, MessageQueue, Producer, SendResult
from broker.client.blocking import LoopThread
from broker.spark.client import PullSpec, QueueClient
from e2e.host_work import image_on_node

if TYPE_CHECKING:
    from e2e.conftest import Kube

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples" / "spark"
SUBMIT = EXAMPLES / "submit.sh"
SPARK_SUBMIT = REPO / ".venv" / "bin" / "spark-submit"
SPARK_IMAGE = "rocketcluster.local/spark:0.1.0"
APISERVER = "https://10.250.0.1:6443"
CTR = ["ctr", "--address", "/run/rocketcluster-k8s/containerd/containerd.sock", "-n", "k8s.io"]
TAGS = ("books", "games", "garden")
MINUTE_MS = 60_000


def spark_image_on_node() -> str:
    """The Spark image of this tree in the node's containerd. `E2E_REUSE_IMAGES=1` keeps one that is
    already there (a rebuild takes minutes)."""
    have = subprocess.run([*CTR, "images", "ls", "-q"], capture_output=True, text=True).stdout.split()
    if os.environ.get("E2E_REUSE_IMAGES") == "1" and SPARK_IMAGE in have:
        return SPARK_IMAGE
    return image_on_node("spark", SPARK_IMAGE)


# ---------------------------------------------------------------------------------------------- orders


@dataclass(frozen=True)
class Order:
    order_id: str
    ts: int
    tag: str
    amount_cents: int

    @property
    def body(self) -> bytes:
        doc = {"order_id": self.order_id, "ts": self.ts, "amount_cents": self.amount_cents}
        return json.dumps(doc, separators=(",", ":")).encode()

    def message(self, topic: str) -> Message:
        return Message(topic, self.body, tags=self.tag, keys=[self.order_id])


@dataclass
class Orders:
    """Orders whose event times rise by `step_ms`; `jump()` leaves a gap (a closing order's window)."""

    prefix: str
    next_ts: int
    step_ms: int = 20
    made: list[Order] = field(default_factory=list)

    def make(self, n: int) -> list[Order]:
        out = []
        for _ in range(n):
            i = len(self.made)
            order = Order(f"{self.prefix}-{i}", self.next_ts, TAGS[i % len(TAGS)], (i * 7919) % 10_000 + 1)
            self.next_ts += self.step_ms
            self.made.append(order)
            out.append(order)
        return out

    def closing(self) -> Order:
        """An order two minutes of event time after the last: the watermark then passes every earlier
        window, so they are all emitted. Its own window stays open until later orders come."""
        self.next_ts += 2 * MINUTE_MS
        order = self.make(1)[0]
        self.next_ts += 2 * MINUTE_MS
        return order


def crc_sum(bodies: Iterable[bytes]) -> int:
    return sum(zlib.crc32(b) for b in bodies)


def expected_totals(orders: Iterable[Order]) -> Counter[tuple[int, str, int, int, int]]:
    """(minute start ms, tag, orders, amount, body CRC sum) per window, as the pipeline computes them."""
    groups: dict[tuple[int, str], list[Order]] = {}
    for o in orders:
        groups.setdefault((o.ts - o.ts % MINUTE_MS, o.tag), []).append(o)
    return Counter(
        (minute, tag, len(os_), sum(o.amount_cents for o in os_), crc_sum(o.body for o in os_))
        for (minute, tag), os_ in groups.items()
    )


# ---------------------------------------------------------------------------------------------- the cluster


@dataclass
class Shop:
    """The RocketCluster `shop`, reached from the node by pod IPs."""

    kube: Kube
    ns: str
    name: str = "shop"
    loop: LoopThread = field(default_factory=lambda: LoopThread("shop-client"))
    _producer: Producer | None = None

    def pod_ip(self, pod: str) -> str:
        return str(self.kube.get("-n", self.ns, "pod", pod)["status"]["podIP"])

    @property
    def namesrv(self) -> str:
        return f"{self.pod_ip(f'{self.name}-nameserver-0')}:9876"

    def ready(self) -> bool:
        obj = self.kube.get("-n", self.ns, "rmq", self.name)
        status = obj.get("status") or {}
        cond = next((c for c in status.get("conditions", []) if c["type"] == "Ready"), None)
        return bool(
            cond and cond["status"] == "True" and status.get("observedGeneration") == obj["metadata"]["generation"]
        )

    def brokers(self) -> dict[str, str]:
        """brokerName -> master address, from the NameServer."""

        async def info() -> dict[str, str]:
            async with Admin(self.namesrv) as admin:
                cluster = await admin.cluster_info()
            return {name: bd.broker_addrs[0] for name, bd in cluster.brokers.items() if 0 in bd.broker_addrs}

        return self.loop.run(info(), timeout=60)

    def create_topic(self, topic: str, queues: int) -> None:
        async def create() -> None:
            async with Admin(self.namesrv) as admin:
                await admin.create_topic(topic, cluster=self.name, read_queue_nums=queues, write_queue_nums=queues)

        self.loop.run(create(), timeout=60)

    def producer(self) -> Producer:
        if self._producer is None:
            # A short route refresh, so sends spread over a new group soon after it has the topic.
            config = ClientConfig(namesrv_addr=self.namesrv, instance_name="e2e-shop", poll_name_server_interval=2.0)

            async def start() -> Producer:
                producer = Producer("e2e-orders", client_config=config)
                await producer.start()
                return producer

            self._producer = self.loop.run(start(), timeout=60)
        return self._producer

    def send(self, msgs: list[Message], window: int = 128) -> list[SendResult]:
        producer = self.producer()

        async def send() -> list[SendResult]:
            slots = asyncio.Semaphore(window)

            async def one(msg: Message) -> SendResult:
                async with slots:
                    return await producer.send(msg)

            return list(await asyncio.gather(*(one(m) for m in msgs)))

        return self.loop.run(send(), timeout=600)

    def read_topic(self, topic: str) -> pa.Table:
        """Every message of the topic, as the source's columns (an independent pull, not Spark)."""
        from broker.spark.rows import record_batch

        client = QueueClient(self.namesrv)
        try:
            mqs = client.queues([topic])
            lows, highs = client.min_offsets(mqs), client.max_offsets(mqs)
            spec = PullSpec(namesrv=self.namesrv, group="e2e-verify")
            batches = [
                record_batch(mq.broker_name, body, highs[mq])
                for mq in mqs
                for body in client.pull_range(spec, mq, lows[mq], highs[mq])
            ]
        finally:
            client.close()
        from broker.spark.rows import ARROW_SCHEMA

        return pa.Table.from_batches(batches, schema=ARROW_SCHEMA)

    def max_offsets(self, topic: str) -> dict[MessageQueue, int]:
        client = QueueClient(self.namesrv)
        try:
            return client.max_offsets(client.queues([topic]))
        finally:
            client.close()

    def close(self) -> None:
        if self._producer is not None:
            self.loop.run(self._producer.shutdown(), timeout=30)
        self.loop.stop()


class SteadyProducer:
    """Sends orders from `orders` in a background thread at about `rate` per second until stopped."""

    def __init__(self, shop: Shop, orders: Orders, topic: str, rate: int) -> None:
        self.shop, self.orders, self.topic, self.rate = shop, orders, topic, rate
        self.sent: list[tuple[Order, SendResult]] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="steady-producer", daemon=True)

    def start(self) -> SteadyProducer:
        self._thread.start()
        return self

    def _run(self) -> None:
        chunk = max(1, self.rate // 10)
        try:
            while not self._stop.is_set():
                started = time.monotonic()
                batch = self.orders.make(chunk)
                results = self.shop.send([o.message(self.topic) for o in batch])
                self.sent += zip(batch, results, strict=True)
                self._stop.wait(max(0.0, 0.1 - (time.monotonic() - started)))
        except BaseException as exc:  # reported by stop(): a failed send fails the test
            self.error = exc

    def stop(self) -> list[tuple[Order, SendResult]]:
        self._stop.set()
        self._thread.join(120)
        if self.error is not None:
            raise AssertionError(f"the producer failed: {self.error!r}") from self.error
        return self.sent


# ---------------------------------------------------------------------------------------------- spark jobs


@dataclass
class SparkJobs:
    """examples/spark/submit.sh from the node, as a user runs it, with small pods for a 2-core machine."""

    kube: Kube
    ns: str
    logs: Path
    template: Path

    def submit(
        self, job: str, pod: str, job_args: list[str], conf: dict[str, str] | None = None, wait: bool = False
    ) -> subprocess.Popen[bytes]:
        settings = {
            "spark.kubernetes.driver.pod.name": pod,
            "spark.kubernetes.executor.podNamePrefix": pod.removesuffix("-driver"),
            "spark.kubernetes.container.image.pullPolicy": "Never",
            "spark.kubernetes.submission.waitAppCompletion": "true" if wait else "false",
            # Two shared cores: ask for little CPU so the scheduler places every pod; the JVMs still use
            # what is free. Memory stays within the brief's limits.
            "spark.kubernetes.driver.request.cores": "100m",
            "spark.kubernetes.executor.request.cores": "100m",
            "spark.executor.memory": "512m",
            "spark.driver.memory": "1g",
            "spark.ui.showConsoleProgress": "false",
            **(conf or {}),
        }
        args = ["bash", str(SUBMIT), job]
        for key, value in settings.items():
            args += ["--conf", f"{key}={value}"]
        args += ["--", *job_args]
        env = dict(
            os.environ,
            APISERVER=APISERVER,
            NAMESPACE=self.ns,
            SPARK_SUBMIT=str(SPARK_SUBMIT),
            TEMPLATE=str(self.template),
            KUBECONFIG=str(self.kube.kubeconfig),
            # As in an activated venv: spark-submit finds pyspark through the first python3 on PATH.
            PATH=f"{SPARK_SUBMIT.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        )
        out = (self.logs / f"submit-{pod}.log").open("ab")
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO)

    def phase(self, pod: str) -> str | None:
        p = self.kube.run("get", "-n", self.ns, "pod", pod, "-o", "jsonpath={.status.phase}", check=False)
        return p.strip() or None

    def wait_phase(self, pod: str, phases: tuple[str, ...], timeout: float) -> str:
        return str(
            self.kube.wait_for(
                f"pod {pod} in {phases}", lambda: self.phase(pod) in phases and self.phase(pod), timeout, 1
            )
        )

    def log(self, pod: str) -> str:
        return self.kube.run("logs", "-n", self.ns, pod, check=False, timeout=60)

    def save_log(self, pod: str) -> Path:
        path = self.logs / f"{pod}.log"
        path.write_text(self.log(pod))
        return path

    def executors(self, pod: str) -> list[dict[str, Any]]:
        """Executor pods of the driver `pod` (Spark labels them with the application id)."""
        driver = self.kube.get("-n", self.ns, "pod", pod)
        app = driver["metadata"]["labels"]["spark-app-selector"]
        items: list[dict[str, Any]] = self.kube.get(
            "-n", self.ns, "pods", "-l", f"spark-app-selector={app},spark-role=executor"
        )["items"]
        return items

    def delete(self, pod: str, *extra: str) -> None:
        self.kube.run("delete", "-n", self.ns, "pod", pod, "--wait=false", *extra)

    def finish(self, pod: str, proc: subprocess.Popen[bytes], timeout: float) -> str:
        """Wait for a batch driver to end; returns its log, failing the test unless it Succeeded."""
        phase = self.wait_phase(pod, ("Succeeded", "Failed"), timeout)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        text = self.save_log(pod).read_text()
        assert phase == "Succeeded", f"driver {pod} {phase}:\n{text[-6000:]}"
        return text


def query_progress(log: str, query: str) -> list[dict[str, Any]]:
    """The progress reports of streaming query `query` that a driver logged (Spark logs each one, as
    JSON over several lines, after "Streaming query made progress: ")."""
    decoder = json.JSONDecoder()
    out = []
    for chunk in log.split("Streaming query made progress: ")[1:]:
        try:
            report, _end = decoder.raw_decode(chunk)
        except json.JSONDecodeError:  # a log cut in the middle of a report
            continue
        if report.get("name") == query:
            out.append(report)
    return out


def json_line(log: str, prefix: str) -> dict[str, Any]:
    """The JSON of the last `<prefix> {...}` line a pipeline printed."""
    lines = [line for line in log.splitlines() if line.startswith(prefix + " ")]
    assert lines, f"no '{prefix}' line in the log:\n{log[-4000:]}"
    value: dict[str, Any] = json.loads(lines[-1][len(prefix) + 1 :])
    return value


# ---------------------------------------------------------------------------------------------- the volume


@dataclass
class Volume:
    """The job volume (mounted at /data in the pods) as the node sees it."""

    host: Path
    mount: str = "/data"

    @classmethod
    def of_claim(cls, kube: Kube, ns: str, claim: str) -> Volume:
        pvc = kube.get("-n", ns, "pvc", claim)
        pv = kube.get("pv", pvc["spec"]["volumeName"])
        spec = pv["spec"]
        path = (spec.get("hostPath") or spec.get("local") or {}).get("path")
        assert path, f"volume of {claim} has no node path: {spec}"
        return cls(Path(path))

    def path(self, pod_path: str) -> Path:
        rel = Path(pod_path.removeprefix("file:")).relative_to(self.mount)
        return self.host / rel

    def parquet(self, pod_path: str) -> pa.Table:
        """A Parquet directory written by a batch job (files starting with _ or . are not data)."""
        return ds.dataset(self.path(pod_path), format="parquet").to_table()

    def partitioned(self, pod_path: str) -> pa.Table:
        base = self.path(pod_path)
        if not base.exists():
            return pa.table({})
        return ds.dataset(base, format="parquet", partitioning="hive").to_table()

    def sink_files(self, pod_path: str) -> list[Path]:
        """Files the streaming file sink committed to `pod_path`: its _spark_metadata log, from the
        newest compaction on (a compacted entry holds every file before it)."""
        log_dir = self.path(pod_path) / "_spark_metadata"
        if not log_dir.exists():
            return []
        entries: dict[int, Path] = {}
        for f in log_dir.iterdir():
            stem = f.name.removesuffix(".compact")
            if stem.isdigit():
                entries[int(stem)] = f
        compacted = [n for n, f in entries.items() if f.name.endswith(".compact")]
        first = max(compacted) if compacted else 0
        files: dict[str, str] = {}
        for n in sorted(n for n in entries if n >= first):
            for line in entries[n].read_text().splitlines()[1:]:  # line 1 is the version
                item = json.loads(line)
                if item.get("action", "add") == "add":
                    files[item["path"]] = item["path"]
                else:
                    files.pop(item["path"], None)
        return [self.path(p.split("://", 1)[-1] if "://" in p else p) for p in files]

    def sink_table(self, pod_path: str) -> pa.Table:
        files = self.sink_files(pod_path)
        if not files:
            return pa.table({})
        return pa.concat_tables([pq.read_table(f) for f in files])


def wait_until(what: str, check: Callable[[], Any], timeout: float, interval: float = 2.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")
