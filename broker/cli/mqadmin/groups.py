"""Consumer group commands: consumerProgress, updateSubGroup, deleteSubGroup, cloneGroupOffset,
resetOffsetByTime."""

from __future__ import annotations

import argparse
from datetime import datetime

import orjson

from broker.cli.mqadmin.connections import allocation, group_summary
from broker.cli.mqadmin.group_progress import group_stats
from broker.cli.mqadmin.groups_of import all_groups
from broker.cli.mqadmin.lookup import require_group, require_topic, target_masters
from broker.cli.mqadmin.output import progress
from broker.cli.mqadmin.registry import UnknownName, arg, boolean, command
from broker.cli.mqadmin.timestamps import TIMESTAMP_HELP, parse_reset_timestamp
from broker.client.admin import Admin, changes, requests
from broker.client.queue_reader import queue_addr

# RocketMQ's ConsumerProgressSubCommand layout
PROGRESS_HEAD = "{:<64}  {:<32}  {:<4}  {:<20}  {:<20}  {}{:<20} {:<20}{}"
PROGRESS_ROW = "{:<64}  {:<32}  {:<4}  {:<20}  {:<20}  {}{:<20} {:<20} {}"


@command(
    "consumerProgress",
    "Every consumer group's lag, or one group's offsets per queue",
    arg("-g", dest="group", help="consumer group (default: list every group)"),
    arg("-t", dest="topic", help="with -g: only this topic"),
    arg(
        "-s",
        dest="showClientIP",
        type=boolean,
        default=False,
        help="with -g: show the client of each queue (true|false)",
    ),
)
async def run_consumerProgress(args: argparse.Namespace, admin: Admin) -> int:
    if not args.group:
        return await _every_group(admin)
    await require_group(admin, args.group)
    if args.topic:
        await require_topic(admin, args.topic)
    stats = await group_stats(admin, args.group, args.topic)
    owners = await allocation(admin, args.group) if args.showClientIP else {}
    ip_head = f"{'#Client IP':<20} " if args.showClientIP else ""
    print(
        PROGRESS_HEAD.format(
            "#Topic",
            "#Broker Name",
            "#QID",
            "#Broker Offset",
            "#Consumer Offset",
            ip_head,
            "#Diff",
            "#Inflight",
            "#LastTime",
        )
    )
    diff_total = inflight_total = 0
    for mq in sorted(stats.queues):
        q = stats.queues[mq]
        diff_total += q.diff
        inflight_total += q.inflight
        last = (
            datetime.fromtimestamp(q.last_timestamp / 1000).strftime("%Y-%m-%d %H:%M:%S") if q.last_timestamp else "N/A"
        )
        ip = f"{owners.get(mq, 'N/A'):<20} " if args.showClientIP else ""
        print(
            PROGRESS_ROW.format(
                mq.topic, mq.broker_name, mq.queue_id, q.broker_offset, q.consumer_offset, ip, q.diff, q.inflight, last
            )
        )
    print()
    print(f"Consume TPS: {stats.consume_tps:.2f}")
    print(f"Consume Diff Total: {diff_total}")
    print(f"Consume Inflight Total: {inflight_total}")
    return 0


async def _every_group(admin: Admin) -> int:
    print(f"{'#Group':<64}  {'#Count':<6}  {'#Version':<24} {'#Type':<5}  {'#Model':<14}  {'#TPS':<7}  #Diff Total")
    groups = await all_groups(admin)
    with progress("reading consumer groups", len(groups)) as bar:
        for group in groups:
            stats = await group_stats(admin, group)
            diff = sum(q.diff for q in stats.queues.values())
            count, version, ctype, model = await group_summary(admin, group)
            print(
                f"{group:<64}  {count:<6}  {version:<24} {ctype:<5}  {model:<14}  {int(stats.consume_tps):<7}  {diff}"
            )
            bar.advance()
    return 0


