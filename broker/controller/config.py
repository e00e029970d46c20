"""ControllerConfig: the controller's settings with RocketMQ's key names (controller.conf, or namesrv.conf when
the controller runs inside the NameServer with enableControllerInNamesrv=true).

Built by broker.cli.mqcontroller and broker.cli.mqnamesrv from one properties file, which may hold keys of
the NameServer too: `from_properties` keeps the controller's own keys and leaves the others to their owner.

`controllerDLegerPeers` lists the controllers as `id-host:port;...`. As in RocketMQ's DLedger mode, a
controller serves the controller requests on its own peer address, so brokers' `controllerAddr` and
mqadmin's `-a` name the peer addresses. The Raft traffic (pysyncobj) runs on the peer port plus
`controllerRaftPortOffset` (ours; RocketMQ's DLedger shares one port), and its frames are authenticated with
a key derived from `controllerRaftPassword` (ours), because pysyncobj unpickles what it reads: a peer without
the key is disconnected before anything it sent is decoded. Without a password the key is the group name, no
secret, so the Raft port then listens on loopback alone and every peer must be on loopback (RocketMQ's
single-machine quick starts); controllers on several hosts need a password.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from broker.config.typed import load_model, model_aliases

__all__ = ["CONTROLLER_KEYS", "ControllerConfig", "Peer", "parse_peers"]

log = logging.getLogger(__name__)

_MAX_PEERS = 15


@dataclass(frozen=True)
class Peer:
    """One controller of `controllerDLegerPeers`: its id and the address that serves requests."""

    peer_id: str
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a DNS name other than localhost


def parse_peers(text: str) -> list[Peer]:
    """`n0-127.0.0.1:9878;n1-127.0.0.1:9868` -> peers, in order; ValueError naming what is wrong."""
    peers: list[Peer] = []
    for raw in text.split(";"):
        entry = raw.strip()
        if not entry:
            continue
        peer_id, sep, address = entry.partition("-")
        host, colon, port_text = address.rpartition(":")
        if not sep or not peer_id or not colon or not host:
            raise ValueError(f"peer {entry!r} is not id-host:port")
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ValueError(f"peer {entry!r} has no valid port")
        if any(p.peer_id == peer_id for p in peers):
            raise ValueError(f"peer id {peer_id!r} is listed twice")
        peers.append(Peer(peer_id, host, int(port_text)))
    if not peers:
        raise ValueError("no peer listed")
    if len(peers) > _MAX_PEERS:
        raise ValueError(f"{len(peers)} peers listed; at most {_MAX_PEERS}")
    return peers


def _default_store() -> str:
    return str(Path(os.path.expanduser("~")) / "DLedgerController")


class ControllerConfig(BaseModel):
    """Effective controller configuration. Field aliases are the property keys."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    rocketmq_home: str = Field(default_factory=lambda: os.environ.get("ROCKETMQ_HOME", ""), alias="rocketmqHome")
    controller_type: str = Field(default="DLedger", alias="controllerType")
    controller_dleger_group: str = Field(default="", alias="controllerDLegerGroup")
    controller_dleger_peers: str = Field(default="", alias="controllerDLegerPeers")
    controller_dleger_self_id: str = Field(default="", alias="controllerDLegerSelfId")
    controller_store_path: str = Field(default="", alias="controllerStorePath")
    mapped_file_size: int = Field(default=1024 * 1024 * 1024, ge=0, alias="mappedFileSize")
    enable_elect_unclean_master: bool = Field(default=False, alias="enableElectUncleanMaster")
    notify_broker_role_changed: bool = Field(default=True, alias="notifyBrokerRoleChanged")
    scan_not_active_broker_interval: int = Field(default=5000, ge=10, alias="scanNotActiveBrokerInterval")
    scan_inactive_master_interval: int = Field(default=5000, ge=10, alias="scanInactiveMasterInterval")
    elect_master_max_retry_count: int = Field(default=3, ge=1, le=100, alias="electMasterMaxRetryCount")
    controller_thread_pool_nums: int = Field(default=16, ge=1, alias="controllerThreadPoolNums")
    controller_request_thread_pool_queue_capacity: int = Field(
        default=50000, ge=1, alias="controllerRequestThreadPoolQueueCapacity"
    )
    process_read_event: bool = Field(default=False, alias="processReadEvent")
    config_store_path: str = Field(default="", alias="configStorePath")
    # Where the controller's requests are accepted (the port is the self peer's).
    bind_address: str = Field(default="0.0.0.0", alias="bindAddress")
    frame_max_length: int = Field(default=16 * 1024 * 1024, ge=1024, alias="frameMaxLength")
    # Ours: the Raft port is the peer port plus this, and the key its frames are authenticated with.
    controller_raft_port_offset: int = Field(default=1, ge=1, le=1000, alias="controllerRaftPortOffset")
    controller_raft_password: SecretStr = Field(default=SecretStr(""), alias="controllerRaftPassword")
    # Ours: Raft's election timeout range, ms (pysyncobj raftMinTimeout/raftMaxTimeout).
    controller_raft_election_timeout: int = Field(default=1000, ge=100, le=60000, alias="controllerRaftElectionTimeout")

    @model_validator(mode="after")
    def _check(self) -> ControllerConfig:
        if self.controller_type not in ("DLedger", "jRaft"):
            raise ValueError("controllerType must be DLedger or jRaft")
        try:
            peers = parse_peers(self.controller_dleger_peers)
        except ValueError as exc:
            raise ValueError(f"controllerDLegerPeers: {exc}") from None
        if self.controller_dleger_self_id not in {p.peer_id for p in peers}:
            raise ValueError(f"controllerDLegerSelfId {self.controller_dleger_self_id!r} is not in the peers")
        if any(p.port + self.controller_raft_port_offset > 65535 for p in peers):
            raise ValueError("a peer port plus controllerRaftPortOffset is above 65535")
        if not self.controller_raft_password.get_secret_value():
            remote = [p.host for p in peers if not _is_loopback(p.host)]
            if remote:
                raise ValueError(
                    f"controllerRaftPassword is required: peer {remote[0]} is not on this machine's loopback, and "
                    "the Raft port decodes (unpickles) what a holder of its key sends, so the key must be a secret"
                )
        return self

    @property
    def peers(self) -> list[Peer]:
        return parse_peers(self.controller_dleger_peers)

    @property
    def self_peer(self) -> Peer:
        return next(p for p in self.peers if p.peer_id == self.controller_dleger_self_id)

    @property
    def store_path(self) -> Path:
        return Path(self.controller_store_path or _default_store())

    @property
    def raft_bind_address(self) -> str:
        """Where the Raft port listens: `bindAddress`, or loopback alone while the key is not a secret (no
        controllerRaftPassword, which the check above allows only with every peer on loopback)."""
        return self.bind_address if self.controller_raft_password.get_secret_value() else "127.0.0.1"

    def raft_address(self, peer: Peer) -> str:
        return f"{peer.host}:{peer.port + self.controller_raft_port_offset}"

    @property
    def raft_password(self) -> str:
        return self.controller_raft_password.get_secret_value() or f"rocketcluster-controller:{self.group}"

    @property
    def group(self) -> str:
        return self.controller_dleger_group or "DEFAULT"

    @classmethod
    def from_properties(
        cls, values: Mapping[str, Any], source: str = "controller config", warn_unknown: bool = True
    ) -> ControllerConfig:
        """Validate the controller's keys of `values`; others are warned about (standalone) or left to the
        NameServer (embedded, `warn_unknown=False`). A bad value raises ConfigError naming the key."""
        known = model_aliases(cls)
        if warn_unknown:
            for key in sorted(k for k in values if k not in known):
                log.warning("unknown controller config key %r in %s is ignored", key, source)
        return load_model(cls, {k: v for k, v in values.items() if k in known}, source)


# Every key the controller reads: the NameServer does not warn about them in its file.
CONTROLLER_KEYS = frozenset(model_aliases(ControllerConfig))
