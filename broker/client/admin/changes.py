"""Admin requests that change a broker or NameServer, one function per request (RocketMQ's wire shapes).

mqadmin's updateBrokerConfig, updateNamesrvConfig, getNamesrvConfig, updateKvConfig, deleteKvConfig,
updateOrderConf, deleteSubGroup, deleteTopic, cleanExpiredCQ and cleanUnusedTopic call these with a
ClientAPI and one address. Config bodies are Java Properties text (`key=value` lines), as RocketMQ sends them.
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.client.admin.requests import _call, parse_properties_text
from broker.client.api import ClientAPI
from broker.client.errors import QueryNotFound
from broker.protocol.codes import RequestCode

__all__ = [
    "NAMESPACE_ORDER_TOPIC_CONFIG",
    "clean_expired_consume_queue",
    "clean_unused_topic",
    "delete_kv_config",
    "delete_subscription_group",
    "delete_topic_in_broker",
    "delete_topic_in_namesrv",
    "get_kv_config",
    "get_namesrv_config",
    "properties_text",
    "put_kv_config",
    "update_broker_config",
    "update_namesrv_config",
]

# The NameServer KV namespace RocketMQ keeps ordered topics' "brokerName:queueNum;..." under (NamesrvUtil)
NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


def properties_text(props: Mapping[str, str]) -> bytes:
    """Java's Properties as RocketMQ's MixAll.properties2String writes them: one `key=value` per line."""
    return "".join(f"{k}={v}\n" for k, v in props.items()).encode()


async def update_broker_config(api: ClientAPI, addr: str, props: Mapping[str, str]) -> None:
    """UPDATE_BROKER_CONFIG (25): the broker applies and persists the keys, or names the one it refuses."""
    await _call(api, addr, RequestCode.UPDATE_BROKER_CONFIG, body=properties_text(props))


async def get_namesrv_config(api: ClientAPI, addr: str) -> dict[str, str]:
    resp = await _call(api, addr, RequestCode.GET_NAMESRV_CONFIG)
    return parse_properties_text(resp.body.decode("utf-8", "replace"))


async def update_namesrv_config(api: ClientAPI, addr: str, props: Mapping[str, str]) -> None:
    """UPDATE_NAMESRV_CONFIG (318) to one NameServer."""
    await _call(api, addr, RequestCode.UPDATE_NAMESRV_CONFIG, body=properties_text(props))


async def put_kv_config(api: ClientAPI, addr: str, namespace: str, key: str, value: str) -> None:
    await _call(api, addr, RequestCode.PUT_KV_CONFIG, {"namespace": namespace, "key": key, "value": value})


async def get_kv_config(api: ClientAPI, addr: str, namespace: str, key: str) -> str | None:
    """The value, or None when the NameServer has no such key (it answers QUERY_NOT_FOUND)."""
    try:
        resp = await _call(api, addr, RequestCode.GET_KV_CONFIG, {"namespace": namespace, "key": key})
    except QueryNotFound:
        return None
    return resp.ext_fields.get("value")


async def delete_kv_config(api: ClientAPI, addr: str, namespace: str, key: str) -> None:
    await _call(api, addr, RequestCode.DELETE_KV_CONFIG, {"namespace": namespace, "key": key})


async def delete_subscription_group(api: ClientAPI, addr: str, group: str, clean_offset: bool = False) -> None:
    """DELETE_SUBSCRIPTIONGROUP (207); `clean_offset` also drops the group's committed offsets there."""
    ext = {"groupName": group, "cleanOffset": "true" if clean_offset else "false"}
    await _call(api, addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, ext)


async def delete_topic_in_broker(api: ClientAPI, addr: str, topic: str) -> None:
    await _call(api, addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})


async def delete_topic_in_namesrv(api: ClientAPI, addr: str, topic: str, cluster: str | None = None) -> None:
    ext = {"topic": topic}
    if cluster:
        ext["clusterName"] = cluster
    await _call(api, addr, RequestCode.DELETE_TOPIC_IN_NAMESRV, ext)


async def clean_expired_consume_queue(api: ClientAPI, addr: str) -> None:
    """CLEAN_EXPIRED_CONSUMEQUEUE (306): the broker drops the consume queues whose messages have all left its
    CommitLog (and their queue offsets); system topics and empty queues stay."""
    await _call(api, addr, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)


async def clean_unused_topic(api: ClientAPI, addr: str) -> None:
    """CLEAN_UNUSED_TOPIC (316): the broker drops consume queues of topics it no longer has."""
    await _call(api, addr, RequestCode.CLEAN_UNUSED_TOPIC)
