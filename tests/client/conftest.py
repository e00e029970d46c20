"""Fixtures of the client SDK tests; the live-cluster harness is in client_harness.py."""

from __future__ import annotations

import logging

import pytest


@pytest.fixture(autouse=True)
def _client_logs(caplog: pytest.LogCaptureFixture) -> None:
    """INFO logs of the SDK and broker in failure reports: they show rebalances and retries."""
    caplog.set_level(logging.INFO, logger="broker")
