"""Client side of the remoting protocol: `connect()` for one connection, `RemotingClient` for a pool.

The SDK (producer, consumers, admin), the broker's NameServer registration and the slave's HA sync
call these. `RemotingClient` keeps one connection per address (as RocketMQ's NettyRemotingClient
does), creates it on first use, forgets it when it closes, and answers requests the server sends us
(NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE...) through its dispatcher. With a `signer` (ACL
credentials, broker.protocol.signature) it signs every request it sends, as Java's AclClientRPCHook does.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import ssl
from collections.abc import Callable

from broker.protocol.command import RemotingCommand
from broker.transport.connection import ConnectionConfig, RemotingConnection
from broker.transport.dispatcher import Dispatcher, Handler
from broker.transport.errors import CloseReason, ConnectError, ConnectionClosedError

__all__ = ["DEFAULT_CONNECT_TIMEOUT", "RemotingClient", "connect", "parse_addr"]

log = logging.getLogger(__name__)

# RocketMQ's connectTimeoutMillis.
DEFAULT_CONNECT_TIMEOUT = 3.0


def parse_addr(addr: str | tuple[str, int]) -> tuple[str, int]:
    """`"host:port"` (the form brokers and NameServers are addressed by) -> (host, port)."""
    if isinstance(addr, tuple):
        return addr
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"address {addr!r} is not host:port")
    return host.strip("[]") or "127.0.0.1", int(port)


async def connect(
    addr: str | tuple[str, int],
    *,
    dispatcher: Dispatcher | None = None,
    config: ConnectionConfig | None = None,
    timeout: float = DEFAULT_CONNECT_TIMEOUT,
    tls: ssl.SSLContext | None = None,
) -> RemotingConnection:
    """Open one connection, over TLS with `tls` (the host is the name the certificate must carry when the context
    checks host names). `dispatcher` answers requests the server sends to us."""
    host, port = parse_addr(addr)
    loop = asyncio.get_running_loop()
    dispatcher = dispatcher or Dispatcher()
    try:
        _transport, conn = await asyncio.wait_for(
            loop.create_connection(lambda: RemotingConnection(dispatcher, config), host, port, ssl=tls), timeout
        )
    except TimeoutError:
        raise ConnectError(f"connect to {host}:{port} timed out after {timeout:.1f}s") from None
    except ssl.SSLCertVerificationError as exc:
        raise ConnectError(f"TLS to {host}:{port}: the server's certificate is refused: {exc.verify_message}") from exc
    except (ssl.SSLError, ConnectionError) as exc:
        if tls is None:
            raise ConnectError(f"connect to {host}:{port} failed: {exc.strerror or exc}") from exc
        raise ConnectError(
            f"TLS handshake with {host}:{port} failed: {exc} (does the server accept TLS? tls.server.mode=disabled "
            "refuses it)"
        ) from exc
    except OSError as exc:
        raise ConnectError(f"connect to {host}:{port} failed: {exc.strerror or exc}") from exc
    return conn


class RemotingClient:
    """A pool with one connection per address; requests go to `addr` and reconnect when needed."""

    def __init__(
        self,
        *,
        dispatcher: Dispatcher | None = None,
        config: ConnectionConfig | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        signer: Callable[[RemotingCommand], None] | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.dispatcher = dispatcher or Dispatcher()
        # Signs every request sent through this pool (ACL: broker.protocol.signature.Credentials), or None
        self.signer = signer
        self.config = config or ConnectionConfig()
        self.connect_timeout = connect_timeout
        self.tls = tls  # every connection of the pool over TLS with this context (broker.transport.tls)
        self._connections: dict[str, RemotingConnection] = {}
        self._connecting: dict[str, asyncio.Future[RemotingConnection]] = {}
        self._closed = False
        self._close_listeners: list[Callable[[str], None]] = []

    def add_close_listener(self, listener: Callable[[str], None]) -> None:
        """`listener(addr)` runs when a pooled connection to `addr` ends, unless the whole client is closing."""
        self._close_listeners.append(listener)

    def register(self, code: int, handler: Handler) -> None:
        """Handle a request code the server sends to clients."""
        self.dispatcher.register(code, handler)

    async def get_connection(self, addr: str) -> RemotingConnection:
        conn = self._connections.get(addr)
        if conn is not None and not conn.is_closing:
            return conn
        if self._closed:
            raise ConnectionClosedError("client is closed")
        waiting = self._connecting.get(addr)
        if waiting is not None:
            # Another caller is connecting to the same address: share its result.
            return await asyncio.shield(waiting)
        future: asyncio.Future[RemotingConnection] = asyncio.get_running_loop().create_future()
        self._connecting[addr] = future
        try:
            conn = await connect(
                addr, dispatcher=self.dispatcher, config=self.config, timeout=self.connect_timeout, tls=self.tls
            )
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: nobody else may be waiting
            raise
        finally:
            self._connecting.pop(addr, None)
        self._connections[addr] = conn
        conn.closed.add_done_callback(functools.partial(self._forget_closed, addr, conn))
        future.set_result(conn)
        return conn

    def _forget_closed(self, addr: str, conn: RemotingConnection, _closed: asyncio.Future[CloseReason]) -> None:
        if self._connections.get(addr) is conn:
            del self._connections[addr]
        if self._closed:
            return
        for listener in self._close_listeners:
            try:
                listener(addr)
            except Exception:
                log.exception("close listener failed for %s", addr)

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        conn = await self.get_connection(addr)
        if self.signer is not None:
            self.signer(cmd)
        return await conn.invoke(cmd, timeout)

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        conn = await self.get_connection(addr)
        if self.signer is not None:
            self.signer(cmd)
        await conn.invoke_oneway(cmd)

    def close_connection(self, addr: str, reason: CloseReason = CloseReason.LOCAL_CLOSE) -> None:
        conn = self._connections.pop(addr, None)
        if conn is not None:
            conn.close(reason)

    async def close(self) -> None:
        """Close every connection; their pending requests fail with ConnectionClosedError."""
        self._closed = True
        conns = list(self._connections.values())
        self._connections.clear()
        for conn in conns:
            conn.close(CloseReason.LOCAL_CLOSE)
        if conns:
            await asyncio.wait([conn.closed for conn in conns], timeout=2.0)
        for conn in conns:
            if not conn.closed.done():
                conn.abort(CloseReason.LOCAL_CLOSE)
