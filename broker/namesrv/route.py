"""The NameServer's route table (RocketMQ's RouteInfoManager): brokers, clusters, topic queues, liveness.

Only the NameServer processors and its liveness scanner call this. Everything runs on the event-loop
thread, so there are no locks. Encoded route replies are cached per (topic, JSON form) and the cache
is dropped on every change, which makes the common request (GET_ROUTEINFO_BY_TOPIC) a dict lookup.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from broker.namesrv.body import (
    PERM_WRITE,
    BrokerData,
    DataVersion,
    QueueData,
    RegisterBrokerBody,
    encode_cluster_info,
    encode_topic_route,
)

__all__ = ["BrokerLiveInfo", "RegisterResult", "RouteInfoManager"]

log = logging.getLogger(__name__)

MASTER_ID = 0


@dataclass(slots=True)
class BrokerLiveInfo:
    last_update_ms: int
    timeout_ms: int
    data_version: DataVersion
    channel: Any  # the RemotingConnection the broker registered over (None in unit use)
    ha_server_addr: str
    broker_name: str
    broker_id: int


@dataclass(slots=True)
class RegisterResult:
    """What a registering broker learns: for a slave, its master's address and HA address."""

    master_addr: str | None = None
    ha_server_addr: str | None = None


@dataclass(slots=True)
class _Tables:
    topic_queue: dict[str, dict[str, QueueData]] = field(default_factory=dict)
    broker_addr: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr: dict[str, set[str]] = field(default_factory=dict)
    # Keyed by (clusterName, brokerAddr), like RocketMQ's BrokerAddrInfo.
    broker_live: dict[tuple[str, str], BrokerLiveInfo] = field(default_factory=dict)
    filter_server: dict[tuple[str, str], list[str]] = field(default_factory=dict)


