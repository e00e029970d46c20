"""Desired state: a RocketCluster's spec -> every Kubernetes object it should have (plain dicts, pure).

The reconcile handler calls `render_cluster` and applies each object; the pieces (`render_nameserver`,
`render_broker_group`, `render_broker_conf`, `config_hash`, `namesrv_addr`) are public for the planner, the
status code and tests. Names and labels come from `rocketcluster.names`.

Deterministic: the same input gives equal dicts with keys in the same order (and byte-identical broker.conf
text), so an unchanged cluster causes no writes and no rolls. Optional fields a user did not set are left out
rather than written empty, so an applied object does not fight the API server's own defaults.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

from rocketcluster import names
from rocketcluster.live_config import restart_only
from rocketcluster.model import PodTemplate, RocketClusterSpec
from rocketcluster.names import ClusterRef
from rocketcluster.pod_extras import extra_containers
from rocketcluster.render_external import adapt_broker_pod, broker_services, external_conf_properties
from rocketcluster.render_external import nameserver_service as external_nameserver_service
from rocketcluster.render_failover import (
    broker_failover_defaults,
    broker_failover_properties,
    failover_nameserver_pod,
    nameserver_failover_properties,
    nameserver_volume_claim,
)
from rocketcluster.render_grpc import (
    grpc_conf_properties,
    grpc_container_ports,
    grpc_endpoint_address,
    grpc_service,
    grpc_service_ports,
)
from rocketcluster.render_network import network_policies
from rocketcluster.render_security import (
    broker_security_defaults,
    broker_security_properties,
    nameserver_security_properties,
    render_certificate,
    secure_pod_template,
)

__all__ = [
    "BROKER_GRACE_SECONDS",
    "RUN_AS_ID",
    "ClusterRef",
    "broker_conf_properties",
    "broker_config_data",
    "broker_role",
    "config_hash",
    "data_hash",
    "namesrv_addr",
    "owner_reference",
    "render_broker_conf",
    "render_broker_group",
    "render_broker_headless_service",
    "render_cluster",
    "render_connection_config_map",
    "render_nameserver",
    "render_network_policies",
    "render_service_account",
]

Obj = dict[str, Any]

RUN_AS_ID: Final = 10001  # the broker image's user and group
# A broker flushes its CommitLog and writes its checkpoint on SIGTERM; the default 30 s can cut that short.
BROKER_GRACE_SECONDS: Final = 60
NAMESERVER_GRACE_SECONDS: Final = 30
_CONFIG_VOLUME: Final = "config"
# The root filesystem is read-only: what a process writes outside its data volume goes to these (the image's
# home holds the NameServer's kvConfig.json; Python and its libraries use /tmp).
_SCRATCH: Final = (("tmp", "/tmp"), ("home", "/home/rocketmq"))
_SCRATCH_SIZE: Final = "64Mi"


# -- shared pieces ----------------------------------------------------------------------------------------------


def owner_reference(cluster: ClusterRef) -> Obj:
    """Makes the RocketCluster the controller of a child: deleting the cluster garbage-collects it."""
    return {
        "apiVersion": names.API_VERSION,
        "kind": names.KIND,
        "name": cluster.name,
        "uid": cluster.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _metadata(cluster: ClusterRef, name: str, labels: Mapping[str, str]) -> Obj:
    return {
        "name": name,
        "namespace": cluster.namespace,
        "labels": dict(labels),
        "ownerReferences": [owner_reference(cluster)],
    }


def namesrv_addr(cluster: ClusterRef, spec: RocketClusterSpec) -> str:
    """NAMESRV_ADDR: every NameServer pod's stable DNS name, `;`-joined (pod IPs change, these do not)."""
    return ";".join(
        names.nameserver_pod_address(cluster.name, cluster.namespace, i) for i in range(spec.name_server.replicas)
    )


def _anti_affinity(spec: RocketClusterSpec, selector: Mapping[str, str]) -> Obj | None:
    """spec.placement as a pod anti-affinity against the pods `selector` matches (their own group or kind)."""
    mode = spec.placement.anti_affinity
    if mode == "none":
        return None
    term = {"labelSelector": {"matchLabels": dict(selector)}, "topologyKey": spec.placement.topology_key}
    if mode == "required":
        return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": term}]
        }
    }


