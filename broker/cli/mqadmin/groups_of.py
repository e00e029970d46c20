"""Which consumer groups consume a topic, and which groups exist at all: what topicList -c, statsAll and
consumerProgress (without -g) list.

RocketMQ asks each master QUERY_TOPIC_CONSUME_BY_WHO (300); a broker that does not answer it is asked for
its committed offsets (GET_ALL_CONSUMER_OFFSET), whose topic@group keys say the same for every group that
has committed once.
"""

from __future__ import annotations

from broker.client.admin import Admin, requests
from broker.client.admin.views import topic_consumed_by
from broker.client.errors import RequestCodeNotSupported
from broker.protocol.system_groups import SYSTEM_GROUPS

__all__ = ["all_groups", "groups_of_topic"]

BROKER_TOPIC_PREFIXES = ("RMQ_SYS_", "SCHEDULE_TOPIC_XXXX", "rmq_sys_")


async def groups_of_topic(admin: Admin, topic: str) -> list[str]:
    route = await admin.topic_route(topic)
    groups: set[str] = set()
    for addr in sorted(route.master_addrs()):
        try:
            groups.update(await topic_consumed_by(admin.instance.api, addr, topic))
        except RequestCodeNotSupported:
            offsets = await requests.get_all_consumer_offsets(admin.instance.api, addr)
            groups.update(g for (t, g) in offsets if t == topic)
    return sorted(groups - set(SYSTEM_GROUPS))


async def all_groups(admin: Admin) -> list[str]:
    """Every consumer group any master knows (subscription config or committed offsets), system groups aside."""
    groups: set[str] = set()
    for addr in (await admin.cluster_info()).masters():
        groups.update(await requests.get_all_subscription_groups(admin.instance.api, addr))
        offsets = await requests.get_all_consumer_offsets(admin.instance.api, addr)
        # the broker's own readers (the transaction checker) commit on system topics: not consumer groups
        groups.update(g for (t, g) in offsets if not t.startswith(BROKER_TOPIC_PREFIXES))
    return sorted(groups - set(SYSTEM_GROUPS))
