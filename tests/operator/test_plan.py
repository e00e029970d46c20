"""rocketcluster.plan by tables: one observation in, the exact next step and the conditions out.

`FakeCluster` stands in for Kubernetes and the brokers: it builds the `Observed` a handler would, and executes
a plan's actions the way the handler and the StatefulSet controller would (a deleted pod comes back on the
StatefulSet's update revision, not ready; `kubelet()` makes starting pods ready, except on a bad revision).
The walk tests drive whole rolls and scalings with it, one reconcile at a time.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import pytest

from rocketcluster import names
from rocketcluster.plan import (
    Action,
    AddWritePerm,
    ApplyChildren,
    ClearManualRollRequest,
    CopyMetadata,
    CreateGroup,
    DeleteGroup,
    DeletePod,
    GroupObservation,
    NameServerObservation,
    Observed,
    Plan,
    PodObservation,
    Progress,
    RecreateStatefulSet,
    ResizeClaims,
    RolloutSettings,
    RollProgress,
    ScaleDownSettings,
    Wait,
    WipeWritePerm,
    plan,
)

C = "rc"
START = 1_000_000.0


def ns(i: int) -> str:
    return names.nameserver_pod(C, i)


def bk(g: int, ordinal: int) -> str:
    return names.broker_pod(C, g, ordinal)


@dataclass
class FakePod:
    name: str
    ordinal: int
    uid: str
    revision: str
    ready: bool = True
    phase: str = "Running"
    waiting: str | None = None
    registered: bool = True
    lag: int | None = 0
    diverged: str | None = None
    attached: bool = True

    def observe(self) -> PodObservation:
        return PodObservation(
            name=self.name,
            ordinal=self.ordinal,
            uid=self.uid,
            ready=self.ready,
            revision=self.revision,
            phase=self.phase,
            waiting_reason=self.waiting,
            registered=self.registered,
            lag_bytes=self.lag,
            diverged=self.diverged,
            attached=self.attached,
        )


@dataclass
class FakeGroup:
    index: int
    revision: str
    pods: dict[int, FakePod]
    statefulset: bool = True
    copied: bool | None = None
    writable: bool = True
    consumer_lag: int | None = 0
    unread: tuple[tuple[str, int], ...] | None = ()
    claim_size: str | None = "10Gi"
    claims: str = "10Gi"  # the size the group's PVCs request


@dataclass
class FakeCluster:
    """One RocketCluster and everything it owns, at `now`."""

    groups: int = 2
    slaves: int = 2
    nameservers: int = 2
    template: str = "r1"
    exists: bool = True
    replication: str = "ASYNC"
    rollout: RolloutSettings = field(default_factory=RolloutSettings)
    scale_down: ScaleDownSettings = field(default_factory=ScaleDownSettings)
    when_scaled: str = "Retain"
    storage_size: str = "10Gi"
    volume_expansion: bool | None = None
    paused: bool = False
    manual_roll: bool = False
    now: float = START
    #: templates whose containers crash (CrashLoopBackOff) instead of becoming ready
    bad_templates: set[str] = field(default_factory=set)
    deleted_groups: list[tuple[int, bool]] = field(default_factory=list)
    restarts: list[str] = field(default_factory=list)
    progress: Progress = field(default_factory=Progress)

    def __post_init__(self) -> None:
        self._uids = itertools.count(1)
        self.ns_statefulset = self.exists
        self.ns_revision = self.template
        self.ns_pods: dict[int, FakePod] = {}
        self.broker: dict[int, FakeGroup] = {}
        if self.exists:
            self.ns_pods = {i: self._pod(ns(i), i, self.template, ready=True) for i in range(self.nameservers)}
            self.broker = {g: self._group(g, ready=True) for g in range(self.groups)}
            self.progress = Progress(created=True)

    def _pod(self, name: str, ordinal: int, revision: str, ready: bool) -> FakePod:
        pod = FakePod(name, ordinal, f"uid-{next(self._uids)}", revision)
        if not ready:
            self._start(pod)
        return pod

    def _start(self, pod: FakePod) -> None:
        pod.ready, pod.phase, pod.waiting, pod.registered, pod.lag = False, "Pending", "ContainerCreating", False, None

    def _group(self, g: int, ready: bool) -> FakeGroup:
        pods = {o: self._pod(bk(g, o), o, self.template, ready) for o in range(1 + self.slaves)}
        return FakeGroup(g, self.template, pods)

    # -- what the handler would observe -------------------------------------------------------------------------

    def observe(self) -> Observed:
        return Observed(
            cluster=C,
            generation=7,
            now=self.now,
            groups=self.groups,
            slaves_per_group=self.slaves,
            nameserver_replicas=self.nameservers,
            replication="SYNC" if self.replication == "SYNC" else "ASYNC",
            rollout=self.rollout,
            scale_down=self.scale_down,
            when_scaled="Delete" if self.when_scaled == "Delete" else "Retain",
            storage_size=self.storage_size,
            volume_expansion=self.volume_expansion,
            paused=self.paused,
            manual_roll=self.manual_roll,
            nameserver=NameServerObservation(
                self.ns_statefulset,
                self.ns_revision if self.ns_statefulset else None,
                tuple(p.observe() for p in self.ns_pods.values()),
            ),
            broker_groups=tuple(
                GroupObservation(
                    index=g.index,
                    statefulset_exists=g.statefulset,
                    update_revision=g.revision,
                    pods=tuple(p.observe() for p in g.pods.values()),
                    metadata_copied=g.copied,
                    writable=g.writable,
                    consumer_lag=g.consumer_lag,
                    unread=g.unread,
                    claim_size=g.claim_size,
                )
                for g in self.broker.values()
            ),
            progress=self.progress,
        )

    def plan(self) -> Plan:
        return plan(self.observe())

    def pod(self, name: str) -> FakePod:
        everything = [*self.ns_pods.values(), *(p for g in self.broker.values() for p in g.pods.values())]
        return next(p for p in everything if p.name == name)

    def down(self) -> list[str]:
        everything = [*self.ns_pods.values(), *(p for g in self.broker.values() for p in g.pods.values())]
        return [p.name for p in everything if not p.ready]

    # -- what the handler, the StatefulSet controller and the brokers would do -----------------------------------

    def execute(self, p: Plan) -> None:
        for action in p.actions:
            self._execute(action)
        self.progress = p.progress

    def _execute(self, action: Action) -> None:
        match action:
            case ApplyChildren(groups=groups, claim_sizes=claim_sizes):
                kept = dict(claim_sizes)
                for g in groups:  # the API server refuses any change of a StatefulSet's volumeClaimTemplates
                    assert kept.get(g, self.storage_size) == self.broker[g].claim_size, f"422 for group {g}"
                if not self.ns_statefulset:
                    self.ns_statefulset = True
                    self.ns_pods = {i: self._pod(ns(i), i, self.template, False) for i in range(self.nameservers)}
                self.ns_revision = self.template
                for g in groups:
                    self.broker[g].revision = self.template
            case CreateGroup(group=g):
                self.broker[g] = self._group(g, ready=False)
            case CopyMetadata(group=g):
                self.broker[g].copied = True
            case DeletePod(pod=name):
                self.restarts.append(name)
                pod = self.pod(name)
                nameserver = pod in self.ns_pods.values()
                pod.uid = f"uid-{next(self._uids)}"
                pod.revision = self.ns_revision if nameserver else self._owner(name).revision
                self._start(pod)
            case WipeWritePerm(group=g):
                self.broker[g].writable = False
            case AddWritePerm(group=g):
                self.broker[g].writable = True
            case DeleteGroup(group=g, delete_pvcs=delete_pvcs):
                del self.broker[g]
                self.deleted_groups.append((g, delete_pvcs))
            case ResizeClaims(group=g, size=size):
                self.broker[g].claims = size
            case RecreateStatefulSet(group=g):
                assert self.broker[g].claims == self.storage_size, "re-created before its claims grew"
                self.broker[g].claim_size = self.storage_size
            case ClearManualRollRequest():
                self.manual_roll = False
            case Wait():
                pass

    def change_template(self, template: str) -> None:
        """The spec changed, and ApplyChildren carried the new template to every StatefulSet (pods keep theirs)."""
        self.template = template
        sizes = tuple((g, group.claim_size) for g, group in self.broker.items() if group.claim_size)
        self._execute(ApplyChildren(tuple(self.broker), claim_sizes=sizes))

    def _owner(self, name: str) -> FakeGroup:
        return next(g for g in self.broker.values() if any(p.name == name for p in g.pods.values()))

    def kubelet(self) -> None:
        """Starting pods become ready (and registered, caught up), or crash on a bad template."""
        for pod in [*self.ns_pods.values(), *(p for g in self.broker.values() for p in g.pods.values())]:
            if pod.ready or pod.waiting not in ("ContainerCreating", "CrashLoopBackOff"):
                continue
            if pod.revision in self.bad_templates:
                pod.phase, pod.waiting = "Running", "CrashLoopBackOff"
            else:
                pod.ready, pod.phase, pod.waiting, pod.registered, pod.lag = True, "Running", None, True, 0


def non_waits(p: Plan) -> list[Action]:
    return [a for a in p.actions if not isinstance(a, Wait)]


def conditions(p: Plan) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in p.conditions}


def walk(cluster: FakeCluster, limit: int = 80) -> list[Plan]:
    """Reconcile until the cluster is Ready, checking after every step that at most one pod is down.

    After a restart the cluster is observed once more before the new pod starts: the planner must wait."""
    plans = []
    for _ in range(limit):
        p = cluster.plan()
        assert plan(cluster.observe()) == p, "planning the same observation twice must give the same plan"
        assert sum(isinstance(a, DeletePod) for a in p.actions) <= 1
        plans.append(p)
        if conditions(p)["Ready"][0] == "True":
            return plans
        cluster.execute(p)
        assert len(cluster.down()) <= 1, f"two pods down: {cluster.down()}"
        cluster.now += 5
        if any(isinstance(a, DeletePod) for a in p.actions):
            waiting = cluster.plan()
            assert not any(isinstance(a, DeletePod) for a in waiting.actions)
            assert waiting.wait is not None and waiting.wait.reason == "POD_RESTARTING"
            plans.append(waiting)
            cluster.execute(waiting)
        cluster.kubelet()
    raise AssertionError(f"not Ready after {limit} reconciles: {plans[-1]}")


SETTLED_GROUPS = ApplyChildren((0, 1))


# -- single reconciles ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    build: Callable[[], FakeCluster]
    actions: list[Action]
    wait: str | None
    conditions: dict[str, tuple[str, str]]


def fresh() -> FakeCluster:
    return FakeCluster(exists=False)


def fresh_second_reconcile() -> FakeCluster:
    cluster = FakeCluster(exists=False)
    cluster.execute(cluster.plan())
    return cluster


def settled() -> FakeCluster:
    return FakeCluster()


def image_change() -> FakeCluster:
    cluster = FakeCluster(template="r1")
    cluster.change_template("r2")
    return cluster


def with_pod(build: Callable[[], FakeCluster], name: str, **state: object) -> Callable[[], FakeCluster]:
    def built() -> FakeCluster:
        cluster = build()
        pod = cluster.pod(name)
        for key, value in state.items():
            setattr(pod, key, value)
        return cluster

    return built


def crash_looping_master() -> FakeCluster:
    return with_pod(image_change, bk(1, 0), ready=False, waiting="CrashLoopBackOff")()


def pending_on_current_template() -> FakeCluster:
    # the new template reached group 0's slave 1 already, and it cannot be scheduled
    cluster = with_pod(image_change, bk(0, 1), ready=False, phase="Pending", waiting="Unschedulable")()
    cluster.pod(bk(0, 1)).revision = "r2"
    return cluster


def pending_on_old_template() -> FakeCluster:
    return with_pod(image_change, bk(0, 1), ready=False, phase="Pending", waiting="Unschedulable")()


def master_left(replication: str, lag: int | None, require_in_sync_slave: bool = True) -> Callable[[], FakeCluster]:
    """Everything restarted onto r2 but group 0's master; its slaves are `lag` bytes behind."""

    def built() -> FakeCluster:
        rollout = RolloutSettings(require_in_sync_slave=require_in_sync_slave)
        cluster = FakeCluster(groups=1, replication=replication, rollout=rollout)
        cluster.change_template("r2")
        for name in (ns(0), ns(1), bk(0, 1), bk(0, 2)):
            cluster.pod(name).revision = "r2"
        cluster.pod(bk(0, 1)).lag = lag
        cluster.pod(bk(0, 2)).lag = lag
        return cluster

    return built


