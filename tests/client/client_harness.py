"""Harness of the client SDK tests: the shared in-process NameServer and broker (tests/local_cluster.py).

Live tests open it with `async with live_cluster(tmp_path, **broker_conf) as cluster:`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tests.local_cluster import LocalCluster, local_cluster

__all__ = ["LiveCluster", "live_cluster"]

LiveCluster = LocalCluster


@contextlib.asynccontextmanager
async def live_cluster(root: Path, **broker_extra: Any) -> AsyncIterator[LocalCluster]:
    async with local_cluster(root, cluster_name="ClientTestCluster", broker_name="broker-c", **broker_extra) as cluster:
        yield cluster
