"""In-process remoting requests: how every RPC reaches the broker's own processors (RocketMQ proxy's local mode).

`LocalBroker.invoke` builds nothing of its own: it looks the request code up in the broker's dispatcher and
runs that handler with a `_Call` standing in for the TCP connection, so topic checks, put rules, transactions
and POP behave exactly as for a remoting client. `ClientChannel` is one gRPC client (one client id) as the
broker's producer and consumer tables see it: the broker's requests to it (a transaction check) are handed
to `on_request`, which turns them into telemetry commands.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from broker.protocol.codes import ResponseCode
from broker.protocol.command import RemotingCommand, decode_frame

__all__ = ["ClientChannel", "LocalBroker", "LocalError"]

log = logging.getLogger(__name__)

#: How long an in-process request may wait for its answer (a put waiting for a slave, a held POP).
DEFAULT_TIMEOUT = 30.0


class LocalError(Exception):
    """The broker answered a request with an error code, or could not answer it."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(f"{remark} (code {code})")
        self.code = code
        self.remark = remark


class ClientChannel:
    """One gRPC client, as the broker's client tables hold it (what they read of a `RemotingConnection`)."""

    def __init__(self, client_id: str, peer: str, on_request: Callable[[RemotingCommand], Awaitable[None]]) -> None:
        self.client_id = client_id
        self.peer = peer
        self.attributes: dict[str, Any] = {}
        self.read_ns = 0
        self.closed = False
        self._on_request = on_request

    @property
    def is_closing(self) -> bool:
        return self.closed

    async def invoke_oneway(self, cmd: RemotingCommand) -> None:
        """A request the broker sends to this client (CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED)."""
        if self.closed:
            raise ConnectionError(f"gRPC client {self.client_id} is gone")
        await self._on_request(cmd)

    def send_response(self, response: RemotingCommand | bytes) -> None:  # pragma: no cover - never a requester
        log.debug("dropping a late response for gRPC client %s", self.client_id)


class _Call:
    """One in-process request: the connection its handler sees, and the future a late answer resolves."""

    __slots__ = ("attributes", "future", "peer", "read_ns")

    def __init__(self, peer: str, born_host: tuple[str, int] | None) -> None:
        self.peer = peer
        self.read_ns = 0
        # the send processor reads the born host from the connection: the gRPC message's, not the loopback
        self.attributes: dict[str, Any] = {"born_host": born_host} if born_host is not None else {}
        self.future: asyncio.Future[RemotingCommand | bytes] = asyncio.get_running_loop().create_future()

    @property
    def is_closing(self) -> bool:
        return False

    def send_response(self, response: RemotingCommand | bytes) -> None:
        if not self.future.done():
            self.future.set_result(response)


def _decoded(response: RemotingCommand | bytes) -> RemotingCommand:
    if isinstance(response, RemotingCommand):
        return response
    return decode_frame(bytes(response[4:]))  # an encoded frame: its 4-byte length first


class LocalBroker:
    """Runs remoting requests against the broker's dispatcher, in this process."""

    def __init__(self, dispatcher_of: Callable[[], Any]) -> None:
        self._dispatcher_of = dispatcher_of

    async def invoke(
        self,
        code: int,
        ext_fields: dict[str, str],
        body: bytes = b"",
        *,
        peer: str = "grpc",
        born_host: tuple[str, int] | None = None,
        channel: ClientChannel | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> RemotingCommand:
        """The broker's response to request `code`; any code but SUCCESS is returned too (callers map it)."""
        dispatcher = self._dispatcher_of()
        # the endpoint checked the RPC (broker.grpc.auth); the remoting guard would refuse this unsigned request
        route = dispatcher.get(code) if dispatcher.guard is None else dispatcher.get_unguarded(code)
        cmd = RemotingCommand(code=code, ext_fields=ext_fields, body=body)
        if route is None:
            return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"request code {code} is not served")
        # A registration (HEART_BEAT) must see the client's own channel: the tables key on it. Other requests get a
        # one-off stand-in whose future takes a late answer (a put waiting for the flush or a slave).
        call = _Call(peer if channel is None else channel.peer, born_host)
        target: Any = channel if channel is not None else call
        try:
            result = route.call(target, cmd)
            if route.is_async:
                result = await result
            if result is None:
                result = await asyncio.wait_for(call.future, timeout)
        except TimeoutError:
            return cmd.response(ResponseCode.SYSTEM_BUSY, f"no answer within {timeout:.0f}s")
        except Exception as exc:  # what the connection does with a handler's error: it becomes the response
            error_code = getattr(exc, "response_code", None)
            if not isinstance(error_code, int):
                log.exception("in-process request %d failed", cmd.code)
                return cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
            return cmd.response(error_code, str(exc))
        return _decoded(result)
