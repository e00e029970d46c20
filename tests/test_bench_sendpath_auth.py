"""bench.sendpath --auth and bench.instructions: the paired brokers really take the send path (every frame
answered, the signed side's sends accepted), and the estimators do what their docstrings say."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from bench import sendpath
from bench.broker import TOPIC
from bench.instructions import _sent_reads
from broker.transport.loop import run


def _args(**overrides: object) -> argparse.Namespace:
    values: dict[str, object] = {"num": 640, "rounds": 2, "flush": "ASYNC_FLUSH", "per_read": 64, "set": [], "batch": 1}
    values.update(overrides)
    return argparse.Namespace(**values)


def test_the_fastest_quarter_is_the_mean_of_the_fastest_rounds() -> None:
    assert sendpath.fastest_quarter([30.0, 10.0, 50.0, 12.0, 40.0, 90.0, 11.0, 70.0]) == 10.5
    assert sendpath.fastest_quarter([7.0, 9.0]) == 7.0


def test_paired_rounds_send_on_both_brokers_and_every_signed_send_is_accepted() -> None:
    stateful = "authenticationStrategy=StatefulAuthenticationStrategy"

    async def both() -> tuple[list[float], list[float], int, int]:
        args = _args(set=[stateful])
        off = await sendpath._open(args, auth=False)
        on = await sendpath._open(args, auth=True)
        try:
            offs = [await off.round() for _ in range(2)]
            ons = [await on.round() for _ in range(2)]
            checker = on.broker.auth.checker
            return offs, ons, checker.refused, on.broker.store.get_max_offset_in_queue(TOPIC, 0)
        finally:
            await on.close()
            await off.close()

    offs, ons, refused, stored = run(both())
    assert len(offs) == len(ons) == 2 and all(x > 0 for x in offs + ons)
    assert refused == 0  # a refusal would be answered too, and make the signed side cheap
    # queue 0 holds an eighth of the topic-creating read (64 frames) and of both rounds (640 frames each)
    assert stored == (64 + 2 * 640) // 8


def test_the_instruction_count_child_sends_a_fifth_or_all() -> None:
    assert (_sent_reads(160, 1), _sent_reads(160, 5)) == (32, 160)
    done = subprocess.run(
        [sys.executable, "-m", "bench.instructions", "--child", "--share", "1", "--num", "640", "--auth"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_verification_floor_checks_every_signed_frame_and_refuses_a_wrong_secret() -> None:
    async def floors() -> float:
        on = await sendpath._open(_args(), auth=True)
        try:
            requests = sendpath.signed_requests(on.reads[0])
            assert len(requests) == 64 and all(len(body) == 1024 for _fields, body in requests)
            with pytest.raises(RuntimeError, match="a signed frame fails its signature"):
                sendpath.verify_floor(on, "not-the-secret")
            return sendpath.verify_floor(on, sendpath.BENCH_USER.secret_key)
        finally:
            await on.close()

    assert run(floors()) > 0
