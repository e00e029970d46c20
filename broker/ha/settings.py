"""HASettings: the replication knobs, gathered once from the broker's and the store's configuration.

Built by the broker (`ha_settings` in broker.server.broker) from `BrokerConfig` (broker.conf keys such as
haListenPort, haMasterAddress, haSendHeartbeatInterval...) and `StoreConfig` (syncFlushTimeout,
mappedFileSizeCommitLog); the HA controller, master and slave services read it and never the raw configs.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.transport.tls import ServerTls

__all__ = ["HASettings"]


@dataclass(frozen=True, slots=True)
class HASettings:
    role: str  # ASYNC_MASTER | SYNC_MASTER | SLAVE
    listen_host: str = "0.0.0.0"
    listen_port: int = 10912  # haListenPort
    master_address: str | None = None  # haMasterAddress: overrides the NameServer's haServerAddr
    heartbeat_interval: float = 5.0  # haSendHeartbeatInterval (s)
    housekeeping_interval: float = 20.0  # haHousekeepingInterval (s): close a silent connection
    transfer_batch_size: int = 32 * 1024  # haTransferBatchSize
    slave_fallbehind_max: int = 256 * 1024 * 1024  # haSlaveFallbehindMax
    sync_timeout: float = 5.0  # syncFlushTimeout (s): the SYNC_MASTER wait (4.x semantics)
    file_size: int = 1 << 30  # mappedFileSizeCommitLog: where an empty slave's transfer starts
    full_transfer_from_empty: bool = False  # haFullTransferFromEmpty (ours): empty slave gets everything
    slave_read_enable: bool = False  # slaveReadEnable: a master may suggest reading from the slave
    memory_ratio_percent: int = 40  # accessMessageInMemoryMaxRatio: when a pull counts as reading from disk
    # TLS (broker.transport.tls): the HA server's modes and context (shared with the remoting port's), and the
    # slave's client context (tls.client.*, on with tls.enable or when enforcing); None: plaintext
    tls: ServerTls | None = None
    client_tls: ssl.SSLContext | None = None
    # Controller mode (broker.ha.sync_state): this broker's controller-assigned id, which a slave sends first on
    # its HA connection so that its master knows which replica acknowledges; None outside controller mode
    broker_id: int | None = None
    all_ack: bool = False  # allAckInSyncStateSet: a SYNC_MASTER put waits for every SyncStateSet member
    max_time_not_catchup: float = 15.0  # haMaxTimeSlaveNotCatchup (s): a member lagging longer leaves the set
    in_sync_replicas: int = 1  # inSyncReplicas: with all_ack off, the replicas (the master counted) a put needs
    min_in_sync_replicas: int = 1  # minInSyncReplicas: a smaller SyncStateSet acknowledges no put

    @property
    def sync(self) -> bool:
        return self.role == "SYNC_MASTER"

    @property
    def is_slave(self) -> bool:
        return self.role == "SLAVE"
