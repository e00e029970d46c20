"""SlaveSynchronize: copies the master's metadata to a slave every few seconds.

`BrokerController` (broker.server.broker) starts one on SLAVE brokers, beside the HA replication client
(broker.ha), and closes it at shutdown. Over the remoting protocol it asks the master (its address from the
REGISTER_BROKER response) for GET_ALL_TOPIC_CONFIG (21), GET_ALL_CONSUMER_OFFSET (43), GET_ALL_DELAY_OFFSET
(45) and GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201), and installs them as RocketMQ's SlaveSynchronize does:
topics and groups replaced when the master's dataVersion differs, consumer and delay offsets merged key by
key, each persisted when it changed. A consumer that moves from the master to this slave therefore resumes
at the master's committed offsets. It lives in the server package because it writes the server's managers;
the HA package replicates the CommitLog only and knows nothing of them. A master that restores from one
of its slaves at start (broker.server.restore) copies the slave's metadata once with the same `sync_all`.

ACL 2.0 users and ACLs (broker.auth) come the same way, with RocketMQ's own admin requests AUTH_LIST_USER
(3005) and AUTH_LIST_ACL (3010): the broker's client signs them with innerClientAuthenticationCredentials, a
SUPER user on the master, so no body of our own is needed and a RocketMQ 5.3 master answers them too. The
slave's tables are replaced when they differ (passwords included: the slave authenticates the same users).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from broker.auth.store import AuthStore
from broker.protocol.bodies import DataVersion, fastjson_loads
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.server.groups import SubscriptionGroupConfig, SubscriptionGroupManager
from broker.server.offsets import ConsumerOffsetManager
from broker.server.schedule import ScheduleService
from broker.server.topics import TopicConfig, TopicConfigManager
from broker.transport.client import RemotingClient
from broker.transport.errors import RemotingError
from broker.transport.loop import cancel_and_wait

__all__ = ["SlaveSynchronize"]

log = logging.getLogger(__name__)

REQUEST_TIMEOUT = 3.0


class SlaveSynchronize:
    """`own_addr` / `master_addr`: this broker's address, and the master's as the NameServer last said."""

    def __init__(
        self,
        client: RemotingClient,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        schedule: ScheduleService,
        own_addr: Callable[[], str],
        master_addr: Callable[[], str | None],
        interval: float,
        *,
        auth: AuthStore | None = None,
    ) -> None:
        self.client = client
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.schedule = schedule
        self.own_addr = own_addr
        self.master_addr = master_addr
        self.interval = interval
        self.auth = auth
        self.last_sync_ok = 0.0
        self._task: asyncio.Task[None] | None = None
        self._failing = False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="slave-metadata-sync")

    async def close(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            addr = self.master_addr()
            if not addr or addr == self.own_addr():
                continue
            try:
                await self.sync_all(addr)
            except (RemotingError, OSError, ValueError, KeyError, TypeError) as exc:
                if not self._failing:
                    log.warning("slave metadata sync from %s failed: %s", addr, exc)
                self._failing = True
                continue
            if self._failing:
                log.info("slave metadata sync from %s works again", addr)
            self._failing = False

    async def _fetch(self, addr: str, code: int) -> Any:
        resp = await self.client.invoke(addr, RemotingCommand(code=code), REQUEST_TIMEOUT)
        if resp.code != ResponseCode.SUCCESS:
            raise ValueError(f"request {code} answered {resp.code} {resp.remark}")
        return fastjson_loads(resp.body) if resp.body else {}

    async def sync_all(self, addr: str) -> None:
        self.apply_topics(await self._fetch(addr, RequestCode.GET_ALL_TOPIC_CONFIG))
        self.apply_consumer_offsets(await self._fetch(addr, RequestCode.GET_ALL_CONSUMER_OFFSET))
        self.apply_delay_offsets(await self._fetch(addr, RequestCode.GET_ALL_DELAY_OFFSET))
        self.apply_subscription_groups(await self._fetch(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
        if self.auth is not None:
            users = await self._fetch(addr, RequestCode.AUTH_LIST_USER)
            acls = await self._fetch(addr, RequestCode.AUTH_LIST_ACL)
            if self.auth.replace_tables(users or [], acls or []):
                log.info("synchronized %d users and %d ACLs from the master", len(self.auth.users), len(self.auth.acls))
        self.last_sync_ok = asyncio.get_running_loop().time()

    def apply_topics(self, data: dict[str, Any]) -> bool:
        topics = self.topics
        version = DataVersion.from_json(data.get("dataVersion"))
        if version == topics.data_version:
            return False
        table = {name: TopicConfig.from_json(raw) for name, raw in (data.get("topicConfigTable") or {}).items()}
        topics.table.clear()
        topics.table.update(table)
        topics.data_version = version
        topics.persist()
        log.info("synchronized %d topic configs from the master (version %s)", len(table), version.counter)
        return True

    def apply_consumer_offsets(self, data: dict[str, Any]) -> bool:
        offsets = self.offsets
        changed = False
        for key, queues in (data.get("offsetTable") or {}).items():
            new = {int(q): int(o) for q, o in queues.items()}
            if offsets.table.get(str(key)) != new:
                offsets.table[str(key)] = new
                changed = True
        if changed:
            offsets.persist()
        return changed

    def apply_delay_offsets(self, data: dict[str, Any]) -> bool:
        schedule = self.schedule
        new = {int(level): int(off) for level, off in (data.get("offsetTable") or {}).items()}
        if all(schedule.offsets.get(level) == off for level, off in new.items()):
            return False
        schedule.offsets.update(new)
        schedule.persist()
        return True

    def apply_subscription_groups(self, data: dict[str, Any]) -> bool:
        groups = self.groups
        version = DataVersion.from_json(data.get("dataVersion"))
        if version == groups.data_version:
            return False
        table = {
            name: SubscriptionGroupConfig.from_json(raw)
            for name, raw in (data.get("subscriptionGroupTable") or {}).items()
        }
        groups.table.clear()
        groups.table.update(table)
        groups.data_version = version
        groups.persist()
        log.info("synchronized %d subscription groups from the master", len(table))
        return True
