"""The controller's request processors: RocketMQ's controller request codes on the remoting protocol.

`ControllerManager` builds one `ControllerProcessors` and registers it on its server's dispatcher. Reads
(1004, 1006, 1012) are answered from the leader's state; changes (1001, 1002, 1003 with a new address, 1011,
1013) are answered once the Raft log committed them. Every code but 1005 (metadata), 904 (heartbeat) and
1010 (config) is answered 2007 CONTROLLER_NOT_LEADER by a controller that is not the serving leader, and
brokers and mqadmin then ask 1005 where the leader is.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from broker.config.typed import dump_properties
from broker.controller.bodies import (
    BodyError,
    decode_broker_names,
    decode_sync_state_set,
    encode_elect_body,
    encode_replicas_info,
    encode_sync_state_set,
)
from broker.controller.config import ControllerConfig
from broker.controller.liveness import BrokerLive, Liveness
from broker.controller.raft import NotLeader, ProposalFailed, RaftState
from broker.controller.state import BrokerGroup, ElectOutcome, Outcome
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.transport.connection import RemotingConnection
from broker.transport.dispatcher import Dispatcher

__all__ = ["ControllerProcessors", "master_fields"]

log = logging.getLogger(__name__)

_LONG = 2**63
_MAX_NAME = 255


class BadRequest(ValueError):
    """A header field that is missing or malformed; answered with SYSTEM_ERROR naming it."""


def _text(cmd: RemotingCommand, name: str, default: str | None = None) -> str:
    value = cmd.ext_fields.get(name)
    if value is None or value == "":
        if default is None:
            raise BadRequest(f"the custom field <{name}> is null")
        return default
    if len(value) > _MAX_NAME:
        raise BadRequest(f"the custom field <{name}> is longer than {_MAX_NAME}")
    return value


def _long(cmd: RemotingCommand, name: str, default: int | None = None) -> int:
    raw = cmd.ext_fields.get(name)
    if raw is None or raw == "":
        if default is None:
            raise BadRequest(f"the custom field <{name}> is null")
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"the custom field <{name}> is not a number: {raw[:40]!r}") from None
    if not -_LONG <= value < _LONG:
        raise BadRequest(f"the custom field <{name}> is out of range")
    return value


def _bool(cmd: RemotingCommand, name: str) -> bool:
    return cmd.ext_fields.get(name, "").strip().lower() == "true"


def master_fields(group: BrokerGroup) -> dict[str, str]:
    """The header fields naming a group's master and epochs (1002, 1003, 1004 replies and 1008)."""
    return {
        "masterBrokerId": str(group.master_broker_id) if group.master_broker_id is not None else "",
        "masterAddress": group.master_address,
        "masterEpoch": str(group.master_epoch),
        "syncStateSetEpoch": str(group.sync_state_set_epoch),
    }


Handler = Callable[[RemotingConnection, RemotingCommand], Awaitable[RemotingCommand | None]]


