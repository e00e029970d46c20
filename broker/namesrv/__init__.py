"""The NameServer: route table, broker liveness, KV config, and the processors serving them.

Started by broker.cli.mqnamesrv through `NamesrvController`; the body helpers are also used by the
broker to build its REGISTER_BROKER request.
"""

from __future__ import annotations

from broker.namesrv.body import RegisterBrokerBody, TopicConfig, encode_register_body, parse_register_body
from broker.namesrv.config import NamesrvConfig
from broker.namesrv.controller import NamesrvController
from broker.namesrv.route import RouteInfoManager

__all__ = [
    "NamesrvConfig",
    "NamesrvController",
    "RegisterBrokerBody",
    "RouteInfoManager",
    "TopicConfig",
    "encode_register_body",
    "parse_register_body",
]
