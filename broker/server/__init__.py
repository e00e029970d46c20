"""The Broker: processors per request family, topic/group/offset managers, long polling, schedule service.

`broker.cli.mqbroker` and the tests use `BrokerController` with a config from `load_broker_config`.
"""

from __future__ import annotations

from broker.server.broker import BrokerController
from broker.server.config import BrokerConfig, LoadedConfig, load_broker_config

__all__ = ["BrokerConfig", "BrokerController", "LoadedConfig", "load_broker_config"]
