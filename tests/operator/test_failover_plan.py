"""rocketcluster.plan with spec.failover, by tables and by a walk: the master is whoever the controller made it
(registered as id 0), a roll hands the mastership over to an in-sync slave before it restarts the master, and
the observation maps the controller's broker ids to pods by address.

The walk's `Group` stands in for the StatefulSet and the controller: ElectMaster makes the named slave the
master, a deleted pod comes back on the update revision, ready, as a slave with a fresh controller id.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from rocketcluster import names
from rocketcluster.model import parse_spec
from rocketcluster.observe import BrokerFacts, GroupFacts, build_observed, build_status, pod_observation
from rocketcluster.plan import (
    DeletePod,
    ElectMaster,
    GroupObservation,
    NameServerObservation,
    Observed,
    PodObservation,
    Wait,
    plan,
)

C = "rc"


def bk(ordinal: int) -> str:
    return names.broker_pod(C, 0, ordinal)


@dataclass
class Group:
    """One group of three pods: pod ordinal -> (revision, controller id, ready, lag)."""

    revision: str = "r1"
    update_revision: str = "r1"
    pods: dict[int, tuple[str, int, bool, int | None]] = field(
        default_factory=lambda: {0: ("r1", 0, True, None), 1: ("r1", 1, True, 0), 2: ("r1", 2, True, 0)}
    )
    next_id: int = 3
    elections: list[str] = field(default_factory=list)
    restarts: list[str] = field(default_factory=list)

    def observed(self, failover: bool = True) -> Observed:
        pods = tuple(
            PodObservation(
                name=bk(o),
                ordinal=o,
                uid=f"{o}-{rev}-{bid}",
                ready=ready,
                revision=rev,
                registered=True,
                lag_bytes=lag,
                broker_id=bid,
                master=(bid == 0) if failover else None,
            )
            for o, (rev, bid, ready, lag) in sorted(self.pods.items())
        )
        ns = tuple(PodObservation(names.nameserver_pod(C, 0), 0, "n0", True, "n1", registered=True) for _ in [0])
        return Observed(
            cluster=C,
            generation=1,
            now=1000.0,
            groups=1,
            slaves_per_group=2,
            nameserver_replicas=1,
            replication="SYNC",
            nameserver=NameServerObservation(True, "n1", ns),
            broker_groups=(GroupObservation(0, True, self.update_revision, pods),),
            failover=failover,
        )

    def run(self, failover: bool = True) -> list[str]:
        """One pass: plan and carry the actions out; the actions' descriptions."""
        decided = plan(self.observed(failover))
        done = []
        for action in decided.actions:
            if isinstance(action, ElectMaster):
                self.elections.append(action.pod)
                for o, (rev, bid, ready, _lag) in list(self.pods.items()):
                    if bk(o) == action.pod:
                        assert bid == action.broker_id
                        self.pods[o] = (rev, 0, ready, None)
                    elif bid == 0:  # the old master follows the new one, with its own id back
                        self.pods[o] = (rev, self.next_id, ready, 0)
                        self.next_id += 1
            elif isinstance(action, DeletePod):
                self.restarts.append(action.pod)
                o = next(o for o in self.pods if bk(o) == action.pod)
                assert self.pods[o][1] != 0 or not failover, "a master was restarted while it was master"
                self.pods[o] = (self.update_revision, self.next_id, True, 0)
                self.next_id += 1
            if not isinstance(action, Wait):
                done.append(type(action).__name__)
        return done


def test_a_roll_hands_the_mastership_over_once_and_never_restarts_a_master() -> None:
    group = Group(update_revision="r2")
    for _ in range(20):
        group.run()
        if all(rev == "r2" for rev, *_ in group.pods.values()):
            break
    assert all(rev == "r2" for rev, *_ in group.pods.values())
    assert group.restarts == [bk(2), bk(1), bk(0)]  # slaves first, the old master once it is a slave
    assert group.elections == [bk(1)]  # one election: to a slave already on the new template
    assert sum(1 for _, bid, *_ in group.pods.values() if bid == 0) == 1


def test_without_failover_the_master_is_restarted_last_without_an_election() -> None:
    group = Group(update_revision="r2", pods={0: ("r1", 0, True, None), 1: ("r1", 1, True, 0), 2: ("r1", 2, True, 0)})
    for _ in range(20):
        group.run(failover=False)
    assert group.restarts == [bk(2), bk(1), bk(0)] and group.elections == []


def test_the_master_is_whoever_holds_id_0_not_ordinal_0() -> None:
    # ordinal 1 is the master (an earlier failover); every pod is on an old template
    group = Group(update_revision="r2", pods={0: ("r1", 7, True, 0), 1: ("r1", 0, True, None), 2: ("r1", 2, True, 0)})
    assert group.run() == ["ApplyChildren", "DeletePod"]
    assert group.restarts == [bk(2)]  # the highest slave first
    group.run()
    assert group.restarts == [bk(2), bk(0)]  # then ordinal 0, a slave
    decided = plan(group.observed())
    assert [a for a in decided.actions if isinstance(a, ElectMaster)] == [
        ElectMaster(0, bk(0), 4, bk(1))
    ]  # in sync, lowest ordinal


