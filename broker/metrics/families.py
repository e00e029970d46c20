"""Metric families with the node labels every sample carries (cluster, node_type, node_id), as RocketMQ's
BrokerMetricsManager puts them on each attribute set. Used by both collectors.

No `unit=` is passed to prometheus-client: it would append the unit to the name, and RocketMQ's names
(rocketmq_rpc_latency, rocketmq_storage_size) carry none; the unit is in each HELP text instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

__all__ = ["NodeLabels"]


class NodeLabels:
    def __init__(self, cluster: str, node_type: str, node_id: str) -> None:
        self.names = ("cluster", "node_type", "node_id")
        self.values = (cluster, node_type, node_id)

    def counter(self, name: str, doc: str, labels: Sequence[str] = ()) -> CounterMetricFamily:
        return CounterMetricFamily(name, doc, labels=[*self.names, *labels])

    def gauge(self, name: str, doc: str, labels: Sequence[str] = ()) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, doc, labels=[*self.names, *labels])

    def histogram(self, name: str, doc: str, labels: Sequence[str] = ()) -> HistogramMetricFamily:
        return HistogramMetricFamily(name, doc, labels=[*self.names, *labels])

    def __call__(self, *values: str) -> list[str]:
        """The label values of one sample: the node's, then `values`."""
        return [*self.values, *values]
