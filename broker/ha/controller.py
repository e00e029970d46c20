"""HAController: starts the HA parts a broker's role calls for, and answers questions about them.

Built from plain parts (the store, `HASettings`, and callbacks that name the master), so this package
imports nothing of the broker server. `BrokerController` (broker.server.broker) creates one after its
store started and before it registers with the NameServers (the registration carries haServerAddr, so
the HA port must be bound), and closes it before the store shuts down. Masters (ASYNC_MASTER,
SYNC_MASTER) get the HA server and the store's replica waiter; slaves get the replication client and,
on haListenPort, a read-only restore source from which their master can restore a lost CommitLog
(broker.ha.restore_source; a port that cannot be bound is logged, and the slave replicates all the same).
The copy of the master's metadata (topics, groups, offsets) is the server's (broker.server.slave_sync).
The pull processor asks `pull_suggestion` and `master_alive`; GET_BROKER_RUNTIME_INFO merges
`runtime_info()`, with `start_restore` (what the master restored at start, set by the broker).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from broker.ha.master import HAMaster
from broker.ha.reads import PullSuggestion
from broker.ha.restore_source import RestoreSource
from broker.ha.settings import HASettings
from broker.ha.slave import HAClient
from broker.store import MessageStore

__all__ = ["HAController"]

log = logging.getLogger(__name__)


class HAController:
    """`master_ha_addr` / `master_addr`: the master's HA and remoting addresses as the NameServer last said;
    `ha_server_addr`: this broker's own HA address as it advertises it (brokerIP2:haListenPort)."""

    def __init__(
        self,
        store: MessageStore,
        settings: HASettings,
        master_ha_addr: Callable[[], str | None],
        master_addr: Callable[[], str | None],
        ha_server_addr: Callable[[], str] | None = None,
        on_master_lost: Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self._master_ha_addr = master_ha_addr
        self._master_addr = master_addr
        self._ha_server_addr = ha_server_addr
        self._on_master_lost = on_master_lost
        self.master: HAMaster | None = None
        self.client: HAClient | None = None
        self.source: RestoreSource | None = None
        self.start_restore: dict[str, str] = {}  # runtime info on the restore from a slave at start
        self.pull_suggestion = PullSuggestion(
            slave_read_enable=settings.slave_read_enable,
            is_slave=settings.is_slave,
            memory_ratio_percent=settings.memory_ratio_percent,
        )

    async def start(self) -> int | None:
        """Start the role's part; the bound HA port (the one asked for, or a free one for 0), None when a
        slave could not bind its restore source."""
        if self.settings.is_slave:
            port: int | None = None
            source = RestoreSource(self.store, self.settings)
            try:
                port = await source.start()
                self.source = source
            except OSError as exc:
                log.warning(
                    "HA restore source not started (haListenPort %d: %s): this slave replicates, but its master "
                    "cannot restore from it",
                    self.settings.listen_port,
                    exc,
                )
            on_appended = self.source.data_appended if self.source is not None else None
            self.client = HAClient(
                self.store, self.settings, self._master_ha_addr, on_appended, on_master_lost=self._on_master_lost
            )
            self.client.start()
            return port
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
        if self.source is not None:
            await self.source.close()

    @property
    def master_alive(self) -> bool:
        """On a slave: the master's HA stream is live. A master is its own master."""
        return self.client.connected if self.client is not None else True

    def runtime_info(self) -> dict[str, str]:
        info: dict[str, str] = {}
        if self.master is not None:
            info = self.master.runtime_info()
        elif self.client is not None:
            info = self.client.runtime_info()
            info["masterAddr"] = self._master_addr() or ""
            # the lag bound under which a master counts this slave as in sync (the probe's default)
            info["haSlaveFallbehindMax"] = str(self.settings.slave_fallbehind_max)
            # what a master restoring from this slave needs (broker.server.restore)
            info.update(self.source.runtime_info() if self.source is not None else {"haRestoreSource": "false"})
        if info and self._ha_server_addr is not None:
            info["haServerAddr"] = self._ha_server_addr()
        info.update(self.start_restore)
        return info