_FIXED_IDS: Final = ("runAsUser", "runAsGroup", "fsGroup")


def _pod_security_context(template: PodTemplate) -> Obj:
    base: Obj = {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS_ID,
        "runAsGroup": RUN_AS_ID,
        "fsGroup": RUN_AS_ID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    if template.fixed_user_ids is False:
        # The platform assigns them (OpenShift's restricted SCC refuses ids outside the namespace's range).
        base = {key: value for key, value in base.items() if key not in _FIXED_IDS}
    return {**base, **copy.deepcopy(template.security_context or {})}


def _scratch_volumes() -> list[Obj]:
    return [{"name": name, "emptyDir": {"sizeLimit": _SCRATCH_SIZE}} for name, _ in _SCRATCH]


def _scratch_mounts() -> list[Obj]:
    return [{"name": name, "mountPath": path} for name, path in _SCRATCH]


def _container_security_context(template: PodTemplate) -> Obj:
    """The `restricted` Pod Security Standard, and a read-only root filesystem (a template may change it)."""
    base: Obj = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
    }
    return {**base, **copy.deepcopy(template.container_security_context or {})}


def _pod_template(
    cluster: ClusterRef,
    spec: RocketClusterSpec,
    template: PodTemplate,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    affinity_selector: Mapping[str, str],
    grace_seconds: int,
    container: Obj,
    volumes: list[Obj],
) -> Obj:
    """A pod template: the operator's settings, the user's template merged in (operator labels win)."""
    pod: Obj = {
        "serviceAccountName": names.service_account(cluster.name),
        "automountServiceAccountToken": False,
        # Service links put every Service of the namespace in the environment; nothing here reads them.
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": grace_seconds,
        "securityContext": _pod_security_context(template),
    }
    affinity = copy.deepcopy(template.affinity) if template.affinity is not None else None
    if affinity is None:
        affinity = _anti_affinity(spec, affinity_selector)
    if affinity:
        pod["affinity"] = affinity
    if template.tolerations:
        pod["tolerations"] = copy.deepcopy(template.tolerations)
    if template.node_selector:
        pod["nodeSelector"] = dict(sorted(template.node_selector.items()))
    if template.priority_class_name:
        pod["priorityClassName"] = template.priority_class_name
    if template.topology_spread_constraints:
        pod["topologySpreadConstraints"] = copy.deepcopy(template.topology_spread_constraints)
    if spec.image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": secret.name} for secret in spec.image_pull_secrets]
    container = _with_extras(container, template)
    if template.init_containers:
        pod["initContainers"] = extra_containers(template.init_containers, container["securityContext"])
    pod["containers"] = [container, *extra_containers(template.sidecars, container["securityContext"])]
    volumes = [*volumes, *copy.deepcopy(template.volumes or [])]
    if volumes:
        pod["volumes"] = volumes
    metadata: Obj = {"labels": dict(sorted({**template.labels, **labels}.items()))}
    merged_annotations = {**template.annotations, **annotations}
    if merged_annotations:
        metadata["annotations"] = dict(sorted(merged_annotations.items()))
    return {"metadata": metadata, "spec": pod}


def _with_extras(container: Obj, template: PodTemplate) -> Obj:
    """The main container with the template's env and volumeMounts after its own (names never clash: the model
    refuses the operator's)."""
    out = dict(container)
    for field, extra in (("env", template.env), ("volumeMounts", template.volume_mounts)):
        if extra:
            out[field] = [*out.get(field, []), *copy.deepcopy(extra)]
    return out


def _probe(action: Obj, *, period: int, timeout: int, failures: int) -> Obj:
    return {
        **action,
        "periodSeconds": period,
        "timeoutSeconds": timeout,
        "successThreshold": 1,
        "failureThreshold": failures,
    }