class RouteInfoManager:
    """Route table; see the module docstring."""

    def __init__(self, *, default_timeout_ms: int = 120_000, delete_topic_with_broker_registration: bool = False):
        self.default_timeout_ms = default_timeout_ms
        self.delete_topic_with_broker_registration = delete_topic_with_broker_registration
        self._t = _Tables()
        self._route_cache: dict[tuple[str, bool], bytes | None] = {}

    def _changed(self) -> None:
        self._route_cache.clear()

    # ------------------------------------------------------------------ registration

    def register_broker(
        self,
        *,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        body: RegisterBrokerBody,
        timeout_ms: int | None = None,
        enable_acting_master: bool = False,
        zone_name: str | None = None,
        channel: Any = None,
        now_ms: int | None = None,
    ) -> RegisterResult | None:
        """Record a broker and, from its master (or prime slave), its topics. None = refused."""
        now_ms = _now_ms() if now_ms is None else now_ms
        t = self._t
        self._changed()
        t.cluster_addr.setdefault(cluster_name, set()).add(broker_name)
        broker_data = t.broker_addr.get(broker_name)
        register_first = broker_data is None
        if broker_data is None:
            broker_data = BrokerData(cluster_name, broker_name, {}, enable_acting_master, zone_name)
            t.broker_addr[broker_name] = broker_data
        broker_data.enable_acting_master = enable_acting_master
        if zone_name is not None:
            broker_data.zone_name = zone_name
        addrs = broker_data.broker_addrs
        # One address has one record: a slave switched to master is first removed under its old id.
        for old_id in [bid for bid, addr in addrs.items() if addr == broker_addr and bid != broker_id]:
            del addrs[old_id]
        if broker_id not in addrs and len(body.topic_configs) == 1:
            # RocketMQ 5 refuses a first registration carrying a single topic (a topic-change
            # re-registration racing the full one); the broker retries with the full list.
            log.warning("refusing first registration of %s (%s) with a single topic", broker_name, broker_addr)
            if not addrs:
                del t.broker_addr[broker_name]
                names = t.cluster_addr.get(cluster_name)
                if names is not None:
                    names.discard(broker_name)
                    if not names:
                        del t.cluster_addr[cluster_name]
            return None
        old_addr = addrs.get(broker_id)
        addrs[broker_id] = broker_addr
        register_first = register_first or old_addr is None
        is_master = broker_id == MASTER_ID
        is_prime_slave = not is_master and broker_id == min(addrs) and enable_acting_master
        key = (cluster_name, broker_addr)
        if is_master or is_prime_slave:
            previous = t.broker_live.get(key)
            changed = previous is None or previous.data_version != body.data_version
            if changed or register_first:
                for config in body.topic_configs.values():
                    perm = config.perm & ~PERM_WRITE if is_prime_slave else config.perm
                    queues = t.topic_queue.setdefault(config.topic_name, {})
                    queues[broker_name] = QueueData(
                        broker_name, config.read_queue_nums, config.write_queue_nums, perm, config.topic_sys_flag
                    )
                if is_master and self.delete_topic_with_broker_registration:
                    for topic in [
                        name
                        for name, queues in t.topic_queue.items()
                        if broker_name in queues and name not in body.topic_configs
                    ]:
                        self._remove_queue(topic, broker_name)
        if key not in t.broker_live:
            log.info(
                "new broker registered: %s %s id=%d addr=%s ha=%s",
                cluster_name,
                broker_name,
                broker_id,
                broker_addr,
                ha_server_addr,
            )
        t.broker_live[key] = BrokerLiveInfo(
            now_ms,
            timeout_ms if timeout_ms and timeout_ms > 0 else self.default_timeout_ms,
            body.data_version,
            channel,
            ha_server_addr,
            broker_name,
            broker_id,
        )
        if body.filter_server_list:
            t.filter_server[key] = list(body.filter_server_list)
        else:
            t.filter_server.pop(key, None)
        result = RegisterResult()
        if not is_master:
            master_addr = addrs.get(MASTER_ID)
            if master_addr is not None:
                master_live = t.broker_live.get((cluster_name, master_addr))
                if master_live is not None:
                    result.master_addr = master_addr
                    result.ha_server_addr = master_live.ha_server_addr
        return result

    def unregister_broker(self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int) -> bool:
        """Forget one broker address; returns False when it was not registered."""
        t = self._t
        live = t.broker_live.pop((cluster_name, broker_addr), None)
        t.filter_server.pop((cluster_name, broker_addr), None)
        broker_data = t.broker_addr.get(broker_name)
        removed_name = False
        min_id_changed = False
        found = live is not None
        if broker_data is not None:
            addrs = broker_data.broker_addrs
            if addrs and broker_id == min(addrs):
                min_id_changed = True
            for bid in [bid for bid, addr in addrs.items() if addr == broker_addr]:
                del addrs[bid]
                found = True
            if not addrs:
                del t.broker_addr[broker_name]
                removed_name = True
        if removed_name:
            names = t.cluster_addr.get(cluster_name)
            if names is not None:
                names.discard(broker_name)
                if not names:
                    del t.cluster_addr[cluster_name]
            for topic in [name for name, queues in t.topic_queue.items() if broker_name in queues]:
                self._remove_queue(topic, broker_name)
        elif (
            broker_data is not None
            and min_id_changed
            and broker_data.enable_acting_master
            and MASTER_ID not in broker_data.broker_addrs
        ):
            # Acting-master mode with the master gone: the slaves keep serving reads only.
            for queues in t.topic_queue.values():
                queue = queues.get(broker_name)
                if queue is not None:
                    queue.perm &= ~PERM_WRITE
        if found:
            self._changed()
            log.info("broker unregistered: %s %s id=%d addr=%s", cluster_name, broker_name, broker_id, broker_addr)
        return found

    def _remove_queue(self, topic: str, broker_name: str) -> None:
        queues = self._t.topic_queue.get(topic)
        if queues is None:
            return
        queues.pop(broker_name, None)
        if not queues:
            del self._t.topic_queue[topic]
            log.info("topic %s removed: no broker serves it any more", topic)

    # ------------------------------------------------------------------ liveness

    def refresh(
        self, cluster_name: str, broker_addr: str, *, timeout_ms: int | None = None, now_ms: int | None = None
    ) -> bool:
        live = self._t.broker_live.get((cluster_name, broker_addr))
        if live is None:
            return False
        live.last_update_ms = _now_ms() if now_ms is None else now_ms
        if timeout_ms:
            live.timeout_ms = timeout_ms
        return True

    def scan_not_active(self, now_ms: int | None = None) -> list[BrokerLiveInfo]:
        """Drop every broker silent for longer than its timeout; returns them (callers close channels)."""
        now_ms = _now_ms() if now_ms is None else now_ms
        expired = [
            (key, live) for key, live in self._t.broker_live.items() if live.last_update_ms + live.timeout_ms < now_ms
        ]
        for (cluster, addr), live in expired:
            log.warning(
                "broker %s (%s, %s) expired: silent for %d ms > %d ms",
                addr,
                live.broker_name,
                cluster,
                now_ms - live.last_update_ms,
                live.timeout_ms,
            )
            self.unregister_broker(cluster, addr, live.broker_name, live.broker_id)
        return [live for _key, live in expired]

    def on_channel_closed(self, channel: Any) -> int:
        """A broker's connection closed: drop every broker address registered over it at once."""
        gone = [(key, live) for key, live in self._t.broker_live.items() if live.channel is channel]
        for (cluster, addr), live in gone:
            log.info("broker %s (%s) channel closed, removing it", addr, live.broker_name)
            self.unregister_broker(cluster, addr, live.broker_name, live.broker_id)
        return len(gone)

    def data_version_changed(self, cluster_name: str, broker_addr: str, version: DataVersion) -> bool:
        live = self._t.broker_live.get((cluster_name, broker_addr))
        return live is None or live.data_version != version

    def broker_data_version(self, cluster_name: str, broker_addr: str) -> DataVersion | None:
        live = self._t.broker_live.get((cluster_name, broker_addr))
        return live.data_version if live is not None else None

    # ------------------------------------------------------------------ queries

    def topic_route(self, topic: str, *, standard_json: bool, order_topic_conf: str | None = None) -> bytes | None:
        """Encoded TopicRouteData of `topic`, or None when no live broker serves it."""
        if order_topic_conf is None:
            cache_key = (topic, standard_json)
            try:
                return self._route_cache[cache_key]
            except KeyError:
                encoded = self._build_route(topic, standard_json, None)
                self._route_cache[cache_key] = encoded
                return encoded
        return self._build_route(topic, standard_json, order_topic_conf)

    def _build_route(self, topic: str, standard_json: bool, order_topic_conf: str | None) -> bytes | None:
        t = self._t
        queues = t.topic_queue.get(topic)
        if not queues:
            return None
        broker_datas: list[dict[str, Any]] = []
        filter_table: dict[str, list[str]] = {}
        for broker_name in queues:
            data = t.broker_addr.get(broker_name)
            if data is None:
                continue
            addrs = dict(data.broker_addrs)
            if data.enable_acting_master and addrs and MASTER_ID not in addrs:
                # Present the lowest-id slave as the (read-only) master.
                acting = min(addrs)
                addrs[MASTER_ID] = addrs.pop(acting)
            broker_datas.append(data.to_json(addrs))
            for addr in data.broker_addrs.values():
                servers = t.filter_server.get((data.cluster, addr))
                if servers:
                    filter_table[addr] = servers
        if not broker_datas:
            return None
        return encode_topic_route(
            broker_datas,
            list(queues.values()),
            filter_table,
            standard_json=standard_json,
            order_topic_conf=order_topic_conf,
        )

    def cluster_info(self) -> bytes:
        return encode_cluster_info(self._t.broker_addr, self._t.cluster_addr)

    def all_topics(self) -> list[str]:
        return list(self._t.topic_queue)

    def topics_by_cluster(self, cluster: str) -> list[str]:
        names = self._t.cluster_addr.get(cluster, set())
        return [topic for topic, queues in self._t.topic_queue.items() if any(name in queues for name in names)]

    def has_topic(self, topic: str) -> bool:
        return topic in self._t.topic_queue

    def set_write_perm(self, broker_name: str, enable: bool) -> int:
        """WIPE/ADD_WRITE_PERM_OF_BROKER: change the write bit of every queue of a broker; returns the count."""
        count = 0
        for queues in self._t.topic_queue.values():
            queue = queues.get(broker_name)
            if queue is not None:
                queue.perm = queue.perm | PERM_WRITE if enable else queue.perm & ~PERM_WRITE
                count += 1
        if count:
            self._changed()
        return count

    def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        """DELETE_TOPIC_IN_NAMESRV: remove the topic, or only its queues on the brokers of `cluster`."""
        if cluster:
            for broker_name in self._t.cluster_addr.get(cluster, set()):
                self._remove_queue(topic, broker_name)
        else:
            self._t.topic_queue.pop(topic, None)
        self._changed()

    def live_brokers(self) -> dict[tuple[str, str], BrokerLiveInfo]:
        return dict(self._t.broker_live)


def _now_ms() -> int:
    # Monotonic: a wall-clock jump must not expire (or immortalise) every broker at once.
    return int(time.monotonic() * 1000)
