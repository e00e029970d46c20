"""Prometheus metrics of the broker and the NameServer, named as Apache RocketMQ 5 names them.

Layout: `settings` (the three broker.conf / namesrv.properties keys), `histogram` (bucket counts kept in
plain lists), `rpc` (per request code latency, wrapped around the dispatcher's handlers), `broker_meters`
(what the broker's hot path counts), `broker_collector` / `namesrv_collector` (what a scrape publishes),
`http` (the `/metrics` endpoint on the event loop) and `exporter` (puts them together).

The hot path only adds to integers in dicts; everything else is read when Prometheus scrapes, on the
event loop, so a scrape sees one consistent moment of the broker. docs/metrics.md lists every name.

Only `settings` and `message_types` load with the package: the rest (prometheus_client, numpy for the queue
scan) is imported by the servers when metricsExporterType=PROM, so a server with metrics off never loads them.
"""

from __future__ import annotations

from broker.metrics.settings import DEFAULT_PROM_PORT, ExporterType, MetricsSettings, PromPort

__all__ = ["DEFAULT_PROM_PORT", "ExporterType", "MetricsSettings", "PromPort"]
