"""Listener: one port for TLS and plaintext, as RocketMQ's NettyRemotingServer serves it.

`RemotingServer` (the NameServer's and the broker's remoting ports) and the broker's HA server (broker.ha.master)
listen through this instead of `loop.create_server`. Each accepted socket's first byte is peeked (MSG_PEEK: it
stays in the kernel's buffer) before any transport owns the socket: 0x16 (a TLS handshake record) goes to
`loop.connect_accepted_socket(..., ssl=context)`, refused when the mode is `disabled`; anything else is
plaintext, refused when the mode is `enforcing` (a remoting peer first gets one error response saying why).
`loop.start_tls` cannot serve here: it upgrades a transport that has already read the first bytes, and the
handshake would lose them. The plaintext path costs one readiness wait and one peek per connection and
nothing per request: the transport, the protocol and every read after the first are what they were.

Bounds against hostile peers: a connection that sends nothing is closed after `first_byte_timeout` (the
server's idle timeout, as before); at most `ServerTls.max_handshakes` handshakes run at once (more are closed at
once) and each must finish within `ServerTls.handshake_timeout`; a failed handshake (garbage after 0x16, an
expired or untrusted client certificate) closes that connection only, with a rate-limited log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Callable
from typing import Any

from broker.log_limit import LimitedLog
from broker.protocol.codes import ResponseCode
from broker.protocol.command import decode_frame, encode
from broker.transport.tls import TLS_RECORD_HANDSHAKE, ServerTls

__all__ = ["TLS_REQUIRED_REMARK", "Listener"]

log = logging.getLogger(__name__)

TLS_REQUIRED_REMARK = "this server accepts TLS connections only (tls.server.mode=enforcing): connect with TLS"
# A refused plaintext peer gets its answer within this, from a header of at most this many bytes.
_REFUSAL_TIMEOUT = 5.0
_REFUSAL_MAX_HEADER = 64 * 1024


class Listener:
    """Accepts on `host:port` and hands each connection, over TLS or not, to `protocol_factory`."""

    def __init__(
        self,
        protocol_factory: Callable[[], asyncio.Protocol],
        host: str,
        port: int,
        *,
        tls: ServerTls | None = None,
        backlog: int = 1024,
        first_byte_timeout: float | None = None,
        remoting: bool = True,
        name: str = "server",
        log_limit: LimitedLog | None = None,
    ) -> None:
        self.protocol_factory = protocol_factory
        self.host = host
        self.port = port
        self.tls = tls
        self.mode = tls.mode if tls is not None else "disabled"
        self.backlog = backlog
        self.first_byte_timeout = first_byte_timeout
        self.remoting = remoting  # refuse plaintext with a remoting error response (the HA port just closes)
        self.name = name
        self.limited = log_limit or LimitedLog(log)
        self.sockets: list[socket.socket] = []
        self.handshaking = 0
        self.refused = 0
        self._accepting: list[asyncio.Task[None]] = []
        self._pending: set[asyncio.Task[None]] = set()
        self._closed = False

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.sockets = _bind(self.host, self.port, self.backlog)
        self.port = self.sockets[0].getsockname()[1]
        self._accepting = [loop.create_task(self._accept(sock), name=f"accept-{self.name}") for sock in self.sockets]

    def close(self) -> None:
        """Stop accepting; connections still being peeked at or shaking hands are dropped."""
        self._closed = True
        for task in self._accepting:
            task.cancel()
        for task in list(self._pending):
            task.cancel()
        for sock in self.sockets:
            sock.close()

    async def wait_closed(self) -> None:
        tasks = [*self._accepting, *self._pending]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # ------------------------------------------------------------------ accepting

    async def _accept(self, listening: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while not self._closed:
            try:
                sock, _addr = await loop.sock_accept(listening)
            except asyncio.CancelledError:
                raise
            except OSError as exc:  # EMFILE and friends: wait instead of spinning
                if self._closed:
                    return
                self.limited.error("accept", "%s: accept failed: %s", self.name, exc)
                await asyncio.sleep(0.1)
                continue
            sock.setblocking(False)
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = loop.create_task(self._serve(sock))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def _serve(self, sock: socket.socket) -> None:
        owned = False  # once a transport has the socket, it closes it
        try:
            first = await self._first_byte(sock)
            if first is None:
                return
            if first == TLS_RECORD_HANDSHAKE:
                owned = await self._serve_tls(sock)
            elif self.mode == "enforcing":
                owned = await self._refuse_plaintext(sock)
            else:
                loop = asyncio.get_running_loop()
                await loop.connect_accepted_socket(self.protocol_factory, sock)
                owned = True
        except asyncio.CancelledError:
            pass
        except OSError as exc:
            self.limited.info("accept-error", "%s: connection dropped before it started: %s", self.name, exc)
        finally:
            if not owned:
                sock.close()

    async def _first_byte(self, sock: socket.socket) -> int | None:
        """The first byte the peer sent, left unread; None when it closed or stayed silent too long."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[int | None] = loop.create_future()
        fd = sock.fileno()

        def readable() -> None:
            if waiter.done():
                return
            try:
                data = sock.recv(1, socket.MSG_PEEK)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                waiter.set_exception(exc)
                return
            waiter.set_result(data[0] if data else None)

        loop.add_reader(fd, readable)
        try:
            return await asyncio.wait_for(waiter, self.first_byte_timeout)
        except TimeoutError:
            self.limited.info(
                "idle", "%s: closing connection from %s: it sent nothing for %.1fs", self.name, _peer(sock),
                self.first_byte_timeout or 0.0,
            )  # fmt: skip
            return None
        finally:
            loop.remove_reader(fd)

    async def _serve_tls(self, sock: socket.socket) -> bool:
        peer = _peer(sock)
        tls = self.tls
        if self.mode == "disabled" or tls is None:
            self.refused += 1
            self.limited.warning(
                "tls-disabled", "%s: refused a TLS connection from %s: tls.server.mode is disabled", self.name, peer
            )
            return False
        context = tls.context()
        if context is None:
            self.refused += 1
            return False
        if self.handshaking >= tls.max_handshakes:
            self.refused += 1
            self.limited.warning(
                "tls-busy", "%s: refused a TLS connection from %s: %d handshakes already in progress "
                "(tls.server.maxHandshakes)", self.name, peer, self.handshaking,
            )  # fmt: skip
            return False
        loop = asyncio.get_running_loop()
        self.handshaking += 1
        try:
            await loop.connect_accepted_socket(
                self.protocol_factory, sock, ssl=context, ssl_handshake_timeout=tls.handshake_timeout
            )
        except (ssl.SSLError, ConnectionError, TimeoutError) as exc:
            self.limited.warning("tls-handshake", "%s: TLS handshake with %s failed: %s", self.name, peer, exc)
        finally:
            self.handshaking -= 1
        return True  # the transport (or its failed handshake) closed the socket

    async def _refuse_plaintext(self, sock: socket.socket) -> bool:
        self.refused += 1
        peer = _peer(sock)
        self.limited.warning(
            "tls-required", "%s: refused a plaintext connection from %s: tls.server.mode is enforcing", self.name, peer
        )
        if not self.remoting:
            return False
        loop = asyncio.get_running_loop()
        refusal = _Refusal()
        await loop.connect_accepted_socket(lambda: refusal, sock)
        loop.call_later(_REFUSAL_TIMEOUT, refusal.give_up)
        return True


