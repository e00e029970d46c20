"""Typed client settings with the defaults of RocketMQ's client configuration tables.

Producer, PushConsumer, PullConsumer and Admin take one of these (or keyword arguments that build
one). Names are snake_case forms of the Java keys; times are seconds (Java uses milliseconds).
"""

from __future__ import annotations

import logging
import os
import ssl
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from broker.client.errors import NoNameServerError
from broker.client.message import ConsumeFromWhere, MessageModel
from broker.protocol.signature import Credentials
from broker.transport.tls import client_context

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "NAMESRV_ADDR_ENV",
    "NAMESRV_ADDR_PROPERTY",
    "TLS_ENABLE_PROPERTY",
    "ClientConfig",
    "ConsumerConfig",
    "ProducerConfig",
    "client_config_with",
    "parse_namesrv_addr",
    "resolve_namesrv_addr",
]

log = logging.getLogger(__name__)

DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024

#: Java's system property; Python's equivalent of `java -Dkey=value` is `python -X key=value`.
NAMESRV_ADDR_PROPERTY = "rocketmq.namesrv.addr"
NAMESRV_ADDR_ENV = "NAMESRV_ADDR"
#: Java's -Dtls.enable=true (ClientConfig.useTLS's default): `python -X tls.enable=true`.
TLS_ENABLE_PROPERTY = "tls.enable"


def _tls_enable_property() -> bool:
    value = sys._xoptions.get(TLS_ENABLE_PROPERTY)
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def parse_namesrv_addr(value: str | list[str] | tuple[str, ...]) -> list[str]:
    """`"a:9876;b:9876"` (RocketMQ separates with semicolons; commas are accepted too) -> list."""
    parts = [str(v) for v in value] if isinstance(value, list | tuple) else value.replace(",", ";").split(";")
    result = [p.strip() for p in parts if p.strip()]
    if not result:
        raise ValueError("namesrv_addr is empty")
    return result


def resolve_namesrv_addr(
    explicit: str | None,
    *,
    xoptions: Mapping[str, str | bool] | None = None,
    environ: Mapping[str, str] | None = None,
) -> str:
    """The NameServer list as RocketMQ's clients find it: the explicit setting, else the
    `rocketmq.namesrv.addr` property (`python -X rocketmq.namesrv.addr=host:9876`), else $NAMESRV_ADDR.
    There is no built-in default: a client that silently used 127.0.0.1 sent to the wrong cluster."""
    if explicit is not None and explicit.strip():
        return explicit
    prop = (sys._xoptions if xoptions is None else xoptions).get(NAMESRV_ADDR_PROPERTY)
    if isinstance(prop, str) and prop.strip():
        return prop
    env = (os.environ if environ is None else environ).get(NAMESRV_ADDR_ENV, "")
    if env.strip():
        return env
    raise NoNameServerError(
        f"no NameServer address: pass namesrv_addr='host:9876', or set the {NAMESRV_ADDR_ENV} environment variable"
        f" or the {NAMESRV_ADDR_PROPERTY} property (python -X {NAMESRV_ADDR_PROPERTY}=host:9876)"
    )


@dataclass(frozen=True, slots=True)
class ClientConfig:
    #: None: resolved by `resolve_namesrv_addr` (the property, then $NAMESRV_ADDR) when a client is built.
    namesrv_addr: str | None = None
    #: Distinguishes two clients of one process in the clientId (`ip@instance`); defaults to the pid.
    instance_name: str = field(default_factory=lambda: str(os.getpid()))
    client_ip: str = "127.0.0.1"
    poll_name_server_interval: float = 30.0
    #: How often a topic this client uses but the NameServers do not know yet (a consumer started before its
    #: topic) is looked up again: a new topic is picked up within this, not the 30 s poll. One small request
    #: per missing topic; a group's own %RETRY% topic, made by the broker at the first message sent back, waits
    #: for the regular poll.
    poll_missing_route_interval: float = 2.0
    heartbeat_broker_interval: float = 30.0
    persist_consumer_offset_interval: float = 5.0
    #: Timeout of control requests (Java's mqClientApiTimeout, 3000 ms).
    request_timeout: float = 3.0
    #: TLS to the NameServers and brokers (Java's useTLS; default the tls.enable property, `python -X tls.enable=true`).
    #: The server's certificate is verified against `tls_ca_file` (else the system's CAs) and must name the host
    #: dialled; `tls_cert_file`/`tls_key_file` answer a server that asks for a client certificate (mTLS).
    use_tls: bool = field(default_factory=_tls_enable_property)
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_key_password: str | None = field(default=None, repr=False)
    #: Opt-outs for tests and self-signed servers (tls.test.mode.enable): no verification at all / no host name check.
    tls_verify: bool = True
    tls_check_hostname: bool = True
    #: ACL (RocketMQ's AclClientRPCHook): every request is signed with these credentials. Give `credentials`, or
    #: `access_key` and `secret_key`; neither secret appears in a repr, a log line or an exception.
    credentials: Credentials | None = None
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if (self.access_key is None) != (self.secret_key is None):
            raise ValueError("give both access_key and secret_key, or credentials=Credentials(...)")
        if self.access_key is not None and self.credentials is not None:
            raise ValueError("give either credentials or access_key and secret_key, not both")

    @property
    def signer(self) -> Credentials | None:
        """What this client signs its requests with (None: unsigned)."""
        if self.credentials is not None:
            return self.credentials
        if self.access_key is not None and self.secret_key is not None:
            return Credentials(self.access_key, self.secret_key)
        return None

    @property
    def client_id(self) -> str:
        return f"{self.client_ip}@{self.instance_name}"

    @property
    def namesrv_list(self) -> list[str]:
        return parse_namesrv_addr(resolve_namesrv_addr(self.namesrv_addr))

    def tls_context(self) -> ssl.SSLContext | None:
        """The SSLContext of this client's connections; None without use_tls (a bad file raises ConfigError)."""
        if not self.use_tls:
            return None
        return client_context(
            verify=self.tls_verify,
            check_hostname=self.tls_check_hostname,
            ca_file=self.tls_ca_file,
            cert_file=self.tls_cert_file,
            key_file=self.tls_key_file,
            key_password=self.tls_key_password,
        )


