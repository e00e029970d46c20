"""Admin requests that clean the store: CLEAN_EXPIRED_CONSUMEQUEUE (306) and CLEAN_UNUSED_TOPIC (316).

mqadmin cleanExpiredCQ and cleanUnusedTopic send these, with RocketMQ's meaning
(AdminBrokerProcessor -> DefaultMessageStore):
- 306 destroys the ConsumeQueues whose newest message has left the CommitLog (retention deleted the file
  it was in), and their queue offsets, so the queue restarts at offset 0; a topic left without queues
  loses its directory. Empty queues and system topics stay.
- 316 deletes the ConsumeQueues of topics the broker has no topic config for (left behind when a topic
  config was removed by hand, or by a broker whose topics.json was replaced); system and LMQ topics stay.
Neither touches topic configs, subscription groups or consumer offsets. Both answer SUCCESS, as RocketMQ
does; the remark says what was removed. Registered by `BrokerController` through admin_routes.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker.protocol.codes import ResponseCode
from broker.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from broker.server.topics import TopicConfigManager
    from broker.store import MessageStore
    from broker.transport.connection import RemotingConnection

__all__ = ["AdminStoreProcessor"]

log = logging.getLogger(__name__)

# TopicValidator.SYSTEM_TOPIC_PREFIX and MixAll.LMQ_PREFIX: never cleaned, whatever the topic table says
_KEPT_PREFIXES = ("rmq_sys_", "RMQ_SYS_", "%LMQ%")


class AdminStoreProcessor:
    def __init__(self, topics: TopicConfigManager, store: MessageStore) -> None:
        self.topics = topics
        self.store = store

    def _system(self, topic: str) -> bool:
        return topic in self.topics.system_topics or topic.startswith(_KEPT_PREFIXES)

    def clean_expired_consume_queue(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        removed = self.store.remove_expired_queues(self._system)
        log.info("cleanExpiredConsumeQueue from %s: removed %s", conn.peer, removed or "nothing")
        remark = ", ".join(f"{t}:{q}" for t, q in removed)
        return cmd.response(ResponseCode.SUCCESS, f"removed consume queues: {remark}" if removed else None)

    def clean_unused_topic(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        topics = self.topics
        removed = self.store.remove_unused_topics(lambda t: t in topics.table or self._system(t))
        log.warning("cleanUnusedTopic from %s: removed %s", conn.peer, removed or "nothing")
        return cmd.response(ResponseCode.SUCCESS, f"removed topics: {', '.join(removed)}" if removed else None)
