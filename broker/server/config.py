"""BrokerConfig: the broker's typed configuration, read from RocketMQ `broker.conf` keys.

`mqbroker` (broker/cli/mqbroker.py) calls `load_broker_config()` with the parsed properties file and
the command-line overrides; `BrokerController` reads the resulting `BrokerConfig` and builds the
store's `StoreConfig` from it with `store_config()`. The keys both read (storePathRootDir, brokerRole,
messageDelayLevel...) are declared once, in the store's `BrokerStoreKeys`, which `BrokerConfig` extends.

Policy (documented in docs/configuration.md, the NameServer's the same): a key neither the broker nor
the store knows is *warned about by name, with the file*, and otherwise ignored (RocketMQ ignores it
silently, so files shared with Apache RocketMQ keep working); a known key with a value of the wrong
type or range is an error naming the key.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from broker.auth.settings import MASK, SECRET_KEYS, check_auth_keys
from broker.config.effective import is_secret
from broker.config.errors import ConfigError
from broker.config.typed import model_aliases, validation_problems
from broker.logs.settings import (
    DEFAULT_MAX_INDEX,
    DEFAULT_MAX_SIZE,
    LogFileMaxIndex,
    LogFileMaxSize,
    LogFormatKey,
    LogRoot,
)
from broker.metrics.settings import DEFAULT_PROM_PORT, ExporterType, PromHost, PromPort
from broker.store.config import BrokerStoreKeys, StoreConfig
from broker.transport.tls import TlsKeys, with_tls_file

__all__ = [
    "BrokerConfig",
    "ConfigError",
    "LoadedConfig",
    "default_broker_ip",
    "effective_properties",
    "env_overrides",
    "is_broker_secret",
    "load_broker_config",
    "store_config",
]

log = logging.getLogger(__name__)

_DNS_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def default_broker_ip() -> str:
    """RocketMQ's default brokerIP1: the first non-loopback IPv4 address of this host, else 127.0.0.1."""
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
    except OSError:
        return "127.0.0.1"
    for info in infos:
        ip = str(info[4][0])
        if not ip.startswith("127."):
            return ip
    return "127.0.0.1"


