"""Request/response over real TCP: matching by opaque, one-way, timeouts, errors, server->client calls."""

from __future__ import annotations

import asyncio

import pytest

from broker.protocol.codes import FLAG_ONEWAY, ResponseCode
from broker.protocol.command import RemotingCommand, encode
from broker.protocol.errors import HeaderError
from broker.transport import (
    ConnectError,
    ConnectionClosedError,
    ConnectionConfig,
    RemotingClient,
    RemotingConnection,
    RemotingServer,
    RequestTimeout,
    TooManyRequests,
    connect,
)


async def _server(**kwargs) -> RemotingServer:
    server = RemotingServer("127.0.0.1", 0, **kwargs)

    def echo(conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, ext_fields=dict(cmd.ext_fields), body=cmd.body)

    async def sleepy(conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        await asyncio.sleep(float(cmd.ext_fields["delay"]))
        return cmd.response(ResponseCode.SUCCESS, remark=cmd.ext_fields["delay"])

    def broken(conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        raise RuntimeError("disk on fire")

    def rejecting(conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        raise HeaderError("the custom field <topic> is null")

    server.register(1, echo)
    server.register(2, sleepy)
    server.register(3, broken)
    server.register(4, rejecting)
    await server.start()
    return server


def test_responses_matched_by_opaque_out_of_order(arun) -> None:
    async def body() -> None:
        server = await _server()
        conn = await connect(("127.0.0.1", server.port))
        delays = ["0.3", "0.05", "0.15", "0"]
        requests = [RemotingCommand(code=2, ext_fields={"delay": d}) for d in delays]
        responses = await asyncio.gather(*(conn.invoke(r, 5) for r in requests))
        # Each caller got its own reply although they arrived in another order.
        assert [r.remark for r in responses] == delays
        assert [r.opaque for r in responses] == [r.opaque for r in requests]
        assert len({r.opaque for r in requests}) == 4
        echo = await conn.invoke(RemotingCommand(code=1, ext_fields={"k": "v"}, body=b"payload"), 5)
        assert (echo.code, echo.ext_fields, echo.body, echo.is_response) == (0, {"k": "v"}, b"payload", True)
        conn.close()
        await server.shutdown()

    arun(body())


def test_unknown_code_and_handler_errors_keep_connection(arun, caplog) -> None:
    async def body() -> None:
        server = await _server()
        conn = await connect(("127.0.0.1", server.port))
        unknown = await conn.invoke(RemotingCommand(code=777), 5)
        assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        assert unknown.remark == " request type 777 not supported"
        failed = await conn.invoke(RemotingCommand(code=3), 5)
        assert failed.code == ResponseCode.SYSTEM_ERROR
        assert "disk on fire" in failed.remark
        rejected = await conn.invoke(RemotingCommand(code=4), 5)
        assert (rejected.code, rejected.remark) == (ResponseCode.SYSTEM_ERROR, "the custom field <topic> is null")
        ok = await conn.invoke(RemotingCommand(code=1, body=b"still up"), 5)
        assert ok.body == b"still up"
        conn.close()
        await server.shutdown()

    arun(body())
    assert any("disk on fire" in str(r.exc_info[1]) for r in caplog.records if r.exc_info)


def test_oneway_gets_no_response(arun) -> None:
    async def body() -> None:
        server = await _server()
        seen: list[RemotingCommand] = []
        server.register(9, lambda conn, cmd: seen.append(cmd) or cmd.response(0))
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(encode(RemotingCommand(code=9, opaque=5, flag=FLAG_ONEWAY)))
        writer.write(encode(RemotingCommand(code=1, opaque=6, body=b"x")))
        await writer.drain()
        length = int.from_bytes(await reader.readexactly(4), "big")
        frame = await reader.readexactly(length)
        # The only reply is the echo's (opaque 6); the one-way request (opaque 5) got none.
        assert b'"opaque":6' in frame
        assert len(seen) == 1 and seen[0].is_oneway
        writer.close()
        client = await connect(("127.0.0.1", server.port))
        await client.invoke_oneway(RemotingCommand(code=9))
        await asyncio.sleep(0.1)
        assert len(seen) == 2
        client.close()
        await server.shutdown()

    arun(body())


def test_timeout_then_late_reply_is_dropped(arun) -> None:
    async def body() -> None:
        server = await _server()
        conn = await connect(("127.0.0.1", server.port))
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(RequestTimeout):
            await conn.invoke(RemotingCommand(code=2, ext_fields={"delay": "0.5"}), 0.1)
        assert 0.08 < loop.time() - started < 0.4
        await asyncio.sleep(0.6)  # the late reply arrives and is dropped
        ok = await conn.invoke(RemotingCommand(code=1, body=b"after"), 5)
        assert ok.body == b"after"
        conn.close()
        await server.shutdown()

    arun(body())


def test_in_flight_cap_raises_too_many_requests(arun) -> None:
    async def body() -> None:
        server = await _server()
        conn = await connect(("127.0.0.1", server.port), config=ConnectionConfig(max_outgoing_requests=2))
        slow = [
            asyncio.ensure_future(conn.invoke(RemotingCommand(code=2, ext_fields={"delay": "0.4"}), 5))
            for _ in range(2)
        ]
        await asyncio.sleep(0.05)
        with pytest.raises(TooManyRequests):
            await conn.invoke(RemotingCommand(code=1), 0.1)
        assert [r.code for r in await asyncio.gather(*slow)] == [0, 0]
        assert (await conn.invoke(RemotingCommand(code=1), 1)).code == 0
        conn.close()
        await server.shutdown()

    arun(body())


def test_close_fails_pending_requests(arun) -> None:
    async def body() -> None:
        server = await _server()
        conn = await connect(("127.0.0.1", server.port))
        pending = asyncio.ensure_future(conn.invoke(RemotingCommand(code=2, ext_fields={"delay": "2"}), 5))
        await asyncio.sleep(0.05)
        conn.close()
        with pytest.raises(ConnectionClosedError):
            await pending
        with pytest.raises(ConnectionClosedError):
            await conn.invoke(RemotingCommand(code=1), 1)
        # The peer going away fails pending requests too.
        other = await connect(("127.0.0.1", server.port))
        pending = asyncio.ensure_future(other.invoke(RemotingCommand(code=2, ext_fields={"delay": "2"}), 5))
        await asyncio.sleep(0.05)
        for server_conn in list(server.connections):
            server_conn.abort()
        with pytest.raises(ConnectionClosedError):
            await pending
        await server.shutdown(grace=0.1)

    arun(body())


def test_server_sends_requests_to_client(arun) -> None:
    async def body() -> None:
        server = await _server()
        opened: asyncio.Queue[RemotingConnection] = asyncio.Queue()
        server.add_open_listener(opened.put_nowait)
        client = RemotingClient()
        notified: list[RemotingCommand] = []
        client.register(40, lambda conn, cmd: notified.append(cmd))

        async def running_info(conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
            return cmd.response(0, body=b"running:" + cmd.ext_fields["clientId"].encode())

        client.register(307, running_info)
        addr = f"127.0.0.1:{server.port}"
        assert (await client.invoke(addr, RemotingCommand(code=1), 5)).code == 0
        server_conn = await opened.get()
        await server.invoke_oneway(server_conn, RemotingCommand(code=40, ext_fields={"consumerGroup": "g"}))
        reply = await server.invoke(server_conn, RemotingCommand(code=307, ext_fields={"clientId": "c1"}), 5)
        assert reply.body == b"running:c1"
        assert len(notified) == 1 and notified[0].is_oneway and notified[0].ext_fields == {"consumerGroup": "g"}
        # The pool reuses its one connection per address.
        assert await client.get_connection(addr) is await client.get_connection(addr)
        await client.close()
        await server.shutdown()

    arun(body())


def test_pool_reconnects_and_reports_connect_errors(arun) -> None:
    async def body() -> None:
        server = await _server()
        client = RemotingClient(connect_timeout=1)
        addr = f"127.0.0.1:{server.port}"
        first = await client.get_connection(addr)
        first.close()
        await first.closed
        second = await client.get_connection(addr)
        assert second is not first
        assert (await client.invoke(addr, RemotingCommand(code=1), 5)).code == 0
        await client.close()
        port = server.port
        await server.shutdown()
        with pytest.raises(ConnectError):
            await connect(("127.0.0.1", port), timeout=1)

    arun(body())
