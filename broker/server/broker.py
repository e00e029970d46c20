"""BrokerController: assembles and runs one broker (RocketMQ's BrokerController).

`mqbroker` (broker/cli/mqbroker.py) and the tests create it from a `LoadedConfig`, `await start()`
and `await shutdown()`. It owns the store, the remoting server and its processors, the topic /
group / offset managers, long polling, the schedule service, the transaction service and the
NameServer registration.

Start order: load managers -> bind the server (answering "starting" until ready) -> start the store
(storeHost needs the bound port) -> on a master, check the slaves and restore from one that is ahead
(broker.server.restore) -> register processors -> HA -> background services -> register with the
NameServers. Shutdown order: unregister -> stop reading -> finish in-flight sends -> answer held
pulls -> close connections -> persist offsets and configs -> flush and close the store.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from broker.auth.service import ServerAuth
from broker.ha.controller import HAController
from broker.ha.master import HAMaster
from broker.ha.settings import HASettings
from broker.ha.truncate import cut_commit_log, cut_torn_tail
from broker.metrics.settings import QUEUE_READ_EVERY_S, MetricsSettings
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.pop import revive_topic
from broker.server.clients import ConsumerManager, ProducerManager
from broker.server.config import BrokerConfig, LoadedConfig, store_config
from broker.server.controller_mode import ControllerMode, GroupRole
from broker.server.group_pull_counters import GroupGetStats
from broker.server.groups import SubscriptionGroupManager
from broker.server.hold import PullHoldService
from broker.server.locks import RebalanceLockManager
from broker.server.message_counters import BrokerStats
from broker.server.offsets import ConsumerOffsetManager
from broker.server.pop.assembly import PopParts
from broker.server.pop.service import PopService
from broker.server.processors.admin import AdminProcessor
from broker.server.processors.admin_routes import admin_routes
from broker.server.processors.client_manage import ClientManageProcessor
from broker.server.processors.offsets import OffsetProcessor
from broker.server.processors.pull import PullProcessor
from broker.server.processors.reply import ReplyProcessor
from broker.server.processors.send import SendProcessor
from broker.server.processors.send_back import SendBackProcessor
from broker.server.registration import Registrar
from broker.server.restore import StartRestore
from broker.server.schedule import ScheduleService
from broker.server.slave_sync import SlaveSynchronize
from broker.server.timer import TimerService
from broker.server.timer_message import TIMER_TOPIC
from broker.server.topics import SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TopicConfig, TopicConfigManager
from broker.server.transaction.processor import EndTransactionProcessor
from broker.server.transaction.service import TransactionService
from broker.store import MessageStore
from broker.store.config import StoreConfig
from broker.transport.client import RemotingClient
from broker.transport.connection import ConnectionConfig, RemotingConnection
from broker.transport.errors import CloseReason
from broker.transport.loop import cancel_and_wait
from broker.transport.server import RemotingServer
from broker.transport.tls import ServerTls, TlsSettings, outgoing_context

if TYPE_CHECKING:
    from broker.metrics.broker_meters import BrokerMeters
    from broker.metrics.exporter import MetricsExporter

__all__ = ["BrokerController"]

log = logging.getLogger(__name__)

CHANNEL_SCAN_INTERVAL = 10.0
SHUTDOWN_GRACE = 5.0


def ha_settings(
    c: BrokerConfig, sc: StoreConfig, tls: ServerTls | None = None, client_tls: ssl.SSLContext | None = None
) -> HASettings:
    """The replication knobs (broker.ha) from the broker's and the store's configuration; `tls` and `client_tls`
    are the broker's (its remoting port's ServerTls, its outgoing context)."""
    return HASettings(
        role=c.broker_role,
        listen_host=c.bind_address,
        listen_port=c.ha_listen_port or 0,
        master_address=c.ha_master_address or None,
        heartbeat_interval=c.ha_send_heartbeat_interval / 1000,
        housekeeping_interval=c.ha_housekeeping_interval / 1000,
        transfer_batch_size=c.ha_transfer_batch_size,
        slave_fallbehind_max=c.ha_slave_fallbehind_max,
        sync_timeout=sc.sync_flush_timeout / 1000,
        file_size=sc.mapped_file_size_commit_log,
        full_transfer_from_empty=c.ha_full_transfer_from_empty,
        slave_read_enable=c.slave_read_enable,
        memory_ratio_percent=c.access_message_in_memory_max_ratio,
        tls=tls,
        client_tls=client_tls,
    )


# Topics only the broker itself writes to (delays, transactions, the timer): metrics do not read their queues
_BROKER_OWN_TOPICS = frozenset((SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TIMER_TOPIC))


class BrokerController:
    def __init__(self, loaded: LoadedConfig) -> None:
        self.loaded = loaded
        self.config = loaded.broker
        self.store_config = store_config(loaded)
        config_dir = Path(self.config.store_path_root_dir) / "config"
        self.topics = TopicConfigManager(self.config, config_dir)
        self.offsets = ConsumerOffsetManager(config_dir)
        self.groups = SubscriptionGroupManager(config_dir, auto_create=self.config.auto_create_subscription_group)
        self.consumers = ConsumerManager(
            notify_enabled=self.config.notify_consumer_ids_changed_enable,
            channel_expired_timeout_ms=self.config.channel_expired_timeout,
        )
        self.consumers.group_notify_enabled = self._group_notify_enabled
        self.producers = ProducerManager(self.config.channel_expired_timeout)
        self.locks = RebalanceLockManager()
        self.stats = BrokerStats()
        # Always on (statsAll, consumerProgress, 315): messages and pull offsets per topic and group
        self.get_stats = GroupGetStats()
        # Metrics: the hot path counts into `meters` only when they exist (metricsExporterType=PROM)
        metrics = MetricsSettings.of(self.config)
        self.meters: BrokerMeters | None = None
        self.metrics: MetricsExporter | None = None
        if metrics.enabled:
            # imported here: with metrics off the broker never loads prometheus_client or numpy
            from broker.metrics import broker_collector, broker_meters, exporter

            self.meters = broker_meters.BrokerMeters()
            self.metrics = exporter.MetricsExporter(metrics, broker_collector.BrokerCollector(self, self.meters))
        # TLS (broker.transport.tls): the remoting and HA ports' modes and certificate, and this broker's own
        # outgoing connections (NameServers, its master), from the tls.* keys
        tls = TlsSettings.of(self.config)
        self.tls = ServerTls(tls, name="broker")
        # Authentication and authorization (broker.auth): users and ACLs beside the other metadata; the broker signs
        # its own requests (registration, slave sync, restore) with innerClientAuthenticationCredentials
        self.auth = ServerAuth.of_broker(self.config, config_dir)
        self.client = RemotingClient(tls=outgoing_context(tls), signer=self.auth.credentials)
        self.registrar = Registrar(self.config, self.client, self.topics.wrapper)
        self.server: RemotingServer | None = None
        self._store: MessageStore | None = None
        self._schedule: ScheduleService | None = None
        self._timer: TimerService | None = None
        self._pop: PopParts | None = None
        self._hold: PullHoldService | None = None
        self._transactions: TransactionService | None = None
        self.ha: HAController | None = None
        self.slave_sync: SlaveSynchronize | None = None
        # enableControllerMode: the controller gives the id and the role, and may change the role while running
        self.controller_mode: ControllerMode | None = None
        self.send: SendProcessor
        self.pull: PullProcessor
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False
        self._stopping = False

    # ------------------------------------------------------------------ parts that exist once started

    @property
    def store(self) -> MessageStore:
        if self._store is None:
            raise RuntimeError("the broker's store is not started")
        return self._store

    @property
    def started_store(self) -> MessageStore | None:
        """The store once `start()` opened it, None before (the metrics port opens first)."""
        return self._store

    @property
    def sends_in_flight(self) -> int:
        """Puts waiting for the group commit or a slave; 0 before the processors are registered."""
        send: SendProcessor | None = getattr(self, "send", None)
        return len(send.in_flight) if send is not None else 0

    @property
    def hold(self) -> PullHoldService:
        assert self._hold is not None
        return self._hold

    @property
    def schedule(self) -> ScheduleService:
        assert self._schedule is not None
        return self._schedule

    @property
    def timer(self) -> TimerService:
        assert self._timer is not None
        return self._timer

    @property
    def pop(self) -> PopService:
        """POP operations for in-process callers (the gRPC endpoint); exists once the broker started."""
        assert self._pop is not None
        return self._pop.service

    @property
    def transactions(self) -> TransactionService:
        assert self._transactions is not None
        return self._transactions

    @property
    def port(self) -> int:
        return self.config.listen_port

    @property
    def addr(self) -> str:
        return self.config.broker_addr

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        started = time.monotonic()
        if self.metrics is not None:
            # first: a metrics port in use fails the start before any other port or file is taken
            await self.metrics.start()
        try:
            await self._start(started)
        except BaseException:
            if self.metrics is not None:
                await self.metrics.close()
            raise

    async def _start(self, started: float) -> None:
        c = self.config
        self.topics.load()
        self.offsets.load()
        self.groups.load()
        self.auth.load()

        server = self.server = RemotingServer(
            c.bind_address,
            c.listen_port,
            idle_timeout=c.server_channel_max_idle_time_seconds,
            max_frame_length=c.frame_max_length,
            # 0 turns a bound off
            frame_timeout=c.server_frame_timeout_millis / 1000 or None,
            incomplete_frames_limit=c.server_incomplete_frames_max_bytes or None,
            config=ConnectionConfig(write_buffer_limit=c.server_write_buffer_max_bytes),
            tls=self.tls,
        )
        server.register_default(self._starting)
        server.add_close_listener(self._connection_closed)
        await server.start()
        if c.listen_port == 0:
            c.listen_port = server.port  # ephemeral port (tests): storeHost and registration need the real one
            # haListenPort defaults to 0 then too: the HA service binds a free port and records it

        self._store = MessageStore(self.store_config, store_host=(c.broker_ip1, c.listen_port))
        try:
            await self._store.start()
        except BaseException:
            await server.shutdown(0.5)
            raise
        self._schedule = ScheduleService(self._store, c.delay_levels_ms, Path(c.store_path_root_dir) / "config")
        self._schedule.load()
        # A master checks its slaves before anything else uses the store or its metadata (the transaction
        # service reads its progress from the consumer offsets). The remoting port stays bound meanwhile and
        # answers every request SYSTEM_BUSY "starting" (no processor is registered yet): clients and the
        # readiness probe retry, as at any start, rather than meeting a closed port; the HA port is not
        # bound and nothing is registered with the NameServers until the check is done.
        if c.enable_controller_mode:
            # fenced until the controller names the role: no processor, no HA, no NameServer registration yet
            self.controller_mode = ControllerMode(c, self.client, self)
            await self.controller_mode.apply(await self.controller_mode.register())
            if not c.is_master:
                await self._cut_diverged_tail(self.controller_mode)
        restored = await self._restore_from_slaves(self._store)
        if self.meters is not None:  # before any put: plain sends are counted from the ConsumeQueues from here
            own = _BROKER_OWN_TOPICS | {revive_topic(c.broker_cluster_name)}  # POP's checkpoints and acks
            self.meters.attach(self._store, master=c.is_master, skip=own)
        self._timer = TimerService(self._store, Path(c.store_path_root_dir) / "config")
        self._timer.load()
        self._pop = PopParts(self, self._timer, Path(c.store_path_root_dir) / "config")
        self._pop.load()
        self._transactions = TransactionService(self)
        self._transactions.load()
        self._register_processors(server)
        self.auth.install(server.dispatcher)  # before the metrics wrap the routes: they time refusals too
        if self.meters is not None:
            from broker.metrics.rpc import instrument

            instrument(server.dispatcher, self.meters.rpc)
        self._hold = PullHoldService(self.pull.rerun, self._store.get_max_offset_in_queue)
        self._hold.start()
        self._store.add_arrival_listener(self._hold.notify)
        self._store.add_arrival_listener(self._pop.service.waiters.notify)
        server.register_default(None)  # from now on unknown codes get REQUEST_CODE_NOT_SUPPORTED
        self.topics.on_change = self._topic_changed
        # HA before registering: the registration carries haServerAddr (the bound HA port)
        registrar = self.registrar
        self.ha = self._ha_controller()
        self.ha.start_restore = restored
        await self._start_ha(self.ha)
        if not c.is_master:
            self.slave_sync = self._metadata_sync(lambda: registrar.master_addr)
            self.slave_sync.start()

        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self.offsets.flush_periodically(c.flush_consumer_offset_interval)),
            loop.create_task(self._scan_channels()),
            loop.create_task(self._sample_stats()),
            loop.create_task(self.registrar.run_periodically()),
            loop.create_task(self.auth.run()),
        ]
        if c.is_master:
            self._schedule.start()
            self._timer.start()
            self._transactions.start()
            self._pop.start()
        await self.registrar.register_all()
        if self.controller_mode is not None:
            server.register(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, self.controller_mode.notified)
            server.register(RequestCode.GET_BROKER_EPOCH_CACHE, self.controller_mode.epoch_cache)
            self.controller_mode.start()
        self._started = True
        log.info(
            "The broker[%s, %s] boot success. serializeType=JSON and name server is %s (%.0f ms, %s, %s)",
            c.broker_name,
            c.broker_addr,
            c.namesrv_addr,
            (time.monotonic() - started) * 1000,
            c.broker_role,
            c.flush_disk_type,
        )

    def _metadata_sync(self, master_addr: Callable[[], str | None]) -> SlaveSynchronize:
        c = self.config
        return SlaveSynchronize(
            self.client,
            self.topics,
            self.groups,
            self.offsets,
            self.schedule,
            lambda: self.addr,
            master_addr,
            c.slave_sync_interval / 1000,
            auth=self.auth.store,
        )

    async def _restore_from_slaves(self, store: MessageStore) -> dict[str, str]:
        """On a master with restoreFromSlaveOnStart: catch up from a slave that holds more (StartRestore)."""
        c = self.config
        if not c.is_master or c.broker_id != 0 or not c.restore_from_slave_on_start or not c.name_servers:
            return {}
        if c.enable_controller_mode:  # the controller elects from the SyncStateSet: no restore from a slave
            return {}
        restore = StartRestore(
            c,
            self.client,
            store,
            ha_settings(c, self.store_config, self.tls, self.client.tls),
            self._metadata_sync(lambda: None),
        )
        return await restore.run()

    def _register_processors(self, server: RemotingServer) -> None:
        self.send = SendProcessor(self)
        self.pull = PullProcessor(self)
        # Processors get the parts they read (processors/context.py); a few still take the whole broker
        offsets = OffsetProcessor(self.offsets, self.store)
        clients = ClientManageProcessor(
            self.config, self.topics, self.groups, self.consumers, self.producers, self.locks
        )
        admin = AdminProcessor(self)
        send_back = SendBackProcessor(self)
        end_transaction = EndTransactionProcessor(self)
        reply = ReplyProcessor(self)
        rc = RequestCode
        routes = {
            rc.SEND_MESSAGE: self.send.handle,
            rc.SEND_MESSAGE_V2: self.send.handle,
            rc.SEND_BATCH_MESSAGE: self.send.handle,
            rc.SEND_REPLY_MESSAGE: reply.handle,
            rc.SEND_REPLY_MESSAGE_V2: reply.handle,
            rc.PULL_MESSAGE: self.pull.handle,
            rc.LITE_PULL_MESSAGE: self.pull.handle,
            rc.QUERY_CONSUMER_OFFSET: offsets.query_consumer_offset,
            rc.UPDATE_CONSUMER_OFFSET: offsets.update_consumer_offset,
            rc.GET_MAX_OFFSET: offsets.get_max_offset,
            rc.GET_MIN_OFFSET: offsets.get_min_offset,
            rc.SEARCH_OFFSET_BY_TIMESTAMP: offsets.search_offset,
            rc.GET_EARLIEST_MSG_STORETIME: offsets.earliest_msg_storetime,
            rc.HEART_BEAT: clients.heart_beat,
            rc.UNREGISTER_CLIENT: clients.unregister_client,
            rc.GET_CONSUMER_LIST_BY_GROUP: clients.consumer_list,
            rc.LOCK_BATCH_MQ: clients.lock_batch,
            rc.UNLOCK_BATCH_MQ: clients.unlock_batch,
            rc.CHECK_CLIENT_CONFIG: clients.check_client_config,
            rc.CONSUMER_SEND_MSG_BACK: send_back.handle,
            rc.END_TRANSACTION: end_transaction.handle,
            rc.UPDATE_AND_CREATE_TOPIC: admin.update_and_create_topic,
            rc.DELETE_TOPIC_IN_BROKER: admin.delete_topic,
            rc.GET_ALL_TOPIC_CONFIG: admin.get_all_topic_config,
            rc.GET_BROKER_RUNTIME_INFO: admin.runtime_info,
            rc.VIEW_MESSAGE_BY_ID: admin.view_message_by_id,
            rc.QUERY_MESSAGE: admin.query_message,
            rc.INVOKE_BROKER_TO_RESET_OFFSET: admin.reset_offset,
            rc.GET_ALL_CONSUMER_OFFSET: admin.get_all_consumer_offset,
            rc.GET_ALL_DELAY_OFFSET: admin.get_all_delay_offset,
            rc.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: admin.get_all_subscription_groups,
            rc.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: admin.update_subscription_group,
            rc.GET_BROKER_CONFIG: admin.get_broker_config,
            **admin_routes(self),
            **(self._pop.routes() if self._pop is not None else {}),
            **self.auth.routes(),
        }
        for code, handler in routes.items():
            server.register(code, handler)

    async def shutdown(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        c = self.config
        log.info("shutting down broker[%s, %s]", c.broker_name, c.broker_addr)
        if self.metrics is not None:
            await self.metrics.close()  # no scrape reads a store that is closing
        if self.controller_mode is not None:
            await self.controller_mode.close()
        if self._started:
            await self.registrar.unregister_all()
        server = self.server
        if server is not None:
            for conn in list(server.connections):
                conn.stop_reading()
            if self._store is not None and hasattr(self, "send") and self.send.in_flight:
                _done, pending = await asyncio.wait(list(self.send.in_flight), timeout=SHUTDOWN_GRACE)
                if pending:
                    log.warning("shutdown: %d sends still running after %.1fs", len(pending), SHUTDOWN_GRACE)
        if self._hold is not None:
            await self._hold.close()
        if self._pop is not None:
            await self._pop.close()  # parked pops answer; the revive service stops before the store
        if server is not None:
            await server.shutdown(SHUTDOWN_GRACE)
        await cancel_and_wait(*self._tasks)
        if self.slave_sync is not None:
            await self.slave_sync.close()
        if self._schedule is not None:
            await self._schedule.close()
        if self._timer is not None:
            await self._timer.close()
        if self._transactions is not None:
            await self._transactions.close()  # records its progress in the offset table persisted next
        self.offsets.persist()
        self.groups.persist()
        self.topics.persist()
        if self.ha is not None:
            await self.ha.close()  # no replication into a store that is closing
        if self._store is not None:
            await self._store.shutdown()
        await self.client.close()
        log.info("the broker[%s, %s] shutdown ok", c.broker_name, c.broker_addr)

    # ------------------------------------------------------------------ HA and controller-mode roles

    def _ha_controller(self) -> HAController:
        c = self.config
        settings = ha_settings(c, self.store_config, self.tls, self.client.tls)
        if self.controller_mode is not None:
            settings = dataclasses.replace(
                settings,
                broker_id=self.controller_mode.broker_id,
                all_ack=c.all_ack_in_sync_state_set,
                max_time_not_catchup=c.ha_max_time_slave_not_catchup / 1000,
                in_sync_replicas=c.in_sync_replicas,
                min_in_sync_replicas=c.min_in_sync_replicas,
            )
        registrar = self.registrar
        mode = self.controller_mode

        def named_master() -> bool:
            """In controller mode the NameServer's master counts only when it is the controller's: a deposed
            master that still reaches the NameServers can hold id 0 in its routes for a while."""
            role = mode.role if mode is not None else None
            return mode is None or (role is not None and registrar.master_addr == role.master_address)

        return HAController(
            self.store,
            settings,
            lambda: registrar.master_ha_addr if named_master() else None,
            lambda: registrar.master_addr if named_master() else None,
            lambda: c.ha_server_addr,
            on_master_lost=registrar.trigger,
        )

    async def _start_ha(self, ha: HAController) -> None:
        c = self.config
        ha_port = await ha.start()
        if ha_port is not None:
            c.ha_listen_port = ha_port  # when 0 was asked for: the registration must carry the real one
        mode, role = self.controller_mode, self.controller_mode.role if self.controller_mode else None
        if mode is not None and role is not None and ha.master is not None and ha.master.sync is not None:
            ha.master.sync.adopt(set(role.sync_state_set) or {mode.broker_id}, role.set_epoch)
            ha.master.on_sync_change = mode.check_sync_state_now

    async def _cut_diverged_tail(self, mode: ControllerMode) -> None:
        """A returning old master: drop what it wrote after its epoch ended (no replica acknowledged it, and
        the new master does not hold it) before anything reads the store, so it can follow the new master."""
        point = await mode.divergence_point()
        if point is None:
            return
        c, sc = self.config, self.store_config
        log.warning(
            "CommitLog ends at %d but the master's history agrees only up to %d: cutting the rest",
            self.store.max_phy_offset,
            point,
        )
        await self.store.shutdown()
        await asyncio.to_thread(cut_commit_log, Path(sc.commit_log_dir), sc.mapped_file_size_commit_log, point)
        Path(sc.abort_path).touch()  # recover by scanning: the queues and the index are rebuilt up to the cut
        self._store = MessageStore(sc, store_host=(c.broker_ip1, c.listen_port))
        await self._store.start()
        mode.epochs.replace([e for e in mode.epochs.entries if e.start_offset < point])

    async def _cut_running_tail(self, mode: ControllerMode) -> None:
        """Drop, in place, what this running broker holds past the new master's history (what a master deposed
        by a healed partition or a handover wrote after its epoch ended, or a slave replicated from it),
        before it replicates from the new master. It takes no puts and has no replication by now."""
        point = await mode.divergence_point()
        if point is None:
            return
        log.warning(
            "CommitLog ends at %d but the master's history agrees only up to %d: cutting the rest while running",
            self.store.max_phy_offset,
            point,
        )
        await self.store.truncate_running(point)
        mode.epochs.replace([e for e in mode.epochs.entries if e.start_offset < point])

    def _set_role(self, role: str, broker_id: int) -> None:
        self.config.broker_role = role  # type: ignore[assignment]
        self.config.broker_id = broker_id
        self.store.config.broker_role = role  # type: ignore[assignment]

    def ha_master(self) -> HAMaster | None:
        return self.ha.master if self.ha is not None else None

    def max_offset(self) -> int:
        return self.store.max_phy_offset

    async def become_master(self, role: GroupRole) -> None:
        """Controller mode: this broker was elected. Before the broker runs (at start) only the role is set;
        while it runs, the slave's replication stops, the HA server starts and the NameServers hear of id 0."""
        self._set_role("SYNC_MASTER", 0)
        if self.ha is None:
            return
        await self.ha.close()
        if self.slave_sync is not None:
            await self.slave_sync.close()
            self.slave_sync = None
        # what replication brought in joins the queues before the first put: puts continue after it, from a
        # record boundary
        cut_torn_tail(self.store)
        behind = await self.store.adopt_replicated(5.0)
        if behind:
            log.warning("new master: %d replicated bytes not dispatched yet", behind)
        self.ha = self._ha_controller()
        await self._start_ha(self.ha)  # sets the store's replica: puts are taken from here on
        if self._schedule is not None:
            self._schedule.start()
        if self._timer is not None:
            self._timer.start()
        if self._pop is not None:
            self._pop.start()
        self.transactions.start()
        self.registrar.trigger()

    async def become_slave(self, role: GroupRole) -> None:
        """Controller mode: another broker is master, at a newer epoch. A master that lost its place stops
        taking puts at once (its HA server and replica go). Master or slave before, what this broker holds
        past the new master's history is cut (a deposed master's unacknowledged tail, which a slave may have
        replicated too) before it replicates from the new master."""
        mode = self.controller_mode
        assert mode is not None
        self._set_role("SLAVE", mode.broker_id)
        if self.ha is None:
            return
        await self.ha.close()
        self.store.set_replica(None)  # recomputes the put path: a SLAVE refuses puts
        await self._cut_running_tail(mode)
        self.ha = self._ha_controller()
        await self._start_ha(self.ha)
        if self.slave_sync is None:
            registrar = self.registrar
            self.slave_sync = self._metadata_sync(lambda: registrar.master_addr)
            self.slave_sync.start()
        self.registrar.trigger()

    # ------------------------------------------------------------------ hooks and background work

    def _starting(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SYSTEM_BUSY, "broker is starting, try again later")

    def _topic_changed(self, tc: TopicConfig) -> None:
        self.trigger_register()

    def trigger_register(self) -> None:
        self.registrar.trigger()

    def schedule_wakeup(self) -> None:
        if self._schedule is not None:
            self._schedule.wakeup.set()

    def _group_notify_enabled(self, group: str) -> bool:
        cfg = self.groups.table.get(group)
        return cfg is None or cfg.notify_consumer_ids_changed_enable

    def _connection_closed(self, conn: RemotingConnection, reason: CloseReason) -> None:
        groups = self.consumers.connection_closed(conn)
        self.producers.connection_closed(conn)
        if groups:
            log.info("channel %s closed (%s); left consumer groups %s", conn.peer, reason.value, groups)

    async def _scan_channels(self) -> None:
        while True:
            await asyncio.sleep(CHANNEL_SCAN_INTERVAL)
            self.consumers.scan_expired()
            self.producers.scan_expired()

    async def _sample_stats(self) -> None:
        seconds = 0
        while True:
            await asyncio.sleep(1.0)
            self.stats.sample()
            self.get_stats.sample()
            seconds += 1
            if self.meters is not None and seconds % QUEUE_READ_EVERY_S == 0:
                self.meters.read_queues()
