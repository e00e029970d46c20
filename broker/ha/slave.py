"""Slave side of HA replication: connects to the master's HA port and appends what it streams.

Started by the HA controller (broker.ha.controller) on SLAVE brokers. The master's HA address comes
from `haMasterAddress` or, failing that, from the REGISTER_BROKER response (`haServerAddr`), through
the `master_ha_addr` callable. The client reports its max CommitLog offset on connect, after each
append and at least every haSendHeartbeatInterval; it appends blocks with
`store.append_to_commit_log`, which dispatches them into the slave's ConsumeQueues and IndexFile.
A block whose offset differs from the slave's own end means the two CommitLogs diverged: the client
closes, logs why, and retries with back-off (it never truncates data on its own). `on_appended` hears of
each append (the slave's restore source, broker.ha.restore_source, streams it on).

`replicate_once` is the same session in a one-shot mode, used by a master that restores its CommitLog
from a slave before it serves (broker.ha.restore): it ends once the local end reaches a given offset, or
when the peer stops sending data for haHousekeepingInterval.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.ha.protocol import HEADER, HEADER_SIZE, encode_report
from broker.ha.settings import HASettings
from broker.ha.stream import MasterStream
from broker.ha.sync_state import IDENTITY
from broker.transport.client import parse_addr
from broker.transport.loop import cancel_and_wait

if TYPE_CHECKING:
    from broker.store import MessageStore

__all__ = ["HAClient"]

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 3.0
BACKOFF_MIN = 0.5
ADDRESS_CHECK_S = 1.0  # how often a session checks that its master is still the one to follow
BACKOFF_MAX = 5.0
BACKOFF_DIVERGED = 30.0  # nothing will change until an operator acts: retry slowly, keep saying why


class HAClient:
    """One background service: the replication session with the master, reconnecting forever."""

    def __init__(
        self,
        store: MessageStore,
        settings: HASettings,
        master_ha_addr: Callable[[], str | None],
        on_appended: Callable[[int], None] | None = None,
        on_master_lost: Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.master_ha_addr = master_ha_addr
        self.on_appended = on_appended
        # asks for the master's address anew (the broker re-registers: the NameServer's answer names the
        # master's HA address): a master that came back elsewhere is found now, not at the next registration
        self.on_master_lost = on_master_lost
        self.connected_addr: str | None = None
        self.last_contact = 0.0  # monotonic time of the last block (data or heartbeat) from the master
        self.last_master_offset = -1  # end of the last block the master sent
        self.diverged: str | None = None  # why replication stopped, when the data diverged
        self.sessions = 0
        self.bytes_received = 0
        self._task: asyncio.Task[None] | None = None
        self._stream: MasterStream | None = None
        self._last_report = 0.0
        self._until: int | None = None  # one-shot mode: end the session once the local end reaches it

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="ha-client")
        self._task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("HA client died", exc_info=task.exception())

    async def close(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    @property
    def connected(self) -> bool:
        """The master streamed something (data or heartbeat) within the housekeeping interval."""
        return (
            self.connected_addr is not None
            and time.monotonic() - self.last_contact < self.settings.housekeeping_interval
        )

    async def _run(self) -> None:
        backoff = BACKOFF_MIN
        failures = 0
        loop = asyncio.get_running_loop()
        while True:
            addr = self.settings.master_address or self.master_ha_addr()
            if not addr:
                # The NameServer has not told us the master yet, or (controller mode) still names another one
                # than the controller does: register again to hear it, rather than at the next periodic
                # registration.
                if self.on_master_lost is not None:
                    self.on_master_lost()
                await asyncio.sleep(1.0)
                continue
            try:
                host, port = parse_addr(addr)
                _transport, stream = await asyncio.wait_for(
                    loop.create_connection(MasterStream, host, port, ssl=self.settings.client_tls), CONNECT_TIMEOUT
                )
            except (OSError, TimeoutError, ValueError) as exc:
                failures += 1
                level = logging.WARNING if failures in (1, 10) or failures % 60 == 0 else logging.DEBUG
                log.log(level, "HA: cannot connect to master %s (%s), attempt %d", addr, exc or "timeout", failures)
                if self.on_master_lost is not None:
                    self.on_master_lost()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)
                continue
            failures = 0
            received_before = self.bytes_received
            try:
                await self._session(addr, stream)
            except OSError as exc:
                log.warning("HA: connection to master %s lost: %s", addr, exc)
            finally:
                self.connected_addr = None
                self._stream = None
                stream.close()
            if self.on_master_lost is not None:
                self.on_master_lost()
            if self.diverged is not None:
                backoff = BACKOFF_DIVERGED
            elif self.bytes_received > received_before:
                backoff = BACKOFF_MIN  # it worked for a while: reconnect quickly
            else:
                backoff = min(backoff * 2, BACKOFF_MAX)
            await asyncio.sleep(backoff)

    def _report(self) -> None:
        if self._stream is not None:
            self._stream.write(encode_report(self.store.max_phy_offset))
            self._last_report = time.monotonic()

    async def _heartbeats(self) -> None:
        interval = self.settings.heartbeat_interval
        while True:
            await asyncio.sleep(max(0.05, interval - (time.monotonic() - self._last_report)))
            if time.monotonic() - self._last_report >= interval:
                self._report()

    async def _watchdog(self, addr: str, stream: MasterStream) -> None:
        """Housekeeping: a master silent for haHousekeepingInterval (a cut link sends no FIN) is dropped.

        One timer task per session instead of a timeout around every read.
        """
        housekeeping = self.settings.housekeeping_interval
        while True:
            silent = time.monotonic() - self.last_contact
            if silent >= housekeeping:
                log.warning("HA: nothing from master %s for %.1f s, reconnecting", addr, silent)
                stream.abort()  # the pending take() fails and the session ends
                return
            wanted = addr if self._until is not None else self.settings.master_address or self.master_ha_addr()
            if wanted != addr:  # the master moved (controller mode) or is not known now: follow the new one
                log.warning("HA: the master is %s now, not %s: reconnecting", wanted or "unknown", addr)
                stream.abort()
                return
            await asyncio.sleep(min(housekeeping - silent + 0.05, ADDRESS_CHECK_S))

    async def _session(self, addr: str, stream: MasterStream) -> None:
        self.sessions += 1
        self._stream = stream
        self._last_report = 0.0
        log.info("HA: connected to master %s, reporting max offset %d", addr, self.store.max_phy_offset)
        if self.settings.broker_id is not None:  # controller mode: say which replica this is, first
            stream.write(IDENTITY.pack(self.settings.broker_id))
        self._report()
        self.connected_addr = addr
        self.last_contact = time.monotonic()
        loop = asyncio.get_running_loop()
        helpers = [
            loop.create_task(self._heartbeats(), name="ha-client-report"),
            loop.create_task(self._watchdog(addr, stream), name="ha-client-watchdog"),
        ]
        pending = bytearray()
        try:
            while True:
                data = await stream.take()
                self.last_contact = time.monotonic()
                if pending:
                    pending += data
                    data = pending
                consumed = await self._apply_blocks(addr, data)
                if consumed < 0:
                    return
                if self._until is not None and self.store.max_phy_offset >= self._until:
                    return
                # never resize `data` (views of it may still be alive): the partial block is copied out
                pending = data[consumed:]
        finally:
            await cancel_and_wait(*helpers)

    async def _apply_blocks(self, addr: str, data: bytearray) -> int:
        """Append every complete block in `data`; returns the bytes consumed, -1 to end the session.

        The slave reports once per batch of blocks (Java reports after each read's worth of blocks).
        """
        store = self.store
        end = len(data)
        pos = 0
        appended = False
        view = memoryview(data)
        while end - pos >= HEADER_SIZE:
            master_offset, size = HEADER.unpack_from(data, pos)
            if size < 0:
                log.error("HA: master %s sent a negative body size %d; reconnecting", addr, size)
                return -1
            if end - pos - HEADER_SIZE < size:
                break
            mine = store.max_phy_offset
            if mine != 0 and mine != master_offset:
                self._diverged(addr, mine, master_offset)
                return -1
            if size:
                body = view[pos + HEADER_SIZE : pos + HEADER_SIZE + size]
                if not await store.append_to_commit_log(master_offset, body):
                    log.error(
                        "HA: the store refused %d bytes at %d from master %s (its end is %d); reconnecting",
                        size,
                        master_offset,
                        addr,
                        store.max_phy_offset,
                    )
                    return -1
                appended = True
                self.diverged = None
                self.bytes_received += size
                self.last_master_offset = master_offset + size
            pos += HEADER_SIZE + size
        if appended:
            self._report()
            if self.on_appended is not None:
                self.on_appended(store.max_phy_offset)
        return pos

    async def replicate_once(self, addr: str, until: int) -> bool:
        """One session with the HA server at `addr` that ends once the local CommitLog reaches `until`;
        True when it did. The session also ends when the peer closes, diverges, or sends no data for
        haHousekeepingInterval (heartbeats alone do not count: a peer that has nothing more is done)."""
        host, port = parse_addr(addr)
        loop = asyncio.get_running_loop()
        try:
            _transport, stream = await asyncio.wait_for(
                loop.create_connection(MasterStream, host, port, ssl=self.settings.client_tls), CONNECT_TIMEOUT
            )
        except (OSError, TimeoutError) as exc:
            log.warning("HA restore: cannot connect to %s: %s", addr, exc or "timeout")
            return False
        self._until = until
        stall = loop.create_task(self._stall_watch(addr, stream), name="ha-restore-stall")
        try:
            await self._session(addr, stream)
        except OSError as exc:
            log.warning("HA restore: connection to %s lost: %s", addr, exc)
        finally:
            self._until = None
            self.connected_addr = None
            self._stream = None
            stream.close()
            await cancel_and_wait(stall)
        return self.store.max_phy_offset >= until

    async def _stall_watch(self, addr: str, stream: MasterStream) -> None:
        limit = self.settings.housekeeping_interval
        last, since = self.store.max_phy_offset, time.monotonic()
        while True:
            await asyncio.sleep(min(0.5, limit))
            now_at = self.store.max_phy_offset
            if now_at != last:
                last, since = now_at, time.monotonic()
            elif time.monotonic() - since >= limit:
                log.warning("HA restore: no data from %s for %.1f s (local end %d), giving up", addr, limit, now_at)
                stream.abort()
                return

    def _diverged(self, addr: str, mine: int, master_offset: int) -> None:
        if mine > master_offset:
            why = (
                f"the slave's CommitLog ends at {mine}, AHEAD of the master {addr} (which streams from "
                f"{master_offset}): the data diverged (master restored from an older copy?)"
            )
        else:
            why = f"the master {addr} streams from {master_offset} but the slave's CommitLog ends at {mine}"
        self.diverged = why
        log.error("HA: replication stopped: %s. Rebuild this slave from an empty store, or fix the master.", why)

    def runtime_info(self) -> dict[str, str]:
        age = time.monotonic() - self.last_contact if self.last_contact else -1.0
        return {
            "haRole": "SLAVE",
            "haMasterAddress": self.settings.master_address or self.master_ha_addr() or "",
            "haConnected": "true" if self.connected else "false",
            "haSlaveMaxOffset": str(self.store.max_phy_offset),
            "haMasterOffsetSeen": str(self.last_master_offset),
            "haLastMasterContactMs": f"{age * 1000:.0f}",
            "haBytesReceived": str(self.bytes_received),
            "haDiverged": self.diverged or "",
        }