def _container(spec: RocketClusterSpec, name: str, template: PodTemplate, resources: Obj) -> Obj:
    container: Obj = {
        "name": name,
        "image": spec.image,
        "imagePullPolicy": spec.image_pull_policy,
    }
    if resources:
        container["resources"] = resources
    container["securityContext"] = _container_security_context(template)
    return container


def _statefulset(cluster: ClusterRef, name: str, labels: Mapping[str, str], body: Obj) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": _metadata(cluster, name, labels), "spec": body}


def _pdb(cluster: ClusterRef, name: str, labels: Mapping[str, str], selector: Mapping[str, str]) -> Obj:
    """At most one pod of the set evicted at a time: a node drain cannot take a master and its slave together."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(cluster, name, labels),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": dict(selector)}},
    }


def _service(
    cluster: ClusterRef,
    name: str,
    labels: Mapping[str, str],
    selector: Mapping[str, str],
    ports: list[Obj],
    *,
    headless: bool,
) -> Obj:
    body: Obj = {}
    if headless:
        # Per-pod DNS records exist before the pods are Ready: brokers must find NameServers, and a slave
        # its master, while they are still starting.
        body["clusterIP"] = "None"
        body["publishNotReadyAddresses"] = True
    else:
        body["type"] = "ClusterIP"
    body["selector"] = dict(selector)
    body["ports"] = ports
    return {"apiVersion": "v1", "kind": "Service", "metadata": _metadata(cluster, name, labels), "spec": body}


def _port(name: str, number: int) -> Obj:
    return {"name": name, "port": number, "targetPort": name, "protocol": "TCP"}


# -- cluster-wide children ---------------------------------------------------------------------------------------


def render_service_account(cluster: ClusterRef) -> Obj:
    """The pods' identity. They call no Kubernetes API, so no token is mounted."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _metadata(cluster, names.service_account(cluster.name), names.shared_labels(cluster.name)),
        "automountServiceAccountToken": False,
    }


def render_connection_config_map(cluster: ClusterRef, spec: RocketClusterSpec) -> Obj:
    """What clients need to connect (Spark jobs `envFrom` it): NAMESRV_ADDR and the NameServer Service, and
    GRPC_ENDPOINT (the 5.x SDKs' endpoints) when spec.broker.grpc is on."""
    labels = names.shared_labels(cluster.name)
    data = {
        "CLUSTER_NAME": spec.effective_cluster_name(cluster.name),
        "NAMESRV_ADDR": namesrv_addr(cluster, spec),
        "NAMESRV_SERVICE": names.nameserver_service_address(cluster.name, cluster.namespace),
    }
    grpc = grpc_endpoint_address(cluster.name, cluster.namespace, spec)
    if grpc is not None:
        data["GRPC_ENDPOINT"] = grpc
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(cluster, names.connection_config_map(cluster.name), labels),
        "data": data,
    }


def render_broker_headless_service(cluster: ClusterRef, spec: RocketClusterSpec) -> Obj:
    """The broker StatefulSets' governing Service (their serviceName): per-pod DNS for every group (and the
    gRPC port, when spec.broker.grpc is on)."""
    c = cluster.name
    ports = [_port("main", names.BROKER_MAIN_PORT), _port("ha", names.BROKER_HA_PORT)]
    ports += grpc_service_ports(spec)
    labels = names.cluster_labels(c, names.COMPONENT_BROKER)
    return _service(cluster, names.broker_headless_service(c), labels, names.broker_selector(c), ports, headless=True)


# -- NameServer -----------------------------------------------------------------------------------------------------


def render_nameserver_conf(spec: RocketClusterSpec, cluster: ClusterRef | None = None) -> str:
    """namesrv.conf of every NameServer pod (keys sorted, one `key=value` a line); `cluster` is needed with
    spec.failover (the controllers' addresses)."""
    properties = {
        "listenPort": str(names.NAMESERVER_PORT),
        **_metrics_properties(spec),
        **nameserver_security_properties(spec),
        **(nameserver_failover_properties(cluster, spec) if cluster is not None else {}),
    }
    lines = ["# rendered by the rocketcluster operator from the RocketCluster; edits are overwritten."]
    lines += [f"{key}={properties[key]}" for key in sorted(properties)]
    return "\n".join(lines) + "\n"


