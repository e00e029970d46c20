"""One remoting connection as an asyncio Protocol, shared by the server and the client side.

`RemotingServer` and `connect()` create these; processors receive one as their `conn` argument and
may send requests back over it (broker -> client). RocketMQ is symmetric here: either end may send
requests and responses, matched by `opaque`, so a single class does framing, dispatch, response
matching, flow control and close handling for both roles.

Hot path: `data_received` feeds the sans-I/O FrameDecoder, answers synchronous handlers inline and
writes every reply produced by one read with a single `transport.write`. Replies of asynchronous
handlers and outgoing requests are coalesced per loop iteration with one `call_soon` flush.

Bounds against peers that send slowly or do not read:
- An incomplete frame's start time is `frame_started_at` (the server closes connections whose frame takes
  longer than its frame timeout); a large one reserves its size from the server's `FrameBudget` and the
  connection stops reading while the reservation waits (broker/transport/budget.py).
- Above `write_high_water` queued bytes we stop reading (no new replies), and `when_writable` lets a
  producer of replies that were not asked for just now (a woken long poll) wait until the peer reads.
  Past `write_buffer_limit` the connection is dropped: those bytes are replies to requests already taken,
  which cannot be un-produced, and a peer that leaves that much unread is gone or hostile. Its clients
  reconnect and pull again from their offsets; nothing acknowledged is lost.
- A response body of `SHARED_BODY_FROM` bytes or more is written as its own buffer (no copy into the
  frame), so one stored body sent to many pullers is held once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import struct
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

from broker.log_limit import LimitedLog
from broker.protocol.codes import FLAG_ONEWAY, FLAG_RESPONSE, ResponseCode, SerializeType
from broker.protocol.command import DEFAULT_MAX_FRAME_LENGTH, FrameDecoder, RemotingCommand, encode, encode_binary
from broker.protocol.errors import RemoteProtocolError
from broker.transport.budget import LARGE_FRAME, FrameBudget, Reservation
from broker.transport.dispatcher import AnswerMeter, Dispatcher, Route
from broker.transport.errors import (
    CloseReason,
    ConnectionClosedError,
    RequestTimeout,
    TooManyRequests,
)

__all__ = ["DEFAULT_WRITE_BUFFER_LIMIT", "SHARED_BODY_FROM", "ConnectionConfig", "RemotingConnection"]

log = logging.getLogger(__name__)
# Lines one hostile client can repeat per connection (garbage, half-sent frames, refused frames); a server
# gives its connections a limiter of their own, this one serves the rest.
limited_log = LimitedLog(log)

_OPAQUE_MASK = 0x7FFFFFFF
_REQUEST_FLAGS = ~(FLAG_RESPONSE | FLAG_ONEWAY)
# Reasons for pausing reading; reading resumes only once none of them holds.
_PAUSE_WRITE = "write-buffer"
_PAUSE_IN_FLIGHT = "in-flight"
_PAUSE_SHUTDOWN = "shutdown"
_PAUSE_FRAME_BUDGET = "frame-budget"
# Replies gathered from one read before they are written (see _process).
_REPLIES_PER_WRITE = 16
# Response bodies from this size on are written as their own buffer instead of being copied into the frame.
SHARED_BODY_FROM = 64 * 1024
# Queued replies above this size go to the transport as separate buffers (writev) instead of one join.
_JOIN_BELOW = 64 * 1024
DEFAULT_WRITE_BUFFER_LIMIT = 64 * 1024 * 1024
_LENGTH_WORD = struct.Struct(">i")
_monotonic_ns = time.monotonic_ns


@dataclass(frozen=True, slots=True)
class ConnectionConfig:
    """Limits of one connection. Defaults follow RocketMQ's NettyServerConfig where it has one."""

    max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH
    # Requests handled by coroutines at once before we stop reading from this peer.
    max_in_flight_handlers: int = 1024
    # Our own outgoing requests awaiting a response (RocketMQ's permitsAsync semaphore).
    max_outgoing_requests: int = 65535
    # Transport write buffer marks: above `high` we stop reading requests (their replies would pile up).
    write_high_water: int = 4 * 1024 * 1024
    write_low_water: int = 1024 * 1024
    # Past this many queued bytes the peer is dropped (see the module docstring).
    write_buffer_limit: int = DEFAULT_WRITE_BUFFER_LIMIT
    # How often pending outgoing requests are checked for timeouts (one timer per connection, not per request).
    timeout_scan_interval: float = 0.05
    # Header form for requests we send; responses are always JSON (ali-ons and C++ read only JSON).
    request_header: SerializeType = SerializeType.JSON


