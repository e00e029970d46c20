"""The store and schedule figures of GET_BROKER_RUNTIME_INFO (mqadmin brokerStatus) that RocketMQ's
DefaultMessageStore.getRuntimeInfo and AdminBrokerProcessor.prepareRuntimeInfo add, read from our real state:
disk use of the CommitLog and ConsumeQueue directories, bytes not yet flushed, the transient store pool we
do not have (reported as RocketMQ reports a disabled one), and each delay level's progress. The admin
processor passes the store and the schedule service and merges the figures into its table; keys it
already has win.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from broker.server.topics import SCHEDULE_TOPIC
from broker.store.retention import disk_usage_ratio

if TYPE_CHECKING:
    from broker.server.schedule import ScheduleService
    from broker.store import MessageStore

__all__ = ["human_bytes", "runtime_figures"]

log = logging.getLogger(__name__)

JAVA_INT_MAX = 2**31 - 1  # remainTransientStoreBufferNumbs when transientStorePoolEnable is off


def human_bytes(n: int) -> str:
    """MixAll.humanReadableByteCount(n, false): 512 B, 1.5 KiB, 3.0 GiB."""
    if n < 1024:
        return f"{n} B"
    exp, value = 0, float(n)
    while value >= 1024 and exp < 6:
        value /= 1024
        exp += 1
    return f"{value:.1f} {'KMGTPE'[exp - 1]}iB"


def _disk(store: MessageStore) -> dict[str, str]:
    cfg = store.config
    figures: dict[str, str] = {}
    commit_log_dir: Path = cfg.commit_log_dir
    ratio = disk_usage_ratio(commit_log_dir)
    figures["commitLogDiskRatio"] = str(ratio)
    figures[f"commitLogDiskRatio_{commit_log_dir}"] = str(ratio)
    figures["consumeQueueDiskRatio"] = str(disk_usage_ratio(cfg.consume_queue_dir))
    usage = shutil.disk_usage(cfg.store_path_root_dir)
    figures["commitLogDirCapacity"] = f"Total : {human_bytes(usage.total)}, Free : {human_bytes(usage.free)}."
    return figures


def runtime_figures(store: MessageStore, schedule: ScheduleService) -> dict[str, str]:
    figures: dict[str, str] = {
        "remainHowManyDataToFlush": human_bytes(max(store.max_phy_offset - store.commit_log.queue.flushed_where, 0)),
        "remainTransientStoreBufferNumbs": str(JAVA_INT_MAX),
    }
    try:
        figures.update(_disk(store))
    except OSError as exc:  # a store directory not there (yet): leave the disk figures out, as Java does
        log.debug("disk figures unavailable: %s", exc)
    # scheduleMessageOffset_<level>: "<delivered-up-to offset>,<max offset>" of each level's queue (level - 1),
    # for every level that has seen a message (Java records a level's offset at its first look at one)
    for level in sorted(schedule.delays):
        max_offset = store.get_max_offset_in_queue(SCHEDULE_TOPIC, level - 1)
        if level in schedule.offsets or max_offset > 0:
            figures[f"scheduleMessageOffset_{level}"] = f"{schedule.offsets.get(level, 0)},{max_offset}"
    return figures
