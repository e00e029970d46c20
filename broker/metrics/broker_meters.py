"""What the broker's hot path counts for its metrics: plain lists in dicts, added to on the event loop.

Every stored message is one observation of its record size in the message size histogram cell of its
(topic, message type): the cell's count is rocketmq_messages_in_total and its sum
rocketmq_throughput_in_total. A send that stores one message only appends (key, record bytes) to `puts`
(broker/server/processors/send.py): the key is the topic for a normal message, else (topic, message
type). `fold` moves `puts` into the cells once a read (the rpc meter calls it at the end of each read,
`RpcMeter.read_done`) and before every scrape, so the cells are exact whenever they are read; a read's
puts of one normal topic, all in one size bucket (the common case), are folded by a few C calls
(`fold`), anything else one put at a time (`count_put`, the reference tests/metrics/test_broker_meters.py
holds the fold equal to). A batch send and a put answered with another code than SUCCESS count at once
(`count_batch`). The send-back and retry paths call `dead_lettered`. What pulls return is not counted
here: the broker always counts it (broker/server/get_stats.py, for mqadmin's consume statistics), and
`BrokerCollector` publishes those counters. It reads the dicts when Prometheus scrapes. With metrics off
the broker holds no BrokerMeters at all and the processors skip all of it (one `is None` test).
"""

from __future__ import annotations

from bisect import bisect_left
from typing import TypeAlias

from broker.metrics.histogram import MESSAGE_SIZE_BUCKETS, Buckets, Cell
from broker.metrics.rpc import RpcMeter
from broker.protocol.properties import Prop

__all__ = ["SIZE_BUCKETS", "TYPED_PROPERTIES", "BrokerMeters", "InKey", "message_type"]

SIZE_BUCKETS = Buckets(MESSAGE_SIZE_BUCKETS)
_BOUNDS = SIZE_BUCKETS.bounds
# What a stored message counts into: its topic (a normal message), or (topic, message type)
InKey: TypeAlias = str | tuple[str, str]

_DELAY_KEYS = (Prop.DELAY, "__STARTDELIVERTIME", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS")
# A send with none of these properties is "normal"
TYPED_PROPERTIES = frozenset((Prop.TRAN_MSG, Prop.SHARDING_KEY, *_DELAY_KEYS))


def message_type(props: dict[str, str]) -> str:
    """RocketMQ's message_type label of a send, from its properties (the order BrokerMetricsManager tests
    them in): a transaction's half message, then a sharding key (FIFO), then any delay or delivery time."""
    if props.get(Prop.TRAN_MSG) == "true":
        return "transaction"
    if Prop.SHARDING_KEY in props:
        return "fifo"
    for key in _DELAY_KEYS:
        if props.get(key):
            return "delay"
    return "normal"


class BrokerMeters:
    __slots__ = ("dlq", "in_cells", "normal_cells", "puts", "rpc")

    def __init__(self) -> None:
        self.rpc = RpcMeter(after_read=self.fold)
        self.in_cells: dict[tuple[str, str], Cell] = {}  # (topic, message_type) -> SIZE_BUCKETS cell
        self.normal_cells: dict[str, Cell] = {}  # topic -> its "normal" cell (the same list): a str key
        # Stored single puts not in the cells yet: (InKey, record bytes), appended by the send processor
        self.puts: list[tuple[InKey, int]] = []
        self.dlq: dict[tuple[str, str], int] = {}  # (original topic, group) -> messages

    def in_cell(self, topic: str, mtype: str) -> Cell:
        """The cell of (topic, message type), made on first use."""
        key = (topic, mtype)
        cell = self.in_cells.get(key)
        if cell is None:
            cell = self.in_cells[key] = SIZE_BUCKETS.cell()
            if mtype == "normal":
                self.normal_cells[topic] = cell
        return cell

    def cell_of(self, key: InKey) -> Cell:
        if type(key) is str:
            return self.normal_cells.get(key) or self.in_cell(key, "normal")
        return self.in_cell(*key)

    def fold(self) -> None:
        """Count the stored puts in `puts` into their cells (see the module docstring)."""
        puts = self.puts
        if not puts:
            return
        keys, sizes = zip(*puts, strict=True)
        puts.clear()
        first = keys[0]
        if type(first) is str and keys.count(first) == len(keys):
            bucket = bisect_left(_BOUNDS, min(sizes))
            if bucket == bisect_left(_BOUNDS, max(sizes)):  # one normal topic, one size bucket
                cell = self.normal_cells.get(first) or self.in_cell(first, "normal")
                cell[bucket] += len(keys)
                cell[-1] += sum(sizes)
                return
        for key, size in zip(keys, sizes, strict=True):
            self.count_put(key, size)

    def count_put(self, key: InKey, wrote_bytes: int) -> None:
        """One stored message of `wrote_bytes` (the record): what `fold` does for each of `puts`."""
        SIZE_BUCKETS.observe(self.cell_of(key), wrote_bytes)

    def count_batch(self, key: InKey, messages: int, wrote_bytes: int) -> None:
        """A stored batch: `messages` records of `wrote_bytes` in all. It adds `messages` observations of its
        average size (RocketMQ adds one), so that the histogram's count stays rocketmq_messages_in_total."""
        cell = self.cell_of(key)
        SIZE_BUCKETS.observe(cell, wrote_bytes // messages, messages)
        cell[-1] += wrote_bytes - wrote_bytes // messages * messages  # the sum stays the bytes stored

    def dead_lettered(self, topic: str, group: str) -> None:
        key = (topic, group)
        self.dlq[key] = self.dlq.get(key, 0) + 1
