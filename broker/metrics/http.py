"""The `/metrics` endpoint: a minimal HTTP/1.1 server on the event loop that answers a scrape with
prometheus-client's exposition of one registry (text format, or OpenMetrics when the scraper asks).

On the loop rather than prometheus-client's threaded server: a scrape reads the broker's dicts and store
offsets at one moment between two requests, with no lock and no thread fighting the loop for the GIL;
under send load it waits for at most the rest of one loop turn (bench/metrics.py measures it).
It serves GET and HEAD of /metrics, keeps connections alive as Prometheus does, and answers anything
else with a 4xx and nothing more.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import CollectorRegistry

__all__ = ["MetricsEndpoint", "MetricsPortError"]

log = logging.getLogger(__name__)

PATH = b"/metrics"
MAX_HEAD = 16 * 1024  # a scrape's request head is a few hundred bytes
IDLE_TIMEOUT = 120.0  # Prometheus scrapes every 15-60 s over one kept-alive connection
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 431: "Too Large"}
_REASONS[500] = "Internal Server Error"


class MetricsPortError(OSError):
    """The metrics endpoint cannot listen (port in use, bad host): the start fails naming the key."""


class _Scrape(asyncio.Protocol):
    def __init__(self, render: Callable[[str], tuple[bytes, str]]) -> None:
        self._render = render
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None
        self._idle: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's transports are not asyncio.Transport
        self._touch()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._idle is not None:
            self._idle.cancel()
        self._transport = None

    def _touch(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
        transport = self._transport
        if transport is not None:
            self._idle = asyncio.get_running_loop().call_later(IDLE_TIMEOUT, transport.close)

    def data_received(self, data: bytes) -> None:
        self._touch()
        buffer = self._buffer
        buffer += data
        while self._transport is not None and not self._transport.is_closing():
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(buffer) > MAX_HEAD:
                    self._reply(431, b"request head too large\n", "text/plain", close=True)
                return
            head = bytes(buffer[:end])
            del buffer[: end + 4]
            self._answer(head)

    def _answer(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            self._reply(400, b"not an HTTP/1.x request\n", "text/plain", close=True)
            return
        method, target, version = parts
        headers: dict[bytes, bytes] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                self._reply(400, b"malformed header line\n", "text/plain", close=True)
                return
            headers[name.strip().lower()] = value.strip()
        if b"content-length" in headers or b"transfer-encoding" in headers:
            # a scrape has no body; not reading one would desynchronise the connection
            self._reply(400, b"a request body is not expected here\n", "text/plain", close=True)
            return
        connection = headers.get(b"connection", b"").lower()
        close = connection == b"close" or (version == b"HTTP/1.0" and connection != b"keep-alive")
        if method not in (b"GET", b"HEAD"):
            self._reply(405, b"GET /metrics\n", "text/plain", close=close, allow=True)
            return
        if target.split(b"?", 1)[0] != PATH:
            self._reply(404, b"metrics are at /metrics\n", "text/plain", close=close)
            return
        try:
            body, content_type = self._render(headers.get(b"accept", b"").decode("latin-1"))
        except Exception:
            log.exception("rendering /metrics failed")
            self._reply(500, b"rendering the metrics failed; see the server's log\n", "text/plain", close=close)
            return
        self._reply(200, body, content_type, close=close, head_only=method == b"HEAD")

    def _reply(
        self,
        status: int,
        body: bytes,
        content_type: str,
        *,
        close: bool,
        head_only: bool = False,
        allow: bool = False,
    ) -> None:
        transport = self._transport
        if transport is None:
            return
        head = [
            f"HTTP/1.1 {status} {_REASONS[status]}",
            f"Content-Type: {content_type}",
            f"Content-Length: {len(body)}",
        ]
        if allow:
            head.append("Allow: GET, HEAD")
        if close:
            head.append("Connection: close")
        transport.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (b"" if head_only else body))
        if close:
            transport.close()


class MetricsEndpoint:
    """Serves one registry at http://host:port/metrics until `close()`."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int, *, key: str = "metricsPromExporterPort"):
        self.registry = registry
        self.host = host
        self.port = port
        self._key = key
        self._server: asyncio.Server | None = None

    def render(self, accept: str = "") -> tuple[bytes, str]:
        """The exposition and its content type, as prometheus-client encodes it for this Accept header."""
        encoder, content_type = choose_encoder(accept)
        return encoder(self.registry), content_type

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            self._server = await loop.create_server(
                lambda: _Scrape(self.render), self.host, self.port, reuse_address=True
            )
        except OSError as exc:
            error = MetricsPortError(
                f"{self._key}={self.port}: cannot serve /metrics on {self.host}:{self.port}: "
                f"{exc.strerror or exc} (set {self._key} to a free port, or metricsExporterType=DISABLE)"
            )
            error.errno = exc.errno
            raise error from None
        sockets = self._server.sockets or ()
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        log.info("metrics endpoint listening on http://%s:%d%s", self.host, self.port, PATH.decode())

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
