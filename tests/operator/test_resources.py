"""RocketTopic and RocketConsumerGroup: the models refuse hostile specs with a message naming the field, render
gives each master the config the spec says (keeping what the spec does not manage), and the plan writes what it
should, adopts what existed, and tells why in the Ready condition. All pure: tables, no cluster."""

from __future__ import annotations

from typing import Any

import pytest

from rocketcluster.model import SpecError
from rocketcluster.model_resources import name_problem, parse_group_spec, parse_topic_spec
from rocketcluster.plan_resources import (
    Master,
    ResourceObservation,
    broker_made_topic,
    finish,
    older_owner,
    plan_resource,
    resource_status,
)
from rocketcluster.render_resources import (
    GROUP_FIELDS,
    TOPIC_FIELDS,
    differences,
    render_group,
    render_topic,
    topic_header_fields,
)

# -- the models -----------------------------------------------------------------------------------------------

_TOPIC_REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("no clusterRef", {}, "spec.clusterRef: Field required"),
    ("clusterRef not a name", {"clusterRef": "My_Cluster"}, "spec.clusterRef"),
    ("zero queues", {"clusterRef": "c", "queues": 0}, "spec.queues"),
    ("too many queues", {"clusterRef": "c", "readQueueNums": 1025}, "spec.readQueueNums"),
    ("queues as a string", {"clusterRef": "c", "queues": "8"}, "spec.queues: Input should be a valid integer"),
    ("queues with readQueueNums", {"clusterRef": "c", "queues": 4, "readQueueNums": 4}, "give either queues"),
    ("queues with writeQueueNums", {"clusterRef": "c", "queues": 4, "writeQueueNums": 2}, "give either queues"),
    ("bad name", {"clusterRef": "c", "topicName": "a.b"}, "spec.topicName"),
    ("name too long", {"clusterRef": "c", "topicName": "t" * 128}, "spec.topicName"),
    ("system topic", {"clusterRef": "c", "topicName": "SCHEDULE_TOPIC_XXXX"}, "is a system topic"),
    ("rmq_sys_ topic", {"clusterRef": "c", "topicName": "rmq_sys_wheel"}, "is a system topic"),
    ("unknown messageType", {"clusterRef": "c", "messageType": "BATCH"}, "spec.messageType"),
    ("order with DELAY", {"clusterRef": "c", "order": True, "messageType": "DELAY"}, "order needs messageType"),
    ("order with TRANSACTION", {"clusterRef": "c", "order": True, "messageType": "TRANSACTION"}, "order needs"),
    ("bad perm", {"clusterRef": "c", "perm": "RWX"}, "spec.perm"),
    ("perm as bits", {"clusterRef": "c", "perm": 6}, "spec.perm"),
    ("message.type attribute", {"clusterRef": "c", "attributes": {"message.type": "FIFO"}}, "set by messageType"),
    ("attribute key with =", {"clusterRef": "c", "attributes": {"a=b": "1"}}, "is not an attribute name"),
    ("attribute value with ,", {"clusterRef": "c", "attributes": {"queue.type": "a,b"}}, "spec.attributes"),
    ("attribute not a string", {"clusterRef": "c", "attributes": {"k": 1}}, "spec.attributes.k"),
    ("bad deletionPolicy", {"clusterRef": "c", "deletionPolicy": "Orphan"}, "spec.deletionPolicy"),
    ("unknown field", {"clusterRef": "c", "partitions": 3}, "spec.partitions: unknown field"),
]


