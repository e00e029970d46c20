"""ControllerMode: a broker with enableControllerMode=true (RocketMQ 5's ReplicasManager).

Before it serves, the broker registers with the controller (`register()`): it gets its broker id (kept in
storePathBrokerIdentity, so a restarted broker keeps it), the group's master and epochs, and elects itself
when the group has no master. From then on (`start()`): it heartbeats to every controller, polls its group's
replica info, answers NOTIFY_BROKER_ROLE_CHANGED, and applies a role the controller gives with a newer master
epoch through the `RoleSink` (the broker: promote or demote in place). As master it keeps the SyncStateSet
through the controller (broker.ha.sync_state): it proposes the set its HA connections justify, and a refusal
(a newer master epoch: it lost its place) makes it look up its role at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import orjson

from broker.controller.client import ControllerClient, ControllerUnavailable, split_addresses
from broker.ha.epoch_file import EpochEntry, EpochFile
from broker.ha.master import HAMaster
from broker.ha.truncate import truncation_point
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.server.config import BrokerConfig
from broker.transport.client import RemotingClient
from broker.transport.connection import RemotingConnection
from broker.transport.errors import RemotingError

__all__ = ["ControllerMode", "GroupRole", "RoleSink"]

log = logging.getLogger(__name__)

_RETRY = 1.0  # seconds between tries of a failed registration step
_LONG_MAX = 2**63 - 1  # the last epoch's end (Long.MAX_VALUE), as RocketMQ writes it


@dataclass(frozen=True)
class GroupRole:
    """The group as the controller last said: master id (None: no master), its address and the epochs."""

    master_id: int | None
    master_address: str
    master_epoch: int
    sync_state_set: frozenset[int]
    set_epoch: int

    @classmethod
    def of(cls, reply: RemotingCommand) -> GroupRole:
        fields = reply.ext_fields
        master = fields.get("masterBrokerId") or ""
        members: frozenset[int] = frozenset()
        set_epoch = int(fields.get("syncStateSetEpoch") or 0)
        if reply.body:
            data = orjson.loads(reply.body)
            if isinstance(data, dict) and isinstance(data.get("syncStateSet"), list):
                members = frozenset(int(i) for i in data["syncStateSet"])
                set_epoch = int(data.get("syncStateSetEpoch", set_epoch))
        return cls(
            int(master) if master.lstrip("-").isdigit() and int(master) >= 0 else None,
            fields.get("masterAddress") or "",
            int(fields.get("masterEpoch") or 0),
            members,
            set_epoch,
        )


class RoleSink(Protocol):
    """What the broker does when the controller gives it a role."""

    async def become_master(self, role: GroupRole) -> None: ...

    async def become_slave(self, role: GroupRole) -> None: ...

    def ha_master(self) -> HAMaster | None: ...

    def max_offset(self) -> int: ...


class ControllerMode:
    def __init__(self, config: BrokerConfig, client: RemotingClient, sink: RoleSink) -> None:
        self.config = config
        self.sink = sink
        self.controllers = ControllerClient(split_addresses(config.controller_addr), client)
        root = Path(config.store_path_root_dir)
        self.identity_path = Path(config.store_path_broker_identity or root / "brokerIdentity")
        self.epochs = EpochFile(Path(config.store_path_epoch_file or root / "epochFileCheckpoint"))
        self.broker_id = -1
        self.role: GroupRole | None = None
        self.is_master = False
        self._tasks: list[asyncio.Task[None]] = []
        self._check = asyncio.Event()
        self._changing = asyncio.Lock()
        self._notified: set[asyncio.Task[None]] = set()

    # -- registration -------------------------------------------------------------------------------

    async def register(self) -> GroupRole:
        """Get an id, register, elect this broker if the group has no master; retried until it works."""
        self.epochs.load()
        while True:
            try:
                self.broker_id = await self._broker_id()
                role = await self._register()
                if role.master_id is None:
                    await self.heartbeat()
                    role = await self._elect_self() or role
                if role.master_id is not None:
                    return role
                log.info("broker group %s has no master yet; asking again", self.config.broker_name)
            except (ControllerUnavailable, RegistrationRefused) as exc:
                log.warning("controller registration: %s; retrying", exc)
            await asyncio.sleep(_RETRY)

    async def _broker_id(self) -> int:
        c = self.config
        if self.identity_path.exists():
            cluster, name, broker_id = self.identity_path.read_text().strip().split("#")[:3]
            if (cluster, name) != (c.broker_cluster_name, c.broker_name):
                raise RuntimeError(
                    f"{self.identity_path} names {cluster}/{name}, not {c.broker_cluster_name}/{c.broker_name}"
                )
            return int(broker_id)
        fields = {"clusterName": c.broker_cluster_name, "brokerName": c.broker_name}
        reply = await self._leader(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, fields)
        next_id = int(reply.ext_fields.get("nextBrokerId", "0"))
        check = f"{c.broker_addr};{int(time.time() * 1000)}"
        temp = self.identity_path.with_name(self.identity_path.name + "-temp")
        temp.parent.mkdir(parents=True, exist_ok=True)
        temp.write_text(f"{c.broker_cluster_name}#{c.broker_name}#{next_id}#{check}")
        apply = {**fields, "appliedBrokerId": str(next_id), "registerCheckCode": check}
        reply = await self._leader(RequestCode.CONTROLLER_APPLY_BROKER_ID, apply, check_ok=False)
        if reply.code != ResponseCode.SUCCESS:
            temp.unlink(missing_ok=True)
            raise RegistrationRefused(f"broker id {next_id} refused ({reply.code}: {reply.remark})")
        self.identity_path.write_text(f"{c.broker_cluster_name}#{c.broker_name}#{next_id}")
        temp.unlink(missing_ok=True)
        log.info("controller gave broker id %d to %s", next_id, c.broker_name)
        return next_id

    async def _register(self) -> GroupRole:
        c = self.config
        fields = {
            "clusterName": c.broker_cluster_name,
            "brokerName": c.broker_name,
            "brokerId": str(self.broker_id),
            "brokerAddress": c.broker_addr,
        }
        return GroupRole.of(await self._leader(RequestCode.CONTROLLER_REGISTER_BROKER, fields))

    async def _elect_self(self) -> GroupRole | None:
        c = self.config
        fields = {"clusterName": c.broker_cluster_name, "brokerName": c.broker_name, "brokerId": str(self.broker_id)}
        reply = await self._leader(RequestCode.CONTROLLER_ELECT_MASTER, fields, check_ok=False)
        if reply.code in (ResponseCode.SUCCESS, ResponseCode.CONTROLLER_MASTER_STILL_EXIST):
            return GroupRole.of(reply)
        log.info("election of %s id %d: %d %s", c.broker_name, self.broker_id, reply.code, reply.remark)
        return None

    async def _leader(
        self, code: int, fields: dict[str, str], body: bytes = b"", check_ok: bool = True
    ) -> RemotingCommand:
        reply = await self.controllers.invoke_leader(RemotingCommand(code=code, ext_fields=fields, body=body))
        if check_ok and reply.code != ResponseCode.SUCCESS:
            raise RegistrationRefused(f"request {code} refused ({reply.code}: {reply.remark})")
        return reply

    # -- running ------------------------------------------------------------------------------------

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._heartbeats(), name="controller-heartbeat"),
            loop.create_task(self._poll(), name="controller-poll"),
            loop.create_task(self._sync_state_checks(), name="sync-state-check"),
        ]

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def check_sync_state_now(self) -> None:
        self._check.set()

    async def heartbeat(self) -> None:
        c = self.config
        master = self.sink.ha_master()
        confirm = master.confirm_offset if master is not None else self.sink.max_offset()
        await self.controllers.heartbeat_all(
            {
                "clusterName": c.broker_cluster_name,
                "brokerAddr": c.broker_addr,
                "brokerName": c.broker_name,
                "brokerId": str(self.broker_id),
                "epoch": str(self.epochs.last_epoch),
                "maxOffset": str(self.sink.max_offset()),
                "confirmOffset": str(confirm),
                "heartbeatTimeoutMills": str(c.controller_heart_beat_timeout_mills),
                "electionPriority": str(c.broker_election_priority),
            }
        )

    async def _heartbeats(self) -> None:
        while True:
            try:
                await self.heartbeat()
            except Exception:
                log.exception("controller heartbeat failed")
            await asyncio.sleep(self.config.broker_heartbeat_interval / 1000)

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.config.sync_broker_metadata_period / 1000)
            await self._refresh_logged()

    async def _refresh_logged(self) -> None:
        try:
            await self.refresh()
        except Exception:
            log.exception("role refresh from the controller failed")

    async def refresh(self) -> None:
        """Ask the controller for the group's replica info and apply a newer role."""
        try:
            fields = {"brokerName": self.config.broker_name}
            reply = await self.controllers.invoke_leader(
                RemotingCommand(code=RequestCode.CONTROLLER_GET_REPLICA_INFO, ext_fields=fields)
            )
        except ControllerUnavailable as exc:
            log.info("controller replica info: %s", exc)
            return
        if reply.code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST:
            await self._register()
            return
        if reply.code == ResponseCode.SUCCESS:
            await self.apply(GroupRole.of(reply))
        await self.copy_master_epochs()

    async def copy_master_epochs(self) -> None:
        """As slave: keep the master's epoch history up to what this broker replicated (GET_BROKER_EPOCH_CACHE),
        so that its heartbeats report the epoch it holds data of, as the election ranks replicas by it."""
        role = self.role
        if self.is_master or role is None or not role.master_address:
            return
        try:
            reply = await self.controllers.client.invoke(
                role.master_address, RemotingCommand(code=RequestCode.GET_BROKER_EPOCH_CACHE), 3.0
            )
            if reply.code != ResponseCode.SUCCESS:
                return
            data = orjson.loads(reply.body)
            held = self.sink.max_offset()
            entries = [
                EpochEntry(int(e["epoch"]), int(e["startOffset"]))
                for e in data.get("epochList") or []
                if int(e["startOffset"]) <= held
            ]
        except (RemotingError, OSError, ValueError, KeyError, TypeError) as exc:
            log.debug("epoch history of the master %s: %s", role.master_address, exc)
            return
        self.epochs.replace(entries)

    def notified(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand | None:
        """NOTIFY_BROKER_ROLE_CHANGED (oneway). Taken as a hint only: the role is read back from the controller
        leader at once, so a forged notification cannot make this broker follow another master."""
        task = asyncio.get_running_loop().create_task(self._refresh_logged())
        self._notified.add(task)
        task.add_done_callback(self._notified.discard)
        return cmd.response(ResponseCode.SUCCESS)

    async def apply(self, role: GroupRole) -> None:
        """Take the role the controller gives, when its master epoch is newer than the one held."""
        async with self._changing:
            current = self.role
            if current is not None and role.master_epoch < current.master_epoch:
                return
            if current is not None and role.master_epoch == current.master_epoch:
                master = self.sink.ha_master()
                sync = master.sync if self.is_master and master is not None else None
                if master is not None and sync is not None and role.set_epoch > sync.set_epoch:
                    sync.adopt(set(role.sync_state_set), role.set_epoch)
                    master.sync_changed()
                return
            if role.master_id is None:
                self.role = role
                elected = await self._elect_self_safely()
                if elected is None or elected.master_id is None:
                    return
                role = elected
            self.role = role
            if role.master_id == self.broker_id:
                if not self.is_master or self.epochs.last_epoch < role.master_epoch:
                    self.epochs.append(role.master_epoch, self.sink.max_offset())
                    await self.sink.become_master(role)
                    self.is_master = True
            else:
                # A newer master epoch: whoever the master is now, this broker may hold a tail it never wrote
                # (a deposed master's, replicated before the move), so it replicates again from a checked point.
                self.is_master = False  # a slave from here on (divergence_point)
                await self.sink.become_slave(role)
            log.info(
                "%s id %d is %s at master epoch %d",
                self.config.broker_name,
                self.broker_id,
                "master" if self.is_master else f"slave of {role.master_id}",
                role.master_epoch,
            )

    async def divergence_point(self) -> int | None:
        """As a slave at start: the offset past which this broker's CommitLog is not its master's (what it
        wrote as a master after its epoch ended), from both epoch histories; None when nothing diverged or
        the master cannot tell."""
        role = self.role
        if self.is_master or role is None or not role.master_address or not self.epochs.entries:
            return None
        for _attempt in range(5):
            try:
                reply = await self.controllers.client.invoke(
                    role.master_address, RemotingCommand(code=RequestCode.GET_BROKER_EPOCH_CACHE), 3.0
                )
                if reply.code == ResponseCode.SUCCESS:
                    data = orjson.loads(reply.body)
                    theirs = [EpochEntry(int(e["epoch"]), int(e["startOffset"])) for e in data.get("epochList") or []]
                    mine = self.sink.max_offset()
                    point = truncation_point(self.epochs.entries, mine, theirs, int(data["maxOffset"]))
                    return point if point is not None and point < mine else None
            except (RemotingError, OSError, ValueError, KeyError, TypeError) as exc:
                log.info("epoch history of the master %s: %s", role.master_address, exc)
            await asyncio.sleep(_RETRY)
        return None

    def epoch_cache(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_EPOCH_CACHE (mqadmin getBrokerEpoch): this broker's epoch history, RocketMQ's EpochEntryCache."""
        c = self.config
        entries = self.epochs.entries
        epoch_list = [
            {
                "epoch": e.epoch,
                "startOffset": e.start_offset,
                "endOffset": entries[i + 1].start_offset if i + 1 < len(entries) else _LONG_MAX,
            }
            for i, e in enumerate(entries)
        ]
        body = {
            "clusterName": c.broker_cluster_name,
            "brokerName": c.broker_name,
            "brokerId": 0 if self.is_master else self.broker_id,
            "epochList": epoch_list,
            "maxOffset": self.sink.max_offset(),
        }
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps(body))

    async def _elect_self_safely(self) -> GroupRole | None:
        try:
            return await self._elect_self()
        except ControllerUnavailable as exc:
            log.info("election: %s", exc)
            return None

    async def _sync_state_checks(self) -> None:
        period = self.config.check_sync_state_set_period / 1000
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._check.wait(), period)
            self._check.clear()
            try:
                await self.propose_sync_state_set()
            except Exception:
                log.exception("SyncStateSet check failed")

    async def propose_sync_state_set(self) -> None:
        """As master: propose the set the HA connections justify, when it differs from the confirmed one."""
        master = self.sink.ha_master()
        role = self.role
        if not self.is_master or master is None or master.sync is None or role is None:
            return
        sync = master.sync
        wanted = sync.wanted(master.replicas(), master.confirm_offset, self.config.ha_max_time_slave_not_catchup / 1000)
        if wanted == sync.confirmed:
            return
        sync.proposed = wanted
        fields = {
            "brokerName": self.config.broker_name,
            "masterBrokerId": str(self.broker_id),
            "masterEpoch": str(role.master_epoch),
        }
        body = orjson.dumps({"syncStateSet": sorted(wanted), "syncStateSetEpoch": sync.set_epoch})
        try:
            reply = await self.controllers.invoke_leader(
                RemotingCommand(code=RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, ext_fields=fields, body=body)
            )
        except ControllerUnavailable as exc:
            sync.proposed = None
            log.info("SyncStateSet proposal %s not sent: %s", sorted(wanted), exc)
            return
        if reply.code == ResponseCode.SUCCESS:
            data = orjson.loads(reply.body)
            sync.adopt({int(i) for i in data["syncStateSet"]}, int(data["syncStateSetEpoch"]))
            master.sync_changed()
            log.info(
                "SyncStateSet of %s is %s (epoch %d)", self.config.broker_name, sorted(sync.confirmed), sync.set_epoch
            )
            return
        sync.proposed = None
        log.info("SyncStateSet proposal %s refused: %d %s", sorted(wanted), reply.code, reply.remark)
        if reply.code in (
            ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
            ResponseCode.CONTROLLER_INVALID_MASTER,
            ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
        ):
            await self.refresh()


class RegistrationRefused(Exception):
    """A controller refused a registration step."""
