"""Checks on a live MessageStore shared by the store and server tests (`from tests.store_checks import ...`)."""

from __future__ import annotations

from broker.store import MessageStore
from broker.store.dispatch_request import DispatchRequest, parse_record


def assert_requests_match_records(store: MessageStore, requests: list[DispatchRequest]) -> None:
    """Every dispatch request equals what parsing its record back from the CommitLog gives (CRC checked)."""
    delay_levels = store.config.delay_levels()
    for request in requests:
        mf = store.commit_log.queue.find_mapped_file_by_offset(request.commit_log_offset)
        assert mf is not None
        pos = request.commit_log_offset - mf.file_from_offset
        size, parsed = parse_record(mf.mm, pos, mf.wrote_position, check_crc=True, delay_levels=delay_levels)
        assert size == request.msg_size and parsed == request
