"""The Broker: processors per request family, topic/group/offset managers, long polling, schedule service.

`broker.cli.mqbroker` and the tests use `broker.server.broker.BrokerController` with a config from
`load_broker_config`. The package does not import that module: only the broker's entry point does, and the
parts of the broker see it through the Protocols they name (processors/context.py, transaction/context.py,
config_update.py, broker.metrics.views).
"""

from __future__ import annotations

from broker.server.config import BrokerConfig, LoadedConfig, load_broker_config

__all__ = ["BrokerConfig", "LoadedConfig", "load_broker_config"]
