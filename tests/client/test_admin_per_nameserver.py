"""Admin.cluster_info_per_nameserver: each NameServer's own table, as the operator's Ready needs it.

Two real NameServers, each with its own broker (a broker that registered with one NameServer and not yet with
the other looks the same), and a third address where nothing listens.
"""

from __future__ import annotations

import socket
from pathlib import Path

from broker.client import Admin
from tests.local_cluster import SMALL_INDEX, local_cluster


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_each_nameserver_answers_with_its_own_table(tmp_path: Path) -> None:
    async with (
        local_cluster(tmp_path / "a", broker_name="broker-a", **SMALL_INDEX) as a,
        local_cluster(tmp_path / "b", broker_name="broker-b", **SMALL_INDEX) as b,
    ):
        dead = f"127.0.0.1:{_closed_port()}"
        admin = Admin(f"{a.namesrv_addr};{dead};{b.namesrv_addr}")
        try:
            tables = await admin.cluster_info_per_nameserver()
        finally:
            await admin.shutdown()
        broker_a = f"127.0.0.1:{a.running_broker.port}"
    assert set(tables) == {a.namesrv_addr, b.namesrv_addr}, "the dead address is left out, the others answer"
    assert set(tables[a.namesrv_addr].brokers) == {"broker-a"}
    assert set(tables[b.namesrv_addr].brokers) == {"broker-b"}
    assert tables[a.namesrv_addr].brokers["broker-a"].broker_addrs[0] == broker_a
