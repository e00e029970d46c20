"""BrokerRuntimeInfo: a broker's GET_BROKER_RUNTIME_INFO (28) table with typed views of what the operator reads.

`Admin.runtime_info(addr)` (broker.client.admin) returns one. It is a read-only Mapping of the table's
strings (every key the broker sent, as mqadmin brokerStatus prints them), plus properties that parse the
fields a caller decides on: CommitLog offsets, the HA role and link, the NameServer registration. A field
the broker did not send reads as None (or an empty list), never as a made-up default.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

__all__ = ["BrokerRuntimeInfo"]


class BrokerRuntimeInfo(Mapping[str, str]):
    def __init__(self, addr: str, table: Mapping[str, str]) -> None:
        self.addr = addr
        self._table = dict(table)

    def __getitem__(self, key: str) -> str:
        return self._table[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)

    def __repr__(self) -> str:
        return f"BrokerRuntimeInfo({self.addr!r}, {len(self._table)} fields)"

    def int_field(self, key: str) -> int | None:
        try:
            return int(self._table[key])
        except (KeyError, ValueError):
            return None

    # ------------------------------------------------------------------ store

    @property
    def commit_log_max_offset(self) -> int | None:
        return self.int_field("commitLogMaxOffset")

    @property
    def commit_log_min_offset(self) -> int | None:
        return self.int_field("commitLogMinOffset")

    @property
    def boot_timestamp(self) -> int | None:
        return self.int_field("bootTimestamp")

    @property
    def version(self) -> str | None:
        return self._table.get("brokerVersionDesc")

    # ------------------------------------------------------------------ replication

    @property
    def ha_role(self) -> str | None:
        """ASYNC_MASTER, SYNC_MASTER or SLAVE."""
        return self._table.get("haRole") or None

    @property
    def is_slave(self) -> bool:
        return self.ha_role == "SLAVE"

    @property
    def ha_connected(self) -> bool | None:
        """A slave's HA session with its master is live (None on a master)."""
        value = self._table.get("haConnected")
        return None if value is None else value == "true"

    @property
    def ha_slave_hosts(self) -> set[str]:
        """On a master: the hosts of the slaves whose replication connections it serves now."""
        listed = self._table.get("haSlaveAckOffsets") or ""
        return {item.split("=", 1)[0].rsplit(":", 1)[0] for item in listed.split(",") if "=" in item}

    @property
    def ha_diverged(self) -> str | None:
        """Why a slave stopped replicating because its CommitLog and its master's diverged (None: it did not)."""
        return self._table.get("haDiverged") or None

    @property
    def ha_server_host(self) -> str | None:
        """The host of this broker's own HA address (brokerIP2): where a slave's replication connection comes
        from, which differs from its remoting address when it advertises another one (a node's IP)."""
        addr = self._table.get("haServerAddr") or ""
        return addr.rsplit(":", 1)[0] or None

    @property
    def master_addr(self) -> str | None:
        """A slave's view of its master's remoting address (from the NameServer)."""
        return self._table.get("masterAddr") or None

    @property
    def connected_slaves(self) -> int | None:
        """A master's count of slaves that reported their offset."""
        return self.int_field("haConnectedSlaves")

    # ------------------------------------------------------------------ NameServer registration

    @property
    def registered_name_servers(self) -> list[str]:
        """NameServers whose latest registration of this broker succeeded."""
        return [a for a in self._table.get("registeredNameServers", "").split(";") if a]

    @property
    def last_register_timestamp(self) -> int | None:
        return self.int_field("lastRegisterTimestamp")
