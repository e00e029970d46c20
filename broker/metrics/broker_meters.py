"""What the broker counts for its metrics, and how a scrape reads the messages it stored.

A stored message is one observation of its record size in the message size histogram cell of its
(topic, message type): the cell's count is rocketmq_messages_in_total and its sum
rocketmq_throughput_in_total. Who counts it depends on the put:
- a plain send (a normal message, alone or in a batch, or a stored reply) is counted by nobody as it is
  sent: a scrape reads what the topic's ConsumeQueues gained (QueueScan, broker/metrics/queue_scan.py),
  less what the store reported of the other puts into them (`reported`), so the send path pays nothing;
- a typed send (transaction, FIFO, delay or delivery time) and a send to a retry topic is counted at its
  answer (`count_typed`): its type is in its properties, not in the queue, and such sends are few. The
  send processor puts it with MessageStore.append(..., report=True), as the broker puts what it moves itself (a
  delay's or a timer's delivery, a committed transaction, a consumer's retry); the store tells
  `reported_put` of each in the step that appends it.
A slave counts nothing: its queues hold what it replicated. What pulls return is not counted here: the
broker always counts it (broker/server/group_pull_counters.py, for mqadmin's consume statistics), and
`BrokerCollector` publishes those counters. The send-back and retry paths call `dead_lettered`. With
metrics off the broker holds no BrokerMeters at all and the processors skip all of it (one `is None` test).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from broker.metrics.histogram import Cell
from broker.metrics.message_types import TYPED_PROPERTIES, message_type
from broker.metrics.queue_scan import SIZE_BUCKETS, QueueScan
from broker.metrics.rpc import RpcMeter
from broker.metrics.settings import QUEUE_READ_EVERY_S

if TYPE_CHECKING:
    from broker.store import MessageStore

__all__ = ["QUEUE_READ_EVERY_S", "SIZE_BUCKETS", "TYPED_PROPERTIES", "BrokerMeters", "message_type", "plain_sends"]


def plain_sends(stored: Cell, reported: Cell | None, published: Cell | None) -> Cell:
    """A topic's plain sends: what its queues gained less what the store reported, slot by slot, never
    below what was `published` before. A reported record the queues do not show yet (dispatch retrying
    after a full disk) would otherwise take the counter back for a scrape."""
    now = stored if reported is None else [s - r for s, r in zip(stored, reported, strict=True)]
    floor = published or [0] * len(stored)
    return [max(value, least) for value, least in zip(now, floor, strict=True)]


class BrokerMeters:
    __slots__ = ("_store", "dlq", "plain", "reported", "rpc", "scan", "typed")

    def __init__(self) -> None:
        self.rpc = RpcMeter()
        self.typed: dict[tuple[str, str], Cell] = {}  # (topic, message_type) -> cell, counted at the answer
        self.reported: dict[str, Cell] = {}  # topic -> cell of the reported puts into it
        self.plain: dict[str, Cell] = {}  # topic -> the plain sends' cell as last published
        self.scan: QueueScan | None = None  # on a master, once attached
        self._store: MessageStore | None = None
        self.dlq: dict[tuple[str, str], int] = {}  # (original topic, group) -> messages

    def attach(self, store: MessageStore, *, master: bool, skip: frozenset[str]) -> None:
        """Count `store`'s messages from now on: its reported puts, and on a master its ConsumeQueues but
        those of the topics in `skip` (the broker's own stores: delays, transactions, the timer)."""
        self._store = store
        store.put_reporter = self.reported_put
        if master:
            self.scan = QueueScan(skip.__contains__)
            store.reput.catch_up()  # what was put before now is in the queues, and not counted
            self.scan.start(store.consume_queue_store.by_key)

    def reported_put(self, topic: str, sizes: Sequence[int]) -> None:
        """The store's put_reporter: records a put that is not a plain send stored in `topic`."""
        cell = self.reported.get(topic)
        if cell is None:
            cell = self.reported[topic] = SIZE_BUCKETS.cell()
        for size in sizes:
            SIZE_BUCKETS.observe(cell, size)

    def count_typed(self, key: tuple[str, str], messages: int, wrote_bytes: int) -> None:
        """A stored typed send of `messages` records, `wrote_bytes` in all: `messages` observations of
        their average size (RocketMQ adds one a batch), so that the histogram's count stays
        rocketmq_messages_in_total and its sum the bytes stored."""
        cell = self.typed.get(key)
        if cell is None:
            cell = self.typed[key] = SIZE_BUCKETS.cell()
        SIZE_BUCKETS.observe(cell, wrote_bytes // messages, messages)
        cell[-1] += wrote_bytes - wrote_bytes // messages * messages

    def in_cells(self) -> dict[tuple[str, str], Cell]:
        """Every (topic, message type) cell, as of now: the typed sends, plus each topic's plain sends read
        from its ConsumeQueues (dispatch caught up first, so that they show every put reported so far)."""
        cells = {key: cell.copy() for key, cell in self.typed.items()}
        scan = self.scan
        if scan is None:
            return cells
        self.read_queues()
        for topic, stored in scan.cells.items():
            plain = self.plain[topic] = plain_sends(stored, self.reported.get(topic), self.plain.get(topic))
            if not any(plain):  # a topic only the broker put into (a retry topic): no series
                continue
            key = (topic, "normal")
            typed = cells.get(key)  # sends to a retry topic are counted at their answer
            cells[key] = plain if typed is None else [a + b for a, b in zip(plain, typed, strict=True)]
        return cells

    def read_queues(self) -> None:
        """Read the ConsumeQueues' new units (dispatch caught up first). Every scrape does; the broker also
        does it every QUEUE_READ_EVERY_S, so that a scrape reads a few seconds' sends at most, however
        rarely it comes."""
        store, scan = self._store, self.scan
        if store is not None and scan is not None:
            store.reput.catch_up()
            scan.scan(store.consume_queue_store.by_key)

    def dead_lettered(self, topic: str, group: str) -> None:
        key = (topic, group)
        self.dlq[key] = self.dlq.get(key, 0) + 1