def client_config_with(client_config: ClientConfig | None, namesrv_addr: str | None, **defaults: Any) -> ClientConfig:
    """The client config every role starts from: the given one (or a default built from `defaults`),
    with `namesrv_addr` overriding its NameServer list when given, and the list resolved now (so a client
    without any NameServer address fails where it is built, naming the ways to give one)."""
    cc = client_config or ClientConfig(**defaults)
    return replace(cc, namesrv_addr=resolve_namesrv_addr(namesrv_addr or cc.namesrv_addr))


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    group: str = "DEFAULT_PRODUCER"
    create_topic_key: str = "TBW102"
    default_topic_queue_nums: int = 4
    send_msg_timeout: float = 10.0
    compress_msg_body_over_howmuch: int = 4096
    compress_level: int = 5
    retry_times_when_send_failed: int = 2
    retry_times_when_send_async_failed: int = 2
    retry_another_broker_when_not_store_ok: bool = False
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    #: Latency-based fault avoidance (Java's sendLatencyFaultEnable; on here by default).
    send_latency_fault_enable: bool = True
    #: Seconds before retrying a send when no other broker is available (doubling up to the max); a broker
    #: that does not answer is retried this way until send_msg_timeout, so a restart does not fail sends.
    retry_backoff_initial: float = 0.1
    retry_backoff_max: float = 1.0


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    group: str = "DEFAULT_CONSUMER"
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    #: Milliseconds since the epoch for CONSUME_FROM_TIMESTAMP; None = half an hour ago.
    consume_timestamp: int | None = None
    consume_thread_min: int = 10
    consume_thread_max: int = 20
    consume_concurrently_max_span: int = 2000
    pull_threshold_for_queue: int = 1000
    pull_threshold_size_for_queue: int = 100  # MiB
    pull_interval: float = 0.0
    consume_message_batch_max_size: int = 1
    pull_batch_size: int = 32
    max_reconsume_times: int = 16
    #: Delay level of a message sent back after RECONSUME_LATER; 0 lets the broker pick 3 + reconsumeTimes
    #: (Java's ConsumeConcurrentlyContext.delayLevelWhenNextConsume).
    delay_level_when_next_consume: int = 0
    #: Orderly: pause before retrying a suspended batch (suspendCurrentQueueTimeMillis).
    suspend_current_queue_time: float = 1.0
    broker_suspend_max_time: float = 15.0
    consumer_timeout_when_suspend: float = 30.0
    rebalance_interval: float = 20.0
    #: Directory of broadcasting-mode offset files (Java: ~/.rocketmq_offsets).
    offset_store_dir: str = field(default_factory=lambda: os.path.join(os.path.expanduser("~"), ".rocketmq_offsets"))
    #: Java sends the subscription in every pull only when postSubscriptionWhenPull; we always do,
    #: so a pull never fails because the broker has not processed our heartbeat yet.
    post_subscription_when_pull: bool = True

    def __post_init__(self) -> None:
        # Accept ordinals and names too (C++-style ints, "BROADCASTING"), store the enums.
        for name, enum in (("message_model", MessageModel), ("consume_from_where", ConsumeFromWhere)):
            value = getattr(self, name)
            if not isinstance(value, enum):
                object.__setattr__(self, name, enum[value] if isinstance(value, str) else enum(value))

    @property
    def clustering(self) -> bool:
        """Clustering (the group shares the queues, offsets on the broker), not broadcasting."""
        return self.message_model is MessageModel.CLUSTERING
