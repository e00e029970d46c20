"""Config JSON files: the fastjson dialect, atomic saves with .bak, and the four files' shapes."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol.fastjson import FastjsonError, ObjectKey, dumps_pretty, loads
from broker.store.config_files import (
    ConfigFile,
    DataVersion,
    default_subscription_group,
    default_topic_config,
    load_consumer_offsets,
    load_delay_offsets,
    load_subscription_groups,
    load_topics,
    save_consumer_offsets,
    save_delay_offsets,
    save_subscription_groups,
    save_topics,
)

# What a RocketMQ 4.9 broker writes (fastjson PrettyFormat; integer keys unquoted, inline).
JAVA_CONSUMER_OFFSET = """{
\t"offsetTable":{
\t\t"%RETRY%please_rename_unique_group_name_4@please_rename_unique_group_name_4":{0:0
\t\t},
\t\t"TopicTest@please_rename_unique_group_name_4":{0:250,1:250,2:249,3:251
\t\t}
\t}
}"""

JAVA_TOPICS = """{
\t"dataVersion":{
\t\t"counter":2,
\t\t"timestamp":1547621744543
\t},
\t"topicConfigTable":{
\t\t"SELF_TEST_TOPIC":{
\t\t\t"order":false,
\t\t\t"perm":6,
\t\t\t"readQueueNums":1,
\t\t\t"topicFilterType":"SINGLE_TAG",
\t\t\t"topicName":"SELF_TEST_TOPIC",
\t\t\t"topicSysFlag":0,
\t\t\t"writeQueueNums":1
\t\t}
\t}
}"""

JAVA_DELAY = '{\n\t"offsetTable":{1:23,2:5,18:0\n\t}\n}'

# fastjson writes a MessageQueue-keyed map with objects as keys
JAVA_OBJECT_KEYS = '{"offsetTable":{{"brokerName":"broker-a","queueId":1,"topic":"T"}:42}}'


# -- reader ----------------------------------------------------------------------------------------------


def test_reads_java_consumer_offsets(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    path.write_text(JAVA_CONSUMER_OFFSET)
    assert load_consumer_offsets(path) == {
        "%RETRY%please_rename_unique_group_name_4@please_rename_unique_group_name_4": {0: 0},
        "TopicTest@please_rename_unique_group_name_4": {0: 250, 1: 250, 2: 249, 3: 251},
    }


def test_reads_java_topics_and_delay_offsets(tmp_path: Path) -> None:
    (tmp_path / "topics.json").write_text(JAVA_TOPICS)
    loaded = load_topics(tmp_path / "topics.json")
    assert loaded is not None
    table, version = loaded
    assert table["SELF_TEST_TOPIC"]["readQueueNums"] == 1
    assert version == DataVersion(counter=2, state_version=0, timestamp=1547621744543)
    (tmp_path / "delayOffset.json").write_text(JAVA_DELAY)
    delay = load_delay_offsets(tmp_path / "delayOffset.json")
    assert delay is not None and delay[0] == {1: 23, 2: 5, 18: 0}


def test_reads_object_keys() -> None:
    data = loads(JAVA_OBJECT_KEYS)
    ((key, value),) = data["offsetTable"].items()
    assert isinstance(key, ObjectKey)
    assert key.to_dict() == {"brokerName": "broker-a", "queueId": 1, "topic": "T"}
    assert value == 42


def test_reads_standard_json_and_quoted_int_keys(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    path.write_text(json.dumps({"offsetTable": {"T@g": {"0": 7, "1": 8}}}))
    assert load_consumer_offsets(path) == {"T@g": {0: 7, 1: 8}}


def test_reader_accepts_long_suffix_and_negative_keys() -> None:
    assert loads('{"a":{1L:2,-3:4}}') == {"a": {1: 2, -3: 4}}


@pytest.mark.parametrize("text", ["{", '{"a":}', '{"a":1,}x', "{a:1}", '{"a":1} 2', "[1,2", '{"a":"\\x"}'])
def test_reader_rejects_garbage(text: str) -> None:
    with pytest.raises(FastjsonError):
        loads(text)


# -- writer ----------------------------------------------------------------------------------------------


def test_writer_matches_fastjson_pretty_format() -> None:
    text = dumps_pretty(
        {
            "offsetTable": {
                "TopicTest@please_rename_unique_group_name_4": {3: 251, 0: 250, 1: 250, 2: 249},
                "%RETRY%please_rename_unique_group_name_4@please_rename_unique_group_name_4": {0: 0},
            }
        }
    )
    assert text == JAVA_CONSUMER_OFFSET


def test_writer_topics_shape_matches_java() -> None:
    text = dumps_pretty(
        {
            "topicConfigTable": {
                "SELF_TEST_TOPIC": {
                    "writeQueueNums": 1,
                    "topicSysFlag": 0,
                    "topicName": "SELF_TEST_TOPIC",
                    "topicFilterType": "SINGLE_TAG",
                    "readQueueNums": 1,
                    "perm": 6,
                    "order": False,
                }
            },
            "dataVersion": {"timestamp": 1547621744543, "counter": 2},
        }
    )
    assert text == JAVA_TOPICS


def test_writer_edge_cases() -> None:
    assert dumps_pretty({}) == "{}"
    assert dumps_pretty({"a": [], "b": {}, "c": None}) == '{\n\t"a":[],\n\t"b":{}\n}'
    assert dumps_pretty({"s": 'q"\\\n中'}) == '{\n\t"s":"q\\"\\\\\\n中"\n}'
    with pytest.raises(ValueError):
        dumps_pretty({"x": float("nan")})


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=("Cs",)))
)
json_keys = st.text(st.characters(exclude_categories=("Cs",))) | st.integers(-(2**31), 2**31 - 1)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(json_keys, children, max_size=5),
    max_leaves=30,
)


def _without_null_members(value: Any) -> Any:
    """fastjson (and our writer) omit map entries whose value is null."""
    if isinstance(value, dict):
        return {k: _without_null_members(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_null_members(v) for v in value]
    return value


@given(st.dictionaries(json_keys, json_values, max_size=6))
@settings(max_examples=300)
def test_any_json_written_reads_back(data: dict[Any, Any]) -> None:
    assert loads(dumps_pretty(data)) == _without_null_members(data)


@given(st.dictionaries(st.text(), json_values, max_size=6))
def test_standard_json_reads_as_standard_json(data: dict[str, Any]) -> None:
    text = json.dumps(data, indent=1)
    assert loads(text) == json.loads(text)


def test_object_keys_round_trip() -> None:
    mq = ObjectKey.of({"topic": "T", "brokerName": "b", "queueId": 3})
    data = {"offsetTable": {mq: 9}, "n": {1: {2: [1, 2]}}}
    assert loads(dumps_pretty(data)) == data


# -- the file --------------------------------------------------------------------------------------------


def test_save_keeps_previous_version_as_bak(tmp_path: Path) -> None:
    f = ConfigFile(tmp_path / "config" / "topics.json")
    assert f.load() is None
    f.save({"v": 1})
    assert not f.bak_path.exists()
    f.save({"v": 2})
    assert f.load() == {"v": 2}
    assert loads(f.bak_path.read_text()) == {"v": 1}
    assert sorted(p.name for p in f.path.parent.iterdir()) == ["topics.json", "topics.json.bak"]


@pytest.mark.parametrize("damage", [b"", b'{\n\t"v":', b"\x00\x00\x00\x00", b"[1,2]"])
def test_corrupt_main_file_falls_back_to_bak(tmp_path: Path, damage: bytes) -> None:
    f = ConfigFile(tmp_path / "consumerOffset.json")
    f.save({"v": 1})
    f.save({"v": 2})
    f.path.write_bytes(damage)
    assert f.load() == {"v": 1}


def test_missing_main_file_falls_back_to_bak(tmp_path: Path) -> None:
    f = ConfigFile(tmp_path / "x.json")
    f.save({"v": 1})
    f.save({"v": 2})
    f.path.unlink()
    assert f.load() == {"v": 1}


def test_both_unreadable_gives_none(tmp_path: Path) -> None:
    f = ConfigFile(tmp_path / "x.json")
    f.path.write_text("{oops")
    f.bak_path.write_text("")
    assert f.load() is None


_SAVER = """
import sys
from pathlib import Path
from broker.store.config_files import ConfigFile
f = ConfigFile(Path(sys.argv[1]))
i = 0
sys.stdout.write("ready\\n"); sys.stdout.flush()
while True:
    i += 1
    f.save({"offsetTable": {f"T{j}@g": {q: i for q in range(8)} for j in range(50)}, "round": i})
