"""ControllerManager: one controller, standalone (broker.cli.mqcontroller) or inside a NameServer.

Owns the Raft member (broker.controller.raft), this controller's view of the brokers (liveness), the
remoting server on the self peer's address that answers the controller requests, and the client that
pushes NOTIFY_BROKER_ROLE_CHANGED. It triggers elections: at once when a master's connection closes or its
heartbeat expires, and every scanInactiveMasterInterval for any group whose master is dead while a member
lives (a safety net for an election that failed or a leader that changed meanwhile). Only the serving
leader elects; the others keep their liveness view current so that any of them can take over.
"""

from __future__ import annotations

import asyncio
import logging

from broker.controller.bodies import encode_sync_state_set
from broker.controller.config import ControllerConfig
from broker.controller.liveness import BrokerLive, Liveness
from broker.controller.processors import ControllerProcessors, master_fields
from broker.controller.raft import NotLeader, ProposalFailed, RaftState
from broker.controller.state import BrokerGroup
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.transport.client import RemotingClient
from broker.transport.errors import CloseReason
from broker.transport.server import RemotingServer

__all__ = ["ControllerManager"]

log = logging.getLogger(__name__)

_RETRY_PAUSE = 1.0  # between the tries of a controller-triggered election


class ControllerManager:
    def __init__(self, config: ControllerConfig) -> None:
        self.config = config
        self.raft = RaftState(config)
        self.liveness = Liveness()
        self.processors = ControllerProcessors(config, self.raft, self.liveness, self._notify)
        me = config.self_peer
        self.server = RemotingServer(
            config.bind_address, me.port, max_frame_length=config.frame_max_length, idle_timeout=120
        )
        self.processors.register(self.server.dispatcher)
        self.server.add_close_listener(self._channel_closed)
        self.client = RemotingClient()
        self._tasks: set[asyncio.Task[None]] = set()
        self._electing: set[str] = set()

    @property
    def port(self) -> int:
        return self.server.port

    async def start(self) -> None:
        await self.server.start()
        try:
            await asyncio.to_thread(self.raft.start)
        except BaseException:
            await self.server.shutdown(0)
            raise
        self._spawn(self._scan_not_active())
        self._spawn(self._scan_inactive_masters())
        log.info("controller %s serving on %s", self.config.controller_dleger_self_id, self.server.address)

    async def shutdown(self, grace: float = 5.0) -> None:
        for task in list(self._tasks):
            task.cancel()
        await self.server.shutdown(grace)
        await self.client.close()
        await asyncio.to_thread(self.raft.close)

    def _spawn(self, coro: object) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- liveness -----------------------------------------------------------------------------------

    def _channel_closed(self, conn: object, reason: CloseReason) -> None:
        for gone in self.liveness.drop_channel(conn):
            self._inactive(gone)

    def _inactive(self, gone: BrokerLive) -> None:
        log.info("broker %s id %d (%s) is inactive", gone.broker_name, gone.broker_id, gone.address)
        if not self.raft.is_leader:
            return
        group = self.raft.group(gone.broker_name)
        if group is not None and group.master_broker_id == gone.broker_id:
            self._spawn(self._elect_with_retries(gone.broker_name))

    async def _elect_with_retries(self, name: str) -> None:
        if name in self._electing:
            return
        self._electing.add(name)
        try:
            for attempt in range(self.config.elect_master_max_retry_count):
                try:
                    outcome = await self.processors.elect(name, -1, False)
                except (NotLeader, ProposalFailed) as exc:
                    log.info("election of a master for %s failed: %s", name, exc)
                else:
                    if outcome.code in (ResponseCode.SUCCESS, ResponseCode.CONTROLLER_MASTER_STILL_EXIST):
                        return
                    log.info("no master for %s yet (%d: %s)", name, outcome.code, outcome.remark)
                if attempt + 1 < self.config.elect_master_max_retry_count:
                    await asyncio.sleep(_RETRY_PAUSE)
        finally:
            self._electing.discard(name)

    async def _scan_not_active(self) -> None:
        interval = self.config.scan_not_active_broker_interval / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                for gone in self.liveness.expire():
                    channel = gone.channel
                    close = getattr(channel, "close", None)
                    if close is not None:
                        close(CloseReason.IDLE)
                    self._inactive(gone)
            except Exception:
                log.exception("broker liveness scan failed")

    async def _scan_inactive_masters(self) -> None:
        interval = self.config.scan_inactive_master_interval / 1000
        while True:
            await asyncio.sleep(interval)
            if not self.raft.is_leader:
                continue
            try:
                groups = self.raft.read(lambda s: [g.copy() for g in s.groups.values()])
                for group in groups:
                    alive = self.liveness.alive_ids(group.broker_name)
                    master = group.master_broker_id
                    if alive and group.master_epoch > 0 and (master is None or master not in alive):
                        self._spawn(self._elect_with_retries(group.broker_name))
            except Exception:
                log.exception("inactive master scan failed")

    # -- notifications ------------------------------------------------------------------------------

    def _notify(self, group: BrokerGroup) -> None:
        if not self.config.notify_broker_role_changed:
            return
        fields = master_fields(group)
        body = encode_sync_state_set(group.sync_state_set, group.sync_state_set_epoch)
        for live in self.liveness.alive(group.broker_name).values():
            cmd = RemotingCommand(code=RequestCode.NOTIFY_BROKER_ROLE_CHANGED, ext_fields=dict(fields), body=body)
            self._spawn(self._send_oneway(live.address, cmd))

    async def _send_oneway(self, address: str, cmd: RemotingCommand) -> None:
        try:
            await self.client.invoke_oneway(address, cmd)
        except Exception as exc:  # a broker that cannot be told learns the change from its poll
            log.info("could not notify %s of the role change: %s", address, exc)
