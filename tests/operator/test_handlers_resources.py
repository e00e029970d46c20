"""rocketcluster.handlers_resources against a real NameServer and broker on loopback (tests/local_cluster.py), with
an in-memory stand-in for the Kubernetes API (the objects, merge-patched status, Events): the passes create,
adopt, update and report; a second pass on an unchanged state writes nothing; deletion follows deletionPolicy."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from broker.client.admin import Admin
from broker.client.admin import requests as admin_requests
from rocketcluster import handlers, handlers_resources, names
from rocketcluster.handlers_resources import CONSUMER_GROUP, TOPIC, delete_resource, reconcile_resource
from tests.local_cluster import LocalCluster, local_cluster


class FakeKube:
    """The calls handlers_resources makes, on a dict of objects by (kind, name)."""

    def __init__(self, namesrv_port: int) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.events: list[tuple[str, str, str]] = []
        self.status_writes = 0
        nameserver = {
            "metadata": {"name": "rt-nameserver-0", "labels": {names.LABEL_COMPONENT: names.COMPONENT_NAMESERVER}},
            "status": {"podIP": "127.0.0.1", "conditions": [{"type": "Ready", "status": "True"}]},
        }
        self.pods = [nameserver]
        self.namesrv_port = namesrv_port

    def add(self, kind: str, name: str, spec: dict[str, Any], generation: int = 1) -> dict[str, Any]:
        body = {
            "apiVersion": names.API_VERSION,
            "kind": kind,
            "metadata": {
                "name": name,
                "namespace": "ns",
                "uid": f"uid-{kind}-{name}",
                "generation": generation,
                "creationTimestamp": "2026-01-01T00:00:00Z",
            },
            "spec": spec,
        }
        self.objects[(kind, name)] = body
        return body

    def edit(self, kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        body = self.objects[(kind, name)]
        body["spec"] = spec
        body["metadata"]["generation"] += 1
        return body

    async def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        found = self.objects.get((kind, name))
        return copy.deepcopy(found) if found is not None else None

    async def list(self, api_version: str, kind: str, namespace: str | None, selector: Mapping[str, str]) -> list[Any]:
        if kind == "Pod":
            return copy.deepcopy(self.pods)
        return [copy.deepcopy(b) for (k, _), b in self.objects.items() if k == kind]

    async def patch_status(self, namespace: str, name: str, status: Mapping[str, Any], kind: str = "") -> Any:
        body = self.objects[(kind, name)]
        merged = dict(body.get("status") or {})
        for key, value in status.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        body["status"] = merged
        self.status_writes += 1
        return body

    async def post_event(self, about: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))


def _ready(body: Mapping[str, Any]) -> dict[str, Any]:
    return next(c for c in body["status"]["conditions"] if c["type"] == "Ready")


async def _held(namesrv: str, what: str, name: str) -> Any:
    async with Admin(namesrv) as admin:
        addr = (await admin.cluster_info()).masters("rt")[0]
        if what == "topic":
            topics = await admin_requests.get_all_topic_configs(admin.instance.api, addr)
            return topics[name].to_json() if name in topics else None
        return (await admin_requests.get_all_subscription_groups(admin.instance.api, addr)).get(name)


CLUSTER_SPEC = {"nameServer": {"replicas": 1}, "broker": {"groups": 1, "slavesPerGroup": 0}}


@pytest.fixture
def kube(monkeypatch: pytest.MonkeyPatch) -> FakeKube:
    fake = FakeKube(0)
    monkeypatch.setattr(handlers, "_kube", fake)
    return fake


def _run(tmp_path: Path, kube: FakeKube, monkeypatch: pytest.MonkeyPatch, scenario: Any) -> None:
    async def main() -> None:
        async with local_cluster(tmp_path, cluster_name="rt", broker_name="rt-0") as cluster:
            assert isinstance(cluster, LocalCluster)
            monkeypatch.setattr(names, "NAMESERVER_PORT", int(cluster.namesrv_addr.rsplit(":", 1)[1]))
            kube.add(names.KIND, "rt", CLUSTER_SPEC)
            await scenario(cluster.namesrv_addr)

    asyncio.run(main())


def test_a_topic_is_created_then_left_alone_then_updated_then_deleted(
    tmp_path: Path, kube: FakeKube, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario(namesrv: str) -> None:
        body = kube.add(names.TOPIC_KIND, "orders", {"clusterRef": "rt", "queues": 4, "deletionPolicy": "Delete"})
        await reconcile_resource(TOPIC, body)
        stored = kube.objects[(names.TOPIC_KIND, "orders")]
        assert _ready(stored)["reason"] == "Applied", stored["status"]
        assert stored["status"]["adopted"] is False and stored["status"]["brokerNames"] == ["rt-0"]
        held = await _held(namesrv, "topic", "orders")
        assert (held["readQueueNums"], held["writeQueueNums"], held["perm"]) == (4, 4, 6)
        assert held["attributes"] == {"message.type": "NORMAL"}
        writes, events = kube.status_writes, len(kube.events)
        await reconcile_resource(TOPIC, kube.objects[(names.TOPIC_KIND, "orders")])  # nothing changed
        assert (kube.status_writes, len(kube.events)) == (writes, events), kube.events[events:]

        body = kube.edit(
            names.TOPIC_KIND, "orders", {"clusterRef": "rt", "readQueueNums": 2, "deletionPolicy": "Delete"}
        )
        await reconcile_resource(TOPIC, body)
        held = await _held(namesrv, "topic", "orders")
        assert (held["readQueueNums"], held["writeQueueNums"]) == (2, 8)
        assert kube.objects[(names.TOPIC_KIND, "orders")]["status"]["observedGeneration"] == 2

        await delete_resource(TOPIC, kube.objects[(names.TOPIC_KIND, "orders")])
        assert await _held(namesrv, "topic", "orders") is None
        assert kube.events[-1][1] == "Deleted"

    _run(tmp_path, kube, monkeypatch, scenario)


def test_an_existing_topic_is_adopted_until_the_spec_changes(
    tmp_path: Path, kube: FakeKube, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario(namesrv: str) -> None:
        async with Admin(namesrv) as admin:
            await admin.create_topic("Old", cluster="rt", read_queue_nums=2, write_queue_nums=2)
        body = kube.add(names.TOPIC_KIND, "old", {"clusterRef": "rt", "topicName": "Old"})
        await reconcile_resource(TOPIC, body)
        stored = kube.objects[(names.TOPIC_KIND, "old")]
        ready = _ready(stored)
        assert (ready["status"], ready["reason"]) == ("False", "Differs"), ready
        assert "readQueueNums: has 2, spec says 8" in ready["message"]
        assert (stored["status"]["adopted"], stored["status"]["adoptedGeneration"]) == (True, 1)
        await reconcile_resource(TOPIC, stored)  # the resync: still not overwritten
        assert (await _held(namesrv, "topic", "Old"))["readQueueNums"] == 2
        assert ("Normal", "Adopted") in {(t, r) for t, r, _ in kube.events}

        body = kube.edit(names.TOPIC_KIND, "old", {"clusterRef": "rt", "topicName": "Old", "queues": 3})
        await reconcile_resource(TOPIC, body)
        assert _ready(kube.objects[(names.TOPIC_KIND, "old")])["reason"] == "Applied"
        assert (await _held(namesrv, "topic", "Old"))["readQueueNums"] == 3

        # a second resource naming the same topic is a conflict (the watch has shown both), and changes nothing
        other = kube.add(names.TOPIC_KIND, "old-too", {"clusterRef": "rt", "topicName": "Old", "queues": 9})
        other["metadata"]["creationTimestamp"] = "2026-02-01T00:00:00Z"
        for name in ("old", "old-too"):
            seen = handlers_resources._owner_facts(kube.objects[(names.TOPIC_KIND, name)])
            monkeypatch.setitem(handlers_resources._bodies, (names.TOPIC_KIND, "ns", name), seen)
        await reconcile_resource(TOPIC, other)
        assert _ready(kube.objects[(names.TOPIC_KIND, "old-too")])["reason"] == "Conflict"
        assert (await _held(namesrv, "topic", "Old"))["readQueueNums"] == 3

    _run(tmp_path, kube, monkeypatch, scenario)


def test_problems_are_conditions(tmp_path: Path, kube: FakeKube, monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario(namesrv: str) -> None:
        cases = [
            ("nocluster", {"clusterRef": "other"}, "ClusterNotFound"),
            ("bad", {"clusterRef": "rt", "queues": 0}, "InvalidSpec"),
            ("my.topic", {"clusterRef": "rt"}, "InvalidSpec"),
            ("rt-0", {"clusterRef": "rt"}, "InvalidSpec"),  # the broker group's own topic
        ]
        for name, spec, reason in cases:
            await reconcile_resource(TOPIC, kube.add(names.TOPIC_KIND, name, spec))
            ready = _ready(kube.objects[(names.TOPIC_KIND, name)])
            assert (ready["status"], ready["reason"]) == ("False", reason), (name, ready)
        kube.pods = []
        await reconcile_resource(TOPIC, kube.add(names.TOPIC_KIND, "waiting", {"clusterRef": "rt"}))
        assert _ready(kube.objects[(names.TOPIC_KIND, "waiting")])["reason"] == "ClusterNotReady"

    _run(tmp_path, kube, monkeypatch, scenario)


def test_a_consumer_group_is_applied_and_deleted(
    tmp_path: Path, kube: FakeKube, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [1000, 5000]}}

    async def scenario(namesrv: str) -> None:
        spec = {"clusterRef": "rt", "groupName": "GID_b", "retryMaxTimes": 5, "groupRetryPolicy": policy}
        body = kube.add(names.CONSUMER_GROUP_KIND, "b", spec | {"deletionPolicy": "Delete"})
        await reconcile_resource(CONSUMER_GROUP, body)
        assert _ready(kube.objects[(names.CONSUMER_GROUP_KIND, "b")])["reason"] == "Applied"
        held = await _held(namesrv, "group", "GID_b")
        assert held["retryMaxTimes"] == 5 and held["groupRetryPolicy"] == policy and held["consumeEnable"] is True
        writes = kube.status_writes
        await reconcile_resource(CONSUMER_GROUP, kube.objects[(names.CONSUMER_GROUP_KIND, "b")])
        assert kube.status_writes == writes
        await delete_resource(CONSUMER_GROUP, kube.objects[(names.CONSUMER_GROUP_KIND, "b")])
        assert await _held(namesrv, "group", "GID_b") is None
        await delete_resource(CONSUMER_GROUP, kube.objects[(names.CONSUMER_GROUP_KIND, "b")])  # gone already: fine

    _run(tmp_path, kube, monkeypatch, scenario)


def test_the_resync_hook_is_registered() -> None:
    assert handlers_resources.schedule_all in handlers.RESYNC_HOOKS


def test_kopf_sees_watches_and_deletion_handlers_only_for_delete_and_no_timers() -> None:
    """A finalizer only where deletionPolicy is Delete: kopf adds one for a matching on.delete handler, and for
    any resource with a timer or daemon (none here)."""
    import kopf

    registry = kopf.get_default_registry()
    ours = {names.TOPIC_PLURAL, names.CONSUMER_GROUP_PLURAL}
    changing = [h for h in registry._changing.get_all_handlers() if h.selector and h.selector.any_name in ours]
    assert sorted((h.selector.any_name, h.reason, h.field, h.value) for h in changing if h.selector) == [
        (names.CONSUMER_GROUP_PLURAL, "delete", ("spec", "deletionPolicy"), "Delete"),
        (names.TOPIC_PLURAL, "delete", ("spec", "deletionPolicy"), "Delete"),
    ]
    assert not [h for h in registry._spawning.get_all_handlers() if h.selector and h.selector.any_name in ours]
    watched = {h.selector.any_name for h in registry._watching.get_all_handlers() if h.selector}
    assert ours <= watched
