"""Master side of HA replication: the HA server on haListenPort and one HAConnection per slave.

Started by the HA controller (broker.ha.controller) on ASYNC_MASTER and SYNC_MASTER brokers, whose
store tells `HAMaster.data_appended(end_offset)` of every put and, on SYNC_MASTER, waits on
`wait_acked` (installed with `store.set_replica`). A slave runs the same server read-only, as the
restore source of its master (`RestoreSource`, broker.ha.restore_source). Each connection reads 8-byte slave reports as
they arrive (last complete frame wins) and runs a writer (12-byte header + raw CommitLog bytes in chunks of at
most haTransferBatchSize that never cross a file, a zero-size heartbeat when idle). Reports feed the ack
bookkeeping (push2SlaveMaxOffset), which wakes SYNC_MASTER puts waiting in `GroupTransfer`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.ha.protocol import ReportReader, encode_header, transfer_start
from broker.ha.settings import HASettings
from broker.ha.status import ReplicationStatus
from broker.ha.sync_state import IDENTITY, IDENTITY_SIZE, ReplicaAck, SyncState
from broker.ha.transfer import GroupTransfer
from broker.store.results import PutResult, PutStatus
from broker.transport.listener import Listener
from broker.transport.loop import cancel_and_wait

if TYPE_CHECKING:
    from broker.store import MessageStore

__all__ = ["HAConnection", "HAMaster"]

log = logging.getLogger(__name__)

STATUS_LOG_INTERVAL = 60.0
WRITE_GATHER = 256 * 1024  # bytes of blocks joined into one write
PUSH_EARLY_BYTES = 16 * 1024  # within one loop iteration, push to slaves after this many new bytes


class SlaveLink(asyncio.Protocol):
    """The socket of one slave. Reports are handled inside data_received, so an acknowledgement reaches
    the SYNC_MASTER waiters in the loop iteration that read it (a StreamReader would wake a task first);
    writes keep StreamWriter's write/drain shape for the write loop."""

    def __init__(self, master: HAMaster) -> None:
        self.master = master
        self.transport: asyncio.Transport | None = None
        self.connection: HAConnection | None = None
        self._paused = False
        self._drained: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's TCPTransport is no asyncio.Transport
        self.connection = HAConnection(self.master, self)
        self.master.accepted(self.connection)

    def data_received(self, data: bytes) -> None:
        if self.connection is not None:
            self.connection.reports_received(data)

    def eof_received(self) -> bool:
        if self.connection is not None:
            log.info("HA connection %s: the slave closed the connection", self.connection.addr)
            self.connection.close()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._wake_drainer(exc)
        if self.connection is not None:
            if exc is not None:
                log.warning("HA connection %s: %s: %s", self.connection.addr, type(exc).__name__, exc)
            self.connection.close()

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake_drainer(None)

    def _wake_drainer(self, exc: Exception | None) -> None:
        waiter, self._drained = self._drained, None
        if waiter is not None and not waiter.done():
            if exc is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(ConnectionError(f"HA connection lost: {exc}"))

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    async def drain(self) -> None:
        """Wait while the socket's buffer is over its high-water mark (as StreamWriter.drain)."""
        if self.transport is None or self.transport.is_closing():
            raise ConnectionError("HA connection closed")
        if self._paused:
            self._drained = asyncio.get_running_loop().create_future()
            await self._drained

    def peer_address(self) -> str:
        """The slave's host:port, "?" when the socket does not say."""
        peer = self.transport.get_extra_info("peername") if self.transport is not None else None
        return f"{peer[0]}:{peer[1]}" if peer else "?"

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class HAConnection:
    """One slave: its reports (through SlaveLink) and a writer task streaming the CommitLog to it."""

    def __init__(self, master: HAMaster, link: SlaveLink) -> None:
        self.master = master
        self.writer = link
        self._reports = ReportReader()
        self.addr = link.peer_address()
        self.slave_ack_offset = -1
        # controller mode: the replica's broker id, the first 8 bytes it sends (broker.ha.sync_state)
        self.broker_id: int | None = None
        self._identity = b""
        self.next_transfer_offset = -1
        self.streaming = False  # the start offset is settled and the write loop runs
        self.last_write = 0.0
        self._batch = 0
        self.last_read = time.monotonic()
        self.connected_at = time.time()
        self._first_report: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._tasks: list[asyncio.Task[None]] = []
        self.closed = asyncio.Event()

    @property
    def ready(self) -> bool:
        """The slave told us where it stands (it counts as connected for SYNC_MASTER from then on)."""
        return self.slave_ack_offset >= 0

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._write_loop(), name=f"ha-write-{self.addr}"),
            loop.create_task(self._housekeeping(), name=f"ha-housekeeping-{self.addr}"),
        ]
        for task in self._tasks:
            task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        # either side ending (EOF, error, divergence, housekeeping) ends the whole connection
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            log.warning("HA connection %s: %s: %s", self.addr, type(exc).__name__, exc)
        self.close()

    def close(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        for task in self._tasks:
            task.cancel()
        if not self._first_report.done():
            self._first_report.cancel()
        self.writer.close()
        self.master.connection_closed(self)

    def reports_received(self, data: bytes) -> None:
        self.last_read = time.monotonic()
        if self.master.sync is not None and self.broker_id is None:
            need = IDENTITY_SIZE - len(self._identity)
            self._identity += data[:need]
            data = data[need:]
            if len(self._identity) < IDENTITY_SIZE:
                return
            (self.broker_id,) = IDENTITY.unpack(self._identity)
            log.info("HA connection %s: replica broker id %d", self.addr, self.broker_id)
            if not data:
                return
        offset = self._reports.feed(data)
        if offset is None:
            return
        if not self._first_report.done():
            self._first_report.set_result(offset)
        if offset > self.master.store.max_phy_offset:
            # A peer ahead of this side (its data diverged, or it lies) acknowledges nothing: counted,
            # it would answer SYNC_MASTER puts up to its offset that no slave holds.
            return
        if not self.ready:
            self.master.slave_reported_first(self)
        self.slave_ack_offset = offset
        self.master.slave_acked(self, offset)

    async def _housekeeping(self) -> None:
        """Close a slave silent for haHousekeepingInterval: a cut link delivers no FIN, only silence.

        A timer per connection rather than a timeout around every read (wait_for costs a task each).
        """
        housekeeping = self.master.settings.housekeeping_interval
        while True:
            silent = time.monotonic() - self.last_read
            if silent >= housekeeping:
                log.warning("HA connection %s: nothing read for %.1f s, closing it", self.addr, silent)
                return
            await asyncio.sleep(housekeeping - silent + 0.05)

    def _blocks(self, offset: int, batch: int) -> list[bytes | memoryview]:
        """Headers and bodies of the blocks from `offset`, up to WRITE_GATHER bytes; advances the offset.

        The bodies are views of the mapped files, joined (copied) by the caller right away, so no view
        outlives the call and pins a file the store may want to delete.
        """
        store = self.master.store
        parts: list[bytes | memoryview] = []
        gathered = 0
        while gathered < WRITE_GATHER:
            view = store.get_commit_log_data(offset, batch)
            if view is None:
                break
            n = len(view)
            if n == 0:
                view.release()
                break
            parts.append(encode_header(offset, n))
            parts.append(view)
            offset += n
            gathered += n
        self.next_transfer_offset = offset
        return parts

    async def _write_loop(self) -> None:
        master = self.master
        store = master.store
        settings = master.settings
        report = await self._first_report
        master_max = store.max_phy_offset
        if report > master_max:
            # The peer holds data this side never had (e.g. the master was restored from an older copy).
            # Tell it where we really are: the mismatching header makes it stop and say so.
            master.peer_ahead(self, report)
            self.writer.write(encode_header(master_max, 0))
            await self.writer.drain()
            return
        if report < 0:
            log.warning("HA connection %s: negative offset %d reported, closing", self.addr, report)
            return
        if report == 0 and (settings.full_transfer_from_empty or master.serves_everything_to_empty):
            start = store.min_phy_offset
        else:
            start = transfer_start(report, master_max, settings.file_size)
        min_phy = store.min_phy_offset
        if start < min_phy:
            log.error(
                "HA connection %s: the slave needs offset %d but the master's CommitLog starts at %d "
                "(older files were deleted); the slave must be rebuilt from an empty store",
                self.addr,
                start,
                min_phy,
            )
            return
        log.info("HA connection %s: slave reported %d, transfer starts at %d", self.addr, report, start)
        self.next_transfer_offset = start
        self._batch = batch = settings.transfer_batch_size
        heartbeat = settings.heartbeat_interval
        writer = self.writer
        self.last_write = time.monotonic()
        self.streaming = True
        while True:
            offset = self.next_transfer_offset
            data_event = master.data_event
            parts = self._blocks(offset, batch)
            if parts:
                # several blocks per write call: each still a header + at most haTransferBatchSize bytes
                # of one file, but one syscall and one drain for up to WRITE_GATHER bytes
                writer.write(b"".join(parts))
                self.last_write = time.monotonic()
                await writer.drain()
                continue
            idle = time.monotonic() - self.last_write
            if idle >= heartbeat:
                writer.write(encode_header(offset, 0))
                self.last_write = time.monotonic()
                await writer.drain()
                idle = 0.0
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(data_event.wait(), heartbeat - idle)

    def push_now(self) -> None:
        """Write what the store just appended, from the put path's own loop iteration.

        Waking the write loop costs a few loop iterations, each a batch of client requests; a SYNC_MASTER
        reply waits for the slave, so those hops were most of its latency. The write loop still handles
        back-pressure and heartbeats: nothing is pushed while the socket's buffer is full.
        """
        transport = self.writer.transport
        if (
            transport is None
            or not self.streaming
            or transport.is_closing()
            or transport.get_write_buffer_size() >= WRITE_GATHER
        ):
            return
        parts = self._blocks(self.next_transfer_offset, self._batch)
        if parts:
            self.writer.write(b"".join(parts))
            self.last_write = time.monotonic()


class HAMaster:
    """The HA server, its connections, the ack bookkeeping and the SYNC_MASTER waiter."""

    # An empty peer gets the whole CommitLog rather than its last file (haFullTransferFromEmpty)
    serves_everything_to_empty = False
    kind = "HA service"  # how the logs name this server
    peer_name = "slave"  # how the logs name the peers it serves

    def __init__(self, store: MessageStore, settings: HASettings) -> None:
        self.store = store
        self.settings = settings
        self.connections: set[HAConnection] = set()
        self.slave_count = 0  # connections whose slave has reported (ready)
        self.push2slave_max_offset = 0
        self.status = ReplicationStatus()
        self.transfer = GroupTransfer(settings.sync_timeout)
        self.data_event = asyncio.Event()
        self._appended_end = 0
        self._pushed_end = 0  # end of what was pushed from data_appended or _publish
        self._publish_scheduled = False
        self.port = 0
        self._server: Listener | None = None
        self._closed = False
        self._status_task: asyncio.Task[None] | None = None
        # Controller mode: the SyncStateSet (broker.ha.sync_state); `on_sync_change` asks the broker to check it
        # against the controller's now (a member's connection ended)
        self.sync = SyncState(settings.broker_id) if settings.broker_id is not None else None
        self.on_sync_change: Callable[[], None] | None = None

    async def start(self) -> int:
        """Listen on haListenPort (0 = any free port); returns the bound port."""
        s = self.settings
        loop = asyncio.get_running_loop()
        # TLS and plaintext on one port by the first byte, as the remoting port (a slave's first report is an
        # offset: its first byte is 0, never a TLS record's 0x16); a silent peer goes after the housekeeping interval
        self._server = Listener(
            lambda: SlaveLink(self),
            s.listen_host,
            s.listen_port,
            tls=s.tls,
            first_byte_timeout=s.housekeeping_interval,
            remoting=False,
            name=self.kind,
        )
        await self._server.start()
        self.port = self._server.port
        self._status_task = loop.create_task(self._log_status(), name="ha-status")
        log.info("%s listening on %s:%d (%s, TLS %s)", self.kind, s.listen_host, self.port, s.role, self._server.mode)
        return self.port

    def peer_ahead(self, conn: HAConnection, report: int) -> None:
        """A peer reported more CommitLog than this side holds: nothing is streamed to it."""
        log.error(
            "HA connection %s: the slave is AHEAD of this master (slave %d > master %d): their data "
            "diverged; not replicating (rebuild the slave's store or restore the master)",
            conn.addr,
            report,
            self.store.max_phy_offset,
        )

    async def close(self) -> None:
        self._closed = True
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.close()
        await cancel_and_wait(self._status_task)
        self.transfer.fail_all(PutStatus.FLUSH_SLAVE_TIMEOUT)
        if self._server is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)

    def accepted(self, conn: HAConnection) -> None:
        if self._closed:
            # a socket the listener took just before close() can reach its protocol just after: a slave attached
            # to a closed server would wait on it for good, never reconnecting to the one now on this port
            log.info("%s: closed, dropping %s %s", self.kind, self.peer_name, conn.addr)
            conn.close()
            return
        self.connections.add(conn)
        log.info(
            "%s: %s connected from %s (%d connection(s))", self.kind, self.peer_name, conn.addr, len(self.connections)
        )
        conn.start()

    def connection_closed(self, conn: HAConnection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            if conn.ready:
                self.slave_count -= 1
            log.info(
                "%s: %s %s disconnected (acked %d, this broker at %d); %d connection(s) left",
                self.kind,
                self.peer_name,
                conn.addr,
                conn.slave_ack_offset,
                self.store.max_phy_offset,
                len(self.connections),
            )
            if self.sync is not None and self.on_sync_change is not None:
                self.on_sync_change()

    def replicas(self) -> list[ReplicaAck]:
        """Controller mode: the identified replicas and their acknowledgements."""
        return [ReplicaAck(c.broker_id, c.slave_ack_offset) for c in self.connections if c.broker_id is not None]

    @property
    def confirm_offset(self) -> int:
        """Controller mode with allAckInSyncStateSet: what every SyncStateSet member holds."""
        if self.sync is None:
            return self.store.max_phy_offset
        return min(self.sync.threshold(self.replicas(), self.store.max_phy_offset), self.store.max_phy_offset)

    def _acked(self, replicas: list[ReplicaAck]) -> int:
        """Controller mode: what a put needs acknowledged, by allAckInSyncStateSet or inSyncReplicas."""
        assert self.sync is not None
        top = self.store.max_phy_offset
        if self.settings.all_ack:
            return self.sync.threshold(replicas, top)
        return self.sync.nth_ack(replicas, self.settings.in_sync_replicas - 1, top)

    def sync_changed(self) -> None:
        """The set changed (adopted from the controller): puts may now wait for fewer or more members."""
        if self.sync is not None:
            self.transfer.acked_to(self._acked(self.replicas()))

    # -- acks and waiting ------------------------------------------------------------------------------

    def slave_reported_first(self, conn: HAConnection) -> None:
        self.slave_count += 1  # counts for SYNC_MASTER from now on (kept, not scanned per put)

    def slave_acked(self, conn: HAConnection, offset: int) -> None:
        if self.sync is not None:
            replicas = self.replicas()
            self.sync.observe(replicas, self.store.max_phy_offset, self.settings.slave_fallbehind_max)
            self.push2slave_max_offset = max(self.push2slave_max_offset, offset)
            self.transfer.acked_to(self._acked(replicas))
            return
        if offset > self.push2slave_max_offset:
            self.push2slave_max_offset = offset
            self.status.record_ack(offset)
            self.transfer.acked_to(offset)

    def data_appended(self, end_offset: int) -> None:
        """The store's note of every put: the writers and the lag bookkeeping hear of it once per loop
        iteration, with the newest end offset, rather than once per put; a big batch is pushed to the
        slaves as it grows (every PUSH_EARLY_BYTES), so their acknowledgements start coming back sooner."""
        self._appended_end = end_offset
        if end_offset - self._pushed_end >= PUSH_EARLY_BYTES:
            self._pushed_end = end_offset
            for conn in self.connections:
                conn.push_now()
        if not self._publish_scheduled:
            self._publish_scheduled = True
            asyncio.get_running_loop().call_soon(self._publish)

    def _publish(self) -> None:
        self._publish_scheduled = False
        self._pushed_end = self._appended_end
        self.status.record_put(self._appended_end)
        for conn in self.connections:
            conn.push_now()
        # one Event per generation: every writer waiting on the old one wakes, new waiters get a new one
        event, self.data_event = self.data_event, asyncio.Event()
        event.set()

    def wait_acked(self, end_offset: int, result: PutResult) -> PutResult | asyncio.Future[PutResult]:
        """SYNC_MASTER: `result` once a slave acknowledged `end_offset`, or at once with
        SLAVE_NOT_AVAILABLE when no slave is connected or the best one is too far behind."""
        if self.sync is not None:
            if len(self.sync.members) < self.settings.min_in_sync_replicas:
                result.status = PutStatus.SLAVE_NOT_AVAILABLE  # in-sync replicas not enough
                return result
            # allAck: every member must hold it; a master alone in its set (the controller agreed) answers at
            # once, as with inSyncReplicas=1
            alone = self.settings.all_ack and self.sync.members == {self.sync.master_id}
            if alone or (not self.settings.all_ack and self.settings.in_sync_replicas <= 1):
                return result
            return self.transfer.wait(end_offset, result)
        behind = end_offset - self.push2slave_max_offset
        if not self.slave_count or behind >= self.settings.slave_fallbehind_max:
            result.status = PutStatus.SLAVE_NOT_AVAILABLE
            return result
        return self.transfer.wait(end_offset, result)

    # -- status ----------------------------------------------------------------------------------------

    def runtime_info(self) -> dict[str, str]:
        snap = self.status.snapshot(self.store.max_phy_offset)
        slaves = sorted(self.connections, key=lambda c: c.addr)
        return {
            "haRole": self.settings.role,
            "haListenPort": str(self.port),
            "haConnectedSlaves": str(self.slave_count),
            "haPush2SlaveMaxOffset": str(self.push2slave_max_offset),
            "haSlaveAckOffsets": ",".join(f"{c.addr}={c.slave_ack_offset}" for c in slaves),
            "haLagBytes": str(snap.lag_bytes if slaves else snap.master_max_offset - self.push2slave_max_offset),
            "haLagMs": f"{snap.lag_ms:.1f}",
            "haLagP50Ms": f"{snap.p50_ms:.2f}",
            "haLagP99Ms": f"{snap.p99_ms:.2f}",
            "haLagSamples": str(snap.samples),
            "haSyncWaiting": str(self.transfer.waiting),
        }

    async def _log_status(self) -> None:
        while True:
            await asyncio.sleep(STATUS_LOG_INTERVAL)
            if not self.connections:
                if self.settings.sync:
                    log.warning("HA status: SYNC_MASTER with no slave connected (sends get SLAVE_NOT_AVAILABLE)")
                continue
            info = self.runtime_info()
            log.info(
                "HA status: %s slave(s) [%s], lag %s bytes / %s ms (p50 %s ms, p99 %s ms)",
                info["haConnectedSlaves"],
                info["haSlaveAckOffsets"],
                info["haLagBytes"],
                info["haLagMs"],
                info["haLagP50Ms"],
                info["haLagP99Ms"],
            )
