"""Processor registry: maps a request code to the handler that answers it.

Used by `RemotingServer` (broker and NameServer processors) and by client connections (requests the
broker sends to clients). A handler is a callable, or an object with a `handle` method, taking
`(connection, command)` and returning the response `RemotingCommand` or `None` (no answer); a hot
handler may instead return the response already encoded as one frame (`bytes`, built for that request's
opaque), which is written as is (the send path's reply template, broker/server/processors/send.py). Plain
functions run inline in `data_received` (the fast path: no task per request); coroutine functions
run as one task per request. Registration decides once which kind a handler is.

A guard (`set_guard`: the ACL check of broker/auth) runs before every registered handler: each route is
wrapped once, so a dispatcher without a guard costs nothing per request, and a refusal the guard returns is
the response (the handler does not run). The default route (codes nobody registered) is not guarded.

The dispatcher sees the connection a request came on only as `Peer`, what the guard reads of it: it hands
the connection to the handler untouched, so it names no connection class (the connection module imports
this one).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple, Protocol, TypeAlias

from broker.protocol.command import RemotingCommand

__all__ = [
    "AnswerMeter",
    "AsyncHandler",
    "Dispatcher",
    "Guard",
    "Handler",
    "Peer",
    "Response",
    "Route",
    "SyncHandler",
]

log = logging.getLogger(__name__)


class Peer(Protocol):
    """The connection a request came on, as the dispatcher and its guard see it (`RemotingConnection`
    satisfies it): the guard reads the remote address; handlers get the whole connection."""

    @property
    def peer(self) -> str:
        """The remote address, "host:port"."""
        ...


Response: TypeAlias = RemotingCommand | bytes | None  # bytes: an encoded response frame
SyncHandler: TypeAlias = Callable[[Peer, RemotingCommand], Response]
AsyncHandler: TypeAlias = Callable[[Peer, RemotingCommand], Awaitable[Response]]
Handler: TypeAlias = SyncHandler | AsyncHandler | Any  # Any: an object with a `handle` method
Guard: TypeAlias = Callable[[Peer, RemotingCommand], RemotingCommand | None]


class AnswerMeter(Protocol):
    """Told about the requests synchronous handlers answered (broker/metrics/rpc.py times them): one call
    per write of replies with the batch it answered, nothing per request."""

    def answered(self, requests: list[RemotingCommand], replies: list[bytes], read_ns: int, written_ns: int) -> None:
        """`requests` answered inline by `replies`, the encoded frames about to be written (one each, in
        order, unless a handler also wrote frames of its own on the connection), at time.monotonic_ns()
        `written_ns`; `read_ns`: when their read arrived (a request flow control held back carries its
        `received_at`). Called before the write, so that no frame is kept after it: holding a read's pull
        replies (32 KiB each) until the read's end made the allocator fault in fresh pages for the next."""


class Route(NamedTuple):
    """A resolved handler and whether it must run as a task."""

    call: Callable[..., Any]
    is_async: bool


def _resolve(handler: Handler) -> Route:
    call = getattr(handler, "handle", handler)
    if not callable(call):
        raise TypeError(f"handler {handler!r} is neither callable nor has a handle() method")
    dunder_call = getattr(call, "__call__", None)  # noqa: B004 - an async __call__ makes it a coroutine function
    is_async = inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(dunder_call)
    return Route(call, is_async)


def _guarded(route: Route, guard: Guard | None) -> Route:
    if guard is None:
        return route
    call = route.call
    if route.is_async:

        async def guarded_async(conn: Peer, cmd: RemotingCommand) -> Any:
            refusal = guard(conn, cmd)
            if refusal is not None:
                return refusal
            return await call(conn, cmd)

        return Route(guarded_async, True)

    def guarded(conn: Peer, cmd: RemotingCommand) -> Any:
        refusal = guard(conn, cmd)
        if refusal is not None:
            return refusal
        return call(conn, cmd)

    return Route(guarded, False)


class Dispatcher:
    """Request code -> Route, plus an optional default for codes nobody registered."""

    __slots__ = ("_default", "_guard", "_plain", "_routes", "meter")

    def __init__(self) -> None:
        self._routes: dict[int, Route] = {}
        # the routes as registered; `_routes` holds them wrapped by the guard when there is one
        self._plain: dict[int, Route] = {}
        self._guard: Guard | None = None
        self._default: Route | None = None
        # Set by the metrics (broker/metrics/rpc.py instrument): the connections report answers to it.
        self.meter: AnswerMeter | None = None

    def register(self, code: int, handler: Handler) -> None:
        """Register `handler` for `code`, replacing any earlier one (the broker overrides defaults)."""
        route = _resolve(handler)
        if int(code) in self._routes:
            log.debug("replacing the handler of request code %d", code)
        self._plain[int(code)] = route
        self._routes[int(code)] = _guarded(route, self._guard)

    def register_many(self, codes: list[int] | tuple[int, ...], handler: Handler) -> None:
        route = _resolve(handler)
        guarded = _guarded(route, self._guard)
        for code in codes:
            self._plain[int(code)] = route
            self._routes[int(code)] = guarded

    def set_guard(self, guard: Guard | None) -> None:
        """Run `guard(conn, cmd)` before every registered handler, now and for later registrations; a
        non-None result is answered instead of calling the handler. None removes the guard."""
        self._guard = guard
        wrapped: dict[Route, Route] = {}
        for code, route in self._plain.items():
            if route not in wrapped:
                wrapped[route] = _guarded(route, guard)
            self._routes[code] = wrapped[route]

    @property
    def guard(self) -> Guard | None:
        return self._guard

    def register_default(self, handler: Handler | None) -> None:
        """Handler for every code without its own; without one, such codes get REQUEST_CODE_NOT_SUPPORTED."""
        self._default = _resolve(handler) if handler is not None else None

    def get(self, code: int) -> Route | None:
        return self._routes.get(code, self._default)

    def get_unguarded(self, code: int) -> Route | None:
        """The route of `code` as registered, without the guard (and without the metrics' timing): for an
        in-process caller that checked the request itself (the gRPC endpoint checks each RPC's signature and
        ACL, then runs the broker's processors with requests that carry none)."""
        return self._plain.get(code, self._default)

    @property
    def routes(self) -> dict[int, Route]:
        """Code -> route, read directly by the connection's hot loop (with `default_route` as fallback)."""
        return self._routes

    @property
    def default_route(self) -> Route | None:
        return self._default

    def codes(self) -> list[int]:
        return sorted(self._routes)
