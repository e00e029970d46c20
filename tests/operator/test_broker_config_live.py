"""Broker keys applied at run time: the operator's copy of the broker's split, the planner's step that sets them
on the running brokers, what enters the pods' config hash, and the status that says which keys roll.

Tables over the pure parts (live_config, plan_config, plan, observe). The copy of the broker's lists is
checked against the broker's own modules, so a key the broker moves between live and restart fails here.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from broker.client.errors import RocketError
from broker.server.config import effective_properties, load_broker_config
from broker.server.config_update import LIVE_KEYS as BROKER_LIVE_KEYS
from broker.server.config_update import RESTART_KEYS as BROKER_RESTART_KEYS
from rocketcluster import names
from rocketcluster.broker_keys import BROKER_KEYS, LIVE_DEFAULTS, LIVE_KEYS, OWNED_KEYS, same_value
from rocketcluster.gather import AdminSession
from rocketcluster.live_config import live_split, live_wanted, restart_only
from rocketcluster.model import parse_spec
from rocketcluster.observe import BrokerFacts, GroupFacts, broker_config_status, build_observed
from rocketcluster.plan import LiveConfigObservation, Observed, UpdateBrokerConfig, plan
from rocketcluster.plan_config import plan_live_config
from tests.local_cluster import local_cluster
from tests.operator.test_plan import C, FakeCluster, bk


def test_the_operator_knows_the_brokers_live_keys_and_their_defaults() -> None:
    assert LIVE_KEYS == BROKER_LIVE_KEYS
    assert not LIVE_KEYS & BROKER_RESTART_KEYS
    defaults = effective_properties(load_broker_config({}))
    assert {k: defaults[k] for k in LIVE_KEYS} == dict(LIVE_DEFAULTS)
    assert set(BROKER_KEYS) >= LIVE_KEYS


@pytest.mark.parametrize(
    ("key", "a", "b", "same"),
    [
        ("autoCreateTopicEnable", "true", "True", True),
        ("autoCreateTopicEnable", "true", "false", False),
        ("maxMessageSize", "1024", " 1024 ", True),
        ("maxMessageSize", "1024", "+1024", True),
        ("maxMessageSize", "1024", "2048", False),
        ("maxMessageSize", "1024", "lots", False),  # a broker answering nonsense is set again
        ("diskSpaceCleanForciblyRatio", "0.85", ".85", True),
        ("diskSpaceCleanForciblyRatio", "0.85", "0.8", False),
        ("diskSpaceCleanForciblyRatio", "nan", "nan", True),  # the same text, whatever it means
        ("deleteWhen", "04", "4", False),
    ],
)
def test_values_compare_by_kind(key: str, a: str, b: str, same: bool) -> None:
    assert same_value(BROKER_KEYS[key], a, b) is same


@pytest.mark.parametrize(
    ("config", "before", "live", "restart", "wanted"),
    [
        ({}, [], [], [], {}),
        ({"deleteWhen": "03"}, [], ["deleteWhen"], [], {"deleteWhen": "03"}),
        (
            {"maxMessageSize": " 2048 ", "waitTimeMillsInSendQueue": "300"},
            [],
            ["maxMessageSize"],
            ["waitTimeMillsInSendQueue"],
            {"maxMessageSize": "2048"},
        ),
        # a key dropped from the spec goes back to the broker's default, live
        ({}, ["fileReservedTime"], [], [], {"fileReservedTime": "72"}),
        # hostile status: unknown and restart-only names in the record are ignored
        ({}, ["noSuchKey", "listenPort", "brokerPermission"], [], [], {}),
    ],
)
def test_live_split_and_wanted(
    config: dict[str, str], before: list[str], live: list[str], restart: list[str], wanted: dict[str, str]
) -> None:
    spec = parse_spec({"broker": {"config": config}})
    assert live_split(spec) == (live, restart)
    assert live_wanted(spec, before) == wanted


def test_restart_only_drops_the_live_keys() -> None:
    props = {"deleteWhen": "03", "brokerName": "b", "maxMessageSize": "1", "aclEnable": "true"}
    assert restart_only(props) == {"brokerName": "b", "aclEnable": "true"}
    assert "brokerPermission" in OWNED_KEYS and "brokerPermission" in LIVE_KEYS  # the drain's, never the spec's


def _observed(wanted: dict[str, str], held: dict[tuple[int, int], dict[str, str]], groups: int = 2) -> Observed:
    """A settled cluster of `groups` groups (two slaves each) whose brokers (group, ordinal) hold `held`."""
    base = FakeCluster(groups=2).observe()
    broker_groups = tuple(
        dataclasses.replace(
            g,
            live_config=tuple(
                LiveConfigObservation(o, f"10.0.{g.index}.{o}:10911", tuple(sorted(values.items())))
                for (gi, o), values in sorted(held.items())
                if gi == g.index
            ),
        )
        for g in base.broker_groups
    )
    return dataclasses.replace(base, groups=groups, broker_groups=broker_groups, live_wanted=tuple(wanted.items()))


@pytest.mark.parametrize(
    ("wanted", "held", "groups", "expected"),
    [
        # every broker already holds it (the broker prints true, the spec says True)
        ({"autoCreateTopicEnable": "True"}, {(0, 0): {"autoCreateTopicEnable": "true"}}, 2, []),
        # the master and a slave differ, the other slave did not answer (asked again next pass)
        (
            {"deleteWhen": "03", "maxMessageSize": "2048"},
            {(0, 0): {"deleteWhen": "04", "maxMessageSize": "2048"}, (0, 1): {"deleteWhen": "04"}},
            2,
            [
                UpdateBrokerConfig(bk(0, 0), "10.0.0.0:10911", (("deleteWhen", "03"),)),
                UpdateBrokerConfig(bk(0, 1), "10.0.0.1:10911", (("deleteWhen", "03"),)),
            ],
        ),
        # a group being removed is left alone
        ({"deleteWhen": "03"}, {(0, 0): {"deleteWhen": "03"}, (1, 0): {"deleteWhen": "04"}}, 1, []),
        # nothing wanted: nothing asked, whatever the brokers hold
        ({}, {(0, 0): {"deleteWhen": "05"}}, 2, []),
        # a broker that does not report the key (an older broker) is not sent it
        ({"deleteWhen": "03"}, {(1, 2): {}}, 2, []),
    ],
)
def test_plan_live_config(
    wanted: dict[str, str], held: dict[tuple[int, int], dict[str, str]], groups: int, expected: list[Any]
) -> None:
    assert plan_live_config(_observed(wanted, held, groups)) == expected


def test_a_live_change_keeps_a_settled_cluster_ready_and_restarts_nothing() -> None:
    decided = plan(_observed({"maxMessageSize": "2048"}, {(1, 0): {"maxMessageSize": "4194304"}}))
    assert [a for a in decided.actions if type(a).__name__ != "ApplyChildren"] == [
        UpdateBrokerConfig(bk(1, 0), "10.0.1.0:10911", (("maxMessageSize", "2048"),))
    ]
    assert decided.condition("Ready") is not None and decided.condition("Ready").status == "True"  # type: ignore[union-attr]
    assert decided.wait is None
    assert "set maxMessageSize=2048 on broker" in decided.actions[-1].describe()


def test_status_says_which_keys_apply_live_and_which_roll() -> None:
    spec = parse_spec({"broker": {"config": {"deleteWhen": "03", "waitTimeMillsInSendQueue": "300"}}})
    reverting = dataclasses.replace(
        plan(_observed({"deleteWhen": "03"}, {})),
        actions=(UpdateBrokerConfig(bk(0, 0), "a:1", (("fileReservedTime", "72"),)),),
    )
    assert broker_config_status(spec, reverting) == {
        "live": ["deleteWhen", "fileReservedTime"],
        "restartOnly": ["waitTimeMillsInSendQueue"],
    }


@pytest.mark.parametrize(
    "record",
    [None, "deleteWhen", 7, {"live": "fileReservedTime"}, {"live": [1, None, {"a": 1}]}, {"live": None}, []],
)
def test_a_damaged_status_record_manages_no_extra_key(record: Any) -> None:
    spec = parse_spec({"broker": {"groups": 1, "slavesPerGroup": 0}})
    observed = build_observed(
        name=C,
        generation=1,
        now=0.0,
        spec=spec,
        annotations={},
        statefulsets=[],
        pods=[],
        facts=BrokerFacts(),
        status={"brokerConfig": record},
    )
    assert observed.live_wanted == ()


def _pod(g: int, ordinal: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": bk(g, ordinal),
            "uid": f"u{g}{ordinal}",
            "labels": {
                "app.kubernetes.io/component": "broker",
                "rocketcluster.io/group": str(g),
                "controller-revision-hash": "r1",
            },
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def test_build_observed_carries_what_the_brokers_hold_and_what_the_spec_wants() -> None:
    spec = parse_spec({"broker": {"groups": 1, "slavesPerGroup": 1, "config": {"deleteWhen": "03"}}})
    facts = BrokerFacts(
        {0: GroupFacts(registered={0: "10.1.0.5:10911", 1: "10.1.0.6:10911"}, live_config={0: {"deleteWhen": "04"}})}
    )
    observed = build_observed(
        name=C,
        generation=3,
        now=0.0,
        spec=spec,
        annotations={},
        statefulsets=[],
        pods=[_pod(0, 0), _pod(0, 1)],
        facts=facts,
        status={"brokerConfig": {"live": ["fileReservedTime"]}},
    )
    assert observed.live_wanted == (("deleteWhen", "03"), ("fileReservedTime", "72"))
    (group,) = observed.broker_groups
    assert group.live_config == (LiveConfigObservation(0, "10.1.0.5:10911", (("deleteWhen", "04"),)),)
    assert plan_live_config(observed) == [UpdateBrokerConfig(bk(0, 0), "10.1.0.5:10911", (("deleteWhen", "03"),))]


async def test_gather_reads_and_execute_sets_the_live_keys_of_a_real_broker(tmp_path: Path) -> None:
    """A real NameServer and broker (tests/local_cluster.py) named as the operator names group 0."""
    spec = parse_spec({"broker": {"groups": 1, "slavesPerGroup": 0, "config": {"deleteWhen": "03"}}})
    async with local_cluster(tmp_path, cluster_name=C, broker_name=names.broker_name(C, 0)) as c:
        b = c.running_broker
        pods = [{"metadata": {"labels": {names.LABEL_GROUP: "0"}}}]
        async with AdminSession([c.namesrv_addr]) as admin:
            facts = await _until_registered(admin, spec, pods)
            (addr,) = facts.groups[0].registered.values()
            assert dict(facts.groups[0].live_config[0]) == {k: LIVE_DEFAULTS[k] for k in LIVE_KEYS}
            observed = dataclasses.replace(
                _observed({}, {}, groups=1),
                broker_groups=(
                    dataclasses.replace(
                        _observed({}, {}, groups=1).broker_groups[0],
                        live_config=(LiveConfigObservation(0, addr, tuple(facts.groups[0].live_config[0].items())),),
                    ),
                ),
                live_wanted=(("deleteWhen", "03"), ("maxMessageSize", "2048")),
            )
            (action,) = plan_live_config(observed)
            assert action.addr == addr
            await admin.require().update_broker_config(action.addr, dict(action.keys))
            assert b.store_config.delete_hours() == {3}
            assert b.config.max_message_size == b.store.commit_log.max_message_size == 2048
            again = await admin.facts(C, spec, pods)
            assert (
                plan_live_config(
                    dataclasses.replace(
                        observed,
                        broker_groups=(
                            dataclasses.replace(
                                observed.broker_groups[0],
                                live_config=(
                                    LiveConfigObservation(0, addr, tuple(again.groups[0].live_config[0].items())),
                                ),
                            ),
                        ),
                    )
                )
                == []
            )
            # a value the broker refuses is named in the error
            with pytest.raises(RocketError, match="defaultTopicQueueNums"):
                await admin.require().update_broker_config(addr, {"defaultTopicQueueNums": "5000"})


async def _until_registered(admin: AdminSession, spec: Any, pods: list[dict[str, Any]]) -> BrokerFacts:
    for _ in range(100):
        facts = await admin.facts(C, spec, pods)
        if 0 in facts.groups and facts.groups[0].live_config:
            return facts
        await asyncio.sleep(0.1)
    raise AssertionError("the broker never registered with the NameServer")
