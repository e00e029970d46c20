"""UPDATE_BROKER_CONFIG at run time: validate the keys, apply what can change live, persist them all.

The admin processor hands `apply_updates()` the parsed `key=value` body. Like RocketMQ we refuse
the black-listed keys (NO_PERMISSION) and persist the change into the broker's own `-c` file, so a
restart keeps it. Unlike RocketMQ, which silently skips keys it does not know, an unknown key or a bad
value is refused (INVALID_PARAMETER naming it) and nothing changes. Keys that fix the broker's
identity, addresses or file layout are only persisted: they take effect at the next start (RocketMQ
also changes those fields in memory, where nothing reads them again). Everything else is set on the
live BrokerConfig / StoreConfig, which the processors read per request. The broker is seen through
`ConfigUpdateContext`: its configs, and the few parts that copied a setting at start.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError

from broker.config.rewrite import update_properties_file
from broker.config.typed import model_aliases
from broker.protocol.codes import ResponseCode
from broker.server.config import BrokerConfig, LoadedConfig, store_config
from broker.server.errors import RequestError

if TYPE_CHECKING:
    from broker.server.clients import ConsumerManager, ProducerManager
    from broker.server.groups import SubscriptionGroupManager
    from broker.server.topics import TopicConfigManager
    from broker.store.config import StoreConfig

__all__ = ["BLACK_LIST", "RESTART_KEYS", "ConfigUpdate", "ConfigUpdateContext", "apply_updates"]

log = logging.getLogger(__name__)

#: RocketMQ's default configBlackList (plus the key itself): never changed over the wire.
BLACK_LIST = frozenset({"configBlackList", "brokerConfigPath"})

#: Read once at start (identity, addresses, ports, paths, file sizes, role, schedule levels).
RESTART_KEYS = frozenset(
    {
        "brokerClusterName",
        "brokerName",
        "brokerId",
        "listenPort",
        "bindAddress",
        "brokerIP1",
        "brokerIP2",
        "haListenPort",
        "storePathRootDir",
        "storePathCommitLog",
        "storePathConsumeQueue",
        "storePathIndex",
        "mappedFileSizeCommitLog",
        "mappedFileSizeConsumeQueue",
        "flushDiskType",
        "brokerRole",
        "messageDelayLevel",
        "namesrvAddr",
        # the log handlers are set up once, before the broker starts (broker.logs.setup)
        "logFormat",
        "logRoot",
        "logFileMaxSize",
        "logFileMaxIndex",
    }
)


class ConfigUpdateContext(Protocol):
    """What UPDATE_BROKER_CONFIG changes of the broker: its loaded configs, the parts that copied a setting
    at start, and the NameServer registration (a new brokerPermission)."""

    @property
    def loaded(self) -> LoadedConfig: ...
    @property
    def config(self) -> BrokerConfig: ...
    @property
    def store_config(self) -> StoreConfig: ...
    @property
    def groups(self) -> SubscriptionGroupManager: ...
    @property
    def consumers(self) -> ConsumerManager: ...
    @property
    def producers(self) -> ProducerManager: ...
    @property
    def topics(self) -> TopicConfigManager: ...
    def trigger_register(self) -> None: ...


@dataclass(frozen=True, slots=True)
class ConfigUpdate:
    live: list[str]  # applied now
    at_restart: list[str]  # persisted, effective after a restart
    persisted_to: str | None  # the broker.conf written, None when the broker was started without one


def _validation_message(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or '?'}={e.get('input')!r}: {e['msg']}" for e in exc.errors()
    )


def apply_updates(broker: ConfigUpdateContext, updates: dict[str, str]) -> ConfigUpdate:
    """Validate and apply `updates`; RequestError (nothing changed) when a key is refused."""
    from broker.store.config import StoreConfig

    if not updates:
        raise RequestError(ResponseCode.INVALID_PARAMETER, "no key=value in the UPDATE_BROKER_CONFIG body")
    refused = sorted(set(updates) & BLACK_LIST)
    if refused:
        raise RequestError(ResponseCode.NO_PERMISSION, f"Can not update config in black list: {', '.join(refused)}")
    broker_keys, store_keys = model_aliases(BrokerConfig), model_aliases(StoreConfig)
    unknown = sorted(k for k in updates if k not in broker_keys and k not in store_keys)
    if unknown:
        raise RequestError(ResponseCode.INVALID_PARAMETER, f"unknown broker config key(s): {', '.join(unknown)}")

    loaded = broker.loaded
    broker_updates = {k: v for k, v in updates.items() if k in broker_keys}
    store_updates = {k: v for k, v in updates.items() if k in store_keys}
    try:
        current: dict[str, Any] = loaded.broker.model_dump(by_alias=True, exclude_none=True)
        candidate = BrokerConfig.model_validate({**current, **broker_updates})
        candidate_loaded = replace(
            loaded, broker=candidate, store_properties={**loaded.store_properties, **store_updates}
        )
        candidate_store = store_config(candidate_loaded)
    except ValidationError as exc:
        raise RequestError(
            ResponseCode.INVALID_PARAMETER, f"invalid broker config: {_validation_message(exc)}"
        ) from None
    except ValueError as exc:  # ConfigError and the store's own checks
        raise RequestError(ResponseCode.INVALID_PARAMETER, f"invalid broker config: {exc}") from None

    persisted_to = None
    if loaded.source is not None:
        try:
            update_properties_file(loaded.source, updates)
        except OSError as exc:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"cannot persist the broker config: {exc}") from None
        persisted_to = str(loaded.source)

    live, at_restart = [], []
    for key in updates:
        if key in RESTART_KEYS:
            at_restart.append(key)
            continue
        live.append(key)
        if key in broker_keys:
            name = broker_keys[key]
            setattr(loaded.broker, name, getattr(candidate, name))
        if key in store_keys:
            name = store_keys[key]
            setattr(broker.store_config, name, getattr(candidate_store, name))
    loaded.store_properties.update({k: v for k, v in store_updates.items() if k not in RESTART_KEYS})
    _propagate(broker, set(live))
    log.info("broker config updated: live %s, after a restart %s, persisted to %s", live, at_restart, persisted_to)
    return ConfigUpdate(live, at_restart, persisted_to)


def _propagate(broker: ConfigUpdateContext, keys: set[str]) -> None:
    """The few settings that parts of the broker copied at start."""
    c = broker.config
    if "autoCreateSubscriptionGroup" in keys:
        broker.groups.auto_create = c.auto_create_subscription_group
    if "notifyConsumerIdsChangedEnable" in keys:
        broker.consumers.notify_enabled = c.notify_consumer_ids_changed_enable
    if "channelExpiredTimeout" in keys:
        broker.consumers.channel_expired_timeout = c.channel_expired_timeout / 1000
        broker.producers.channel_expired_timeout = c.channel_expired_timeout / 1000
    if "brokerPermission" in keys:
        # The NameServers must learn the new permission now (RocketMQ bumps the topic data version).
        broker.topics.data_version.next_version()
        broker.trigger_register()
