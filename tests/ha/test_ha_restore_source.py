"""A slave's HA restore source (broker.ha.restore_source) in process, on loopback: it streams what the slave
already holds and what its replication appends, and peers that send garbage, lie about their offset or
vanish mid-stream change nothing on the slave, which keeps serving and replicating."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from pathlib import Path

import pytest

from broker.ha.master import SlaveLink
from broker.ha.protocol import HEADER, HEADER_SIZE, encode_header, encode_report
from broker.ha.restore_source import RestoreSource
from broker.ha.settings import HASettings
from broker.server.broker import BrokerController
from broker.store.message_store import MessageStore
from tests.ha.ha_harness import Pair, commit_log_bytes, eventually, pair
from tests.ha.test_ha_inprocess import connected, produce, runtime_info
from tests.store.store_helpers import small_config


@pytest.fixture(autouse=True)
def _ha_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="broker")


class Peer:
    """A raw HA peer: reports offsets, collects the blocks streamed to it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.data = bytearray()
        self.start = -1
        self.end = -1

    @classmethod
    async def connect(cls, port: int) -> Peer:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def send(self, raw: bytes) -> None:
        self.writer.write(raw)
        await self.writer.drain()

    async def read_block(self) -> tuple[int, bytes]:
        offset, size = HEADER.unpack(await self.reader.readexactly(HEADER_SIZE))
        body = await self.reader.readexactly(size) if size else b""
        return int(offset), body

    async def follow(self, until: int) -> None:
        """Read blocks, checking they continue each other, until the peer holds bytes up to `until`."""
        while self.end < until:
            offset, body = await asyncio.wait_for(self.read_block(), 10.0)
            if not body:
                continue  # heartbeat
            if self.start < 0:
                self.start = self.end = offset
            assert offset == self.end, (offset, self.end)
            self.data += body
            self.end += len(body)
            await self.send(encode_report(self.end))

    async def closed_after(self) -> bytes:
        """Everything the source sends until it closes the connection."""
        return await asyncio.wait_for(self.reader.read(), 10.0)

    def close(self) -> None:
        self.writer.close()


def source_port(slave: BrokerController) -> int:
    assert slave.ha is not None and slave.ha.source is not None
    return slave.ha.source.port


async def caught_up(p: Pair) -> int:
    assert p.master is not None and p.slave is not None
    end = p.master.store.max_phy_offset
    slave = p.slave
    await eventually(lambda: slave.store.max_phy_offset == end, what="the slave to catch up")
    return end


async def test_restore_source_streams_what_the_slave_holds_then_what_it_replicates(tmp_path: Path) -> None:
    async with pair(tmp_path, "ASYNC_MASTER") as p:
        assert p.master is not None and p.slave is not None
        await connected(p)
        await produce(p, "SrcTopic", 150)  # ~1.2 MiB: two CommitLog files
        end = await caught_up(p)
        info = await runtime_info(p.slave)
        port = source_port(p.slave)
        assert info["haRestoreSource"] == "true" and info["haListenPort"] == str(port)
        assert info["haServerAddr"] == f"127.0.0.1:{port}"
        assert p.slave.store._replica is None  # the source is no replica of the slave's store

        peer = await Peer.connect(port)
        await peer.send(encode_report(0))  # an empty peer gets everything, from the first file
        await peer.follow(end)
        assert peer.start == 0 and bytes(peer.data) == commit_log_bytes(p.slave, 0, end)
        # what the slave's replication appends reaches the peer as it arrives
        await produce(p, "SrcTopic", 20)
        later = await caught_up(p)
        await peer.follow(later)
        assert bytes(peer.data) == commit_log_bytes(p.master, 0, later)
        assert (await runtime_info(p.slave))["haRestorePeers"] == "1"
        peer.close()

        # a peer that holds part of it resumes where it stands
        resumed = await Peer.connect(port)
        await resumed.send(encode_report(end))
        await resumed.follow(later)
        assert resumed.start == end and bytes(resumed.data) == commit_log_bytes(p.slave, end, later)
        resumed.close()


async def test_hostile_peers_change_nothing_on_the_slave(tmp_path: Path) -> None:
    async with pair(tmp_path, "SYNC_MASTER") as p:
        assert p.master is not None and p.slave is not None
        await connected(p)
        await produce(p, "HostileTopic", 60)
        end = await caught_up(p)
        port = source_port(p.slave)

        # garbage read as an offset far beyond the slave's end: told where the slave stands, then closed
        garbage = await Peer.connect(port)
        await garbage.send(b"GARBAGE!" * 3)
        assert await garbage.closed_after() == encode_header(end, 0)
        # a huge offset: the same
        huge = await Peer.connect(port)
        await huge.send(encode_report(1 << 62))
        assert await huge.closed_after() == encode_header(end, 0)
        # a negative offset: closed
        negative = await Peer.connect(port)
        await negative.send(b"\xff" * 8)
        assert await negative.closed_after() == b""
        # half a report, then gone
        half = await Peer.connect(port)
        await half.send(b"\x00\x00\x00")
        half.close()
        # gone in the middle of a transfer, without a FIN
        midway = await Peer.connect(port)
        await midway.send(encode_report(0))
        await midway.reader.readexactly(64 * 1024)
        transport = midway.writer.transport
        transport.abort()
        # a peer that asks for everything and never reads
        stuck = await Peer.connect(port)
        await stuck.send(encode_report(0))

        # the slave keeps replicating (SYNC_MASTER sends need its acknowledgements) and serving
        statuses = await produce(p, "HostileTopic", 40)
        assert {s.name for s in statuses} == {"SEND_OK"}
        later = await caught_up(p)
        assert later > end
        info = await runtime_info(p.slave)
        assert info["haDiverged"] == "" and info["haConnected"] == "true"
        assert commit_log_bytes(p.slave, 0, later) == commit_log_bytes(p.master, 0, later)
        m_info = await runtime_info(p.master)
        assert m_info["haConnectedSlaves"] == "1"
        # and its restore source still serves
        fresh = await Peer.connect(port)
        await fresh.send(encode_report(0))
        await fresh.follow(later)
        assert bytes(fresh.data) == commit_log_bytes(p.slave, 0, later)
        fresh.close()
        stuck.close()
        for peer in (garbage, huge, negative):
            with contextlib.suppress(Exception):
                peer.close()


async def test_a_peer_that_reaches_a_closed_restore_source_is_dropped(tmp_path: Path) -> None:
    """The listener can take a socket just before close() and hand it to its protocol just after (a broker
    turning master closes its restore source while a slave connects): that peer is closed at once, so it
    reconnects to what now serves the port instead of waiting on a closed server for good."""
    store = MessageStore(small_config(tmp_path / "slave", broker_role="SLAVE"))
    await store.start()
    source = RestoreSource(store, HASettings(role="SLAVE", listen_host="127.0.0.1", listen_port=0))
    await source.start()
    await source.close()
    late, peer = socket.socketpair()
    try:
        await asyncio.get_running_loop().connect_accepted_socket(lambda: SlaveLink(source), late)
        reader, writer = await asyncio.open_connection(sock=peer)
        assert await asyncio.wait_for(reader.read(), 5) == b"", "the late peer must see the connection closed"
        assert not source.connections
        writer.close()
    finally:
        await store.shutdown()
