"""What a request asks for: the (resource, actions) pairs ACL 2.0 checks, per request code.

`AuthChecker` (broker/auth/checker.py) calls `derive()` for every request whose user is not SUPER. The cases
follow RocketMQ 5.3's `DefaultAuthorizationContextBuilder.build`: explicit code for sends, pulls, queries,
heartbeats, offsets, locks and END_TRANSACTION; the rest from the `@RocketMQAction`/`@RocketMQResource`
annotations of the request's header class, copied into `_ANNOTATED` below for the codes we serve (a
`Cluster:<name>` resource for a header annotated with the cluster type and no resource field). A code in
neither table needs authentication only, as in RocketMQ (a code without a registered header class).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from broker.auth.model import RETRY_PREFIX, Action, AuthError, Resource, ResourcePattern, ResourceType
from broker.protocol.codes import RequestCode
from broker.protocol.command import RemotingCommand

__all__ = ["Need", "derive"]

Need = tuple[Resource, tuple[Action, ...]]

_PUB = (Action.PUB,)
_SUB = (Action.SUB,)
_GET = (Action.GET,)
_UPDATE = (Action.UPDATE,)
_SUB_GET = (Action.SUB, Action.GET)
_SUB_UPDATE = (Action.SUB, Action.UPDATE)
_PUB_SUB_GET = (Action.PUB, Action.SUB, Action.GET)
_T, _G, _C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER

rc = RequestCode
# code -> (the header's resource type, its actions, its annotated fields as (extField, type, splitter))
_ANNOTATED: dict[int, tuple[ResourceType | None, tuple[Action, ...], tuple[tuple[str, ResourceType, str], ...]]] = {
    rc.CHECK_TRANSACTION_STATE: (None, _PUB, (("topic", _T, ""),)),
    rc.CLONE_GROUP_OFFSET: (None, _UPDATE, (("destGroup", _G, ""), ("topic", _T, ""))),
    rc.CONSUME_MESSAGE_DIRECTLY: (None, _SUB, (("consumerGroup", _G, ""), ("topic", _T, ""))),
    rc.UPDATE_AND_CREATE_TOPIC: (None, (Action.CREATE,), (("topic", _T, ""),)),
    rc.UPDATE_AND_CREATE_TOPIC_LIST: (None, (Action.CREATE,), ()),
    rc.DELETE_SUBSCRIPTIONGROUP: (None, (Action.DELETE,), (("groupName", _G, ""),)),
    rc.DELETE_TOPIC_IN_BROKER: (None, (Action.DELETE,), (("topic", _T, ""),)),
    rc.GET_ALL_PRODUCER_INFO: (_C, _GET, ()),
    rc.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: (_G, _GET, ()),
    rc.GET_ALL_TOPIC_CONFIG: (_T, _GET, ()),
    rc.GET_BROKER_CONSUME_STATS: (_C, _GET, ()),
    rc.GET_CONSUME_STATS: (None, _GET, (("consumerGroup", _G, ""), ("topic", _T, ""), ("topicList", _T, ";"))),
    rc.GET_CONSUMER_CONNECTION_LIST: (None, _GET, (("consumerGroup", _G, ""),)),
    rc.GET_CONSUMER_RUNNING_INFO: (None, _GET, (("consumerGroup", _G, ""),)),
    rc.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: (None, _GET, (("topic", _T, ""), ("group", _G, ""))),
    rc.GET_EARLIEST_MSG_STORETIME: (None, _GET, (("topic", _T, ""),)),
    rc.GET_MAX_OFFSET: (None, _GET, (("topic", _T, ""),)),
    rc.GET_MIN_OFFSET: (None, _GET, (("topic", _T, ""),)),
    rc.GET_PRODUCER_CONNECTION_LIST: (_C, _GET, ()),
    rc.GET_SUBSCRIPTIONGROUP_CONFIG: (None, _GET, (("group", _G, ""),)),
    rc.GET_TOPIC_CONFIG: (None, _GET, (("topic", _T, ""),)),
    rc.GET_TOPIC_STATS_INFO: (None, _GET, (("topic", _T, ""),)),
    rc.GET_TOPICS_BY_CLUSTER: (_T, (Action.LIST,), ()),
    rc.INVOKE_BROKER_TO_RESET_OFFSET: (None, _UPDATE, (("group", _G, ""), ("topic", _T, ""))),
    rc.QUERY_CONSUME_QUEUE: (None, _GET, (("topic", _T, ""), ("consumerGroup", _G, ""))),
    rc.QUERY_CONSUME_TIME_SPAN: (None, _GET, (("topic", _T, ""), ("group", _G, ""))),
    rc.QUERY_CORRECTION_OFFSET: (None, _GET, (("filterGroups", _G, ","), ("compareGroup", _G, ""), ("topic", _T, ""))),
    rc.QUERY_TOPIC_CONSUME_BY_WHO: (None, _GET, (("topic", _T, ""),)),
    rc.RESUME_CHECK_HALF_MESSAGE: (None, _UPDATE, (("topic", _T, ""),)),
    rc.SEARCH_OFFSET_BY_TIMESTAMP: (None, _GET, (("topic", _T, ""),)),
    rc.VIEW_BROKER_STATS_DATA: (_C, _GET, ()),
    rc.VIEW_MESSAGE_BY_ID: (None, _GET, (("topic", _T, ""),)),
    rc.PUSH_REPLY_MESSAGE_TO_CLIENT: (None, _SUB, (("producerGroup", _G, ""), ("topic", _T, ""))),
    # the NameServer's (our NameServer checks authentication only; listed for completeness)
    rc.REGISTER_BROKER: (_C, _UPDATE, (("clusterName", _C, ""),)),
    rc.UNREGISTER_BROKER: (_C, _UPDATE, (("clusterName", _C, ""),)),
    rc.WIPE_WRITE_PERM_OF_BROKER: (_C, _UPDATE, ()),
    rc.ADD_WRITE_PERM_OF_BROKER: (_C, _UPDATE, ()),
    rc.PUT_KV_CONFIG: (_C, _UPDATE, ()),
    rc.DELETE_KV_CONFIG: (_C, _UPDATE, ()),
    rc.GET_KV_CONFIG: (_C, _GET, ()),
    rc.GET_KVLIST_BY_NAMESPACE: (_C, _GET, ()),
    rc.DELETE_TOPIC_IN_NAMESRV: (_C, _UPDATE, (("clusterName", _C, ""),)),
    rc.REGISTER_TOPIC_IN_NAMESRV: (_C, _UPDATE, ()),
    rc.QUERY_DATA_VERSION: (_C, _GET, (("clusterName", _C, ""),)),
    rc.BROKER_HEARTBEAT: (_C, _UPDATE, (("clusterName", _C, ""),)),
    # Beyond RocketMQ (which checks only the signature): changing or reading the broker's config needs
    # Cluster:<name> Update / Get, so a NORMAL user cannot turn authentication off over the wire
    rc.UPDATE_BROKER_CONFIG: (_C, _UPDATE, ()),
    rc.GET_BROKER_CONFIG: (_C, _GET, ()),
    # ACL 2.0 administration
    rc.AUTH_CREATE_USER: (_C, _UPDATE, ()),
    rc.AUTH_UPDATE_USER: (_C, _UPDATE, ()),
    rc.AUTH_DELETE_USER: (_C, _UPDATE, ()),
    rc.AUTH_GET_USER: (_C, _GET, ()),
    rc.AUTH_LIST_USER: (_C, _GET, ()),
    rc.AUTH_CREATE_ACL: (_C, _UPDATE, ()),
    rc.AUTH_UPDATE_ACL: (_C, _UPDATE, ()),
    rc.AUTH_DELETE_ACL: (_C, _UPDATE, ()),
    rc.AUTH_GET_ACL: (_C, _GET, ()),
    rc.AUTH_LIST_ACL: (_C, _GET, ()),
}


def _is_retry(topic: str | None) -> bool:
    return bool(topic) and topic.startswith(RETRY_PREFIX)  # type: ignore[union-attr]


def _json(body: bytes) -> Any:
    try:
        return orjson.loads(body) if body else {}
    except orjson.JSONDecodeError:
        from broker.protocol.fastjson import loads

        return loads(body)


def _send(topic_key: str, group_key: str) -> Callable[[RemotingCommand], list[Need]]:
    def derive_send(cmd: RemotingCommand) -> list[Need]:
        fields = cmd.ext_fields
        topic = fields.get(topic_key) or ""
        if _is_retry(topic):
            return [(Resource.group(fields.get(group_key) or topic), _SUB)]
        return [(Resource.topic(topic), _PUB)]

    return derive_send


def _route(cmd: RemotingCommand) -> list[Need]:
    topic = cmd.ext_fields.get("topic") or ""
    if _is_retry(topic):
        return [(Resource.group(topic), _SUB_GET)]
    return [(Resource.topic(topic), _PUB_SUB_GET)]


def _pull(cmd: RemotingCommand) -> list[Need]:
    fields = cmd.ext_fields
    needs: list[Need] = []
    topic = fields.get("topic") or ""
    if not _is_retry(topic):
        needs.append((Resource.topic(topic), _SUB))
    needs.append((Resource.group(fields.get("consumerGroup") or ""), _SUB))
    return needs


def _offset(actions: tuple[Action, ...]) -> Callable[[RemotingCommand], list[Need]]:
    def derive_offset(cmd: RemotingCommand) -> list[Need]:
        fields = cmd.ext_fields
        needs: list[Need] = []
        topic = fields.get("topic") or ""
        if not _is_retry(topic):
            needs.append((Resource.topic(topic), actions))
        needs.append((Resource.group(fields.get("consumerGroup") or ""), actions))
        return needs

    return derive_offset


def _heartbeat(cmd: RemotingCommand) -> list[Need]:
    data = _json(cmd.body)
    needs: list[Need] = []
    for consumer in data.get("consumerDataSet") or ():
        needs.append((Resource.group(str(consumer.get("groupName") or "")), _SUB))
        for sub in consumer.get("subscriptionDataSet") or ():
            topic = str(sub.get("topic") or "")
            if not _is_retry(topic):
                needs.append((Resource.topic(topic), _SUB))
    return needs


def _locks(cmd: RemotingCommand) -> list[Need]:
    data = _json(cmd.body)
    needs: list[Need] = [(Resource.group(str(data.get("consumerGroup") or "")), _SUB)]
    for mq in data.get("mqSet") or ():
        topic = str(mq.get("topic") or "")
        if not _is_retry(topic):
            needs.append((Resource.topic(topic), _SUB))
    return needs


def _end_transaction(cmd: RemotingCommand) -> list[Need]:
    topic = cmd.ext_fields.get("topic")
    return [(Resource.topic(topic), _PUB)] if topic else []


def _unregister(cmd: RemotingCommand) -> list[Need]:
    group = cmd.ext_fields.get("consumerGroup")
    return [(Resource.group(group), _SUB)] if group else []


_EXPLICIT: dict[int, Callable[[RemotingCommand], list[Need]]] = {
    rc.GET_ROUTEINFO_BY_TOPIC: _route,
    rc.SEND_MESSAGE: _send("topic", "producerGroup"),
    rc.SEND_MESSAGE_V2: _send("b", "a"),
    rc.SEND_BATCH_MESSAGE: _send("b", "a"),
    rc.SEND_REPLY_MESSAGE: _send("topic", "producerGroup"),
    rc.SEND_REPLY_MESSAGE_V2: _send("b", "a"),
    rc.END_TRANSACTION: _end_transaction,
    rc.CONSUMER_SEND_MSG_BACK: lambda cmd: [(Resource.group(cmd.ext_fields.get("group") or ""), _SUB)],
    rc.PULL_MESSAGE: _pull,
    rc.LITE_PULL_MESSAGE: _pull,
    rc.QUERY_MESSAGE: lambda cmd: [(Resource.topic(cmd.ext_fields.get("topic") or ""), _SUB_GET)],
    rc.HEART_BEAT: _heartbeat,
    rc.UNREGISTER_CLIENT: _unregister,
    rc.GET_CONSUMER_LIST_BY_GROUP: lambda cmd: [(Resource.group(cmd.ext_fields.get("consumerGroup") or ""), _SUB_GET)],
    rc.QUERY_CONSUMER_OFFSET: _offset(_SUB_GET),
    rc.UPDATE_CONSUMER_OFFSET: _offset(_SUB_UPDATE),
    rc.LOCK_BATCH_MQ: _locks,
    rc.UNLOCK_BATCH_MQ: _locks,
}


def _annotated(cmd: RemotingCommand, cluster: str) -> list[Need]:
    spec = _ANNOTATED.get(cmd.code)
    if spec is None:
        return []
    rtype, actions, fields = spec
    needs: list[Need] = []
    for name, ftype, splitter in fields:
        value = cmd.ext_fields.get(name)
        if value is None:
            continue
        for part in value.split(splitter) if splitter else (value,):
            if splitter and not part:
                continue
            if ftype is _T and _is_retry(part):
                needs.append((Resource.group(part), actions))
            else:
                needs.append((Resource(ftype, part, ResourcePattern.LITERAL), actions))
    if not needs and rtype is _C:
        needs.append((Resource.cluster(cluster), actions))
    return needs


def derive(cmd: RemotingCommand, cluster: str) -> list[Need]:
    """The (resource, actions) pairs `cmd` needs; `cluster`: the broker's cluster (Cluster:<name> resources).
    Raises AuthError for a body that cannot be read (RocketMQ: "parse authorization context error.")."""
    explicit = _EXPLICIT.get(cmd.code)
    try:
        if explicit is not None:
            return explicit(cmd)
        return _annotated(cmd, cluster)
    except (ValueError, TypeError, AttributeError) as exc:
        raise AuthError("parse authorization context error.") from exc