def with_group(cluster: FakeCluster, g: int, **state: object) -> FakeCluster:
    for key, value in state.items():
        setattr(cluster.broker[g], key, value)
    return cluster


def without_pod(cluster: FakeCluster, name: str) -> FakeCluster:
    group = cluster._owner(name)
    group.pods = {o: p for o, p in group.pods.items() if p.name != name}
    return cluster


def master_restarting() -> FakeCluster:
    cluster = master_left("ASYNC", lag=0)()
    cluster.execute(cluster.plan())  # the master is deleted
    cluster.broker[0].writable = False
    return cluster


def paused_with_image_change() -> FakeCluster:
    cluster = image_change()
    cluster.paused = True
    return cluster


def manual_roll() -> FakeCluster:
    cluster = FakeCluster()
    cluster.manual_roll = True
    return cluster


def scale_out_2_to_3() -> FakeCluster:
    cluster = FakeCluster(groups=2)
    cluster.groups = 3
    return cluster


def scaling(groups: int, drain: bool = True, when_scaled: str = "Retain") -> Callable[[], FakeCluster]:
    """A settled cluster of 3 groups whose spec now says `groups`."""

    def built() -> FakeCluster:
        cluster = FakeCluster(groups=3, scale_down=ScaleDownSettings(drain=drain), when_scaled=when_scaled)
        cluster.groups = groups
        return cluster

    return built


