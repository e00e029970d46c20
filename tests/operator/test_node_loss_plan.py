"""rocketcluster.plan_node_loss, by a table: what the operator does with broker pods on a lost node (NotReady,
or tainted unreachable) with spec.failover, and what it reports (through rocketcluster.plan).

Each row is a cluster of broker groups of three pods (ordinal 0 on node "n0-<group>", 1 on "n1-<group>", 2 on
"n2-<group>" unless a row says otherwise), the nodes' states, the pod the controller made master per group,
and the actions expected, as (kind, pod) pairs in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from rocketcluster import names
from rocketcluster.model import parse_spec
from rocketcluster.observe import BrokerFacts, GroupFacts, build_observed, node_names
from rocketcluster.plan import (
    ElectMaster,
    ForceDeletePod,
    GroupObservation,
    NameServerObservation,
    NodeObservation,
    Observed,
    Plan,
    PodObservation,
    Progress,
    plan,
)
from rocketcluster.plan_node_loss import lost_since

C = "rc"
NOW = 10_000.0
GRACE = 30.0


def bk(group: int, ordinal: int) -> str:
    return names.broker_pod(C, group, ordinal)


@dataclass
class Row:
    """A cluster: `masters` group -> master ordinal (None: none registered); `nodes` node -> NodeObservation
    kwargs (nodes not named are Ready); `lag` (group, ordinal) -> lag bytes of a slave (default 0: in sync);
    `outside` (group, ordinal) -> True for a slave outside the controller's SyncStateSet; `terminating` pods
    with a deletionTimestamp; `on` (group, ordinal) -> another node."""

    groups: int = 1
    masters: dict[int, int | None] = field(default_factory=dict)
    nodes: dict[str, dict[str, object]] = field(default_factory=dict)
    lag: dict[tuple[int, int], int | None] = field(default_factory=dict)
    outside: set[tuple[int, int]] = field(default_factory=set)
    terminating: set[tuple[int, int]] = field(default_factory=set)
    on: dict[tuple[int, int], str] = field(default_factory=dict)
    failover: bool = True
    sets_known: bool = True  # False: the controller could not be asked for its SyncStateSets

    def node_of(self, g: int, o: int) -> str:
        return self.on.get((g, o), f"n{o}-{g}")

    def lost(self, node: str) -> bool:
        return node in self.nodes and lost_since(NodeObservation(node, **self.nodes[node]), NOW) is not None  # type: ignore[arg-type]

    def observed(self) -> Observed:
        groups = []
        for g in range(self.groups):
            master = self.masters.get(g, 0)
            pods, terminating = [], []
            for o in range(3):
                node = self.node_of(g, o)
                is_master = o == master
                bid = 0 if is_master else 10 + o
                pod = PodObservation(
                    name=bk(g, o),
                    ordinal=o,
                    uid=f"uid-{g}-{o}",
                    ready=not self.lost(node),
                    revision="r1",
                    registered=master is not None,
                    lag_bytes=None if is_master or master is None else self.lag.get((g, o), 0),
                    broker_id=bid if master is not None else None,
                    master=is_master if self.failover else None,
                    in_sync_set=None
                    if is_master or master is None or not self.sets_known
                    else (g, o) not in self.outside,
                    node=node,
                )
                (terminating if (g, o) in self.terminating else pods).append(pod)
            groups.append(GroupObservation(g, True, "r1", tuple(pods), terminating=tuple(terminating)))
        ns = (PodObservation(names.nameserver_pod(C, 0), 0, "ns0", True, "n1", registered=True, node="ns-node"),)
        all_nodes = {self.node_of(g, o) for g in range(self.groups) for o in range(3)}
        return Observed(
            cluster=C,
            generation=1,
            now=NOW,
            groups=self.groups,
            slaves_per_group=2,
            nameserver_replicas=1,
            replication="SYNC",
            nameserver=NameServerObservation(True, "n1", ns),
            broker_groups=tuple(groups),
            failover=self.failover,
            nodes=tuple(NodeObservation(n, **self.nodes.get(n, {})) for n in sorted(all_nodes)),  # type: ignore[arg-type]
            node_lost_grace_seconds=GRACE,
            progress=Progress(created=True),
        )


def not_ready(for_seconds: float, status: str = "False") -> dict[str, object]:
    return {"ready": status, "ready_since": NOW - for_seconds}


def unreachable(for_seconds: float) -> dict[str, object]:
    """Tainted unreachable while its Ready condition still says True (the taint came first, or the condition's
    update was lost)."""
    return {"ready": "True", "ready_since": NOW - 86400, "tainted_since": NOW - for_seconds}


def fencing(p: Plan) -> list[tuple[str, str]]:
    out = []
    for a in p.actions:
        if isinstance(a, ForceDeletePod):
            out.append(("force-delete", a.pod))
        elif isinstance(a, ElectMaster):
            out.append(("elect", a.pod))
    return out


ROWS = {
    "every node ready: nothing": (Row(), [], None),
    "node NotReady under the grace: wait": (Row(nodes={"n1-0": not_ready(10)}), [], 20.0),
    "node Unknown under the grace: wait": (Row(nodes={"n0-0": not_ready(29.5, "Unknown")}), [], 1.0),
    "a lost slave's node past the grace: force-delete it": (
        Row(nodes={"n2-0": not_ready(31)}),
        [("force-delete", bk(0, 2))],
        5.0,
    ),
    "the master's node lost, the controller already moved it: force-delete the old master": (
        Row(masters={0: 1}, nodes={"n0-0": not_ready(45, "Unknown")}),
        [("force-delete", bk(0, 0))],
        5.0,
    ),
    "the master still on the lost node with an in-sync slave: elect it first": (
        Row(nodes={"n0-0": not_ready(45, "Unknown")}),
        [("elect", bk(0, 1))],
        5.0,
    ),
    "the least lagging in-sync slave is elected": (
        Row(nodes={"n0-0": not_ready(45)}, lag={(0, 1): 4096, (0, 2): 0}),
        [("elect", bk(0, 2))],
        5.0,
    ),
    "no SyncStateSet known and no slave caught up: refuse (no force-delete, no election)": (
        Row(nodes={"n0-0": not_ready(45)}, lag={(0, 1): None, (0, 2): 8192}, sets_known=False),
        [],
        None,
    ),
    "no SyncStateSet known, a slave caught up: elect it": (
        Row(nodes={"n0-0": not_ready(45)}, lag={(0, 1): None, (0, 2): 0}, sets_known=False),
        [("elect", bk(0, 2))],
        5.0,
    ),
    "a silent master (no lag known), a slave in the controller's SyncStateSet: elect it": (
        Row(nodes={"n0-0": not_ready(45)}, lag={(0, 1): None, (0, 2): None}, outside={(0, 1)}),
        [("elect", bk(0, 2))],
        5.0,
    ),
    "slaves outside the SyncStateSet cannot take over: refuse": (
        Row(nodes={"n0-0": not_ready(45)}, outside={(0, 1), (0, 2)}),
        [],
        None,
    ),
    "the only in-sync slave on the same lost node: refuse the master, force-delete the slave": (
        Row(nodes={"n0-0": not_ready(45)}, on={(0, 1): "n0-0"}, outside={(0, 2)}),
        [("force-delete", bk(0, 1))],
        5.0,
    ),
    "no master registered: nothing is force-deleted": (
        Row(masters={0: None}, nodes={"n1-0": not_ready(300)}),
        [],
        None,
    ),
    "failover off: nothing": (Row(failover=False, nodes={"n0-0": not_ready(300)}), [], None),
    "two groups, both masters on one lost node: an election in each": (
        Row(groups=2, on={(1, 0): "n0-0"}, nodes={"n0-0": not_ready(60)}),
        [("elect", bk(0, 1)), ("elect", bk(1, 1))],
        5.0,
    ),
    "two groups: one moved already, the other's slave still in its grace": (
        Row(groups=2, masters={0: 2}, on={(1, 1): "n0-0"}, nodes={"n0-0": not_ready(60), "n2-1": not_ready(5)}),
        [("force-delete", bk(0, 0)), ("force-delete", bk(1, 1))],
        5.0,
    ),
    "unreachable taint without a condition change, past the grace: the same as NotReady": (
        Row(masters={0: 2}, nodes={"n0-0": unreachable(40)}),
        [("force-delete", bk(0, 0))],
        5.0,
    ),
    "unreachable taint under the grace: wait": (Row(nodes={"n0-0": unreachable(12)}), [], 18.0),
    "a terminating pod on a lost node (evicted, stuck): force-delete it": (
        Row(masters={0: 1}, nodes={"n0-0": not_ready(400)}, terminating={(0, 0)}),
        [("force-delete", bk(0, 0))],
        5.0,
    ),
    "a terminating pod on a Ready node: left to its kubelet": (Row(terminating={(0, 2)}), [], None),
}


@pytest.mark.parametrize(("row", "expected", "retry"), ROWS.values(), ids=ROWS.keys())
def test_node_loss(row: Row, expected: list[tuple[str, str]], retry: float | None) -> None:
    p = plan(row.observed())
    assert fencing(p) == expected
    if retry is None:
        assert p.wait is None or p.wait.reason != "NODE_LOST"
    else:
        assert p.wait is not None and p.wait.retry_after_seconds == retry, p.wait


def test_a_refusal_is_reported_as_degraded_naming_the_master_and_the_node() -> None:
    p = plan(Row(nodes={"n0-0": not_ready(45)}, outside={(0, 1), (0, 2)}).observed())
    degraded = p.condition("Degraded")
    assert degraded is not None and degraded.status == "True" and degraded.reason == "MasterOnLostNode"
    assert bk(0, 0) in degraded.message and "n0-0" in degraded.message and "no in-sync replica" in degraded.message
    ready = p.condition("Ready")
    assert ready is not None and ready.status == "False"


def test_waiting_and_fencing_show_in_progressing() -> None:
    waiting = plan(Row(nodes={"n1-0": not_ready(10)}).observed()).condition("Progressing")
    assert waiting is not None and waiting.status == "True" and waiting.reason == "NodeLost"
    assert "n1-0" in waiting.message and "acting after 30 s" in waiting.message
    acting = plan(Row(nodes={"n1-0": not_ready(40)}).observed()).condition("Progressing")
    assert acting is not None and acting.reason == "NodeLost" and f"force-deleting {bk(0, 1)}" in acting.message


def test_a_force_delete_names_the_pod_incarnation_and_its_node() -> None:
    p = plan(Row(nodes={"n2-0": not_ready(31)}).observed())
    [action] = [a for a in p.actions if isinstance(a, ForceDeletePod)]
    assert (action.pod, action.uid, action.group, action.node) == (bk(0, 2), "uid-0-2", 0, "n2-0")
    assert "n2-0" in action.describe() and "grace period 0" in action.describe()


def test_the_master_is_never_force_deleted_whatever_the_loss() -> None:
    """Every row, and the node states shifted across the grace: no ForceDeletePod names the group's master."""
    for row, _, _ in ROWS.values():
        for shift in (-1000.0, -29.0, 0.0, 29.0, 1000.0):
            nodes = {
                n: {**kw, **{k: v + shift for k, v in kw.items() if k.endswith("_since") and isinstance(v, float)}}
                for n, kw in row.nodes.items()
            }
            shifted = Row(**{**row.__dict__, "nodes": nodes})
            observed = shifted.observed()
            masters = {p.name for g in observed.broker_groups for p in g.pods + g.terminating if p.is_master}
            deleted = {a.pod for a in plan(observed).actions if isinstance(a, ForceDeletePod)}
            assert not deleted & masters


