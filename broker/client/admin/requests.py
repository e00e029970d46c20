"""The admin requests the operator sends that ClientAPI has no method for, one function per request.

`Admin` (broker.client.admin) calls these with its ClientAPI: write permission on the NameServers
(WIPE_WRITE_PERM_OF_BROKER 205, ADD_WRITE_PERM_OF_BROKER 327), a broker's metadata (GET_ALL_TOPIC_CONFIG 21,
GET_ALL_SUBSCRIPTIONGROUP_CONFIG 201, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP 200, GET_BROKER_CONFIG 26) and its
consumer and delay offsets (GET_ALL_CONSUMER_OFFSET 43, GET_ALL_DELAY_OFFSET 45). Replies are parsed here
into plain typed values; bodies may be standard JSON or fastjson's dialect (a Java broker's), so they go
through fastjson_loads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import orjson

from broker.client.api import ClientAPI
from broker.client.errors import for_code
from broker.protocol.bodies import BodyError, TopicConfig
from broker.protocol.bodies import fastjson_loads as loads
from broker.protocol.codes import LanguageCode, RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand

__all__ = [
    "add_write_perm",
    "create_subscription_group",
    "get_all_consumer_offsets",
    "get_all_delay_offsets",
    "get_all_subscription_groups",
    "get_all_topic_configs",
    "get_broker_config",
    "parse_consumer_offsets",
    "parse_delay_offsets",
    "parse_properties_text",
    "parse_subscription_groups",
    "parse_topic_configs",
    "wipe_write_perm",
]

TOPIC_GROUP_SEPARATOR = "@"
T = TypeVar("T")


async def _call(
    api: ClientAPI, addr: str, code: int, ext: dict[str, str] | None = None, body: bytes = b""
) -> RemotingCommand:
    cmd = RemotingCommand(code=code, ext_fields=ext or {}, body=body, language=LanguageCode.PYTHON)
    resp = await api.invoke(addr, cmd)
    if resp.code != ResponseCode.SUCCESS:
        raise for_code(resp.code, resp.remark, addr)
    return resp


def _parsed(resp: RemotingCommand, addr: str, parse: Callable[[Mapping[str, Any]], T]) -> T:
    """The reply's JSON body through `parse`; a body that does not fit is the broker's SYSTEM_ERROR."""
    try:
        data = loads(resp.body) if resp.body else {}
        if not isinstance(data, Mapping):
            raise BodyError(f"expected an object, got {type(data).__name__}")
        return parse(data)
    except (BodyError, TypeError, ValueError, AttributeError) as exc:
        raise for_code(ResponseCode.SYSTEM_ERROR, f"unreadable reply body: {exc}", addr) from None


# ---------------------------------------------------------------------------------------- NameServer


async def wipe_write_perm(api: ClientAPI, namesrv_addr: str, broker_name: str) -> int:
    """WIPE_WRITE_PERM_OF_BROKER: the NameServer's routes stop offering `broker_name` for writes.

    Returns how many topics the NameServer changed. The change lives in that NameServer's memory only,
    until the broker registers a changed topic table or add_write_perm undoes it.
    """
    resp = await _call(api, namesrv_addr, RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": broker_name})
    return int(resp.ext_fields.get("wipeTopicCount") or 0)


async def add_write_perm(api: ClientAPI, namesrv_addr: str, broker_name: str) -> int:
    """ADD_WRITE_PERM_OF_BROKER: undo wipe_write_perm; returns how many topics the NameServer changed."""
    resp = await _call(api, namesrv_addr, RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": broker_name})
    return int(resp.ext_fields.get("addTopicCount") or 0)


# ---------------------------------------------------------------------------------------- broker metadata


def parse_topic_configs(data: Mapping[str, Any]) -> dict[str, TopicConfig]:
    """TopicConfigSerializeWrapper -> {topic: TopicConfig}."""
    table = data.get("topicConfigTable") or {}
    return {str(name): TopicConfig.from_json(raw, str(name)) for name, raw in table.items()}


def parse_subscription_groups(data: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """SubscriptionGroupWrapper -> {group: its config object as sent}. Kept whole: a copy must carry
    every field, including ones this SDK does not model."""
    table = data.get("subscriptionGroupTable") or {}
    return {str(name): dict(raw) for name, raw in table.items() if isinstance(raw, Mapping)}


def parse_consumer_offsets(data: Mapping[str, Any]) -> dict[tuple[str, str], dict[int, int]]:
    """ConsumerOffsetSerializeWrapper ({"offsetTable": {"topic@group": {queueId: offset}}}) ->
    {(topic, group): {queue id: offset}}. Keys without the separator are skipped, as the broker does."""
    out: dict[tuple[str, str], dict[int, int]] = {}
    for key, queues in (data.get("offsetTable") or {}).items():
        topic, sep, group = str(key).partition(TOPIC_GROUP_SEPARATOR)
        if not sep or not isinstance(queues, Mapping):
            continue
        out[(topic, group)] = {int(q): int(o) for q, o in queues.items()}
    return out


def parse_delay_offsets(data: Mapping[str, Any]) -> dict[int, int]:
    """The schedule service's progress ({"offsetTable": {delayLevel: offset}}) -> {delay level: offset}."""
    return {int(level): int(offset) for level, offset in (data.get("offsetTable") or {}).items()}


def parse_properties_text(text: str) -> dict[str, str]:
    """GET_BROKER_CONFIG's body: `key=value` lines."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.lstrip().startswith("#"):
            out[key.strip()] = value.strip()
    return out


async def get_all_topic_configs(api: ClientAPI, addr: str) -> dict[str, TopicConfig]:
    resp = await _call(api, addr, RequestCode.GET_ALL_TOPIC_CONFIG)
    return _parsed(resp, addr, parse_topic_configs)


async def get_all_subscription_groups(api: ClientAPI, addr: str) -> dict[str, dict[str, Any]]:
    resp = await _call(api, addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    return _parsed(resp, addr, parse_subscription_groups)


async def create_subscription_group(api: ClientAPI, addr: str, config: Mapping[str, Any]) -> None:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP with a SubscriptionGroupConfig object (groupName required)."""
    await _call(api, addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=orjson.dumps(dict(config)))


async def get_all_consumer_offsets(api: ClientAPI, addr: str) -> dict[tuple[str, str], dict[int, int]]:
    resp = await _call(api, addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
    return _parsed(resp, addr, parse_consumer_offsets)


async def get_all_delay_offsets(api: ClientAPI, addr: str) -> dict[int, int]:
    resp = await _call(api, addr, RequestCode.GET_ALL_DELAY_OFFSET)
    return _parsed(resp, addr, parse_delay_offsets)


async def get_broker_config(api: ClientAPI, addr: str) -> dict[str, str]:
    resp = await _call(api, addr, RequestCode.GET_BROKER_CONFIG)
    return parse_properties_text(resp.body.decode("utf-8", "replace"))