@command(
    "updateSubGroup",
    "Create or update a subscription group on a broker or on every master of a cluster",
    arg("-g", dest="groupName", required=True, help="consumer group"),
    arg("-b", dest="brokerAddr", help="on this broker (ip:port)"),
    arg("-c", dest="clusterName", help="on every master of this cluster"),
    arg("-s", dest="consumeEnable", type=boolean, help="consuming allowed (true)"),
    arg("-m", dest="consumeFromMinEnable", type=boolean, help="a new group starts from the min offset (true)"),
    arg("-d", dest="consumeBroadcastEnable", type=boolean, help="broadcast consumption allowed (true)"),
    arg("-o", dest="consumeMessageOrderly", type=boolean, help="orderly (false)"),
    arg("-q", dest="retryQueueNums", type=int, help="retry queues (1)"),
    arg("-r", dest="retryMaxTimes", type=int, help="redeliveries before the DLQ (16)"),
    arg("-i", dest="brokerId", type=int, help="broker id to consume from (0)"),
    arg("-w", dest="whichBrokerWhenConsumeSlowly", type=int, help="broker id when consuming slowly (1)"),
    arg("-a", dest="notifyConsumerIdsChangedEnable", type=boolean, help="tell consumers when the group changes (true)"),
)
async def run_updateSubGroup(args: argparse.Namespace, admin: Admin) -> int:
    config: dict[str, object] = {
        "groupName": args.groupName,
        "consumeEnable": True,
        "consumeFromMinEnable": True,
        "consumeBroadcastEnable": True,
        "consumeMessageOrderly": False,
        "retryQueueNums": 1,
        "retryMaxTimes": 16,
        "brokerId": 0,
        "whichBrokerWhenConsumeSlowly": 1,
        "notifyConsumerIdsChangedEnable": True,
    }
    config.update({k: v for k, v in vars(args).items() if k in config and v is not None})
    for addr in await target_masters(admin, args.brokerAddr, args.clusterName):
        await requests.create_subscription_group(admin.instance.api, addr, config)
        print(f"create subscription group to {addr} success.")
    print(f"SubscriptionGroupConfig {orjson.dumps(config).decode()}")
    return 0


@command(
    "deleteSubGroup",
    "Delete a subscription group from a broker or from every master of a cluster",
    arg("-g", dest="groupName", required=True, help="consumer group"),
    arg("-b", dest="brokerAddr", help="from this broker (ip:port)"),
    arg("-c", dest="clusterName", help="from every master of this cluster"),
    arg("-r", dest="removeOffset", type=boolean, default=False, help="also remove its committed offsets (false)"),
)
async def run_deleteSubGroup(args: argparse.Namespace, admin: Admin) -> int:
    await require_group(admin, args.groupName)
    for addr in await target_masters(admin, args.brokerAddr, args.clusterName):
        await changes.delete_subscription_group(admin.instance.api, addr, args.groupName, args.removeOffset)
        print(f"delete subscription group [{args.groupName}] from broker [{addr}] success.")
    return 0


@command(
    "cloneGroupOffset",
    "Give a group the committed offsets of another group on a topic",
    arg("-s", dest="srcGroup", required=True, help="source consumer group"),
    arg("-d", dest="destGroup", required=True, help="destination consumer group"),
    arg("-t", dest="topic", required=True, help="topic name"),
    arg("-o", dest="offline", type=boolean, default=False, help="unused, as in RocketMQ"),
)
async def run_cloneGroupOffset(args: argparse.Namespace, admin: Admin) -> int:
    await require_group(admin, args.srcGroup)
    await require_topic(admin, args.topic)
    stats = await group_stats(admin, args.srcGroup, args.topic)
    queues = sorted(mq for mq in stats.queues if mq.topic == args.topic)
    if not queues:
        raise UnknownName(f"consumer group {args.srcGroup} has no offsets on topic {args.topic}")
    with progress("cloning offsets", len(queues)) as bar:
        for mq in queues:
            addr = await queue_addr(admin.instance, mq)
            await admin.instance.api.update_consumer_offset(addr, args.destGroup, mq, stats.queues[mq].consumer_offset)
            bar.advance()
    print(f"clone group offset success. srcGroup[{args.srcGroup}], destGroup=[{args.destGroup}], topic[{args.topic}]")
    return 0


@command(
    "resetOffsetByTime",
    "Move a consumer group's offsets on a topic to a point in time; running consumers follow at once",
    arg("-g", dest="group", required=True, help="consumer group"),
    arg("-t", dest="topic", required=True, help="topic name"),
    arg("-s", dest="timestamp", required=True, help=f"now, {TIMESTAMP_HELP}"),
    arg("-f", dest="force", type=boolean, default=True, help="also move forward (true, the default)"),
)
async def run_resetOffsetByTime(args: argparse.Namespace, admin: Admin) -> int:
    timestamp = parse_reset_timestamp(args.timestamp)
    # checked first: a broker creates a group it is asked to reset, and a typo would get offsets
    await require_group(admin, args.group)
    await require_topic(admin, args.topic)
    moved = await admin.reset_offset_by_time(args.group, args.topic, timestamp, force=args.force)
    print(
        f"rollback consumer offset by specified group[{args.group}], topic[{args.topic}], "
        f"force[{str(args.force).lower()}], timestamp(string)[{args.timestamp}], timestamp(long)[{timestamp}]"
    )
    print(f"{'#brokerName':<32}{'#queueId':>10}{'#offset':>12}")
    for mq, offset in sorted(moved.items()):
        print(f"{mq.broker_name:<32}{mq.queue_id:>10}{offset:>12}")
    return 0
