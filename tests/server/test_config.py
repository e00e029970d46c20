"""BrokerConfig from broker.conf keys, the unknown-key policy, and `mqbroker -p` / bad config."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from broker.config.errors import ConfigError
from broker.config.typed import model_aliases
from broker.server.config import BrokerConfig, effective_properties, load_broker_config, store_config
from broker.store.config import BrokerStoreKeys, StoreConfig, parse_delay_levels

MQBROKER = [sys.executable, "-m", "broker.cli.mqbroker"]


def test_keys_defaults_and_derived_values(tmp_path: Path) -> None:
    loaded = load_broker_config(
        {
            "brokerClusterName": "C1",
            "brokerName": "b",
            "brokerId": "0",
            "listenPort": "10921",
            "namesrvAddr": "127.0.0.1:9876;127.0.0.2:9876",
            "storePathRootDir": str(tmp_path),
            "flushDiskType": "SYNC_FLUSH",
            "autoCreateTopicEnable": "false",
            "flushIntervalCommitLog": "300",
        }
    )
    b = loaded.broker
    assert b.ha_listen_port == 10922 and b.broker_ip2 == b.broker_ip1
    assert b.name_servers == ["127.0.0.1:9876", "127.0.0.2:9876"]
    assert b.auto_create_topic_enable is False and b.wait_time_mills_in_send_queue == 200
    assert b.delay_levels_ms[:3] == [1000, 5000, 10000] and len(b.delay_levels_ms) == 18
    sc = store_config(loaded)
    assert sc.flush_disk_type == "SYNC_FLUSH" and sc.flush_interval_commit_log == 300
    assert str(sc.store_path_root_dir) == str(tmp_path)


def test_unknown_key_warns_by_name_and_bad_value_is_an_error(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        loaded = load_broker_config({"brokerName": "b", "noSuchKey": "1"}, origin="/etc/rocketmq/broker.conf")
    assert loaded.unknown_keys == ["noSuchKey"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["unknown broker config key 'noSuchKey' in /etc/rocketmq/broker.conf is ignored"]
    for key, value in [
        ("listenPort", "abc"),
        ("flushDiskType", "SOMETIMES"),
        ("namesrvAddr", "nohostport"),
        ("autoCreateTopicEnable", "maybe"),
        ("deleteWhen", "25"),
        ("messageDelayLevel", "1x"),
        ("flushIntervalCommitLog", "often"),
    ]:
        with pytest.raises(ConfigError) as err:
            load_broker_config({key: value})
        assert key in str(err.value) or "flush_interval_commit_log" in str(err.value), (key, str(err.value))


def test_keys_both_models_read_are_declared_once_and_copied_typed(tmp_path: Path) -> None:
    shared = set(BrokerStoreKeys.model_fields)
    broker_keys, store_keys = model_aliases(BrokerConfig), model_aliases(StoreConfig)
    # every broker.conf key both models accept is one of the shared declarations (no second copy of a key)
    assert {broker_keys[k] for k in set(broker_keys) & set(store_keys)} == shared
    assert len(shared) == 11
    loaded = load_broker_config(
        {
            "storePathRootDir": str(tmp_path),
            "fileReservedTime": "48",
            "brokerRole": "SLAVE",
            "messageDelayLevel": "1s 2m",
            "maxTransferCountOnMessageInMemory": "8",
            "flushIntervalCommitLog": "300",
        }
    )
    assert loaded.store_properties == {"flushIntervalCommitLog": "300"}  # shared keys live in the broker model
    sc = store_config(loaded)
    assert isinstance(sc, StoreConfig) and sc.flush_interval_commit_log == 300
    assert {name: getattr(sc, name) for name in shared} == {name: getattr(loaded.broker, name) for name in shared}
    assert sc.store_path_root_dir == tmp_path and sc.file_reserved_time == 48
    assert sc.delay_levels() == loaded.broker.delay_levels() == {1: 1000, 2: 120_000}
    # the broker's value is the one the store gets, also after a live change
    loaded.broker.file_reserved_time = 12
    assert store_config(loaded).file_reserved_time == 12


def test_delay_levels_have_one_parser() -> None:
    assert parse_delay_levels("1s 5s 1m 2h 1d") == {1: 1000, 2: 5000, 3: 60_000, 4: 7_200_000, 5: 86_400_000}
    for bad in ["", "1x", "s", "1.5s"]:
        with pytest.raises(ValueError, match="messageDelayLevel"):
            parse_delay_levels(bad)


def test_effective_properties_cover_broker_and_store_keys() -> None:
    props = effective_properties(load_broker_config({"brokerName": "b", "listenPort": "10911"}))
    assert props["brokerName"] == "b" and props["haListenPort"] == "10912"
    assert props["flushIntervalCommitLog"] == "500" and props["autoCreateTopicEnable"] == "true"


def test_mqbroker_print_config_and_bad_config(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("# a comment\nbrokerName = broker-x\nlistenPort=10999\nunknownThing=1\n")
    env = {**os.environ, "NAMESRV_ADDR": ""}
    out = subprocess.run(
        [*MQBROKER, "-c", str(conf), "-n", "127.0.0.1:9876", "-p"], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    lines = dict(line.split("=", 1) for line in out.stdout.splitlines())
    assert lines["brokerName"] == "broker-x" and lines["listenPort"] == "10999"
    assert lines["namesrvAddr"] == "127.0.0.1:9876" and "unknownThing" in out.stderr
    conf.write_text("listenPort=notaport\n")
    bad = subprocess.run([*MQBROKER, "-c", str(conf)], capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode == 1 and "listenPort" in bad.stderr
    missing = subprocess.run(
        [*MQBROKER, "-c", str(tmp_path / "nope.conf")], capture_output=True, text=True, env=env, timeout=60
    )
    assert missing.returncode == 1 and "nope.conf" in missing.stderr


def test_mqbroker_process_boots_and_stops_gracefully_on_sigterm(tmp_path: Path) -> None:
    import signal
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = tmp_path / "broker.conf"
    # haListenPort=0: the default, listenPort + 1, may belong to another test's process
    conf.write_text(
        f"brokerName=proc\nlistenPort={port}\nhaListenPort=0\nbrokerIP1=127.0.0.1\n"
        f"storePathRootDir={tmp_path / 'store'}\nmappedFileSizeCommitLog={4 << 20}\n"
        "maxHashSlotNum=20000\nmaxIndexNum=80000\n"
    )
    proc = subprocess.Popen(
        [*MQBROKER, "-c", str(conf)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NAMESRV_ADDR": ""},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:  # it exited: say why
            proc.wait(timeout=30)
            raise AssertionError(f"mqbroker exited with {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
        assert f"The broker[proc, 127.0.0.1:{port}] boot success" in line
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "shutdown ok" in err
    assert (tmp_path / "store" / "config" / "consumerOffset.json").exists()