def draining(lag: int, for_seconds: float, spec_groups: int = 2) -> Callable[[], FakeCluster]:
    def built() -> FakeCluster:
        cluster = scaling(2)()
        cluster.execute(cluster.plan())  # wipes group 2's write permission
        cluster.now += for_seconds
        cluster.broker[2].consumer_lag = lag
        cluster.groups = spec_groups
        return cluster

    return built


def scale_in_with_pod_down() -> FakeCluster:
    cluster = scaling(2)()
    cluster.pod(bk(0, 2)).ready = False
    return cluster


def image_change_while_draining() -> FakeCluster:
    cluster = draining(lag=50, for_seconds=60)()
    cluster.change_template("r2")
    return cluster


def scale_in_during_roll() -> FakeCluster:
    cluster = FakeCluster(groups=3)
    cluster.change_template("r2")
    cluster.execute(cluster.plan())  # the roll starts: first pod deleted
    cluster.kubelet()
    cluster.groups = 2
    return cluster


READY = ("True", "ClusterReady")
NOT_PROGRESSING = ("False", "Settled")
HEALTHY = ("False", "Healthy")
NOT_BLOCKED = ("False", "NotBlocked")
ACTIVE = ("False", "Reconciling")

CASES = [
    Case(
        "fresh create: every group at once",
        fresh,
        [ApplyChildren(()), CreateGroup(0, "CREATE"), CreateGroup(1, "CREATE")],
        "CREATING",
        {"Ready": ("False", "Creating"), "Progressing": ("True", "Creating"), "Degraded": HEALTHY},
    ),
    Case(
        "fresh create, pods starting: no metadata to copy",
        fresh_second_reconcile,
        [SETTLED_GROUPS],
        "CREATING",
        {"Ready": ("False", "Creating"), "Progressing": ("True", "Creating")},
    ),
    Case(
        "settled cluster: only ApplyChildren, Ready",
        settled,
        [SETTLED_GROUPS],
        None,
        {
            "Ready": READY,
            "Progressing": NOT_PROGRESSING,
            "Degraded": HEALTHY,
            "ScaleDownBlocked": NOT_BLOCKED,
            "ReconciliationPaused": ACTIVE,
        },
    ),
    Case(
        "image change: NameServer first, highest ordinal",
        image_change,
        [SETTLED_GROUPS, DeletePod(ns(1), "POD_HAS_OLD_REVISION")],
        "POD_RESTARTING",
        {"Ready": ("False", "RollingUpdate"), "Progressing": ("True", "RollingUpdate"), "Degraded": HEALTHY},
    ),
    Case(
        "crash-looping master on the old template goes first",
        crash_looping_master,
        [SETTLED_GROUPS, DeletePod(bk(1, 0), "POD_STUCK")],
        "POD_RESTARTING",
        {"Progressing": ("True", "RollingUpdate"), "Degraded": ("True", "PodStuck")},
    ),
    Case(
        "Pending pod on the current template: not deleted, and nothing else goes down",
        pending_on_current_template,
        [SETTLED_GROUPS],
        "WAITING_FOR_PODS",
        {"Progressing": ("True", "RollingUpdate"), "Degraded": ("True", "PodStuck")},
    ),
    Case(
        "Pending pod on an old template: the new one may fix it",
        pending_on_old_template,
        [SETTLED_GROUPS, DeletePod(bk(0, 1), "POD_STUCK")],
        "POD_RESTARTING",
        {"Degraded": ("True", "PodStuck")},
    ),
    Case(
        "SYNC: lagging slaves keep the master up",
        master_left("SYNC", lag=5000),
        [ApplyChildren((0,))],
        "WAITING_FOR_IN_SYNC_SLAVE",
        {"Progressing": ("True", "RollingUpdate"), "Degraded": ("True", "SlaveOutOfSync")},
    ),
    Case(
        "SYNC: an in-sync slave lets the master restart",
        master_left("SYNC", lag=0),
        [ApplyChildren((0,)), DeletePod(bk(0, 0), "POD_HAS_OLD_REVISION")],
        "POD_RESTARTING",
        {"Degraded": HEALTHY},
    ),
    Case(
        "ASYNC: slave lag does not gate the master",
        master_left("ASYNC", lag=5000),
        [ApplyChildren((0,)), DeletePod(bk(0, 0), "POD_HAS_OLD_REVISION")],
        "POD_RESTARTING",
        {"Degraded": HEALTHY},
    ),
    Case(
        "paused: no actions at all",
        paused_with_image_change,
        [],
        None,
        {"ReconciliationPaused": ("True", "Paused")},
    ),
    Case(
        "manual roll: annotation cleared, first pod restarted",
        manual_roll,
        [SETTLED_GROUPS, ClearManualRollRequest(), DeletePod(ns(1), "MANUAL_ROLLING_UPDATE")],
        "POD_RESTARTING",
        {"Progressing": ("True", "RollingUpdate")},
    ),
    Case(
        "scale-out 2 -> 3: the new group is created",
        scale_out_2_to_3,
        [SETTLED_GROUPS, CreateGroup(2, "SCALE_OUT")],
        "SCALING_OUT",
        {"Ready": ("False", "ScalingOut"), "Progressing": ("True", "ScalingOut")},
    ),
    Case(
        "scale-in 3 -> 2: group 2 stops taking writes",
        scaling(2),
        [SETTLED_GROUPS, WipeWritePerm(2)],
        "DRAINING",
        {"Ready": ("False", "Draining"), "Progressing": ("True", "Draining"), "ScaleDownBlocked": NOT_BLOCKED},
    ),
    Case(
        "scale-in: lag left, within the timeout",
        draining(lag=120, for_seconds=600),
        [SETTLED_GROUPS],
        "DRAINING",
        {"Progressing": ("True", "Draining"), "ScaleDownBlocked": NOT_BLOCKED},
    ),
    Case(
        "scale-in: drained",
        draining(lag=0, for_seconds=600),
        [SETTLED_GROUPS, DeleteGroup(2, delete_pvcs=False)],
        "DRAINING",
        {"Progressing": ("True", "Draining"), "ScaleDownBlocked": NOT_BLOCKED},
    ),
    Case(
        "scale-in: drain timed out, nothing deleted",
        draining(lag=120, for_seconds=3601),
        [SETTLED_GROUPS],
        "DRAIN_TIMED_OUT",
        {"Progressing": ("True", "Draining"), "ScaleDownBlocked": ("True", "DrainTimedOut")},
    ),
    Case(
        "scale back up while draining: write permission back",
        draining(lag=120, for_seconds=3601, spec_groups=3),
        [ApplyChildren((0, 1, 2)), AddWritePerm(2)],
        "SCALING_OUT",
        {"Progressing": ("True", "ScalingOut"), "ScaleDownBlocked": NOT_BLOCKED, "Degraded": HEALTHY},
    ),
    Case(
        "scale-in with drain false: wipe and delete at once",
        scaling(2, drain=False, when_scaled="Delete"),
        [SETTLED_GROUPS, WipeWritePerm(2), DeleteGroup(2, delete_pvcs=True)],
        "DRAINING",
        {"Progressing": ("True", "Draining")},
    ),
    Case(
        "no scale-in while a pod is down",
        scale_in_with_pod_down,
        [SETTLED_GROUPS],
        "DRAINING",
        {"Progressing": ("True", "Draining")},
    ),
    Case(
        "no roll of a ready pod while draining",
        image_change_while_draining,
        [SETTLED_GROUPS],
        "WAITING_FOR_SCALE_IN",
        {"Progressing": ("True", "Draining")},
    ),
    Case(
        "a roll under way goes before a new scale-in",
        scale_in_during_roll,
        [SETTLED_GROUPS, DeletePod(ns(0), "POD_HAS_OLD_REVISION")],
        "POD_RESTARTING",
        {"Progressing": ("True", "RollingUpdate")},
    ),
    Case(
        "SYNC without requireInSyncSlave: the master may go",
        master_left("SYNC", lag=5000, require_in_sync_slave=False),
        [ApplyChildren((0,)), DeletePod(bk(0, 0), "POD_HAS_OLD_REVISION")],
        "POD_RESTARTING",
        {"Degraded": ("True", "SlaveOutOfSync")},
    ),
    Case(
        "SYNC: unknown slave lag is not in sync",
        master_left("SYNC", lag=None),
        [ApplyChildren((0,))],
        "WAITING_FOR_IN_SYNC_SLAVE",
        {"Degraded": HEALTHY},
    ),
    Case(
        "a read-only group is Degraded",
        lambda: with_group(FakeCluster(), 1, writable=False),
        [SETTLED_GROUPS],
        None,
        {"Ready": ("False", "GroupNotWritable"), "Degraded": ("True", "GroupNotWritable")},
    ),
    Case(
        "a group whose master the roll restarts is expected to be read-only",
        master_restarting,
        [ApplyChildren((0,))],
        "POD_RESTARTING",
        {"Degraded": HEALTHY, "Progressing": ("True", "RollingUpdate")},
    ),
    Case(
        "a master the roll restarted is not re-created yet: still expected, not a fault",
        lambda: without_pod(master_restarting(), bk(0, 0)),
        [ApplyChildren((0,))],
        "POD_RESTARTING",
        {"Degraded": HEALTHY, "Progressing": ("True", "RollingUpdate")},
    ),
    Case(
        "a missing pod blocks the roll",
        lambda: without_pod(image_change(), bk(1, 2)),
        [SETTLED_GROUPS],
        "WAITING_FOR_PODS",
        {"Progressing": ("True", "RollingUpdate")},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_one_reconcile(case: Case) -> None:
    observed = case.build().observe()
    p = plan(observed)
    assert non_waits(p) == case.actions
    assert (p.wait.reason if p.wait else None) == case.wait
    assert {t: conditions(p)[t] for t in case.conditions} == case.conditions
    assert p.observed_generation == observed.generation
    assert plan(observed) == p  # idempotent


# -- whole rolls, step by step --------------------------------------------------------------------------------------

ROLL_ORDERS = [
    (
        "all ready",
        {},
        [ns(1), ns(0), bk(0, 2), bk(0, 1), bk(0, 0), bk(1, 2), bk(1, 1), bk(1, 0)],
    ),
    (
        "an unready slave of group 1 first",
        {bk(1, 1): {"ready": False, "waiting": None}},
        [bk(1, 1), ns(1), ns(0), bk(0, 2), bk(0, 1), bk(0, 0), bk(1, 2), bk(1, 0)],
    ),
    (
        "a crash-looping master first",
        {bk(0, 0): {"ready": False, "waiting": "CrashLoopBackOff"}},
        [bk(0, 0), ns(1), ns(0), bk(0, 2), bk(0, 1), bk(1, 2), bk(1, 1), bk(1, 0)],
    ),
]


@pytest.mark.parametrize(("broken", "order"), [r[1:] for r in ROLL_ORDERS], ids=[r[0] for r in ROLL_ORDERS])
def test_image_change_rolls_pod_by_pod(broken: dict[str, dict[str, object]], order: list[str]) -> None:
    cluster = image_change()
    for name, state in broken.items():
        for key, value in state.items():
            setattr(cluster.pod(name), key, value)

    plans = walk(cluster)

    assert cluster.restarts == order
    everything = [*cluster.ns_pods.values(), *(p for g in cluster.broker.values() for p in g.pods.values())]
    assert {p.revision for p in everything} == {"r2"}
    reasons = [a.reason for p in plans for a in p.actions if isinstance(a, DeletePod)]
    stuck = [name for name, state in broken.items() if state.get("waiting") == "CrashLoopBackOff"]
    assert reasons == ["POD_STUCK" if name in stuck else "POD_HAS_OLD_REVISION" for name in order]
    final = plans[-1]
    assert non_waits(final) == [SETTLED_GROUPS] and final.wait is None
    assert final.progress.roll is None
    assert conditions(final)["Degraded"] == HEALTHY


def test_manual_roll_restarts_every_pod_once_and_clears_the_request() -> None:
    cluster = manual_roll()

    plans = walk(cluster)

    assert cluster.restarts == [ns(1), ns(0), bk(0, 2), bk(0, 1), bk(0, 0), bk(1, 2), bk(1, 1), bk(1, 0)]
    assert sum(isinstance(a, ClearManualRollRequest) for p in plans for a in p.actions) == 1
    assert not cluster.manual_roll
    reasons = {a.reason for p in plans for a in p.actions if isinstance(a, DeletePod)}
    assert reasons == {"MANUAL_ROLLING_UPDATE"}
    assert plans[-1].progress.roll is None


def test_a_pod_that_never_gets_ready_stops_the_roll_until_a_fixed_template_arrives() -> None:
    cluster = FakeCluster(rollout=RolloutSettings(pod_ready_timeout_seconds=60))
    cluster.bad_templates.add("bad")
    cluster.change_template("bad")

    first = cluster.plan()
    assert non_waits(first) == [SETTLED_GROUPS, DeletePod(ns(1), "POD_HAS_OLD_REVISION")]
    cluster.execute(first)
    cluster.kubelet()  # it crashes on the bad template

    seen = []
    for _ in range(30):
        cluster.now += 5
        p = cluster.plan()
        seen.append(p)
        cluster.execute(p)
        cluster.kubelet()
    assert cluster.restarts == [ns(1)], "no second pod may be taken down"
    degraded = conditions(seen[0])["Degraded"]
    assert degraded == ("True", "PodStuck")
    last = seen[-1]
    assert conditions(last)["Degraded"] == ("True", "RollTimedOut")
    assert last.wait is not None and last.wait.reason == "ROLL_TIMED_OUT"
    assert ns(1) in last.condition("Degraded").message  # type: ignore[union-attr]

    # the user reverts: the failing pod (now on an old template) is restarted first, then the roll goes on
    cluster.template = "fixed"
    plans = walk(cluster)
    assert cluster.restarts[:2] == [ns(1), ns(1)]
    assert cluster.restarts[2:] == [ns(0), bk(0, 2), bk(0, 1), bk(0, 0), bk(1, 2), bk(1, 1), bk(1, 0)]
    first_restart = next(a for p in plans for a in p.actions if isinstance(a, DeletePod))
    assert first_restart == DeletePod(ns(1), "POD_STUCK")


def test_operator_restarted_mid_roll_resumes_with_the_same_next_pod() -> None:
    cluster = image_change()
    for _ in range(7):  # a few restarts in
        p = cluster.plan()
        cluster.execute(p)
        cluster.now += 5
        cluster.kubelet()
    assert len(cluster.restarts) >= 3

    stored = json.loads(json.dumps(cluster.progress.to_dict()))
    assert Progress.from_dict(stored) == cluster.progress
    uninterrupted = cluster.plan()
    resumed = plan(replace(cluster.observe(), progress=Progress.from_dict(stored)))
    assert resumed == uninterrupted
    assert any(isinstance(a, DeletePod) for a in resumed.actions)


def test_restarted_operator_still_waits_for_the_pod_it_restarted() -> None:
    cluster = image_change()
    cluster.execute(cluster.plan())  # ns-1 deleted, not back yet
    stored = json.loads(json.dumps(cluster.progress.to_dict()))
    resumed = plan(replace(cluster.observe(), progress=Progress.from_dict(stored)))
    assert non_waits(resumed) == [SETTLED_GROUPS]
    assert resumed.wait is not None and resumed.wait.reason == "POD_RESTARTING"
    assert resumed.progress.roll is not None and resumed.progress.roll.current == ns(1)


GARBAGE: list[object] = [
    None,
    "rollout",
    [],
    {"rollout": "ns-1"},
    {"rollout": {"current": ns(1)}},  # a pod being restarted without when or which instance
    {"rollout": {"pending": "abc", "current": None}},
    {"rollout": {"pending": [1, 2]}},
    {"rollout": {"current": ns(1), "currentUid": "u", "startedAt": True}},
    {"rollout": {"current": ns(1), "currentUid": "u", "startedAt": float("nan")}},
    {"scaling": {"draining": [{"group": "2", "since": 1.0}]}},
    {"scaling": {"draining": [{"group": 2}]}},
    {"scaling": {"draining": [{"group": 2, "since": 1.0}, {"group": 2, "since": 2.0}]}},
    {"scaling": {"draining": {"group": 2}}},
    {"scaling": {"newGroups": [-1]}},
    {"scaling": "x", "created": "yes"},
]


@pytest.mark.parametrize("garbage", GARBAGE, ids=[json.dumps(g, default=str)[:60] for g in GARBAGE])
def test_garbled_progress_starts_over_safely(garbage: object) -> None:
    assert Progress.from_dict(garbage) == Progress()

    # mid-roll with a restarted pod still down: starting over must not take a second pod down
    cluster = image_change()
    cluster.execute(cluster.plan())
    p = plan(replace(cluster.observe(), progress=Progress.from_dict(garbage)))
    assert not any(isinstance(a, DeletePod) for a in p.actions)
    assert p.wait is not None and p.wait.reason == "WAITING_FOR_PODS"


def test_garbled_sections_are_dropped_one_by_one() -> None:
    stored = {
        "created": True,
        "rollout": {"current": ns(1)},
        "scaling": {"draining": [{"group": 2, "since": 5.0, "lastLag": 3}], "newGroups": [3]},
    }
    assert Progress.from_dict(stored) == Progress(
        roll=None, draining=(Progress.from_dict(stored).draining[0],), new_groups=(3,), created=True
    )
    assert Progress.from_dict(stored).draining[0].last_lag == 3


def test_progress_round_trips_through_json() -> None:
    progress = Progress(
        roll=RollProgress((bk(0, 1), bk(0, 0)), bk(0, 2), "uid-9", 12.5, "POD_HAS_OLD_REVISION", manual=True),
        draining=(),
        new_groups=(2, 3),
        created=True,
    )
    assert Progress.from_dict(json.loads(json.dumps(progress.to_dict()))) == progress
    assert Progress().to_dict()["rollout"] is None


# -- scaling, step by step ------------------------------------------------------------------------------------------


def test_scale_out_copies_metadata_once_after_the_new_master_registers() -> None:
    cluster = FakeCluster()
    cluster.groups = 3
    copies = []
    for step in range(12):
        p = cluster.plan()
        copies += [a for a in p.actions if isinstance(a, CopyMetadata)]
        if step == 0:
            assert CreateGroup(2, "SCALE_OUT") in p.actions
            assert p.progress.new_groups == (2,)
        assert conditions(p)["Degraded"] == HEALTHY, "a planned scale-out is no fault"
        if conditions(p)["Ready"] == READY:
            break
        if copies:
            assert conditions(p)["Progressing"] == ("True", "ScalingOut")
        else:
            new_master = cluster.broker.get(2) and cluster.broker[2].pods[0]
            assert not (new_master and new_master.ready and new_master.registered)
            assert conditions(p)["Progressing"] == ("True", "ScalingOut")
        cluster.execute(p)
        if step == 1:
            # the master comes up before its slaves: the copy need not wait for them
            for o, pod in cluster.broker[2].pods.items():
                if o == 0:
                    pod.ready, pod.phase, pod.waiting, pod.registered = True, "Running", None, True
        else:
            cluster.kubelet()
        cluster.now += 5
    else:
        raise AssertionError("scale-out did not finish")
    assert copies == [CopyMetadata(2, 0)]
    assert non_waits(p) == [ApplyChildren((0, 1, 2))]
    assert p.progress.new_groups == ()


def test_new_group_master_not_registered_yet_gets_no_copy() -> None:
    cluster = FakeCluster()
    cluster.groups = 3
    cluster.execute(cluster.plan())
    cluster.kubelet()
    cluster.broker[2].pods[0].registered = False
    p = cluster.plan()
    assert not any(isinstance(a, CopyMetadata) for a in p.actions)
    assert conditions(p)["Progressing"] == ("True", "ScalingOut")


def test_metadata_copy_asked_by_observation_survives_lost_progress() -> None:
    cluster = FakeCluster(groups=3)
    cluster.broker[2].copied = False  # the handler sees group 2 lacks the cluster's topics
    p = cluster.plan()
    assert CopyMetadata(2, 0) in p.actions


@pytest.mark.parametrize(("when_scaled", "delete_pvcs"), [("Retain", False), ("Delete", True)])
def test_scale_in_drains_then_deletes_per_retention(when_scaled: str, delete_pvcs: bool) -> None:
    cluster = FakeCluster(groups=3, when_scaled=when_scaled)
    cluster.groups = 2
    cluster.broker[2].consumer_lag = 40
    lags = iter([40, 25, 0])
    plans = []
    for _ in range(10):
        p = cluster.plan()
        plans.append(p)
        if conditions(p)["Ready"] == READY:
            break
        cluster.execute(p)
        if 2 in cluster.broker:
            cluster.broker[2].consumer_lag = next(lags, 0)
        cluster.now += 30
    assert cluster.deleted_groups == [(2, delete_pvcs)]
    wipes = [a for p in plans for a in p.actions if isinstance(a, WipeWritePerm)]
    assert wipes == [WipeWritePerm(2)]
    assert "consumer lag 25" in (plans[2].condition("Progressing").message)  # type: ignore[union-attr]
    assert [d.last_lag for d in plans[2].progress.draining] == [25]
    assert non_waits(plans[-1]) == [SETTLED_GROUPS]


def test_scale_in_removes_the_highest_group_first() -> None:
    cluster = FakeCluster(groups=4)
    cluster.groups = 2
    cluster.execute(cluster.plan())
    assert [cluster.broker[g].writable for g in (2, 3)] == [False, False]
    cluster.broker[2].consumer_lag = 0  # group 2 drains first, group 3 still has lag
    cluster.broker[3].consumer_lag = 9
    p = cluster.plan()
    assert not any(isinstance(a, DeleteGroup) for a in p.actions)
    cluster.broker[3].consumer_lag = 0
    p = cluster.plan()
    assert [a for a in p.actions if isinstance(a, DeleteGroup)] == [DeleteGroup(3, False), DeleteGroup(2, False)]


def test_drain_timed_out_reports_the_remaining_lag_and_recovers_when_drained() -> None:
    cluster = draining(lag=120, for_seconds=3601)()
    blocked = cluster.plan()
    message = blocked.condition("ScaleDownBlocked").message  # type: ignore[union-attr]
    assert "consumer lag 120" in message and "group 2" in message
    assert 2 in cluster.broker
    cluster.broker[2].consumer_lag = 0
    p = cluster.plan()
    assert DeleteGroup(2, False) in p.actions
    assert conditions(p)["ScaleDownBlocked"] == NOT_BLOCKED


def test_a_drain_never_deletes_messages_no_consumer_group_reads() -> None:
    """Lag 0 is not drained while a topic nobody consumes holds messages: blocked at once, naming them."""
    cluster = FakeCluster(groups=3)
    cluster.groups = 2
    cluster.broker[2].unread = (("Orders", 17), ("SCHEDULE_TOPIC_XXXX", 8))
    for _ in range(4):
        p = cluster.plan()
        cluster.execute(p)
        cluster.now += 60
        assert not any(isinstance(a, DeleteGroup) for a in p.actions)
    assert conditions(p)["ScaleDownBlocked"] == ("True", "UnreadMessages")
    message = p.condition("ScaleDownBlocked").message  # type: ignore[union-attr]
    assert "25 message(s)" in message and "Orders (17)" in message and "SCHEDULE_TOPIC_XXXX (8)" in message
    assert p.wait is not None and p.wait.reason == "DRAIN_BLOCKED"
    cluster.broker[2].unread = None  # unknown (the broker did not answer) is not drained either
    assert not any(isinstance(a, DeleteGroup) for a in cluster.plan().actions)
    cluster.broker[2].unread = ()  # a consumer group read them
    p = cluster.plan()
    assert DeleteGroup(2, False) in p.actions
    assert conditions(p)["ScaleDownBlocked"] == NOT_BLOCKED


def test_deleting_an_ephemeral_group_says_its_data_goes() -> None:
    assert "keeping its volumes" in DeleteGroup(2, False).describe()
    message = DeleteGroup(2, False, ephemeral=True).describe()
    assert "volumes" not in message and "ephemeral storage: its data goes with its pods" in message


def test_a_drain_with_drain_off_deletes_unread_messages_as_asked() -> None:
    cluster = FakeCluster(groups=3, scale_down=ScaleDownSettings(drain=False))
    cluster.groups = 2
    cluster.broker[2].unread = (("Orders", 17),)
    assert DeleteGroup(2, False) in cluster.plan().actions


@pytest.mark.parametrize(
    ("size", "expansion", "blocked", "grown"),
    [
        ("20Gi", True, NOT_BLOCKED, True),  # grown in place, the StatefulSets re-created
        ("20Gi", False, ("True", "VolumeExpansionNotAllowed"), False),
        ("20Gi", None, ("True", "VolumeExpansionNotAllowed"), False),  # the class could not be read
        ("5Gi", True, ("True", "VolumeShrinkNotAllowed"), False),
        ("10240Mi", False, NOT_BLOCKED, True),  # the same size, spelled otherwise: nothing to do
    ],
)
def test_a_volume_size_change(size: str, expansion: bool | None, blocked: tuple[str, str], grown: bool) -> None:
    cluster = FakeCluster(volume_expansion=expansion)
    cluster.storage_size = size
    p = cluster.plan()
    cluster.execute(p)  # the fake API server refuses a changed volumeClaimTemplate, as the real one does
    assert conditions(p)["StorageResizeBlocked"] == blocked
    resized = [a for a in p.actions if isinstance(a, ResizeClaims | RecreateStatefulSet)]
    if grown and size == "20Gi":
        assert resized == [
            ResizeClaims(0, "20Gi"),
            RecreateStatefulSet(0),
            ResizeClaims(1, "20Gi"),
            RecreateStatefulSet(1),
        ]
        assert [g.claim_size for g in cluster.broker.values()] == ["20Gi", "20Gi"]
        assert not cluster.restarts  # the pods are adopted by the new StatefulSets, not restarted
    else:
        assert resized == []
    later = cluster.plan()
    assert not any(isinstance(a, ResizeClaims | RecreateStatefulSet) for a in later.actions)
    assert conditions(later)["StorageResizeBlocked"] == blocked
    assert conditions(later)["Ready"] == READY  # refused or done, the cluster serves


def test_a_refused_growth_still_rolls_a_new_image_and_can_be_set_back() -> None:
    cluster = FakeCluster(volume_expansion=False)
    cluster.storage_size = "20Gi"
    cluster.change_template("r2")  # applied with each StatefulSet's own claim size (the fake asserts it)
    plans = walk(cluster)
    assert {p.revision for g in cluster.broker.values() for p in g.pods.values()} == {"r2"}
    assert conditions(plans[-1])["StorageResizeBlocked"] == ("True", "VolumeExpansionNotAllowed")
    cluster.storage_size = "10Gi"
    assert conditions(cluster.plan())["StorageResizeBlocked"] == NOT_BLOCKED


def test_a_volume_growth_waits_for_a_roll_under_way() -> None:
    cluster = image_change()
    cluster.volume_expansion = True
    cluster.execute(cluster.plan())  # the roll starts
    cluster.storage_size = "20Gi"
    p = cluster.plan()
    assert not any(isinstance(a, ResizeClaims) for a in p.actions)
    assert "growing the volumes to 20Gi waits" in p.condition("Progressing").message  # type: ignore[union-attr]
    plans = walk(cluster)
    assert [g.claim_size for g in cluster.broker.values()] == ["20Gi", "20Gi"]
    assert any(isinstance(a, ResizeClaims) for p in plans for a in p.actions)


def test_a_diverged_slave_is_degraded_and_the_cluster_not_ready() -> None:
    cluster = FakeCluster()
    cluster.broker[1].pods[1].diverged = "the slave's CommitLog ends at 20470, AHEAD of the master"
    cluster.broker[1].pods[1].lag = None
    p = cluster.plan()
    assert conditions(p)["Degraded"] == ("True", "ReplicaDiverged")
    assert bk(1, 1) in p.condition("Degraded").message and "AHEAD" in p.condition("Degraded").message  # type: ignore[union-attr]
    assert conditions(p)["Ready"][0] == "False"


def test_ready_waits_for_every_slave_s_replication_to_be_measured() -> None:
    cluster = FakeCluster()
    cluster.broker[0].pods[2].lag = None  # the slave answered nothing yet (just restarted, not streaming)
    assert conditions(cluster.plan())["Ready"][0] == "False"
    cluster.broker[0].pods[2].lag = 0
    assert conditions(cluster.plan())["Ready"] == READY
    # a master came back elsewhere; the slave's session with the old one has not timed out yet
    cluster.broker[0].pods[2].attached = False
    assert conditions(cluster.plan())["Ready"][0] == "False"
    assert conditions(cluster.plan())["Degraded"] == HEALTHY  # waiting for it, not a fault


def test_settled_cluster_plans_the_same_step_forever() -> None:
    cluster = FakeCluster()
    first = cluster.plan()
    cluster.execute(first)
    cluster.now += 3600
    later = cluster.plan()
    assert non_waits(later) == [SETTLED_GROUPS] and later.wait is None
    assert later.conditions == first.conditions
    assert later.phase == "Ready"


def test_paused_keeps_progress_and_reports_only_the_pause() -> None:
    cluster = image_change()
    cluster.execute(cluster.plan())
    cluster.paused = True
    p = cluster.plan()
    assert p.actions == ()
    assert p.progress == cluster.progress
    assert [c.to_dict()["type"] for c in p.conditions] == ["ReconciliationPaused"]
    assert p.phase == "Paused"


def test_operator_restarted_mid_drain_keeps_the_drain_clock() -> None:
    cluster = draining(lag=120, for_seconds=3000)()
    cluster.execute(cluster.plan())
    stored = json.loads(json.dumps(cluster.progress.to_dict()))
    cluster.progress = Progress.from_dict(stored)
    cluster.now += 700  # 3700 s since the write permission was wiped
    p = cluster.plan()
    assert conditions(p)["ScaleDownBlocked"] == ("True", "DrainTimedOut")
    assert not any(isinstance(a, WipeWritePerm | DeleteGroup) for a in p.actions)


def test_scale_out_and_image_change_in_one_edit() -> None:
    cluster = FakeCluster()
    cluster.groups = 3
    cluster.change_template("r2")
    p = cluster.plan()
    # creating a group takes nothing down, so the roll starts beside it
    assert non_waits(p) == [SETTLED_GROUPS, CreateGroup(2, "SCALE_OUT"), DeletePod(ns(1), "POD_HAS_OLD_REVISION")]
    cluster.execute(p)
    restarted = cluster.pod(ns(1))
    restarted.ready, restarted.phase, restarted.waiting = True, "Running", None
    # the new group's pods are still starting: no ready pod is taken down until they are up
    p = cluster.plan()
    assert not any(isinstance(a, DeletePod) for a in p.actions)
    assert p.wait is not None and p.wait.reason == "WAITING_FOR_PODS"
    assert {pod.revision for pod in cluster.broker[2].pods.values()} == {"r2"}
    cluster.kubelet()
    assert DeletePod(ns(0), "POD_HAS_OLD_REVISION") in cluster.plan().actions


def test_manual_roll_leaves_a_pending_pod_on_the_current_template_alone() -> None:
    cluster = manual_roll()
    pending = cluster.pod(bk(0, 1))
    pending.ready, pending.phase, pending.waiting = False, "Pending", "Unschedulable"
    p = cluster.plan()
    assert non_waits(p) == [SETTLED_GROUPS, ClearManualRollRequest()]
    assert p.wait is not None and p.wait.reason == "WAITING_FOR_PODS"
    assert p.progress.roll is not None and bk(0, 1) not in p.progress.roll.pending
    assert conditions(p)["Degraded"] == ("True", "PodStuck")


@pytest.mark.parametrize(
    ("registered", "lag", "awaited"),
    [(False, 0, "to register with the NameServer"), (True, 4096, "to catch up"), (True, None, "lag unknown")],
)
def test_a_restarted_slave_must_register_and_catch_up_before_the_next_pod(
    registered: bool, lag: int | None, awaited: str
) -> None:
    cluster = master_left("ASYNC", lag=0)()
    cluster.pod(bk(0, 2)).revision = "r1"
    cluster.execute(cluster.plan())
    assert cluster.restarts == [bk(0, 2)]
    cluster.kubelet()
    slave = cluster.pod(bk(0, 2))
    slave.registered, slave.lag = registered, lag
    p = cluster.plan()
    assert non_waits(p) == [ApplyChildren((0,))]
    assert p.wait is not None and p.wait.reason == "POD_RESTARTING" and awaited in p.wait.message
    slave.registered, slave.lag = True, 0
    assert DeletePod(bk(0, 0), "POD_HAS_OLD_REVISION") in cluster.plan().actions


def test_a_blocked_roll_under_way_still_goes_before_a_new_scale_in() -> None:
    cluster = FakeCluster(groups=2, replication="SYNC")
    cluster.change_template("r2")
    for name in (ns(0), ns(1), bk(0, 1), bk(0, 2), bk(1, 0), bk(1, 1), bk(1, 2)):
        cluster.pod(name).revision = "r2"
    for name in (bk(0, 1), bk(0, 2)):
        cluster.pod(name).lag = 5000
    cluster.progress = Progress(roll=RollProgress(pending=(bk(0, 0),)), created=True)
    cluster.groups = 1
    p = cluster.plan()
    assert non_waits(p) == [ApplyChildren((0,))]
    assert p.wait is not None and p.wait.reason == "WAITING_FOR_IN_SYNC_SLAVE"
    assert conditions(p)["Progressing"] == ("True", "RollingUpdate")
    assert "rolling update" in p.condition("Progressing").message  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("build", "degraded"),
    [
        (with_pod(settled, bk(0, 0), ready=False), ("True", "GroupNotWritable")),  # a master died
        (with_pod(settled, bk(0, 1), ready=False), ("False", "Healthy")),  # a slave: the group still takes writes
        (with_pod(fresh_second_reconcile, bk(0, 0), ready=False), ("False", "Healthy")),  # still creating
    ],
)
def test_a_group_whose_master_is_down_is_degraded(build: Callable[[], FakeCluster], degraded: tuple[str, str]) -> None:
    p = build().plan()
    assert conditions(p)["Degraded"] == degraded, p.conditions
    found = p.condition("Degraded")
    if degraded[0] == "True":
        assert p.phase == "Degraded" and found is not None and "master is not ready" in found.message
