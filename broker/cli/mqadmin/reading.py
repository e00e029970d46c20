"""Commands that read queues from an offset or a time on: consumeMessage, printMsg, printMsgByQueue.

They pull as an admin tool (broker.client.queue_reader): nothing is committed, no consumer joins a group.
Times are store times: -s/-b "begin" is the first message stored at or after it, -e "end" the first
message stored at or after it, which is not read (a half-open range, the same on every queue).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import Counter

from broker.cli.mqadmin.lookup import master_of, queue_of, require_topic
from broker.cli.mqadmin.output import body_text, print_message, progress
from broker.cli.mqadmin.registry import UnknownName, UsageError, arg, boolean, command, count
from broker.cli.mqadmin.timestamps import TIMESTAMP_HELP, parse_timestamp
from broker.client import MessageExt
from broker.client.admin import Admin
from broker.client.message import MessageQueue
from broker.client.queue_reader import queue_addr, read_range
from broker.client.route import subscribe_queues

TOOLS_CONSUMER = "TOOLS_CONSUMER"  # RocketMQ's MixAll.TOOLS_CONSUMER_GROUP
# how often consumeMessage --timeout looks again for messages that arrived after it started
RECHECK = 0.2


def _times(begin: str | None, end: str | None, begin_flag: str, end_flag: str) -> tuple[int | None, int | None]:
    """Begin and end in ms, checked as RocketMQ checks them (not in the future, begin <= end)."""
    now = int(time.time() * 1000)
    try:
        b = parse_timestamp(begin, f"{begin_flag} beginTimestamp") if begin is not None else None
        e = parse_timestamp(end, f"{end_flag} endTimestamp") if end is not None else None
    except ValueError as exc:
        # consumeMessage -s was a tag filter in this tool before; say where tag filters are now
        hint = " (tag filters: printMsg -s or printMsgByQueue -s)" if begin_flag == "-s" else ""
        raise UsageError(f"{exc}{hint}") from None
    if b is not None and b > now:
        raise UsageError(f"{begin_flag} beginTimestamp {begin} is in the future")
    if e is not None and e > now:
        raise UsageError(f"{end_flag} endTimestamp {end} is in the future")
    if b is not None and e is not None and b > e:
        raise UsageError(f"{begin_flag} beginTimestamp {begin} is after {end_flag} endTimestamp {end}")
    return b, e


async def _bounds(admin: Admin, mq: MessageQueue, begin: int | None, end: int | None) -> tuple[int, int]:
    """[first, past-last) queue offsets of `mq` between the store times `begin` and `end`."""
    api, addr = admin.instance.api, await queue_addr(admin.instance, mq)
    lo = await api.search_offset(addr, mq, begin) if begin is not None else await api.get_min_offset(addr, mq)
    hi = await api.search_offset(addr, mq, end) if end is not None else await api.get_max_offset(addr, mq)
    return lo, max(lo, hi)


def _summary(msg: MessageExt) -> str:
    return (
        f"MessageExt [topic={msg.topic}, queueId={msg.queue_id}, "
        f"queueOffset={msg.queue_offset}, storeTimestamp={msg.store_timestamp}, tags={msg.tags}, "
        f"keys={' '.join(msg.keys)}, offsetMsgId={msg.offset_msg_id}]"
    )


def _print_line(msg: MessageExt, print_body: bool, charset: str) -> None:
    body = body_text(msg, charset) if print_body else "NOT PRINT BODY"
    print(f"MSGID: {msg.msg_id} {_summary(msg)} BODY: {body}")


# ---------------------------------------------------------------------------------------- consumeMessage


@command(
    "consumeMessage",
    "Print messages of a topic by queue, offset or store time, without committing",
    arg("-t", dest="topic", required=True, help="topic name"),
    arg("-b", dest="brokerName", help="only this broker (name)"),
    arg("-i", dest="queueId", type=int, help="only this queue (needs -b)"),
    arg("-o", dest="offset", type=int, help="start at this queue offset (needs -i)"),
    arg("-g", dest="group", default=TOOLS_CONSUMER, help="consumer group to pull as (offsets are not committed)"),
    arg("-s", dest="beginTimestamp", help=f"first store time, {TIMESTAMP_HELP}"),
    arg("-e", dest="endTimestamp", help=f"end store time (not included), {TIMESTAMP_HELP}"),
    arg("-c", dest="count", type=count, default=128, help="at most this many messages (128)"),
    arg("--timeout", type=float, default=0.0, help="ours: wait up to this many seconds for -c messages (0)"),
)
async def run_consumeMessage(args: argparse.Namespace, admin: Admin) -> int:
    if args.queueId is not None and not args.brokerName:
        raise UsageError("-i queueId needs -b brokerName (the broker the queue is on; see topicRoute)")
    if args.offset is not None and args.queueId is None:
        raise UsageError("-o offset needs -i queueId and -b brokerName: an offset belongs to one queue")
    begin, end = _times(args.beginTimestamp, args.endTimestamp, "-s", "-e")
    route = await require_topic(admin, args.topic)
    if args.brokerName:
        master_of(await admin.cluster_info(), args.brokerName)
    if args.queueId is not None:
        queues = [queue_of(route, args.topic, args.brokerName, args.queueId)]
    else:
        queues = [q for q in subscribe_queues(args.topic, route) if args.brokerName in (None, q.broker_name)]
        if not queues:
            raise UnknownName(f"topic {args.topic} has no readable queue on broker {args.brokerName}")
    start: dict[MessageQueue, int] = {}
    for mq in queues:
        lo, hi = await _bounds(admin, mq, begin, end)
        if args.offset is not None:
            if args.offset > hi:
                raise UnknownName(f"queue {mq} has no message at offset {args.offset} (its max offset is {hi})")
            lo = max(lo, args.offset)
        start[mq] = lo
    received = await _consume(args, admin, queues, start, end)
    if not received:
        raise UnknownName(f"no message of topic {args.topic} in the queues, offsets and times asked")
    print(f"Consumed {received} message(s) from {args.topic}")
    return 0


async def _consume(
    args: argparse.Namespace, admin: Admin, queues: list[MessageQueue], start: dict[MessageQueue, int], end: int | None
) -> int:
    """Read each queue from `start` on, oldest queue first, until -c messages; with --timeout (and no -e),
    look again for messages sent meanwhile until the time is up."""
    received = 0
    deadline = time.monotonic() + max(args.timeout, 0.0)
    with progress(f"consuming {args.topic}", args.count) as bar:
        while True:
            for mq in queues:
                _lo, hi = await _bounds(admin, mq, None, end)
                async for batch in read_range(admin.instance, args.group, mq, start[mq], hi):
                    for msg in batch[: args.count - received]:
                        print_message(msg)
                        received += 1
                        start[mq] = msg.queue_offset + 1
                        bar.advance()
                    if received >= args.count:
                        return received
            if end is not None or time.monotonic() >= deadline:
                return received
            await asyncio.sleep(RECHECK)


# ---------------------------------------------------------------------------------------- printMsg, printMsgByQueue


@command(
    "printMsg",
    "Print every message of a topic, queue by queue, optionally between two store times",
    arg("-t", dest="topic", required=True, help="topic name"),
    arg("-c", dest="charsetName", default="UTF-8", help="body charset (UTF-8)"),
    arg("-s", dest="subExpression", default="*", help="tag expression, e.g. 'TagA || TagB' (*)"),
    arg("-b", dest="beginTimestamp", help=f"first store time, {TIMESTAMP_HELP}"),
    arg("-e", dest="endTimestamp", help=f"end store time (not included), {TIMESTAMP_HELP}"),
    arg("-d", dest="printBody", type=boolean, default=True, help="print bodies: true|false (true)"),
)
async def run_printMsg(args: argparse.Namespace, admin: Admin) -> int:
    begin, end = _times(args.beginTimestamp, args.endTimestamp, "-b", "-e")
    route = await require_topic(admin, args.topic)
    for mq in subscribe_queues(args.topic, route):
        lo, hi = await _bounds(admin, mq, begin, end)
        print(f"minOffset={lo}, maxOffset={hi}, {_mq_text(mq)}")
        async for batch in read_range(admin.instance, TOOLS_CONSUMER, mq, lo, hi, args.subExpression):
            for msg in batch:
                _print_line(msg, args.printBody, args.charsetName)
        print("--------------------------------------------------------")
    return 0


def _mq_text(mq: MessageQueue) -> str:
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


@command(
    "printMsgByQueue",
    "Read one queue, optionally between two store times: print its messages and/or count them by tag",
    arg("-t", dest="topic", required=True, help="topic name"),
    arg("-a", dest="brokerName", required=True, help="broker name"),
    arg("-i", dest="queueId", type=int, required=True, help="queue id"),
    arg("-c", dest="charsetName", default="UTF-8", help="body charset (UTF-8)"),
    arg("-s", dest="subExpression", default="*", help="tag expression (*)"),
    arg("-b", dest="beginTimestamp", help=f"first store time, {TIMESTAMP_HELP}"),
    arg("-e", dest="endTimestamp", help=f"end store time (not included), {TIMESTAMP_HELP}"),
    arg("-p", dest="printMsg", type=boolean, default=False, help="print each message: true|false (false)"),
    arg("-d", dest="printBody", type=boolean, default=False, help="with -p, print bodies: true|false (false)"),
    arg("-f", dest="calculate", type=boolean, default=False, help="count messages by tag: true|false (false)"),
)
async def run_printMsgByQueue(args: argparse.Namespace, admin: Admin) -> int:
    begin, end = _times(args.beginTimestamp, args.endTimestamp, "-b", "-e")
    route = await require_topic(admin, args.topic)
    master_of(await admin.cluster_info(), args.brokerName)
    mq = queue_of(route, args.topic, args.brokerName, args.queueId)
    lo, hi = await _bounds(admin, mq, begin, end)
    tags: Counter[str] = Counter()
    with progress(f"reading {_mq_text(mq)}", hi - lo) as bar:
        async for batch in read_range(admin.instance, TOOLS_CONSUMER, mq, lo, hi, args.subExpression):
            for msg in batch:
                tags[msg.tags or ""] += 1
                if args.printMsg:
                    _print_line(msg, args.printBody, args.charsetName)
            bar.advance(len(batch))
    if args.calculate:
        for tag, n in sorted(tags.items(), key=lambda item: (-item[1], item[0])):
            print(f"Tag: {tag:<30} Count: {n}")
    return 0
