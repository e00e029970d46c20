"""MetricsExporter: one registry (the server's collector and the process's own) behind one endpoint.

BrokerController and NamesrvController build one when `metricsExporterType=PROM` and start it first, so
a metrics port in use fails the start before any other port is bound or any file opened.
"""

from __future__ import annotations

from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector, CollectorRegistry

from broker.metrics.http import MetricsEndpoint
from broker.metrics.settings import MetricsSettings

__all__ = ["MetricsExporter"]


class MetricsExporter:
    def __init__(self, settings: MetricsSettings, collector: Collector) -> None:
        # auto_describe off: registering must not run a collection before the server has started
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        # process_* (CPU, memory, open files), python_info and python_gc_*: from prometheus-client as is
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.endpoint = MetricsEndpoint(self.registry, settings.host, settings.port)

    @property
    def port(self) -> int:
        return self.endpoint.port

    async def start(self) -> None:
        await self.endpoint.start()

    async def close(self) -> None:
        await self.endpoint.close()

    def scrape(self) -> bytes:
        """The text exposition, as a scrape would get it (tests, benchmarks)."""
        return self.endpoint.render()[0]
