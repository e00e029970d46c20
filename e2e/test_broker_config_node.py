"""spec.broker.config on the node tier: a key the broker applies at run time changes without a restart, a key it
reads only at start rolls the pods.

One light RocketCluster (1 NameServer, one group without a slave, ephemeral storage, the image of this tree):
- setting maxMessageSize in spec.broker.config restarts no pod (same pod uid, same restartCount), the broker
  reports the new value (our `mqadmin getBrokerConfig`), a producer on the node sees it (a message over the new
  limit is refused, one under it is stored), status.brokerConfig lists the key as live and an Event
  CONFIG_APPLIED_LIVE says so; the broker logged that its -c file (the ConfigMap mount) is read-only, so the
  change lasts until its next start;
- then setting waitTimeMillsInSendQueue (read once, by the send processor) rolls the broker pod (a new uid);
  the restarted broker reports it and still holds maxMessageSize (the ConfigMap carries every key), and
  status.brokerConfig lists it under restartOnly.
The operator's log must hold no traceback.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from broker.client.admin import Admin
from broker.client.errors import RocketError
from broker.client.message import Message
from broker.client.producer import Producer
from e2e.node_checks import wait_answering
from e2e.operator_harness import CRD_FILE, OperatorProcess, running_operator

if TYPE_CHECKING:
    from e2e.conftest import Kube

pytestmark = [pytest.mark.k8s, pytest.mark.node]

CLUSTER = "live"
BROKER_POD = f"{CLUSTER}-broker-0-0"
MQADMIN = Path(sys.executable).parent / "mqadmin"


@pytest.fixture(scope="module")
def ns(k8s_node: Kube) -> Iterator[str]:
    name = f"brokerconf-{uuid.uuid4().hex[:6]}"
    k8s_node.run("apply", "--server-side", "-f", str(CRD_FILE.parent))
    k8s_node.wait_established("rocketclusters.rocketcluster.io")
    k8s_node.run("create", "namespace", name)
    yield name
    k8s_node.run("delete", "rmq", "--all", "-n", name, "--wait=true", "--timeout=90s", check=False, timeout=120)
    k8s_node.run("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def operator(k8s_node: Kube, ns: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    with running_operator(k8s_node, [ns], tmp_path_factory.mktemp("op")) as proc:
        yield proc


def _current(kube: Kube, ns: str) -> dict[str, Any] | None:
    """The status once it describes the current generation and the cluster is Ready and settled."""
    obj = kube.get("-n", ns, "rmq", CLUSTER)
    status = obj.get("status") or {}
    conditions = {c["type"]: c["status"] for c in status.get("conditions", [])}
    if status.get("observedGeneration") != obj["metadata"]["generation"]:
        return None
    if conditions.get("Ready") != "True" or conditions.get("Progressing") != "False":
        return None
    return status


@pytest.fixture(scope="module")
def namesrv(k8s_node: Kube, ns: str, broker_image: str, operator: OperatorProcess) -> str:
    spec = {
        "image": broker_image,
        "imagePullPolicy": "Never",
        "nameServer": {"replicas": 1},
        "broker": {"groups": 1, "slavesPerGroup": 0},
        "storage": {"type": "ephemeral", "size": "1Gi"},
    }
    body = {"apiVersion": "rocketcluster.io/v1alpha1", "kind": "RocketCluster", "metadata": {"name": CLUSTER}}
    k8s_node.apply(json.dumps(body | {"spec": spec}), namespace=ns)
    k8s_node.wait_for("the cluster Ready", lambda: _current(k8s_node, ns), timeout=300, interval=1)
    ip = k8s_node.run("get", "-n", ns, "svc", f"{CLUSTER}-nameserver", "-o", "jsonpath={.spec.clusterIP}").strip()
    wait_answering(k8s_node, f"{ip}:9876")
    return f"{ip}:9876"


def _pod(kube: Kube, ns: str) -> tuple[str, int]:
    """The broker pod's uid and its container's restartCount."""
    pod = kube.get("-n", ns, "pod", BROKER_POD)
    statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
    return pod["metadata"]["uid"], int(statuses[0].get("restartCount", 0))


def _broker_config(namesrv: str) -> dict[str, str]:
    """Our `mqadmin getBrokerConfig -c` of the cluster's (only) broker: key -> value."""
    out = subprocess.run(
        [str(MQADMIN), "getBrokerConfig", "-n", namesrv, "-c", CLUSTER], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    found: dict[str, str] = {}
    for line in out.stdout.splitlines():
        key, sep, value = line.partition("=  ")
        if sep:
            found[key.strip()] = value.strip()
    return found


def _patch_config(kube: Kube, ns: str, config: dict[str, str]) -> None:
    patch = {"spec": {"broker": {"config": config}}}
    kube.run("patch", "-n", ns, "rmq", CLUSTER, "--type=merge", "-p", json.dumps(patch))


def _send(namesrv: str, topic: str, size: int) -> str:
    """Send one message of `size` bytes from the node: "ok", or the error the broker gave."""

    async def run() -> str:
        async with Producer(f"live-{uuid.uuid4().hex[:6]}", namesrv) as producer:
            try:
                await producer.send(Message(topic, os.urandom(size)))  # random: the client compresses no size away
            except RocketError as exc:
                return str(exc)
            return "ok"

    return asyncio.run(run())


def _create_topic(namesrv: str, topic: str) -> None:
    async def run() -> None:
        async with Admin(namesrv) as admin:
            await admin.create_topic(topic, cluster=CLUSTER, read_queue_nums=2, write_queue_nums=2)

    asyncio.run(run())


def test_a_live_key_changes_without_a_restart_and_a_start_key_rolls(k8s_node: Kube, ns: str, namesrv: str) -> None:
    kube = k8s_node
    topic = "LiveLimit"
    _create_topic(namesrv, topic)
    before = _pod(kube, ns)
    assert _broker_config(namesrv)["maxMessageSize"] == "4194304"
    assert _send(namesrv, topic, 100_000) == "ok"

    _patch_config(kube, ns, {"maxMessageSize": "65536"})
    kube.wait_for(
        "the broker holds maxMessageSize=65536",
        lambda: _broker_config(namesrv).get("maxMessageSize") == "65536",
        timeout=120,
        interval=2,
    )
    status = kube.wait_for("the status of the edit", lambda: _current(kube, ns), timeout=120, interval=1)
    assert status["brokerConfig"] == {"live": ["maxMessageSize"], "restartOnly": []}, status
    refused = _send(namesrv, topic, 100_000)
    assert refused != "ok" and "65536" in refused, refused
    assert _send(namesrv, topic, 1_000) == "ok"
    assert _pod(kube, ns) == before, "a live key restarted the broker"
    events = kube.run("get", "events", "-n", ns, "--field-selector", "reason=CONFIG_APPLIED_LIVE", "-o", "json")
    messages = [e["message"] for e in json.loads(events)["items"]]
    assert any("maxMessageSize=65536" in m and BROKER_POD in m for m in messages), messages
    print("\nlive:", messages, "pod", before)
    # the broker's -c file is the ConfigMap's read-only mount: the update applied in memory, with a warning
    logs = kube.run("logs", "-n", ns, BROKER_POD, "-c", "broker")
    assert "is read-only" in logs and "until the next start" in logs, logs[-3000:]

    _patch_config(kube, ns, {"waitTimeMillsInSendQueue": "300"})
    kube.wait_for("the broker pod replaced", lambda: _pod(kube, ns)[0] != before[0], timeout=300, interval=2)
    status = kube.wait_for("the cluster Ready after the roll", lambda: _current(kube, ns), timeout=300, interval=2)
    assert status["brokerConfig"] == {"live": ["maxMessageSize"], "restartOnly": ["waitTimeMillsInSendQueue"]}
    held = kube.wait_for(
        "the restarted broker registered",
        lambda: (c := _broker_config(namesrv)).get("waitTimeMillsInSendQueue") == "300" and c,
        timeout=120,
        interval=2,
    )
    assert held["maxMessageSize"] == "65536"  # from the ConfigMap, which carries every key
    print("rolled: pod", _pod(kube, ns))
