"""The admin client (RocketMQ's MQAdminExt): `Admin` and the requests, views and pure parts it is built from.

`from broker.client.admin import Admin` is the admin client that mqadmin, the operator and tests start;
its modules, one job each:
- `client`: `Admin` and what it returns (`BrokerRow`, `QueueProgress`; `ClusterInfo` is the route module's);
- one function per admin request, over a ClientAPI: `requests` (write permission, a broker's topic, group
  and config tables, its offsets), `changes` (what changes a broker or NameServer: delete a topic or group,
  update a config), `auth` (users and ACLs), `views` (read-only: topic and consume statistics, connections,
  a consumer's running info, the broker's statistics);
- `metadata_copy`: which topics and groups a copy between broker groups makes (pure);
- `lag`: consumer and replication lag from offsets (pure);
- `broker_runtime_info`: `BrokerRuntimeInfo`, a broker's GET_BROKER_RUNTIME_INFO table with typed views.
"""

from __future__ import annotations

from broker.client.admin.client import Admin, BrokerRow, QueueProgress
from broker.client.route import ClusterInfo, parse_cluster_info

__all__ = ["Admin", "BrokerRow", "ClusterInfo", "QueueProgress", "parse_cluster_info"]
