"""Fixtures of the broker tests; the harness (cluster, TestClient) lives in server_harness.py."""

from __future__ import annotations

import logging

import pytest


@pytest.fixture(autouse=True)
def _broker_logs(caplog: pytest.LogCaptureFixture) -> None:
    """Keep broker logs at INFO in failure reports: they say which step of a scenario went wrong."""
    caplog.set_level(logging.INFO, logger="broker")
