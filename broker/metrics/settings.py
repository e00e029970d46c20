"""The metrics keys, as RocketMQ 5 spells them: metricsExporterType, metricsPromExporterHost/Port.

BrokerConfig (broker.server.config) and NamesrvConfig (broker.namesrv.config) declare the three fields with
these annotated types, so both reject the same bad values with the same message naming the key;
`MetricsSettings.of(config)` is what the exporter reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, Protocol

from pydantic import BeforeValidator, Field

__all__ = ["DEFAULT_PROM_PORT", "QUEUE_READ_EVERY_S", "ExporterType", "MetricsSettings", "PromHost", "PromPort"]

DEFAULT_PROM_PORT = 5557  # RocketMQ 5's default for metricsPromExporterPort
# The broker reads the ConsumeQueues this often besides each scrape (broker_meters.BrokerMeters.read_queues):
# a scrape then reads a few seconds' sends at most, and a queue's fixed cost a read (bench/metrics_scan.py
# measures it) is not paid every second on a broker with thousands of queues
QUEUE_READ_EVERY_S = 5
_SUPPORTED = ("DISABLE", "PROM")
# RocketMQ's other MetricsExporterType values: accepted names there, but we have no such exporter.
_NOT_HERE = ("OTLP_GRPC", "LOG")


def _check_exporter_type(value: Any) -> Any:
    if not isinstance(value, str) or value in _SUPPORTED:
        return value  # the Literal check says what is wrong with a non-string
    if value in _NOT_HERE:
        raise ValueError(f"{value} is a RocketMQ exporter this server does not have; use PROM (a /metrics endpoint)")
    raise ValueError(f"unknown exporter type {value!r}: DISABLE (the default) or PROM")


# A Literal (the operator's key table reads the accepted words from it), checked first for a clearer message.
ExporterType = Annotated[Literal["DISABLE", "PROM"], BeforeValidator(_check_exporter_type)]
# Empty: the server's own listen address (bindAddress); RocketMQ's broker uses brokerIP1 (docs/metrics.md).
PromHost = Annotated[str, Field(max_length=255)]
# 0 asks the kernel for a free port (tests); the bound one is then in MetricsExporter.port.
PromPort = Annotated[int, Field(ge=0, le=65535)]


class _HasMetricsKeys(Protocol):
    @property
    def metrics_exporter_type(self) -> str: ...
    @property
    def metrics_prom_exporter_host(self) -> str: ...
    @property
    def metrics_prom_exporter_port(self) -> int: ...
    @property
    def bind_address(self) -> str: ...


@dataclass(frozen=True, slots=True)
class MetricsSettings:
    enabled: bool
    host: str
    port: int

    @classmethod
    def of(cls, config: _HasMetricsKeys) -> MetricsSettings:
        host = config.metrics_prom_exporter_host.strip() or config.bind_address
        return cls(config.metrics_exporter_type == "PROM", host, config.metrics_prom_exporter_port)
