"""What the broker's hot path counts for its metrics: plain lists in dicts, added to on the event loop.

The send processor calls `stored` once a put is stored (from the PutResult: messages and stored bytes,
as RocketMQ counts them), the pull processor `pulled` for every pull that returns messages, the send-back
and retry paths `dead_lettered`. `BrokerCollector` reads the dicts when Prometheus scrapes. With metrics
off the broker holds no BrokerMeters at all and the processors skip the calls (one `is None` test).
"""

from __future__ import annotations

from bisect import bisect_left

from broker.metrics.histogram import MESSAGE_SIZE_BUCKETS, Buckets
from broker.metrics.rpc import RpcMeter
from broker.protocol.properties import Prop

__all__ = ["IN_HIST_AT", "SIZE_BUCKETS", "TYPED_PROPERTIES", "BrokerMeters", "InCell", "message_type"]

SIZE_BUCKETS = Buckets(MESSAGE_SIZE_BUCKETS)
# An InCell: [messages, stored bytes, then a message-size histogram cell (SIZE_BUCKETS)]
InCell = list[float]
IN_HIST_AT = 2

_DELAY_KEYS = (Prop.DELAY, "__STARTDELIVERTIME", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS")
# A send with none of these properties is "normal" (the send path tests this first: one C-level check)
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
    __slots__ = ("dlq", "in_cells", "out_cells", "pulled_to", "rpc")

    def __init__(self) -> None:
        self.rpc = RpcMeter()
        self.in_cells: dict[tuple[str, str], InCell] = {}  # (topic, message_type) -> InCell
        self.out_cells: dict[tuple[str, str], list[int]] = {}  # (topic, group) -> [messages, bytes]
        self.dlq: dict[tuple[str, str], int] = {}  # (original topic, group) -> messages
        # (group, topic, queue) -> the next offset the group's last pull asked for plus what it got: where
        # the consumer has read to (RocketMQ's pull offset), for in-flight and ready messages
        self.pulled_to: dict[tuple[str, str, int], int] = {}

    def in_cell(self, topic: str, mtype: str) -> InCell:
        """The cell of (topic, message type), made on first use."""
        key = (topic, mtype)
        cell = self.in_cells.get(key)
        if cell is None:
            cell = self.in_cells[key] = [0, 0, *SIZE_BUCKETS.cell()]
        return cell

    def stored(self, cell: InCell, messages: int, wrote_bytes: int) -> None:
        """A stored put: `messages` records of `wrote_bytes` in all. A batch adds `messages` observations of
        its average size to the histogram (RocketMQ adds one), so its count stays messages_in."""
        cell[0] += messages
        cell[1] += wrote_bytes
        size = wrote_bytes / messages if messages > 1 else wrote_bytes
        cell[IN_HIST_AT + bisect_left(MESSAGE_SIZE_BUCKETS, size)] += messages
        cell[-1] += wrote_bytes

    def pulled(self, group: str, topic: str, queue_id: int, messages: int, nbytes: int, next_offset: int) -> None:
        key = (topic, group)
        cell = self.out_cells.get(key)
        if cell is None:
            cell = self.out_cells[key] = [0, 0]
        cell[0] += messages
        cell[1] += nbytes
        self.pulled_to[(group, topic, queue_id)] = next_offset

    def dead_lettered(self, topic: str, group: str) -> None:
        key = (topic, group)
        self.dlq[key] = self.dlq.get(key, 0) + 1
