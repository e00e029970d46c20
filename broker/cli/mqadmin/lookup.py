"""Names on the command line checked against the cluster before a command acts on them, so a typo gets
"does not exist" and a hint instead of an empty answer (or a broker creating what was misspelt)."""

from __future__ import annotations

from broker.cli.mqadmin.registry import UnknownName, UsageError
from broker.client.admin import Admin, ClusterInfo
from broker.client.message import MessageQueue
from broker.client.route import MASTER_ID, TopicRouteData

__all__ = ["broker_addrs", "master_of", "queue_of", "require_group", "require_topic", "target_masters"]


async def require_topic(admin: Admin, topic: str) -> TopicRouteData:
    if topic not in await admin.topic_list():
        raise UnknownName(
            f"topic {topic} does not exist: the NameServer has no route for it (mqadmin topicList lists the topics)"
        )
    return await admin.topic_route(topic)


async def require_group(admin: Admin, group: str) -> None:
    if not await admin.group_exists(group):
        raise UnknownName(
            f"consumer group {group} does not exist: no broker has its subscription or committed offsets"
            " (a group appears once one of its consumers has started)"
        )


def _known_addrs(info: ClusterInfo) -> set[str]:
    return {addr for bd in info.brokers.values() for addr in bd.broker_addrs.values()}


def master_of(info: ClusterInfo, broker_name: str) -> str:
    """The master address of broker group `broker_name` (a name, as clusterList shows it, not ip:port)."""
    bd = info.brokers.get(broker_name)
    if bd is None:
        if broker_name in _known_addrs(info):
            raise UsageError(f"{broker_name} is a broker address; this flag takes a broker name (see clusterList)")
        raise UnknownName(
            f"broker {broker_name} is not registered with the NameServer (mqadmin clusterList lists them)"
        )
    addr = bd.broker_addrs.get(MASTER_ID)
    if addr is None:
        raise UnknownName(f"broker {broker_name} has no master registered with the NameServer")
    return addr


async def target_masters(
    admin: Admin, broker_addr: str | None, cluster: str | None, *, all_brokers: bool = False
) -> list[str]:
    """RocketMQ's -b / -c pair: the one broker at -b (which must be registered), or every master of cluster
    -c (every broker, slaves too, when `all_brokers`). One of the two is required."""
    info = await admin.cluster_info()
    if broker_addr:
        if broker_addr not in _known_addrs(info):
            if broker_addr in info.brokers:
                raise UsageError(f"{broker_addr} is a broker name; -b takes a broker address ip:port (see clusterList)")
            raise UnknownName(
                f"broker {broker_addr} is not registered with the NameServer (mqadmin clusterList lists the addresses)"
            )
        return [broker_addr]
    if cluster:
        if cluster not in info.clusters:
            raise UnknownName(f"cluster {cluster} does not exist (mqadmin clusterList lists the clusters)")
        if all_brokers:
            return broker_addrs(info, cluster)
        return info.masters(cluster)
    raise UsageError("give -b brokerAddr (ip:port) or -c clusterName")


def broker_addrs(info: ClusterInfo, cluster: str | None = None) -> list[str]:
    """Every registered broker address (masters and slaves) of `cluster`, or of every cluster."""
    names = info.clusters.get(cluster, []) if cluster else list(info.brokers)
    return sorted(a for n in names if (bd := info.brokers.get(n)) for a in bd.broker_addrs.values())


def queue_of(route: TopicRouteData, topic: str, broker_name: str, queue_id: int) -> MessageQueue:
    """The queue `queue_id` of `topic` on broker group `broker_name`, checked against the route."""
    qd = next((q for q in route.queue_datas if q.broker_name == broker_name), None)
    if qd is None:
        raise UnknownName(f"topic {topic} has no queue on broker {broker_name}")
    if not 0 <= queue_id < max(qd.read_queue_nums, qd.write_queue_nums):
        raise UnknownName(
            f"topic {topic} has no queue {queue_id} on broker {broker_name} (it has {qd.read_queue_nums})"
        )
    return MessageQueue(topic, broker_name, queue_id)