@pytest.mark.parametrize(
    ("pods", "reason"),
    [
        # the slaves lag: no in-sync slave to hand over to, and SYNC requires one
        ({0: ("r1", 0, True, None), 1: ("r2", 1, True, 512), 2: ("r2", 2, True, None)}, "WAITING_FOR_IN_SYNC_SLAVE"),
        # no pod is registered as master (an election under way): nothing ready is restarted
        ({0: ("r1", 5, True, 0), 1: ("r2", 1, True, 0), 2: ("r2", 2, True, 0)}, "WAITING_FOR_MASTER"),
        # an in-sync slave: the handover
        ({0: ("r1", 0, True, None), 1: ("r2", 1, True, 0), 2: ("r2", 2, True, 0)}, "MASTER_HANDOVER"),
    ],
)
def test_what_a_master_restart_waits_for(pods: dict[int, tuple[str, int, bool, int | None]], reason: str) -> None:
    decided = plan(Group(update_revision="r2", pods=pods).observed())
    assert decided.wait is not None and decided.wait.reason == reason
    assert not [a for a in decided.actions if isinstance(a, DeletePod)]


def test_a_master_already_down_is_restarted_without_an_election() -> None:
    pods = {0: ("r1", 0, False, None), 1: ("r2", 1, True, 0), 2: ("r2", 2, True, 0)}
    decided = plan(Group(update_revision="r2", pods=pods).observed())
    assert [a for a in decided.actions if isinstance(a, DeletePod | ElectMaster)] == [
        DeletePod(bk(0), "POD_HAS_OLD_REVISION")
    ]


