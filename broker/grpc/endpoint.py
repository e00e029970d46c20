"""GrpcEndpoint: the grpcio asyncio server of `MessagingService`, on the broker's own event loop.

Started by mqbroker after the broker (its processors answer every RPC) and stopped before it. With the broker's
authenticationEnabled, authorizationEnabled or aclEnable on, every RPC is checked against the broker's users,
ACLs and plain_acl.yml (broker.grpc.auth). The port is plaintext, or TLS only with `tls.server.mode=enforcing`
(broker.grpc.tls: grpcio cannot serve both on one port as RocketMQ's proxy does).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import grpc

from broker.config.errors import ConfigError
from broker.grpc.auth import GrpcAuth
from broker.grpc.context import BrokerView
from broker.grpc.conversions import SendLimits
from broker.grpc.local import LocalBroker
from broker.grpc.malformed import GRPC_LOGGER, MalformedRequestFilter
from broker.grpc.pb import service_grpc
from broker.grpc.receipts import ReceiptHandles
from broker.grpc.receive import Receiver
from broker.grpc.renew_policy import RenewSettings
from broker.grpc.send import Sender
from broker.grpc.service import MessagingService
from broker.grpc.tls import grpc_tls_on, server_credentials
from broker.log_limit import LimitedLog
from broker.transport.tls import TlsSettings

__all__ = ["GrpcEndpoint", "GrpcEndpointError"]

log = logging.getLogger(__name__)

#: Seconds in-flight RPCs get to finish at shutdown.
STOP_GRACE_S = 3.0
EXPIRE_EVERY_S = 30.0
#: RPCs in flight at once (long-polling receives and telemetry streams included); past it grpcio answers
#: RESOURCE_EXHAUSTED at once, so a client opening streams without end cannot grow the broker's memory without end.
MAX_CONCURRENT_RPCS = 10_000
#: Streams one connection may hold open (HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS; a client queues the rest), so
#: that one client cannot take every RPC slot from the others.
MAX_STREAMS_PER_CONNECTION = 1_000


class GrpcEndpointError(OSError):
    """The endpoint cannot start with this configuration or port (an OSError: mqbroker reports a failed start)."""


class GrpcEndpoint:
    def __init__(self, broker: BrokerView) -> None:
        self.broker = broker
        self.server: grpc.aio.Server | None = None
        self.service: MessagingService | None = None
        self.port = 0
        self._expiry: asyncio.Task[None] | None = None
        self._renewal: asyncio.Task[None] | None = None
        self.handles: ReceiptHandles | None = None
        self._malformed = MalformedRequestFilter(LimitedLog(log))

    def _dispatcher(self) -> object:
        server = self.broker.server
        if server is None:
            raise RuntimeError("the broker's remoting server is not started")
        return server.dispatcher

    async def start(self) -> None:
        c = self.broker.config
        tls = TlsSettings.of(c)
        credentials: grpc.ServerCredentials | None = None
        if grpc_tls_on(tls):
            try:
                credentials = server_credentials(tls)
            except ConfigError as exc:
                raise GrpcEndpointError(f"enableProxy with tls.server.mode=enforcing: {exc}") from None
        checker = self.broker.auth.checker
        local = LocalBroker(self._dispatcher)
        sender = Sender(local, self.broker.topics.get, SendLimits(max_body_size=c.max_message_size))
        receiver = Receiver(
            self.broker.pop, local, self.broker.groups, default_invisible_ms=c.default_invisible_time_mills
        )
        self.service = MessagingService(self.broker, local, sender, receiver, GrpcAuth(checker, checker.plain))
        if c.enable_proxy_auto_renew:
            renew = RenewSettings(c.renew_ahead_time_millis, c.renew_max_time_millis, c.max_renew_retry_times)
            clients = self.service.clients
            self.handles = ReceiptHandles(self.broker.pop, renew, c.invisible_time_millis_when_clear, clients.gone)
            receiver.handles = self.handles
            clients.on_forget.append(self.handles.release)
        server = grpc.aio.server(
            maximum_concurrent_rpcs=MAX_CONCURRENT_RPCS,
            options=[
                ("grpc.max_receive_message_length", c.grpc_max_inbound_message_size),
                ("grpc.max_send_message_length", c.grpc_max_inbound_message_size),
                # clients ping rarely (Java every 300 s); accept their pings without a call in flight
                ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
                ("grpc.keepalive_permit_without_calls", 1),
                ("grpc.max_concurrent_streams", MAX_STREAMS_PER_CONNECTION),
            ],
        )
        service_grpc.add_MessagingServiceServicer_to_server(self.service, server)
        address = f"{c.bind_address}:{c.grpc_server_port}"
        try:
            if credentials is None:
                port = server.add_insecure_port(address)
            else:
                port = server.add_secure_port(address, credentials)
        except RuntimeError as exc:
            raise GrpcEndpointError(f"cannot listen on {address}: {exc}") from None
        if not port:
            raise GrpcEndpointError(f"cannot listen on {address}")
        await server.start()
        logging.getLogger(GRPC_LOGGER).addFilter(self._malformed)
        self.server, self.port = server, port
        self.service.port = port
        self._expiry = asyncio.get_running_loop().create_task(self._expire_clients())
        if self.handles is not None:
            self._renewal = asyncio.get_running_loop().create_task(self.handles.run(c.renew_schedule_period_millis))
        log.info(
            "gRPC endpoint (apache.rocketmq.v2.MessagingService) listening on %s:%d (%s, %s)",
            c.bind_address,
            port,
            "TLS only" if credentials is not None else "plaintext",
            "requests checked" if self.service.auth is not None else "no authentication",
        )

    async def _expire_clients(self) -> None:
        assert self.service is not None
        while True:
            await asyncio.sleep(EXPIRE_EVERY_S)
            try:
                await self.service.clients.expire()
            except Exception:
                log.exception("expiring gRPC clients failed")

    async def stop(self) -> None:
        for task in (self._expiry, self._renewal):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self.service is not None:
            await self.service.clients.close()
        if self.server is not None:
            await self.server.stop(STOP_GRACE_S)
            logging.getLogger(GRPC_LOGGER).removeFilter(self._malformed)
            log.info("gRPC endpoint stopped")