"""


def _check_loadable(f: ConfigFile) -> int:
    data = f.load()
    assert data is not None
    rounds = {v for table in data["offsetTable"].values() for v in table.values()}
    assert rounds == {data["round"]}  # never a mix of two versions
    if f.path.exists():  # the main file itself is always complete: only renames replace it
        assert loads(f.path.read_bytes())["round"] == data["round"]
    return int(data["round"])


def test_kill_during_saves_never_leaves_an_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    rng = random.Random(7)
    repo = Path(__file__).resolve().parents[2]
    last = 0
    for _ in range(12):
        child = subprocess.Popen(
            [sys.executable, "-c", _SAVER, str(path)], stdout=subprocess.PIPE, cwd=repo, env={**os.environ}
        )
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.005, 0.08))
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
        f = ConfigFile(path)
        if f.path.exists() or f.bak_path.exists():
            last = _check_loadable(f)
    assert last > 0


# -- shapes ----------------------------------------------------------------------------------------------


def test_consumer_offsets_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    table = {"TopicTest@g1": {0: 250, 1: 251}, "%RETRY%g1@g1": {0: 0}, "Other@g2": {}}
    save_consumer_offsets(path, table)
    text = path.read_text()
    assert '"TopicTest@g1":{0:250,1:251\n\t\t}' in text
    assert load_consumer_offsets(path) == table
    assert list(loads(text)) == ["offsetTable"]  # RocketMQ 4.9's shape: nothing else


def test_consumer_offsets_are_written_as_a_rocketmq_49_broker_writes_them(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    save_consumer_offsets(path, load_consumer_offsets_text(tmp_path, JAVA_CONSUMER_OFFSET))
    assert path.read_text() == JAVA_CONSUMER_OFFSET


def load_consumer_offsets_text(tmp_path: Path, text: str) -> dict[str, dict[int, int]]:
    source = tmp_path / "source.json"
    source.write_text(text)
    loaded = load_consumer_offsets(source)
    assert loaded is not None
    return loaded


def test_a_rocketmq_5_consumer_offsets_file_loads(tmp_path: Path) -> None:
    # a 5.x broker adds dataVersion beside offsetTable; the offsets are what counts
    text = '{"dataVersion":{"counter":3,"stateVersion":0,"timestamp":1700000000000},"offsetTable":{"T@g":{0:9}}}'
    assert load_consumer_offsets_text(tmp_path, text) == {"T@g": {0: 9}}


def test_topics_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    table = {"TBW102": default_topic_config("TBW102", 8, 8, 7), "T": default_topic_config("T")}
    version = DataVersion()
    version.next_version()
    save_topics(path, table, version)
    loaded = load_topics(path)
    assert loaded == (table, version)
    assert version.counter == 1 and version.timestamp > 0


def test_subscription_groups_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "subscriptionGroup.json"
    table = {"g1": default_subscription_group("g1")}
    forbidden = {"g1": {"T": 2}}
    version = DataVersion(counter=3, state_version=1, timestamp=9)
    save_subscription_groups(path, table, forbidden, version)
    assert load_subscription_groups(path) == (table, forbidden, version)
    assert '"dataVersion":{\n\t\t"counter":3,\n\t\t"stateVersion":1,\n\t\t"timestamp":9\n\t}' in path.read_text()


def test_delay_offsets_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "delayOffset.json"
    save_delay_offsets(path, {3: 10, 1: 4}, DataVersion(counter=1, timestamp=2))
    assert path.read_text().startswith('{\n\t"dataVersion":{')
    assert '"offsetTable":{1:4,3:10\n\t}' in path.read_text()
    assert load_delay_offsets(path) == ({1: 4, 3: 10}, DataVersion(counter=1, timestamp=2))


def test_loaders_return_none_without_a_file(tmp_path: Path) -> None:
    assert load_consumer_offsets(tmp_path / "a.json") is None
    assert load_topics(tmp_path / "b.json") is None
    assert load_subscription_groups(tmp_path / "c.json") is None
    assert load_delay_offsets(tmp_path / "d.json") is None
