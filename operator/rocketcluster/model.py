"""The RocketCluster resource as pydantic models: the spec users write and the status the operator reports.

The handlers call `parse_spec(body["spec"])` before anything else and report a `SpecError` as the InvalidSpec
condition; render and plan take the parsed `RocketClusterSpec`. `rocketcluster.crd` turns these models into the
CRD's OpenAPI schema, so a field, default or bound is declared once, here. Field docstrings become the schema's
descriptions (`kubectl explain rocketcluster.spec.broker`).

On the wire every field is camelCase (`slavesPerGroup`); Python code may use either name. Unknown fields are
refused, as the CRD refuses them (a misspelt field would otherwise be pruned by the API server, silently).
Validation is strict: `"3"` is not a number, as it is not for the API server.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from rocketcluster.broker_keys import BROKER_KEYS, OWNED_KEYS, check_value
from rocketcluster.names import BROKER_HA_PORT, BROKER_MAIN_PORT, NAMESERVER_PORT
from rocketcluster.pod_extras import Containers, EnvVars, VolumeMounts, Volumes, bounded_object

__all__ = [
    "DEFAULT_IMAGE",
    "BrokerSpec",
    "Condition",
    "Failover",
    "GroupMasterStatus",
    "GroupSlaveStatus",
    "GroupStatus",
    "GrpcSpec",
    "NameServerSpec",
    "NameServerStatus",
    "Phase",
    "Placement",
    "PodTemplate",
    "Resources",
    "Retention",
    "RocketClusterSpec",
    "RocketClusterStatus",
    "Rollout",
    "ScaleDown",
    "SecuritySpec",
    "SpecError",
    "Storage",
    "parse_spec",
    "parse_status",
]

DEFAULT_IMAGE = "rocketcluster.local/broker:0.1.0"

# Bounds on free-form input. They keep a hostile or mistaken spec from making huge children, and they are what
# lets the API server's CEL cost estimate pass (it assumes the worst case of every unbounded list and string).
MAX_GROUPS = 64
MAX_SLAVES_PER_GROUP = 4
MAX_NAMESERVERS = 16
MAX_CONFIG_KEYS = 64
MAX_CONFIG_VALUE = 1024
MAX_MAP_ENTRIES = 32
MAX_LIST_ITEMS = 32
# A Kubernetes quantity ("500m", "10Gi", "1e3"), as the API server parses it.
QUANTITY_PATTERN = r"^[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?[0-9]+))?$"
# Label values: at most 63 characters, alphanumeric at both ends.
_LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
_DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_RESOURCE_NAME = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f]")

_QUANTITY = re.compile(QUANTITY_PATTERN)


def _resource_quantity(value: Any) -> int | str:
    # One check for both forms, so a bad value gets one message rather than one per member of int | str.
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"must be a quantity such as 500m, 2Gi or 4 (got {type(value).__name__})")
    if isinstance(value, int):
        if value < 0:
            raise ValueError("must not be negative")
        return value
    if len(value) > 64 or not _QUANTITY.match(value):
        raise ValueError(f"{value[:64]!r} is not a quantity such as 500m, 2Gi or 4")
    return value


Quantity = Annotated[str, StringConstraints(pattern=QUANTITY_PATTERN, max_length=64)]
# An int-or-string, as Kubernetes resource quantities are (`cpu: 1` and `cpu: "500m"`).
ResourceQuantity = Annotated[
    int | str,
    PlainValidator(_resource_quantity),
    WithJsonSchema({"x-kubernetes-int-or-string": True, "pattern": QUANTITY_PATTERN}),
]
LabelValue = Annotated[str, StringConstraints(pattern=_LABEL_VALUE_PATTERN, max_length=63)]
DnsSubdomain = Annotated[str, StringConstraints(pattern=_DNS_SUBDOMAIN_PATTERN, min_length=1, max_length=253)]
# One line of printable text: a newline in a broker.conf value would start a new key.
ConfigValue = Annotated[str, StringConstraints(pattern=r"^[^\x00-\x1f\x7f]*$", max_length=MAX_CONFIG_VALUE)]
AnnotationValue = Annotated[str, StringConstraints(max_length=4096)]


KubeObject = Annotated[dict[str, Any], AfterValidator(bounded_object)]
"""A Kubernetes object passed through to the pods as written (the API server validates it on the StatefulSet)."""


def _check_label_keys(value: dict[str, str]) -> dict[str, str]:
    for key in value:
        if len(key) > 317 or not _LABEL_KEY.match(key):
            raise ValueError(f"key {key!r} is not a valid label key ([prefix/]name)")
    return value


class _Wire(BaseModel):
    """camelCase on the wire, unknown fields refused, no coercion, immutable once parsed."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        strict=True,
        frozen=True,
        use_attribute_docstrings=True,
    )


