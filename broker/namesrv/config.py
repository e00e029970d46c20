"""NamesrvConfig: the NameServer's typed settings with RocketMQ's key names (namesrv.properties).

Built by broker.cli.mqnamesrv from `-c FILE` (and tests directly); read by the NameServer controller.
Keys are RocketMQ's NamesrvConfig/NettyServerConfig names; `brokerChannelExpiredTime` is ours (Java
hard-codes 120000 ms as the default broker heartbeat timeout) so tests can expire brokers quickly.

Unknown keys in a file are handled as the broker handles them (docs/configuration.md, "Unknown keys"):
a warning names the key and the file, and the key is ignored, so a namesrv.properties shared with Apache
RocketMQ (which ignores them silently) still starts. A bad value of a known key is an error naming it.
UPDATE_NAMESRV_CONFIG refuses an unknown key instead (broker.namesrv.config_update).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, SecretStr, model_validator

from broker.auth.settings import check_auth_keys
from broker.config.errors import ConfigError
from broker.config.typed import load_model, model_aliases
from broker.controller.config import CONTROLLER_KEYS
from broker.logs.settings import (
    DEFAULT_MAX_INDEX,
    DEFAULT_MAX_SIZE,
    LogFileMaxIndex,
    LogFileMaxSize,
    LogFormatKey,
    LogRoot,
)
from broker.metrics.settings import DEFAULT_PROM_PORT, ExporterType, PromHost, PromPort
from broker.transport.tls import TlsKeys, with_tls_file

__all__ = ["NamesrvConfig"]

log = logging.getLogger(__name__)


def _home() -> str:
    return os.environ.get("ROCKETMQ_HOME", "")


def _user_home() -> Path:
    return Path(os.path.expanduser("~"))


class NamesrvConfig(TlsKeys):
    """Effective NameServer configuration. Field aliases are the property keys; the tls.* keys are `TlsKeys`'."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    rocketmq_home: str = Field(default_factory=_home, alias="rocketmqHome")
    kv_config_path: str = Field(
        default_factory=lambda: str(_user_home() / "namesrv" / "kvConfig.json"), alias="kvConfigPath"
    )
    config_store_path: str = Field(
        default_factory=lambda: str(_user_home() / "namesrv" / "namesrv.properties"), alias="configStorePath"
    )
    product_env_name: str = Field(default="center", alias="productEnvName")
    cluster_test: bool = Field(default=False, alias="clusterTest")
    order_message_enable: bool = Field(default=False, alias="orderMessageEnable")
    return_order_topic_config_to_broker: bool = Field(default=True, alias="returnOrderTopicConfigToBroker")
    # Liveness scan period, ms (RocketMQ default 5000).
    scan_not_active_broker_interval: int = Field(default=5000, ge=10, alias="scanNotActiveBrokerInterval")
    # Default heartbeat timeout, ms, for brokers that do not send heartbeatTimeoutMillis.
    broker_channel_expired_time: int = Field(default=120_000, ge=100, alias="brokerChannelExpiredTime")
    enable_all_topic_list: bool = Field(default=True, alias="enableAllTopicList")
    enable_topic_list: bool = Field(default=True, alias="enableTopicList")
    delete_topic_with_broker_registration: bool = Field(default=False, alias="deleteTopicWithBrokerRegistration")
    # The controller of controller mode runs in this process (broker.controller), configured by the controller's
    # keys of the same file; it serves on its own controllerDLegerPeers address, not on listenPort.
    enable_controller_in_namesrv: bool = Field(default=False, alias="enableControllerInNamesrv")
    need_wait_for_service: bool = Field(default=False, alias="needWaitForService")
    wait_seconds_for_service: int = Field(default=45, ge=0, alias="waitSecondsForService")
    # NettyServerConfig keys.
    listen_port: int = Field(default=9876, ge=0, le=65535, alias="listenPort")
    bind_address: str = Field(default="0.0.0.0", alias="bindAddress")
    server_channel_max_idle_time_seconds: int = Field(default=120, ge=0, alias="serverChannelMaxIdleTimeSeconds")
    # Largest accepted frame (RocketMQ's com.rocketmq.remoting.frameMaxLength system property).
    frame_max_length: int = Field(default=16 * 1024 * 1024, ge=1024, alias="frameMaxLength")
    # Metrics (broker.metrics, docs/metrics.md), the broker's keys: PROM serves http://host:port/metrics.
    metrics_exporter_type: ExporterType = Field(default="DISABLE", alias="metricsExporterType")
    metrics_prom_exporter_host: PromHost = Field(default="", alias="metricsPromExporterHost")
    metrics_prom_exporter_port: PromPort = Field(default=DEFAULT_PROM_PORT, alias="metricsPromExporterPort")
    # Logs (broker.logs), the broker's keys: the format, and a size-rotated namesrv.log under logRoot.
    log_format: LogFormatKey = Field(default="text", alias="logFormat")
    log_root: LogRoot = Field(default="", alias="logRoot")
    log_file_max_size: LogFileMaxSize = Field(default=DEFAULT_MAX_SIZE, alias="logFileMaxSize")
    log_file_max_index: LogFileMaxIndex = Field(default=DEFAULT_MAX_INDEX, alias="logFileMaxIndex")
    # Authentication (broker.auth, docs/security.md; ours, RocketMQ's NameServer has none): with it on, the writes
    # (REGISTER_BROKER, UNREGISTER_BROKER, KV and topic changes, write perms, config updates) need a request signed
    # by one of the two users these keys define; route and cluster reads stay open. Secret: shown masked.
    authentication_enabled: bool = Field(default=False, alias="authenticationEnabled")
    init_authentication_user: SecretStr = Field(default=SecretStr(""), alias="initAuthenticationUser")
    inner_client_authentication_credentials: SecretStr = Field(
        default=SecretStr(""), alias="innerClientAuthenticationCredentials"
    )
    authentication_whitelist: str = Field(default="", alias="authenticationWhitelist")

    @model_validator(mode="after")
    def _check_paths(self) -> NamesrvConfig:
        if not self.kv_config_path:
            raise ValueError("kvConfigPath must not be empty")
        return self

    @classmethod
    def from_properties(cls, values: Mapping[str, Any], source: str = "namesrv config") -> NamesrvConfig:
        """Validate RocketMQ-named keys: an unknown key is warned about (by name, with `source`) and ignored;
        a bad value raises ConfigError naming the key."""
        values = with_tls_file(values, origin=source)  # tls.config.file's keys win
        known = model_aliases(cls)
        for key in sorted(k for k in values if k not in known and k not in CONTROLLER_KEYS):
            log.warning("unknown NameServer config key %r in %s is ignored", key, source)
        try:
            check_auth_keys({k: str(v) for k, v in values.items() if isinstance(v, str)})
        except ValueError as exc:  # checked here: load_model's messages show the value, and these are secrets
            raise ConfigError(f"{source}: {exc}") from None
        return load_model(cls, {k: v for k, v in values.items() if k in known}, source)

    def with_overrides(self, **changes: Any) -> NamesrvConfig:
        """A copy with some fields (by Python name) changed, validated again."""
        data = self.model_dump()
        data.update(changes)
        return NamesrvConfig.model_validate(data)
