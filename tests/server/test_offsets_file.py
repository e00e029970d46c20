"""consumerOffset.json has one shape, RocketMQ 4.9's, whoever writes it: the live offset manager
(broker.server.offsets) and the store's `save_consumer_offsets` (broker.store.config_files) write the same
bytes, each reads what the other wrote, and both read a 4.9 and a 5.x broker's file (real files)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker.protocol.fastjson import loads
from broker.server.offsets import ConsumerOffsetManager
from broker.store.config_files import load_consumer_offsets, save_consumer_offsets

# What a RocketMQ 4.9 broker writes (fastjson PrettyFormat), as in tests/store/test_config_files.py
JAVA_49 = """{
\t"offsetTable":{
\t\t"%RETRY%g@g":{0:0
\t\t},
\t\t"TopicTest@g":{0:250,1:250,2:249,3:251
\t\t}
\t}
}"""
# A 5.x broker adds a dataVersion beside the table
JAVA_5 = '{"dataVersion":{"counter":7,"stateVersion":0,"timestamp":1700000000000},"offsetTable":{"T@g":{0:9,1:3}}}'


def test_the_manager_writes_what_a_49_broker_writes_and_the_store_writer_the_same(tmp_path: Path) -> None:
    manager = ConsumerOffsetManager(tmp_path / "a")
    manager.commit("g", "TopicTest", 0, 250)
    manager.commit("g", "TopicTest", 1, 250)
    manager.commit("g", "TopicTest", 2, 249)
    manager.commit("g", "TopicTest", 3, 251)
    manager.commit("g", "%RETRY%g", 0, 0)
    manager.persist()
    live = (tmp_path / "a" / "consumerOffset.json").read_text()
    assert live == JAVA_49
    save_consumer_offsets(tmp_path / "b.json", manager.table)
    assert (tmp_path / "b.json").read_text() == live


def test_each_writer_reads_the_other(tmp_path: Path) -> None:
    table = {"T@g1": {0: 5, 3: 8}, "%RETRY%g1@g1": {0: 1}, "U@g2": {1: 2}}
    save_consumer_offsets(tmp_path / "consumerOffset.json", table)
    manager = ConsumerOffsetManager(tmp_path)
    manager.load()
    assert manager.table == table
    manager.commit("g2", "U", 1, 3)
    manager.persist()
    assert load_consumer_offsets(tmp_path / "consumerOffset.json") == {**table, "U@g2": {1: 3}}


def test_the_periodic_flush_writes_the_same_shape(tmp_path: Path) -> None:
    manager = ConsumerOffsetManager(tmp_path)
    manager.commit("g", "T", 0, 42)

    async def flush_once() -> None:
        task = asyncio.get_running_loop().create_task(manager.flush_periodically(10))
        path = tmp_path / "consumerOffset.json"
        while not path.exists():
            await asyncio.sleep(0.01)
        task.cancel()

    asyncio.run(flush_once())
    assert loads((tmp_path / "consumerOffset.json").read_text()) == {"offsetTable": {"T@g": {0: 42}}}


def test_the_manager_loads_49_and_5x_files(tmp_path: Path) -> None:
    for name, text, expected in [
        ("49", JAVA_49, {"%RETRY%g@g": {0: 0}, "TopicTest@g": {0: 250, 1: 250, 2: 249, 3: 251}}),
        ("5x", JAVA_5, {"T@g": {0: 9, 1: 3}}),
    ]:
        directory = tmp_path / name
        directory.mkdir()
        (directory / "consumerOffset.json").write_text(text)
        manager = ConsumerOffsetManager(directory)
        manager.load()
        assert manager.table == expected, name
        assert load_consumer_offsets(directory / "consumerOffset.json") == expected, name