@pytest.mark.parametrize(
    ("node", "lost"),
    [
        (NodeObservation("n", "True", 0.0), None),
        (NodeObservation("n", None), None),  # a new node that has not reported yet
        (NodeObservation("n", "False", 100.0), 100.0),
        (NodeObservation("n", "Unknown", None), NOW),  # no time given: counts from now
        (NodeObservation("n", "True", 0.0, 250.0), 250.0),
        (NodeObservation("n", "Unknown", 300.0, 250.0), 250.0),  # the earlier of the two
    ],
)
def test_lost_since(node: NodeObservation, lost: float | None) -> None:
    assert lost_since(node, NOW) == lost


def _pod_dict(ordinal: int, node: str, deleting: bool = False) -> dict[str, object]:
    meta: dict[str, object] = {
        "name": bk(0, ordinal),
        "uid": f"u{ordinal}",
        "labels": {names.LABEL_CLUSTER: C, names.LABEL_COMPONENT: names.COMPONENT_BROKER, names.LABEL_GROUP: "0"},
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-11-29T05:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": "Running", "podIP": f"10.0.0.{ordinal}"}}


@pytest.mark.parametrize("failover", [True, False])
def test_the_observation_carries_nodes_and_terminating_pods_with_failover_only(failover: bool) -> None:
    spec = parse_spec({"broker": {"replication": "SYNC", "slavesPerGroup": 2}, "failover": {"enabled": failover}})
    node = {
        "metadata": {"name": "n0"},
        "spec": {
            "taints": [
                {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},  # no timeAdded: tells nothing
                {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "2026-11-29T05:00:02Z"},
                {"key": "example.com/other", "effect": "NoExecute", "timeAdded": "2026-11-29T04:00:00Z"},
            ]
        },
        "status": {
            "conditions": [{"type": "Ready", "status": "Unknown", "lastTransitionTime": "2026-11-29T05:00:07Z"}]
        },
    }
    facts = BrokerFacts({0: GroupFacts(registered={0: "10.0.0.1:10911", 5: "10.0.0.0:10911"})})
    observed = build_observed(
        name=C,
        generation=1,
        now=NOW,
        spec=spec,
        annotations={},
        statefulsets=[],
        pods=[_pod_dict(0, "n0", deleting=True), _pod_dict(1, "n1"), _pod_dict(2, "n2")],
        facts=facts,
        status={},
        nodes=[node],
    )
    [group] = observed.broker_groups
    assert [p.name for p in group.pods] == [bk(0, 1), bk(0, 2)]
    assert [p.node for p in group.pods] == ["n1", "n2"]
    if failover:
        [gone] = group.terminating
        assert (gone.name, gone.node, gone.broker_id, gone.is_master) == (bk(0, 0), "n0", 5, False)
        assert group.pods[0].is_master
        [n0] = observed.nodes
        assert n0 == NodeObservation("n0", "Unknown", 1795928407.0, 1795928402.0)
        assert observed.node_lost_grace_seconds == 30.0
    else:
        assert group.terminating == () and observed.nodes == ()
    assert node_names([_pod_dict(0, "n0"), _pod_dict(1, "n1"), _pod_dict(2, "n1")]) == ["n0", "n1"]
