"""rocketmq_rpc_latency's counting (broker/metrics/rpc.py): the connection hands the meter the inline answers
at each write, in batches, and the meter counts a batch of one code's SUCCESS frames at once. These hold that fast
path equal to observing every request plainly, and the connection's batches to what each request got."""

from __future__ import annotations

import asyncio
from typing import Any

from broker.metrics.rpc import RPC_BUCKETS, RpcMeter, instrument
from broker.protocol.codes import FLAG_ONEWAY, FLAG_RESPONSE, ResponseCode
from broker.protocol.command import RemotingCommand, encode
from broker.transport import RemotingConnection, RemotingServer
from broker.transport.loop import run

Batch = tuple[list[RemotingCommand], list[bytes], int]
MS = 1_000_000


def _request(code: int, opaque: int, flag: int = 0) -> RemotingCommand:
    return RemotingCommand(code=code, opaque=opaque, flag=flag)


def _reply(cmd: RemotingCommand, code: int) -> bytes:
    response = cmd.response(code)
    response.opaque = cmd.opaque
    response.flag |= FLAG_RESPONSE
    return encode(response)


def _batch(codes: list[tuple[int, int]], written_ms: float, opaque: int = 1) -> Batch:
    """(request code, response code) pairs answered by frames written at `written_ms`."""
    requests = [_request(code, opaque + i) for i, (code, _rc) in enumerate(codes)]
    replies = [_reply(cmd, rc) for cmd, (_code, rc) in zip(requests, codes, strict=True)]
    return requests, replies, int(written_ms * MS)


def test_fast_path_counts_what_plain_observation_counts() -> None:
    """Batches of every shape the fast path must take or refuse: one code all SUCCESS (the sends), mixed
    request codes, response codes 1, 10, 206 and -1 (so a first digit other than "0" is told apart, and
    "10" is not taken for "1"), latencies in several buckets and past the last, and a batch where a
    handler wrote a frame of its own (the replies are paired by opaque)."""
    batches = [
        _batch([(310, 0)] * 16, 0.4),
        _batch([(310, 0)] * 16, 1.5),
        _batch([(310, 0)] * 5 + [(34, 0)] * 3, 6.0, opaque=100),
        _batch([(310, 0), (310, 1), (310, 10), (310, 206), (310, -1), (310, 0)], 20.0, opaque=200),
        _batch([(11, 0)] * 4, 4000.0, opaque=300),
    ]
    requests, replies, written = _batch([(310, 0)] * 3, 2.0, opaque=400)
    own = RemotingCommand(code=40, opaque=7)  # a request the handler sent: no response flag
    batches.append((requests, [replies[0], encode(own), replies[1], replies[2]], written))
    fast, plain = RpcMeter(), RpcMeter()
    for reqs, reps, written_ns in batches:
        fast.answered(reqs, reps, 0, written_ns)
    for reqs, reps, written_ns in batches:
        plain.answered_plainly(reqs, reps, 0, written_ns)
    assert fast.cells == plain.cells
    assert RPC_BUCKETS.count(fast.cells[(310, 0)]) == 16 + 16 + 5 + 2 + 3
    assert fast.cells[(310, 0)][0] == 16  # 0.4 ms: le 1
    assert fast.cells[(310, 0)][1] == 16 + 3  # 1.5 and 2 ms: le 3
    assert fast.cells[(11, 0)][len(RPC_BUCKETS.bounds)] == 4  # past 3000 ms: +Inf only
    for rc in (1, 10, 206, -1):
        assert RPC_BUCKETS.count(fast.cells[(310, rc)]) == 1


def test_held_request_counts_from_when_it_was_held() -> None:
    async def main() -> RpcMeter:
        meter = RpcMeter()
        requests, replies, _ = _batch([(310, 0)] * 2, 0.0)
        held_at = asyncio.get_running_loop().time() - 0.05  # held back 50 ms ago
        for cmd in requests:
            cmd.received_at = held_at
        meter.answered(requests, replies, 0, 0)
        return meter

    cell = run(main()).cells[(310, 0)]
    assert RPC_BUCKETS.count(cell) == 2
    assert cell[RPC_BUCKETS.bounds.index(100 * MS)] == 2  # 10 ms < 50 ms <= 100 ms


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = b""

    def write(self, data: Any) -> None:
        self.written += bytes(data)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 10911)}.get(name, default)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return False


def test_connection_reports_each_inline_answer_once_with_its_own_reply() -> None:
    """One read mixing what breaks the one-reply-per-request pairing (a one-way request, an answer
    later, a coroutine handler, an unknown code, a handler raising, a handler writing a frame of its own)
    among 40 plain requests, so that batches also close at the connection's writes of 16 replies."""
    recorded: list[Batch] = []

    class Recording(RpcMeter):
        def answered(self, requests: list[RemotingCommand], replies: list[bytes], read_ns: int, now: int) -> None:
            recorded.append((requests, replies, now))
            super().answered(requests, replies, read_ns, now)

    async def main() -> RpcMeter:
        server = RemotingServer("127.0.0.1", 0)

        def ok(conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
            return cmd.response(ResponseCode.SUCCESS)

        def later(conn: RemotingConnection, cmd: RemotingCommand) -> None:
            return None

        async def coroutine(conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
            return cmd.response(ResponseCode.SUCCESS)

        def fails(conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
            raise ValueError("a bug")

        def chatty(conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
            conn.send_response(RemotingCommand(code=40, opaque=99_999))  # a frame that answers nothing here
            return cmd.response(ResponseCode.SYSTEM_BUSY)

        for code, handler in ((11, ok), (12, later), (13, coroutine), (14, fails), (15, chatty)):
            server.register(code, handler)
        meter = Recording()
        instrument(server.dispatcher, meter)
        conn = server._create_protocol()
        conn.connection_made(_Transport())
        commands = [_request(11, i) for i in range(1, 41)]
        for at, cmd in (
            (3, _request(11, 1001, FLAG_ONEWAY)),
            (7, _request(12, 1002)),
            (10, _request(13, 1003)),
            (20, _request(99, 1004)),
            (25, _request(14, 1005)),
            (30, _request(15, 1006)),
        ):
            commands.insert(at, cmd)
        conn._process(commands)
        await asyncio.sleep(0.01)  # the coroutine handler's answer
        return meter

    meter = run(main())
    reported = [cmd.opaque for requests, _replies, _w in recorded for cmd in requests]
    assert sorted(reported) == [*range(1, 41), 1005, 1006]  # each inline answer once, nothing else
    for requests, replies, _written in recorded:
        if len(replies) == len(requests):
            for cmd, reply in zip(requests, replies, strict=True):
                assert b'"opaque":%d,' % cmd.opaque in reply
    assert RPC_BUCKETS.count(meter.cells[(11, 0)]) == 40
    assert RPC_BUCKETS.count(meter.cells[(14, ResponseCode.SYSTEM_ERROR)]) == 1
    assert RPC_BUCKETS.count(meter.cells[(15, ResponseCode.SYSTEM_BUSY)]) == 1
    assert RPC_BUCKETS.count(meter.cells[(13, 0)]) == 1  # timed by its wrapper, as before
    assert {code for code, _rc in meter.cells} == {11, 13, 14, 15}
