"""spec.failover as configuration and pod settings (pure): the controller inside every NameServer, and the brokers
in controller mode (RocketMQ 5's keys; docs/design/failover.md says how the controller and the brokers work).

- Every NameServer pod runs a controller (`enableControllerInNamesrv=true`). `controllerDLegerPeers` lists every
  NameServer pod by its stable DNS name (the headless Service's record, published before the pod is ready),
  with peer ids `n<ordinal>`; a pod's own `controllerDLegerSelfId` is `n$(POD_INDEX)`, added by its start
  command because the ConfigMap is shared. The Raft log lives on the pod's own volume (`controllerStorePath`).
- Raft frames are authenticated by `controllerRaftPassword`. It lives only in the Secret `<c>-controller-raft`
  (made once by the operator with a random value), never in a ConfigMap: the start command lays it after
  namesrv.conf into a file under the pod's home (an emptyDir), as render_security does for the credentials.
- Every broker starts in controller mode: `enableControllerMode=true`, `controllerAddr` the controllers,
  `brokerId=-1` (the controller hands out ids), SYNC replication with `allAckInSyncStateSet=true`.
- Silence is detected sooner than RocketMQ's defaults do: `controllerHeartBeatTimeoutMills=6000` on the brokers
  (spec.broker.config may set another value) and `scanNotActiveBrokerInterval=1000` on the controllers.
"""

from __future__ import annotations

import copy
import shlex
from typing import Any, Final

from rocketcluster import names
from rocketcluster.model import RocketClusterSpec
from rocketcluster.names import ClusterRef

__all__ = [
    "CONTROLLER_PORT",
    "RAFT_FILE",
    "RAFT_PASSWORD_KEY",
    "RAFT_PORT",
    "broker_failover_defaults",
    "broker_failover_properties",
    "controller_addr",
    "controller_peer_id",
    "controller_peers",
    "failover_nameserver_pod",
    "nameserver_failover_properties",
    "nameserver_volume_claim",
    "raft_properties",
    "raft_secret_name",
    "render_raft_secret",
]

Obj = dict[str, Any]

# The controller's requests are served on the peer address (as in RocketMQ's DLedger mode); its Raft runs on
# the next port (controllerRaftPortOffset 1, the default).
CONTROLLER_PORT: Final = 9878
RAFT_PORT: Final = CONTROLLER_PORT + 1
RAFT_PASSWORD_KEY: Final = "controllerRaftPassword"
RAFT_FILE: Final = "raft.properties"
CONTROLLER_STORE: Final = f"{names.DATA_MOUNT_PATH}/controller"
# A broker silent this long is dead (RocketMQ's default is 10 s), checked this often (5 s): heartbeats come every
# second, so six missed ones start an election.
BROKER_SILENT_MS: Final = 6000
CONTROLLER_SCAN_MS: Final = 1000
_RAFT_DIR: Final = "/etc/rocketcluster-controller"
_RAFT_VOLUME: Final = "controller-raft"
_SECRET_FILE_MODE: Final = 0o440
# Where the NameServer's own file (namesrv.conf, the password, the self id) is put together: the pod's home,
# an emptyDir. Not /tmp, where spec.security's start command writes its own merge of the same file name.
_MERGED: Final = "/home/rocketmq/namesrv-controller.conf"


def raft_secret_name(c: str) -> str:
    """The Secret holding the controllers' Raft password."""
    return f"{c}-controller-raft"


def controller_peer_id(ordinal: int) -> str:
    return f"n{ordinal}"


def _controller_host(cluster: ClusterRef, ordinal: int) -> str:
    pod = names.nameserver_pod(cluster.name, ordinal)
    return f"{pod}.{names.nameserver_headless_service(cluster.name)}.{cluster.namespace}.svc"


def controller_peers(cluster: ClusterRef, spec: RocketClusterSpec) -> str:
    """controllerDLegerPeers: `n<i>-<NameServer pod i's DNS name>:9878`, `;`-joined."""
    return ";".join(
        f"{controller_peer_id(i)}-{_controller_host(cluster, i)}:{CONTROLLER_PORT}"
        for i in range(spec.name_server.replicas)
    )


def controller_addr(cluster: ClusterRef, spec: RocketClusterSpec) -> str:
    """The brokers' controllerAddr: every controller's peer address, `;`-joined."""
    return ";".join(f"{_controller_host(cluster, i)}:{CONTROLLER_PORT}" for i in range(spec.name_server.replicas))


def nameserver_failover_properties(cluster: ClusterRef, spec: RocketClusterSpec) -> dict[str, str]:
    """namesrv.conf's controller keys (none without spec.failover). The self id and the password are added at
    start (see the module's docstring)."""
    if not spec.failover.enabled:
        return {}
    return {
        "enableControllerInNamesrv": "true",
        "controllerDLegerGroup": spec.effective_cluster_name(cluster.name),
        "controllerDLegerPeers": controller_peers(cluster, spec),
        "controllerStorePath": CONTROLLER_STORE,
        "enableElectUncleanMaster": "false",
        "notifyBrokerRoleChanged": "true",
        # with brokers silent for controllerHeartBeatTimeoutMills (below) dead: an election ~6.5 s after a
        # partition or a frozen node, against 10 to 15 s with RocketMQ's 5 s scan
        "scanNotActiveBrokerInterval": str(CONTROLLER_SCAN_MS),
    }


