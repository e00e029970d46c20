"""rocketmq_rpc_latency: per request code and response code, the time from handing a request to its
processor to having its answer, in milliseconds (RocketMQ's unit and buckets).

`instrument(dispatcher, meter)` wraps every registered handler once, after the broker or NameServer has
registered them all; the connection's hot loop then calls the wrapper instead. A synchronous handler is
timed around its call; a coroutine handler from its start to its answer. A handler that returns None
answers later itself (a put waiting for the group commit or the slave, a held pull): the send path times
its own late answers with `observe_late`; a held pull is observed when it is held (docs/metrics.md).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from broker.metrics.histogram import RPC_LATENCY_BUCKETS_MS, Buckets, Cell
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.transport.dispatcher import Dispatcher, Route

if TYPE_CHECKING:
    from broker.transport.connection import RemotingConnection

__all__ = ["RpcMeter", "instrument", "request_code_name", "response_code_name"]

_perf = time.perf_counter
# What a send's reply frame (bytes, broker/server/processors/send.py) starts with when its code is 0: the
# 4-byte length, the 4-byte header length, then the JSON header.
_OK_FRAME_HEAD = b'{"code":0,'
_CODE_AT = 8
_BUCKETS = Buckets(RPC_LATENCY_BUCKETS_MS)
_FIRST_BOUND_S = RPC_LATENCY_BUCKETS_MS[0] / 1000
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
    end = frame.index(b",", start)
    return int(frame[start:end])


class RpcMeter:
    """Cells keyed by (request code, response code); read by the collectors at scrape time."""

    __slots__ = ("cells",)

    def __init__(self) -> None:
        self.cells: dict[tuple[int, int], Cell] = {}

    def cell(self, code: int, response_code: int) -> Cell:
        key = (code, response_code)
        cell = self.cells.get(key)
        if cell is None:
            cell = self.cells[key] = _BUCKETS.cell()
        return cell

    def observe(self, code: int, response: RemotingCommand | bytes | None, seconds: float) -> None:
        if response is None:
            return
        rc = _frame_code(response) if type(response) is bytes else response.code  # type: ignore[union-attr]
        cell = self.cell(code, rc)
        # the common case (under a millisecond) without bisect; cell[0] is the le=1 ms bucket
        if seconds <= _FIRST_BOUND_S:
            cell[0] += 1
            cell[-1] += seconds * 1000
        else:
            _BUCKETS.observe(cell, seconds * 1000)

    def observe_late(self, code: int, response: RemotingCommand | bytes, started: float) -> None:
        """A request answered outside its handler's return (`started`: time.perf_counter() at its start)."""
        self.observe(code, response, _perf() - started)

    def failed(self, code: int, seconds: float) -> None:
        """A handler raised: the connection answers SYSTEM_ERROR (broker.transport.connection)."""
        _BUCKETS.observe(self.cell(code, ResponseCode.SYSTEM_ERROR), seconds * 1000)

    def publish(self) -> list[tuple[str, str, list[tuple[str, float]], float]]:
        """(request code name, response code name, cumulative buckets, sum in ms) per series."""
        out = []
        for (code, rc), cell in sorted(self.cells.items()):
            buckets, total = _BUCKETS.publish(cell)
            out.append((request_code_name(code), response_code_name(rc), buckets, total))
        return out


def _timed_sync(code: int, call: Callable[..., Any], meter: RpcMeter) -> Callable[..., Any]:
    cells = meter.cells
    ok_key = (code, 0)
    slow = _BUCKETS.observe

    def timed(conn: RemotingConnection, cmd: RemotingCommand) -> Any:
        # the hot path of every synchronous request (every send): written out, no calls but the handler's
        started = _perf()
        try:
            response = call(conn, cmd)
        except Exception:
            meter.failed(code, _perf() - started)
            raise
        elapsed = _perf() - started
        if type(response) is bytes and response.startswith(_OK_FRAME_HEAD, _CODE_AT):
            cell = cells.get(ok_key)
            if cell is None:
                cell = meter.cell(code, 0)
        elif response is None:
            return None  # answered later: the send path observes it then (observe_late)
        else:
            rc = _frame_code(response) if type(response) is bytes else response.code
            cell = meter.cell(code, rc)
        if elapsed <= _FIRST_BOUND_S:  # cell[0]: the le=1 ms bucket
            cell[0] += 1
            cell[-1] += elapsed * 1000
        else:
            slow(cell, elapsed * 1000)
        return response

    return timed


def _timed_async(code: int, call: Callable[..., Awaitable[Any]], meter: RpcMeter) -> Callable[..., Awaitable[Any]]:
    async def timed(conn: RemotingConnection, cmd: RemotingCommand) -> Any:
        started = _perf()
        try:
            response = await call(conn, cmd)
        except Exception:
            meter.failed(code, _perf() - started)
            raise
        meter.observe(code, response, _perf() - started)
        return response

    return timed


def instrument(dispatcher: Dispatcher, meter: RpcMeter) -> None:
    """Replace every registered route by a timed one (idempotent per dispatcher: call it once)."""
    routes = dispatcher.routes
    for code, route in list(routes.items()):
        if route.is_async:
            routes[code] = Route(_timed_async(code, route.call, meter), True)
        else:
            routes[code] = Route(_timed_sync(code, route.call, meter), False)
