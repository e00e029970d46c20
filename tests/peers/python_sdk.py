"""The official Python 5.x SDK (rocketmq-python-client, the `grpc` extra) in a test process.

The SDK runs all gRPC I/O on one loop in a thread of its own and assumes every thread that touches gRPC can
find that loop: it points any thread that opens a channel at it. It also builds a client's telemetry stream in
whichever thread completes a route query, which is the caller's own thread when the answer arrived before the
callback was attached, and gRPC then asks that thread for its current event loop. After an `asyncio.run()`
(or any `set_event_loop(None)`) a thread has none, and the client fails to fetch the route ("There is no
current event loop in thread 'MainThread'"). Test processes run `asyncio.run()` all the time, around every
client call, so SDK tests run under `sdk_loop_for_threads_without_one()`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

from rocketmq.v5.client.connection.rpc_client import RpcClient


class _SdkLoopWhenNone(asyncio.DefaultEventLoopPolicy):
    """The default policy, except that clearing a thread's loop leaves it on the SDK's I/O loop."""

    def set_event_loop(self, loop: asyncio.AbstractEventLoop | None) -> None:
        super().set_event_loop(loop if loop is not None else RpcClient.get_channel_io_loop())


@contextlib.contextmanager
def sdk_loop_for_threads_without_one() -> Iterator[None]:
    """Start the SDK's I/O loop, and let a thread whose loop is cleared (the main thread after each
    `asyncio.run()`, the SDK's own scheduler threads) fall back to it, as if it had opened a channel."""
    RpcClient()  # the first instance in a process starts the loop; it opens no channel
    previous = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(_SdkLoopWhenNone())
    asyncio.set_event_loop(None)
    try:
        yield
    finally:
        asyncio.set_event_loop_policy(previous)
