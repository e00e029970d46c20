"""Harness of the messaging-feature tests: the shared in-process NameServer and broker
(tests/local_cluster.py), driven by our client SDK.

Tests open it with `async with features_cluster(tmp_path, **broker_conf) as cluster:`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tests.local_cluster import LocalCluster, local_cluster, wait_for

__all__ = ["FeaturesCluster", "features_cluster", "wait_for"]

FeaturesCluster = LocalCluster


@contextlib.asynccontextmanager
async def features_cluster(root: Path, **broker_extra: Any) -> AsyncIterator[LocalCluster]:
    async with local_cluster(root, cluster_name="FeatureCluster", broker_name="broker-f", **broker_extra) as cluster:
        yield cluster