class Resources(_Wire):
    """Container resources (requests and limits), as in a Kubernetes container."""

    requests: dict[str, ResourceQuantity] = Field(default_factory=dict, max_length=16)
    """Resource name (cpu, memory, ...) -> quantity."""
    limits: dict[str, ResourceQuantity] = Field(default_factory=dict, max_length=16)
    """Resource name (cpu, memory, ...) -> quantity."""

    @field_validator("requests", "limits")
    @classmethod
    def _check_names(cls, value: dict[str, int | str]) -> dict[str, int | str]:
        for name in value:
            if len(name) > 253 or not _RESOURCE_NAME.match(name):
                raise ValueError(f"{name!r} is not a resource name")
        return value

    def to_kube(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.requests:
            out["requests"] = dict(sorted(self.requests.items()))
        if self.limits:
            out["limits"] = dict(sorted(self.limits.items()))
        return out


class PodTemplate(_Wire):
    """Pod settings passed through to the pods. The cluster-wide `spec.template` applies to every pod; a
    component's own template (`spec.nameServer.template`, `spec.broker.template`) is merged over it: maps key by
    key, anything else replaced when set."""

    labels: dict[str, LabelValue] = Field(default_factory=dict, max_length=MAX_MAP_ENTRIES)
    """Extra pod labels. The operator's own labels win on a clash (selectors depend on them)."""
    annotations: dict[str, AnnotationValue] = Field(default_factory=dict, max_length=MAX_MAP_ENTRIES)
    """Extra pod annotations."""
    affinity: KubeObject | None = None
    """Pod affinity; when set it replaces the anti-affinity that spec.placement asks for."""
    tolerations: list[KubeObject] | None = Field(default=None, max_length=MAX_LIST_ITEMS)
    """Pod tolerations."""
    node_selector: dict[str, str] = Field(default_factory=dict, max_length=MAX_MAP_ENTRIES)
    """Pod nodeSelector."""
    security_context: KubeObject | None = None
    """Pod securityContext, merged over the operator's (runAsNonRoot, uid/gid/fsGroup 10001)."""
    container_security_context: KubeObject | None = None
    """Container securityContext, merged over the operator's (no privilege escalation, no capabilities)."""
    priority_class_name: DnsSubdomain | None = None
    """Pod priorityClassName."""
    topology_spread_constraints: list[KubeObject] | None = Field(default=None, max_length=MAX_LIST_ITEMS)
    """Pod topologySpreadConstraints."""
    fixed_user_ids: bool | None = None
    """false leaves runAsUser, runAsGroup and fsGroup (10001) out of the pod securityContext, so the platform
    assigns them (OpenShift's restricted SCC does). Default true."""
    env: EnvVars | None = None
    """Extra env entries of the main container (after the operator's; POD_NAME, POD_INDEX and BROKER_IP1 are
    the operator's)."""
    volumes: Volumes | None = None
    """Extra pod volumes (config, data, home and tmp are the operator's)."""
    volume_mounts: VolumeMounts | None = None
    """Extra mounts of the main container; not at or under /data, /etc/rocketcluster, /home/rocketmq, /tmp."""
    init_containers: Containers | None = None
    """Containers that run to completion before the main one. Each gets the main container's securityContext
    under its own."""
    sidecars: Containers | None = None
    """Containers that run beside the main one (after it in the pod). Each gets the main container's
    securityContext under its own."""

    @field_validator("labels", "annotations", "node_selector")
    @classmethod
    def _check_keys(cls, value: dict[str, str]) -> dict[str, str]:
        return _check_label_keys(value)

    def container_name_clash(self) -> str | None:
        """A name given to both an init container and a sidecar (a pod's containers share one namespace)."""
        sidecars = {str(item["name"]) for item in self.sidecars or ()}
        for item in self.init_containers or ():
            if item["name"] in sidecars:
                return str(item["name"])
        return None

    def merged_under(self, component: PodTemplate) -> PodTemplate:
        """This (cluster-wide) template with a component's template over it."""
        values: dict[str, Any] = {}
        for name in type(self).model_fields:
            mine, theirs = getattr(self, name), getattr(component, name)
            if isinstance(mine, dict) and name in ("labels", "annotations", "node_selector"):
                values[name] = {**mine, **theirs}
            elif isinstance(mine, dict) and isinstance(theirs, dict):
                # securityContext: field by field, the component's value winning
                values[name] = {**mine, **theirs}
            else:
                values[name] = theirs if theirs is not None else mine
        return PodTemplate.model_validate(values)


class LocalObjectReference(_Wire):
    """A Secret in the cluster's namespace, by name."""

    name: DnsSubdomain


class NameServerSpec(_Wire):
    """The NameServer StatefulSet: stateless routing registries that brokers register with."""

    replicas: int = Field(default=2, ge=1, le=MAX_NAMESERVERS)
    """NameServer pods; 2 or more for HA. A change rewrites every broker's namesrvAddr, so brokers roll."""
    resources: Resources = Field(default_factory=Resources)
    """The nameserver container's resources."""
    template: PodTemplate = Field(default_factory=PodTemplate)
    """Pod settings of the NameServer pods, merged over spec.template."""


class GrpcSpec(_Wire):
    """RocketMQ 5's gRPC endpoint (its proxy in local mode, inside every broker), for the 5.x SDKs."""

    enabled: bool = False
    """Serve apache.rocketmq.v2.MessagingService on every broker pod (enableProxy=true): the port is on the
    pods, the broker Services and the NetworkPolicy, and the connection ConfigMap gains GRPC_ENDPOINT. With
    spec.security.authentication on, every RPC is checked against the brokers' users and ACLs (the SDK signs
    with its credentials); with spec.security.tls on, the port speaks TLS only, with the brokers' certificate.
    Under externalAccess every broker's gRPC port is exposed too (type NodePort needs grpcNodePortBase)."""
    port: int = Field(default=8081, ge=1024, le=65535)
    """The gRPC port of every broker (grpcServerPort); one for all, as the route the endpoint answers names
    every broker at this port."""

    @field_validator("port")
    @classmethod
    def _not_a_broker_port(cls, value: int) -> int:
        if value in (NAMESERVER_PORT, BROKER_MAIN_PORT, BROKER_HA_PORT):
            raise ValueError(f"port {value} is taken by the NameServer or the broker (9876, 10911, 10912)")
        return value


class BrokerSpec(_Wire):
    """Broker groups: one StatefulSet per brokerName, pod ordinal = brokerId (0 = master, others slaves)."""

    groups: int = Field(default=1, ge=1, le=MAX_GROUPS)
    """Number of broker groups (brokerNames); the scale subresource's replicas."""
    slaves_per_group: int = Field(default=1, ge=0, le=MAX_SLAVES_PER_GROUP)
    """Slaves in each group; each group's StatefulSet has 1 + slavesPerGroup pods."""
    replication: Literal["ASYNC", "SYNC"] = "ASYNC"
    """ASYNC: the master acknowledges before its slaves have the message (ASYNC_MASTER). SYNC: after a slave has
    it too (SYNC_MASTER); needs slavesPerGroup >= 1."""
    flush_disk_type: Literal["ASYNC_FLUSH", "SYNC_FLUSH"] = "ASYNC_FLUSH"
    """When a put is acknowledged relative to its fsync."""
    config: dict[str, ConfigValue] = Field(default_factory=dict, max_length=MAX_CONFIG_KEYS)
    """Extra broker.conf keys for every broker. Keys the operator sets (brokerName, brokerId, brokerRole,
    namesrvAddr, listenPort, storePath*, ...) are refused, and so are keys the broker does not know."""
    resources: Resources = Field(default_factory=Resources)
    """The broker container's resources."""
    template: PodTemplate = Field(default_factory=PodTemplate)
    """Pod settings of the broker pods, merged over spec.template."""
    grpc: GrpcSpec = Field(default_factory=GrpcSpec)
    """The gRPC endpoint of RocketMQ 5's SDKs (off by default)."""

    @field_validator("config", mode="before")
    @classmethod
    def _check_config(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value  # the type check names it
        for key, text in value.items():
            if not isinstance(key, str):
                raise ValueError(f"key {key!r} is not a string")
            if key in OWNED_KEYS:
                raise ValueError(f"key {key!r} is owned by the operator ({OWNED_KEYS[key]})")
            if key not in BROKER_KEYS:
                raise ValueError(f"key {key!r} is not a broker.conf key the broker knows")
            if not isinstance(text, str):
                continue  # the type check names it
            if _CONTROL_CHARACTER.search(text):
                raise ValueError(f"value of {key!r} must be one line of text (no newline or control character)")
            problem = check_value(BROKER_KEYS[key], text.strip())
            if problem is not None:
                raise ValueError(f"value of {key!r} {problem} (got {text!r})")
        return value

    @field_validator("replication")
    @classmethod
    def _sync_needs_a_slave(cls, value: str, info: ValidationInfo) -> str:
        # slavesPerGroup is declared before replication, so it is in info.data when it was valid.
        if value == "SYNC" and info.data.get("slaves_per_group", 1) < 1:
            raise ValueError("SYNC needs slavesPerGroup >= 1 (a SYNC master waits for a slave to have each message)")
        return value


class Storage(_Wire):
    """The broker's store volume, mounted at /data."""

    type: Literal["ephemeral", "persistentClaim"] = "persistentClaim"
    """persistentClaim: one PVC per pod that outlives it; ephemeral: an emptyDir, lost with the pod. Immutable."""
    size: Quantity = "10Gi"
    """Size of each pod's volume (the PVC's request, or the emptyDir's sizeLimit). PVCs grow in place when their
    StorageClass allows volume expansion; otherwise, and below their size, the change is refused
    (StorageResizeBlocked) and the volumes keep their size."""
    storage_class_name: DnsSubdomain | None = None
    """StorageClass of the PVCs; unset means the cluster's default class. Immutable."""


class Retention(_Wire):
    """What happens to the brokers' PVCs."""

    when_deleted: Literal["Retain", "Delete"] = "Retain"
    """When the RocketCluster is deleted: keep the PVCs (a new cluster of the same name re-attaches them) or
    delete them."""
    when_scaled: Literal["Retain", "Delete"] = "Retain"
    """When a group loses slaves, or is removed by lowering spec.broker.groups: keep or delete their PVCs."""


class Placement(_Wire):
    """Where pods go relative to each other."""

    anti_affinity: Literal["preferred", "required", "none"] = "preferred"
    """Keep a group's master and slaves, and the NameServers, apart: preferred (best effort), required (pods stay
    Pending rather than share), or none. A pod affinity in a template replaces it."""
    topology_key: str = Field(default="kubernetes.io/hostname", min_length=1, max_length=317)
    """The node label that defines 'apart': kubernetes.io/hostname (nodes) or topology.kubernetes.io/zone."""


class Rollout(_Wire):
    """How the operator rolls broker pods (one at a time, slaves before their master)."""

    pod_ready_timeout_seconds: int = Field(default=600, ge=1, le=86400)
    """How long a restarted pod may take to become Ready before the roll stops and reports it."""
    max_slave_lag_bytes: int = Field(default=0, ge=0)
    """A master is restarted only when a slave is at most this many bytes behind it (0 = in sync)."""
    require_in_sync_slave: bool = True
    """Restart a master only when one of its slaves is in sync (maxSlaveLagBytes), so no acknowledged message
    is lost with it."""


class ScaleDown(_Wire):
    """How a group is removed when spec.broker.groups is lowered."""

    drain: bool = True
    """Make the group read-only and wait until consumers have read everything before removing it."""
    drain_timeout_seconds: int = Field(default=3600, ge=0, le=30 * 86400)
    """How long a drain may take before the operator reports ScaleDownBlocked."""


class Metrics(_Wire):
    """Prometheus metrics of the brokers (RocketMQ 5's metric names: docs/metrics.md)."""

    enabled: bool = False
    """Serve /metrics on every broker pod (metricsExporterType=PROM) and annotate the pods for Prometheus's
    scrape discovery (prometheus.io/scrape, /port, /path). Off by default, so enabling it is a choice (it rolls the
    brokers once)."""
    port: int = Field(default=5557, ge=1024, le=65535)
    """The brokers' metrics port (metricsPromExporterPort)."""

    @field_validator("port")
    @classmethod
    def _not_a_broker_port(cls, value: int) -> int:
        if value in (NAMESERVER_PORT, BROKER_MAIN_PORT, BROKER_HA_PORT):
            raise ValueError(f"port {value} is taken by the NameServer or the broker (9876, 10911, 10912)")
        return value


class NetworkPolicySpec(_Wire):
    """The NetworkPolicies the operator generates: who may connect to the NameServers and the brokers."""

    enabled: bool = True
    """Generate them. Off, nothing limits who connects (the cluster's own policies still apply)."""
    allow_from: list[KubeObject] | None = Field(default=None, max_length=MAX_LIST_ITEMS)
    """Who the clients are: NetworkPolicyPeers (podSelector, namespaceSelector, ipBlock), as in a
    NetworkPolicy's `from`. Unset: every pod of the cluster's namespace. The cluster's own pods and the
    operator are always admitted."""
    metrics_from: list[KubeObject] | None = Field(default=None, max_length=MAX_LIST_ITEMS)
    """Who may scrape the metrics port (spec.metrics): NetworkPolicyPeers. Unset: any pod of any namespace."""


class AuthenticationSpec(_Wire):
    """ACL 2.0 authentication (broker.conf authenticationEnabled, and the NameServer's writes)."""

    enabled: bool = False
    """Every request must be signed by a user the brokers know. The operator makes its own SUPER user
    (Secret <name>-operator-credentials) and signs its admin calls with it; applications use RocketUsers."""


class AuthorizationSpec(_Wire):
    """ACL 2.0 authorization (broker.conf authorizationEnabled)."""

    enabled: bool = False
    """Every request is checked against its user's ACL (RocketUser spec.acls). Needs authentication."""


class IssuerRef(_Wire):
    """A cert-manager issuer, as a Certificate's spec.issuerRef names it."""

    name: DnsSubdomain
    """The Issuer or ClusterIssuer."""
    kind: Literal["Issuer", "ClusterIssuer"] = "Issuer"
    """Issuer (in the cluster's namespace) or ClusterIssuer."""
    group: DnsSubdomain = "cert-manager.io"
    """The issuer's API group."""


class TlsSpec(_Wire):
    """TLS on the NameServer and broker ports (tls.server.mode=enforcing) and between the brokers."""

    enabled: bool = False
    """Serve TLS only: plaintext clients are refused. Needs secretName or issuerRef."""
    secret_name: DnsSubdomain | None = None
    """A kubernetes.io/tls Secret (tls.crt, tls.key, optionally ca.crt) in the cluster's namespace."""
    issuer_ref: IssuerRef | None = None
    """Instead of secretName: the operator makes a cert-manager Certificate (Secret <name>-tls) from this
    issuer; needs cert-manager's CRDs in the Kubernetes cluster."""

    @model_validator(mode="after")
    def _one_source(self) -> TlsSpec:
        if self.issuer_ref is not None and self.secret_name is not None:
            raise ValueError("give secretName or issuerRef, not both")
        if self.enabled and self.issuer_ref is None and self.secret_name is None:
            raise ValueError("TLS enabled needs secretName or issuerRef")
        return self


class SecuritySpec(_Wire):
    """Authentication, authorization and TLS (docs/security.md)."""

    authentication: AuthenticationSpec = Field(default_factory=AuthenticationSpec)
    """Signed requests (ACL 2.0 users)."""
    authorization: AuthorizationSpec = Field(default_factory=AuthorizationSpec)
    """ACL checks of every request; needs authentication."""
    tls: TlsSpec = Field(default_factory=TlsSpec)
    """TLS on every port of the cluster."""

    @model_validator(mode="after")
    def _authorization_needs_authentication(self) -> SecuritySpec:
        if self.authorization.enabled and not self.authentication.enabled:
            raise ValueError("authorization.enabled needs authentication.enabled (a request's user is its signer)")
        return self


class Failover(_Wire):
    """Automatic failover (RocketMQ 5's controller mode, docs/design/failover.md): the NameServers run the
    controller, the brokers of a group start in controller mode, and the controller elects an in-sync slave when
    a master is lost. Set when the cluster is made: it cannot be turned on or off later."""

    enabled: bool = False
    """Run the controllers in the NameServers and the brokers in controller mode. Needs broker.replication SYNC
    (allAckInSyncStateSet: an acknowledged message is on every in-sync replica, so a new master holds it)."""
    controller_storage_size: Quantity = "1Gi"
    """Size of each NameServer pod's controller volume (the Raft log; a PVC unless storage.type is
    ephemeral)."""
    node_lost_grace_seconds: int = Field(default=30, ge=0, le=3600)
    """How long a broker pod's node may be NotReady or unreachable before the operator acts: it makes sure an
    in-sync replica took over a master there, then force-deletes the pod so that its StatefulSet recreates it
    (docs/design/failover.md). Counted from when the node's Ready condition left True (or its unreachable or
    not-ready taint was added), which Kubernetes itself reports only after its node-monitor grace period."""


# NodePorts: the API server's default service-node-port-range. Every broker pod of a group gets a nodePort of
# its own, one block of NODE_PORTS_PER_GROUP per group (room for the most slaves a group may have), so a pod's
# port never moves when slavesPerGroup changes.
NODE_PORT_MIN = 30000
NODE_PORT_MAX = 32767
NODE_PORTS_PER_GROUP = 1 + MAX_SLAVES_PER_GROUP
_HOST_PATTERN = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*|[0-9]{1,3}(\.[0-9]{1,3}){3})$"


def last_node_port(node_port_base: int, groups: int) -> int:
    """The highest nodePort a cluster of `groups` groups uses from `node_port_base` (the NameServers' port is the
    base, group g's pod i gets base + 1 + g * NODE_PORTS_PER_GROUP + i)."""
    return node_port_base + groups * NODE_PORTS_PER_GROUP


class ExternalAccess(_Wire):
    """Clients outside the Kubernetes cluster: one Service for the NameServers and one per broker pod."""

    type: Literal["NodePort", "LoadBalancer"]
    """NodePort: each broker listens on, and advertises, its own nodePort at its node's IP (or advertisedHost).
    LoadBalancer: each broker advertises its own load balancer's address, once the cloud has provisioned it."""
    annotations: dict[str, AnnotationValue] = Field(default_factory=dict, max_length=MAX_MAP_ENTRIES)
    """Annotations of every external Service (a cloud's load balancer settings)."""
    node_port_base: int | None = Field(default=None, ge=NODE_PORT_MIN, le=NODE_PORT_MAX)
    """NodePort only, and required there: the NameServers' nodePort. Group g's pod i gets base + 1 + 5g + i; the
    last port a cluster of N groups uses, base + 5N, must be at most 32767."""
    grpc_node_port_base: int | None = Field(default=None, ge=NODE_PORT_MIN, le=NODE_PORT_MAX)
    """NodePort only, and required there when spec.broker.grpc is on: group g's pod i gets the gRPC nodePort
    base + 5g + i (the last, base + 5N - 1, at most 32767), apart from the nodePortBase block. The route the
    gRPC endpoint answers names each broker at its advertised host and this port."""
    advertised_host: str | None = Field(default=None, min_length=1, max_length=253, pattern=_HOST_PATTERN)
    """NodePort only: the host name or IPv4 address every broker advertises with its nodePort (a name or address
    in front of the nodes). Unset: each broker advertises the IP of the node it runs on."""

    @field_validator("annotations")
    @classmethod
    def _check_annotation_keys(cls, value: dict[str, str]) -> dict[str, str]:
        return _check_label_keys(value)

    @field_validator("node_port_base")
    @classmethod
    def _base_with_node_port(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and info.data.get("type") == "LoadBalancer":
            raise ValueError("only for type NodePort (a LoadBalancer's ports are the brokers' own)")
        return value

    @field_validator("grpc_node_port_base")
    @classmethod
    def _grpc_base_with_node_port(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and info.data.get("type") == "LoadBalancer":
            raise ValueError("only for type NodePort (a LoadBalancer carries the gRPC port itself)")
        return value

    @field_validator("advertised_host")
    @classmethod
    def _host_with_node_port(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and info.data.get("type") == "LoadBalancer":
            raise ValueError("only for type NodePort (a LoadBalancer's brokers advertise its address)")
        return value


class RocketClusterSpec(_Wire):
    """A RocketMQ cluster: NameServers and broker groups."""

    image: str = Field(default=DEFAULT_IMAGE, min_length=1, max_length=512, pattern=r"^[^\s]+$")
    """The image that runs mqnamesrv and mqbroker (and rocketcluster-probe)."""
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    """The containers' imagePullPolicy."""
    image_pull_secrets: list[LocalObjectReference] = Field(default_factory=list, max_length=8)
    """Secrets for pulling the image."""
    cluster_name: str | None = Field(default=None, min_length=1, max_length=60, pattern=r"^[A-Za-z0-9_-]+$")
    """RocketMQ cluster name (brokerClusterName; brokerNames are <clusterName>-<group>). Default: metadata.name.
    Immutable: clients and routes know the cluster by it."""
    name_server: NameServerSpec = Field(default_factory=NameServerSpec)
    """The NameServers."""
    broker: BrokerSpec = Field(default_factory=BrokerSpec)
    """The broker groups."""
    storage: Storage = Field(default_factory=Storage)
    """The brokers' store volumes."""
    retention: Retention = Field(default_factory=Retention)
    """What happens to the PVCs when the cluster is deleted or scaled down."""
    template: PodTemplate = Field(default_factory=PodTemplate)
    """Pod settings of every pod; the components' templates are merged over it."""
    placement: Placement = Field(default_factory=Placement)
    """Anti-affinity between a group's pods and between NameServers."""
    rollout: Rollout = Field(default_factory=Rollout)
    """Safety of the operator's rolling restarts."""
    scale_down: ScaleDown = Field(default_factory=ScaleDown)
    """Safety of removing broker groups."""
    metrics: Metrics = Field(default_factory=Metrics)
    """Prometheus metrics of the brokers."""
    network_policy: NetworkPolicySpec = Field(default_factory=NetworkPolicySpec)
    """NetworkPolicies admitting only the clients, the cluster's own pods and the operator."""
    external_access: ExternalAccess | None = None
    """Clients outside the Kubernetes cluster (off when absent). Clients inside it keep working."""
    security: SecuritySpec = Field(default_factory=SecuritySpec)
    """Authentication, authorization and TLS."""
    failover: Failover = Field(default_factory=Failover)
    """Automatic failover of a group's master to an in-sync slave (off by default; immutable)."""

    @field_validator("external_access")
    @classmethod
    def _node_ports_fit(cls, value: ExternalAccess | None, info: ValidationInfo) -> ExternalAccess | None:
        if value is None or value.type != "NodePort":
            return value
        if value.node_port_base is None:
            raise ValueError("type NodePort needs nodePortBase (every broker's port is fixed before it starts)")
        broker, metrics = info.data.get("broker"), info.data.get("metrics")
        groups = broker.groups if isinstance(broker, BrokerSpec) else 1
        base, last = value.node_port_base, last_node_port(value.node_port_base, groups)
        if last > NODE_PORT_MAX:
            raise ValueError(
                f"nodePortBase {base} with {groups} broker groups needs nodePorts up to {last}, past {NODE_PORT_MAX} "
                f"(at most {NODE_PORT_MAX - groups * NODE_PORTS_PER_GROUP})"
            )
        if isinstance(metrics, Metrics) and metrics.enabled and base <= metrics.port <= last:
            raise ValueError(
                f"nodePorts {base}-{last} include spec.metrics.port {metrics.port} (a broker listens on both)"
            )
        return value

    @model_validator(mode="after")
    def _failover_needs_sync(self) -> RocketClusterSpec:
        if self.failover.enabled and self.broker.replication != "SYNC":
            raise ValueError(
                "failover.enabled needs broker.replication SYNC (a new master must hold every acknowledged message)"
            )
        return self

    def _grpc_node_ports_fit(self, access: ExternalAccess) -> None:
        gbase, base = access.grpc_node_port_base, access.node_port_base
        if gbase is None or base is None:
            raise ValueError("broker.grpc.enabled with externalAccess type NodePort needs grpcNodePortBase")
        groups = self.broker.groups
        glast, last = gbase + groups * NODE_PORTS_PER_GROUP - 1, last_node_port(base, groups)
        if glast > NODE_PORT_MAX:
            raise ValueError(
                f"grpcNodePortBase {gbase} with {groups} broker groups needs nodePorts up to {glast}, past "
                f"{NODE_PORT_MAX} (at most {NODE_PORT_MAX + 1 - groups * NODE_PORTS_PER_GROUP})"
            )
        if gbase <= last and base <= glast:
            raise ValueError(f"gRPC nodePorts {gbase}-{glast} overlap the nodePorts {base}-{last}")

    @model_validator(mode="after")
    def _grpc_fits(self) -> RocketClusterSpec:
        grpc = self.broker.grpc
        if not grpc.enabled:
            return self
        # Under NodePort the route names every broker at its node's IP (or advertisedHost) and a gRPC nodePort of
        # its own: a block of its own, beside the remoting one.
        access = self.external_access
        if access is not None and access.type == "NodePort":
            self._grpc_node_ports_fit(access)
        if self.metrics.enabled and self.metrics.port == grpc.port:
            raise ValueError(f"broker.grpc.port {grpc.port} is spec.metrics.port too")
        return self

    @model_validator(mode="after")
    def _no_container_name_twice(self) -> RocketClusterSpec:
        # Checked on the merged templates: a cluster-wide init container and a component's sidecar share a pod.
        for field, component in (("nameServer", self.name_server.template), ("broker", self.broker.template)):
            clash = self.template.merged_under(component).container_name_clash()
            if clash is not None:
                raise ValueError(f"{field} pods: container {clash!r} is both an init container and a sidecar")
        return self

    def effective_cluster_name(self, metadata_name: str) -> str:
        """brokerClusterName: spec.clusterName, else the resource's name."""
        return self.cluster_name or metadata_name


# -- status ------------------------------------------------------------------------------------------------------

Phase = Literal["Pending", "Creating", "Ready", "Progressing", "Degraded", "Paused", "Invalid"]


class _Status(BaseModel):
    """camelCase on the wire; lenient on read (a status written by an older operator still parses)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", use_attribute_docstrings=True
    )


class Condition(_Status):
    """A Kubernetes-style condition (Ready, Progressing, Degraded, ReconciliationPaused, InvalidSpec,
    ScaleDownBlocked)."""

    type: str = Field(min_length=1, max_length=64)
    status: Literal["True", "False", "Unknown"]
    reason: str | None = Field(default=None, max_length=128)
    message: str | None = Field(default=None, max_length=4096)
    last_transition_time: str | None = None
    """RFC 3339 time of the last change of status."""
    observed_generation: int | None = None


class ExternalBrokerStatus(_Status):
    pod: str
    address: str | None = None
    """host:port clients outside the Kubernetes cluster reach this broker at (what it advertises)."""
    grpc_address: str | None = None
    """host:port of this broker's gRPC endpoint from outside (spec.broker.grpc on): what the route names."""


class ExternalAccessStatus(_Status):
    """Where clients outside the Kubernetes cluster connect (spec.externalAccess)."""

    type: str | None = None
    name_server: str | None = None
    """host:port of the NameServers' external Service: the namesrvAddr of a client outside the cluster."""
    brokers: list[ExternalBrokerStatus] = Field(default_factory=list)
    """Every broker pod's external address; none until it is known (a load balancer being provisioned)."""
    grpc_endpoint: str | None = None
    """host:port a 5.x SDK outside the cluster takes as its endpoints (spec.broker.grpc on): the first broker's
    external gRPC address; any broker answers QueryRoute, whose route names every broker's external address."""


class BrokerConfigStatus(_Status):
    """How spec.broker.config reaches the brokers."""

    live: list[str] = Field(default_factory=list)
    """Keys set on the running brokers without a restart (UPDATE_BROKER_CONFIG)."""
    restart_only: list[str] = Field(default_factory=list)
    """Keys the brokers read at start only: a change rolls the pods."""


class NameServerStatus(_Status):
    replicas: int = 0
    ready_replicas: int = 0
    addresses: list[str] = Field(default_factory=list)
    """host:port of each NameServer pod (its DNS name), as in NAMESRV_ADDR."""


class GroupMasterStatus(_Status):
    pod: str
    ready: bool = False
    address: str | None = None
    """The broker's registered address (brokerIP1:10911)."""


class GroupSlaveStatus(_Status):
    pod: str
    ready: bool = False
    lag_bytes: int | None = None
    """How far this slave is behind its master, in CommitLog bytes."""


class GroupStatus(_Status):
    index: int
    broker_name: str
    state: Literal["Active", "Draining", "Removing"] = "Active"
    master: GroupMasterStatus | None = None
    slaves: list[GroupSlaveStatus] = Field(default_factory=list)
    pvcs: list[str] = Field(default_factory=list)
    """The group's PersistentVolumeClaims, including retained ones of removed pods."""


class RocketClusterStatus(_Status):
    """What the operator observed (served under the status subresource)."""

    observed_generation: int | None = None
    """The metadata.generation this status describes."""
    phase: Phase | None = None
    """One-word summary for `kubectl get`; conditions are the machine-readable truth."""
    conditions: list[Condition] = Field(default_factory=list)
    name_server: NameServerStatus | None = None
    groups: int | None = None
    """Broker groups that exist (StatefulSets)."""
    ready_groups: int | None = None
    """Groups whose master is Ready; the scale subresource's status replicas."""
    ready: str | None = None
    """readyGroups/groups for the printer column, e.g. 2/3."""
    label_selector: str | None = None
    """Selector of the broker pods, for the scale subresource."""
    group_status: list[GroupStatus] = Field(default_factory=list)
    rollout: dict[str, Any] | None = None
    """Progress of a rolling restart (kept here so a restarted operator resumes it)."""
    scaling: dict[str, Any] | None = None
    """Progress of a scale-down drain."""
    masters: str | None = None
    """Each group's current master pod, comma-separated, for the printer column (with spec.failover the
    controller, not the ordinal, decides it)."""
    connection_config_map: str | None = None
    """The ConfigMap with NAMESRV_ADDR for clients (envFrom it)."""
    created: bool | None = None
    """True once the cluster was first Ready (after that, Progressing never says Creating again)."""
    external_access: ExternalAccessStatus | None = None
    """The external addresses (spec.externalAccess)."""
    broker_config: BrokerConfigStatus | None = None
    """Which keys of spec.broker.config apply live and which roll the pods."""


# -- parsing -----------------------------------------------------------------------------------------------------


class SpecError(ValueError):
    """A RocketCluster spec the operator refuses. The message names each offending field path, e.g.
    `spec.broker.config: key 'brokerId' is owned by the operator (...)`; `problems` has them one by one."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{path}: {message}" for path, message in problems))


def _field_path(loc: tuple[int | str, ...]) -> str:
    path = "spec"
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _message(error: Mapping[str, Any]) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown field (the RocketCluster schema has no such field)"
    text = str(error["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        text = text.removeprefix(prefix)
    if error["type"] in ("int_type", "string_type", "bool_type", "dict_type", "list_type", "model_type"):
        text += f" (got {type(error['input']).__name__})"
    return text


def parse_spec(raw: Any) -> RocketClusterSpec:
    """The spec of a RocketCluster (body["spec"], camelCase); raises SpecError naming every bad field."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise SpecError([("spec", f"must be an object (got {type(raw).__name__})")])
    try:
        return RocketClusterSpec.model_validate(dict(raw))
    except ValidationError as exc:
        problems = [(_field_path(error["loc"]), _message(error)) for error in exc.errors(include_url=False)]
        raise SpecError(problems) from None


def parse_status(raw: Any) -> RocketClusterStatus:
    """The status as last written (body["status"]); fields it does not know are ignored."""
    return RocketClusterStatus.model_validate(dict(raw) if isinstance(raw, Mapping) else {})
