"""HAController: starts the HA parts a broker's role calls for, and answers questions about them.

Built from plain parts (the store, `HASettings`, and callbacks that name the master), so this package
imports nothing of the broker server. `BrokerController` (broker.server.broker) creates one after its
store started and before it registers with the NameServers (the registration carries haServerAddr, so
the HA port must be bound), and closes it before the store shuts down. Masters (ASYNC_MASTER,
SYNC_MASTER) get the HA server and the store's replica waiter; slaves get the replication client. The
copy of the master's metadata (topics, groups, offsets) is the server's (broker.server.slave_sync). The
pull processor asks `pull_suggestion` and `master_alive`; GET_BROKER_RUNTIME_INFO merges `runtime_info()`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from broker.ha.master import HAMaster
from broker.ha.reads import PullSuggestion
from broker.ha.settings import HASettings
from broker.ha.slave import HAClient
from broker.store import MessageStore

__all__ = ["HAController"]

log = logging.getLogger(__name__)


class HAController:
    """`master_ha_addr` / `master_addr`: the master's HA and remoting addresses as the NameServer last said."""

    def __init__(
        self,
        store: MessageStore,
        settings: HASettings,
        master_ha_addr: Callable[[], str | None],
        master_addr: Callable[[], str | None],
    ) -> None:
        self.store = store
        self.settings = settings
        self._master_ha_addr = master_ha_addr
        self._master_addr = master_addr
        self.master: HAMaster | None = None
        self.client: HAClient | None = None
        self.pull_suggestion = PullSuggestion(
            slave_read_enable=settings.slave_read_enable,
            is_slave=settings.is_slave,
            memory_ratio_percent=settings.memory_ratio_percent,
        )

    async def start(self) -> int | None:
        """Start the role's part; on a master, the bound HA port (the one asked for, or a free one for 0)."""
        if self.settings.is_slave:
            self.client = HAClient(self.store, self.settings, self._master_ha_addr)
            self.client.start()
            return None
        self.master = HAMaster(self.store, self.settings)
        port = await self.master.start()
        self.store.set_replica(self.master)
        return port

    async def close(self) -> None:
        if self.master is not None:
            self.store.set_replica(None)
            await self.master.close()
        if self.client is not None:
            await self.client.close()

    @property
    def master_alive(self) -> bool:
        """On a slave: the master's HA stream is live. A master is its own master."""
        return self.client.connected if self.client is not None else True

    def runtime_info(self) -> dict[str, str]:
        if self.master is not None:
            return self.master.runtime_info()
        if self.client is not None:
            info = self.client.runtime_info()
            info["masterAddr"] = self._master_addr() or ""
            # the lag bound under which a master counts this slave as in sync (the probe's default)
            info["haSlaveFallbehindMax"] = str(self.settings.slave_fallbehind_max)
            return info
        return {}
