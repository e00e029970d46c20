"""The broker.conf keys our broker knows, the kind of value each takes, and the ones the operator owns.

The operator may not import the broker (`broker.server` pulls in the store), so this is a copy of the key
names of `broker.server.config.BrokerConfig` and `broker.store.config.StoreConfig`;
tests/operator/test_model.py proves it equals them, so a key added to the broker fails that test until it
is added here. The model refuses a `spec.broker.config` key that is not listed (a typo would otherwise be
ignored by the broker with only a warning in a pod log) and a value of the wrong kind (it would stop the
broker at start-up, one crash-looping pod per group).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

__all__ = ["BROKER_KEYS", "LIVE_DEFAULTS", "LIVE_KEYS", "OWNED_KEYS", "ValueKind", "check_value", "same_value"]

# "bool", "int", "float", "str", or the tuple of accepted words of an enum.
ValueKind = str | tuple[str, ...]

_BOOL: Final = "bool"
_INT: Final = "int"
_FLOAT: Final = "float"
_STR: Final = "str"

# A key both models read (fileReservedTime: int in the broker, float in the store) has the stricter kind.
BROKER_KEYS: Final[Mapping[str, ValueKind]] = MappingProxyType(
    {
        "accessMessageInMemoryMaxRatio": _INT,
        "allAckInSyncStateSet": _BOOL,
        "autoCreateSubscriptionGroup": _BOOL,
        "autoCreateTopicEnable": _BOOL,
        "bindAddress": _STR,
        "brokerClusterName": _STR,
        "brokerElectionPriority": _INT,
        "brokerHeartbeatInterval": _INT,
        "brokerIP1": _STR,
        "brokerIP2": _STR,
        "brokerId": _INT,
        "brokerName": _STR,
        "brokerPermission": _INT,
        "brokerRole": ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE"),
        "brokerTopicEnable": _BOOL,
        "channelExpiredTimeout": _INT,
        "checkCRCOnRecover": _BOOL,
        "checkSyncStateSetPeriod": _INT,
        "cleanResourceInterval": _INT,
        "clusterTopicEnable": _BOOL,
        "commitLogPreallocateAhead": _INT,
        "controllerAddr": _STR,
        "controllerHeartBeatTimeoutMills": _INT,
        "defaultTopicQueueNums": _INT,
        "deleteCommitLogFilesInterval": _INT,
        "deleteWhen": _STR,
        "diskMaxUsedSpaceRatio": _INT,
        "diskSpaceCleanForciblyRatio": _FLOAT,
        "enableControllerMode": _BOOL,
        "enablePropertyFilter": _BOOL,
        "enableProxy": _BOOL,
        "fileReservedTime": _INT,
        "flushCommitLogLeastPages": _INT,
        "flushCommitLogThoroughInterval": _INT,
        "flushConsumeQueueLeastPages": _INT,
        "flushConsumerOffsetInterval": _INT,
        "flushDelayOffsetInterval": _INT,
        "flushDiskType": ("ASYNC_FLUSH", "SYNC_FLUSH"),
        "flushIntervalCommitLog": _INT,
        "flushIntervalConsumeQueue": _INT,
        "frameMaxLength": _INT,
        "grpcMaxInboundMessageSize": _INT,
        "grpcRouteDomain": _STR,
        "grpcRoutePortOffset": _INT,
        "grpcServerPort": _INT,
        "haFullTransferFromEmpty": _BOOL,
        "haHousekeepingInterval": _INT,
        "haListenPort": _INT,
        "haMasterAddress": _STR,
        "haMaxTimeSlaveNotCatchup": _INT,
        "haSendHeartbeatInterval": _INT,
        "haSlaveFallbehindMax": _INT,
        "haTransferBatchSize": _INT,
        "indexHelperEnable": _BOOL,
        "inSyncReplicas": _INT,
        "listenPort": _INT,
        "logFileMaxIndex": _INT,
        "logFileMaxSize": _INT,
        "logFormat": ("text", "json"),
        "logRoot": _STR,
        "longPollingEnable": _BOOL,
        "mappedFileSizeCommitLog": _INT,
        "mappedFileSizeConsumeQueue": _INT,
        "maxHashSlotNum": _INT,
        "maxIndexNum": _INT,
        "maxMessageSize": _INT,
        "maxMsgNumsBatch": _INT,
        "maxTransferBytesOnMessageInMemory": _INT,
        "maxTransferCountOnMessageInMemory": _INT,
        "messageDelayLevel": _STR,
        "messageIndexEnable": _BOOL,
        "messageIndexSafe": _BOOL,
        "metricsExporterType": ("DISABLE", "PROM"),
        "metricsPromExporterHost": _STR,
        "metricsPromExporterPort": _INT,
        "minInSyncReplicas": _INT,
        "msgTraceTopicName": _STR,
        "namesrvAddr": _STR,
        "notifyConsumerIdsChangedEnable": _BOOL,
        "pullMessageThreadPoolNums": _INT,
        "registerBrokerTimeoutMills": _INT,
        "registerNameServerPeriod": _INT,
        "rejectTransactionMessage": _BOOL,
        "restoreFromSlaveOnStart": _BOOL,
        "sendHeartbeatTimeoutMillis": _INT,
        "sendMessageThreadPoolNums": _INT,
        "serverChannelMaxIdleTimeSeconds": _INT,
        "serverFrameTimeoutMillis": _INT,
        "serverIncompleteFramesMaxBytes": _INT,
        "serverWriteBufferMaxBytes": _INT,
        "shortPollingTimeMills": _INT,
        "slaveReadEnable": _BOOL,
        "slaveSyncInterval": _INT,
        "statefulAuthenticationCacheExpiredSecond": _INT,
        "storePathBrokerIdentity": _STR,
        "storePathCommitLog": _STR,
        "storePathConsumeQueue": _STR,
        "storePathEpochFile": _STR,
        "storePathIndex": _STR,
        "storePathRootDir": _STR,
        "storeReplyMessageEnable": _BOOL,
        "syncBrokerMetadataPeriod": _INT,
        "syncControllerMetadataPeriod": _INT,
        "syncFlushTimeout": _INT,
        "timerMaxDelaySec": _INT,
        "timerWheelEnable": _BOOL,
        # POP consumption (broker.server.pop, docs/compatibility.md "POP")
        "defaultMessageRequestMode": _STR,
        "defaultPopShareQueueNum": _INT,
        "enableRetryTopicV2": _BOOL,
        "initPopOffsetByCheckMsgInMem": _BOOL,
        "maxPopPollingSize": _INT,
        "popFromRetryProbability": _INT,
        "popPollingSize": _INT,
        "retrieveMessageFromPopRetryTopicV1": _BOOL,
        "reviveInterval": _INT,
        "reviveQueueNum": _INT,
        "serverLoadBalancerEnable": _BOOL,
        # Auto-renew of gRPC push consumers' receipt handles (broker.grpc.receipts): RocketMQ proxy's keys
        "defaultInvisibleTimeMills": _INT,
        "enableProxyAutoRenew": _BOOL,
        "invisibleTimeMillisWhenClear": _INT,
        "maxRenewRetryTimes": _INT,
        "renewAheadTimeMillis": _INT,
        "renewMaxTimeMillis": _INT,
        "renewSchedulePeriodMillis": _INT,
        # Authentication and authorization (broker.auth, docs/security.md): ACL 2.0's keys and 4.x's aclEnable
        "aclEnable": _BOOL,
        "authenticationEnabled": _BOOL,
        "authenticationStrategy": _STR,
        "authenticationWhitelist": _STR,
        "authorizationEnabled": _BOOL,
        "authorizationWhitelist": _STR,
        "initAuthenticationUser": _STR,
        "innerClientAuthenticationCredentials": _STR,
        "migrateAuthFromV1Enabled": _BOOL,
        # TLS (broker.transport.tls): RocketMQ's tls.* keys, three of them ours (handshake bounds, reload period)
        "tls.client.authServer": _BOOL,
        "tls.client.certPath": _STR,
        "tls.client.keyPassword": _STR,
        "tls.client.keyPath": _STR,
        "tls.client.trustCertPath": _STR,
        "tls.config.file": _STR,
        "tls.enable": _BOOL,
        "tls.reloadIntervalMillis": _INT,
        "tls.server.authClient": _BOOL,
        "tls.server.certPath": _STR,
        "tls.server.handshakeTimeoutMillis": _INT,
        "tls.server.keyPassword": _STR,
        "tls.server.keyPath": _STR,
        "tls.server.maxHandshakes": _INT,
        "tls.server.mode": ("disabled", "permissive", "enforcing"),
        "tls.server.need.client.auth": ("none", "optional", "require"),
        "tls.server.trustCertPath": _STR,
        "tls.test.mode.enable": _BOOL,
        "traceTopicEnable": _BOOL,
        "transactionCheckInterval": _INT,
        "transactionCheckMax": _INT,
        "transactionTimeOut": _INT,
        "useEpollNativeSelector": _BOOL,
        "waitTimeMillsInSendQueue": _INT,
        "warmMapedFileEnable": _BOOL,
        "warmMappedFileEnable": _BOOL,
    }
)

# Keys a user may not set in spec.broker.config, each with the reason (shown in the design doc).
OWNED_KEYS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "brokerClusterName": "spec.clusterName (default metadata.name)",
        "brokerName": "<clusterName>-<group index>",
        "brokerId": "the pod's StatefulSet ordinal",
        "brokerRole": "spec.broker.replication: ordinal 0 is the master, the others SLAVE",
        "namesrvAddr": "the NameServer pods' DNS names",
        "listenPort": "fixed at 10911: the Services, probes and NetworkPolicies name it",
        "haListenPort": "fixed at 10912",
        "brokerIP1": "the pod IP (env BROKER_IP1)",
        "brokerIP2": "follows brokerIP1",
        "bindAddress": "a pod must listen on its own IP for probes and peers",
        "haMasterAddress": "a slave learns its master's HA address from the NameServer",
        "brokerPermission": "set at run time by the operator to drain a group before it is removed",
        "storePathRootDir": "the data volume (/data/store)",
        "storePathCommitLog": "under storePathRootDir on the data volume",
        "storePathConsumeQueue": "under storePathRootDir on the data volume",
        "storePathIndex": "under storePathRootDir on the data volume",
        "storePathEpochFile": "under storePathRootDir on the data volume",
        "storePathBrokerIdentity": "under storePathRootDir on the data volume",
        "authenticationEnabled": "spec.security.authentication.enabled",
        "authorizationEnabled": "spec.security.authorization.enabled",
        "initAuthenticationUser": "a secret: the operator's own user, from a Secret it makes, never in a ConfigMap",
        "innerClientAuthenticationCredentials": "a secret: the operator's own user, from a Secret it makes",
        "enableControllerMode": "spec.failover.enabled",
        "controllerAddr": "spec.failover.enabled: the NameServer pods' controller addresses",
        "allAckInSyncStateSet": "spec.failover.enabled: every in-sync replica holds an acknowledged message",
        "tls.server.mode": "spec.security.tls.enabled (enforcing when on)",
        "tls.server.certPath": "spec.security.tls: the certificate Secret, mounted",
        "tls.server.keyPath": "spec.security.tls: the certificate Secret, mounted",
        "tls.enable": "spec.security.tls.enabled: the brokers' own connections use TLS when it is on",
        "flushDiskType": "spec.broker.flushDiskType",
        "metricsExporterType": "spec.metrics.enabled",
        "metricsPromExporterPort": "spec.metrics.port",
        "metricsPromExporterHost": "every address of the pod, so Prometheus can reach it",
        "enableProxy": "spec.broker.grpc.enabled",
        "grpcServerPort": "spec.broker.grpc.port",
        "grpcRoutePortOffset": "spec.externalAccess.grpcNodePortBase (NodePort with spec.broker.grpc on)",
        "grpcRouteDomain": "spec.security.tls (with spec.broker.grpc on and no external access)",
    }
)

_INT_TEXT = re.compile(r"^[+-]?[0-9]+$")
# Java's Boolean.parseBoolean reads anything but "true" as false; refusing other words catches "ture".
_BOOL_WORDS = ("true", "false")


def check_value(kind: ValueKind, value: str) -> str | None:
    """Why `value` is not a valid broker.conf value of this kind, or None when it is."""
    if isinstance(kind, tuple):
        return None if value in kind else f"must be one of {', '.join(kind)}"
    if kind == _BOOL:
        return None if value.lower() in _BOOL_WORDS else "must be true or false"
    if kind == _INT:
        return None if _INT_TEXT.match(value) else "must be an integer"
    if kind == _FLOAT:
        try:
            number = float(value)
        except ValueError:
            return "must be a number"
        return None if math.isfinite(number) else "must be a finite number"
    return None


# The keys the broker applies at run time (UPDATE_BROKER_CONFIG sets them in place: broker.server.config_update's
# LIVE_KEYS), each with the broker's default as GET_BROKER_CONFIG prints it: a live key removed from
# spec.broker.config goes back to its default without a restart. tests/operator/test_broker_config_live.py
# proves both equal the broker's. Every other key is read at start only: changing it rolls the pods.
LIVE_DEFAULTS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "autoCreateSubscriptionGroup": "true",
        "autoCreateTopicEnable": "true",
        "brokerPermission": "6",
        "channelExpiredTimeout": "120000",
        "defaultTopicQueueNums": "8",
        "deleteWhen": "04",
        "diskMaxUsedSpaceRatio": "75",
        "diskSpaceCleanForciblyRatio": "0.85",
        "enablePropertyFilter": "false",
        "fileReservedTime": "72",
        "longPollingEnable": "true",
        "maxMessageSize": "4194304",
        "maxTransferBytesOnMessageInMemory": "262144",
        "notifyConsumerIdsChangedEnable": "true",
        "rejectTransactionMessage": "false",
        "shortPollingTimeMills": "1000",
        "storeReplyMessageEnable": "true",
        "timerMaxDelaySec": "259200",
        "timerWheelEnable": "true",
        "transactionCheckMax": "15",
        "transactionTimeOut": "6000",
    }
)
LIVE_KEYS: Final = frozenset(LIVE_DEFAULTS)


def same_value(kind: ValueKind, a: str, b: str) -> bool:
    """Whether two broker.conf values of this kind mean the same (the broker prints `true`, a spec may say
    `True`; `0.85` and `.85` are one ratio)."""
    a, b = a.strip(), b.strip()
    if a == b:
        return True
    try:
        if kind == _BOOL:
            return a.lower() == b.lower()
        if kind == _INT:
            return int(a) == int(b)
        if kind == _FLOAT:
            return float(a) == float(b)
    except ValueError:
        pass
    return a == b
