"""`mqadmin`: RocketMQ's admin command line, with its subcommand names and flags.

A RocketMQ operator types the commands they know (`mqadmin clusterList -n host:9876`, `updateTopic`,
`topicRoute`, `consumerProgress`, `queryMsgById`, `sendMessage`, `consumeMessage`...). Each subcommand
is a small function over the blocking client facade (broker.client.blocking); this module only parses
arguments and prints. `-n` defaults to the NAMESRV_ADDR environment variable, as in RocketMQ (or the
`rocketmq.namesrv.addr` property: `python -X rocketmq.namesrv.addr=... -m broker.cli.mqadmin`).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from rich.progress import Progress

from broker.client import BlockingAdmin, BlockingProducer, BlockingPullConsumer, Message, MessageExt
from broker.client.config import NAMESRV_ADDR_ENV, resolve_namesrv_addr
from broker.client.errors import NoNameServerError, RocketError
from broker.transport.errors import RemotingError

__all__ = ["main"]

Command = Callable[[argparse.Namespace], int]
Argument = tuple[tuple[str, ...], dict[str, Any]]
COMMANDS: dict[str, tuple[str, Command, tuple[Argument, ...]]] = {}

# Topics the broker owns; listing consumer progress over "every topic" skips them.
SYSTEM_TOPIC_PREFIXES = ("%RETRY%", "%DLQ%", "RMQ_SYS_", "SCHEDULE_TOPIC_XXXX", "TBW102", "SELF_TEST_TOPIC")


class UnknownName(Exception):
    """A topic, group or message named on the command line does not exist; the message says which and how
    to find the right name."""


def _require_topic(admin: BlockingAdmin, topic: str) -> None:
    if topic not in admin.topic_list():
        raise UnknownName(
            f"topic {topic} does not exist: the NameServer has no route for it (mqadmin topicList lists the topics)"
        )


def _require_group(admin: BlockingAdmin, group: str) -> None:
    if not admin.group_exists(group):
        raise UnknownName(
            f"consumer group {group} does not exist: no broker has its subscription or committed offsets"
            " (a group appears once one of its consumers has started)"
        )


def arg(*flags: str, **options: Any) -> Argument:
    return flags, options


def command(name: str, help_text: str, *arguments: Argument) -> Callable[[Command], Command]:
    """Register the decorated function as subcommand `name` (RocketMQ's spelling) with its arguments."""

    def register(run: Command) -> Command:
        COMMANDS[name] = (help_text, run, arguments)
        return run

    return register


def _bool(text: str) -> bool:
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _ms(ts: int) -> str:
    return datetime.fromtimestamp(ts / 1000).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3] if ts > 0 else "-"


def _print_message(msg: MessageExt) -> None:
    body = msg.uncompressed_body()
    try:
        text = body.decode()
    except UnicodeDecodeError:
        text = body.hex()
    rows = [
        ("OffsetID", msg.offset_msg_id),
        ("MsgId", msg.msg_id),
        ("Topic", msg.topic),
        ("Tags", f"[{msg.tags or ''}]"),
        ("Keys", f"[{' '.join(msg.keys)}]"),
        ("Queue ID", msg.queue_id),
        ("Queue Offset", msg.queue_offset),
        ("CommitLog Offset", msg.commit_log_offset),
        ("Reconsume Times", msg.reconsume_times),
        ("Born Timestamp", _ms(msg.born_timestamp)),
        ("Store Timestamp", _ms(msg.store_timestamp)),
        ("Born Host", "{}:{}".format(*msg.born_host)),
        ("Store Host", "{}:{}".format(*msg.store_host)),
        ("System Flag", msg.sys_flag),
        ("Properties", msg.properties),
        ("Message Body", text),
    ]
    for name, value in rows:
        print(f"{name + ':':<20}{value}")
    print()


# ---------------------------------------------------------------------------- cluster and topics


@command("clusterList", "List the clusters and their brokers, with their runtime figures")
def run_clusterList(args: argparse.Namespace) -> int:
    with BlockingAdmin(args.namesrvAddr) as admin:
        rows = admin.cluster_list()
    print(
        f"{'#Cluster Name':<22}{'#Broker Name':<22}{'#BID':<6}{'#Addr':<24}{'#Version':<12}"
        f"{'#InTPS':>10}{'#OutTPS':>10}{'#Activated':>12}"
    )
    for row in rows:
        rt = row.runtime
        in_tps = float((rt.get("putTps") or "0").split()[0])
        out_tps = float((rt.get("getTransferredTps") or "0").split()[0])
        print(
            f"{row.cluster:<22}{row.broker_name:<22}{row.broker_id:<6}{row.addr:<24}"
            f"{rt.get('brokerVersionDesc', '-'):<12}{in_tps:>10.2f}{out_tps:>10.2f}"
            f"{rt.get('brokerActive', 'false'):>12}"
        )
    return 0


