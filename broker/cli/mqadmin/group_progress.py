"""A consumer group's per-queue offsets (RocketMQ's ConsumeStats), from GET_CONSUME_STATS or, from a broker
that does not answer it, from the max offset and committed offset of each queue the group committed on.

consumerProgress, cloneGroupOffset and statsAll read these.
"""

from __future__ import annotations

from broker.client.admin import Admin, requests
from broker.client.admin.views import GroupQueueStats, QueueConsumeStats, consume_stats
from broker.client.errors import QueryNotFound, RequestCodeNotSupported
from broker.client.message import MessageQueue
from broker.client.queue_reader import read_range
from broker.client.route import subscribe_queues

__all__ = ["group_stats"]


async def group_stats(admin: Admin, group: str, topic: str | None = None) -> GroupQueueStats:
    """Every master's ConsumeStats of `group` (on `topic` only, when given), merged; TPS summed."""
    info = await admin.cluster_info()
    queues: dict[MessageQueue, QueueConsumeStats] = {}
    tps = 0.0
    for name in sorted(info.brokers):
        addr = info.brokers[name].broker_addrs.get(0)
        if addr is None:
            continue
        try:
            stats = await consume_stats(admin.instance.api, addr, group, topic)
        except RequestCodeNotSupported:
            stats = await _from_offsets(admin, addr, name, group, topic)
        queues.update(stats.queues)
        tps += stats.consume_tps
    return GroupQueueStats(queues, tps)


async def _from_offsets(admin: Admin, addr: str, broker_name: str, group: str, topic: str | None) -> GroupQueueStats:
    api = admin.instance.api
    offsets = await requests.get_all_consumer_offsets(api, addr)
    topics = {t for (t, g) in offsets if g == group and (topic is None or t == topic)}
    if topic is not None:
        topics.add(topic)
    out: dict[MessageQueue, QueueConsumeStats] = {}
    for t in sorted(topics):
        route = await admin.topic_route(t)
        for mq in subscribe_queues(t, route):
            if mq.broker_name != broker_name:
                continue
            broker_offset = await api.get_max_offset(addr, mq)
            try:
                consumer_offset = max(await api.query_consumer_offset(addr, group, mq, False), 0)
            except QueryNotFound:
                consumer_offset = 0
            last = 0
            if consumer_offset > 0:
                async for batch in read_range(
                    admin.instance, "TOOLS_CONSUMER", mq, consumer_offset - 1, consumer_offset
                ):
                    last = batch[-1].store_timestamp
            out[mq] = QueueConsumeStats(broker_offset, consumer_offset, consumer_offset, last)
    return GroupQueueStats(out, 0.0)