@pytest.mark.parametrize(("raw", "words"), [r[1:] for r in _TOPIC_REFUSED], ids=[r[0] for r in _TOPIC_REFUSED])
def test_a_hostile_topic_spec_is_refused_naming_the_field(raw: dict[str, Any], words: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_topic_spec(raw)
    assert words in str(caught.value)


def test_a_topic_spec_not_an_object_is_refused() -> None:
    with pytest.raises(SpecError, match="must be an object"):
        parse_topic_spec([1])


@pytest.mark.parametrize(
    ("raw", "queues"),
    [
        ({"clusterRef": "c"}, (8, 8)),
        ({"clusterRef": "c", "queues": 3}, (3, 3)),
        ({"clusterRef": "c", "readQueueNums": 2}, (2, 8)),
        ({"clusterRef": "c", "readQueueNums": 2, "writeQueueNums": 1024}, (2, 1024)),
    ],
)
def test_queue_numbers(raw: dict[str, Any], queues: tuple[int, int]) -> None:
    assert parse_topic_spec(raw).queue_nums() == queues


def test_topic_defaults_lose_nothing() -> None:
    spec = parse_topic_spec({"clusterRef": "c"})
    assert spec.deletion_policy == "Retain"
    assert (spec.perm, spec.message_type, spec.order) == ("RW", "NORMAL", False)
    assert spec.effective_topic_name("orders") == "orders"
    assert parse_topic_spec({"clusterRef": "c", "topicName": "%RETRY%x|y"}).effective_topic_name("n") == "%RETRY%x|y"


_GROUP_REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("negative retries", {"clusterRef": "c", "retryMaxTimes": -1}, "spec.retryMaxTimes"),
    ("retries as a string", {"clusterRef": "c", "retryMaxTimes": "3"}, "spec.retryMaxTimes"),
    ("zero retry queues", {"clusterRef": "c", "retryQueueNums": 0}, "spec.retryQueueNums"),
    ("system group", {"clusterRef": "c", "groupName": "TOOLS_CONSUMER"}, "is a system group"),
    ("CID_RMQ_SYS_ group", {"clusterRef": "c", "groupName": "CID_RMQ_SYS_TRANS"}, "is a system group"),
    ("bad name", {"clusterRef": "c", "groupName": "a b"}, "spec.groupName"),
    ("unknown policy type", {"clusterRef": "c", "groupRetryPolicy": {"type": "LINEAR"}}, "groupRetryPolicy.type"),
    (
        "exponential with CUSTOMIZED",
        {"clusterRef": "c", "groupRetryPolicy": {"exponentialRetryPolicy": {"initial": 1}}},
        "goes with type EXPONENTIAL",
    ),
    (
        "customized with EXPONENTIAL",
        {"clusterRef": "c", "groupRetryPolicy": {"type": "EXPONENTIAL", "customizedRetryPolicy": {"next": [1]}}},
        "goes with type CUSTOMIZED",
    ),
    (
        "max below initial",
        {
            "clusterRef": "c",
            "groupRetryPolicy": {"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 10, "max": 5}},
        },
        "max (5) is below initial (10)",
    ),
    (
        "empty delays",
        {"clusterRef": "c", "groupRetryPolicy": {"customizedRetryPolicy": {"next": []}}},
        "customizedRetryPolicy.next",
    ),
    (
        "zero delay",
        {"clusterRef": "c", "groupRetryPolicy": {"customizedRetryPolicy": {"next": [1000, 0]}}},
        "customizedRetryPolicy.next[1]",
    ),
]


@pytest.mark.parametrize(("raw", "words"), [r[1:] for r in _GROUP_REFUSED], ids=[r[0] for r in _GROUP_REFUSED])
def test_a_hostile_group_spec_is_refused_naming_the_field(raw: dict[str, Any], words: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_group_spec(raw)
    assert words in str(caught.value)


@pytest.mark.parametrize(
    ("kind", "name", "problem"),
    [
        ("topic", "orders", None),
        ("topic", "my.topic", "is not a topic name"),
        ("topic", "x" * 128, "1 to 127"),
        ("topic", "TBW102", "system topic"),
        ("group", "g" * 200, None),
        ("group", "SELF_TEST_C_GROUP", "system group"),
    ],
)
def test_name_problem(kind: Any, name: str, problem: str | None) -> None:
    found = name_problem(kind, name)
    assert (found is None) if problem is None else (found is not None and problem in found)


# -- render ---------------------------------------------------------------------------------------------------


def test_render_topic_maps_rocketmq_names_and_keeps_what_it_does_not_manage() -> None:
    spec = parse_topic_spec(
        {"clusterRef": "c", "queues": 4, "perm": "R", "messageType": "FIFO", "order": True, "attributes": {"a": "1"}}
    )
    fresh = render_topic(spec, "Orders", None)
    assert fresh == {
        "topicName": "Orders",
        "readQueueNums": 4,
        "writeQueueNums": 4,
        "perm": 4,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0,
        "order": True,
        "attributes": {"a": "1", "message.type": "FIFO"},
    }
    kept = render_topic(spec, "Orders", {"topicFilterType": "MULTI_TAG", "topicSysFlag": 1})
    assert (kept["topicFilterType"], kept["topicSysFlag"]) == ("MULTI_TAG", 1)
    assert topic_header_fields(fresh) == {
        "topic": "Orders",
        "defaultTopic": "TBW102",
        "readQueueNums": "4",
        "writeQueueNums": "4",
        "perm": "4",
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0",
        "order": "true",
        "attributes": "+a=1,+message.type=FIFO",
    }


@pytest.mark.parametrize(("perm", "bits"), [("RW", 6), ("R", 4), ("W", 2)])
def test_perm_bits(perm: str, bits: int) -> None:
    assert render_topic(parse_topic_spec({"clusterRef": "c", "perm": perm}), "t", None)["perm"] == bits


def test_render_group_lays_the_spec_over_what_the_broker_holds() -> None:
    spec = parse_group_spec(
        {
            "clusterRef": "c",
            "retryMaxTimes": 3,
            "groupRetryPolicy": {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [1000, 2000]}},
        }
    )
    existing = {"groupName": "g", "consumeEnable": False, "brokerId": 1, "retryMaxTimes": 16}
    out = render_group(spec, "g", existing)
    assert out["consumeEnable"] is False and out["brokerId"] == 1  # not the spec's to change
    assert out["retryMaxTimes"] == 3 and out["retryQueueNums"] == 1
    assert out["groupRetryPolicy"] == {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [1000, 2000]}}
    assert "groupRetryPolicy" not in render_group(parse_group_spec({"clusterRef": "c"}), "g", None)


