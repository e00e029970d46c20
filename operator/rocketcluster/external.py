"""External access, the glue: what a pass does for spec.externalAccess besides applying the rendered Services.

Each pass lists the cluster's external Services (one label selector), deletes those no longer wanted (a slave or
group removed, the feature turned off), and for LoadBalancer writes the provisioned addresses into the ConfigMap
the brokers' start command waits on. It returns the load balancers' hosts by Service name, which observe needs
to know the address each broker should have registered and to fill status.externalAccess.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from rocketcluster import names
from rocketcluster.kube import Kube
from rocketcluster.model import RocketClusterSpec
from rocketcluster.render import owner_reference
from rocketcluster.render_external import (
    LABEL_EXTERNAL,
    addresses_config_map,
    addresses_data,
    ingress_hosts,
    stale_services,
)

__all__ = ["sync_external"]

log = logging.getLogger(__name__)


def _addresses_object(cluster: names.ClusterRef, data: Mapping[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": addresses_config_map(cluster.name),
            "namespace": cluster.namespace,
            "labels": {**names.shared_labels(cluster.name), LABEL_EXTERNAL: "true"},
            "ownerReferences": [owner_reference(cluster)],
        },
        "data": dict(data),
    }


async def sync_external(
    kube: Kube, cluster: names.ClusterRef, spec: RocketClusterSpec, pods: Sequence[Mapping[str, Any]]
) -> dict[str, str]:
    """Prune the external Services, publish the load balancers' addresses; the hosts by Service name."""
    ns, c = cluster.namespace, cluster.name
    services = await kube.list("v1", "Service", ns, {names.LABEL_CLUSTER: c, LABEL_EXTERNAL: "true"})
    pod_names = [str((p.get("metadata") or {}).get("name")) for p in pods]
    for name in stale_services(c, spec, services, pod_names):
        log.info("%s/%s: deleting external Service %s", ns, c, name)
        await kube.delete("v1", "Service", ns, name)
    hosts = ingress_hosts(services)
    access = spec.external_access
    if access is not None and access.type == "LoadBalancer":
        await kube.apply(_addresses_object(cluster, addresses_data(c, spec, hosts)))
    elif services:  # turned off or NodePort: a ConfigMap left from LoadBalancer goes (once: services were seen)
        await kube.delete("v1", "ConfigMap", ns, addresses_config_map(c))
    return hosts
