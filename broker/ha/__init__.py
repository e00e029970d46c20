"""Master/slave replication (RocketMQ's classic HA), started by the broker per `brokerRole`.

`controller.HAController` is what `BrokerController` creates; the rest are its parts: `master` (HA
server, per-slave connections, SYNC_MASTER waiting through `transfer.GroupTransfer`), `slave` (the
replication client over `stream.MasterStream`), `sync` (metadata copied from the master), `reads`
(suggestWhichBrokerId and slave pull rules), `status` (lag bookkeeping), `protocol` (the wire format)
and `settings`.
"""

from __future__ import annotations

__all__: list[str] = []
