"""The receipt handles the endpoint renews for push consumers (ReceiveMessage with `auto_renew`), as RocketMQ's
proxy does with its receipt-handle manager.

Each delivered message's handle is kept per (client id, group, message id). A periodic scan asks
`broker.grpc.renew_policy.decide` what to do with each and changes invisible times through the broker's POP
service (CHANGE_MESSAGE_INVISIBLETIME). The client still holds the handle it was given: its Ack,
ChangeInvisibleDuration or ForwardMessageToDeadLetterQueue is served with the newest handle instead, and the entry
is forgotten. A client that terminates or goes away gets its messages back to the group after
`invisibleTimeMillisWhenClear`. Memory is bounded: past `MAX_PER_CLIENT` handles of one client or `MAX_TOTAL` in
all, new handles are not kept (those messages fall back to their invisible time) and a warning says so.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from broker.grpc.receive import PopApi, parse_handle
from broker.grpc.renew_policy import Action, HandleState, RenewSettings, decide
from broker.log_limit import LimitedLog
from broker.protocol.pop import real_topic
from broker.server.errors import RequestError

__all__ = ["MAX_PER_CLIENT", "MAX_TOTAL", "Kept", "ReceiptHandles"]

log = logging.getLogger(__name__)
_limited = LimitedLog(log)

#: Handles kept for one client (a push consumer caches about a thousand messages by default).
MAX_PER_CLIENT = 8192
#: Handles kept for all clients of the endpoint.
MAX_TOTAL = 200_000


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class Kept:
    """One kept handle: what the client was given, the newest one, and its renewal state."""

    group: str
    topic: str
    message_id: str
    given: str
    current: str
    received_at_ms: int
    reconsume_times: int
    renew_times: int = 0
    retry_times: int = 0
    #: set while a change of this handle is in flight; a client's ack waits for it
    busy: asyncio.Event | None = field(default=None)

    def state(self) -> HandleState:
        info = parse_handle(self.current).info
        return HandleState(
            visible_at_ms=info.pop_time + info.invisible_time,
            received_at_ms=self.received_at_ms,
            renew_times=self.renew_times,
            retry_times=self.retry_times,
            reconsume_times=self.reconsume_times,
        )


Key = tuple[str, str]  # (group, message id)


class ReceiptHandles:
    """Kept handles of every client; `gone(client_id)` says whether a client is no longer there."""

    def __init__(
        self,
        pop: PopApi,
        settings: RenewSettings,
        clear_invisible_ms: int,
        gone: Callable[[str], bool],
        *,
        max_per_client: int = MAX_PER_CLIENT,
        max_total: int = MAX_TOTAL,
    ) -> None:
        self.pop = pop
        self.settings = settings
        self.clear_invisible_ms = clear_invisible_ms
        self.gone = gone
        self.max_per_client = max_per_client
        self.max_total = max_total
        self.by_client: dict[str, dict[Key, Kept]] = {}
        self.total = 0

    def keep(self, client_id: str, group: str, topic: str, message_id: str, handle: str, reconsume_times: int) -> bool:
        """Keep a handle just delivered; False (and a warning) when a bound is reached."""
        kept = self.by_client.get(client_id)
        if kept is not None and (group, message_id) in kept:
            self._forget(client_id, (group, message_id))
        if self.total >= self.max_total:
            _limited.warning(
                "total",
                "auto-renew keeps %d receipt handles in all (its bound): messages delivered now are not renewed",
                self.total,
            )
            return False
        if kept is not None and len(kept) >= self.max_per_client:
            _limited.warning(
                f"client {client_id}",
                "auto-renew keeps %d receipt handles of client %s (its bound): its new messages are not renewed",
                len(kept),
                client_id,
            )
            return False
        if kept is None:
            kept = self.by_client[client_id] = {}
        kept[(group, message_id)] = Kept(group, topic, message_id, handle, handle, _now_ms(), reconsume_times)
        self.total += 1
        return True

    def _forget(self, client_id: str, key: Key) -> Kept | None:
        kept = self.by_client.get(client_id)
        if kept is None:
            return None
        entry = kept.pop(key, None)
        if entry is not None:
            self.total -= 1
        if not kept:
            del self.by_client[client_id]
        return entry

    async def take(self, client_id: str, group: str, message_id: str, handle: str) -> str:
        """The handle to act on for a client's ack, change or forward of `handle`: the newest one when this
        endpoint renewed it (waiting for a renewal in flight), else `handle`. The entry is forgotten."""
        entry = self.by_client.get(client_id, {}).get((group, message_id))
        if entry is None or handle not in (entry.given, entry.current):
            return handle
        if entry.busy is not None:
            await entry.busy.wait()
        entry = self._forget(client_id, (group, message_id))
        return handle if entry is None else entry.current

    async def _change(self, entry: Kept, invisible_ms: int) -> str:
        """Change the entry's invisible time through the broker's POP service; the new handle."""
        handle = parse_handle(entry.current)
        info = handle.info
        result = await self.pop.change_invisible(
            group=entry.group,
            topic=real_topic(entry.topic, entry.group, info.flag),
            queue_id=info.queue_id,
            offset=info.queue_offset,
            extra_info=handle.extra_info,
            invisible_ms=invisible_ms,
        )
        return f"{result.extra_info} {handle.commit_log_offset}"

    async def _renew(self, client_id: str, key: Key, entry: Kept, now_ms: int) -> None:
        decision = decide(entry.state(), now_ms, self.settings)
        if decision.action is Action.WAIT:
            return
        if decision.action is Action.DROP:
            self._forget(client_id, key)
            log.info("auto-renew of message %s (group %s) given up: no longer renewable", key[1], key[0])
            return
        entry.busy = asyncio.Event()
        try:
            entry.current = await self._change(entry, decision.invisible_ms)
        except RequestError as exc:
            entry.retry_times += 1
            log.warning("auto-renew of message %s (group %s) failed: %s", key[1], key[0], exc.remark)
        except Exception:
            entry.retry_times += 1
            log.exception("auto-renew of message %s (group %s) failed", key[1], key[0])
        else:
            entry.retry_times = 0
            entry.renew_times += 1
            if decision.action is Action.STOP:
                self._forget(client_id, key)
                log.info(
                    "message %s (group %s) held past renewMaxTimeMillis: back to the group in %d ms",
                    key[1],
                    key[0],
                    decision.invisible_ms,
                )
        finally:
            entry.busy.set()
            entry.busy = None

    async def release(self, client_id: str) -> int:
        """Hand a client's kept messages back to its group after `invisibleTimeMillisWhenClear`; how many."""
        kept = self.by_client.pop(client_id, None)
        if not kept:
            return 0
        self.total -= len(kept)
        released = 0
        for entry in kept.values():
            if entry.busy is not None:
                await entry.busy.wait()
            try:
                await self._change(entry, self.clear_invisible_ms)
                released += 1
            except Exception as exc:  # expired or acked meanwhile: it comes back (or not) on its own
                log.debug("releasing message %s of %s: %s", entry.message_id, client_id, exc)
        log.info("client %s gone: %d of its messages back to their group", client_id, released)
        return released

    async def scan(self, now_ms: int | None = None) -> None:
        """One pass: release gone clients, renew what is due."""
        for client_id in list(self.by_client):
            if self.gone(client_id):
                await self.release(client_id)
                continue
            now = _now_ms() if now_ms is None else now_ms
            for key, entry in list(self.by_client.get(client_id, {}).items()):
                if entry.busy is None:
                    await self._renew(client_id, key, entry, now)

    async def run(self, period_ms: int) -> None:
        """Scan every `period_ms` until cancelled (renewSchedulePeriodMillis)."""
        while True:
            await asyncio.sleep(period_ms / 1000)
            try:
                await self.scan()
            except Exception:
                log.exception("auto-renew scan failed")

    async def close(self) -> None:
        """Release every client's handles (the endpoint stopping)."""
        for client_id in list(self.by_client):
            await self.release(client_id)