@pytest.mark.parametrize(
    ("existing", "found"),
    [
        ({"readQueueNums": 8, "writeQueueNums": 8, "perm": 6, "order": False, "attributes": {}}, []),
        (
            {
                "readQueueNums": 8,
                "writeQueueNums": 8,
                "perm": 6,
                "order": False,
                "attributes": {"message.type": "NORMAL"},
            },
            [],
        ),
        (
            {"readQueueNums": 4, "writeQueueNums": 8, "perm": 6, "order": False},
            ["readQueueNums: has 4, spec says 8"],
        ),
        (
            {"readQueueNums": 8, "writeQueueNums": 8, "perm": 2, "order": True, "attributes": {"x": "y"}},
            [
                "perm: has 2, spec says 6",
                "order: has true, spec says false",
                "attributes: has {message.type=NORMAL, x=y}, spec says {message.type=NORMAL}",
            ],
        ),
    ],
)
def test_topic_differences(existing: dict[str, Any], found: list[str]) -> None:
    desired = render_topic(parse_topic_spec({"clusterRef": "c"}), "t", existing)
    assert differences(existing, desired, TOPIC_FIELDS) == found


def test_group_differences_ignore_an_unmanaged_retry_policy_and_java_nulls() -> None:
    existing = {"groupName": "g", "retryMaxTimes": 16, "retryQueueNums": 1, "consumeBroadcastEnable": True}
    existing |= {"consumeMessageOrderly": False, "consumeFromMinEnable": True, "groupRetryPolicy": {"type": "X"}}
    assert differences(existing, render_group(parse_group_spec({"clusterRef": "c"}), "g", existing), GROUP_FIELDS) == []
    spec = parse_group_spec({"clusterRef": "c", "groupRetryPolicy": {"type": "CUSTOMIZED"}})
    java = existing | {"groupRetryPolicy": {"type": "CUSTOMIZED", "exponentialRetryPolicy": None}}
    assert differences(java, render_group(spec, "g", java), GROUP_FIELDS) == []


