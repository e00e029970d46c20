"""Read a range of one queue, as an admin tool does: plain PULL_MESSAGE requests, no heartbeat, no commit.

mqadmin's consumeMessage, printMsg, printMsgByQueue and queryMsgByOffset call `read_range` with the
admin's ClientInstance; it asks the queue's master (or any replica when the master is gone) for
[begin, end) in batches, filters by tag on the client as the SDK's consumers do, and stops at the end
of the range or of the queue.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from broker.client.errors import ClientError
from broker.client.instance import ClientInstance
from broker.client.message import MessageExt, MessageQueue, PullStatus
from broker.client.pull_request import pull_request
from broker.client.subscription import parse_subscription

__all__ = ["queue_addr", "read_range"]

BATCH = 32


async def queue_addr(instance: ClientInstance, mq: MessageQueue) -> str:
    """The broker serving `mq`: its master, else any replica the route lists."""
    route = await instance.fetch_route(mq.topic)
    addr = route.master_addr(mq.broker_name) or route.broker_addr(mq.broker_name)
    if addr is None:
        for bd in route.broker_datas:
            if bd.broker_name == mq.broker_name and bd.broker_addrs:
                addr = bd.broker_addrs[min(bd.broker_addrs)]
    if addr is None:
        raise ClientError(f"broker {mq.broker_name} serves no queue of topic {mq.topic}")
    return addr


async def read_range(
    instance: ClientInstance,
    group: str,
    mq: MessageQueue,
    begin: int,
    end: int,
    expression: str = "*",
    *,
    timeout: float = 10.0,
) -> AsyncIterator[list[MessageExt]]:
    """Batches of the messages of `mq` with queue offsets in [begin, end) that match the tag `expression`."""
    sub = parse_subscription(mq.topic, expression)
    addr = await queue_addr(instance, mq)
    offset = begin
    while offset < end:
        request = pull_request(group, mq, offset, min(BATCH, end - offset), sub)
        result = await instance.api.pull(addr, request, timeout)
        if result.status is PullStatus.FOUND:
            found = [m for m in result.messages if m.queue_offset < end and sub.matches_message(m)]
            if found:
                yield found
        elif result.status is not PullStatus.NO_MATCHED_MSG:
            return  # NO_NEW_MSG: the end of the queue; OFFSET_ILLEGAL: nothing more to read there
        if result.next_begin_offset <= offset:
            return
        offset = result.next_begin_offset
