"""`MessagingService`: each RPC read from its metadata and request, answered by the module that owns it.

RocketMQ's rules for the metadata: `x-mq-client-id` is required (CLIENT_ID_REQUIRED otherwise); the language and
version are recorded. RPCs this endpoint does not serve answer NOT_IMPLEMENTED in their status (PullMessage and
the offset RPCs are not served by RocketMQ's proxy either). With authentication, authorization or ACL 1.0 on,
every RPC and every Telemetry command is checked first (broker.grpc.auth): a refused one gets UNAUTHORIZED in its
status and nothing else happens (a refused settings command registers nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc

from broker.client.route import BrokerData, QueueData, TopicRouteData, parse_route
from broker.grpc.auth import GrpcAuth
from broker.grpc.clients import Client, ClientRegistry, RegistrationError
from broker.grpc.context import BrokerView
from broker.grpc.conversions import grpc_code, to_grpc_message
from broker.grpc.local import LocalBroker
from broker.grpc.pb import definition, service, service_grpc
from broker.grpc.receive import Receiver
from broker.grpc.route import accept_types, message_queues, route_grpc_host, route_grpc_port
from broker.grpc.send import Sender
from broker.grpc.settings import settings_reply
from broker.log_limit import LimitedLog
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.headers import CheckTransactionStateRequestHeader
from broker.protocol.message import decode_record

__all__ = ["MessagingService"]

log = logging.getLogger(__name__)
_refusals = LimitedLog(log)

Code = definition.Code

ROUTE_TIMEOUT_S = 3.0
_READABLE = (definition.Permission.READ, definition.Permission.READ_WRITE)


def _status(code: int, message: str) -> Any:
    status = definition.Status()
    status.code, status.message = code, message
    return status


def _metadata(context: Any) -> dict[str, str]:
    return {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}


class MessagingService(service_grpc.MessagingServiceServicer):  # type: ignore[misc]
    """The servicer; `port` is the bound gRPC port (route entries of this broker name it)."""

    def __init__(
        self, broker: BrokerView, local: LocalBroker, sender: Sender, receiver: Receiver, auth: GrpcAuth | None = None
    ) -> None:
        self.broker = broker
        self.auth = auth if auth is not None and auth.active else None
        self.local = local
        self.sender = sender
        self.receiver = receiver
        self.clients = ClientRegistry(local, self._broker_request)
        self.port = broker.config.grpc_server_port

    # ------------------------------------------------------------------ helpers

    def _client(self, context: Any) -> Client | None:
        meta = _metadata(context)
        client_id = meta.get("x-mq-client-id", "").strip()
        if not client_id:
            return None
        return self.clients.client(
            client_id, context.peer() or "grpc", meta.get("x-mq-language", ""), meta.get("x-mq-client-version", "")
        )

    def _refusal(self, context: Any, request: Any) -> str | None:
        """None when the request may be served, else why not (the message of its UNAUTHORIZED status)."""
        if self.auth is None:
            return None
        peer = context.peer() or ""
        message = self.auth.refusal(_metadata(context), request, peer)
        if message is not None:
            _refusals.warning(
                f"refused {type(request).__name__}",
                "gRPC %s from %s refused: %s",
                type(request).__name__,
                peer,
                message,
            )
        return message

    def _refused(self, context: Any, request: Any, reply_type: Any) -> Any | None:
        """A `reply_type` with status UNAUTHORIZED when the request is refused, else None."""
        message = self._refusal(context, request)
        if message is None:
            return None
        reply = reply_type()
        reply.status.CopyFrom(_status(Code.UNAUTHORIZED, message))
        return reply

    @staticmethod
    def _no_client(reply: Any) -> Any:
        reply.status.CopyFrom(_status(Code.CLIENT_ID_REQUIRED, "x-mq-client-id metadata is required"))
        return reply

    def _grpc_address_of(self, addr: str) -> tuple[str, int]:
        c = self.broker.config
        port = route_grpc_port(
            addr,
            own_addr=c.broker_addr,
            bound_port=self.port,
            server_port=c.grpc_server_port,
            offset=c.grpc_route_port_offset,
        )
        return route_grpc_host(addr.rpartition(":")[0], c.grpc_route_domain), port

    async def _route(self, topic: str) -> TopicRouteData | None:
        """The topic's route from the NameServers, or from this broker's own table when it has none."""
        c = self.broker.config
        if not c.name_servers:
            tc = self.broker.topics.get(topic)
            if tc is None:
                return None
            return TopicRouteData(
                (QueueData(c.broker_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm),),
                (BrokerData(c.broker_name, c.broker_cluster_name, {0: c.broker_addr}),),
            )
        last: Exception | None = None
        for addr in c.name_servers:
            cmd = RemotingCommand(code=RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": topic})
            try:
                response = await self.broker.client.invoke(addr, cmd, ROUTE_TIMEOUT_S)
            except Exception as exc:  # the next NameServer may answer
                last = exc
                continue
            if response.code == ResponseCode.TOPIC_NOT_EXIST:
                return None
            if response.code == ResponseCode.SUCCESS:
                return parse_route(response.body)
            last = RuntimeError(response.remark or f"code {response.code}")
        raise ConnectionError(f"no NameServer gave the route of {topic}: {last}")

    # ------------------------------------------------------------------ route and clients

    async def QueryRoute(self, request: Any, context: Any) -> Any:
        if (refused := self._refused(context, request, service.QueryRouteResponse)) is not None:
            return refused
        reply = service.QueryRouteResponse()
        if self._client(context) is None:
            return self._no_client(reply)
        topic = request.topic.name
        try:
            route = await self._route(topic)
        except ConnectionError as exc:
            reply.status.CopyFrom(_status(Code.INTERNAL_SERVER_ERROR, str(exc)))
            return reply
        if route is None or not route.queue_datas:
            reply.status.CopyFrom(_status(Code.TOPIC_NOT_FOUND, f"topic {topic} does not exist"))
            return reply
        tc = self.broker.topics.get(topic)
        types = accept_types(tc.attributes if tc is not None else None)
        reply.message_queues.extend(message_queues(topic, route, self._grpc_address_of, types))
        reply.status.CopyFrom(_status(Code.OK, "OK"))
        return reply

    async def Heartbeat(self, request: Any, context: Any) -> Any:
        if (refused := self._refused(context, request, service.HeartbeatResponse)) is not None:
            return refused
        reply = service.HeartbeatResponse()
        client = self._client(context)
        if client is None:
            return self._no_client(reply)
        if client.kind is None:
            reply.status.CopyFrom(_status(Code.UNRECOGNIZED_CLIENT_TYPE, "no settings received from this client"))
            return reply
        try:
            await self.clients.register(client)
        except RegistrationError as exc:
            reply.status.CopyFrom(_status(grpc_code(exc.code), str(exc)))
            return reply
        reply.status.CopyFrom(_status(Code.OK, "OK"))
        return reply

    async def NotifyClientTermination(self, request: Any, context: Any) -> Any:
        if (refused := self._refused(context, request, service.NotifyClientTerminationResponse)) is not None:
            return refused
        reply = service.NotifyClientTerminationResponse()
        meta = _metadata(context)
        client_id = meta.get("x-mq-client-id", "").strip()
        if not client_id:
            return self._no_client(reply)
        await self.clients.terminate(client_id)
        reply.status.CopyFrom(_status(Code.OK, "OK"))
        return reply

    def _settings_reply(self, settings: Any) -> Any:
        c = self.broker.config
        fifo, attempts = False, 17
        if settings.HasField("subscription"):
            group = self.broker.groups.find(settings.subscription.group.name)
            if group is not None:
                fifo, attempts = group.consume_message_orderly, group.retry_max_times + 1
        return settings_reply(settings, max_body_size=c.max_message_size, fifo=fifo, max_attempts=attempts)

    async def Telemetry(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:
        client = self._client(context)
        if client is None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "x-mq-client-id metadata is required")
            return
        queue: asyncio.Queue[Any] = asyncio.Queue()
        client.streams.append(queue)

        async def read() -> None:
            try:
                async for command in request_iterator:
                    refusal = self._refusal(context, command)
                    if refusal is not None:  # as the proxy: a status on the stream, which stays open
                        refused = service.TelemetryCommand()
                        refused.status.CopyFrom(_status(Code.UNAUTHORIZED, refusal))
                        queue.put_nowait(refused)
                        continue
                    if command.HasField("settings"):
                        try:
                            await self.clients.apply_settings(client, command.settings)
                        except ValueError as exc:
                            queue.put_nowait(exc)
                            return
                        except RegistrationError as exc:
                            refusal = service.TelemetryCommand()
                            refusal.status.CopyFrom(_status(grpc_code(exc.code), str(exc)))
                            queue.put_nowait(refusal)
                            continue
                        queue.put_nowait(self._settings_reply(command.settings))
                    # thread stack traces and verify results: nothing here asks for them
            except Exception as exc:  # the stream broke: end ours
                log.debug("telemetry stream of %s ended: %s", client.channel.client_id, exc)
            queue.put_nowait(None)

        reader = asyncio.get_running_loop().create_task(read())
        try:
            while True:
                item = await queue.get()
                if item is None:
                    break
                if isinstance(item, ValueError):
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(item))
                    return
                yield item
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
            with contextlib.suppress(ValueError):
                client.streams.remove(queue)

    async def _broker_request(self, client: Client, cmd: RemotingCommand) -> Any:
        """A request the broker sent to this client's channel, as a telemetry command (None: nothing to send)."""
        if cmd.code != RequestCode.CHECK_TRANSACTION_STATE:
            return None
        header = CheckTransactionStateRequestHeader.from_ext_fields(cmd.ext_fields)
        msg = decode_record(cmd.body)
        transaction_id = header.transaction_id or msg.msg_id
        self.sender.transactions.record(
            transaction_id,
            msg.properties.get("PGROUP", msg.topic),
            header.commit_log_offset,
            header.tran_state_table_offset,
            msg.msg_id,
        )
        command = service.TelemetryCommand()
        recover = command.recover_orphaned_transaction_command
        recover.message.CopyFrom(to_grpc_message(msg))
        recover.transaction_id = transaction_id
        return command

    # ------------------------------------------------------------------ producing

    async def SendMessage(self, request: Any, context: Any) -> Any:
        if (refused := self._refused(context, request, service.SendMessageResponse)) is not None:
            return refused
        if self._client(context) is None:
            return self._no_client(service.SendMessageResponse())
        return await self.sender.send(request, context.peer() or "grpc")

    async def EndTransaction(self, request: Any, context: Any) -> Any:
        if (refused := self._refused(context, request, service.EndTransactionResponse)) is not None:
            return refused
        if self._client(context) is None:
            return self._no_client(service.EndTransactionResponse())
        return await self.sender.end_transaction(request, context.peer() or "grpc")

    # ------------------------------------------------------------------ consuming

    async def QueryAssignment(self, request: Any, context: Any) -> Any:
        """Per readable broker one queue with id -1 (receive pops every queue), or one per read queue for a FIFO
        group, as RocketMQ's proxy assigns."""
        if (refused := self._refused(context, request, service.QueryAssignmentResponse)) is not None:
            return refused
        reply = service.QueryAssignmentResponse()
        if self._client(context) is None:
            return self._no_client(reply)
        topic, group = request.topic.name, request.group.name
        try:
            route = await self._route(topic)
        except ConnectionError as exc:
            reply.status.CopyFrom(_status(Code.INTERNAL_SERVER_ERROR, str(exc)))
            return reply
        if route is None:
            reply.status.CopyFrom(_status(Code.TOPIC_NOT_FOUND, f"topic {topic} does not exist"))
            return reply
        fifo = self.receiver.fifo(group)
        readable = [q for q in message_queues(topic, route, self._grpc_address_of, ()) if q.permission in _READABLE]
        seen: set[str] = set()
        for mq in readable:
            if not fifo:
                if mq.broker.name in seen:
                    continue
                seen.add(mq.broker.name)
                mq.id = -1
            reply.assignments.add().message_queue.CopyFrom(mq)
        if not reply.assignments:
            reply.status.CopyFrom(_status(Code.FORBIDDEN, f"topic {topic} has no readable queue"))
            return reply
        reply.status.CopyFrom(_status(Code.OK, "OK"))
        return reply

    async def ReceiveMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:
        refused = self._refused(context, request, service.ReceiveMessageResponse)
        if refused is not None:
            yield refused
            return
        client = self._client(context)
        if client is None:
            reply = service.ReceiveMessageResponse()
            yield self._no_client(reply)
            return
        for reply in await self.receiver.receive(request, context.time_remaining(), client.channel.client_id):
            yield reply

    async def AckMessage(self, request: Any, context: Any) -> Any:
        if (refused := self._refused(context, request, service.AckMessageResponse)) is not None:
            return refused
        if (client := self._client(context)) is None:
            return self._no_client(service.AckMessageResponse())
        return await self.receiver.ack(request, client.channel.client_id)

    async def ChangeInvisibleDuration(self, request: Any, context: Any) -> Any:
        if (refused := self._refused(context, request, service.ChangeInvisibleDurationResponse)) is not None:
            return refused
        if (client := self._client(context)) is None:
            return self._no_client(service.ChangeInvisibleDurationResponse())
        return await self.receiver.change_invisible(request, client.channel.client_id)

    async def ForwardMessageToDeadLetterQueue(self, request: Any, context: Any) -> Any:
        if (refused := self._refused(context, request, service.ForwardMessageToDeadLetterQueueResponse)) is not None:
            return refused
        if (client := self._client(context)) is None:
            return self._no_client(service.ForwardMessageToDeadLetterQueueResponse())
        return await self.receiver.forward_to_dlq(request, client.channel.client_id)