def render_nameserver(cluster: ClusterRef, spec: RocketClusterSpec) -> list[Obj]:
    """The NameServer StatefulSet, its ConfigMap (namesrv.conf), headless and client Services, and its PDB."""
    c = cluster.name
    labels = names.nameserver_labels(c)
    selector = names.nameserver_selector(c)
    template = spec.template.merged_under(spec.name_server.template)
    ports = [_port("namesrv", names.NAMESERVER_PORT)]
    config_data = {names.NAMESERVER_CONF_FILE: render_nameserver_conf(spec, cluster)}
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(cluster, names.nameserver_config_map(c), labels),
        "data": config_data,
    }
    container = _container(spec, names.NAMESERVER_CONTAINER, template, spec.name_server.resources.to_kube())
    container_ports = [{"name": "namesrv", "containerPort": names.NAMESERVER_PORT, "protocol": "TCP"}]
    container.update(
        {
            "command": ["mqnamesrv", "-c", f"{names.BROKER_CONFIG_DIR}/{names.NAMESERVER_CONF_FILE}"],
            "ports": container_ports + _metrics_ports(spec),
            "volumeMounts": [
                {"name": _CONFIG_VOLUME, "mountPath": names.BROKER_CONFIG_DIR, "readOnly": True},
                *_scratch_mounts(),
            ],
            "readinessProbe": _probe(
                {"exec": {"command": ["rocketcluster-probe", "namesrv"]}}, period=10, timeout=5, failures=3
            ),
            "livenessProbe": _probe({"tcpSocket": {"port": "namesrv"}}, period=10, timeout=5, failures=6),
        }
    )
    annotations = {names.ANNOTATION_CONFIG_HASH: data_hash(config_data), **_scrape_annotations(spec)}
    volumes = [{"name": _CONFIG_VOLUME, "configMap": {"name": names.nameserver_config_map(c)}}, *_scratch_volumes()]
    pod = _pod_template(
        cluster, spec, template, labels, annotations, selector, NAMESERVER_GRACE_SECONDS, container, volumes
    )
    pod = failover_nameserver_pod(pod, cluster, spec)
    pod = secure_pod_template(pod, cluster, spec)
    body: Obj = {
        "replicas": spec.name_server.replicas,
        "serviceName": names.nameserver_headless_service(c),
        "selector": {"matchLabels": dict(selector)},
        # Parallel: with spec.failover the controllers need a quorum, so pod 0 must not wait for the others
        "podManagementPolicy": "Parallel",
        # The operator restarts NameServers itself, one at a time and before any broker (rocketcluster.plan).
        "updateStrategy": {"type": "OnDelete"},
        "template": pod,
    }
    if spec.failover.enabled and spec.storage.type == "persistentClaim":
        # the controllers' Raft log: a restarted controller keeps the ids, epochs and SyncStateSets it agreed on
        body["persistentVolumeClaimRetentionPolicy"] = {
            "whenDeleted": spec.retention.when_deleted,
            "whenScaled": spec.retention.when_scaled,
        }
        body["volumeClaimTemplates"] = [nameserver_volume_claim(spec, labels)]
    statefulset = _statefulset(cluster, names.nameserver_statefulset(c), labels, body)
    return [
        config_map,
        _service(cluster, names.nameserver_headless_service(c), labels, selector, ports, headless=True),
        _service(cluster, names.nameserver_service(c), labels, selector, ports, headless=False),
        statefulset,
        _pdb(cluster, names.nameserver_pdb(c), labels, selector),
    ]


# -- broker groups --------------------------------------------------------------------------------------------------


def broker_role(spec: RocketClusterSpec, ordinal: int) -> str:
    """brokerRole of a group's pod: ordinal 0 is the master (ASYNC_ or SYNC_MASTER per replication), others SLAVE."""
    if ordinal == 0:
        return "SYNC_MASTER" if spec.broker.replication == "SYNC" else "ASYNC_MASTER"
    return "SLAVE"