class RemotingConnection(asyncio.Protocol):
    """Protocol instance for one TCP connection; see the module docstring."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        config: ConnectionConfig | None = None,
        *,
        on_open: Callable[[RemotingConnection], None] | None = None,
        on_close: Callable[[RemotingConnection, CloseReason], None] | None = None,
        frame_budget: FrameBudget | None = None,
        log_limit: LimitedLog | None = None,
    ) -> None:
        self.config = config or ConnectionConfig()
        self._dispatcher = dispatcher
        self._on_open = on_open
        self._on_close_cb = on_close
        self._decoder = FrameDecoder(self.config.max_frame_length)
        # The incomplete frame: loop time its first bytes arrived (0.0: none) and its share of the budget.
        self.frame_started_at = 0.0
        self._frame_seq = 0
        self._frame_budget = frame_budget
        self._reservation: Reservation | None = None
        self._limited = log_limit or limited_log
        self._loop = asyncio.get_running_loop()
        self._encode_request = encode_binary if self.config.request_header == SerializeType.ROCKETMQ else encode
        self.transport: asyncio.Transport | None = None
        self.peer: str = "?"
        self.local: str = "?"
        self.close_reason: CloseReason | None = None
        self.closed: asyncio.Future[CloseReason] = self._loop.create_future()
        self.last_activity = self._read_at = self._loop.time()
        # time.monotonic_ns() when the last read arrived: the broker's metrics time requests from it
        self.read_ns = 0
        # Application data a processor may attach (the NameServer records which broker this is).
        self.attributes: dict[str, Any] = {}
        # What authentication remembers of this connection (broker.auth.checker.ConnectionAuth)
        self.auth: Any = None
        self._closing = False
        # Outgoing bytes gathered until the next flush.
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._in_receive = False
        self._flush_scheduled = False
        # Flow control.
        self._pause_reasons: set[str] = set()
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._writable_callbacks: deque[Callable[[], object]] = deque()
        self._backlog: deque[RemotingCommand] = deque()
        self._tasks: set[asyncio.Task[None]] = set()
        # Outgoing request matching: opaque -> (future, deadline).
        self._pending: dict[int, tuple[asyncio.Future[RemotingCommand], float]] = {}
        self._next_opaque = 0
        self._scan_handle: asyncio.TimerHandle | None = None
        # In-flight cap of our own requests (RocketMQ's semaphoreAsync), without asyncio.Semaphore's overhead.
        self._outgoing = 0
        self._slot_waiters: deque[asyncio.Future[None]] = deque()

    def __repr__(self) -> str:
        return f"<RemotingConnection {self.local} <-> {self.peer}{' closing' if self._closing else ''}>"

    # ------------------------------------------------------------------ asyncio.Protocol callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCPTransport does not subclass asyncio.Transport, hence the cast instead of a check.
        self.transport = transport = cast(asyncio.Transport, transport)
        self.peer = _format_addr(transport.get_extra_info("peername"))
        self.local = _format_addr(transport.get_extra_info("sockname"))
        transport.set_write_buffer_limits(high=self.config.write_high_water, low=self.config.write_low_water)
        self.last_activity = self._loop.time()
        if self._on_open is not None:
            self._on_open(self)

    def data_received(self, data: bytes) -> None:
        self.last_activity = self._read_at = self._loop.time()
        self.read_ns = _monotonic_ns()
        decoder = self._decoder
        try:
            commands = decoder.feed(data)
        except RemoteProtocolError as exc:
            name = type(exc).__name__
            self._limited.warning(f"protocol:{name}", "closing connection from %s: %s: %s", self.peer, name, exc)
            self.close(CloseReason.PROTOCOL_ERROR)
            return
        if self._backlog:
            self._keep(commands)
        elif commands:
            self._process(commands)
        if self.frame_started_at or decoder.buffered:
            self._track_frame()

    def pause_writing(self) -> None:
        self._write_paused = True
        self._pause_reading(_PAUSE_WRITE)

    def resume_writing(self) -> None:
        self._write_paused = False
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._run_writable_callbacks()
        self._drain_backlog()
        if not self._write_paused and not self._backlog:
            self._resume_reading(_PAUSE_WRITE)

    def eof_received(self) -> bool | None:
        if self._decoder.buffered:
            self._limited.warning(
                "truncated-frame",
                "connection from %s ended inside a frame: %d bytes of a truncated frame discarded",
                self.peer,
                self._decoder.buffered,
            )
        return None  # let the transport close; connection_lost reports PEER_CLOSED

    def connection_lost(self, exc: Exception | None) -> None:
        reason = self.close_reason or (CloseReason.CONNECTION_LOST if exc else CloseReason.PEER_CLOSED)
        self.close_reason = reason
        self._closing = True
        self._out.clear()
        self._backlog.clear()
        self._writable_callbacks.clear()
        self._end_frame()
        self._decoder.clear()
        if self._scan_handle is not None:
            self._scan_handle.cancel()
            self._scan_handle = None
        pending, self._pending = self._pending, {}
        for future, _deadline in pending.values():
            self._release_slot()  # a queued invoke takes it, then sees the connection closed
            if not future.done():
                error = ConnectionClosedError(f"connection to {self.peer} closed: {reason.value}", reason)
                error.__cause__ = exc
                future.set_exception(error)
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(ConnectionClosedError(f"connection to {self.peer} closed", reason))
        if not self.closed.done():
            self.closed.set_result(reason)
        log.debug("connection %s closed: %s", self.peer, reason.value)
        if self._on_close_cb is not None:
            try:
                self._on_close_cb(self, reason)
            except Exception:
                log.exception("close listener failed for %s", self.peer)

    # ------------------------------------------------------------------ incomplete frames

    def _track_frame(self) -> None:
        """After a read: note when the incomplete frame began, and reserve a large one's size."""
        decoder = self._decoder
        if not decoder.buffered:
            self._end_frame()
            return
        if decoder.frames_begun != self._frame_seq:
            self._end_frame()
            self._frame_seq = decoder.frames_begun
            self.frame_started_at = self._read_at
        budget = self._frame_budget
        if budget is None or self._reservation is not None or self._closing:
            return
        size = decoder.frame_size
        if size < LARGE_FRAME:
            return
        reservation = budget.reserve(size, decoder.buffered, self._frame_granted)
        if reservation is None:
            self._limited.warning(
                "frame-refused",
                "closing connection from %s: its frame of %d bytes does not fit the %d bytes that incomplete "
                "frames may hold (%d in use)",
                self.peer, size, budget.limit, budget.used,
            )  # fmt: skip
            self.abort(CloseReason.FRAME_REFUSED)
            return
        self._reservation = reservation
        if reservation.waiting:
            self._pause_reading(_PAUSE_FRAME_BUDGET)

    def _frame_granted(self) -> None:
        self._resume_reading(_PAUSE_FRAME_BUDGET)

    def _end_frame(self) -> None:
        self.frame_started_at = 0.0
        reservation = self._reservation
        if reservation is not None:
            self._reservation = None
            reservation.release()
            self._resume_reading(_PAUSE_FRAME_BUDGET)

    @property
    def incomplete_frame_bytes(self) -> int:
        """Bytes of the frame being received that have arrived so far."""
        return self._decoder.buffered

    # ------------------------------------------------------------------ incoming requests and responses

    def _process(self, commands: list[RemotingCommand]) -> None:
        """Handle decoded commands in order; stop (keeping the rest) when the peer is not reading.

        The hot loop of both ends: responses complete our pending requests, synchronous handlers are
        answered inline (their replies gathered in `_out`), coroutine handlers get a task.

        With metrics on (`Dispatcher.meter`), each write first hands the meter the batch of requests answered
        inline since the last one, `commands[first:n]`, with their replies, `out[first_out:]` (one each, in
        order), and the clock. A command that gets no reply
        here (a response, an unknown code, a coroutine handler, an answer later or none) first closes the
        batch before it and starts the next one after it, so the common path adds nothing per request to
        keep that pairing (what metrics cost per request: docs/benchmarks.md).
        """
        self._in_receive = True
        routes = self._dispatcher.routes
        default = self._dispatcher.default_route
        pending = self._pending
        out = self._out
        high_water = self.config.write_high_water
        max_tasks = self.config.max_in_flight_handlers
        meter = self._dispatcher.meter
        first = 0  # the first command not in a batch yet, its reply at out[first_out]
        first_out = len(out)
        handled = len(commands)
        try:
            for index, cmd in enumerate(commands):
                if self._write_paused or self._closing or len(self._tasks) >= max_tasks:
                    # Peer not reading our replies, or too much work in flight: keep the rest for later.
                    handled = index
                    if not self._closing:
                        self._keep(commands[index:])
                    break
                flag = cmd.flag
                if flag & FLAG_RESPONSE:
                    if meter is not None:
                        self._batch(meter, commands, first, index, first_out)
                        first, first_out = index + 1, len(out)
                    entry = pending.pop(cmd.opaque, None)
                    if entry is None:
                        # Late reply to a timed-out request, or to a one-way request sent without the flag.
                        log.debug("dropping response with unknown opaque %d from %s", cmd.opaque, self.peer)
                        continue
                    self._release_slot()
                    future = entry[0]
                    if not future.done():  # the caller may have stopped waiting (cancelled)
                        future.set_result(cmd)
                    continue
                route = routes.get(cmd.code, default)
                if route is None:
                    if meter is not None:
                        self._batch(meter, commands, first, index, first_out)
                    self._reply(
                        cmd,
                        cmd.response(
                            ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported"
                        ),
                    )
                    first, first_out = index + 1, len(out)
                elif route.is_async:
                    if meter is not None:
                        self._batch(meter, commands, first, index, first_out)
                        first, first_out = index + 1, len(out)
                    self._start_task(route, cmd)
                else:
                    try:
                        response = route.call(self, cmd)
                    except Exception as exc:
                        response = _error_response(cmd, exc, self.peer)
                    if response is not None and not flag & FLAG_ONEWAY:  # _reply, inlined: once per request
                        if type(response) is not bytes:  # bytes: already a frame for this request
                            response.opaque = cmd.opaque
                            response.flag |= FLAG_RESPONSE
                            response = encode(response)
                        out.append(response)
                        self._out_bytes += len(response)
                    elif meter is not None:  # no reply now (answered later, or one-way): not in a batch
                        self._batch(meter, commands, first, index, first_out)
                        first, first_out = index + 1, len(out)
                if len(out) >= _REPLIES_PER_WRITE or self._out_bytes >= high_water:
                    # Hand replies over in slices rather than one write per read: the peer starts on the
                    # first ones while we decode the rest, instead of both sides taking turns (this
                    # doubled round trips at 64 in flight). Big replies also let pause_writing stop us.
                    if meter is not None:
                        self._batch(meter, commands, first, index + 1, first_out)
                    self._flush()
                    first, first_out = index + 1, 0
        finally:
            self._in_receive = False
        if meter is not None and handled > first:
            self._batch(meter, commands, first, handled, first_out)
        self._flush()

    def _batch(self, meter: AnswerMeter, commands: list[RemotingCommand], first: int, end: int, first_out: int) -> None:
        """Tell the meter of the batch `commands[first:end]`, answered inline by the replies from
        `_out[first_out]` on, written now."""
        if end > first:
            meter.answered(commands[first:end], self._out[first_out:], self.read_ns, _monotonic_ns())

    def _keep(self, commands: list[RemotingCommand]) -> None:
        """Hold commands back (flow control), stamped with the time their read arrived (first time only)."""
        now = self._read_at
        for cmd in commands:
            if not cmd.received_at:
                cmd.received_at = now
        self._backlog.extend(commands)

    def _reply(self, request: RemotingCommand, response: RemotingCommand | bytes) -> None:
        if request.flag & FLAG_ONEWAY:
            return
        if isinstance(response, bytes):  # already a frame for this request (see broker.transport.dispatcher)
            self._send(response)
            return
        response.opaque = request.opaque
        response.flag |= FLAG_RESPONSE
        self._send_command(response)

    def _send_command(self, cmd: RemotingCommand) -> None:
        body = cmd.body
        if len(body) < SHARED_BODY_FROM:
            self._send(encode(cmd))
            return
        # The body goes out as it is: a long poll's reply shares one stored body with every other puller.
        head = encode(dataclasses.replace(cmd, body=b""))
        self._send(_LENGTH_WORD.pack(len(head) - 4 + len(body)) + head[4:])
        self._send(body)

    def _start_task(self, route: Route, cmd: RemotingCommand) -> None:
        task = self._loop.create_task(self._run_async(route, cmd))
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        if len(self._tasks) >= self.config.max_in_flight_handlers:
            self._pause_reading(_PAUSE_IN_FLIGHT)

    async def _run_async(self, route: Route, cmd: RemotingCommand) -> None:
        try:
            response = await route.call(self, cmd)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            response = _error_response(cmd, exc, self.peer)
        if response is not None and not self._closing:
            self._reply(cmd, response)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if len(self._tasks) < self.config.max_in_flight_handlers:
            self._drain_backlog()
            if _PAUSE_IN_FLIGHT in self._pause_reasons and len(self._tasks) < self.config.max_in_flight_handlers:
                self._resume_reading(_PAUSE_IN_FLIGHT)

    def _drain_backlog(self) -> None:
        """Handle commands kept back by flow control, as far as flow control now allows."""
        if self._backlog and not self._closing:
            commands = list(self._backlog)
            self._backlog.clear()
            self._process(commands)

    # ------------------------------------------------------------------ outgoing requests

    def invoke(self, cmd: RemotingCommand, timeout: float) -> Awaitable[RemotingCommand]:
        """Send a request; await the result for its response (matched by opaque, in any order).

        The common case returns the response future itself, not a coroutine: no frame per request. The
        in-flight slot is released where the pending entry ends (response, timeout scan, close), so a
        caller that stops waiting keeps its slot until then, like RocketMQ's semaphore.
        """
        if (
            self._closing
            or self._write_paused
            or self._slot_waiters
            or (self._outgoing >= self.config.max_outgoing_requests)
        ):
            return self._invoke_slowly(cmd, timeout)
        self._outgoing += 1  # fast path: open, writable, a free slot and nobody queued before us
        return self._send_request(cmd, timeout)

    def _send_request(self, cmd: RemotingCommand, timeout: float) -> asyncio.Future[RemotingCommand]:
        """Register and send a request that holds an in-flight slot."""
        self._next_opaque = opaque = (self._next_opaque + 1) & _OPAQUE_MASK
        cmd.opaque = opaque
        cmd.flag &= _REQUEST_FLAGS
        try:
            frame = self._encode_request(cmd)
        except BaseException:
            self._release_slot()
            raise
        loop = self._loop
        future: asyncio.Future[RemotingCommand] = loop.create_future()
        self._pending[opaque] = (future, loop.time() + timeout)
        if self._scan_handle is None:
            self._scan_handle = loop.call_later(self.config.timeout_scan_interval, self._scan_timeouts)
        self._send(frame)
        return future

    async def _invoke_slowly(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """invoke when it cannot go at once: fail if closed, wait for a slot and for the peer to drain."""
        if self._closing:
            raise ConnectionClosedError(f"connection to {self.peer} is closed", self.close_reason)
        if self._outgoing < self.config.max_outgoing_requests and not self._slot_waiters:
            self._outgoing += 1
        else:
            await self._wait_for_slot(timeout)
        try:
            if self._write_paused:
                await self.drain()
            if self._closing:
                raise ConnectionClosedError(f"connection to {self.peer} is closed", self.close_reason)
        except BaseException:
            self._release_slot()
            raise
        return await self._send_request(cmd, timeout)

    async def _wait_for_slot(self, timeout: float) -> None:
        waiter: asyncio.Future[None] = self._loop.create_future()
        self._slot_waiters.append(waiter)
        try:
            await asyncio.wait_for(waiter, timeout)
        except TimeoutError:
            raise TooManyRequests(
                f"{self.config.max_outgoing_requests} requests to {self.peer} in flight for {timeout:.3f}s"
            ) from None
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._release_slot()  # the slot was handed to us just before we were cancelled
            raise
        finally:
            if not waiter.done():
                waiter.cancel()

    def _release_slot(self) -> None:
        # Hand the slot straight to the oldest live waiter; the in-flight count stays the same.
        waiters = self._slot_waiters
        if not waiters:  # the common case, on every response
            self._outgoing -= 1
            return
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._outgoing -= 1

    async def invoke_oneway(self, cmd: RemotingCommand) -> None:
        """Send a request with the one-way flag; waits only while the peer is not draining our writes."""
        if self._closing:
            raise ConnectionClosedError(f"connection to {self.peer} is closed", self.close_reason)
        if self._write_paused:
            await self.drain()
        self._next_opaque = opaque = (self._next_opaque + 1) & _OPAQUE_MASK
        cmd.opaque = opaque
        cmd.flag = (cmd.flag & ~FLAG_RESPONSE) | FLAG_ONEWAY
        self._send(self._encode_request(cmd))

    def send_response(self, response: RemotingCommand | bytes) -> None:
        """Write a response built outside a handler's return value (e.g. a long-poll reply); bytes are an
        already-encoded response frame."""
        if self._closing:
            return
        if isinstance(response, bytes):
            self._send(response)
            return
        response.flag |= FLAG_RESPONSE
        self._send_command(response)

    def _scan_timeouts(self) -> None:
        self._scan_handle = None
        now = self._loop.time()
        expired = [opaque for opaque, (_future, deadline) in self._pending.items() if deadline <= now]
        for opaque in expired:
            future, _deadline = self._pending.pop(opaque)
            self._release_slot()
            if not future.done():
                future.set_exception(RequestTimeout(f"no response from {self.peer} for request opaque {opaque}"))
        if self._pending and not self._closing:
            self._scan_handle = self._loop.call_later(self.config.timeout_scan_interval, self._scan_timeouts)

    # ------------------------------------------------------------------ writing and flow control

    def _send(self, data: bytes) -> None:
        out = self._out
        out.append(data)
        self._out_bytes += len(data)
        if not self._in_receive:
            if len(out) >= _REPLIES_PER_WRITE:
                self._flush()  # a burst of late replies (a group commit, a slave's ack): write as it grows
            elif not self._flush_scheduled:
                self._flush_scheduled = True
                self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        out = self._out
        if not out:
            return
        transport = self.transport
        if transport is None or transport.is_closing():
            out.clear()
            self._out_bytes = 0
            return
        if len(out) == 1:
            transport.write(out[0])
        elif self._out_bytes < _JOIN_BELOW:
            transport.write(b"".join(out))
        else:
            transport.writelines(out)  # big bodies stay as they are (uvloop writes them with writev)
        out.clear()
        self._out_bytes = 0
        self.last_activity = self._loop.time()
        if self._write_paused and transport.get_write_buffer_size() > self.config.write_buffer_limit:
            self._limited.warning(
                "write-overflow",
                "dropping connection to %s: %d bytes queued for it and it does not read (limit %d)",
                self.peer, transport.get_write_buffer_size(), self.config.write_buffer_limit,
            )  # fmt: skip
            self.abort(CloseReason.WRITE_OVERFLOW)

    @property
    def write_backlogged(self) -> bool:
        """True while the peer has more than the high-water mark of our writes left to read."""
        return self._write_paused or self._out_bytes >= self.config.write_high_water

    def when_writable(self, callback: Callable[[], object]) -> None:
        """Run `callback` once the peer has read our writes down to the low-water mark; now if it has.

        For replies nobody is waiting on the transport for (a woken long poll): producing them later, from
        the data as it is then, holds no reply bytes for a peer that does not read. Dropped on close.
        """
        if self._closing:
            return
        if not self.write_backlogged and not self._writable_callbacks:
            callback()
            return
        self._writable_callbacks.append(callback)

    def _run_writable_callbacks(self) -> None:
        callbacks = self._writable_callbacks
        while callbacks and not self._closing and not self.write_backlogged:
            callback = callbacks.popleft()
            try:
                callback()
            except Exception:
                log.exception("writable callback for %s failed", self.peer)

    async def drain(self) -> None:
        """Wait until the transport's write buffer is below the low-water mark."""
        if not self._write_paused:
            return
        if self._closing:
            raise ConnectionClosedError(f"connection to {self.peer} is closed", self.close_reason)
        waiter: asyncio.Future[None] = self._loop.create_future()
        self._drain_waiters.append(waiter)
        await waiter

    def _pause_reading(self, reason: str) -> None:
        if not self._pause_reasons and self.transport is not None and not self._closing:
            self.transport.pause_reading()
            log.debug("paused reading from %s (%s)", self.peer, reason)
        self._pause_reasons.add(reason)

    def _resume_reading(self, reason: str) -> None:
        if reason not in self._pause_reasons:
            return
        self._pause_reasons.discard(reason)
        if not self._pause_reasons and self.transport is not None and not self._closing:
            self.transport.resume_reading()
            log.debug("resumed reading from %s", self.peer)

    @property
    def reading_paused(self) -> bool:
        return bool(self._pause_reasons)

    @property
    def write_buffer_size(self) -> int:
        return self.transport.get_write_buffer_size() if self.transport is not None else 0

    # ------------------------------------------------------------------ lifecycle

    @property
    def is_closing(self) -> bool:
        return self._closing

    @property
    def busy(self) -> bool:
        """True while requests of this peer are being handled or our requests await replies."""
        return bool(self._tasks or self._pending or self._backlog)

    @property
    def backlog_size(self) -> int:
        """Requests held back by flow control, not handled yet (the broker's metrics publish the sum)."""
        return len(self._backlog)

    @property
    def in_flight_handlers(self) -> int:
        return len(self._tasks)

    def stop_reading(self) -> None:
        """Take no new requests (graceful shutdown); in-flight ones still get their replies."""
        self._pause_reading(_PAUSE_SHUTDOWN)

    async def wait_handlers(self) -> None:
        """Wait for the handlers currently running for this connection."""
        while self._tasks:
            await asyncio.wait(list(self._tasks))

    def cancel_handlers(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    def close(self, reason: CloseReason = CloseReason.LOCAL_CLOSE) -> None:
        """Flush what is queued and close; pending requests fail once the transport reports the loss."""
        if self._closing:
            return
        self._flush()
        self._closing = True
        self.close_reason = reason
        if self.transport is not None:
            self.transport.close()

    def abort(self, reason: CloseReason = CloseReason.LOCAL_CLOSE) -> None:
        """Close at once, dropping buffered writes."""
        if self.close_reason is None:
            self.close_reason = reason
        self._closing = True
        if self.transport is not None:
            self.transport.abort()


def _error_response(cmd: RemotingCommand, exc: Exception, peer: str) -> RemotingCommand:
    """Map a handler exception to a response; the connection stays up.

    Exceptions carrying a `response_code` (protocol header errors, broker errors) are expected
    outcomes of bad requests; anything else is a bug in a processor and is logged with its traceback.
    """
    code = getattr(exc, "response_code", None)
    if isinstance(code, int):
        log.info("request code %d from %s rejected: %s", cmd.code, peer, exc)
        return cmd.response(code, str(exc) or type(exc).__name__)
    log.exception("handler for request code %d from %s failed", cmd.code, peer)
    return cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")


def _format_addr(addr: Any) -> str:
    if isinstance(addr, tuple) and len(addr) >= 2:
        return f"{addr[0]}:{addr[1]}"
    return str(addr)