def broker_failover_properties(cluster: ClusterRef, spec: RocketClusterSpec) -> dict[str, str]:
    """broker.conf's controller-mode keys, over the operator's brokerId and brokerRole (none without failover).

    brokerRole SLAVE, as in RocketMQ's shipped controller configs: every broker starts fenced, and the
    controller makes one of them the master (SYNC_MASTER) of its group."""
    if not spec.failover.enabled:
        return {}
    return {
        "enableControllerMode": "true",
        "controllerAddr": controller_addr(cluster, spec),
        "brokerId": "-1",
        "brokerRole": "SLAVE",
        "allAckInSyncStateSet": "true",
    }


def broker_failover_defaults(spec: RocketClusterSpec) -> dict[str, str]:
    """broker.conf keys the operator sets with spec.failover unless spec.broker.config sets them."""
    if not spec.failover.enabled:
        return {}
    return {"controllerHeartBeatTimeoutMills": str(BROKER_SILENT_MS)}


def raft_properties(password: str) -> str:
    """The Secret's file: the one key, as properties text (the password is URL-safe base64: no escapes)."""
    return f"{RAFT_PASSWORD_KEY}={password}\n"


def render_raft_secret(cluster: ClusterRef, password: str) -> Obj:
    """The controllers' Raft password Secret. The caller makes `password` (random) once; the Secret is created,
    never applied over, so a restart of the operator never changes it."""
    from rocketcluster.render import owner_reference  # render imports this module

    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": raft_secret_name(cluster.name),
            "namespace": cluster.namespace,
            "labels": names.shared_labels(cluster.name),
            "ownerReferences": [owner_reference(cluster)],
        },
        "type": "Opaque",
        "stringData": {RAFT_FILE: raft_properties(password)},
    }


def nameserver_volume_claim(spec: RocketClusterSpec, labels: dict[str, str]) -> Obj:
    """The NameServers' volumeClaimTemplate for the controller store (storage.type persistentClaim)."""
    claim: Obj = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": spec.failover.controller_storage_size}},
    }
    if spec.storage.storage_class_name:
        claim["storageClassName"] = spec.storage.storage_class_name
    return {"metadata": {"name": names.DATA_VOLUME, "labels": dict(labels)}, "spec": claim}


def failover_nameserver_pod(pod: Obj, cluster: ClusterRef, spec: RocketClusterSpec) -> Obj:
    """The NameServer pod template with the controller: its ports, the data volume mount (an emptyDir when the
    storage is ephemeral; else the claim template's), the password Secret, POD_INDEX, and the start command that
    puts namesrv.conf, the password and the self id together. Unchanged without spec.failover."""
    if not spec.failover.enabled:
        return pod
    pod = copy.deepcopy(pod)
    body = pod["spec"]
    volumes = body.setdefault("volumes", [])
    volumes.append(
        {
            "name": _RAFT_VOLUME,
            "secret": {"secretName": raft_secret_name(cluster.name), "defaultMode": _SECRET_FILE_MODE},
        }
    )
    if spec.storage.type == "ephemeral":
        volumes.append({"name": names.DATA_VOLUME, "emptyDir": {"sizeLimit": spec.failover.controller_storage_size}})
    container = next(c for c in body["containers"] if c.get("name") == names.NAMESERVER_CONTAINER)
    *program, flag, conf = container["command"]
    if flag != "-c":
        raise ValueError(f"the NameServer's start command {container['command']!r} does not end in -c <file>")
    raft = f"{_RAFT_DIR}/{RAFT_FILE}"
    script = (
        f"umask 077 && cat {shlex.quote(conf)} {shlex.quote(raft)} > {_MERGED} && "
        f"echo controllerDLegerSelfId=n$(POD_INDEX) >> {_MERGED} && exec {' '.join(program)} -c {_MERGED}"
    )
    container["command"] = ["sh", "-c", script]
    container["env"] = [
        *container.get("env", []),
        {
            "name": "POD_INDEX",
            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{names.LABEL_POD_INDEX}']"}},
        },
    ]
    container["ports"] = [
        *container.get("ports", []),
        {"name": "controller", "containerPort": CONTROLLER_PORT, "protocol": "TCP"},
        {"name": "raft", "containerPort": RAFT_PORT, "protocol": "TCP"},
    ]
    mounts = container.setdefault("volumeMounts", [])
    mounts.append({"name": names.DATA_VOLUME, "mountPath": names.DATA_MOUNT_PATH})
    mounts.append({"name": _RAFT_VOLUME, "mountPath": _RAFT_DIR, "readOnly": True})
    return pod