def broker_conf_properties(cluster: ClusterRef, spec: RocketClusterSpec, g: int, ordinal: int) -> dict[str, str]:
    """broker.conf of pod `ordinal` of group g as key -> value: the operator's defaults (failover's, security's),
    spec.broker.config over them, and the operator's own keys over both."""
    cluster_name = spec.effective_cluster_name(cluster.name)
    owned = {
        "brokerClusterName": cluster_name,
        "brokerName": names.broker_name(cluster_name, g),
        "brokerId": str(ordinal),
        "brokerRole": broker_role(spec, ordinal),
        "flushDiskType": spec.broker.flush_disk_type,
        "namesrvAddr": namesrv_addr(cluster, spec),
        "listenPort": str(names.BROKER_MAIN_PORT),
        "haListenPort": str(names.BROKER_HA_PORT),
        "storePathRootDir": names.STORE_ROOT_DIR,
    }
    owned |= _metrics_properties(spec)
    owned |= external_conf_properties(spec, g, ordinal)
    owned |= broker_security_properties(spec)
    owned |= broker_failover_properties(cluster, spec)
    owned |= grpc_conf_properties(cluster.namespace, spec)
    # parse_spec refuses owned keys in spec.broker.config; the operator's value wins even if one got through.
    user = {k: v.strip() for k, v in spec.broker.config.items()}
    return {**broker_failover_defaults(spec), **broker_security_defaults(spec), **user, **owned}


def _escape(value: str) -> str:
    # java.util.Properties reads a backslash as an escape; values hold no line breaks (parse_spec refuses them).
    return value.replace("\\", "\\\\")


def render_broker_conf(cluster: ClusterRef, spec: RocketClusterSpec, g: int, ordinal: int) -> str:
    """The broker.conf text of pod `ordinal` of group g (keys sorted, one `key=value` a line)."""
    return _conf_text(cluster, g, ordinal, broker_conf_properties(cluster, spec, g, ordinal))


def _conf_text(cluster: ClusterRef, g: int, ordinal: int, properties: Mapping[str, str]) -> str:
    pod = names.broker_pod(cluster.name, g, ordinal)
    lines = [f"# {pod}: rendered by the rocketcluster operator from the RocketCluster; edits are overwritten."]
    lines += [f"{key}={_escape(properties[key])}" for key in sorted(properties)]
    return "\n".join(lines) + "\n"


def broker_config_data(
    cluster: ClusterRef, spec: RocketClusterSpec, g: int, replicas: int | None = None
) -> dict[str, str]:
    """The group ConfigMap's data: one broker-<ordinal>.conf per pod of the group (`replicas` pods when given)."""
    return {
        names.broker_conf_file(ordinal): render_broker_conf(cluster, spec, g, ordinal)
        for ordinal in range(replicas or 1 + spec.broker.slaves_per_group)
    }


