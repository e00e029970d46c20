"""RestoreSource: a slave's read-only HA server, from which its master restores a CommitLog it lost.

Started by the HA controller (broker.ha.controller) on SLAVE brokers, on haListenPort. It is the master's
HA server (broker.ha.master) with the same wire protocol: a peer connects, reports its max offset and gets
this slave's CommitLog streamed from there; an empty peer gets everything from the slave's first file. It
is never the store's replica (no `store.set_replica`): what peers report feeds only this object's
bookkeeping, never the slave's store or its own replication. The slave's replication client
(broker.ha.slave) tells it of each append (`data_appended`), so a peer gets new bytes as they arrive; the
writers also look for data at every heartbeat, so what is already stored is streamed without any append.
The restoring master's side is broker.ha.restore.
"""

from __future__ import annotations

import logging

from broker.ha.master import HAConnection, HAMaster

__all__ = ["RestoreSource"]

log = logging.getLogger(__name__)


class RestoreSource(HAMaster):
    serves_everything_to_empty = True
    kind = "HA restore source (read-only)"
    peer_name = "peer"

    def peer_ahead(self, conn: HAConnection, report: int) -> None:
        log.warning(
            "HA restore source: peer %s reported %d, beyond this slave's CommitLog end %d: nothing to send",
            conn.addr,
            report,
            self.store.max_phy_offset,
        )

    async def _log_status(self) -> None:
        return  # a slave's status is its replication client's (broker.ha.slave)

    def runtime_info(self) -> dict[str, str]:
        return {
            "haListenPort": str(self.port),
            "haRestoreSource": "true",
            "haRestorePeers": str(len(self.connections)),
        }
