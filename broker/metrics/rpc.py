"""rocketmq_rpc_latency: per request code and response code, milliseconds from the read that brought a
request to its answer (RocketMQ's unit and buckets; RocketMQ counts from the request's arrival too, its
wait in a thread pool's queue included).

`instrument(dispatcher, meter)` wraps every registered handler once, after the broker or NameServer has
registered them all; the connection's hot loop then calls the wrapper instead. A synchronous handler's
answer is timed against `RemotingConnection.read_ns` (the monotonic clock when its read arrived: the time
spent on the requests before it in the same read is its queueing), so the wrapper reads the clock once;
a request that flow control held back is timed from when it was held (`received_at`). A coroutine
handler is timed from its start to its answer. A handler that returns None answers later itself: the
send path observes its late answers with `observe_late`; a long-polled pull is not observed (docs/metrics.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from broker.metrics.histogram import RPC_LATENCY_BUCKETS_MS, Buckets, Cell
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.transport.dispatcher import Dispatcher, Route

if TYPE_CHECKING:
    from broker.transport.connection import RemotingConnection

__all__ = ["RPC_BUCKETS", "RpcMeter", "instrument", "request_code_name", "response_code_name"]

_now_ns = time.monotonic_ns  # the clock of RemotingConnection.read_ns
_NS_PER_S = 1_000_000_000
# What a send's reply frame (bytes, broker/server/processors/send.py) starts with when its code is 0: the
# 4-byte length, the 4-byte header length, then the JSON header.
_OK_FRAME_HEAD = b'{"code":0,'
_CODE_AT = 8
RPC_BUCKETS = Buckets(RPC_LATENCY_BUCKETS_MS, 1_000_000)  # counted in ns, published in ms
_FIRST_BOUND_NS = RPC_BUCKETS.bounds[0]
_REQUEST_NAMES = {int(c): c.name.lower() for c in RequestCode}
_RESPONSE_NAMES = {int(c): c.name.lower() for c in ResponseCode}


def request_code_name(code: int) -> str:
    """RocketMQ's label value: the RequestCode constant's name in lower case (the number when unknown)."""
    return _REQUEST_NAMES.get(code) or str(code)


def response_code_name(code: int) -> str:
    return _RESPONSE_NAMES.get(code) or str(code)


def _frame_code(frame: bytes) -> int:
    """The code of an encoded JSON response frame (the send path's preformatted replies)."""
    if frame.startswith(_OK_FRAME_HEAD, _CODE_AT):
        return 0
    start = _CODE_AT + len(b'{"code":')
    return int(frame[start : frame.index(b",", start)])


def _response_code(response: RemotingCommand | bytes) -> int:
    return _frame_code(response) if type(response) is bytes else response.code  # type: ignore[union-attr]


class RpcMeter:
    """Cells keyed by (request code, response code); read by the collectors at scrape time."""

    __slots__ = ("cells",)

    def __init__(self) -> None:
        self.cells: dict[tuple[int, int], Cell] = {}

    def cell(self, code: int, response_code: int) -> Cell:
        key = (code, response_code)
        cell = self.cells.get(key)
        if cell is None:
            cell = self.cells[key] = RPC_BUCKETS.cell()
        return cell

    def observe(self, code: int, response: RemotingCommand | bytes, elapsed_ns: int) -> None:
        RPC_BUCKETS.observe(self.cell(code, _response_code(response)), elapsed_ns)

    def observe_late(self, code: int, response: RemotingCommand | bytes, started_ns: int) -> None:
        """A request answered outside its handler's return (`started_ns`: its read's `read_ns`)."""
        self.observe(code, response, _now_ns() - started_ns)

    def publish(self) -> list[tuple[str, str, list[tuple[str, float]], float]]:
        """(request code name, response code name, cumulative buckets, sum in ms) per series."""
        out = []
        for (code, rc), cell in sorted(self.cells.items()):
            buckets, total = RPC_BUCKETS.publish(cell)
            out.append((request_code_name(code), response_code_name(rc), buckets, total))
        return out


def _timed_sync(code: int, call: Callable[..., Any], meter: RpcMeter) -> Callable[..., Any]:
    ok: Cell | None = None  # this code's (code, SUCCESS) cell, the one nearly every call counts in

    def timed(conn: RemotingConnection, cmd: RemotingCommand) -> Any:
        # every synchronous request (every send) comes through here: written out, one clock read
        nonlocal ok
        try:
            response = call(conn, cmd)
        except Exception:
            meter.observe(code, cmd.response(ResponseCode.SYSTEM_ERROR), _elapsed_ns(conn, cmd))
            raise
        if response is None:
            return None  # answered later: the send path observes it then (observe_late)
        held = cmd.received_at
        elapsed = _now_ns() - conn.read_ns if not held else _held_ns(held)
        if type(response) is bytes and response.startswith(_OK_FRAME_HEAD, _CODE_AT):
            cell = ok
            if cell is None:
                cell = ok = meter.cell(code, 0)
        else:
            cell = meter.cell(code, _response_code(response))
        if elapsed <= _FIRST_BOUND_NS:
            cell[0] += 1
            cell[-1] += elapsed
        else:
            RPC_BUCKETS.observe(cell, elapsed)
        return response

    return timed


def _held_ns(held: float) -> int:
    """Since flow control held the request back (loop time, RemotingCommand.received_at)."""
    return int((asyncio.get_running_loop().time() - held) * _NS_PER_S)


def _elapsed_ns(conn: RemotingConnection, cmd: RemotingCommand) -> int:
    held = cmd.received_at
    return _now_ns() - conn.read_ns if not held else _held_ns(held)


def _timed_async(code: int, call: Callable[..., Awaitable[Any]], meter: RpcMeter) -> Callable[..., Awaitable[Any]]:
    async def timed(conn: RemotingConnection, cmd: RemotingCommand) -> Any:
        started = _now_ns()
        try:
            response = await call(conn, cmd)
        except Exception:
            meter.observe(code, cmd.response(ResponseCode.SYSTEM_ERROR), _now_ns() - started)
            raise
        if response is not None:
            meter.observe(code, response, _now_ns() - started)
        return response

    return timed


def instrument(dispatcher: Dispatcher, meter: RpcMeter) -> None:
    """Replace every registered route by a timed one (call it once per dispatcher)."""
    routes = dispatcher.routes
    for code, route in list(routes.items()):
        if route.is_async:
            routes[code] = Route(_timed_async(code, route.call, meter), True)
        else:
            routes[code] = Route(_timed_sync(code, route.call, meter), False)
