"""Offset stores: increase-only updates, read modes, the broker-backed commit, the local file."""

from __future__ import annotations

import asyncio
import json
import os

from broker.client.errors import QueryNotFound
from broker.client.message import MessageQueue
from broker.client.offset_store import LocalFileOffsetStore, ReadOffsetType, RemoteBrokerOffsetStore

MQ = MessageQueue("T", "b", 0)
MQ2 = MessageQueue("T", "b", 1)


class FakeBroker:
    """Stands in for QUERY/UPDATE_CONSUMER_OFFSET: a dict, recording what was committed."""

    def __init__(self, stored: dict[MessageQueue, int]) -> None:
        self.stored = stored
        self.commits: list[tuple[MessageQueue, int]] = []

    async def fetch(self, mq: MessageQueue) -> int:
        if mq not in self.stored:
            raise QueryNotFound("no offset")
        return self.stored[mq]

    async def commit(self, mq: MessageQueue, offset: int) -> None:
        self.commits.append((mq, offset))
        self.stored[mq] = offset


def test_remote_store_read_modes_and_commits() -> None:
    async def main() -> None:
        broker = FakeBroker({MQ: 40})
        store = RemoteBrokerOffsetStore(broker.fetch, broker.commit)
        assert await store.read(MQ, ReadOffsetType.READ_FROM_MEMORY) == -1
        assert await store.read(MQ) == 40  # memory miss -> broker, then cached
        assert await store.read(MQ2, ReadOffsetType.READ_FROM_STORE) == -1  # 22 -> -1
        store.update(MQ, 45, increase_only=True)
        store.update(MQ, 42, increase_only=True)  # a late, older commit does not go backwards
        assert store.table[MQ] == 45
        store.update(MQ, 42)  # an explicit reset does
        assert store.table[MQ] == 42
        await store.persist_all([MQ, MQ2])
        await store.persist_all([MQ])  # unchanged: not sent again
        assert broker.commits == [(MQ, 42)]
        store.update(MQ, 50)
        await store.persist(MQ)
        assert broker.commits[-1] == (MQ, 50)

    asyncio.run(main())


def test_local_file_store_survives_a_restart(tmp_path: object) -> None:
    async def main() -> None:
        directory = str(tmp_path)
        store = LocalFileOffsetStore(directory, "127.0.0.1@a", "G")
        await store.load()
        assert await store.read(MQ) == -1
        store.update(MQ, 7)
        store.update(MQ2, 9)
        await store.persist_all([MQ, MQ2])
        store.update(MQ, 8)
        await store.persist_all([MQ])  # MQ2 keeps its saved offset
        again = LocalFileOffsetStore(directory, "127.0.0.1@a", "G")
        await again.load()
        assert again.table == {MQ: 8, MQ2: 9}
        other = LocalFileOffsetStore(directory, "127.0.0.1@b", "G")  # another client: its own file
        await other.load()
        assert other.table == {}
        with open(store.path, encoding="utf-8") as fh:
            assert {e["queueId"] for e in json.load(fh)["offsets"]} == {0, 1}
        # A torn main file falls back to the previous version.
        with open(store.path, "w", encoding="utf-8") as fh:
            fh.write("{not json")
        assert os.path.exists(store.path + ".bak")
        torn = LocalFileOffsetStore(directory, "127.0.0.1@a", "G")
        await torn.load()
        assert torn.table == {MQ: 7, MQ2: 9}

    asyncio.run(main())