def _pod(ordinal: int, ip: str) -> dict[str, object]:
    return {
        "metadata": {
            "name": bk(ordinal),
            "uid": f"u{ordinal}",
            "labels": {
                names.LABEL_POD_INDEX: str(ordinal),
                names.LABEL_COMPONENT: names.COMPONENT_BROKER,
                names.LABEL_GROUP: "0",
                names.LABEL_CLUSTER: C,
            },
        },
        "status": {"podIP": ip, "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def test_the_controllers_ids_map_to_pods_by_address() -> None:
    facts = GroupFacts(
        registered={0: "10.0.0.2:10911", 4: "10.0.0.1:10911", 9: "10.0.0.3:10911"},
        lag_bytes={4: 0, 9: 128},
        detached=frozenset({9}),
    )
    seen = [pod_observation(_pod(o, f"10.0.0.{o + 1}"), facts, failover=True) for o in range(3)]
    assert [(p.broker_id, p.master, p.is_master, p.lag_bytes, p.attached) for p in seen if p] == [
        (4, False, False, 0, True),
        (0, True, True, None, True),
        (9, False, False, 128, False),
    ]
    # a pod whose address is not registered is neither master nor registered, and has no lag
    other = pod_observation(_pod(0, "10.0.0.99"), facts, failover=True)
    assert other is not None and (other.registered, other.is_master, other.lag_bytes) == (False, False, None)
    # without failover, ordinal 0 is the master and ids are ordinals
    plain = pod_observation(_pod(0, "10.0.0.1"), GroupFacts(registered={0: "10.0.0.1:10911"}))
    assert plain is not None and plain.is_master and plain.master is None and plain.broker_id == 0


def test_status_shows_the_controllers_master_per_group_and_in_the_printer_field() -> None:
    spec = parse_spec({"failover": {"enabled": True}, "broker": {"replication": "SYNC", "slavesPerGroup": 2}})
    pods = [_pod(o, f"10.0.0.{o + 1}") for o in range(3)]
    facts = BrokerFacts({0: GroupFacts(registered={0: "10.0.0.2:10911", 4: "10.0.0.1:10911", 9: "10.0.0.3:10911"})})
    observed = build_observed(
        name=C,
        generation=1,
        now=1.0,
        spec=spec,
        annotations={},
        statefulsets=[],
        pods=pods,
        facts=facts,
        status={},
    )
    observed = replace(observed)
    status = build_status(
        name=C,
        namespace="ns",
        spec=spec,
        plan=plan(observed),
        observed=observed,
        pods=pods,
        old_status={},
        now_iso="2026-01-01T00:00:00Z",
    )
    group = status["groupStatus"][0]
    assert group["master"]["pod"] == bk(1) and group["master"]["address"] == "10.0.0.2:10911"
    assert [s["pod"] for s in group["slaves"]] == [bk(0), bk(2)]
    assert status["masters"] == bk(1)


def _shrunk(pods: dict[int, tuple[str, int, bool, int | None]]) -> Observed:
    """slavesPerGroup lowered from 2 to 1: ordinal 2 is to go."""
    return replace(Group(pods=pods).observed(), slaves_per_group=1)


def _apply(decided_actions: tuple[object, ...]) -> object:
    return next(a for a in decided_actions if type(a).__name__ == "ApplyChildren")


@pytest.mark.parametrize(
    ("pods", "held", "elect", "waits"),
    [
        # the master is on the ordinal that goes: held at 3 pods, the mastership handed to the in-sync pod 0
        (
            {0: ("r1", 4, True, 0), 1: ("r1", 5, True, 0), 2: ("r1", 0, True, None)},
            ((0, 3),),
            [ElectMaster(0, bk(0), 4, bk(2))],
            True,
        ),
        # no kept pod in sync: held, no election, a wait
        ({0: ("r1", 4, True, 64), 1: ("r1", 5, True, None), 2: ("r1", 0, True, None)}, ((0, 3),), [], True),
        # the master is kept: the StatefulSet shrinks, removing only the slave on ordinal 2
        ({0: ("r1", 0, True, None), 1: ("r1", 5, True, 0), 2: ("r1", 6, True, 0)}, (), [], False),
    ],
)
def test_a_scale_in_moves_the_mastership_off_the_ordinals_it_removes(
    pods: dict[int, tuple[str, int, bool, int | None]],
    held: tuple[tuple[int, int], ...],
    elect: list[ElectMaster],
    waits: bool,
) -> None:
    decided = plan(_shrunk(pods))
    assert _apply(decided.actions).held_replicas == held
    assert [a for a in decided.actions if isinstance(a, ElectMaster)] == elect
    assert (decided.wait is not None and decided.wait.reason == "MASTER_HANDOVER") == waits
    assert not [a for a in decided.actions if isinstance(a, DeletePod)]


def test_without_failover_a_scale_in_holds_nothing() -> None:
    observed = replace(_shrunk({0: ("r1", 0, True, None), 1: ("r1", 1, True, 0), 2: ("r1", 2, True, 0)}))
    observed = replace(observed, failover=False)
    assert _apply(plan(observed).actions).held_replicas == ()


def test_a_held_statefulset_keeps_its_pods_and_their_files() -> None:
    from rocketcluster.names import ClusterRef
    from rocketcluster.render import render_broker_group

    spec = parse_spec({"failover": {"enabled": True}, "broker": {"replication": "SYNC", "slavesPerGroup": 1}})
    objects = render_broker_group(ClusterRef(C, "ns", "u"), spec, 0, None, 3)
    config_map, sts = objects[0], objects[1]
    assert sts["spec"]["replicas"] == 3
    assert sorted(config_map["data"]) == ["broker-0.conf", "broker-1.conf", "broker-2.conf"]


def _detached(observed: Observed, ordinal: int) -> Observed:
    """Pod `ordinal` replicates from an earlier master: the current master serves it no connection."""
    group = observed.broker_groups[0]
    pods = tuple(replace(p, attached=False) if p.ordinal == ordinal else p for p in group.pods)
    return replace(observed, broker_groups=(replace(group, pods=pods),))


def test_a_slave_the_master_does_not_serve_is_no_handover_target() -> None:
    pods = {0: ("r1", 4, True, 0), 1: ("r1", 5, True, 0), 2: ("r1", 0, True, None)}
    decided = plan(_detached(_shrunk(pods), 0))  # pod 0's lag reads 0, but it follows an old master
    assert [a for a in decided.actions if isinstance(a, ElectMaster)] == [ElectMaster(0, bk(1), 5, bk(2))]
    roll = Group(update_revision="r2", pods={0: ("r1", 0, True, None), 1: ("r2", 1, True, 0), 2: ("r2", 2, True, 0)})
    decided = plan(_detached(roll.observed(), 1))
    assert [a for a in decided.actions if isinstance(a, ElectMaster)] == [ElectMaster(0, bk(2), 2, bk(0))]


def test_a_slave_outside_the_controllers_sync_state_set_is_no_handover_target() -> None:
    roll = Group(update_revision="r2", pods={0: ("r1", 0, True, None), 1: ("r2", 1, True, 0), 2: ("r2", 2, True, 0)})
    observed = roll.observed()
    group = observed.broker_groups[0]
    pods = tuple(replace(p, in_sync_set=p.ordinal != 1) for p in group.pods)
    decided = plan(replace(observed, broker_groups=(replace(group, pods=pods),)))
    assert [a for a in decided.actions if isinstance(a, ElectMaster)] == [ElectMaster(0, bk(2), 2, bk(0))]
    # neither slave in the set: no handover, and the master waits (SYNC needs an in-sync slave)
    pods = tuple(replace(p, in_sync_set=p.ordinal == 0) for p in group.pods)
    decided = plan(replace(observed, broker_groups=(replace(group, pods=pods),)))
    assert not [a for a in decided.actions if isinstance(a, ElectMaster | DeletePod)]


def test_the_observation_reads_the_controllers_sync_state_set() -> None:
    facts = GroupFacts(registered={0: "10.0.0.1:10911", 4: "10.0.0.2:10911"}, in_sync=frozenset({0}))
    seen = [pod_observation(_pod(o, f"10.0.0.{o + 1}"), facts, failover=True) for o in range(2)]
    assert [p.in_sync_set for p in seen if p] == [True, False]
    unknown = pod_observation(_pod(1, "10.0.0.2"), replace(facts, in_sync=None), failover=True)
    assert unknown is not None and unknown.in_sync_set is None