# -- plan -----------------------------------------------------------------------------------------------------

SPEC = parse_topic_spec({"clusterRef": "c", "queues": 8})
WANT = render_topic(SPEC, "t", None)
OTHER = {**WANT, "readQueueNums": 4, "writeQueueNums": 4}


def _desired(existing: Any) -> dict[str, Any]:
    return render_topic(SPEC, "t", existing)


def _observe(*masters: tuple[str, Any], generation: int = 1, **kw: Any) -> ResourceObservation:
    found = [Master(name, f"10.0.0.{i}:10911", existing) for i, (name, existing) in enumerate(masters)]
    return ResourceObservation(kind="topic", name="t", generation=generation, masters=found, **kw)


def _plan(observed: ResourceObservation) -> Any:
    return plan_resource(observed, _desired, TOPIC_FIELDS)


_PLANS: list[tuple[str, ResourceObservation, list[str], str, str, bool | None]] = [
    # (case, observation, brokers written, Ready, reason, adopted)
    ("new topic on two groups", _observe(("c-0", None), ("c-1", None)), ["c-0", "c-1"], "True", "Applied", False),
    ("in place already", _observe(("c-0", WANT), adopted=False), [], "True", "Applied", False),
    (
        "scale-out: the new group gets it",
        _observe(("c-0", WANT), ("c-1", None), adopted=False),
        ["c-1"],
        "True",
        "Applied",
        False,
    ),
    ("drift is put back", _observe(("c-0", OTHER), adopted=False, generation=3), ["c-0"], "True", "Applied", False),
    ("first sight of an equal topic: adopted", _observe(("c-0", WANT)), [], "True", "Adopted", True),
    ("first sight of another topic: adopted, differs", _observe(("c-0", OTHER)), [], "False", "Differs", True),
    (
        "adopted and unchanged spec: not overwritten",
        _observe(("c-0", OTHER), adopted=True, adopted_generation=2, generation=2),
        [],
        "False",
        "Differs",
        True,
    ),
    (
        "adopted, missing on a new group: created there",
        _observe(("c-0", WANT), ("c-1", None), adopted=True, adopted_generation=1),
        ["c-1"],
        "True",
        "Adopted",
        True,
    ),
    (
        "adopted, then the spec was edited: applied",
        _observe(("c-0", OTHER), adopted=True, adopted_generation=1, generation=2),
        ["c-0"],
        "True",
        "Applied",
        True,
    ),
    ("no master registered", _observe(missing=["c-0"]), [], "False", "ClusterNotReady", None),
    ("cluster not found", _observe(problem=("ClusterNotFound", "no c")), [], "False", "ClusterNotFound", None),
    ("conflict", _observe(("c-0", None), problem=("Conflict", "x owns it")), [], "False", "Conflict", None),
]


@pytest.mark.parametrize(
    ("observed", "written", "ready", "reason", "adopted"), [p[1:] for p in _PLANS], ids=[p[0] for p in _PLANS]
)
def test_plan(observed: ResourceObservation, written: list[str], ready: str, reason: str, adopted: bool | None) -> None:
    plan = _plan(observed)
    assert [w.broker_name for w in plan.writes] == written
    assert plan.ready[:2] == (ready, reason), plan.ready
    assert plan.adopted is adopted
    for write in plan.writes:
        assert write.config == _desired(
            next(m.existing for m in observed.masters if m.broker_name == write.broker_name)
        )