@command(
    "brokerStatus",
    "Print a broker's runtime information",
    arg("-b", dest="brokerAddr", help="broker address ip:port (default: every broker)"),
)
def run_brokerStatus(args: argparse.Namespace) -> int:
    with BlockingAdmin(args.namesrvAddr) as admin:
        rows = admin.cluster_list()
    found = [r for r in rows if r.addr == args.brokerAddr] if args.brokerAddr else rows
    if not found:
        print(f"broker {args.brokerAddr} is not registered with the NameServer", file=sys.stderr)
        return 1
    for row in found:
        print(f"# {row.broker_name} (brokerId {row.broker_id}) {row.addr}")
        for key in sorted(row.runtime):
            print(f"{key:<48}: {row.runtime[key]}")
    return 0


@command("topicList", "List every topic the NameServer knows")
def run_topicList(args: argparse.Namespace) -> int:
    with BlockingAdmin(args.namesrvAddr) as admin:
        for topic in sorted(admin.topic_list()):
            print(topic)
    return 0


@command(
    "topicRoute",
    "Print the route of a topic",
    arg("-t", dest="topic", required=True, help="topic name"),
)
def run_topicRoute(args: argparse.Namespace) -> int:
    with BlockingAdmin(args.namesrvAddr) as admin:
        _require_topic(admin, args.topic)
        route = admin.topic_route(args.topic)
    print(f"{'#BrokerName':<24}{'#Cluster':<20}{'#BrokerAddrs'}")
    for bd in route.broker_datas:
        addrs = ", ".join(f"{bid}={addr}" for bid, addr in sorted(bd.broker_addrs.items()))
        print(f"{bd.broker_name:<24}{bd.cluster:<20}{addrs}")
    print(f"\n{'#BrokerName':<24}{'#ReadQueueNums':>16}{'#WriteQueueNums':>16}{'#Perm':>8}")
    for qd in route.queue_datas:
        print(f"{qd.broker_name:<24}{qd.read_queue_nums:>16}{qd.write_queue_nums:>16}{qd.perm:>8}")
    return 0


@command(
    "updateTopic",
    "Create or update a topic on a broker or on every master of a cluster",
    arg("-t", dest="topic", required=True, help="topic name"),
    arg("-b", dest="brokerAddr", help="create on this broker (ip:port)"),
    arg("-c", dest="clusterName", help="create on every master of this cluster"),
    arg("-r", dest="readQueueNums", type=int, default=8, help="read queue count (8)"),
    arg("-w", dest="writeQueueNums", type=int, default=8, help="write queue count (8)"),
    arg("-p", dest="perm", type=int, default=6, help="permission: 2 write, 4 read, 6 both (6)"),
    arg("-o", dest="order", type=_bool, default=False, help="ordered topic: true|false"),
)
def run_updateTopic(args: argparse.Namespace) -> int:
    if args.brokerAddr and args.clusterName:
        raise ValueError("give either -b brokerAddr or -c clusterName, not both")
    with BlockingAdmin(args.namesrvAddr) as admin:
        targets = admin.create_topic(
            args.topic,
            cluster=args.clusterName,
            broker_addr=args.brokerAddr,
            read_queue_nums=args.readQueueNums,
            write_queue_nums=args.writeQueueNums,
            perm=args.perm,
            order=args.order,
        )
    for addr in targets:
        print(f"create topic to {addr} success.")
    print(
        f"TopicConfig [topicName={args.topic}, readQueueNums={args.readQueueNums}, "
        f"writeQueueNums={args.writeQueueNums}, perm={args.perm}, order={str(args.order).lower()}]"
    )
    return 0


# ---------------------------------------------------------------------------- consumers


