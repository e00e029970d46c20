"""RemotingServer: the listening side of the remoting protocol, shared by the NameServer and the Broker.

The NameServer controller and the broker build one, register their processors by request code, add
open/close listeners (the NameServer drops a broker whose channel closes), `await start()`, and at
exit `await shutdown(grace)`: stop accepting, stop reading, let in-flight handlers finish within the
deadline, cancel the rest, close. Connections idle for `idle_timeout` seconds are closed.

Against hostile or broken clients: a connection whose frame has not completed within
`frame_timeout` seconds of its first byte is closed (a frame trickling one byte at a time keeps the idle
timer from ever firing), and every connection's large incomplete frames share one `FrameBudget` of
`incomplete_frames_limit` bytes (broker/transport/budget.py).

TLS (`tls`, a `ServerTls`): the port serves TLS and plaintext by the mode, through `Listener`
(broker/transport/listener.py), which peeks each connection's first byte; a connection that sends nothing is
closed after `idle_timeout`, as one that stops sending is.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable

from broker.log_limit import LimitedLog
from broker.protocol.command import DEFAULT_MAX_FRAME_LENGTH, RemotingCommand
from broker.transport.budget import DEFAULT_INCOMPLETE_FRAMES_LIMIT, FrameBudget
from broker.transport.connection import ConnectionConfig, RemotingConnection
from broker.transport.connection import log as connection_log
from broker.transport.dispatcher import Dispatcher, Handler
from broker.transport.errors import CloseReason
from broker.transport.listener import Listener
from broker.transport.tls import ServerTls

__all__ = ["DEFAULT_FRAME_TIMEOUT", "DEFAULT_IDLE_TIMEOUT", "RemotingServer"]

log = logging.getLogger(__name__)

# RocketMQ's serverChannelMaxIdleTimeSeconds.
DEFAULT_IDLE_TIMEOUT = 120.0
# Ours: a 16 MiB frame at 1 MiB/s still fits; a slow-loris frame is gone well before the idle timeout.
DEFAULT_FRAME_TIMEOUT = 30.0

OpenListener = Callable[[RemotingConnection], None]
CloseListener = Callable[[RemotingConnection, CloseReason], None]


class RemotingServer:
    """Accepts connections and dispatches their requests to registered processors."""

    def __init__(
        self,
        host: str,
        port: int,
        dispatcher: Dispatcher | None = None,
        *,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        config: ConnectionConfig | None = None,
        backlog: int = 1024,
        frame_timeout: float | None = DEFAULT_FRAME_TIMEOUT,
        incomplete_frames_limit: int | None = DEFAULT_INCOMPLETE_FRAMES_LIMIT,
        tls: ServerTls | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.dispatcher = dispatcher or Dispatcher()
        base = config or ConnectionConfig()
        if max_frame_length != base.max_frame_length:
            base = dataclasses.replace(base, max_frame_length=max_frame_length)
        self.config = base
        self.idle_timeout = idle_timeout
        self.frame_timeout = frame_timeout
        self.frame_budget = FrameBudget(incomplete_frames_limit) if incomplete_frames_limit else None
        # Per server, so that the NameServer's and the broker's floods are counted apart.
        self.limited_log = LimitedLog(connection_log)
        self.connections: set[RemotingConnection] = set()
        self._backlog = backlog
        self.tls = tls
        self._server: asyncio.Server | None = None
        self._listener: Listener | None = None
        self._idle_task: asyncio.Task[None] | None = None
        self._open_listeners: list[OpenListener] = []
        self._close_listeners: list[CloseListener] = []
        self._shutting_down = False

    # ------------------------------------------------------------------ registration

    def register(self, code: int, handler: Handler) -> None:
        """Register a processor for one request code (sync functions run inline, coroutines as tasks)."""
        self.dispatcher.register(code, handler)

    def register_default(self, handler: Handler | None) -> None:
        self.dispatcher.register_default(handler)

    def add_open_listener(self, listener: OpenListener) -> None:
        self._open_listeners.append(listener)

    def add_close_listener(self, listener: CloseListener) -> None:
        """`listener(conn, reason)` runs once when any connection ends, for whatever reason."""
        self._close_listeners.append(listener)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        if self.tls is None:  # no TLS at all: every connection is a remoting one from its accept on
            self._server = await loop.create_server(
                self._create_protocol, self.host, self.port, backlog=self._backlog, reuse_address=True
            )
            self.port = self._server.sockets[0].getsockname()[1]
        else:
            self._listener = Listener(
                self._create_protocol,
                self.host,
                self.port,
                tls=self.tls,
                backlog=self._backlog,
                first_byte_timeout=self.idle_timeout,
                name=f"remoting server :{self.port}",
                log_limit=self.limited_log,
            )
            await self._listener.start()
            self.port = self._listener.port
            self.tls.start()
        if self.idle_timeout or self.frame_timeout:
            self._idle_task = loop.create_task(self._close_stale_connections())
        log.info(
            "remoting server listening on %s:%d (TLS %s)", self.host, self.port, self.tls.mode if self.tls else "off"
        )

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def shutdown(self, grace: float = 5.0) -> None:
        """Stop accepting, let in-flight requests finish within `grace` seconds, then close everything."""
        if self._shutting_down:
            return
        self._shutting_down = True
        if self._server is not None:
            self._server.close()
        if self._listener is not None:
            self._listener.close()
        if self._idle_task is not None:
            self._idle_task.cancel()
        conns = list(self.connections)
        for conn in conns:
            conn.stop_reading()
        busy = [asyncio.ensure_future(conn.wait_handlers()) for conn in conns if conn.in_flight_handlers]
        if busy:
            _done, not_done = await asyncio.wait(busy, timeout=grace)
            for waiter in not_done:
                waiter.cancel()
            if not_done:
                log.warning("shutdown: cancelling requests still running after %.1fs", grace)
                for conn in conns:
                    conn.cancel_handlers()
        for conn in conns:
            conn.close(CloseReason.SHUTDOWN)
        # transport.close() flushes buffered replies first; a peer that does not read gets aborted.
        closing = [conn.closed for conn in conns if not conn.closed.done()]
        if closing:
            await asyncio.wait(closing, timeout=max(0.5, min(grace, 2.0)))
            for conn in conns:
                if not conn.closed.done():
                    conn.abort(CloseReason.SHUTDOWN)
        if self._server is not None:
            await self._server.wait_closed()
        if self._listener is not None:
            await self._listener.wait_closed()
        if self.tls is not None:
            await self.tls.close()
        log.info("remoting server %s:%d stopped", self.host, self.port)

    # ------------------------------------------------------------------ sending to connected peers

    async def invoke(self, conn: RemotingConnection, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send a request to a connected client and wait for its reply (e.g. GET_CONSUMER_RUNNING_INFO)."""
        return await conn.invoke(cmd, timeout)

    async def invoke_oneway(self, conn: RemotingConnection, cmd: RemotingCommand) -> None:
        """Send a one-way request to a client (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE)."""
        await conn.invoke_oneway(cmd)

    # ------------------------------------------------------------------ internals

    def _create_protocol(self) -> RemotingConnection:
        return RemotingConnection(
            self.dispatcher,
            self.config,
            on_open=self._opened,
            on_close=self._closed,
            frame_budget=self.frame_budget,
            log_limit=self.limited_log,
        )

    def _opened(self, conn: RemotingConnection) -> None:
        if self._shutting_down:
            conn.abort(CloseReason.SHUTDOWN)
            return
        self.connections.add(conn)
        log.debug("accepted connection from %s", conn.peer)
        for listener in self._open_listeners:
            try:
                listener(conn)
            except Exception:
                log.exception("open listener failed for %s", conn.peer)

    def _closed(self, conn: RemotingConnection, reason: CloseReason) -> None:
        if conn not in self.connections:
            return
        self.connections.discard(conn)
        for listener in self._close_listeners:
            try:
                listener(conn, reason)
            except Exception:
                log.exception("close listener failed for %s", conn.peer)

    async def _close_stale_connections(self) -> None:
        loop = asyncio.get_running_loop()
        timeouts = [t for t in (self.idle_timeout, self.frame_timeout) if t]
        interval = min(1.0, *(t / 4 for t in timeouts))
        while True:
            await asyncio.sleep(interval)
            now = loop.time()
            for conn in list(self.connections):
                self._check_stale(conn, now)

    def _check_stale(self, conn: RemotingConnection, now: float) -> None:
        frame_timeout, idle_timeout = self.frame_timeout, self.idle_timeout
        started = conn.frame_started_at
        if conn.is_closing:
            return
        if frame_timeout and started and now - started > frame_timeout:
            self.limited_log.warning(
                "frame-timeout",
                "closing connection from %s: its frame is not complete %.1f s after its first byte "
                "(%d bytes received)",
                conn.peer, now - started, conn.incomplete_frame_bytes,
            )  # fmt: skip
            conn.abort(CloseReason.FRAME_TIMEOUT)  # nothing to flush to a peer this slow: drop its bytes now
        elif idle_timeout and not conn.busy and now - conn.last_activity > idle_timeout:
            self.limited_log.info(
                "idle", "closing connection from %s: idle for more than %.1fs", conn.peer, idle_timeout
            )
            conn.close(CloseReason.IDLE)
