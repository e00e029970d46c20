"""Processor registry: maps a request code to the handler that answers it.

Used by `RemotingServer` (broker and NameServer processors) and by client connections (requests the
broker sends to clients). A handler is a callable, or an object with a `handle` method, taking
`(connection, command)` and returning the response `RemotingCommand` or `None` (no answer); a hot
handler may instead return the response already encoded as one frame (`bytes`, built for that request's
opaque), which is written as is (the send path's reply template, broker/server/processors/send.py). Plain
functions run inline in `data_received` (the fast path: no task per request); coroutine functions
run as one task per request. Registration decides once which kind a handler is.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeAlias

from broker.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from broker.transport.connection import RemotingConnection

__all__ = ["AnswerMeter", "AsyncHandler", "Dispatcher", "Handler", "Response", "Route", "SyncHandler"]

log = logging.getLogger(__name__)

Response: TypeAlias = RemotingCommand | bytes | None  # bytes: an encoded response frame
SyncHandler: TypeAlias = Callable[["RemotingConnection", RemotingCommand], Response]
AsyncHandler: TypeAlias = Callable[["RemotingConnection", RemotingCommand], Awaitable[Response]]
Handler: TypeAlias = SyncHandler | AsyncHandler | Any  # Any: an object with a `handle` method


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


class Dispatcher:
    """Request code -> Route, plus an optional default for codes nobody registered."""

    __slots__ = ("_default", "_routes", "meter")

    def __init__(self) -> None:
        self._routes: dict[int, Route] = {}
        self._default: Route | None = None
        # Set by the metrics (broker/metrics/rpc.py instrument): the connections report answers to it.
        self.meter: AnswerMeter | None = None

    def register(self, code: int, handler: Handler) -> None:
        """Register `handler` for `code`, replacing any earlier one (the broker overrides defaults)."""
        route = _resolve(handler)
        if int(code) in self._routes:
            log.debug("replacing the handler of request code %d", code)
        self._routes[int(code)] = route

    def register_many(self, codes: list[int] | tuple[int, ...], handler: Handler) -> None:
        route = _resolve(handler)
        for code in codes:
            self._routes[int(code)] = route

    def register_default(self, handler: Handler | None) -> None:
        """Handler for every code without its own; without one, such codes get REQUEST_CODE_NOT_SUPPORTED."""
        self._default = _resolve(handler) if handler is not None else None

    def get(self, code: int) -> Route | None:
        return self._routes.get(code, self._default)

    @property
    def routes(self) -> dict[int, Route]:
        """Code -> route, read directly by the connection's hot loop (with `default_route` as fallback)."""
        return self._routes

    @property
    def default_route(self) -> Route | None:
        return self._default

    def codes(self) -> list[int]:
        return sorted(self._routes)
