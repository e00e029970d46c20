"""Plain data in and out of the RocketCluster planner: what the handler observed, and what it should do next.

The kopf handler fills an `Observed` from the RocketCluster and its pods and StatefulSets (and from broker
admin calls: registration, replication lag, write permission, consumer lag), calls `rocketcluster.plan.plan`,
executes the returned `Plan.actions` in order, and writes `Plan.progress` and `Plan.conditions` to status.
Nothing here talks to Kubernetes: frozen dataclasses only, so a plan is a value a test compares.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal, TypeAlias

from rocketcluster.plan_progress import Progress

__all__ = [
    "STUCK_REASONS",
    "Action",
    "AddWritePerm",
    "ApplyChildren",
    "ClearManualRollRequest",
    "Condition",
    "CopyMetadata",
    "CreateGroup",
    "DeleteGroup",
    "DeletePod",
    "ElectMaster",
    "ForceDeletePod",
    "GroupObservation",
    "LiveConfigObservation",
    "NameServerObservation",
    "NodeObservation",
    "Observed",
    "Plan",
    "PodObservation",
    "RecreateStatefulSet",
    "Replication",
    "ResizeClaims",
    "Retention",
    "RolloutSettings",
    "ScaleDownSettings",
    "UpdateBrokerConfig",
    "Wait",
    "WipeWritePerm",
]

Replication: TypeAlias = Literal["ASYNC", "SYNC"]
Retention: TypeAlias = Literal["Retain", "Delete"]

# Waiting reasons after which a container does not start by itself: a restart only helps with another template.
STUCK_REASONS: Final = frozenset(
    {
        "CrashLoopBackOff",
        "ImagePullBackOff",
        "ErrImagePull",
        "ErrImageNeverPull",  # imagePullPolicy Never and the image is not on the node
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "Unschedulable",
    }
)


# -- what the handler observed -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodObservation:
    """One pod of the NameServer or of a broker group.

    `revision` is the pod's `controller-revision-hash` label. `waiting_reason` is the first container's waiting
    reason, or `Unschedulable` for a pod the scheduler could not place (PodScheduled=False). For a broker pod,
    `registered` says the NameServer lists it, and `lag_bytes` is a slave's replication lag behind its master
    (None when unknown, which counts as not caught up); `diverged` says why a slave stopped replicating because
    its CommitLog and its master's diverged; `attached` is false for a slave the current master serves no
    replication connection (still attached to a master that is gone, its session not timed out yet).
    `broker_id` is the id it registered with (with spec.failover the controller's, else the ordinal); `master`
    says, with spec.failover, whether it is registered as its group's master (id 0), and is None without it,
    where ordinal 0 is the master. `in_sync_set`: with spec.failover, whether the controller's SyncStateSet
    holds it (None: not known).
    """

    name: str
    ordinal: int
    uid: str
    ready: bool
    revision: str | None
    phase: str = "Running"
    waiting_reason: str | None = None
    registered: bool = False
    lag_bytes: int | None = None
    diverged: str | None = None
    attached: bool = True
    broker_id: int | None = None
    master: bool | None = None
    in_sync_set: bool | None = None
    node: str | None = None  # spec.nodeName: the node it is bound to (None: not scheduled)

    @property
    def is_master(self) -> bool:
        """The group's master: registered as id 0 with spec.failover, else ordinal 0."""
        return self.ordinal == 0 if self.master is None else self.master

    @property
    def stuck(self) -> bool:
        return self.phase == "Failed" or self.waiting_reason in STUCK_REASONS

    @property
    def pending(self) -> bool:
        return self.phase == "Pending"


@dataclass(frozen=True, slots=True)
class NameServerObservation:
    """The NameServer StatefulSet (`update_revision` is its status.updateRevision) and its pods."""

    statefulset_exists: bool = False
    update_revision: str | None = None
    pods: tuple[PodObservation, ...] = ()


@dataclass(frozen=True, slots=True)
class LiveConfigObservation:
    """What one registered broker holds now for the keys it applies at run time (GET_BROKER_CONFIG): its
    brokerId (the pod's ordinal), the address it registered, and (key, value) pairs."""

    broker_id: int
    addr: str
    values: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class GroupObservation:
    """One broker group that exists in the cluster (a StatefulSet, or pods left of one).

    `statefulset_exists` is false for a StatefulSet that is being deleted; `claim_size` is the size its
    volumeClaimTemplates ask for (None: ephemeral storage, or no StatefulSet). `metadata_copied` says whether the
    group holds the cluster's topics and subscription groups: True skips the copy, False asks for one even
    when the planner's own record lost it, None (unknown) leaves it to that record. `writable` is the group
    master's write permission (None when unknown); `consumer_lag` the messages not yet consumed from it, summed
    over consumer groups and queues (None when unknown); `unread` the messages no consumer group reads (queues
    nobody committed on, delayed messages not delivered yet) as (topic, count) pairs (None when unknown).
    """

    index: int
    statefulset_exists: bool = True
    update_revision: str | None = None
    pods: tuple[PodObservation, ...] = ()
    metadata_copied: bool | None = None
    writable: bool | None = None
    consumer_lag: int | None = None
    unread: tuple[tuple[str, int], ...] | None = None
    claim_size: str | None = None  # the data volumes' size in the StatefulSet's volumeClaimTemplates
    live_config: tuple[LiveConfigObservation, ...] = ()  # the brokers that answered GET_BROKER_CONFIG
    # pods with a deletionTimestamp (left out of `pods`): on a lost node they stay until someone force-deletes them
    terminating: tuple[PodObservation, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeObservation:
    """A node a broker pod is bound to. `ready` is its Ready condition's status ("True", "False", "Unknown"; None
    when it has none) and `ready_since` that condition's lastTransitionTime; `tainted_since` is when the earliest
    of its `node.kubernetes.io/unreachable` and `node.kubernetes.io/not-ready` taints was added (None: neither).
    Times are seconds since the epoch, like `Observed.now`."""

    name: str
    ready: str | None = "True"
    ready_since: float | None = None
    tainted_since: float | None = None


@dataclass(frozen=True, slots=True)
class RolloutSettings:
    """spec.rollout. A slave is caught up when its lag is at most `max_slave_lag_bytes`."""

    pod_ready_timeout_seconds: float = 600.0
    max_slave_lag_bytes: int = 0
    require_in_sync_slave: bool = True


@dataclass(frozen=True, slots=True)
class ScaleDownSettings:
    """spec.scaleDown."""

    drain: bool = True
    drain_timeout_seconds: float = 3600.0


@dataclass(frozen=True, slots=True)
class Observed:
    """Everything one reconcile of one RocketCluster knows. `cluster` is its metadata.name; `now` is the handler's
    clock (the planner reads none)."""

    cluster: str
    generation: int
    now: float
    groups: int
    slaves_per_group: int
    nameserver_replicas: int
    replication: Replication = "ASYNC"
    rollout: RolloutSettings = RolloutSettings()
    scale_down: ScaleDownSettings = ScaleDownSettings()
    when_scaled: Retention = "Retain"
    ephemeral: bool = False  # storage.type ephemeral: no volumes to keep or delete
    storage_size: str = "10Gi"  # spec.storage.size
    volume_expansion: bool | None = None  # whether the claims' StorageClass allows expansion (None: unknown)
    paused: bool = False
    manual_roll: bool = False
    nameserver: NameServerObservation = NameServerObservation()
    broker_groups: tuple[GroupObservation, ...] = ()
    progress: Progress = field(default_factory=Progress)
    # the run-time broker keys the brokers should hold and their values (live_config.live_wanted)
    live_wanted: tuple[tuple[str, str], ...] = ()
    # spec.failover: the controller decides each group's master; a master is handed over before it restarts
    failover: bool = False
    # spec.failover: the nodes the broker pods are bound to, and how long one may be lost before the operator acts
    nodes: tuple[NodeObservation, ...] = ()
    node_lost_grace_seconds: float = 30.0


# -- what the planner decided: actions, in the order the handler executes them --------------------------------------
# Each action's `reason` is fit for a Kubernetes Event's reason; `describe()` is its message.


@dataclass(frozen=True, slots=True)
class ApplyChildren:
    """Apply the cluster-wide children (NameServer, Services, ServiceAccount, connection ConfigMap) and the
    children of the existing broker groups in `groups` (their StatefulSets, ConfigMaps, PDBs). Idempotent.
    `claim_sizes`: (group, size) for StatefulSets whose volumeClaimTemplates keep a size other than the spec's
    (the API server refuses to change them)."""

    groups: tuple[int, ...]
    reason: str = "APPLY_CHILDREN"
    claim_sizes: tuple[tuple[int, str], ...] = ()
    held_replicas: tuple[tuple[int, int], ...] = ()  # (group, replicas) kept until its master moved (failover)

    def describe(self) -> str:
        return f"apply the NameServer, shared children and broker groups {list(self.groups)}"


@dataclass(frozen=True, slots=True)
class CreateGroup:
    """Create broker group `group`'s children (the rendered group: StatefulSet, ConfigMap, PDB)."""

    group: int
    reason: str = "SCALE_OUT"

    def describe(self) -> str:
        return f"create broker group {self.group}"


@dataclass(frozen=True, slots=True)
class CopyMetadata:
    """Create on group `group` the topics and subscription groups that group `source` has."""

    group: int
    source: int
    reason: str = "COPY_METADATA"

    def describe(self) -> str:
        return f"copy topics and subscription groups from broker group {self.source} to group {self.group}"


@dataclass(frozen=True, slots=True)
class DeletePod:
    """Delete a pod; its StatefulSet (OnDelete) recreates it from the current template."""

    pod: str
    reason: str

    def describe(self) -> str:
        return f"restart pod {self.pod} ({self.reason})"


@dataclass(frozen=True, slots=True)
class WipeWritePerm:
    """Take write permission from group `group`'s master: producers move to the other groups, consumers drain it."""

    group: int
    reason: str = "DRAIN"

    def describe(self) -> str:
        return f"wipe the write permission of broker group {self.group} to drain it"


@dataclass(frozen=True, slots=True)
class AddWritePerm:
    """Give group `group` its write permission back (a drain cancelled by scaling back up)."""

    group: int
    reason: str = "SCALE_IN_CANCELLED"

    def describe(self) -> str:
        return f"give broker group {self.group} its write permission back"


@dataclass(frozen=True, slots=True)
class DeleteGroup:
    """Delete group `group`'s children; its PVCs too when `delete_pvcs` (retention.whenScaled: Delete).
    `ephemeral`: the group has no volumes (storage.type ephemeral), so its data goes with its pods."""

    group: int
    delete_pvcs: bool
    reason: str = "SCALE_IN"
    ephemeral: bool = False

    def describe(self) -> str:
        if self.ephemeral:
            return f"delete broker group {self.group} (ephemeral storage: its data goes with its pods)"
        pvcs = "and its volumes" if self.delete_pvcs else "keeping its volumes"
        return f"delete broker group {self.group} {pvcs}"


@dataclass(frozen=True, slots=True)
class ResizeClaims:
    """Patch every data PVC of group `group` to request `size` (its StorageClass allows expansion)."""

    group: int
    size: str
    reason: str = "RESIZE_VOLUMES"

    def describe(self) -> str:
        return f"grow the volumes of broker group {self.group} to {self.size}"


@dataclass(frozen=True, slots=True)
class RecreateStatefulSet:
    """Delete group `group`'s StatefulSet leaving its pods (orphaned), and apply it again from the spec: the
    only way to change its volumeClaimTemplates. The new StatefulSet adopts the running pods."""

    group: int
    reason: str = "RECREATE_STATEFULSET"

    def describe(self) -> str:
        return f"re-create the StatefulSet of broker group {self.group} with the new volume size, keeping its pods"


@dataclass(frozen=True, slots=True)
class ClearManualRollRequest:
    """Remove the manual-rolling-update annotation: the roll it asked for is recorded in `Plan.progress`, so
    the handler should clear it in the same patch as the status (then neither is lost without the other)."""

    reason: str = "MANUAL_ROLLING_UPDATE"

    def describe(self) -> str:
        return "manual rolling update recorded; clearing the annotation"


@dataclass(frozen=True, slots=True)
class UpdateBrokerConfig:
    """Set `keys` ((key, value) pairs) on the running broker `pod` at `addr` (UPDATE_BROKER_CONFIG): keys the
    broker applies at run time, so no restart."""

    pod: str
    addr: str
    keys: tuple[tuple[str, str], ...]
    reason: str = "CONFIG_APPLIED_LIVE"

    def describe(self) -> str:
        changed = ", ".join(f"{k}={v}" for k, v in self.keys)
        return f"set {changed} on broker {self.pod} at run time (no restart)"


@dataclass(frozen=True, slots=True)
class ElectMaster:
    """spec.failover: ask the controller to make `pod` (controller id `broker_id`, an in-sync slave) the master
    of group `group` in place of `master`, so that `master` can be restarted as a slave (one election)."""

    group: int
    pod: str
    broker_id: int
    master: str
    reason: str = "MASTER_HANDOVER"

    def describe(self) -> str:
        return f"hand the mastership of broker group {self.group} from {self.master} over to {self.pod}"


@dataclass(frozen=True, slots=True)
class ForceDeletePod:
    """spec.failover: delete pod `pod` (that incarnation: `uid`) of group `group` with grace period 0. Its node
    `node` is lost, so the kubelet there can neither stop it nor confirm a deletion; removing the object lets the
    StatefulSet recreate the pod elsewhere, and the old process, if it still runs, is left without a pod (its
    address and its volume claim go to the new one). Never planned for its group's master."""

    pod: str
    uid: str
    group: int
    node: str
    reason: str = "NODE_LOST"

    def describe(self) -> str:
        return (
            f"force-delete pod {self.pod} of broker group {self.group}: its node {self.node} is lost "
            "(grace period 0; its StatefulSet recreates it)"
        )


@dataclass(frozen=True, slots=True)
class Wait:
    """Nothing more to do now: reconcile again in `retry_after_seconds` (kopf.TemporaryError(delay=...))."""

    reason: str
    message: str
    retry_after_seconds: float

    def describe(self) -> str:
        return self.message


Action: TypeAlias = (
    ApplyChildren
    | CreateGroup
    | CopyMetadata
    | DeletePod
    | WipeWritePerm
    | AddWritePerm
    | DeleteGroup
    | ResizeClaims
    | RecreateStatefulSet
    | ClearManualRollRequest
    | UpdateBrokerConfig
    | ElectMaster
    | ForceDeletePod
    | Wait
)


@dataclass(frozen=True, slots=True)
class Condition:
    """One status condition (the handler adds lastTransitionTime when the status changes)."""

    type: str
    status: Literal["True", "False"]
    reason: str
    message: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type, "status": self.status, "reason": self.reason, "message": self.message}


@dataclass(frozen=True, slots=True)
class Plan:
    """The next step: actions in order (at most one Wait, always last), the progress to store, the conditions."""

    actions: tuple[Action, ...]
    progress: Progress
    conditions: tuple[Condition, ...]
    observed_generation: int

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)

    @property
    def wait(self) -> Wait | None:
        last = self.actions[-1] if self.actions else None
        return last if isinstance(last, Wait) else None

    @property
    def phase(self) -> str:
        """A one-word summary for printer columns: Paused, Degraded, Creating, Progressing, Ready or Pending."""

        def true(type_: str) -> Condition | None:
            found = self.condition(type_)
            return found if found is not None and found.status == "True" else None

        progressing = true("Progressing")
        if true("ReconciliationPaused"):
            return "Paused"
        if true("Degraded"):
            return "Degraded"
        if progressing is not None:
            return "Creating" if progressing.reason == "Creating" else "Progressing"
        return "Ready" if true("Ready") else "Pending"
