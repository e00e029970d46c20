"""The operator's API client when the API server drops connections (operator/rocketcluster/kube.py).

A real HTTP/1.1 server on loopback stands in for the API server. It closes connections at the moments that
matter: a kept-alive connection closed under the next request, which a CI run's teardown met; and every
connection closed unanswered. An idempotent request is sent once more on a fresh connection (by aiohttp, or
by the client for PATCH, which server-side apply uses and aiohttp does not retry), and anything left is a
ConnectionError: an OSError, which the operator's passes log as transient, not as a crash with a
traceback.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import kopf
import pytest

from rocketcluster.kube import Kube

# What the fake API server does with the n-th request (from 1) on the c-th connection (from 1)
Policy = Callable[[int, int], str]  # "answer" or "drop"


@asynccontextmanager
async def api_server(policy: Policy) -> AsyncIterator[tuple[str, list[tuple[int, str]]]]:
    """Its base URL, and the (connection, request line) of every request it read."""
    seen: list[tuple[int, str]] = []
    connections = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        conn = connections
        try:
            for n in range(1, 100):
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                length = next((int(h.split(":")[1]) for h in lines if h.lower().startswith("content-length")), 0)
                await reader.readexactly(length)
                seen.append((conn, lines[0]))
                if policy(conn, n) == "drop":
                    return
                body = json.dumps({"kind": "Status", "conn": conn, "n": n}).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                    % (len(body), body)
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        server.close()


def _kube(url: str) -> Kube:
    return Kube(kopf.ConnectionInfo(server=url))


async def test_a_kept_alive_connection_closed_under_a_request_is_retried_on_a_new_one() -> None:
    # the first connection answers one request, then closes under the second
    async with api_server(lambda conn, n: "drop" if (conn, n) == (1, 2) else "answer") as (url, seen):
        kube = _kube(url)
        try:
            first = await kube.request("GET", "/api/v1/namespaces/a/pods/x")
            again = await kube.request("PATCH", "/api/v1/namespaces/a/pods/x", body={"spec": {}})
        finally:
            await kube.close()
    assert (first["conn"], again["conn"]) == (1, 2)
    assert [conn for conn, _line in seen] == [1, 1, 2]  # the PATCH twice: dropped once, then answered


async def test_a_request_that_is_not_idempotent_is_not_sent_twice() -> None:
    async with api_server(lambda conn, n: "drop" if (conn, n) == (1, 2) else "answer") as (url, seen):
        kube = _kube(url)
        try:
            await kube.request("GET", "/api/v1/namespaces/a/events")
            with pytest.raises(ConnectionError, match="POST /api/v1/namespaces/a/events: the API server closed"):
                await kube.request("POST", "/api/v1/namespaces/a/events", body={"reason": "Test"})
        finally:
            await kube.close()
    assert [line.split()[0] for _conn, line in seen] == ["GET", "POST"]


@pytest.mark.parametrize("method", ["GET", "PATCH", "DELETE"])
async def test_a_server_that_drops_every_connection_gives_a_connection_error_after_one_retry(method: str) -> None:
    async with api_server(lambda conn, n: "drop") as (url, seen):
        kube = _kube(url)
        try:
            with pytest.raises(OSError, match=f"{method} /api/v1/pods/x: the API server closed the connection"):
                await kube.request(method, "/api/v1/pods/x", body={} if method == "PATCH" else None)
        finally:
            await kube.close()
    assert [line.split()[0] for _conn, line in seen] == [method, method]


async def test_nothing_listening_is_a_connection_error() -> None:
    async with api_server(lambda conn, n: "answer") as (url, _seen):
        pass  # closed again: the port is free now
    kube = _kube(url)
    try:
        with pytest.raises(ConnectionError, match="GET /api/v1/pods"):
            await kube.request("GET", "/api/v1/pods")
    finally:
        await kube.close()
