"""Master/slave replication (RocketMQ's classic HA), started by the broker per `brokerRole`.

`controller.HAController` is what `BrokerController` creates; the rest are its parts: `master` (HA
server, per-slave connections, SYNC_MASTER waiting through `transfer.GroupTransfer`), `slave` (the
replication client over `stream.MasterStream`), `reads` (suggestWhichBrokerId and slave pull rules),
`status` (lag bookkeeping), `protocol` (the wire format) and `settings`; `restore_source` (a slave's
read-only HA server) and `restore` (a master catching up from it at start, before it serves). The
package imports the store, the transport and the protocol, never the broker server (an import-linter
contract, pyproject.toml): the slave's copy of the master's metadata is the server's
(broker.server.slave_sync), and so is the start-up check that asks the NameServers and slaves
(broker.server.restore).
"""

from __future__ import annotations

__all__: list[str] = []
