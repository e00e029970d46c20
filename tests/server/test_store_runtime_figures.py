"""GET_BROKER_RUNTIME_INFO's store and schedule figures (broker/server/store_runtime_figures.py), as brokerStatus
prints them, from a real broker's real state."""

from __future__ import annotations

import re
from pathlib import Path

import orjson

from broker.protocol.codes import RequestCode as RC
from broker.protocol.properties import Prop
from broker.server.store_runtime_figures import human_bytes
from tests.server.server_harness import cluster


def test_human_bytes_as_java_formats_them() -> None:
    assert [human_bytes(n) for n in (0, 1023, 1024, 1536, 3 << 30)] == [
        "0 B",
        "1023 B",
        "1.0 KiB",
        "1.5 KiB",
        "3.0 GiB",
    ]


async def test_runtime_info_has_the_store_and_schedule_figures(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        cli = await c.client()
        assert (await cli.send("Later", b"x", props={Prop.DELAY: "3"})).code == 0
        table = orjson.loads((await cli.request(RC.GET_BROKER_RUNTIME_INFO)).body)["table"]
        assert re.fullmatch(r"Total : \d+\.\d [KMGTPE]iB, Free : \d+\.\d [KMGTPE]iB\.", table["commitLogDirCapacity"])
        for key in ("commitLogDiskRatio", "consumeQueueDiskRatio"):
            assert 0.0 < float(table[key]) < 1.0, (key, table[key])
        commit_log = c.running_broker.store.config.commit_log_dir
        assert table[f"commitLogDiskRatio_{commit_log}"] == table["commitLogDiskRatio"]
        assert re.fullmatch(r"\d+(\.\d)? (B|[KMGTPE]iB)", table["remainHowManyDataToFlush"])
        assert table["remainTransientStoreBufferNumbs"] == "2147483647"  # no transient store pool, as Java says
        assert "remainHowManyDataToCommit" not in table  # Java reports it only with the transient store pool
        # the level-3 message waits in queue 2 of the schedule topic: delivered up to 0 of 1
        assert table["scheduleMessageOffset_3"] == "0,1", {k: v for k, v in table.items() if "schedule" in k}
