"""Fixtures of the messaging-feature tests; the live-cluster harness is in features_harness.py."""

from __future__ import annotations

import logging

import pytest


@pytest.fixture(autouse=True)
def _feature_logs(caplog: pytest.LogCaptureFixture) -> None:
    """INFO logs of the broker and SDK in failure reports: they show checks, retries and rebalances."""
    caplog.set_level(logging.INFO, logger="broker")
