"""BrokerCollector: what a scrape of a broker publishes, read at that moment from the broker itself.

Counters and histograms come from BrokerMeters (read from the ConsumeQueues, or counted by the hot path);
gauges are computed here from the broker's tables and its store: topics, groups, connections, consumer lag
per group and topic, store size and backlogs, replication lag. The broker is read through `BrokerView`
(broker.metrics.views), which names exactly those parts. Everything runs on the event loop
(broker.metrics.http), so the lag published is the offset table and the queue ends as they are between two
requests.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from broker.metrics.broker_meters import SIZE_BUCKETS, BrokerMeters
from broker.metrics.families import NodeLabels
from broker.protocol.codes import LanguageCode
from broker.protocol.system_groups import SYSTEM_GROUPS

if TYPE_CHECKING:
    from broker.metrics.views import BrokerView
    from broker.store import MessageStore

__all__ = ["BrokerCollector", "is_system_group"]

log = logging.getLogger(__name__)

_RETRY_PREFIX = "%RETRY%"
_SYSTEM_GROUP_PREFIX = "cid_rmq_sys_"  # MixAll.CID_RMQ_SYS_PREFIX, compared in lower case as RocketMQ does
_CONSUME_MODES = {"CONSUME_ACTIVELY": "pull", "CONSUME_PASSIVELY": "push", "CONSUME_POP": "pop"}
_STORAGE = ("local", "disk")  # storage_type, storage_medium: RocketMQ's values for a local disk store


def is_system_group(group: str) -> bool:
    return group in SYSTEM_GROUPS or group.lower().startswith(_SYSTEM_GROUP_PREFIX)


def _language(code: int) -> str:
    try:
        return LanguageCode(code).name.lower()
    except ValueError:
        return str(code)


def _bool(value: bool) -> str:
    return "true" if value else "false"


class BrokerCollector(Collector):
    def __init__(self, broker: BrokerView, meters: BrokerMeters) -> None:
        self.broker = broker
        self.meters = meters

    def collect(self) -> Iterator[Metric]:
        c = self.broker.config
        node = NodeLabels(c.broker_cluster_name, "broker", c.broker_name)
        yield from self._traffic(node)
        yield from self._rpc(node)
        yield from self._tables(node)
        yield from self._connections(node)
        store = self.broker.started_store
        if store is not None:
            yield from self._lag(node, store)
            yield from self._storage(node, store)
        yield from self._replication(node, store)

    # ------------------------------------------------------------------ counted on the hot path

    def _traffic(self, node: NodeLabels) -> Iterator[Metric]:
        m = self.meters
        messages_in = node.counter("rocketmq_messages_in_total", "Messages stored by sends", ["topic", "message_type"])
        bytes_in = node.counter(
            "rocketmq_throughput_in_total", "Bytes stored by sends (whole records)", ["topic", "message_type"]
        )
        size = node.histogram(
            "rocketmq_message_size", "Size of stored messages in bytes (whole records)", ["topic", "message_type"]
        )
        for (topic, mtype), cell in sorted(m.in_cells().items()):
            # one cell counts all three: a message is one observation of its stored size
            labels = node(topic, mtype)
            buckets, total = SIZE_BUCKETS.publish(cell)
            messages_in.add_metric(labels, buckets[-1][1])
            bytes_in.add_metric(labels, total)
            size.add_metric(labels, buckets, total)
        messages_out = node.counter(
            "rocketmq_messages_out_total", "Messages returned by pulls", ["topic", "consumer_group"]
        )
        bytes_out = node.counter(
            "rocketmq_throughput_out_total", "Bytes returned by pulls (whole records)", ["topic", "consumer_group"]
        )
        # the broker's own pull counters (GroupGetStats, always on), keyed topic@group as RocketMQ's stats
        for key, (count, nbytes, _pulls) in sorted(self.broker.get_stats.counts.items()):
            topic, _, group = key.partition("@")
            messages_out.add_metric(node(topic, group), count)
            bytes_out.add_metric(node(topic, group), nbytes)
        dlq = node.counter(
            "rocketmq_send_to_dlq_messages_total",
            "Messages moved to a dead-letter queue after their last retry",
            ["topic", "consumer_group"],
        )
        for (topic, group), count in sorted(m.dlq.items()):
            dlq.add_metric(node(topic, group), count)
        yield from (messages_in, bytes_in, size, messages_out, bytes_out, dlq)

    def _rpc(self, node: NodeLabels) -> Iterator[Metric]:
        family = node.histogram(
            "rocketmq_rpc_latency",
            "Time from a request to its answer, in milliseconds",
            ["protocol_type", "request_code", "response_code"],
        )
        for request, response, buckets, total in self.meters.rpc.publish():
            family.add_metric(node("remoting", request, response), buckets, total)
        yield family

    # ------------------------------------------------------------------ read at scrape time

    def _tables(self, node: NodeLabels) -> Iterator[Metric]:
        b = self.broker
        perm = node.gauge("rocketmq_broker_permission", "The broker's permission bits (brokerPermission: 2 W, 4 R)")
        perm.add_metric(node(), b.config.broker_permission)
        topics = node.gauge("rocketmq_topic_number", "Topics in the broker's topic table (system topics included)")
        topics.add_metric(node(), len(b.topics.table))
        groups = node.gauge(
            "rocketmq_consumer_group_number", "Subscription groups in the broker's table (system groups included)"
        )
        groups.add_metric(node(), len(b.groups.table))
        watermark = node.gauge(
            "rocketmq_processor_watermark",
            "Requests waiting: send = held back by connection flow control, async_put = puts waiting for the "
            "group commit or a slave",
            ["processor"],
        )
        server = b.server
        backlog = sum(conn.backlog_size for conn in server.connections) if server is not None else 0
        watermark.add_metric(node("send"), backlog)
        watermark.add_metric(node("async_put"), b.sends_in_flight)
        yield from (perm, topics, groups, watermark)

    def _connections(self, node: NodeLabels) -> Iterator[Metric]:
        b = self.broker
        producers: dict[tuple[str, str], int] = {}
        for channels in b.producers.groups.values():
            for info in channels.values():
                pkey = (_language(info.language), str(info.version))
                producers[pkey] = producers.get(pkey, 0) + 1
        family = node.gauge(
            "rocketmq_producer_connections", "Producer channels", ["language", "version", "protocol_type"]
        )
        for (language, version), count in sorted(producers.items()):
            family.add_metric(node(language, version, "remoting"), count)
        yield family
        consumers: dict[tuple[str, str, str, str], int] = {}
        for group, g in b.consumers.groups.items():
            mode = _CONSUME_MODES.get(g.consume_type, g.consume_type.lower())
            for info in g.channels.values():
                ckey = (group, _language(info.language), str(info.version), mode)
                consumers[ckey] = consumers.get(ckey, 0) + 1
        family = node.gauge(
            "rocketmq_consumer_connections",
            "Consumer channels",
            ["consumer_group", "language", "version", "consume_mode", "protocol_type", "is_system"],
        )
        for (group, language, version, mode), count in sorted(consumers.items()):
            family.add_metric(node(group, language, version, mode, "remoting", _bool(is_system_group(group))), count)
        yield family

    def _lag(self, node: NodeLabels, store: MessageStore) -> Iterator[Metric]:
        """Per (group, topic) with committed offsets, summed over its queues (RocketMQ's ConsumerLagCalculator):
        lag = queue end - committed, in flight = pulled to - committed, ready = queue end - pulled to."""
        b = self.broker
        pulled_to = b.get_stats.pulled_to
        system_topics = b.topics.system_topics
        labels = ["topic", "consumer_group", "is_retry", "is_system"]
        lag_f = node.gauge("rocketmq_consumer_lag_messages", "Messages not yet consumed (committed)", labels)
        lag_ms_f = node.gauge(
            "rocketmq_consumer_lag_latency",
            "Milliseconds since the oldest message not yet consumed (committed) was stored",
            labels,
        )
        inflight_f = node.gauge("rocketmq_consumer_inflight_messages", "Messages pulled, not yet committed", labels)
        ready_f = node.gauge("rocketmq_consumer_ready_messages", "Messages stored, not yet pulled", labels)
        queueing_f = node.gauge(
            "rocketmq_consumer_queueing_latency",
            "Milliseconds since the oldest message not yet pulled was stored",
            labels,
        )
        now_ms = int(time.time() * 1000)
        commit_log = store.commit_log
        for key, queues in sorted(b.offsets.table.items()):
            topic, _, group = key.partition("@")
            lag = inflight = ready = 0
            oldest_unconsumed = oldest_unpulled = 0
            for queue_id, committed in queues.items():
                end = store.get_max_offset_in_queue(topic, queue_id)
                committed = max(committed, 0)
                pulled = max(pulled_to.get((group, topic, queue_id), committed), committed)
                if end > committed:
                    lag += end - committed
                    ts = commit_log.store_timestamp_at(store.get_commit_log_offset_in_queue(topic, queue_id, committed))
                    if ts > 0 and (not oldest_unconsumed or ts < oldest_unconsumed):
                        oldest_unconsumed = ts
                inflight += max(0, min(pulled, end) - committed)
                if end > pulled:
                    ready += end - pulled
                    ts = commit_log.store_timestamp_at(store.get_commit_log_offset_in_queue(topic, queue_id, pulled))
                    if ts > 0 and (not oldest_unpulled or ts < oldest_unpulled):
                        oldest_unpulled = ts
            values = node(
                topic,
                group,
                _bool(topic.startswith(_RETRY_PREFIX)),
                _bool(topic in system_topics or is_system_group(group)),
            )
            lag_f.add_metric(values, lag)
            lag_ms_f.add_metric(values, max(0, now_ms - oldest_unconsumed) if oldest_unconsumed else 0)
            inflight_f.add_metric(values, inflight)
            ready_f.add_metric(values, ready)
            queueing_f.add_metric(values, max(0, now_ms - oldest_unpulled) if oldest_unpulled else 0)
        yield from (lag_f, lag_ms_f, inflight_f, ready_f, queueing_f)

    def _storage(self, node: NodeLabels, store: MessageStore) -> Iterator[Metric]:
        labels = ["storage_type", "storage_medium"]
        size = node.gauge(
            "rocketmq_storage_size",
            "Bytes used on the file system of storePathRootDir (as RocketMQ: total - free)",
            labels,
        )
        try:
            fs = os.statvfs(store.config.store_path_root_dir)
            size.add_metric(node(*_STORAGE), (fs.f_blocks - fs.f_bfree) * fs.f_frsize)
        except OSError as exc:
            log.debug("statvfs of the store failed: %s", exc)
        flush = node.gauge(
            "rocketmq_storage_flush_behind_bytes", "CommitLog bytes written but not yet flushed to disk", labels
        )
        flush.add_metric(node(*_STORAGE), store.commit_log.queue.unflushed_bytes)
        dispatch = node.gauge(
            "rocketmq_storage_dispatch_behind_bytes", "CommitLog bytes not yet dispatched to the consume queues", labels
        )
        dispatch.add_metric(node(*_STORAGE), store.dispatch_behind_bytes)
        reserve = node.gauge(
            "rocketmq_storage_message_reserve_time",
            "Milliseconds since the oldest message still in the CommitLog was stored",
            labels,
        )
        if store.max_phy_offset > store.min_phy_offset:
            ts = store.commit_log.store_timestamp_at(store.min_phy_offset)
            if ts > 0:
                reserve.add_metric(node(*_STORAGE), max(0, int(time.time() * 1000) - ts))
        yield from (size, flush, dispatch, reserve)

    def _replication(self, node: NodeLabels, store: MessageStore | None) -> Iterator[Metric]:
        """Ours (RocketMQ 5 has no HA gauges), on a master: each slave's lag, and how long the oldest put no
        slave has acknowledged has waited (what a SYNC_MASTER send waits for)."""
        ha = self.broker.ha
        master = ha.master if ha is not None else None
        if master is None or store is None:
            return
        end = store.max_phy_offset
        lag_bytes = node.gauge(
            "rocketmq_replication_lag_bytes", "CommitLog bytes a slave has not acknowledged yet", ["slave"]
        )
        for conn in sorted(master.connections, key=lambda conn: conn.addr):
            if conn.slave_ack_offset >= 0:
                lag_bytes.add_metric(node(conn.addr), max(0, end - conn.slave_ack_offset))
        lag_ms = node.gauge(
            "rocketmq_replication_lag_latency",
            "Milliseconds the oldest put no slave has acknowledged has waited (0: caught up)",
        )
        if master.slave_count:
            lag_ms.add_metric(node(), master.status.snapshot(end).lag_ms)
        slaves = node.gauge("rocketmq_replication_slaves", "Slaves connected to this master's HA port")
        slaves.add_metric(node(), master.slave_count)
        yield from (lag_bytes, lag_ms, slaves)