class _Refusal(asyncio.Protocol):
    """A plaintext remoting peer of an enforcing server: answer its first request with an error saying TLS is
    required (a Java or Python client shows it instead of a bare closed connection), then close."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._buf = bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's TCPTransport is no asyncio.Transport

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        if len(buf) < 8:
            return
        header_length = int.from_bytes(buf[4:8], "big") & 0xFFFFFF
        if header_length > _REFUSAL_MAX_HEADER:
            self.give_up()
            return
        if len(buf) < 8 + header_length:
            return
        try:
            request = decode_frame(bytes(buf[4 : 8 + header_length]))
            if self.transport is not None and not request.is_oneway:
                self.transport.write(encode(request.response(ResponseCode.SYSTEM_ERROR, TLS_REQUIRED_REMARK)))
        except Exception:  # not a remoting frame: nothing to answer
            pass
        self.give_up()

    def give_up(self) -> None:
        if self.transport is not None:
            self.transport.close()


def _bind(host: str, port: int, backlog: int) -> list[socket.socket]:
    """Listening sockets as loop.create_server makes them: every address of `host` ('' = all), SO_REUSEADDR."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    seen: set[Any] = set()
    try:
        for family, kind, proto, _name, addr in infos:
            if (family, addr) in seen:
                continue
            seen.add((family, addr))
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if port and not addr[1]:
                addr = (addr[0], port, *addr[2:])
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(addr)
            except OSError as exc:
                raise OSError(
                    exc.errno, f"error while attempting to bind on address {addr!r}: {exc.strerror}"
                ) from None
            if not port:
                port = sock.getsockname()[1]  # every address on the same free port, as create_server does not
            sock.listen(backlog)
            sock.setblocking(False)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _peer(sock: socket.socket) -> str:
    try:
        addr = sock.getpeername()
    except OSError:
        return "?"
    return f"{addr[0]}:{addr[1]}"
