"""Registrar.trigger(): topic changes reach the NameServer right away, coalesced but never dropped.

Regression: a topic created while a registration was in flight used to wait for the next periodic
registration (30 s), because trigger() ignored changes while a request was pending; found by the
interop tests (ali-ons cannot route to a topic the NameServer does not know yet).
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from broker.protocol.codes import ResponseCode
from broker.protocol.command import RemotingCommand
from broker.server.config import BrokerConfig
from broker.server.registration import Registrar


class SlowNameServer:
    """Stands in for the RemotingClient: records each REGISTER_BROKER body, answers after a delay."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.registered: list[set[str]] = []

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        body = orjson.loads(cmd.body)
        self.registered.append(set(body["topicConfigSerializeWrapper"]["topicConfigTable"]))
        await asyncio.sleep(self.delay)
        return cmd.response(ResponseCode.SUCCESS)


def _registrar(topics: dict[str, Any], namesrv: SlowNameServer) -> Registrar:
    config = BrokerConfig.model_validate({"namesrvAddr": "127.0.0.1:9876", "brokerIP1": "127.0.0.1"})
    wrapper = lambda: {"topicConfigTable": dict(topics), "dataVersion": {"counter": 0, "timestamp": 0}}  # noqa: E731
    return Registrar(config, namesrv, wrapper)  # type: ignore[arg-type]


async def _settle(registrar: Registrar) -> None:
    while registrar._pending is not None and not registrar._pending.done():
        await asyncio.sleep(0.01)


async def test_change_during_an_in_flight_registration_is_registered_after_it() -> None:
    topics: dict[str, Any] = {"A": {}}
    namesrv = SlowNameServer(delay=0.2)
    registrar = _registrar(topics, namesrv)
    registrar.trigger()
    await asyncio.sleep(0.05)  # the request for {A} is in flight now
    topics["B"] = {}
    registrar.trigger()
    await _settle(registrar)
    assert namesrv.registered == [{"A"}, {"A", "B"}]


async def test_changes_in_one_loop_turn_make_one_request() -> None:
    topics: dict[str, Any] = {}
    namesrv = SlowNameServer(delay=0.0)
    registrar = _registrar(topics, namesrv)
    for name in ("A", "B", "C"):
        topics[name] = {}
        registrar.trigger()
    await _settle(registrar)
    assert namesrv.registered == [{"A", "B", "C"}]
