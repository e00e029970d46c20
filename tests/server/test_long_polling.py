"""Long polling: a parked pull is answered as soon as a message arrives, or with PULL_NOT_FOUND
and the four offset fields after its suspend time; the reply keeps the original opaque."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from tests.server.server_harness import cluster, messages


async def test_waiting_pull_returns_soon_after_a_message_arrives(tmp_path: Path) -> None:
    latencies: list[float] = []
    async with cluster(tmp_path) as c:
        consumer, producer = await c.client(), await c.client()
        await producer.send("LP", b"first")
        for i in range(5):
            offset = i + 1
            waiting = asyncio.ensure_future(consumer.pull("LP", offset, suspend_ms=15_000))
            await asyncio.sleep(0.2)
            assert not waiting.done(), "the pull should be parked, not answered"
            sent_at = time.monotonic()
            assert (await producer.send("LP", f"m{offset}".encode())).code == 0
            resp = await waiting
            latencies.append(time.monotonic() - sent_at)
            assert resp.code == 0 and [m.body for m in messages(resp)] == [f"m{offset}".encode()]
            assert c.broker.hold.held_count == 0
    # The aim is 50 ms (a measurement, printed); the assertion only tells a wake by the arrival from
    # the 15 s suspend running out, with room for a loaded CI machine.
    print(f"long-poll wake latency: max {max(latencies) * 1000:.1f} ms, all {[round(x * 1000, 1) for x in latencies]}")
    assert max(latencies) < 5.0, "a parked pull waited for its suspend time instead of the message"


async def test_parked_pull_times_out_with_not_found_and_offsets(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        cli = await c.client()
        await cli.send("LP2", b"x")
        started = time.monotonic()
        resp = await cli.pull("LP2", 1, suspend_ms=400)
        elapsed = time.monotonic() - started
        assert resp.code == 19
        assert resp.ext_fields == {
            "suggestWhichBrokerId": "0",
            "nextBeginOffset": "1",
            "minOffset": "0",
            "maxOffset": "1",
        }
        assert 0.35 <= elapsed < 3.0  # the response matched our request's opaque, after the suspend time


async def test_long_poll_ignores_messages_with_other_tags(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        consumer, producer = await c.client(), await c.client()
        await producer.send("LP3", b"seed", props={"TAGS": "a"})
        waiting = asyncio.ensure_future(consumer.pull("LP3", 1, suspend_ms=10_000, sub="wanted"))
        await asyncio.sleep(0.2)
        await producer.send("LP3", b"other", props={"TAGS": "unwanted"})
        await asyncio.sleep(0.3)
        assert not waiting.done()
        await producer.send("LP3", b"yes", props={"TAGS": "wanted"})
        resp = await asyncio.wait_for(waiting, 2.0)
        assert [m.body for m in messages(resp)] == [b"yes"]
