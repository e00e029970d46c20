"""UPDATE_BROKER_CONFIG at run time: validate the keys, apply what can change live, persist them all.

The admin processor hands `apply_updates()` the parsed `key=value` body. Like RocketMQ we refuse
the black-listed keys (NO_PERMISSION) and persist the change into the broker's own `-c` file, so a
restart keeps it. Unlike RocketMQ, which silently skips keys it does not know, an unknown key or a bad
value is refused (INVALID_PARAMETER naming it) and nothing changes.
`LIVE_KEYS` are set on the live BrokerConfig / StoreConfig, which the processors read per request; every
other key (`RESTART_KEYS`: read once at start) is only persisted and takes effect at the next start
(RocketMQ also changes those fields in memory, where nothing reads them again). A read-only `-c` file
(a Kubernetes ConfigMap) does not refuse the update: it applies until the next start, with a warning.
The broker is seen through `ConfigUpdateContext`: its configs, and the few parts that copied a setting
at start.
"""

from __future__ import annotations

import errno
import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError

from broker.config.rewrite import update_properties_file
from broker.config.typed import model_aliases, validation_problems
from broker.protocol.codes import ResponseCode
from broker.server.config import BrokerConfig, LoadedConfig, is_broker_secret, store_config
from broker.server.errors import RequestError
from broker.store.config import StoreConfig

if TYPE_CHECKING:
    from broker.server.clients import ConsumerManager, ProducerManager
    from broker.server.groups import SubscriptionGroupManager
    from broker.server.topics import TopicConfigManager
    from broker.store.message_store import MessageStore

__all__ = ["BLACK_LIST", "LIVE_KEYS", "RESTART_KEYS", "ConfigUpdate", "ConfigUpdateContext", "apply_updates"]

log = logging.getLogger(__name__)

#: RocketMQ's default configBlackList (plus the key itself): never changed over the wire.
BLACK_LIST = frozenset({"configBlackList", "brokerConfigPath"})

#: Read per request or per run of a periodic task from the live BrokerConfig / StoreConfig (or copied on by
#: `_propagate`): UPDATE_BROKER_CONFIG sets these in place. tests/server/test_config_live.py pins the list.
LIVE_KEYS = frozenset(
    {
        # topics and subscription groups
        "autoCreateTopicEnable",
        "autoCreateSubscriptionGroup",
        "defaultTopicQueueNums",
        "brokerPermission",
        # clients
        "channelExpiredTimeout",
        "notifyConsumerIdsChangedEnable",
        "enablePropertyFilter",
        # send and pull
        "maxMessageSize",
        "longPollingEnable",
        "shortPollingTimeMills",
        "maxTransferBytesOnMessageInMemory",
        "rejectTransactionMessage",
        "storeReplyMessageEnable",
        "timerWheelEnable",
        "timerMaxDelaySec",
        # the transaction check round
        "transactionTimeOut",
        "transactionCheckMax",
        # CommitLog retention, read on every clean run
        "deleteWhen",
        "fileReservedTime",
        "diskMaxUsedSpaceRatio",
        "diskSpaceCleanForciblyRatio",
    }
)

#: Every other key the broker knows takes effect at the next start: identity, addresses, ports, paths, file
#: sizes, role, schedule levels, and whatever a part copied when it was built (authentication and TLS
#: settings, metrics exporter, thread pools, connection limits, HA and controller settings, the periods of
#: timers started once). A key added to the configs lands here unless it is listed live above.
RESTART_KEYS = frozenset((set(model_aliases(BrokerConfig)) | set(model_aliases(StoreConfig))) - LIVE_KEYS - BLACK_LIST)

#: The errors of a -c file the broker may not write (a read-only ConfigMap mount in Kubernetes): the update
#: still applies in memory, as RocketMQ does when its persist fails.
_READ_ONLY_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


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
    @property
    def store(self) -> MessageStore: ...
    def trigger_register(self) -> None: ...


@dataclass(frozen=True, slots=True)
class ConfigUpdate:
    live: list[str]  # applied now
    at_restart: list[str]  # persisted, effective after a restart
    persisted_to: str | None  # the broker.conf written, None when the broker was started without one


def apply_updates(broker: ConfigUpdateContext, updates: dict[str, str]) -> ConfigUpdate:
    """Validate and apply `updates`; RequestError (nothing changed) when a key is refused."""
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
            ResponseCode.INVALID_PARAMETER, f"invalid broker config: {validation_problems(exc, is_broker_secret)}"
        ) from None
    except ValueError as exc:  # ConfigError and the store's own checks
        raise RequestError(ResponseCode.INVALID_PARAMETER, f"invalid broker config: {exc}") from None

    persisted_to = _persist(loaded, updates)

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


def _persist(loaded: LoadedConfig, updates: dict[str, str]) -> str | None:
    """Write `updates` into the broker's -c file; None when there is none or it is read-only.

    A read-only file (a ConfigMap mount: whoever manages it keeps the truth) lets the update apply in
    memory until the next start, with a warning; any other write error refuses the whole update.
    """
    if loaded.source is None:
        return None
    try:
        update_properties_file(loaded.source, updates)
    except OSError as exc:
        if exc.errno not in _READ_ONLY_ERRNOS:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"cannot persist the broker config: {exc}") from None
        log.warning(
            "broker config file %s is read-only (%s): %s applied in memory only, until the next start; "
            "change the file's source to keep them",
            loaded.source,
            exc.strerror,
            ", ".join(sorted(updates)),
        )
        return None
    return str(loaded.source)


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
    if "maxMessageSize" in keys:
        broker.store.commit_log.max_message_size = broker.store_config.max_message_size
    if "brokerPermission" in keys:
        # The NameServers must learn the new permission now (RocketMQ bumps the topic data version).
        broker.topics.data_version.next_version()
        broker.trigger_register()
