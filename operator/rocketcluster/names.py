"""Names, labels, ports and annotations of a RocketCluster and its children: the operator's shared contract.

Imported by render (to build the children), plan (to find pods and PVCs) and the handlers (to look objects up),
so every name is spelled in one place. Pure: stdlib only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

__all__ = [
    "ANNOTATION_CONFIG_HASH",
    "ANNOTATION_MANUAL_ROLLING_UPDATE",
    "ANNOTATION_PAUSE_RECONCILIATION",
    "ANNOTATION_SECRETS_HASH",
    "API_VERSION",
    "APP_NAME",
    "BROKER_CONFIG_DIR",
    "BROKER_CONTAINER",
    "BROKER_HA_PORT",
    "BROKER_MAIN_PORT",
    "CATEGORIES",
    "COMPONENT_BROKER",
    "COMPONENT_NAMESERVER",
    "CONSUMER_GROUP_KIND",
    "CONSUMER_GROUP_PLURAL",
    "CONSUMER_GROUP_SHORT_NAMES",
    "CONSUMER_GROUP_SINGULAR",
    "DATA_MOUNT_PATH",
    "DATA_VOLUME",
    "GROUP",
    "KIND",
    "LABEL_CLUSTER",
    "LABEL_COMPONENT",
    "LABEL_GROUP",
    "LABEL_INSTANCE",
    "LABEL_MANAGED_BY",
    "LABEL_NAME",
    "LABEL_POD_INDEX",
    "MANAGED_BY",
    "MAX_CLUSTER_NAME_LENGTH",
    "NAMESERVER_CONF_FILE",
    "NAMESERVER_CONTAINER",
    "NAMESERVER_PORT",
    "PLURAL",
    "SHORT_NAMES",
    "SINGULAR",
    "STORE_ROOT_DIR",
    "TOPIC_KIND",
    "TOPIC_PLURAL",
    "TOPIC_SHORT_NAMES",
    "TOPIC_SINGULAR",
    "USER_KIND",
    "USER_PLURAL",
    "USER_SHORT_NAMES",
    "USER_SINGULAR",
    "VERSION",
    "ClusterRef",
    "broker_conf_file",
    "broker_config_map",
    "broker_group_labels",
    "broker_group_selector",
    "broker_headless_service",
    "broker_label_selector",
    "broker_name",
    "broker_pdb",
    "broker_pod",
    "broker_pvc",
    "broker_selector",
    "broker_statefulset",
    "cluster_labels",
    "connection_config_map",
    "nameserver_config_map",
    "nameserver_headless_service",
    "nameserver_labels",
    "nameserver_pdb",
    "nameserver_pod",
    "nameserver_pod_address",
    "nameserver_selector",
    "nameserver_service",
    "nameserver_service_address",
    "nameserver_statefulset",
    "service_account",
    "shared_labels",
]

# -- the custom resource ---------------------------------------------------------------------------------------

GROUP: Final = "rocketcluster.io"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "RocketCluster"
PLURAL: Final = "rocketclusters"
SINGULAR: Final = "rocketcluster"
SHORT_NAMES: Final = ("rmq",)
CATEGORIES: Final = ("rocketmq",)
# Topics and subscription groups as resources (model_resources), bound to a RocketCluster by spec.clusterRef.
TOPIC_KIND: Final = "RocketTopic"
TOPIC_PLURAL: Final = "rockettopics"
TOPIC_SINGULAR: Final = "rockettopic"
TOPIC_SHORT_NAMES: Final = ("rmqt",)
USER_KIND: Final = "RocketUser"
USER_PLURAL: Final = "rocketusers"
USER_SINGULAR: Final = "rocketuser"
USER_SHORT_NAMES: Final = ("rmqu",)
CONSUMER_GROUP_KIND: Final = "RocketConsumerGroup"
CONSUMER_GROUP_PLURAL: Final = "rocketconsumergroups"
CONSUMER_GROUP_SINGULAR: Final = "rocketconsumergroup"
CONSUMER_GROUP_SHORT_NAMES: Final = ("rmqg",)

ANNOTATION_PAUSE_RECONCILIATION: Final = f"{GROUP}/pause-reconciliation"
ANNOTATION_MANUAL_ROLLING_UPDATE: Final = f"{GROUP}/manual-rolling-update"
ANNOTATION_CONFIG_HASH: Final = f"{GROUP}/config-hash"
ANNOTATION_SECRETS_HASH: Final = f"{GROUP}/secrets-hash"

# -- labels ------------------------------------------------------------------------------------------------------

LABEL_NAME: Final = "app.kubernetes.io/name"
LABEL_INSTANCE: Final = "app.kubernetes.io/instance"
LABEL_COMPONENT: Final = "app.kubernetes.io/component"
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
LABEL_CLUSTER: Final = f"{GROUP}/cluster"
LABEL_GROUP: Final = f"{GROUP}/group"
# Set by the StatefulSet controller on every pod (Kubernetes >= 1.28); the broker reads its ordinal from it.
LABEL_POD_INDEX: Final = "apps.kubernetes.io/pod-index"

APP_NAME: Final = "rocketmq"
MANAGED_BY: Final = "rocketcluster-operator"
COMPONENT_NAMESERVER: Final = "nameserver"
COMPONENT_BROKER: Final = "broker"

# -- ports, paths, containers ------------------------------------------------------------------------------------

NAMESERVER_PORT: Final = 9876
BROKER_MAIN_PORT: Final = 10911
BROKER_HA_PORT: Final = 10912
NAMESERVER_CONTAINER: Final = "nameserver"
BROKER_CONTAINER: Final = "broker"
DATA_VOLUME: Final = "data"
DATA_MOUNT_PATH: Final = "/data"
STORE_ROOT_DIR: Final = "/data/store"
BROKER_CONFIG_DIR: Final = "/etc/rocketcluster"
NAMESERVER_CONF_FILE: Final = "namesrv.conf"  # in the NameServer ConfigMap, mounted under BROKER_CONFIG_DIR

# The longest StatefulSet name is `<c>-nameserver` (11 more characters). The StatefulSet controller labels each
# pod with `controller-revision-hash: <statefulset>-<hash up to 10 chars>`, a label value of at most 63
# characters, so a StatefulSet name longer than 52 makes pods that cannot be created: 52 - 11 = 41.
MAX_CLUSTER_NAME_LENGTH: Final = 41
# Service names are DNS-1035 labels (start with a letter), stricter than object names in general.
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True, slots=True)
class ClusterRef:
    """The RocketCluster object itself, as far as its children need it (from the resource's metadata)."""

    name: str
    namespace: str
    uid: str
    # SHA-256 of the Secrets the pods read (credentials, certificate), "" without spec.security: it goes into the
    # pods' annotations, so a rotated credential or certificate rolls them (rocketcluster.render_security)
    secrets_hash: str = ""

    def __post_init__(self) -> None:
        if len(self.name) > MAX_CLUSTER_NAME_LENGTH or not _DNS1035_LABEL.match(self.name):
            raise ValueError(
                f"metadata.name: {self.name!r} must be a DNS-1035 label (lowercase letters, digits and '-', "
                f"starting with a letter) of at most {MAX_CLUSTER_NAME_LENGTH} characters"
            )


# -- names of children --------------------------------------------------------------------------------------------


def nameserver_statefulset(c: str) -> str:
    return f"{c}-nameserver"


def nameserver_headless_service(c: str) -> str:
    return f"{c}-nameserver-headless"


def nameserver_service(c: str) -> str:
    """The client ClusterIP Service; the same name as the StatefulSet (different kinds do not clash)."""
    return f"{c}-nameserver"


def nameserver_pdb(c: str) -> str:
    return f"{c}-nameserver"


def nameserver_config_map(c: str) -> str:
    """Holds namesrv.conf, which every NameServer pod reads (NAMESERVER_CONF_FILE)."""
    return f"{c}-nameserver-config"


def nameserver_pod(c: str, ordinal: int) -> str:
    return f"{nameserver_statefulset(c)}-{ordinal}"


def nameserver_pod_address(c: str, namespace: str, ordinal: int) -> str:
    """host:port of one NameServer pod through the headless Service: stable across pod restarts (IPs are not)."""
    return f"{nameserver_pod(c, ordinal)}.{nameserver_headless_service(c)}.{namespace}.svc:{NAMESERVER_PORT}"


def nameserver_service_address(c: str, namespace: str) -> str:
    return f"{nameserver_service(c)}.{namespace}.svc:{NAMESERVER_PORT}"


def broker_statefulset(c: str, g: int) -> str:
    return f"{c}-broker-{g}"


def broker_headless_service(c: str) -> str:
    """One headless Service for every group's pods (each StatefulSet's serviceName)."""
    return f"{c}-broker"


def broker_config_map(c: str, g: int) -> str:
    return f"{c}-broker-{g}-config"


def broker_pdb(c: str, g: int) -> str:
    return f"{c}-broker-{g}"


def broker_pod(c: str, g: int, ordinal: int) -> str:
    """Pod `ordinal` of group g; the ordinal is the brokerId (0 = master)."""
    return f"{broker_statefulset(c, g)}-{ordinal}"


def broker_pvc(c: str, g: int, ordinal: int) -> str:
    """The PVC the StatefulSet controller creates for a pod from the `data` claim template."""
    return f"{DATA_VOLUME}-{broker_pod(c, g, ordinal)}"


def broker_conf_file(ordinal: int) -> str:
    """Key in the group ConfigMap (and file name under BROKER_CONFIG_DIR) of one ordinal's broker.conf."""
    return f"broker-{ordinal}.conf"


def broker_name(cluster_name: str, g: int) -> str:
    """RocketMQ brokerName of group g. `cluster_name` is the effective spec.clusterName (default metadata.name)."""
    return f"{cluster_name}-{g}"


def connection_config_map(c: str) -> str:
    return f"{c}-connection"


def service_account(c: str) -> str:
    return f"{c}-rocketmq"


# -- labels and selectors -----------------------------------------------------------------------------------------


def cluster_labels(c: str, component: str) -> dict[str, str]:
    """Labels on every child of cluster c of one component (nameserver or broker)."""
    return {
        LABEL_NAME: APP_NAME,
        LABEL_INSTANCE: c,
        LABEL_COMPONENT: component,
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_CLUSTER: c,
    }


def shared_labels(c: str) -> dict[str, str]:
    """Labels on the cluster's children that belong to no one component (ServiceAccount, connection ConfigMap)."""
    return {LABEL_NAME: APP_NAME, LABEL_INSTANCE: c, LABEL_MANAGED_BY: MANAGED_BY, LABEL_CLUSTER: c}


def nameserver_labels(c: str) -> dict[str, str]:
    return cluster_labels(c, COMPONENT_NAMESERVER)


def broker_group_labels(c: str, g: int) -> dict[str, str]:
    return {**cluster_labels(c, COMPONENT_BROKER), LABEL_GROUP: str(g)}


def nameserver_selector(c: str) -> dict[str, str]:
    """matchLabels of the NameServer pods: cluster + component, so two clusters never overlap."""
    return {LABEL_CLUSTER: c, LABEL_COMPONENT: COMPONENT_NAMESERVER}


def broker_selector(c: str) -> dict[str, str]:
    """matchLabels of every broker pod of the cluster (the shared headless Service)."""
    return {LABEL_CLUSTER: c, LABEL_COMPONENT: COMPONENT_BROKER}


def broker_group_selector(c: str, g: int) -> dict[str, str]:
    """matchLabels of group g's pods (its StatefulSet, PDB and anti-affinity)."""
    return {**broker_selector(c), LABEL_GROUP: str(g)}


def broker_label_selector(c: str) -> str:
    """broker_selector as a label-selector string: status.labelSelector, read by the scale subresource."""
    return ",".join(f"{key}={value}" for key, value in sorted(broker_selector(c).items()))
