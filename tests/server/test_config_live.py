"""Which broker keys UPDATE_BROKER_CONFIG applies live, and a broker whose -c file is read-only.

The operator rolls pods only for the keys the broker cannot take live, so the split must be true: the
live set is pinned here key by key, and each live key is changed over a real connection to a real broker
(server_harness.cluster) and read back where the broker's parts read it. The read-only file is a real
read-only mount (a tmpfs mounted ro, as the kubelet mounts a ConfigMap).
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.config.typed import model_aliases
from broker.protocol.codes import RequestCode as RC
from broker.protocol.codes import ResponseCode
from broker.server.config import BrokerConfig
from broker.server.config_update import BLACK_LIST, LIVE_KEYS, RESTART_KEYS
from broker.store.config import StoreConfig
from tests.server.server_harness import cluster

#: Every live key with a value unlike its default, and the value the broker's parts then read.
LIVE_SAMPLES: dict[str, tuple[str, object]] = {
    "autoCreateTopicEnable": ("false", False),
    "autoCreateSubscriptionGroup": ("false", False),
    "defaultTopicQueueNums": ("3", 3),
    "brokerPermission": ("4", 4),
    "channelExpiredTimeout": ("90000", 90_000),
    "notifyConsumerIdsChangedEnable": ("false", False),
    "enablePropertyFilter": ("true", True),
    "maxMessageSize": ("2048", 2048),
    "longPollingEnable": ("false", False),
    "shortPollingTimeMills": ("300", 300),
    "maxTransferBytesOnMessageInMemory": ("65536", 65_536),
    "rejectTransactionMessage": ("true", True),
    "storeReplyMessageEnable": ("false", False),
    "timerWheelEnable": ("false", False),
    "timerMaxDelaySec": ("600", 600),
    "transactionTimeOut": ("7000", 7000),
    "transactionCheckMax": ("3", 3),
    "deleteWhen": ("05;17", "05;17"),
    "fileReservedTime": ("24", 24),
    "diskMaxUsedSpaceRatio": ("60", 60),
    "diskSpaceCleanForciblyRatio": ("0.7", 0.7),
}

#: Keys read once at start by a part built from them: the broker must say they need a restart.
READ_AT_START = {
    "waitTimeMillsInSendQueue",  # the send processor's queue wait limit
    "registerBrokerTimeoutMills",  # the registrar's request timeout
    "registerNameServerPeriod",  # the registration loop's period
    "transactionCheckInterval",  # the check loop's period
    "cleanResourceInterval",  # the clean loop's period
    "flushIntervalCommitLog",  # the flush service's settings
    "syncFlushTimeout",
    "accessMessageInMemoryMaxRatio",
    "slaveReadEnable",
    "haSendHeartbeatInterval",
    "inSyncReplicas",
    "authenticationEnabled",
    "authorizationEnabled",
    "aclEnable",
    "tls.enable",
    "tls.server.mode",
    "metricsExporterType",
    "metricsPromExporterPort",
    "sendMessageThreadPoolNums",
    "pullMessageThreadPoolNums",
    "serverWriteBufferMaxBytes",
    "frameMaxLength",
    "traceTopicEnable",  # system topics are made at start
    "clusterTopicEnable",
    "messageIndexEnable",
    "listenPort",
    "brokerRole",
    "logFormat",
}


def _known_keys() -> set[str]:
    return set(model_aliases(BrokerConfig)) | set(model_aliases(StoreConfig))


def test_every_key_is_live_or_restart_and_the_live_set_is_pinned() -> None:
    assert set(LIVE_KEYS) == set(LIVE_SAMPLES)
    assert not LIVE_KEYS & RESTART_KEYS
    assert _known_keys() <= LIVE_KEYS | RESTART_KEYS | BLACK_LIST
    assert READ_AT_START <= RESTART_KEYS


def _value(broker: object, key: str) -> object:
    broker_keys, store_keys = model_aliases(BrokerConfig), model_aliases(StoreConfig)
    if key in broker_keys:
        return getattr(broker.config, broker_keys[key])  # type: ignore[attr-defined]
    return getattr(broker.store_config, store_keys[key])  # type: ignore[attr-defined]


async def test_each_live_key_reaches_what_the_broker_reads(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        b = c.running_broker
        cli = await c.client()
        for key, (text, want) in LIVE_SAMPLES.items():
            assert _value(b, key) != want, key
            r = await cli.request(RC.UPDATE_BROKER_CONFIG, body=f"{key}={text}\n".encode())
            assert (r.code, r.remark) == (ResponseCode.SUCCESS, None), (key, r.remark)
            assert _value(b, key) == want, key
        # the parts that copied a live key at start get the new value too
        assert b.store.commit_log.max_message_size == 2048
        assert b.groups.auto_create is False
        assert b.consumers.notify_enabled is False
        assert b.consumers.channel_expired_timeout == b.producers.channel_expired_timeout == 90.0
        assert b.store_config.delete_hours() == {5, 17}


async def test_a_live_key_changes_behaviour_and_a_restart_key_does_not(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        b = c.running_broker
        cli = await c.client()
        assert (await cli.send("Sized", body=b"x" * 4096)).code == ResponseCode.SUCCESS
        r = await cli.request(RC.UPDATE_BROKER_CONFIG, body=b"maxMessageSize=1024\nwaitTimeMillsInSendQueue=999\n")
        assert r.code == ResponseCode.SUCCESS and "waitTimeMillsInSendQueue" in (r.remark or ""), r.remark
        assert (await cli.send("Sized", body=b"x" * 4096)).code == ResponseCode.MESSAGE_ILLEGAL
        assert (await cli.send("Sized", body=b"x" * 512)).code == ResponseCode.SUCCESS
        assert b.config.wait_time_mills_in_send_queue == 200  # persisted only: read at the next start
        r = await cli.request(RC.UPDATE_BROKER_CONFIG, body=b"brokerPermission=4\n")  # read-only
        assert r.code == ResponseCode.SUCCESS
        assert (await cli.send("Sized", body=b"x")).code != ResponseCode.SUCCESS


@contextlib.contextmanager
def _read_only_dir(path: Path, files: dict[str, str]) -> Iterator[Path]:
    """A tmpfs at `path` holding `files`, remounted read-only (needs root and CAP_SYS_ADMIN)."""
    path.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(path)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot mount a tmpfs here (a read-only mount needs root and CAP_SYS_ADMIN): {exc}")
    try:
        for name, text in files.items():
            (path / name).write_text(text)
        subprocess.run(["mount", "-o", "remount,ro", str(path)], check=True, capture_output=True)
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


async def test_a_read_only_config_file_applies_live_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with _read_only_dir(tmp_path / "conf", {"broker.conf": "brokerName=broker-ro\n"}) as conf_dir:
        conf = conf_dir / "broker.conf"
        with pytest.raises(OSError):
            conf.write_text("x")  # really read-only, even for root
        async with cluster(tmp_path / "run") as c:
            b = c.running_broker
            b.loaded.source = conf
            cli = await c.client()
            with caplog.at_level(logging.WARNING, logger="broker.server.config_update"):
                r = await cli.request(RC.UPDATE_BROKER_CONFIG, body=b"autoCreateTopicEnable=false\nlistenPort=1\n")
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert b.config.auto_create_topic_enable is False
            assert b.config.listen_port != 1
            assert conf.read_text() == "brokerName=broker-ro\n"
            warned = [rec.getMessage() for rec in caplog.records if "read-only" in rec.getMessage()]
            assert len(warned) == 1 and "until the next start" in warned[0], warned
            assert str(conf) in warned[0]


async def test_another_write_error_refuses_the_update(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the config's directory should be\n")
    async with cluster(tmp_path / "run") as c:
        b = c.running_broker
        b.loaded.source = blocker / "broker.conf"  # ENOTDIR / EEXIST: not a read-only file
        cli = await c.client()
        r = await cli.request(RC.UPDATE_BROKER_CONFIG, body=b"autoCreateTopicEnable=false\n")
        assert r.code == ResponseCode.SYSTEM_ERROR and "cannot persist" in (r.remark or ""), r.remark
        assert b.config.auto_create_topic_enable is True
        assert os.path.isfile(blocker)


async def test_a_refused_update_names_the_rule_and_never_a_secret(tmp_path: Path) -> None:
    """A rule over several keys fails with every value as its input: the answer names the rule alone."""
    secret = "KeyPw-Never-Shown"
    async with cluster(tmp_path / "run", **{"tls.client.keyPassword": secret}) as c:
        cli = await c.client()
        r = await cli.request(RC.UPDATE_BROKER_CONFIG, body=b"enableControllerMode=true\n")
        assert r.code == ResponseCode.INVALID_PARAMETER, r.remark
        assert "enableControllerMode=true needs controllerAddr" in (r.remark or ""), r.remark
        assert secret not in (r.remark or "")
        assert c.running_broker.config.enable_controller_mode is False
