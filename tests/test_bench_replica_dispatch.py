"""bench.replica_dispatch's records are what a master stores for W3: whole records back to back, each
queue's offsets consecutive, runs of one batch in one queue (the benchmark measures nothing else)."""

from __future__ import annotations

from bench.replica_dispatch import BATCH, QUEUES, replicated_records
from broker.protocol.javahash import tags_code
from broker.store.dispatch_request import parse_record


def test_replicated_records_are_w3_batches_in_turn() -> None:
    data = replicated_records(BATCH * QUEUES * 2, tags=True)
    pos, seen = 0, []
    while pos < len(data):
        size, request = parse_record(data, pos, len(data), check_crc=True)
        assert request is not None and request.commit_log_offset == pos
        seen.append((request.queue_id, request.consume_queue_offset, request.tags_code))
        pos += size
    assert len(seen) == BATCH * QUEUES * 2
    assert seen[BATCH * QUEUES + BATCH] == (1, BATCH, tags_code("TagA"))  # queue 1's second batch starts here
    assert all(queue == (i // BATCH) % QUEUES for i, (queue, _, _) in enumerate(seen))
