"""StartRestore: a master checks its slaves before it serves, and restores from one that is ahead of it.

`BrokerController` (broker.server.broker) runs it once on a master (brokerId 0) with
`restoreFromSlaveOnStart`, after the store recovered and before the HA server binds, the broker registers
with the NameServers or answers clients. It asks the NameServers which slaves of this brokerName are
registered (GET_BROKER_CLUSTER_INFO, 106) and each slave for its CommitLog end (GET_BROKER_RUNTIME_INFO,
its commitLogMaxOffset and the address of its HA restore source). If a slave holds more than this master
(the master's store was lost, e.g. ephemeral storage, or replaced), the master replicates the difference
from that slave (broker.ha.restore) and then copies its metadata: topics, subscription groups, consumer
and delay offsets, with the code a slave uses to copy them from its master (broker.server.slave_sync).

Every question has a short timeout: a NameServer or slave that does not answer is logged and passed over,
and the broker starts as it would have (a warning says so when its store is empty). A slave whose data
diverged from this master's (runtime info `haDiverged`) is never restored from.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from broker.ha.restore import RestoreResult, restore_commit_log
from broker.ha.settings import HASettings
from broker.protocol.bodies import fastjson_loads
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.server.config import BrokerConfig
from broker.server.slave_sync import SlaveSynchronize
from broker.store import MessageStore
from broker.transport.client import RemotingClient
from broker.transport.errors import RemotingError

__all__ = ["SlaveState", "StartRestore"]

log = logging.getLogger(__name__)

ASK_TIMEOUT = 3.0  # per NameServer and per slave question


@dataclass(frozen=True, slots=True)
class SlaveState:
    """What a slave said of itself (GET_BROKER_RUNTIME_INFO)."""

    broker_id: int
    addr: str
    max_offset: int
    min_offset: int
    ha_addr: str | None  # its restore source; None when it runs none
    diverged: str

    @classmethod
    def of(cls, broker_id: int, addr: str, table: dict[str, Any]) -> SlaveState:
        ha_addr: str | None = None
        if str(table.get("haRestoreSource", "")) == "true":
            ha_addr = str(table.get("haServerAddr") or "")
            port = str(table.get("haListenPort") or "")
            if not ha_addr and port:
                ha_addr = f"{addr.rpartition(':')[0]}:{port}"
        return cls(
            broker_id,
            addr,
            int(table.get("commitLogMaxOffset", 0)),
            int(table.get("commitLogMinOffset", 0)),
            ha_addr or None,
            str(table.get("haDiverged") or ""),
        )


class StartRestore:
    def __init__(
        self,
        config: BrokerConfig,
        client: RemotingClient,
        store: MessageStore,
        settings: HASettings,
        metadata: SlaveSynchronize,
        timeout: float = ASK_TIMEOUT,
    ) -> None:
        self.config = config
        self.client = client
        self.store = store
        self.settings = settings
        self.metadata = metadata
        self.timeout = timeout

    async def run(self) -> dict[str, str]:
        """Check the slaves and restore from the one furthest ahead, if any; returns runtime-info entries
        (`restoreFromSlave*`) saying what happened."""
        started = time.monotonic()
        own = self.store.max_phy_offset
        slaves = await self.registered_slaves()
        states = [s for s in await asyncio.gather(*(self.ask(i, a) for i, a in sorted(slaves.items()))) if s]
        if not states:
            why = "no slave registered" if not slaves else "no registered slave answered"
            if own == 0:
                log.warning(
                    "this master's CommitLog is empty and %s (%s): starting without a restore; a slave that holds "
                    "this group's older data will report itself diverged (haDiverged)",
                    why,
                    ", ".join(slaves.values()) or "NameServers " + ";".join(self.config.name_servers),
                )
            else:
                log.info("start check: %s; CommitLog ends at %d", why, own)
            return {"restoreFromSlave": why}
        ahead = sorted((s for s in states if s.max_offset > own), key=lambda s: s.max_offset, reverse=True)
        if not ahead:
            log.info(
                "start check: no slave is ahead of this master's CommitLog end %d (%s)",
                own,
                ", ".join(f"{s.addr}={s.max_offset}" for s in states),
            )
            return {"restoreFromSlave": "not needed"}
        for slave in ahead:
            if not self._usable(slave, own):
                continue
            assert slave.ha_addr is not None
            log.warning(
                "this master's CommitLog ends at %d but slave %s (brokerId %d) holds up to %d: restoring from its "
                "HA restore source %s before serving",
                own,
                slave.addr,
                slave.broker_id,
                slave.max_offset,
                slave.ha_addr,
            )
            result = await restore_commit_log(self.store, self.settings, slave.ha_addr, slave.max_offset)
            if result.restored_bytes <= 0:
                log.error("restore from slave %s brought nothing (%s)", slave.addr, result.diverged or "no data")
                continue
            return await self._copy_metadata(slave, result, started)
        log.error(
            "this master's CommitLog (end %d) is behind its slaves %s, and none could be restored from: starting "
            "with what it has",
            own,
            ", ".join(f"{s.addr}={s.max_offset}" for s in ahead),
        )
        return {"restoreFromSlave": "failed"}

    def _usable(self, slave: SlaveState, own: int) -> bool:
        if slave.diverged:
            log.error("slave %s is ahead but its data diverged from this master's: %s", slave.addr, slave.diverged)
            return False
        if slave.ha_addr is None:
            log.error("slave %s is ahead (%d > %d) but runs no HA restore source", slave.addr, slave.max_offset, own)
            return False
        if own > 0 and own < slave.min_offset:
            log.error(
                "slave %s is ahead but its CommitLog starts at %d, after this master's end %d: no restore",
                slave.addr,
                slave.min_offset,
                own,
            )
            return False
        return True

    async def _copy_metadata(self, slave: SlaveState, result: RestoreResult, started: float) -> dict[str, str]:
        copied = "topics, subscription groups, consumer and delay offsets"
        try:
            await self.metadata.sync_all(slave.addr)
        except (RemotingError, OSError, ValueError, KeyError, TypeError) as exc:
            copied = f"NOT copied ({type(exc).__name__}: {exc})"
            log.error("restore: copying the metadata of slave %s failed: %s", slave.addr, exc)
        log.warning(
            "restored %d bytes of CommitLog [%d, %d) from slave %s (HA %s) in %.2f s (%.2f s in all)%s; metadata: "
            "%d topics, %d subscription groups, %d consumer offset entries (%s)",
            result.restored_bytes,
            result.start,
            result.end,
            slave.addr,
            result.source,
            result.seconds,
            time.monotonic() - started,
            "" if result.complete else f", SHORT of the slave's end {result.target}",
            len(self.metadata.topics.table),
            len(self.metadata.groups.table),
            len(self.metadata.offsets.table),
            copied,
        )
        return {
            "restoreFromSlave": "restored" if result.complete else "partial",
            "restoreFromSlaveAddr": slave.addr,
            "restoreFromSlaveBytes": str(result.restored_bytes),
            "restoreFromSlaveMillis": f"{result.seconds * 1000:.0f}",
        }

    async def registered_slaves(self) -> dict[int, str]:
        """brokerId -> address of every slave of this brokerName any NameServer knows (this broker excluded)."""
        c = self.config
        answers = await asyncio.gather(*(self._cluster_info(ns) for ns in c.name_servers))
        slaves: dict[int, str] = {}
        for info in answers:
            data = (info.get("brokerAddrTable") or {}).get(c.broker_name) or {}
            if data.get("cluster", c.broker_cluster_name) != c.broker_cluster_name:
                continue
            for broker_id, addr in (data.get("brokerAddrs") or {}).items():
                if int(broker_id) != 0 and addr and addr != c.broker_addr:
                    slaves.setdefault(int(broker_id), str(addr))
        return slaves

    async def _cluster_info(self, namesrv: str) -> dict[str, Any]:
        try:
            resp = await self._invoke(namesrv, RequestCode.GET_BROKER_CLUSTER_INFO)
            data = fastjson_loads(resp.body) if resp.body else {}
            return data if isinstance(data, dict) else {}
        except (RemotingError, OSError, ValueError) as exc:
            log.warning("start check: NameServer %s did not give the cluster info: %s", namesrv, exc)
            return {}

    async def ask(self, broker_id: int, addr: str) -> SlaveState | None:
        try:
            resp = await self._invoke(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
            table = fastjson_loads(resp.body)["table"]
            return SlaveState.of(broker_id, addr, table)
        except (RemotingError, OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("start check: slave %s (brokerId %d) did not answer: %s", addr, broker_id, exc)
            return None

    async def _invoke(self, addr: str, code: int) -> RemotingCommand:
        # one bound for the connect and the answer (an unreachable address must not cost the connect timeout
        # on top)
        resp = await asyncio.wait_for(self.client.invoke(addr, RemotingCommand(code=code), self.timeout), self.timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise ValueError(f"request {code} answered {resp.code} {resp.remark}")
        return resp