def test_a_difference_is_told_with_the_group_and_the_fields() -> None:
    plan = _plan(_observe(("c-0", OTHER)))
    assert plan.adopted_generation == 1
    assert "c-0: readQueueNums: has 4, spec says 8; writeQueueNums: has 4, spec says 8" in plan.ready[2]
    assert "edit the spec" in plan.ready[2]


def test_groups_without_a_master_are_named() -> None:
    plan = _plan(_observe(("c-0", None), missing=["c-1"]))
    assert plan.ready[:2] == ("True", "Applied") and "c-1 have no master registered yet" in plan.ready[2]


@pytest.mark.parametrize(
    ("failures", "unreachable", "reason"),
    [
        ({}, False, "Applied"),
        ({"c-1": "code 1"}, False, "BrokerRefused"),
        ({"c-0": "timeout"}, True, "BrokerUnreachable"),
    ],
)
def test_finish(failures: dict[str, str], unreachable: bool, reason: str) -> None:
    ready = finish(_plan(_observe(("c-0", None), ("c-1", None))), failures, unreachable)
    assert ready[1] == reason and (ready[0] == "True") == (not failures)
    for name, why in failures.items():
        assert f"{name}: {why}" in ready[2]


def _body(name: str, created: str, topic: str | None = None, uid: str | None = None, **meta: Any) -> dict[str, Any]:
    spec = {"clusterRef": "c"} | ({"topicName": topic} if topic else {})
    return {"metadata": {"name": name, "uid": uid or name, "creationTimestamp": created, **meta}, "spec": spec}


def test_the_older_resource_owns_a_name() -> None:
    def key(b: Any) -> Any:
        return (b["spec"]["clusterRef"], b["spec"].get("topicName") or b["metadata"]["name"])

    first, second = _body("a", "2026-01-01T00:00:00Z", "T"), _body("b", "2026-01-02T00:00:00Z", "T")
    others = [first, second, _body("T", "2025-01-01T00:00:00Z", deletionTimestamp="x")]
    assert older_owner(second, others, key) == "a"
    assert older_owner(first, others, key) is None
    assert older_owner(_body("c", "2024-01-01T00:00:00Z", "U"), others, key) is None


def test_status_records_adoption_and_keeps_transition_times() -> None:
    plan = _plan(_observe(("c-0", OTHER)))
    status = resource_status(
        name_field="topicName",
        name="t",
        cluster_name="c",
        generation=1,
        ready=plan.ready,
        plan=plan,
        old={},
        now_iso="T1",
    )
    assert status["adopted"] is True and status["adoptedGeneration"] == 1 and status["observedGeneration"] == 1
    assert status["topicName"] == "t" and status["clusterName"] == "c"
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"], ready["lastTransitionTime"]) == ("False", "Differs", "T1")
    again = resource_status(
        name_field="topicName",
        name="t",
        cluster_name="c",
        generation=1,
        ready=plan.ready,
        plan=plan,
        old=status,
        now_iso="T2",
    )
    assert again == status  # nothing changed: no write


def test_an_invalid_spec_is_its_own_condition_and_keeps_adoption() -> None:
    status = resource_status(
        name_field="topicName",
        name=None,
        cluster_name=None,
        generation=4,
        ready=("False", "InvalidSpec", "spec.queues: ..."),
        plan=None,
        old={"adopted": True, "adoptedGeneration": 2},
        now_iso="T",
        invalid=True,
    )
    kinds = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
    assert kinds == {"Ready": ("False", "InvalidSpec"), "InvalidSpec": ("True", "InvalidSpec")}
    assert "adopted" not in status  # a merge patch leaves it as it was


@pytest.mark.parametrize(
    ("name", "owned"),
    [("rt", True), ("rt_REPLY_TOPIC", True), ("rt-0", True), ("rt-12", True), ("rt-x", False), ("orders", False)],
)
def test_the_brokers_own_topics_are_not_for_a_resource(name: str, owned: bool) -> None:
    assert (broker_made_topic(name, "rt") is not None) == owned