class ControllerProcessors:
    """One method per request code. `on_elected(group)` is told about each election that moved the master."""

    def __init__(
        self,
        config: ControllerConfig,
        raft: RaftState,
        liveness: Liveness,
        on_elected: Callable[[BrokerGroup], None],
    ) -> None:
        self.config = config
        self.raft = raft
        self.liveness = liveness
        self.on_elected = on_elected

    def register(self, dispatcher: Dispatcher) -> None:
        codes = RequestCode
        open_codes: dict[int, Handler] = {
            codes.BROKER_HEARTBEAT: self.heartbeat,
            codes.CONTROLLER_GET_METADATA_INFO: self.metadata,
            codes.GET_CONTROLLER_CONFIG: self.get_config,
        }
        leader_codes: dict[int, Handler] = {
            codes.CONTROLLER_ALTER_SYNC_STATE_SET: self.alter_sync_state_set,
            codes.CONTROLLER_ELECT_MASTER: self.elect_master,
            codes.CONTROLLER_REGISTER_BROKER: self.register_broker,
            codes.CONTROLLER_GET_REPLICA_INFO: self.replica_info,
            codes.CONTROLLER_GET_SYNC_STATE_DATA: self.sync_state_data,
            codes.CLEAN_BROKER_DATA: self.clean_broker_data,
            codes.CONTROLLER_GET_NEXT_BROKER_ID: self.next_broker_id,
            codes.CONTROLLER_APPLY_BROKER_ID: self.apply_broker_id,
        }
        for code, handler in open_codes.items():
            dispatcher.register(code, self._guarded(handler, leader_only=False))
        for code, handler in leader_codes.items():
            dispatcher.register(code, self._guarded(handler, leader_only=True))

    def _guarded(self, handler: Handler, leader_only: bool) -> Handler:
        async def call(conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand | None:
            if leader_only and not self.raft.is_leader:
                return cmd.response(ResponseCode.CONTROLLER_NOT_LEADER, "the controller is not the leader")
            try:
                return await handler(conn, cmd)
            except (BadRequest, BodyError) as exc:
                return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
            except NotLeader:
                return cmd.response(ResponseCode.CONTROLLER_NOT_LEADER, "the controller is not the leader")
            except ProposalFailed as exc:
                return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))

        return call

    # -- open to every controller -------------------------------------------------------------------

    async def heartbeat(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand | None:
        if not cmd.ext_fields.get("brokerId"):
            return cmd.response(ResponseCode.CONTROLLER_INVALID_REQUEST, "heartbeat without brokerId")
        beat = BrokerLive(
            cluster_name=_text(cmd, "clusterName"),
            broker_name=_text(cmd, "brokerName"),
            broker_id=_long(cmd, "brokerId"),
            address=_text(cmd, "brokerAddr"),
            last_update=0.0,
            timeout_ms=max(100, min(_long(cmd, "heartbeatTimeoutMills", 10_000), 3_600_000)),
            epoch=_long(cmd, "epoch", -1),
            max_offset=_long(cmd, "maxOffset", -1),
            confirm_offset=_long(cmd, "confirmOffset", -1),
            election_priority=_long(cmd, "electionPriority", 2**31 - 1),
            channel=conn,
        )
        self.liveness.heartbeat(beat)
        return cmd.response(ResponseCode.SUCCESS)

    async def metadata(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        leader = self.raft.leader()
        peers = ";".join(f"{p.peer_id}:{p.address}" for p in self.config.peers)
        fields = {
            "group": self.config.group,
            "controllerLeaderId": leader.peer_id if leader else "",
            "controllerLeaderAddress": leader.address if leader else "",
            "isLeader": "true" if self.raft.is_leader else "false",
            "peers": peers,
        }
        return cmd.response(ResponseCode.SUCCESS, ext_fields=fields)

    async def get_config(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        text = dump_properties(self.config).replace("controllerRaftPassword=**********\n", "")
        return cmd.response(ResponseCode.SUCCESS, body=text.encode())

    # -- the leader's -------------------------------------------------------------------------------

    async def next_broker_id(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        cluster, name = _text(cmd, "clusterName", ""), _text(cmd, "brokerName")
        next_id = self.raft.read(lambda s: s.next_broker_id(name))
        fields = {"clusterName": cluster, "brokerName": name, "nextBrokerId": str(next_id)}
        return cmd.response(ResponseCode.SUCCESS, ext_fields=fields)

    async def apply_broker_id(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        cluster, name = _text(cmd, "clusterName"), _text(cmd, "brokerName")
        broker_id = _long(cmd, "appliedBrokerId")
        check = _text(cmd, "registerCheckCode")
        outcome: Outcome = await self.raft.propose("apply_broker_id", cluster, name, broker_id, check)
        fields = {"clusterName": cluster, "brokerName": name}
        return cmd.response(outcome.code, outcome.remark or None, ext_fields=fields)

    async def register_broker(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        cluster, name = _text(cmd, "clusterName", ""), _text(cmd, "brokerName")
        broker_id, address = _long(cmd, "brokerId"), _text(cmd, "brokerAddress")
        group = self.raft.group(name)
        if group is None or broker_id not in group.addresses:
            return cmd.response(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "broker is not registered")
        if group.addresses[broker_id] != address:
            outcome: Outcome = await self.raft.propose("apply_broker_address", name, broker_id, address)
            if not outcome.ok or outcome.group is None:
                return cmd.response(outcome.code, outcome.remark)
            group = outcome.group
        fields = {"clusterName": cluster or group.cluster_name, "brokerName": name}
        master = group.master_broker_id
        if master is not None and self.liveness.get(name, master) is not None:
            fields.update(master_fields(group))
        body = encode_sync_state_set(group.sync_state_set, group.sync_state_set_epoch)
        return cmd.response(ResponseCode.SUCCESS, ext_fields=fields, body=body)

    async def replica_info(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        name = _text(cmd, "brokerName")
        group = self.raft.group(name)
        if group is None:
            return cmd.response(ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST, f"no metadata of {name}")
        fields = master_fields(group)
        del fields["syncStateSetEpoch"]
        body = encode_sync_state_set(group.sync_state_set, group.sync_state_set_epoch)
        return cmd.response(ResponseCode.SUCCESS, ext_fields=fields, body=body)

    async def sync_state_data(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        names = decode_broker_names(cmd.body)
        groups = [g for g in (self.raft.group(n) for n in names) if g is not None]
        alive = {g.broker_name: self.liveness.alive_ids(g.broker_name) for g in groups}
        return cmd.response(ResponseCode.SUCCESS, body=encode_replicas_info(groups, alive))

    async def alter_sync_state_set(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        name = _text(cmd, "brokerName")
        master, master_epoch = _long(cmd, "masterBrokerId"), _long(cmd, "masterEpoch")
        new_set, set_epoch = decode_sync_state_set(cmd.body)
        if conn.is_closing:  # the master is gone (its connection closed): its last proposal is moot
            return cmd.response(ResponseCode.CONTROLLER_BROKER_NOT_ALIVE, "the proposing master's connection closed")
        alive = self.liveness.alive_ids(name)
        outcome: Outcome = await self.raft.propose(
            "apply_alter_sync_state_set", name, master, master_epoch, new_set, set_epoch, alive
        )
        if not outcome.ok or outcome.group is None:
            return cmd.response(outcome.code, outcome.remark)
        group = outcome.group
        fields = {"newSyncStateSetEpoch": str(group.sync_state_set_epoch)}
        body = encode_sync_state_set(group.sync_state_set, group.sync_state_set_epoch)
        return cmd.response(ResponseCode.SUCCESS, ext_fields=fields, body=body)

    async def elect_master(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        name = _text(cmd, "brokerName")
        requester = _long(cmd, "brokerId", -1)
        designated = _bool(cmd, "designateElect")
        outcome = await self.elect(name, requester, designated)
        if outcome.group is None or outcome.code not in (
            ResponseCode.SUCCESS,
            ResponseCode.CONTROLLER_MASTER_STILL_EXIST,
        ):
            return cmd.response(outcome.code, outcome.remark)
        return cmd.response(
            outcome.code,
            outcome.remark or None,
            ext_fields=master_fields(outcome.group),
            body=encode_elect_body(outcome.group),
        )

    async def elect(self, name: str, requester: int, designated: bool) -> ElectOutcome:
        """Run one election through the log; brokers are told when it moved the master."""
        alive = self.liveness.candidates(name)
        outcome: ElectOutcome = await self.raft.propose(
            "apply_elect_master", name, requester, designated, alive, self.config.enable_elect_unclean_master
        )
        if outcome.changed and outcome.group is not None:
            log.info(
                "broker group %s: master %s at epoch %d",
                name,
                outcome.group.master_broker_id,
                outcome.group.master_epoch,
            )
            self.on_elected(outcome.group)
        return outcome

    async def clean_broker_data(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        name = _text(cmd, "brokerName")
        ids_text = cmd.ext_fields.get("brokerControllerIdsToClean", "") or ""
        try:
            ids = {int(part) for part in ids_text.split(";") if part.strip()} if ids_text.strip() else None
        except ValueError:
            raise BadRequest(f"brokerControllerIdsToClean is not ids: {ids_text[:40]!r}") from None
        living = _bool(cmd, "isCleanLivingBroker")
        alive = self.liveness.alive_ids(name)
        outcome: Outcome = await self.raft.propose("apply_clean_broker_data", name, ids, living, alive)
        if outcome.ok:
            self.liveness.forget(name, ids)
        return cmd.response(outcome.code, outcome.remark or None)
