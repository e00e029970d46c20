"""NamesrvCollector: what a scrape of a NameServer publishes (node_type="nameserver").

RocketMQ's NameServer exports no gauges of its own; these follow the broker's naming: the request
latency per code (the same rocketmq_rpc_latency), and the route table's size per cluster as this
NameServer sees it. The `cluster` label of the per-cluster gauges is the brokers' cluster; the node's
own cluster label is empty (a NameServer serves every cluster that registers with it).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from broker.metrics.families import NodeLabels
from broker.metrics.rpc import RpcMeter

if TYPE_CHECKING:
    from broker.metrics.views import NamesrvView

__all__ = ["NamesrvCollector"]


class NamesrvCollector(Collector):
    def __init__(self, namesrv: NamesrvView, rpc: RpcMeter) -> None:
        self.namesrv = namesrv
        self.rpc = rpc

    def collect(self) -> Iterator[Metric]:
        n = self.namesrv
        node = NodeLabels("", "nameserver", f"{n.server.host}:{n.port}")
        rpc = node.histogram(
            "rocketmq_rpc_latency",
            "Time from a request to its answer, in milliseconds",
            ["protocol_type", "request_code", "response_code"],
        )
        for request, response, buckets, total in self.rpc.publish():
            rpc.add_metric(node("remoting", request, response), buckets, total)
        yield rpc
        live = n.routes.live_brokers()
        per_cluster: dict[str, int] = {}
        for cluster, _addr in live:
            per_cluster[cluster] = per_cluster.get(cluster, 0) + 1
        # the per-cluster gauges label the brokers' cluster, not the node's: one family, cluster overridden
        brokers = GaugeMetricFamily(
            "rocketmq_broker_number",
            "Brokers (masters and slaves) alive in the route table",
            labels=["cluster", "node_type", "node_id"],
        )
        topics = GaugeMetricFamily(
            "rocketmq_topic_number",
            "Topics in the route table with a queue on a broker of the cluster",
            labels=["cluster", "node_type", "node_id"],
        )
        for cluster in sorted(per_cluster):
            brokers.add_metric([cluster, "nameserver", node.values[2]], per_cluster.get(cluster, 0))
            topics.add_metric([cluster, "nameserver", node.values[2]], len(n.routes.topics_by_cluster(cluster)))
        total_topics = node.gauge("rocketmq_route_topic_number", "Topics in the route table, all clusters")
        total_topics.add_metric(node(), len(n.routes.all_topics()))
        connections = node.gauge("rocketmq_connections", "Open remoting connections (brokers and clients)")
        connections.add_metric(node(), len(n.server.connections))
        yield from (brokers, topics, total_topics, connections)
