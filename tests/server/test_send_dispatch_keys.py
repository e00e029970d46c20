"""The send path looks TAGS, KEYS and UNIQ_KEY up once (checked_properties) and hands them to the store's
dispatch hint. Over real TCP, sends and batches with many property shapes (repeated names, empty values, no
UNIQ_KEY, delay and retry rewrites, odd segments, batch-level properties that override the inner ones) give
hints equal to the records parsed back from the CommitLog, and the one-pass parser agrees with
check_properties + decode_properties on any text."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from broker.protocol.batch import BatchMessage, encode_batch
from broker.protocol.properties import decode_properties
from broker.server.errors import RequestError
from broker.server.put_rules import check_properties, checked_properties
from broker.store.dispatch_request import DispatchRequest
from tests.server.server_harness import cluster
from tests.store_checks import assert_requests_match_records

SHAPES = [
    "",
    "TAGS\x01a\x02",
    "TAGS\x01a\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01AABB\x02WAIT\x01true\x02",
    "KEYS\x01\x02TAGS\x01\x02UNIQ_KEY\x01\x02",  # empty values: Java skips them
    "TAGS\x01first\x02TAGS\x01second\x02KEYS\x01x\x02KEYS\x01\x02",  # repeats: the last non-empty wins
    "\x02\x02TAGS\x01t\x02\x02",  # empty segments
    "UNIQ_KEY\x01U1\x02UNIQ_KEY\x01U2",  # no trailing separator
    "TAGS\x01t\x02DELAY\x012\x02KEYS\x01dk\x02",  # rewritten to SCHEDULE_TOPIC_XXXX
    "TAGS\x01t\x02DELAY\x010\x02",  # delay level 0: not delayed
    "TAGS\x01ünï\x02KEYS\x01中 文\x02",
    "WAIT\x01false\x02TAGS\x01nw\x02",
]


async def test_dispatch_hints_from_the_send_path_equal_the_parsed_records(tmp_path: Path) -> None:
    async with cluster(tmp_path, messageDelayLevel="1s 2s 3s") as c:
        store = c.running_broker.store
        seen: list[DispatchRequest] = []

        class Recorder:
            def dispatch(self, request: DispatchRequest) -> None:
                seen.append(request)

        store.reput.add_dispatcher(Recorder())
        client = await c.client()
        for i in range(3):
            for text in SHAPES:
                resp = await client.send("KeysTopic", b"body-%d" % i, queue_id=i % 2, properties_text=text)
                assert resp.code == 0, resp.remark
        for _ in range(100):
            if store.dispatch_behind_bytes == 0 and len(seen) >= 3 * len(SHAPES):
                break
            await asyncio.sleep(0.02)
        assert len(seen) == 3 * len(SHAPES)
        assert_requests_match_records(store, seen)


_text = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "DELAY", "", "x"]), st.text(max_size=5)).map(
            lambda nv: f"{nv[0]}\x01{nv[1]}"
        ),
        st.text(alphabet="ab\x01", max_size=4),
    ),
    max_size=6,
).map("\x02".join)


@given(_text)
def test_one_pass_properties_agree_with_check_and_decode(text: str) -> None:
    problem = check_properties(text)
    try:
        props = checked_properties(text)
    except RequestError as exc:
        assert problem is not None and exc.remark == problem
        return
    assert problem is None
    assert props == decode_properties(text)


# Batch-level properties (the request header's): appended to every inner message, so theirs win.
BATCH_LEVEL = ["", "WAIT\x01true\x02", "TAGS\x01bt\x02KEYS\x01bk\x02", "UNIQ_KEY\x01BATCHU\x02KEYS\x01\x02", "TAGS\x01"]
BATCH_INNER = [s for s in SHAPES if "DELAY\x01" not in s or "DELAY\x010" in s]  # a batch holds no delay


async def test_dispatch_hints_of_batches_equal_the_parsed_records(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        store = c.running_broker.store
        seen: list[DispatchRequest] = []

        class Recorder:
            def dispatch(self, request: DispatchRequest) -> None:
                seen.append(request)

        store.reput.add_dispatcher(Recorder())
        client = await c.client()
        for level in BATCH_LEVEL:
            body = encode_batch(BatchMessage(b"b-%d" % i, text) for i, text in enumerate(BATCH_INNER))
            resp = await client.send("KeysBatch", body, code=320, properties_text=level)
            assert resp.code == 0, resp.remark
        expected = len(BATCH_LEVEL) * len(BATCH_INNER)
        for _ in range(100):
            if store.dispatch_behind_bytes == 0 and len(seen) >= expected:
                break
            await asyncio.sleep(0.02)
        assert len(seen) == expected
        assert_requests_match_records(store, seen)
