"""The two log formats, the helper relay and the non-default config lines, without processes (the processes
are in test_server_logs.py)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from broker.config.effective import MASK, non_default_lines
from broker.logs.formats import TEXT_LINE, JsonFormatter, TextFormatter
from broker.logs.relay import RELAY_ENV, to_record
from broker.logs.settings import DEFAULT_MAX_INDEX, DEFAULT_MAX_SIZE, LogSettings
from broker.namesrv.config import NamesrvConfig
from broker.server.config import ConfigError, load_broker_config


def _record(msg: str, *, exc: bool = False, level: int = logging.ERROR) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise ValueError("boom\nsecond line of the error")
        except ValueError:
            exc_info = sys.exc_info()
    return logging.LogRecord("broker.test", level, __file__, 1, msg, None, exc_info)


def test_every_text_line_of_a_multi_line_record_with_a_traceback_parses() -> None:
    text = TextFormatter().format(_record("first\nsecond", exc=True))
    lines = text.split("\n")
    assert len(lines) > 4
    for line in lines:
        match = TEXT_LINE.match(line)
        assert match is not None, line
        assert match["level"] == "ERROR" and match["logger"] == "broker.test"
    assert TEXT_LINE.match(lines[0])["message"] == "first"  # type: ignore[index]
    assert lines[1].endswith("- | second")
    assert lines[-2].endswith("| ValueError: boom") and lines[-1].endswith("| second line of the error")


def test_a_json_record_is_one_line_with_time_level_logger_message_and_exception() -> None:
    line = JsonFormatter().format(_record("multi\nline", exc=True))
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["level"] == "ERROR" and entry["logger"] == "broker.test" and entry["message"] == "multi\nline"
    assert "Traceback" in entry["exception"] and "ValueError: boom" in entry["exception"]
    assert entry["time"][10] == "T" and entry["time"][-6] in "+-"  # ISO 8601 with its offset
    plain = json.loads(JsonFormatter().format(_record("no exception", level=logging.INFO)))
    assert set(plain) == {"time", "level", "logger", "message"}


def test_a_helper_record_keeps_its_time_level_logger_and_traceback_through_the_relay() -> None:
    original = _record("from the helper", exc=True, level=logging.WARNING)
    relayed = to_record(JsonFormatter().format(original), "index-helper")
    assert (relayed.name, relayed.levelno, relayed.getMessage()) == ("broker.test", logging.WARNING, "from the helper")
    assert abs(relayed.created - original.created) < 0.002
    text = TextFormatter().format(relayed)
    assert all(TEXT_LINE.match(line) for line in text.split("\n"))
    assert "ValueError: boom" in text
    # a line that is no record (a crash before the helper's logging started) is kept, as a WARNING
    raw = to_record("Fatal Python error: Segmentation fault", "index-helper")
    assert (raw.name, raw.levelno, raw.getMessage()) == ("index-helper", logging.WARNING, raw.msg)


def test_the_index_helper_writes_records_for_the_relay_only_when_started_by_the_broker() -> None:
    code = "from broker.logs.relay import configure_child; import logging; configure_child(); logging.info('hi')"
    env = {**os.environ, RELAY_ENV: "1"}
    relayed = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert json.loads(relayed.stderr)["message"] == "hi"
    env.pop(RELAY_ENV)
    by_hand = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert TEXT_LINE.match(by_hand.stderr.strip())


def test_non_default_lines_are_sorted_and_mask_secrets() -> None:
    effective = {"b": "2", "a": "1", "secretKey": "hunter2", "innerClientPassword": "", "token": "x", "same": "d"}
    defaults = {"a": "0", "b": "2", "same": "d"}
    expected = ["a=1", "innerClientPassword=", f"secretKey={MASK}", f"token={MASK}"]
    assert non_default_lines(effective, defaults) == expected


def test_log_keys_defaults_and_bad_values_name_the_key() -> None:
    broker = load_broker_config({"brokerName": "b"}).broker
    settings = LogSettings.of(broker, "broker.log")
    assert settings == LogSettings("text", None, DEFAULT_MAX_SIZE, DEFAULT_MAX_INDEX)
    assert (DEFAULT_MAX_SIZE, DEFAULT_MAX_INDEX) == (128 << 20, 10)  # RocketMQ's broker.log rolling policy
    on = load_broker_config({"logRoot": "/var/log/rmq", "logFormat": "JSON", "logFileMaxIndex": "3"}).broker
    assert LogSettings.of(on, "broker.log") == LogSettings("json", Path("/var/log/rmq/broker.log"), DEFAULT_MAX_SIZE, 3)
    for key, value in [("logFormat", "xml"), ("logFileMaxIndex", "0"), ("logFileMaxSize", "10")]:
        with pytest.raises(ConfigError, match=key):
            load_broker_config({key: value})
    with pytest.raises(Exception, match="logFormat"):
        NamesrvConfig.from_properties({"logFormat": "yaml"})
