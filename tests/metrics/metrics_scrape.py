"""Scraping a /metrics endpoint over real TCP and reading it with prometheus-client's own text parser.

The metrics tests import it as `tests.metrics.metrics_scrape`.
"""

from __future__ import annotations

import asyncio

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["Scrape", "http_get", "scrape"]


async def http_get(port: int, path: str = "/metrics", *, method: str = "GET", headers: str = "") -> tuple[str, bytes]:
    """One request on its own connection: (status line, body)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"{method} {path} HTTP/1.1\r\nHost: test\r\n{headers}Connection: close\r\n\r\n".encode())
        raw = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    return head.split(b"\r\n", 1)[0].decode(), body


class Scrape:
    """Samples of one scrape, looked up by sample name and a subset of labels."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples = [s for family in text_string_to_metric_families(text) for s in family.samples]

    def values(self, name: str, **labels: str) -> list[float]:
        return [
            s.value for s in self.samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
        ]

    def value(self, name: str, **labels: str) -> float:
        """The one sample matching; an AssertionError naming what was found otherwise."""
        found = self.values(name, **labels)
        assert len(found) == 1, f"{name}{labels}: {len(found)} samples in\n{self.text}"
        return found[0]

    def total(self, name: str, **labels: str) -> float:
        return sum(self.values(name, **labels))

    def labels_of(self, name: str) -> list[dict[str, str]]:
        return [s.labels for s in self.samples if s.name == name]


async def scrape(port: int) -> Scrape:
    status, body = await http_get(port)
    assert status == "HTTP/1.1 200 OK", status
    return Scrape(body.decode())