def data_hash(data: Mapping[str, str]) -> str:
    """SHA-256 (hex) of a ConfigMap's data, independent of key order."""
    canonical = json.dumps(dict(sorted(data.items())), ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def config_hash(cluster: ClusterRef, spec: RocketClusterSpec, g: int) -> str:
    """The group's `rocketcluster.io/config-hash` pod annotation: the hash of its broker.conf files, less the
    keys the broker applies live (live_config: those are set on the running brokers, and rolling for them would
    restart pods for nothing).

    It covers the master's file and one slave's file, rendered whether or not the group has slaves: every
    slave's file equals that one but for brokerId, so any change a restart must follow changes the hash, while
    adding or removing a slave (one more or one fewer file in the ConfigMap) does not, and so restarts no
    running pod. Without live keys in the spec the hash is that of the ConfigMap's files as they are.
    """
    files = {
        names.broker_conf_file(ordinal): _conf_text(
            cluster, g, ordinal, restart_only(broker_conf_properties(cluster, spec, g, ordinal))
        )
        for ordinal in (0, 1)
    }
    return data_hash(files)


def _metrics_properties(spec: RocketClusterSpec) -> dict[str, str]:
    """The config keys (the broker's and the NameServer's alike) that serve /metrics, when spec.metrics asks."""
    if not spec.metrics.enabled:
        return {}
    return {"metricsExporterType": "PROM", "metricsPromExporterPort": str(spec.metrics.port)}


def _metrics_ports(spec: RocketClusterSpec) -> list[Obj]:
    return [{"name": "metrics", "containerPort": spec.metrics.port, "protocol": "TCP"}] if spec.metrics.enabled else []


def _scrape_annotations(spec: RocketClusterSpec) -> dict[str, str]:
    """Prometheus's conventional pod annotations, which its kubernetes_sd relabelling (and most charts) read."""
    if not spec.metrics.enabled:
        return {}
    port = str(spec.metrics.port)
    return {"prometheus.io/scrape": "true", "prometheus.io/port": port, "prometheus.io/path": "/metrics"}


def _broker_volumes(cluster: ClusterRef, spec: RocketClusterSpec, g: int) -> list[Obj]:
    volumes: list[Obj] = [
        {
            "name": _CONFIG_VOLUME,
            "configMap": {"name": names.broker_config_map(cluster.name, g)},
        }
    ]
    if spec.storage.type == "ephemeral":
        volumes.append({"name": names.DATA_VOLUME, "emptyDir": {"sizeLimit": spec.storage.size}})
    return volumes + _scratch_volumes()


def _data_claim_template(spec: RocketClusterSpec, labels: Mapping[str, str], size: str) -> Obj:
    claim: Obj = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": size}},
    }
    if spec.storage.storage_class_name:
        claim["storageClassName"] = spec.storage.storage_class_name
    return {"metadata": {"name": names.DATA_VOLUME, "labels": dict(labels)}, "spec": claim}


def _broker_container(spec: RocketClusterSpec, template: PodTemplate) -> Obj:
    container = _container(spec, names.BROKER_CONTAINER, template, spec.broker.resources.to_kube())
    conf = f"{names.BROKER_CONFIG_DIR}/broker-$(POD_INDEX).conf"
    ports = [
        {"name": "main", "containerPort": names.BROKER_MAIN_PORT, "protocol": "TCP"},
        {"name": "ha", "containerPort": names.BROKER_HA_PORT, "protocol": "TCP"},
    ]
    ports += grpc_container_ports(spec) + _metrics_ports(spec)
    container.update(
        {
            "command": ["mqbroker", "-c", conf],
            "env": [
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {
                    "name": "POD_INDEX",
                    "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{names.LABEL_POD_INDEX}']"}},
                },
                {"name": "BROKER_IP1", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            ],
            "ports": ports,
            "volumeMounts": [
                {"name": names.DATA_VOLUME, "mountPath": names.DATA_MOUNT_PATH},
                {"name": _CONFIG_VOLUME, "mountPath": names.BROKER_CONFIG_DIR, "readOnly": True},
                *_scratch_mounts(),
            ],
            "readinessProbe": _probe(
                {"exec": {"command": ["rocketcluster-probe", "broker"]}}, period=10, timeout=5, failures=3
            ),
            # Recovering a large CommitLog after a crash takes minutes before the port opens: the startup probe
            # gives it 15, then liveness only restarts a broker whose port stopped answering.
            "startupProbe": _probe({"tcpSocket": {"port": "main"}}, period=10, timeout=5, failures=90),
            "livenessProbe": _probe({"tcpSocket": {"port": "main"}}, period=10, timeout=5, failures=6),
        }
    )
    return container