@command(
    "consumerProgress",
    "Show a consumer group's committed offsets and lag",
    arg("-g", dest="group", required=True, help="consumer group"),
    arg("-t", dest="topic", help="topic (default: every topic the group committed on)"),
)
def run_consumerProgress(args: argparse.Namespace) -> int:
    with BlockingAdmin(args.namesrvAddr) as admin:
        _require_group(admin, args.group)
        if args.topic:
            _require_topic(admin, args.topic)
            topics = [args.topic]
        else:
            topics = [t for t in sorted(admin.topic_list()) if not t.startswith(SYSTEM_TOPIC_PREFIXES)]
        rows = []
        with Progress(transient=True, disable=not sys.stderr.isatty()) as progress:
            task = progress.add_task("reading offsets", total=len(topics))
            for topic in topics:
                queues = admin.consumer_progress(args.group, topic)
                if args.topic or any(q.consumer_offset >= 0 for q in queues):
                    rows.extend(queues)
                progress.advance(task)
    print(f"{'#Topic':<32}{'#Broker Name':<20}{'#QID':>5}{'#Broker Offset':>16}{'#Consumer Offset':>18}{'#Diff':>10}")
    total = 0
    for q in rows:
        total += q.lag
        print(
            f"{q.mq.topic:<32}{q.mq.broker_name:<20}{q.mq.queue_id:>5}{q.broker_offset:>16}"
            f"{q.consumer_offset:>18}{q.lag:>10}"
        )
    print(f"\nDiff Total: {total}")
    return 0


# ---------------------------------------------------------------------------- messages


@command(
    "queryMsgById",
    "Print a message by its offset message id (storeHost + commit-log offset)",
    arg("-i", dest="msgId", required=True, help="offset message id(s), comma-separated"),
)
def run_queryMsgById(args: argparse.Namespace) -> int:
    with BlockingAdmin(args.namesrvAddr) as admin:
        for msg_id in args.msgId.split(","):
            _print_message(admin.view_message(msg_id.strip()))
    return 0


@command(
    "queryMsgByKey",
    "Find messages by key (the KEYS property), through the IndexFile",
    arg("-t", dest="topic", required=True, help="topic name"),
    arg("-k", dest="key", required=True, help="message key"),
    arg("-c", dest="maxNum", type=int, default=64, help="at most this many (64)"),
)
def run_queryMsgByKey(args: argparse.Namespace) -> int:
    with BlockingAdmin(args.namesrvAddr) as admin:
        _require_topic(admin, args.topic)
        found = admin.query_message_by_key(args.topic, args.key, max_num=args.maxNum)
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
)
def run_queryMsgByUniqueKey(args: argparse.Namespace) -> int:
    with BlockingAdmin(args.namesrvAddr) as admin:
        _require_topic(admin, args.topic)
        found = admin.query_message_by_uniq_key(args.topic, args.msgId)
    if not found:
        raise UnknownName(
            f"no message of topic {args.topic} has the unique key (client message id) {args.msgId}"
            " (an offset message id goes to queryMsgById)"
        )
    for msg in found:
        _print_message(msg)
    return 0


def parse_reset_timestamp(text: str, now_ms: int | None = None) -> int:
    """resetOffsetByTime's -s: "now", milliseconds since the epoch, or yyyy-MM-dd#HH:mm:ss:SSS (local)."""
    value = text.strip()
    if value.lower() == "now":
        return int(time.time() * 1000) if now_ms is None else now_ms
    if value.isdigit():
        return int(value)
    try:
        parsed = datetime.strptime(value, "%Y-%m-%d#%H:%M:%S:%f")
    except ValueError:
        raise ValueError(f"timestamp {text!r} is not 'now', milliseconds, or yyyy-MM-dd#HH:mm:ss:SSS") from None
    return int(parsed.timestamp() * 1000)


@command(
    "resetOffsetByTime",
    "Move a consumer group's offsets on a topic to a point in time; running consumers follow at once",
    arg("-g", dest="group", required=True, help="consumer group"),
    arg("-t", dest="topic", required=True, help="topic name"),
    arg("-s", dest="timestamp", required=True, help="now, milliseconds, or yyyy-MM-dd#HH:mm:ss:SSS"),
    arg("-f", dest="force", type=_bool, default=True, help="also move forward (true, the default)"),
)
def run_resetOffsetByTime(args: argparse.Namespace) -> int:
    timestamp = parse_reset_timestamp(args.timestamp)
    with BlockingAdmin(args.namesrvAddr) as admin:
        # checked first: a broker creates a group it is asked to reset, and a typo would get offsets
        _require_group(admin, args.group)
        _require_topic(admin, args.topic)
        moved = admin.reset_offset_by_time(args.group, args.topic, timestamp, force=args.force)
    print(
        f"rollback consumer offset by specified group[{args.group}], topic[{args.topic}], "
        f"force[{str(args.force).lower()}], timestamp(string)[{args.timestamp}], timestamp(long)[{timestamp}]"
    )
    print(f"{'#brokerName':<32}{'#queueId':>10}{'#offset':>12}")
    for mq, offset in sorted(moved.items()):
        print(f"{mq.broker_name:<32}{mq.queue_id:>10}{offset:>12}")
    return 0


