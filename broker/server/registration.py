"""Registration with the NameServers: REGISTER_BROKER (103) and UNREGISTER_BROKER (104).

`BrokerController` calls `register_all()` at start, every `registerNameServerPeriod` and (coalesced
by `Registrar.trigger()`) right after a topic is created or changed; `unregister_all()` at shutdown.
Each NameServer is contacted concurrently; one that is down is logged and retried next period.
`runtime_info()` tells GET_BROKER_RUNTIME_INFO which NameServers accepted the latest registration and
when, which `rocketcluster-probe broker` (broker/cli/probe.py) reads as readiness.

When the connection to a NameServer drops (it restarted, or the network broke), or cannot be made (a broker
started before its NameServer), the broker registers with it as soon as it answers, not at the next period: a
NameServer knows no routes until then, and new clients fail with "no route for topic" meanwhile (up to a
registration period, 30 s).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable
from typing import Any

import orjson

from broker.log_limit import LimitedLog
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.headers import RegisterBrokerRequestHeader, UnregisterBrokerRequestHeader
from broker.protocol.message import body_crc
from broker.server.config import BrokerConfig
from broker.transport.client import RemotingClient
from broker.transport.errors import ConnectError, RemotingError

__all__ = ["Registrar", "register_body", "register_period_ms"]

log = logging.getLogger(__name__)
# A NameServer that stays down is retried every few seconds (see RECONNECT_DELAYS_S): one line per 10 s.
limited_log = LimitedLog(log)

# RocketMQ clamps the period to 10-60 s; our floor is 1 s so tests can see a NameServer go away quickly.
MIN_REGISTER_PERIOD_MS = 1_000
MAX_REGISTER_PERIOD_MS = 60_000
# Delays between attempts to register again after a NameServer connection dropped or could not be made; the last
# one repeats.
RECONNECT_DELAYS_S = (0.2, 0.5, 1.0, 2.0)


def register_period_ms(configured: int) -> int:
    """The period the broker really registers at, for a registerNameServerPeriod value."""
    return min(max(configured, MIN_REGISTER_PERIOD_MS), MAX_REGISTER_PERIOD_MS)


def register_body(topic_wrapper: dict[str, Any]) -> bytes:
    """Uncompressed RegisterBrokerBody JSON (reference 6.1)."""
    return orjson.dumps({"filterServerList": [], "topicConfigSerializeWrapper": topic_wrapper})


class Registrar:
    """Sends the broker's registration to every NameServer; `trigger()` coalesces bursts of changes."""

    def __init__(
        self, config: BrokerConfig, client: RemotingClient, topic_wrapper: Callable[[], dict[str, Any]]
    ) -> None:
        self.config = config
        self.client = client
        self.topic_wrapper = topic_wrapper
        self.timeout = config.register_broker_timeout_mills / 1000
        self._pending: asyncio.Task[None] | None = None
        # Set by trigger() while a registration is queued or in flight: that request's body may
        # predate the change, so _soon() registers once more after it.
        self._dirty = False
        self.last_results: dict[str, int | str] = {}
        # Wall-clock ms of each NameServer's latest accepted registration (kept after a failure: the
        # failure shows in last_results).
        self.last_ok_ms: dict[str, int] = {}
        # The master's addresses as the NameServer reported them (a slave uses them for HA).
        self.master_addr: str | None = None
        self.master_ha_addr: str | None = None
        self._reconnecting: dict[str, asyncio.Task[None]] = {}
        self._stopped = False

    def _register_command(self) -> RemotingCommand:
        c = self.config
        body = register_body(self.topic_wrapper())
        header = RegisterBrokerRequestHeader(
            broker_name=c.broker_name,
            broker_addr=c.broker_addr,
            cluster_name=c.broker_cluster_name,
            ha_server_addr=c.ha_server_addr,
            broker_id=c.broker_id,
            heartbeat_timeout_millis=c.channel_expired_timeout,
            enable_acting_master=False,
            compressed=False,
            body_crc32=body_crc(body),
        )
        return RemotingCommand(code=RequestCode.REGISTER_BROKER, ext_fields=header.to_ext_fields(), body=body)

    async def register_all(self) -> int:
        """Register with every NameServer; returns how many accepted."""
        addrs = self.config.name_servers
        if not addrs:
            return 0
        results = await asyncio.gather(*(self._register_one(a) for a in addrs))
        return sum(results)

    async def _register_one(self, addr: str) -> bool:
        try:
            resp = await self.client.invoke(addr, self._register_command(), self.timeout)
        except (RemotingError, OSError) as exc:
            self.last_results[addr] = f"{type(exc).__name__}: {exc}"
            limited_log.warning(f"register:{addr}", "register broker to name server %s failed: %s", addr, exc)
            if isinstance(exc, ConnectError):  # not listening yet, or gone: try again within seconds
                self._register_when_it_answers(addr)
            return False
        if resp.code != ResponseCode.SUCCESS:
            self.last_results[addr] = f"code {resp.code}: {resp.remark}"
            log.warning("name server %s refused the registration: code %d %s", addr, resp.code, resp.remark)
            return False
        self.last_results[addr] = resp.code
        self.last_ok_ms[addr] = int(time.time() * 1000)
        self.master_addr = resp.ext_fields.get("masterAddr") or self.master_addr
        self.master_ha_addr = resp.ext_fields.get("haServerAddr") or self.master_ha_addr
        log.debug("registered to name server %s", addr)
        return True

    def trigger(self) -> None:
        """Re-register soon (after a topic change); several changes in one loop turn make one request.

        A change that arrives while a registration is already in flight must not be dropped: that
        request carries the topic table as it was when it was built, and without another one the
        new topic would reach the NameServers only with the next periodic registration (30 s), so
        clients (ali-ons, which never falls back to TBW102) could not route to it meanwhile.
        """
        if not self.config.name_servers:
            return
        if self._pending is not None and not self._pending.done():
            self._dirty = True
            return
        self._pending = asyncio.get_running_loop().create_task(self._soon())

    async def _soon(self) -> None:
        await asyncio.sleep(0)
        while True:
            self._dirty = False  # cleared before the body is built: later changes set it again
            await self.register_all()
            if not self._dirty:
                return

    @property
    def period_ms(self) -> int:
        return register_period_ms(self.config.register_name_server_period)

    def runtime_info(self) -> dict[str, str]:
        """Registration state for GET_BROKER_RUNTIME_INFO: which NameServers hold the latest registration.

        A NameServer counts as registered while its latest attempt succeeded; `lastRegisterTimestamp` is
        the newest of those successes (0 when none), so a registration loop that stopped shows as age.
        """
        ok = [a for a in self.config.name_servers if self.last_results.get(a) == ResponseCode.SUCCESS]
        failed = [f"{a} ({r})" for a in self.config.name_servers if (r := self.last_results.get(a, 0)) != 0]
        return {
            "registerNameServerPeriod": str(self.period_ms),
            "registerBrokerTimeoutMills": str(self.config.register_broker_timeout_mills),
            "registeredNameServers": ";".join(ok),
            "registerFailedNameServers": "; ".join(failed),
            "lastRegisterTimestamp": str(max((self.last_ok_ms[a] for a in ok), default=0)),
        }

    async def run_periodically(self) -> None:
        self.client.add_close_listener(self._register_when_it_answers)
        period = self.period_ms / 1000
        while True:
            await asyncio.sleep(period)
            await self.register_all()

    def _register_when_it_answers(self, addr: str) -> None:
        """Register with `addr` again as soon as it answers (one retrying task a NameServer)."""
        if self._stopped or addr not in self.config.name_servers:
            return
        task = self._reconnecting.get(addr)
        if task is None or task.done():
            self._reconnecting[addr] = asyncio.get_running_loop().create_task(self._register_again(addr))

    async def _register_again(self, addr: str) -> None:
        log.info("name server %s unreachable: registering as soon as it answers", addr)
        for attempt in itertools.count():
            await asyncio.sleep(RECONNECT_DELAYS_S[min(attempt, len(RECONNECT_DELAYS_S) - 1)])
            if self._stopped:
                return
            if await self._register_one(addr):
                log.info("registered again to name server %s", addr)
                return

    async def unregister_all(self) -> None:
        self._stopped = True
        for task in self._reconnecting.values():
            task.cancel()
        c = self.config
        header = UnregisterBrokerRequestHeader(
            broker_name=c.broker_name,
            broker_addr=c.broker_addr,
            cluster_name=c.broker_cluster_name,
            broker_id=c.broker_id,
        )

        async def one(addr: str) -> None:
            cmd = RemotingCommand(code=RequestCode.UNREGISTER_BROKER, ext_fields=header.to_ext_fields())
            try:
                await self.client.invoke(addr, cmd, min(self.timeout, 3.0))
                log.info("unregistered from name server %s", addr)
            except (RemotingError, OSError) as exc:
                log.warning("unregister from name server %s failed: %s", addr, exc)

        if self._pending is not None:
            self._pending.cancel()
        await asyncio.gather(*(one(a) for a in c.name_servers))