def render_broker_group(
    cluster: ClusterRef, spec: RocketClusterSpec, g: int, claim_size: str | None = None, replicas: int | None = None
) -> list[Obj]:
    """Group g: its ConfigMap (broker-<ordinal>.conf files), StatefulSet (ordinal = brokerId) and PDB.

    `claim_size`: the size of the data volumeClaimTemplate when it is not spec.storage.size (a StatefulSet
    whose claims cannot grow keeps the size it was made with; see plan_storage). `replicas`: the StatefulSet's
    replicas when it is held above the spec's (plan_failover: its master is on an ordinal about to go)."""
    c = cluster.name
    labels = names.broker_group_labels(c, g)
    selector = names.broker_group_selector(c, g)
    template = spec.template.merged_under(spec.broker.template)
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(cluster, names.broker_config_map(c, g), labels),
        "data": broker_config_data(cluster, spec, g, replicas),
    }
    pod = _pod_template(
        cluster,
        spec,
        template,
        labels,
        {names.ANNOTATION_CONFIG_HASH: config_hash(cluster, spec, g), **_scrape_annotations(spec)},
        selector,
        BROKER_GRACE_SECONDS,
        _broker_container(spec, template),
        _broker_volumes(cluster, spec, g),
    )
    pod = adapt_broker_pod(c, spec, g, pod)
    pod = secure_pod_template(pod, cluster, spec)
    body: Obj = {
        "replicas": replicas or 1 + spec.broker.slaves_per_group,
        "serviceName": names.broker_headless_service(c),
        "selector": {"matchLabels": dict(selector)},
        "podManagementPolicy": "Parallel",
        # The operator restarts pods itself: slaves before their master, one at a time (rocketcluster.plan).
        "updateStrategy": {"type": "OnDelete"},
        # whenScaled covers the slaves this StatefulSet loses; a whole group is removed by the operator, which
        # deletes its PVCs itself when retention.whenScaled is Delete.
        "persistentVolumeClaimRetentionPolicy": {
            "whenDeleted": spec.retention.when_deleted,
            "whenScaled": spec.retention.when_scaled,
        },
        "template": pod,
    }
    if spec.storage.type == "persistentClaim":
        body["volumeClaimTemplates"] = [_data_claim_template(spec, labels, claim_size or spec.storage.size)]
    statefulset = _statefulset(cluster, names.broker_statefulset(c, g), labels, body)
    pdb = _pdb(cluster, names.broker_pdb(c, g), labels, selector)
    return [config_map, statefulset, pdb, *_external_services(cluster, broker_services(c, spec, g))]


def _external_services(cluster: ClusterRef, items: list[tuple[str, dict[str, str], dict[str, str], Obj]]) -> list[Obj]:
    """Services of spec.externalAccess (rocketcluster.render_external says what they are)."""
    out = []
    for name, labels, notes, body in items:
        metadata = _metadata(cluster, name, labels)
        if notes:
            metadata["annotations"] = notes
        out.append({"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": body})
    return out


# -- everything -----------------------------------------------------------------------------------------------------


def render_network_policies(cluster: ClusterRef, spec: RocketClusterSpec, operator_namespace: str | None) -> list[Obj]:
    """The cluster's NetworkPolicies (rocketcluster.render_network says whom they admit)."""
    return [
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": _metadata(cluster, name, labels),
            "spec": policy,
        }
        for name, labels, policy in network_policies(cluster.name, spec, operator_namespace)
    ]


def render_cluster(cluster: ClusterRef, spec: RocketClusterSpec, operator_namespace: str | None = None) -> list[Obj]:
    """Every child of the cluster, in an order that can be applied front to back (identity, policies and
    Services before the pods that use them; NameServers before brokers). `operator_namespace`: where the
    operator's pods run, for the NetworkPolicies to admit them (None: the operator is no pod)."""
    objects: list[Obj] = [
        render_service_account(cluster),
        render_connection_config_map(cluster, spec),
        *render_network_policies(cluster, spec, operator_namespace),
        *([certificate] if (certificate := render_certificate(cluster, spec)) is not None else []),
        *render_nameserver(cluster, spec),
        render_broker_headless_service(cluster, spec),
    ]
    if (grpc := grpc_service(cluster.name, spec)) is not None:
        name, labels, body = grpc
        objects.append(
            {"apiVersion": "v1", "kind": "Service", "metadata": _metadata(cluster, name, labels), "spec": body}
        )
    external = external_nameserver_service(cluster.name, spec)
    objects += _external_services(cluster, [external] if external else [])
    for g in range(spec.broker.groups):
        objects.extend(render_broker_group(cluster, spec, g))
    return objects