@command(
    "sendMessage",
    "Send one message",
    arg("-t", dest="topic", required=True, help="topic name"),
    arg("-p", dest="body", required=True, help="message body"),
    arg("-c", dest="tags", help="message tag"),
    arg("-k", dest="keys", help="message keys, space-separated"),
    arg("-g", dest="producerGroup", default="MQADMIN_PRODUCER", help="producer group"),
)
def run_sendMessage(args: argparse.Namespace) -> int:
    msg = Message(args.topic, args.body, tags=args.tags, keys=args.keys.split() if args.keys else None)
    with BlockingProducer(args.producerGroup, args.namesrvAddr) as producer:
        result = producer.send(msg)
    print(f"{'#Broker Name':<24}{'#QID':>5}{'#Send Result':>14}  #MsgId")
    print(
        f"{result.message_queue.broker_name:<24}{result.message_queue.queue_id:>5}"
        f"{result.status.name:>14}  {result.msg_id}"
    )
    print(f"OffsetMsgId: {result.offset_msg_id}  QueueOffset: {result.queue_offset}")
    return 0


@command(
    "consumeMessage",
    "Print messages of a topic from the start of each queue (no commit)",
    arg("-t", dest="topic", required=True, help="topic name"),
    arg("-g", dest="group", default="MQADMIN_CONSUMER", help="consumer group (offsets are not committed)"),
    arg("-i", dest="queueId", type=int, help="only this queue"),
    arg("-o", dest="offset", type=int, help="start at this queue offset (default: the first)"),
    arg("-s", dest="tags", help="tag expression, e.g. 'TagA || TagB'"),
    arg("-c", dest="count", type=int, default=128, help="at most this many messages (128)"),
    arg("--timeout", type=float, default=5.0, help="stop after this many seconds (5)"),
)
def run_consumeMessage(args: argparse.Namespace) -> int:
    """Read up to `-c` messages from the start of every queue (or from -o), without committing."""
    with BlockingAdmin(args.namesrvAddr) as admin:
        _require_topic(admin, args.topic)
    consumer = BlockingPullConsumer(args.group, args.namesrvAddr, auto_commit=False)
    received = 0
    try:
        queues = [q for q in consumer.fetch_queues(args.topic) if args.queueId is None or q.queue_id == args.queueId]
        if not queues:
            which = "queue" if args.queueId is None else f"queue {args.queueId}"
            raise UnknownName(f"topic {args.topic} has no readable {which}")
        consumer.assign(queues, args.tags or "*")
        consumer.start()
        for mq in queues:
            if args.offset is not None:
                consumer.seek(mq, args.offset)
            else:
                consumer.seek_to_begin(mq)
        deadline = time.monotonic() + args.timeout
        while received < args.count and time.monotonic() < deadline:
            for msg in consumer.poll(timeout=1.0)[: args.count - received]:
                _print_message(msg)
                received += 1
    finally:
        consumer.shutdown()
    print(f"Consumed {received} message(s) from {args.topic}")
    return 0 if received else 1


# ---------------------------------------------------------------------------- entry point


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mqadmin", description="RocketCluster admin tool (RocketMQ's mqadmin)")
    sub = parser.add_subparsers(dest="command", metavar="<command>", required=True)
    for name, (help_text, _, arguments) in sorted(COMMANDS.items()):
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument(
            "-n",
            dest="namesrvAddr",
            help=f"NameServer address(es), host:port;host:port (default: ${NAMESRV_ADDR_ENV})",
        )
        for flags, options in arguments:
            p.add_argument(*flags, **options)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.namesrvAddr = resolve_namesrv_addr(args.namesrvAddr)
    except NoNameServerError:
        parser.error(f"no NameServer address: pass -n host:9876 or set {NAMESRV_ADDR_ENV}")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s - %(message)s")
    run: Any = COMMANDS[args.command][1]
    try:
        return int(run(args))
    except UnknownName as exc:
        print(f"mqadmin {args.command}: {exc}", file=sys.stderr)
        return 1
    except (RocketError, RemotingError, OSError, ValueError) as exc:
        print(f"mqadmin {args.command}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