class BrokerConfig(BrokerStoreKeys, TlsKeys):
    """Broker settings under their broker.conf names (aliases); Python code uses the snake_case names.

    RocketMQ's tls.* keys come from `TlsKeys` (broker.transport.tls; docs/configuration.md "TLS").

    The keys the store reads too (storePathRootDir, flushDiskType, brokerRole...) come from `BrokerStoreKeys`.
    """

    model_config = ConfigDict(populate_by_name=True, extra="forbid", validate_assignment=True)

    broker_cluster_name: str = Field("DefaultCluster", alias="brokerClusterName", min_length=1)
    broker_name: str = Field(default_factory=lambda: socket.gethostname() or "broker-a", alias="brokerName")
    # -1: in controller mode the controller assigns the id (brokerId and brokerRole are then the controller's)
    broker_id: int = Field(0, alias="brokerId", ge=-1)
    listen_port: int = Field(10911, alias="listenPort", ge=0, le=65535)
    # NettyServerConfig.bindAddress: where the remoting and HA servers listen (0.0.0.0 = every interface).
    bind_address: str = Field("0.0.0.0", alias="bindAddress")
    namesrv_addr: str | None = Field(None, alias="namesrvAddr")
    broker_ip1: str = Field(default_factory=default_broker_ip, alias="brokerIP1")
    broker_ip2: str | None = Field(None, alias="brokerIP2")
    ha_listen_port: int | None = Field(None, alias="haListenPort", ge=0, le=65535)
    auto_create_topic_enable: bool = Field(True, alias="autoCreateTopicEnable")
    auto_create_subscription_group: bool = Field(True, alias="autoCreateSubscriptionGroup")
    default_topic_queue_nums: int = Field(8, alias="defaultTopicQueueNums", ge=1, le=1024)
    register_name_server_period: int = Field(30_000, alias="registerNameServerPeriod", gt=0)
    register_broker_timeout_mills: int = Field(6_000, alias="registerBrokerTimeoutMills", gt=0)
    wait_time_mills_in_send_queue: int = Field(200, alias="waitTimeMillsInSendQueue", gt=0)
    long_polling_enable: bool = Field(True, alias="longPollingEnable")
    short_polling_time_mills: int = Field(1000, alias="shortPollingTimeMills", ge=0)
    flush_consumer_offset_interval: int = Field(5000, alias="flushConsumerOffsetInterval", gt=0)
    flush_delay_offset_interval: int = Field(10_000, alias="flushDelayOffsetInterval", gt=0)
    slave_read_enable: bool = Field(False, alias="slaveReadEnable")
    # HA replication (broker.ha); the SYNC_MASTER wait uses the store's syncFlushTimeout (4.x semantics)
    ha_master_address: str | None = Field(None, alias="haMasterAddress")
    ha_send_heartbeat_interval: int = Field(5_000, alias="haSendHeartbeatInterval", gt=0)
    ha_housekeeping_interval: int = Field(20_000, alias="haHousekeepingInterval", gt=0)
    ha_transfer_batch_size: int = Field(32 * 1024, alias="haTransferBatchSize", gt=0)
    ha_slave_fallbehind_max: int = Field(256 * 1024 * 1024, alias="haSlaveFallbehindMax", gt=0)
    ha_full_transfer_from_empty: bool = Field(False, alias="haFullTransferFromEmpty")  # ours, not RocketMQ's
    slave_sync_interval: int = Field(3_000, alias="slaveSyncInterval", gt=0)  # ours: SlaveSynchronize period
    # ours: a master whose CommitLog is behind a registered slave's restores from it before it serves
    restore_from_slave_on_start: bool = Field(True, alias="restoreFromSlaveOnStart")
    access_message_in_memory_max_ratio: int = Field(40, alias="accessMessageInMemoryMaxRatio", ge=0, le=100)
    # Controller mode (broker.server.controller_mode, docs/design/failover.md): RocketMQ 5's keys and defaults
    enable_controller_mode: bool = Field(False, alias="enableControllerMode")
    controller_addr: str = Field("", alias="controllerAddr")
    sync_broker_metadata_period: int = Field(5_000, alias="syncBrokerMetadataPeriod", ge=100)
    check_sync_state_set_period: int = Field(5_000, alias="checkSyncStateSetPeriod", ge=100)
    sync_controller_metadata_period: int = Field(10_000, alias="syncControllerMetadataPeriod", ge=100)
    controller_heart_beat_timeout_mills: int = Field(10_000, alias="controllerHeartBeatTimeoutMills", ge=100)
    broker_heartbeat_interval: int = Field(1_000, alias="brokerHeartbeatInterval", ge=50)
    send_heartbeat_timeout_millis: int = Field(1_000, alias="sendHeartbeatTimeoutMillis", ge=50)
    broker_election_priority: int = Field(2**31 - 1, alias="brokerElectionPriority")
    ha_max_time_slave_not_catchup: int = Field(15_000, alias="haMaxTimeSlaveNotCatchup", ge=100)
    all_ack_in_sync_state_set: bool = Field(False, alias="allAckInSyncStateSet")
    in_sync_replicas: int = Field(1, alias="inSyncReplicas", ge=1)
    min_in_sync_replicas: int = Field(1, alias="minInSyncReplicas", ge=1)
    store_path_epoch_file: str = Field("", alias="storePathEpochFile")
    store_path_broker_identity: str = Field("", alias="storePathBrokerIdentity")
    cluster_topic_enable: bool = Field(True, alias="clusterTopicEnable")
    broker_topic_enable: bool = Field(True, alias="brokerTopicEnable")
    trace_topic_enable: bool = Field(False, alias="traceTopicEnable")
    msg_trace_topic_name: str = Field("RMQ_SYS_TRACE_TOPIC", alias="msgTraceTopicName")
    reject_transaction_message: bool = Field(False, alias="rejectTransactionMessage")
    notify_consumer_ids_changed_enable: bool = Field(True, alias="notifyConsumerIdsChangedEnable")
    channel_expired_timeout: int = Field(120_000, alias="channelExpiredTimeout", gt=0)
    transaction_time_out: int = Field(6_000, alias="transactionTimeOut", ge=0)
    transaction_check_max: int = Field(15, alias="transactionCheckMax", ge=0)
    transaction_check_interval: int = Field(30_000, alias="transactionCheckInterval", gt=0)
    enable_property_filter: bool = Field(False, alias="enablePropertyFilter")
    broker_permission: int = Field(6, alias="brokerPermission", ge=0, le=15)
    max_msg_nums_batch: int = Field(64, alias="maxMsgNumsBatch", gt=0)
    send_message_thread_pool_nums: int = Field(1, alias="sendMessageThreadPoolNums", gt=0)
    pull_message_thread_pool_nums: int = Field(16, alias="pullMessageThreadPoolNums", gt=0)
    server_channel_max_idle_time_seconds: int = Field(120, alias="serverChannelMaxIdleTimeSeconds", gt=0)
    # Remoting bounds against hostile or broken clients (docs/operations.md). frameMaxLength is RocketMQ's
    # com.rocketmq.remoting.frameMaxLength system property, under the NameServer's key; the rest are ours.
    frame_max_length: int = Field(16 * 1024 * 1024, alias="frameMaxLength", ge=1024)
    server_incomplete_frames_max_bytes: int = Field(256 * 1024 * 1024, alias="serverIncompleteFramesMaxBytes", ge=0)
    server_frame_timeout_millis: int = Field(30_000, alias="serverFrameTimeoutMillis", ge=0)
    server_write_buffer_max_bytes: int = Field(64 * 1024 * 1024, alias="serverWriteBufferMaxBytes", gt=0)
    use_epoll_native_selector: bool = Field(False, alias="useEpollNativeSelector")
    # Request/Reply (broker.server.processors.reply): replies are also stored in <cluster>_REPLY_TOPIC.
    store_reply_message_enable: bool = Field(True, alias="storeReplyMessageEnable")
    # Timed delivery (broker.server.timer): off refuses timer messages; the furthest delivery time accepted.
    timer_wheel_enable: bool = Field(True, alias="timerWheelEnable")
    timer_max_delay_sec: int = Field(3 * 24 * 3600, alias="timerMaxDelaySec", gt=0)
    # POP consumption (broker.server.pop, docs/compatibility.md "POP"): RocketMQ's keys and defaults.
    revive_queue_num: int = Field(8, alias="reviveQueueNum", ge=1, le=512)
    revive_interval: int = Field(1000, alias="reviveInterval", ge=10)
    pop_polling_size: int = Field(1024, alias="popPollingSize", ge=0)
    max_pop_polling_size: int = Field(100_000, alias="maxPopPollingSize", ge=0)
    pop_from_retry_probability: int = Field(20, alias="popFromRetryProbability", ge=0, le=100)
    enable_retry_topic_v2: bool = Field(False, alias="enableRetryTopicV2")
    retrieve_message_from_pop_retry_topic_v1: bool = Field(True, alias="retrieveMessageFromPopRetryTopicV1")
    init_pop_offset_by_check_msg_in_mem: bool = Field(True, alias="initPopOffsetByCheckMsgInMem")
    server_load_balancer_enable: bool = Field(True, alias="serverLoadBalancerEnable")
    default_message_request_mode: str = Field("PULL", alias="defaultMessageRequestMode", pattern="^(PULL|POP)$")
    default_pop_share_queue_num: int = Field(-1, alias="defaultPopShareQueueNum")
    # Metrics (broker.metrics, docs/metrics.md): PROM serves http://host:port/metrics; host empty = bindAddress.
    metrics_exporter_type: ExporterType = Field("DISABLE", alias="metricsExporterType")
    metrics_prom_exporter_host: PromHost = Field("", alias="metricsPromExporterHost")
    metrics_prom_exporter_port: PromPort = Field(DEFAULT_PROM_PORT, alias="metricsPromExporterPort")
    # The gRPC endpoint (broker.grpc, apache.rocketmq.v2.MessagingService): RocketMQ 5's proxy in "local" mode,
    # inside the broker process. `mqbroker --enable-proxy` turns it on too. Keys are the proxy's (rmq-proxy.json).
    enable_proxy: bool = Field(False, alias="enableProxy")
    grpc_server_port: int = Field(8081, alias="grpcServerPort", ge=0, le=65535)
    # Ours, not the proxy's: when not 0, the route names every broker at its remoting port plus this offset, not at
    # grpcServerPort. The operator sets it under NodePort external access, where each broker's gRPC nodePort sits at
    # the same distance from its remoting nodePort (the pods themselves listen on grpcServerPort).
    grpc_route_port_offset: int = Field(0, alias="grpcRoutePortOffset", ge=-65535, le=65535)
    # Ours, not the proxy's: when set, the route names a broker at IPv4 address a.b.c.d by the DNS name
    # a-b-c-d.<grpcRouteDomain>. The operator sets `<namespace>.pod` with TLS on: Kubernetes' DNS answers those names
    # with the address, and the cluster's certificate covers them with one wildcard, where it cannot name pod IPs.
    grpc_route_domain: str = Field("", alias="grpcRouteDomain")
    # grpcio's default (4 MiB) is below a maxMessageSize body plus its envelope; the proxy's default is 130 MiB
    grpc_max_inbound_message_size: int = Field(130 << 20, alias="grpcMaxInboundMessageSize", gt=0)
    # Auto-renew of push consumers' receipt handles (broker.grpc.receipts), the proxy's keys and defaults: the first
    # invisible time, renewals from renewAhead before expiry (1 min, 3 min, ... 1 h steps) until renewMaxTime, a scan
    # every renewSchedulePeriod, and the invisible time that hands a gone client's messages back to the group.
    enable_proxy_auto_renew: bool = Field(True, alias="enableProxyAutoRenew")
    default_invisible_time_mills: int = Field(60_000, alias="defaultInvisibleTimeMills", ge=1000, le=12 * 3600 * 1000)
    renew_ahead_time_millis: int = Field(10_000, alias="renewAheadTimeMillis", ge=0)
    renew_max_time_millis: int = Field(3 * 3600 * 1000, alias="renewMaxTimeMillis", gt=0)
    renew_schedule_period_millis: int = Field(5000, alias="renewSchedulePeriodMillis", ge=100)
    max_renew_retry_times: int = Field(3, alias="maxRenewRetryTimes", ge=1)
    invisible_time_millis_when_clear: int = Field(1000, alias="invisibleTimeMillisWhenClear", ge=1)
    # Logs (broker.logs, docs/operations.md "Logs"): the format, and a size-rotated broker.log under logRoot
    # (empty: the console only, as in a container). RocketMQ's client property names, its broker.log defaults.
    log_format: LogFormatKey = Field("text", alias="logFormat")
    log_root: LogRoot = Field("", alias="logRoot")
    log_file_max_size: LogFileMaxSize = Field(DEFAULT_MAX_SIZE, alias="logFileMaxSize")
    log_file_max_index: LogFileMaxIndex = Field(DEFAULT_MAX_INDEX, alias="logFileMaxIndex")
    # Authentication and authorization (broker.auth, docs/security.md): RocketMQ 5.3's ACL 2.0 keys, and 4.x's
    # aclEnable (ACL 1.0, $ROCKETMQ_HOME/conf/plain_acl.yml). The two JSON keys hold secrets: never shown.
    authentication_enabled: bool = Field(False, alias="authenticationEnabled")
    authorization_enabled: bool = Field(False, alias="authorizationEnabled")
    init_authentication_user: str = Field("", alias="initAuthenticationUser", repr=False)
    inner_client_authentication_credentials: str = Field("", alias="innerClientAuthenticationCredentials", repr=False)
    authentication_whitelist: str = Field("", alias="authenticationWhitelist")
    authorization_whitelist: str = Field("", alias="authorizationWhitelist")
    # Stateful: a connection's user, once its signature checked, is trusted on that connection for a while
    authentication_strategy: str = Field("", alias="authenticationStrategy")
    stateful_authentication_cache_expired_second: int = Field(
        60, ge=1, le=86400, alias="statefulAuthenticationCacheExpiredSecond"
    )
    migrate_auth_from_v1_enabled: bool = Field(False, alias="migrateAuthFromV1Enabled")
    acl_enable: bool = Field(False, alias="aclEnable")

    @field_validator("namesrv_addr")
    @classmethod
    def _check_namesrv(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        for addr in value.split(";"):
            host, sep, port = addr.strip().rpartition(":")
            if not sep or not host or not port.isdigit():
                raise ValueError(f"name server address {addr!r} is not host:port")
        return value.strip()

    @field_validator("grpc_route_domain")
    @classmethod
    def _check_route_domain(cls, value: str) -> str:
        # names go under it as one more label, so the whole name must stay within DNS's 253 characters
        if value and (len(value) > 200 or not all(_DNS_LABEL.fullmatch(label) for label in value.split("."))):
            raise ValueError(
                f"{value[:80]!r} is no DNS domain: dot-separated labels of 1 to 63 letters, digits and '-', "
                "neither starting nor ending with '-', 200 characters at most (e.g. my-namespace.pod)"
            )
        return value

    @model_validator(mode="after")
    def _check_auth(self) -> BrokerConfig:
        # a model-level error: its message names the key, and no input value is echoed (the JSON keys are secret)
        check_auth_keys(self.model_dump(by_alias=True, include=_AUTH_TEXT_FIELDS))
        return self

    @model_validator(mode="after")
    def _check_controller_mode(self) -> BrokerConfig:
        if self.broker_id == -1 and not self.enable_controller_mode:
            raise ValueError("brokerId=-1 (the controller assigns it) needs enableControllerMode=true")
        if self.enable_controller_mode and not self.controller_addr.strip():
            raise ValueError("enableControllerMode=true needs controllerAddr")
        return self

    @model_validator(mode="after")
    def _fill_derived(self) -> BrokerConfig:
        # Derived defaults, as BrokerStartup computes them; set via __dict__ to skip re-validation loops.
        if self.ha_listen_port is None:
            self.__dict__["ha_listen_port"] = self.listen_port + 1 if self.listen_port else 0
        if self.broker_ip2 is None:
            self.__dict__["broker_ip2"] = self.broker_ip1
        return self

    # ------------------------------------------------------------------ derived values

    @property
    def name_servers(self) -> list[str]:
        return [a.strip() for a in (self.namesrv_addr or "").split(";") if a.strip()]

    @property
    def broker_addr(self) -> str:
        return f"{self.broker_ip1}:{self.listen_port}"

    @property
    def ha_server_addr(self) -> str:
        return f"{self.broker_ip2}:{self.ha_listen_port}"

    @property
    def delay_levels_ms(self) -> list[int]:
        """The delay of each level in ms, level 1 first (`delay_levels()` as a list, for counting levels)."""
        return list(self.delay_levels().values())

    @property
    def is_master(self) -> bool:
        return self.broker_role != "SLAVE"


_AUTH_TEXT_FIELDS = {
    "init_authentication_user",
    "inner_client_authentication_credentials",
    "authentication_whitelist",
    "authorization_whitelist",
    "authentication_strategy",
}


@dataclass(slots=True)
class LoadedConfig:
    """Result of `load_broker_config`: the broker model, store keys for StoreConfig, and warnings."""

    broker: BrokerConfig
    store_properties: dict[str, str] = field(default_factory=dict)
    unknown_keys: list[str] = field(default_factory=list)
    #: The broker.conf it was read from (`mqbroker -c`): UPDATE_BROKER_CONFIG persists changes there.
    source: Path | None = None


def _broker_aliases() -> set[str]:
    return {f.alias or name for name, f in BrokerConfig.model_fields.items()}


def _store_aliases() -> dict[str, str]:
    """StoreConfig key (every accepted alias) -> field name (the store owns its keys; we pass them through)."""
    return model_aliases(StoreConfig)


def is_broker_secret(key: str) -> bool:
    """A broker key whose value is never shown: the auth JSON keys, and any key naming a secret (tls.*.keyPassword)."""
    return key in SECRET_KEYS or is_secret(key)


def _validation_message(exc: ValidationError, origin: str) -> str:
    return f"invalid configuration in {origin}: {validation_problems(exc, is_broker_secret)}"


def load_broker_config(
    properties: Mapping[str, str], overrides: Mapping[str, Any] | None = None, *, origin: str = "broker.conf"
) -> LoadedConfig:
    """Validate broker.conf properties (+ CLI overrides such as -n). Raises ConfigError naming the key."""
    merged: dict[str, Any] = {k.strip(): v for k, v in properties.items()}
    merged.update(overrides or {})
    merged = with_tls_file(merged, origin=origin)  # tls.config.file's keys win, as over RocketMQ's -D properties
    broker_keys = _broker_aliases()
    store_keys = _store_aliases()
    broker_values: dict[str, Any] = {}
    store_values: dict[str, str] = {}
    unknown: list[str] = []
    for key, value in merged.items():
        value = value.strip() if isinstance(value, str) else value
        if key in broker_keys:
            broker_values[key] = value  # a key both read (BrokerStoreKeys) is the broker model's
        elif key in store_keys:
            store_values[key] = value
        else:
            unknown.append(key)
    for key in unknown:
        log.warning("unknown broker config key %r in %s is ignored", key, origin)
    try:
        broker = BrokerConfig.model_validate(broker_values)
    except ValidationError as exc:
        raise ConfigError(_validation_message(exc, origin)) from None
    loaded = LoadedConfig(broker=broker, store_properties=store_values, unknown_keys=unknown)
    store_config(loaded)  # validate the store's keys now, so a bad value fails at load time
    return loaded


def store_config(loaded: LoadedConfig) -> StoreConfig:
    """The StoreConfig for this broker: store-only keys as given, the `BrokerStoreKeys` from the broker model."""
    aliases = _store_aliases()
    shared = BrokerStoreKeys.model_fields
    values: dict[str, Any] = {k: v for k, v in loaded.store_properties.items() if aliases.get(k) not in shared}
    values.update({name: getattr(loaded.broker, name) for name in shared})
    try:
        return StoreConfig.model_validate(values)
    except ValidationError as exc:
        raise ConfigError(_validation_message(exc, "store configuration")) from None


def effective_properties(loaded: LoadedConfig) -> dict[str, str]:
    """Every effective key=value (broker and store), as `mqbroker -p` prints them."""
    out: dict[str, str] = {}
    dumped = loaded.broker.model_dump(by_alias=True)
    dumped.update(store_config(loaded).model_dump(by_alias=True))
    for key in sorted(dumped):
        value = dumped[key]
        if value is None:
            value = ""
        elif isinstance(value, bool):
            value = "true" if value else "false"
        elif is_broker_secret(key) and value:
            value = MASK
        out[key] = str(value)
    return out


# Environment variable -> broker.conf key it stands for when the file does not set that key.
# BROKER_IP1 lets a Kubernetes pod advertise its own IP (downward API status.podIP) from a shared file, and
# BROKER_IP2 its HA address apart from that (a broker advertising its node's IP replicates over its pod's IP).
ENV_KEYS = {"NAMESRV_ADDR": "namesrvAddr", "BROKER_IP1": "brokerIP1", "BROKER_IP2": "brokerIP2"}


def env_overrides(
    environ: Mapping[str, str] | None = None, properties: Mapping[str, str] | None = None
) -> dict[str, str]:
    """NAMESRV_ADDR, BROKER_IP1 and BROKER_IP2 from the environment, for the keys `properties` leaves unset or
    blank."""
    env = os.environ if environ is None else environ
    given = properties or {}
    out: dict[str, str] = {}
    for var, key in ENV_KEYS.items():
        value = env.get(var, "").strip()
        if value and not str(given.get(key, "")).strip():
            out[key] = value
    return out
