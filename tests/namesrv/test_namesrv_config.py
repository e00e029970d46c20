"""Java .properties parsing and the typed NamesrvConfig built from it."""

from __future__ import annotations

import logging

import pytest

from broker.config import ConfigError, dump_properties, load_properties, parse_properties
from broker.namesrv.config import NamesrvConfig


def test_properties_syntax_follows_java() -> None:
    text = (
        "# comment\n"
        "! another comment\n"
        "   \n"
        "listenPort=9877\n"
        "  kvConfigPath : /data/kv.json\n"
        "rocketmqHome /opt/rocketmq\n"
        "multi = one, \\\n"
        "        two, \\\n"
        "        three\n"
        "esc\\ aped\\=key = tab\\there\\u0041\\\\\n"
        "empty=\n"
        "listenPort = 9878\r\n"
    )
    assert parse_properties(text) == {
        "listenPort": "9878",
        "kvConfigPath": "/data/kv.json",
        "rocketmqHome": "/opt/rocketmq",
        "multi": "one, two, three",
        "esc aped=key": "tab\thereA\\",
        "empty": "",
    }


def test_bad_unicode_escape_names_the_line(tmp_path) -> None:
    path = tmp_path / "bad.properties"
    path.write_text("a=1\nb=\\uZZZZ\n")
    with pytest.raises(ConfigError, match=r"bad.properties: line 2"):
        load_properties(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_properties(tmp_path / "missing.properties")


def test_namesrv_config_from_properties() -> None:
    config = NamesrvConfig.from_properties(
        {"listenPort": "19876", "orderMessageEnable": "true", "scanNotActiveBrokerInterval": "1000"}
    )
    assert (config.listen_port, config.order_message_enable, config.scan_not_active_broker_interval) == (
        19876,
        True,
        1000,
    )
    dumped = dump_properties(config)
    assert "listenPort=19876\n" in dumped and "orderMessageEnable=true\n" in dumped


def test_unknown_key_is_warned_about_by_name_and_file_and_ignored(caplog: pytest.LogCaptureFixture) -> None:
    # the broker's policy (tests/server/test_config.py): a typo is visible, a file shared with RocketMQ starts
    with caplog.at_level(logging.WARNING, logger="broker.namesrv.config"):
        config = NamesrvConfig.from_properties({"listenPrt": "1", "listenPort": "19877"}, source="/etc/ns.properties")
    assert config.listen_port == 19877 and config == NamesrvConfig(listenPort=19877)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["unknown NameServer config key 'listenPrt' in /etc/ns.properties is ignored"]


def test_namesrv_config_errors_name_the_key() -> None:
    with pytest.raises(ConfigError, match=r"listenPort='nine'"):
        NamesrvConfig.from_properties({"listenPort": "nine"})
    with pytest.raises(ConfigError, match="listenPort"):
        NamesrvConfig.from_properties({"listenPort": "70000"})
