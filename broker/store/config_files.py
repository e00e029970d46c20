"""The broker's JSON config files under `<storePathRootDir>/config/`, in RocketMQ's shapes.

Called by the broker's managers (topic configs, consumer offsets, subscription groups, delay offsets),
usually from a worker thread because `save` fsyncs. Files written by a Java broker must load here and
files written here must load in a Java broker, so:

- the reader accepts fastjson's extensions: unquoted integer keys (`{0:250}`) and JSON objects as keys
  (`{{"brokerName":"b","queueId":0,"topic":"T"}:5}`), besides standard JSON;
- the writer produces fastjson's PrettyFormat (tab indentation, keys sorted, no space after `:`), with
  unquoted keys wherever the Java map is keyed by a number;
- `save` is atomic (temporary file, fsync, rename, fsync of the directory) and keeps the previous version
  as `<name>.bak`, which `load` falls back to when the main file is missing or unreadable.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

from broker.protocol.bodies import DataVersion
from broker.protocol.fastjson import FastjsonError, dumps_pretty, loads

__all__ = [
    "ConfigFile",
    "DataVersion",
    "default_subscription_group",
    "default_topic_config",
    "load_consumer_offsets",
    "load_delay_offsets",
    "load_subscription_groups",
    "load_topics",
    "save_consumer_offsets",
    "save_delay_offsets",
    "save_subscription_groups",
    "save_topics",
]

log = logging.getLogger(__name__)

BAK_SUFFIX = ".bak"
TMP_SUFFIX = ".tmp"


# -- the file -----------------------------------------------------------------------------------------


class ConfigFile:
    """One config file with its `.bak`. Thread-safe: saves of one file are serialised by a lock."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.bak_path = self.path.with_name(self.path.name + BAK_SUFFIX)
        self._tmp_path = self.path.with_name(self.path.name + TMP_SUFFIX)
        self._lock = threading.Lock()

    def load(self) -> dict[Any, Any] | None:
        """The file's content; the `.bak` when the file is missing, empty or corrupt; None when neither is usable."""
        main = self._read(self.path)
        if main is not None:
            return main
        bak = self._read(self.bak_path)
        if bak is not None:
            if self.path.exists():
                log.warning("%s is unreadable; loaded the previous version from %s", self.path, self.bak_path.name)
            else:
                log.warning("%s is missing; loaded %s", self.path, self.bak_path.name)
            return bak
        if self.path.exists() or self.bak_path.exists():
            log.error("neither %s nor its .bak could be read", self.path)
        return None

    @staticmethod
    def _read(path: Path) -> dict[Any, Any] | None:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.error("cannot read %s: %s", path, exc)
            return None
        if not raw.strip():
            return None  # Java's string2File leaves an empty file behind when it dies mid-write
        try:
            data = loads(raw)
        except FastjsonError as exc:
            log.error("%s is corrupt: %s", path, exc)
            return None
        if not isinstance(data, dict):
            log.error("%s does not hold a JSON object", path)
            return None
        return data

    def save(self, data: dict[Any, Any]) -> None:
        """Write atomically; afterwards the previous version is `.bak`. Blocking (two fsyncs)."""
        payload = dumps_pretty(data).encode()
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._tmp_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                view = memoryview(payload)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            if self.path.exists():
                self._keep_previous()
            # rename is atomic: a reader (or a crash) sees either the old or the new file, never a mix
            os.replace(self._tmp_path, self.path)
            _fsync_dir(self.path.parent)

    def _keep_previous(self) -> None:
        """Make the current file the `.bak` without ever removing the main file (hard link, then rename)."""
        bak_tmp = self.bak_path.with_name(self.bak_path.name + TMP_SUFFIX)
        bak_tmp.unlink(missing_ok=True)
        try:
            os.link(self.path, bak_tmp)
        except OSError:
            # filesystems without hard links: copy instead (the main file stays in place either way)
            data = self.path.read_bytes()
            fd = os.open(bak_tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
        os.replace(bak_tmp, self.bak_path)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- shapes of the four files -------------------------------------------------------------------------


def _int_map(raw: Any, where: str) -> dict[int, int]:
    """{queueId/level: offset} from either unquoted (fastjson) or quoted (standard JSON) keys."""
    result: dict[int, int] = {}
    if not isinstance(raw, dict):
        return result
    for k, v in raw.items():
        try:
            result[int(k)] = int(v)
        except (TypeError, ValueError):
            log.warning("%s: skipping entry %r: %r", where, k, v)
    return result


def default_topic_config(
    name: str, read_queue_nums: int = 16, write_queue_nums: int = 16, perm: int = 6
) -> dict[str, Any]:
    """A TopicConfig as topics.json stores it, with Java's defaults."""
    return {
        "attributes": {},
        "order": False,
        "perm": perm,
        "readQueueNums": read_queue_nums,
        "topicFilterType": "SINGLE_TAG",
        "topicName": name,
        "topicSysFlag": 0,
        "writeQueueNums": write_queue_nums,
    }


def default_subscription_group(name: str) -> dict[str, Any]:
    """A SubscriptionGroupConfig as subscriptionGroup.json stores it, with Java's defaults."""
    return {
        "brokerId": 0,
        "consumeBroadcastEnable": True,
        "consumeEnable": True,
        "consumeFromMinEnable": True,
        "consumeMessageOrderly": False,
        "consumeTimeoutMinute": 15,
        "groupName": name,
        "groupSysFlag": 0,
        "notifyConsumerIdsChangedEnable": True,
        "retryMaxTimes": 16,
        "retryQueueNums": 1,
        "whichBrokerWhenConsumeSlowly": 1,
    }


def load_topics(path: Path) -> tuple[dict[str, dict[str, Any]], DataVersion] | None:
    """topics.json -> ({topic: TopicConfig dict}, dataVersion); None when there is no usable file."""
    data = ConfigFile(path).load()
    if data is None:
        return None
    raw = data.get("topicConfigTable")
    table = {str(k): v for k, v in raw.items() if isinstance(v, dict)} if isinstance(raw, dict) else {}
    return table, DataVersion.from_json(data.get("dataVersion"))


def save_topics(path: Path, table: dict[str, dict[str, Any]], data_version: DataVersion) -> None:
    ConfigFile(path).save({"dataVersion": data_version.to_json(), "topicConfigTable": table})


def load_consumer_offsets(path: Path) -> dict[str, dict[int, int]] | None:
    """consumerOffset.json -> {"topic@group": {queueId: offset}}; None when there is no usable file."""
    data = ConfigFile(path).load()
    if data is None:
        return None
    raw = data.get("offsetTable")
    if not isinstance(raw, dict):
        return {}
    return {str(k): _int_map(v, f"{path.name} {k}") for k, v in raw.items()}


def save_consumer_offsets(path: Path, table: dict[str, dict[int, int]]) -> None:
    """Write RocketMQ 4.9's shape, `{"offsetTable": {"topic@group": {queueId: offset}}}` with unquoted queue ids.

    The one shape of this file (docs/configuration.md, "consumerOffset.json"): the broker's live offset
    manager (broker.server.offsets) writes through here too. A 4.9 broker reads only offsetTable, and a 5.x
    broker reads this file as well (its dataVersion is optional), so the file moves to and from either.
    """
    ConfigFile(path).save({"offsetTable": {k: {int(q): int(o) for q, o in v.items()} for k, v in table.items()}})


def load_subscription_groups(
    path: Path,
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, int]], DataVersion] | None:
    """subscriptionGroup.json -> (subscriptionGroupTable, forbiddenTable, dataVersion); None when unusable."""
    data = ConfigFile(path).load()
    if data is None:
        return None
    raw = data.get("subscriptionGroupTable")
    table = {str(k): v for k, v in raw.items() if isinstance(v, dict)} if isinstance(raw, dict) else {}
    raw_forbidden = data.get("forbiddenTable")
    forbidden: dict[str, dict[str, int]] = {}
    if isinstance(raw_forbidden, dict):
        for group, topics in raw_forbidden.items():
            if isinstance(topics, dict):
                forbidden[str(group)] = {str(t): int(v) for t, v in topics.items()}
    return table, forbidden, DataVersion.from_json(data.get("dataVersion"))


def save_subscription_groups(
    path: Path,
    table: dict[str, dict[str, Any]],
    forbidden: dict[str, dict[str, int]],
    data_version: DataVersion,
) -> None:
    ConfigFile(path).save(
        {"dataVersion": data_version.to_json(), "forbiddenTable": forbidden, "subscriptionGroupTable": table}
    )


def load_delay_offsets(path: Path) -> tuple[dict[int, int], DataVersion] | None:
    """delayOffset.json -> ({delayLevel: offset}, dataVersion); None when there is no usable file."""
    data = ConfigFile(path).load()
    if data is None:
        return None
    return _int_map(data.get("offsetTable"), path.name), DataVersion.from_json(data.get("dataVersion"))


def save_delay_offsets(path: Path, table: dict[int, int], data_version: DataVersion | None = None) -> None:
    data: dict[str, Any] = {"offsetTable": {int(k): int(v) for k, v in table.items()}}
    if data_version is not None:
        data["dataVersion"] = data_version.to_json()
    ConfigFile(path).save(data)
