"""Message lookups and sends: queryMsgById, queryMsgByKey, queryMsgByUniqueKey, queryMsgByOffset, sendMessage."""

from __future__ import annotations

import argparse

from broker.cli.mqadmin.lookup import master_of, queue_of, require_topic
from broker.cli.mqadmin.output import print_message
from broker.cli.mqadmin.registry import UnknownName, UsageError, arg, command, producer_config
from broker.client import Message, Producer
from broker.client.admin import Admin
from broker.client.queue_reader import queue_addr, read_range

# RocketMQ's MixAll.TOOLS_CONSUMER_GROUP: the group admin tools pull as (the broker creates it at start)
TOOLS_CONSUMER = "TOOLS_CONSUMER"


@command(
    "queryMsgById",
    "Print a message by its offset message id (storeHost + commit-log offset)",
    arg("-i", dest="msgId", required=True, help="offset message id(s), comma-separated"),
)
async def run_queryMsgById(args: argparse.Namespace, admin: Admin) -> int:
    for msg_id in args.msgId.split(","):
        print_message(await admin.view_message(msg_id.strip()))
    return 0


@command(
    "queryMsgByKey",
    "Find messages by key (the KEYS property), through the IndexFile",
    arg("-t", dest="topic", required=True, help="topic name"),
    arg("-k", dest="key", required=True, help="message key"),
    arg("-c", dest="maxNum", type=int, default=64, help="at most this many (64)"),
)
async def run_queryMsgByKey(args: argparse.Namespace, admin: Admin) -> int:
    await require_topic(admin, args.topic)
    found = await admin.query_message_by_key(args.topic, args.key, max_num=args.maxNum)
    if not found:
        raise UnknownName(f"no message of topic {args.topic} has the key {args.key}")
    print(f"{'#Message ID':<34}{'#QID':>5}{'#Offset':>10}")
    for msg in found:
        print(f"{msg.offset_msg_id:<34}{msg.queue_id:>5}{msg.queue_offset:>10}")
    return 0


@command(
    "queryMsgByUniqueKey",
    "Print a message by its client message id (UNIQ_KEY)",
    arg("-t", dest="topic", required=True, help="topic name"),
    arg("-i", dest="msgId", required=True, help="the client message id"),
    arg("-a", dest="showAll", action="store_true", help="print every message with this id (at most 32), not the first"),
)
async def run_queryMsgByUniqueKey(args: argparse.Namespace, admin: Admin) -> int:
    await require_topic(admin, args.topic)
    found = await admin.query_message_by_uniq_key(args.topic, args.msgId)
    if not found:
        raise UnknownName(
            f"no message of topic {args.topic} has the unique key (client message id) {args.msgId}"
            " (an offset message id goes to queryMsgById)"
        )
    for msg in found[:32] if args.showAll else found[:1]:
        print_message(msg)
    return 0


@command(
    "queryMsgByOffset",
    "Print the message at one queue offset",
    arg("-t", dest="topic", required=True, help="topic name"),
    arg("-b", dest="brokerName", required=True, help="broker name (not an address; see clusterList)"),
    arg("-i", dest="queueId", type=int, required=True, help="queue id"),
    arg("-o", dest="offset", type=int, required=True, help="queue offset"),
)
async def run_queryMsgByOffset(args: argparse.Namespace, admin: Admin) -> int:
    route = await require_topic(admin, args.topic)
    master_of(await admin.cluster_info(), args.brokerName)
    mq = queue_of(route, args.topic, args.brokerName, args.queueId)
    addr = await queue_addr(admin.instance, mq)
    lo = await admin.instance.api.get_min_offset(addr, mq)
    hi = await admin.instance.api.get_max_offset(addr, mq)
    if not lo <= args.offset < hi:
        raise UnknownName(f"queue {mq} has no message at offset {args.offset} (it holds offsets {lo} to {hi - 1})")
    async for batch in read_range(admin.instance, TOOLS_CONSUMER, mq, args.offset, args.offset + 1):
        print_message(batch[0])
        return 0
    raise UnknownName(f"queue {mq} returned no message at offset {args.offset}")


@command(
    "sendMessage",
    "Send one message",
    arg("-t", dest="topic", required=True, help="topic name"),
    arg("-p", dest="body", required=True, help="message body"),
    arg("-c", dest="tags", help="message tag"),
    arg("-k", dest="keys", help="message keys, space-separated"),
    arg("-b", dest="brokerName", help="send to this broker (name)"),
    arg("-i", dest="queueId", type=int, help="send to this queue (needs -b)"),
    arg("-g", dest="producerGroup", default="MQADMIN_PRODUCER", help="producer group (ours; MQADMIN_PRODUCER)"),
)
async def run_sendMessage(args: argparse.Namespace, admin: Admin) -> int:
    queue = None
    if args.queueId is not None:
        if not args.brokerName:
            raise UsageError("-i queueId needs -b brokerName")
        route = await require_topic(admin, args.topic)
        queue = queue_of(route, args.topic, args.brokerName, args.queueId)
    msg = Message(args.topic, args.body, tags=args.tags, keys=args.keys.split() if args.keys else None)
    async with Producer(args.producerGroup, client_config=producer_config(admin)) as producer:
        if queue is None and args.brokerName:
            queues = [q for q in await producer.fetch_publish_queues(args.topic) if q.broker_name == args.brokerName]
            if not queues:
                raise UnknownName(f"topic {args.topic} has no writable queue on broker {args.brokerName}")
            queue = queues[0]
        result = await producer.send(msg, queue=queue)
    print(f"{'#Broker Name':<24}{'#QID':>5}{'#Send Result':>14}  #MsgId")
    print(
        f"{result.message_queue.broker_name:<24}{result.message_queue.queue_id:>5}"
        f"{result.status.name:>14}  {result.msg_id}"
    )
    print(f"OffsetMsgId: {result.offset_msg_id}  QueueOffset: {result.queue_offset}")
    return 0
