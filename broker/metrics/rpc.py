"""rocketmq_rpc_latency: per request code and response code, milliseconds from the read that brought a
request to its answer (RocketMQ's unit and buckets; RocketMQ counts from the request's arrival too, its
wait in a thread pool's queue included).

`instrument(dispatcher, meter)` runs once, after the broker or NameServer has registered its handlers.
Synchronous handlers (every send and pull) are not wrapped: at each write the connection's hot loop gives
the meter the requests it answered inline since the last write, with their replies and the clock
(`RpcMeter.answered`, the dispatcher's AnswerMeter). A request is timed from its read's arrival,
`RemotingConnection.read_ns` (the requests before it in the same read are its queueing), to the write of
its reply; a request flow control held back, from when it was held (`received_at`). That is one clock
read per 16 replies, not per request: a wrapper reading the clock per request cost the broker 9-11% of a
send (docs/benchmarks.md). Coroutine handlers are wrapped
and timed from their start to their answer. A handler that returns None answers later itself: the send
path observes its late answers with `observe_late`; a long-polled pull is not observed, nor is a one-way
request (no answer; docs/metrics.md).
"""

from __future__ import annotations

import asyncio
import struct
import time
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Iterable
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, Any

import orjson

from broker.metrics.histogram import RPC_LATENCY_BUCKETS_MS, Buckets, Cell
from broker.protocol.codes import FLAG_RESPONSE, RequestCode, ResponseCode
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
_HEADER_LENGTH = struct.Struct(">i")  # the second word: serialize type << 24 | header length
RPC_BUCKETS = Buckets(RPC_LATENCY_BUCKETS_MS, 1_000_000)  # counted in ns, published in ms
_BOUNDS = RPC_BUCKETS.bounds
_FIRST_CODE_DIGIT = itemgetter(_CODE_AT + len(b'{"code":'))
_code_of = attrgetter("code")
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

    __slots__ = ("cells", "ok_cells")

    def __init__(self) -> None:
        self.cells: dict[tuple[int, int], Cell] = {}
        self.ok_cells: dict[int, Cell] = {}  # request code -> its (code, SUCCESS) cell, the same list

    def cell(self, code: int, response_code: int) -> Cell:
        key = (code, response_code)
        cell = self.cells.get(key)
        if cell is None:
            cell = self.cells[key] = RPC_BUCKETS.cell()
            if response_code == 0:
                self.ok_cells[code] = cell
        return cell

    def observe(self, code: int, response: RemotingCommand | bytes, elapsed_ns: int) -> None:
        RPC_BUCKETS.observe(self.cell(code, _response_code(response)), elapsed_ns)

    def answered(self, requests: list[RemotingCommand], replies: list[bytes], read_ns: int, written_ns: int) -> None:
        """Requests answered inline by `replies`, written at `written_ns`: RemotingConnection._process calls
        this at each write of replies (the AnswerMeter of broker/transport/dispatcher.py).

        A batch of sends or pulls is the common case: one request code, every reply a SUCCESS frame. That
        is checked at C speed (map, no Python code per request) and counted into one cell at once; anything
        else is observed one request at a time by `answered_plainly`, the reference the tests hold the
        fast path equal to (tests/metrics/test_rpc_meter.py). A batch is one read's requests or requests
        flow control held back (each with its `received_at`), never both: the first one tells which."""
        if (
            len(replies) == len(requests)
            and not requests[0].received_at
            # our JSON frames start {"code": at byte 8, so byte 16 is the code's first digit: "0" only for 0
            and bytes(map(_FIRST_CODE_DIGIT, replies)) == b"0" * len(replies)
            and len(set(map(_code_of, requests))) == 1
        ):
            code = requests[0].code
            elapsed = written_ns - read_ns
            cell = self.ok_cells.get(code) or self.cell(code, 0)
            times = len(requests)
            cell[bisect_left(_BOUNDS, elapsed)] += times
            cell[-1] += elapsed * times
        else:
            self.answered_plainly(requests, replies, read_ns, written_ns)

    def answered_plainly(self, requests: list[RemotingCommand], replies: list[bytes], read_ns: int, now: int) -> None:
        """One observation per request, answered at `now`: from its read, or from when flow control held it."""
        if len(replies) == len(requests):
            pairs: Iterable[tuple[RemotingCommand, bytes]] = zip(requests, replies, strict=True)
        else:  # a handler also wrote frames of its own on the connection: pair the replies by opaque
            mine = {}
            for reply in replies:
                header = orjson.loads(reply[_CODE_AT : _CODE_AT + (_HEADER_LENGTH.unpack_from(reply, 4)[0] & 0xFFFFFF)])
                if header.get("flag", 0) & FLAG_RESPONSE:
                    mine[header.get("opaque")] = reply
            pairs = ((cmd, mine[cmd.opaque]) for cmd in requests if cmd.opaque in mine)
        for cmd, reply in pairs:
            held = cmd.received_at
            self.observe(cmd.code, reply, _held_ns(held) if held else now - read_ns)

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


def _held_ns(held: float) -> int:
    """Since flow control held the request back (loop time, RemotingCommand.received_at)."""
    return int((asyncio.get_running_loop().time() - held) * _NS_PER_S)


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
    """Time every request of `dispatcher` (call it once per dispatcher, after registering its handlers):
    the connections report synchronous answers to `meter` in batches; coroutine handlers are wrapped."""
    dispatcher.meter = meter
    routes = dispatcher.routes
    for code, route in list(routes.items()):
        if route.is_async:
            routes[code] = Route(_timed_async(code, route.call, meter), True)
