"""The request codes of the admin inspection and maintenance processors, for `BrokerController`.

One table keeps broker.py's route list short: the processors behind these codes (admin_progress,
admin_clients, admin_config, admin_store) are built here, each with the parts of the broker it reads
(the config processor gets `AdminRoutesContext`: UPDATE_BROKER_CONFIG changes parts of the broker).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.protocol.codes import RequestCode
from broker.server.processors.admin_clients import AdminClientsProcessor
from broker.server.processors.admin_config import AdminConfigProcessor
from broker.server.processors.admin_progress import AdminStatsProcessor
from broker.server.processors.admin_store import AdminStoreProcessor
from broker.transport.dispatcher import Handler

if TYPE_CHECKING:
    from broker.server.processors.context import AdminRoutesContext

__all__ = ["admin_routes"]


def admin_routes(broker: AdminRoutesContext) -> dict[int, Handler]:
    stats = AdminStatsProcessor(
        broker.config, broker.store, broker.topics, broker.groups, broker.offsets, broker.consumers, broker.get_stats
    )
    clients = AdminClientsProcessor(broker.consumers, broker.producers)
    config = AdminConfigProcessor(broker)
    store = AdminStoreProcessor(broker.topics, broker.store)
    rc = RequestCode
    return {
        rc.GET_TOPIC_STATS_INFO: stats.topic_stats,
        rc.GET_CONSUME_STATS: stats.consume_stats,
        rc.GET_BROKER_CONSUME_STATS: stats.broker_consume_stats,
        rc.QUERY_TOPIC_CONSUME_BY_WHO: stats.consume_by_who,
        rc.QUERY_CONSUME_TIME_SPAN: stats.consume_time_span,
        rc.CLONE_GROUP_OFFSET: stats.clone_group_offset,
        rc.VIEW_BROKER_STATS_DATA: stats.broker_stats_data,
        rc.GET_TOPIC_CONFIG: stats.topic_config,
        rc.GET_CONSUMER_CONNECTION_LIST: clients.consumer_connection,
        rc.GET_PRODUCER_CONNECTION_LIST: clients.producer_connection,
        rc.GET_CONSUMER_RUNNING_INFO: clients.consumer_running_info,
        rc.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: clients.consumer_status,
        rc.UPDATE_BROKER_CONFIG: config.update_broker_config,
        rc.DELETE_SUBSCRIPTIONGROUP: config.delete_subscription_group,
        rc.CLEAN_EXPIRED_CONSUMEQUEUE: store.clean_expired_consume_queue,
        rc.CLEAN_UNUSED_TOPIC: store.clean_unused_topic,
    }
