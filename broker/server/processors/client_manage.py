"""Client management: HEART_BEAT (34), UNREGISTER_CLIENT (35), GET_CONSUMER_LIST_BY_GROUP (38),
LOCK_BATCH_MQ (41), UNLOCK_BATCH_MQ (42) and CHECK_CLIENT_CONFIG (46).

Registered by `BrokerController`. A consumer heartbeat finds (or auto-creates) the subscription group,
creates `%RETRY%<group>` (which makes the broker re-register so the retry topic has a route), and
records the channel and subscriptions in the ConsumerManager, which notifies the group on change.
SQL92 subscriptions are compiled first: an invalid one fails the heartbeat with
SUBSCRIPTION_PARSE_FAILED (and CHECK_CLIENT_CONFIG answers the same), nothing recorded.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import orjson

from broker.protocol.bodies import (
    ConsumerIdList,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    UnlockBatchRequestBody,
)
from broker.protocol.codes import ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.headers import GetConsumerListByGroupRequestHeader, UnregisterClientRequestHeader
from broker.server.clients import ClientChannelInfo, SubscriptionData, parse_sub_string
from broker.server.errors import RequestError
from broker.server.property_filter import compile_subscription
from broker.server.topics import PERM_READ, PERM_WRITE, RETRY_GROUP_TOPIC_PREFIX

if TYPE_CHECKING:
    from broker.server.clients import ConsumerManager, ProducerManager
    from broker.server.config import BrokerConfig
    from broker.server.groups import SubscriptionGroupManager
    from broker.server.locks import RebalanceLockManager
    from broker.server.topics import TopicConfigManager
    from broker.transport.connection import RemotingConnection

__all__ = ["ClientManageProcessor"]

log = logging.getLogger(__name__)


class ClientManageProcessor:
    """Its parts, not the whole broker: the live config (enablePropertyFilter is read per request), the
    topic and group tables, the client tables and the rebalance locks."""

    def __init__(
        self,
        config: BrokerConfig,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        consumers: ConsumerManager,
        producers: ProducerManager,
        locks: RebalanceLockManager,
    ) -> None:
        self.config = config
        self.topics = topics
        self.groups = groups
        self.consumers = consumers
        self.producers = producers
        self.locks = locks

    def heart_beat(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            data = HeartbeatData.from_json(cmd.body)
        except Exception as exc:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"malformed heartbeat body: {exc}") from None
        # Refuse a bad SQL92 subscription before recording anything (the consumer subscribed with it).
        for consumer in data.consumers:
            for s in consumer.subscriptions:
                compile_subscription(s.expression_type, s.sub_string, self.config.enable_property_filter)
        for consumer in data.consumers:
            group_cfg = self.groups.find(consumer.group_name)
            if group_cfg is None:
                raise RequestError(
                    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                    f"subscription group [{consumer.group_name}] does not exist",
                )
            perm = PERM_READ | PERM_WRITE
            self.topics.create_in_send_back(
                RETRY_GROUP_TOPIC_PREFIX + consumer.group_name, group_cfg.retry_queue_nums, perm
            )
            subs = []
            for s in consumer.subscriptions:
                tags, codes = parse_sub_string(s.sub_string)
                subs.append(
                    SubscriptionData(
                        topic=s.topic,
                        sub_string=s.sub_string or "*",
                        tags_set=tags,
                        code_set=codes,
                        sub_version=s.sub_version,
                        expression_type=s.expression_type or "TAG",
                    )
                )
            self.consumers.register(
                consumer.group_name,
                ClientChannelInfo(conn, data.client_id, cmd.language, cmd.version),
                consume_type=consumer.consume_type.name,
                message_model=consumer.message_model.name,
                consume_from_where=consumer.consume_from_where.name,
                subscriptions=subs,
            )
        for producer in data.producers:
            self.producers.register(
                producer.group_name, ClientChannelInfo(conn, data.client_id, cmd.language, cmd.version)
            )
        return cmd.response(ResponseCode.SUCCESS, None, {"IS_SUPPORT_HEART_BEAT_V2": "false", "IS_SUB_CHANGE": "false"})

    def check_client_config(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        """CHECK_CLIENT_CONFIG (46): Java and our client ask it at start for every SQL92 subscription."""
        try:
            body = orjson.loads(cmd.body) if cmd.body else {}
            sub = body.get("subscriptionData") or {}
            expression_type, expression = sub.get("expressionType"), sub.get("subString")
        except (orjson.JSONDecodeError, AttributeError) as exc:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"malformed CheckClientRequestBody: {exc}") from None
        compile_subscription(expression_type, expression, self.config.enable_property_filter)
        return cmd.response(ResponseCode.SUCCESS)

    def unregister_client(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        h = UnregisterClientRequestHeader.from_ext_fields(cmd.ext_fields)
        if h.producer_group:
            self.producers.unregister(h.producer_group, conn)
        if h.consumer_group:
            self.consumers.unregister(h.consumer_group, conn)
        return cmd.response(ResponseCode.SUCCESS)

    def consumer_list(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetConsumerListByGroupRequestHeader.from_ext_fields(cmd.ext_fields)
        group = self.consumers.get(h.consumer_group)
        ids = group.client_ids() if group is not None else []
        if not ids:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {h.consumer_group}")
        return cmd.response(ResponseCode.SUCCESS, None, body=ConsumerIdList(tuple(ids)).to_json())

    def lock_batch(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        body = LockBatchRequestBody.from_json(cmd.body)
        granted = self.locks.try_lock_batch(body.consumer_group, list(body.mq_set), body.client_id)
        return cmd.response(ResponseCode.SUCCESS, None, body=LockBatchResponseBody(frozenset(granted)).to_json())

    def unlock_batch(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        body = UnlockBatchRequestBody.from_json(cmd.body)
        self.locks.unlock_batch(body.consumer_group, list(body.mq_set), body.client_id)
        return cmd.response(ResponseCode.SUCCESS)
