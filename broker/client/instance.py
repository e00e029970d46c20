"""The connection-owning core of every SDK client (Java's MQClientInstance), one per client object.

Producer, PushConsumer, PullConsumer and Admin each create one and call `start()` / `close()`.
It keeps the NameServer list with failover, the route cache (refreshed every
pollNameServerInterval for the topics its owner names), the broker address table, the periodic
heartbeat, and answers the requests brokers send to clients (NOTIFY_CONSUMER_IDS_CHANGED triggers
the owner's rebalance; RESET_CONSUMER_CLIENT_OFFSET repositions the owner's queues;
GET_CONSUMER_RUNNING_INFO and GET_CONSUMER_STATUS_FROM_CLIENT, relayed from an admin, report the owner's
state: broker.client.consumer_running_info shapes the answers).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, TypeVar

from broker.client.api import ClientAPI, ConsumerData, heartbeat_body
from broker.client.config import ClientConfig
from broker.client.consumer_running_info import (
    CLIENT_VERSION_DESC,
    PROP_CLIENT_VERSION,
    PROP_NAMESERVER_ADDR,
    RunningInfo,
    consumer_status_body,
    running_info_body,
    thread_stacks,
)
from broker.client.errors import NameServerUnreachable, NoRouteError, TopicNotExist
from broker.client.message import MessageQueue
from broker.client.route import MASTER_ID, TopicRouteData
from broker.client.subscription import SubscriptionData
from broker.protocol.bodies import ResetOffsetBody
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.headers import (
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    ResetOffsetRequestHeader,
)
from broker.transport.client import RemotingClient
from broker.transport.connection import RemotingConnection
from broker.transport.errors import RemotingError
from broker.transport.loop import cancel_and_wait

__all__ = ["ClientInstance", "HeartbeatProvider"]

log = logging.getLogger(__name__)

T = TypeVar("T")

# (producer groups, consumerData dicts) for the heartbeat body.
HeartbeatProvider = Callable[[], tuple[list[str], list[ConsumerData]]]
# (topic, group, new offset per queue): a broker asks the consumer to reposition (RESET_CONSUMER_CLIENT_OFFSET).
ResetHandler = Callable[[str, str, dict[MessageQueue, int]], Coroutine[Any, Any, None]]
# group -> the owner's running info, None when the owner is not that group's consumer (307).
RunningInfoProvider = Callable[[str], RunningInfo | None]
# (topic, group) -> the owner's offsets of the topic's queues, None when the owner is not that group's
# consumer; LookupError (its text the remark) when it does not subscribe the topic (221).
StatusProvider = Callable[[str, str], dict[MessageQueue, int] | None]


class ClientInstance:
    def __init__(
        self,
        config: ClientConfig,
        *,
        topics: Callable[[], Iterable[str]] = lambda: (),
        heartbeat: HeartbeatProvider | None = None,
        on_notify: Callable[[str], None] | None = None,
        on_route_change: Callable[[str, TopicRouteData], Awaitable[None] | None] | None = None,
        on_reset_offset: ResetHandler | None = None,
        running_info: RunningInfoProvider | None = None,
        consumer_status: StatusProvider | None = None,
    ) -> None:
        self.config = config
        self.client_id = config.client_id
        self.namesrvs = config.namesrv_list
        self._ns_index = 0
        self.remoting = RemotingClient(tls=config.tls_context(), signer=config.signer)
        self.api = ClientAPI(self.remoting, config.request_timeout)
        self.routes: dict[str, TopicRouteData] = {}
        #: broker name -> {broker id: address}, merged from every route seen.
        self.broker_addrs: dict[str, dict[int, str]] = {}
        self._topics = topics
        self._heartbeat = heartbeat
        self._on_notify = on_notify
        self._on_route_change = on_route_change
        self._on_reset_offset = on_reset_offset
        self._running_info = running_info
        self._consumer_status = consumer_status
        self._reset_tasks: set[asyncio.Task[None]] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False
        self.remoting.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._handle_notify)
        self.remoting.register(RequestCode.CHECK_TRANSACTION_STATE, self._handle_ignored)
        self.remoting.register(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self._handle_reset_offset)
        self.remoting.register(RequestCode.GET_CONSUMER_RUNNING_INFO, self._handle_running_info)
        self.remoting.register(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, self._handle_consumer_status)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        self._tasks = [
            asyncio.create_task(self._every(self.config.poll_name_server_interval, self.refresh_routes), name="routes"),
            asyncio.create_task(self._every(self.config.heartbeat_broker_interval, self.send_heartbeat), name="hb"),
            asyncio.create_task(
                self._every(self.config.poll_missing_route_interval, self.look_up_missing_routes), name="missing"
            ),
        ]

    async def close(self) -> None:
        self._started = False
        await cancel_and_wait(*self._tasks)
        self._tasks = []
        await self.remoting.close()

    async def _every(self, interval: float, job: Callable[[], Awaitable[object]]) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await job()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a periodic job must survive a bad round
                log.warning("%s: periodic %s failed: %s", self.client_id, getattr(job, "__name__", job), exc)

    # ------------------------------------------------------------------ NameServer and routes

    async def namesrv_call(self, call: Callable[[str], Awaitable[T]]) -> T:
        """Run `call(addr)` on the current NameServer, moving to the next one on transport errors."""
        last: Exception | None = None
        for attempt in range(len(self.namesrvs)):
            addr = self.namesrvs[(self._ns_index + attempt) % len(self.namesrvs)]
            try:
                result = await call(addr)
            except RemotingError as exc:
                last = exc
                log.info("NameServer %s unreachable (%s), trying the next", addr, exc)
                continue
            self._ns_index = (self._ns_index + attempt) % len(self.namesrvs)
            return result
        raise NameServerUnreachable(f"no NameServer of {self.namesrvs} answered: {last}") from last

    async def fetch_route(self, topic: str) -> TopicRouteData:
        """Ask the NameServers for a route (no cache); TopicNotExist when none knows the topic."""
        route = await self.namesrv_call(lambda addr: self.api.get_route(addr, topic))
        return route

    async def update_route(self, topic: str) -> TopicRouteData | None:
        """Refresh one topic's route in the cache; None when the topic does not exist."""
        try:
            route = await self.fetch_route(topic)
        except TopicNotExist:
            return None
        old = self.routes.get(topic)
        self.routes[topic] = route
        for bd in route.broker_datas:
            self.broker_addrs.setdefault(bd.broker_name, {}).update(bd.broker_addrs)
            # Drop ids the group no longer has (a slave that went away, a master that moved).
            for stale in set(self.broker_addrs[bd.broker_name]) - set(bd.broker_addrs):
                del self.broker_addrs[bd.broker_name][stale]
        if route != old and self._on_route_change is not None:
            result = self._on_route_change(topic, route)
            if asyncio.iscoroutine(result):
                await result
        return route

    async def get_route(self, topic: str) -> TopicRouteData | None:
        route = self.routes.get(topic)
        if route is None:
            route = await self.update_route(topic)
        return route

    async def refresh_routes(self) -> None:
        for topic in sorted(set(self._topics()) | set(self.routes)):
            try:
                await self.update_route(topic)
            except Exception as exc:
                log.warning("refreshing the route of %s failed: %s", topic, exc)

    async def look_up_missing_routes(self) -> None:
        """Topics in use that had no route at the last look: created since? (A route found here reaches the
        consumers through on_route_change at once, so they rebalance onto the new topic's queues.)"""
        missing = sorted(t for t in set(self._topics()) - set(self.routes) if not t.startswith("%RETRY%"))
        for topic in missing:
            try:
                await self.update_route(topic)
            except Exception as exc:
                log.info("looking up the route of %s failed: %s", topic, exc)

    async def find_reader(self, broker_name: str, topic: str | None = None) -> str:
        """Where to read a group's offsets and a queue's bounds: the master, else a slave of the group (Java's
        findBrokerAddressInSubscribe). Slaves keep both, so a consumer starting or rebalancing while a master is
        away still finds where to read from; commits still go to the master."""
        addr = self.broker_addr(broker_name)
        if addr is None and topic is not None:
            await self.update_route(topic)
            addr = self.broker_addr(broker_name)
        if addr is None:
            raise NoRouteError(f"no address known for broker {broker_name}")
        return addr

    def master_addr(self, broker_name: str) -> str | None:
        return self.broker_addrs.get(broker_name, {}).get(MASTER_ID)

    def broker_addr(self, broker_name: str, broker_id: int = MASTER_ID) -> str | None:
        """`broker_id` if known, else the master, else any member (Java's findBrokerAddressInSubscribe)."""
        addrs = self.broker_addrs.get(broker_name, {})
        return addrs.get(broker_id) or addrs.get(MASTER_ID) or next(iter(addrs.values()), None)

    async def find_master(self, broker_name: str, topic: str | None = None) -> str:
        addr = self.master_addr(broker_name)
        if addr is None and topic is not None:
            await self.update_route(topic)
            addr = self.master_addr(broker_name)
        if addr is None:
            raise NoRouteError(f"no master address known for broker {broker_name}")
        return addr

    async def any_broker_of(self, topic: str) -> str:
        route = await self.get_route(topic)
        addrs = sorted(route.master_addrs() or route.all_addrs()) if route else []
        if not addrs:
            raise NoRouteError(f"no broker serves topic {topic}")
        return addrs[0]

    # ------------------------------------------------------------------ heartbeat

    async def send_heartbeat(self) -> None:
        if self._heartbeat is None:
            return
        producers, consumers = self._heartbeat()
        if not producers and not consumers:
            return
        body = heartbeat_body(self.client_id, producers, consumers)
        # Producer-only clients talk to masters alone; consumers may pull from slaves too.
        targets = {
            addr for addrs in self.broker_addrs.values() for bid, addr in addrs.items() if consumers or bid == MASTER_ID
        }
        results = await asyncio.gather(*(self.api.heartbeat(a, body) for a in sorted(targets)), return_exceptions=True)
        for addr, result in zip(sorted(targets), results, strict=True):
            if isinstance(result, Exception):
                log.info("heartbeat to %s failed: %s", addr, result)

    async def check_client_config(self, group: str, subscriptions: Iterable[SubscriptionData]) -> None:
        """Ask every broker of each SQL92-subscribed topic whether it accepts the expression
        (CHECK_CLIENT_CONFIG, Java's checkClientInBroker): start() fails with the broker's reason
        (enablePropertyFilter off, or SUBSCRIPTION_PARSE_FAILED) instead of pulling nothing later."""
        for sub in subscriptions:
            if sub.sql is None:
                continue
            route = await self.get_route(sub.topic)
            for addr in sorted(route.all_addrs()) if route is not None else []:
                await self.api.check_client_config(addr, self.client_id, group, sub.to_json())

    async def unregister(self, producer_group: str | None = None, consumer_group: str | None = None) -> None:
        targets = {a for addrs in self.broker_addrs.values() for a in addrs.values()}
        for addr in sorted(targets):
            try:
                await self.api.unregister_client(addr, self.client_id, producer_group, consumer_group)
            except Exception as exc:
                log.info("unregister from %s failed: %s", addr, exc)

    # ------------------------------------------------------------------ broker -> client requests

    def _handle_notify(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand | None:
        try:
            group = NotifyConsumerIdsChangedRequestHeader.from_ext_fields(cmd.ext_fields).consumer_group
        except Exception as exc:
            log.info("ignoring a malformed NOTIFY_CONSUMER_IDS_CHANGED from %s: %s", conn.peer, exc)
            return None
        log.debug("%s: consumer ids of %s changed (from %s)", self.client_id, group, conn.peer)
        if self._on_notify is not None:
            self._on_notify(group)
        return None  # sent one-way by brokers

    def _handle_reset_offset(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand | None:
        """RESET_CONSUMER_CLIENT_OFFSET (220): the owner repositions its queues (in a task)."""
        try:
            header = ResetOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
            body = ResetOffsetBody.from_json(cmd.body)
        except Exception as exc:
            log.info("ignoring a malformed RESET_CONSUMER_CLIENT_OFFSET from %s: %s", conn.peer, exc)
            return None
        if self._on_reset_offset is not None:
            table = {MessageQueue(mq.topic, mq.broker_name, mq.queue_id): off for mq, off in body.offset_table.items()}
            task = asyncio.get_running_loop().create_task(self._on_reset_offset(header.topic, header.group, table))
            self._reset_tasks.add(task)
            task.add_done_callback(self._reset_tasks.discard)
        return None if cmd.is_oneway else cmd.response(ResponseCode.SUCCESS)

    def _handle_running_info(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand | None:
        """GET_CONSUMER_RUNNING_INFO (307), relayed by a broker for mqadmin consumerStatus / consumerProgress.
        A malformed header is answered by the transport with its field error (HeaderFieldError's code)."""
        h = GetConsumerRunningInfoRequestHeader.from_ext_fields(cmd.ext_fields)
        info = self._running_info(h.consumer_group) if self._running_info is not None else None
        if info is None:
            return cmd.response(
                ResponseCode.SYSTEM_ERROR, f"The Consumer Group <{h.consumer_group}> not exist in this consumer"
            )
        props = dict(info.properties)
        props[PROP_NAMESERVER_ADDR] = "".join(f"{addr};" for addr in self.namesrvs)
        props[PROP_CLIENT_VERSION] = CLIENT_VERSION_DESC
        jstack = thread_stacks() if h.jstack_enable else None
        body = running_info_body(props, info.subscriptions, info.mq_table, info.status_table, jstack)
        return cmd.response(ResponseCode.SUCCESS, None, body=body)

    def _handle_consumer_status(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand | None:
        """GET_CONSUMER_STATUS_FROM_CLIENT (221), the broker's fan-out of INVOKE_BROKER_TO_GET_CONSUMER_STATUS."""
        h = GetConsumerStatusRequestHeader.from_ext_fields(cmd.ext_fields)
        try:
            offsets = self._consumer_status(h.topic, h.group) if self._consumer_status is not None else None
        except LookupError as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc.args[0]) if exc.args else str(exc))
        if offsets is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"The Consumer Group <{h.group}> not exist in this consumer")
        return cmd.response(ResponseCode.SUCCESS, None, body=consumer_status_body(offsets))

    def _handle_ignored(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand | None:
        log.debug("ignoring broker request %d from %s", cmd.code, conn.peer)
        if cmd.is_oneway:
            return None
        return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"request {cmd.code} not supported by this client")
