"""HAController: starts the HA parts a broker's role calls for, and answers questions about them.

`BrokerController` (broker.server.broker) creates one after its store started and before it registers
with the NameServers (the registration carries haServerAddr, so the HA port must be bound), and closes
it before the store shuts down. Masters (ASYNC_MASTER, SYNC_MASTER) get the HA server and the store's
replica waiter; slaves get the replication client and the metadata synchronizer. The pull processor
asks `pull_suggestion` and `master_alive`; GET_BROKER_RUNTIME_INFO merges `runtime_info()`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker.ha.master import HAMaster
from broker.ha.reads import PullSuggestion
from broker.ha.settings import HASettings
from broker.ha.slave import HAClient
from broker.ha.sync import SlaveSynchronize

if TYPE_CHECKING:
    from broker.server.broker import BrokerController

__all__ = ["HAController", "settings_for"]

log = logging.getLogger(__name__)


def settings_for(broker: BrokerController) -> HASettings:
    c = broker.config
    sc = broker.store_config
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
        metadata_sync_interval=c.slave_sync_interval / 1000,
    )


class HAController:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self.settings = settings_for(broker)
        self.master: HAMaster | None = None
        self.client: HAClient | None = None
        self.metadata: SlaveSynchronize | None = None
        c = broker.config
        self.pull_suggestion = PullSuggestion(
            slave_read_enable=c.slave_read_enable,
            is_slave=self.settings.is_slave,
            memory_ratio_percent=c.access_message_in_memory_max_ratio,
        )

    async def start(self) -> None:
        broker = self.broker
        if self.settings.is_slave:
            registrar = broker.registrar
            self.client = HAClient(broker.store, self.settings, lambda: registrar.master_ha_addr)
            self.client.start()
            interval = self.settings.metadata_sync_interval
            self.metadata = SlaveSynchronize(broker, lambda: registrar.master_addr, interval)
            self.metadata.start()
            return
        self.master = HAMaster(broker.store, self.settings)
        port = await self.master.start()
        broker.config.ha_listen_port = port  # when 0 was asked for: the registration must carry the real one
        broker.store.set_replica(self.master)

    async def close(self) -> None:
        if self.master is not None:
            self.broker.store.set_replica(None)
            await self.master.close()
        if self.client is not None:
            await self.client.close()
        if self.metadata is not None:
            await self.metadata.close()

    @property
    def master_alive(self) -> bool:
        """On a slave: the master's HA stream is live. A master is its own master."""
        return self.client.connected if self.client is not None else True

    def runtime_info(self) -> dict[str, str]:
        if self.master is not None:
            return self.master.runtime_info()
        if self.client is not None:
            info = self.client.runtime_info()
            info["masterAddr"] = self.broker.registrar.master_addr or ""
            # the lag bound under which a master counts this slave as in sync (the probe's default)
            info["haSlaveFallbehindMax"] = str(self.settings.slave_fallbehind_max)
            return info
        return {}
