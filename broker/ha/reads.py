"""Slave reads: the pull response's suggestWhichBrokerId, and how a slave answers while its master lives.

Called by the pull processor (broker.server.processors.pull) for every reply (reference 8.1):
- without `slaveReadEnable` a master suggests 0 (itself);
- with it, a consumer whose pull position lags the CommitLog end by more than
  `accessMessageInMemoryMaxRatio` % of RAM (its data is no longer in the page cache) is sent to the
  group's `whichBrokerWhenConsumeSlowly` (1), any other to the group's `brokerId` (0);
- a slave whose master is alive (its HA stream is live) and that may not serve reads suggests 0 and
  turns a result without messages into PULL_RETRY_IMMEDIATELY, so the consumer goes back to the master
  at once; messages it found are still delivered (dropping them would skip them);
- a slave whose master is down serves reads as a master would: consumers keep going;
- a slave never moves a consumer's offset: PULL_OFFSET_MOVED becomes PULL_RETRY_IMMEDIATELY at the
  requested offset (offsetCheckInSlave=false), since the master may hold what the slave lacks.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence

from broker.protocol.codes import ResponseCode
from broker.protocol.record_layout import PHYSICAL_OFFSET_AT

__all__ = ["PullSuggestion", "total_physical_memory"]

MASTER_ID = 0
_PHYSICAL_OFFSET = struct.Struct(">q")


def total_physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 << 30


class PullSuggestion:
    """Decides suggestWhichBrokerId (and a slave's code) for one broker; cheap enough for every pull."""

    def __init__(self, *, slave_read_enable: bool, is_slave: bool, memory_ratio_percent: int) -> None:
        self.slave_read_enable = slave_read_enable
        self.is_slave = is_slave
        self.in_memory_bytes = int(total_physical_memory() * (memory_ratio_percent / 100.0))

    def lagging(self, buffers: Sequence[memoryview], commit_log_max_offset: int) -> bool:
        """The last record pulled lies further behind the CommitLog end than fits in memory."""
        if not buffers:
            return False
        (pulled,) = _PHYSICAL_OFFSET.unpack_from(buffers[-1], PHYSICAL_OFFSET_AT)
        return commit_log_max_offset - int(pulled) > self.in_memory_bytes

    def decide(
        self,
        code: int,
        *,
        found: Sequence[memoryview],
        commit_log_max_offset: int,
        group_broker_id: int,
        group_slow_broker_id: int,
        master_alive: bool,
        request_offset: int,
        next_begin_offset: int,
    ) -> tuple[int, int, int]:
        """(suggestWhichBrokerId, response code, nextBeginOffset) for a reply that would carry `code`."""
        if self.slave_read_enable:
            lag = self.lagging(found, commit_log_max_offset)
            suggest = group_slow_broker_id if lag else group_broker_id
        else:
            suggest = MASTER_ID
        if self.is_slave and code == ResponseCode.PULL_OFFSET_MOVED:
            # A slave may simply not have the data (behind the master, or rebuilt from the master's last
            # file): it never moves a consumer's offset (RocketMQ's default offsetCheckInSlave=false),
            # which could skip messages the master still has. The consumer asks again.
            code = ResponseCode.PULL_RETRY_IMMEDIATELY
            next_begin_offset = request_offset
        if self.is_slave and master_alive and not self.slave_read_enable:
            suggest = MASTER_ID
            if code != ResponseCode.SUCCESS:
                code = ResponseCode.PULL_RETRY_IMMEDIATELY
        return suggest, code, next_begin_offset
