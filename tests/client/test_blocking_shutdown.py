"""A blocking client's shutdown is bounded: one that never finishes is given up after SHUTDOWN_TIMEOUT, with the
coroutines it still waited on in the log, and its loop thread stops. The stuck shutdown is a stand-in (a
coroutine waiting on an event nobody sets): a real client stuck on an unreachable broker cannot be produced on
demand."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from broker.client import blocking
from broker.client.blocking import BlockingProducer


class _StuckClient:
    async def shutdown(self) -> None:
        await asyncio.Event().wait()  # never set


def test_a_shutdown_that_never_finishes_is_given_up_and_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(blocking, "SHUTDOWN_TIMEOUT", 0.5)
    producer = BlockingProducer("StuckShutdown", "127.0.0.1:1")
    monkeypatch.setattr(producer, "_client", _StuckClient())
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="broker.client.blocking"):
        producer.shutdown()
    assert time.monotonic() - started < 30
    assert "did not shut down within" in caplog.text
    assert "_StuckClient.shutdown" in caplog.text or "in shutdown" in caplog.text
    assert producer._lt.loop.is_closed()


def test_a_shutdown_that_finishes_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    producer = BlockingProducer("PlainShutdown", "127.0.0.1:1")
    with caplog.at_level(logging.WARNING, logger="broker.client.blocking"):
        producer.shutdown()
    assert "did not shut down" not in caplog.text
    assert producer._lt.loop.is_closed()
