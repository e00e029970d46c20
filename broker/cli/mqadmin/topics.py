"""Topic commands: topicList, topicRoute, topicStatus, topicClusterList, updateTopic, deleteTopic,
updateTopicPerm, updateOrderConf, allocateMQ."""

from __future__ import annotations

import argparse
import json

from broker.cli.mqadmin.groups_of import groups_of_topic
from broker.cli.mqadmin.lookup import require_topic, target_masters
from broker.cli.mqadmin.registry import UnknownName, UsageError, arg, boolean, command
from broker.cli.mqadmin.timestamps import format_ms
from broker.client.admin import Admin, changes
from broker.client.admin.views import QueueStats, topic_stats
from broker.client.allocate import allocate_averagely
from broker.client.errors import RequestCodeNotSupported
from broker.client.message import MessageQueue
from broker.client.queue_reader import read_range
from broker.client.route import subscribe_queues

PERM_HELP = "permission: 2 write, 4 read, 6 both"


@command(
    "topicList",
    "List every topic the NameServer knows",
    arg("-c", dest="clusterModel", action="store_true", help="also print each topic's cluster and consumer groups"),
)
async def run_topicList(args: argparse.Namespace, admin: Admin) -> int:
    topics = sorted(await admin.topic_list())
    if not args.clusterModel:
        for topic in topics:
            print(topic)
        return 0
    info = await admin.cluster_info()
    cluster_of = {name: bd.cluster for name, bd in info.brokers.items()}
    print(f"{'#Cluster Name':<20}  {'#Topic':<48}  {'#Consumer Group':<48}")
    for topic in topics:
        route = await admin.topic_route(topic)
        clusters = sorted({cluster_of.get(bd.broker_name, "") for bd in route.broker_datas}) or [""]
        groups = await groups_of_topic(admin, topic) or [""]
        for group in groups:
            print(f"{clusters[0]:<20}  {topic:<48}  {group:<48}")
    return 0


@command("topicRoute", "Print the route of a topic", arg("-t", dest="topic", required=True, help="topic name"))
async def run_topicRoute(args: argparse.Namespace, admin: Admin) -> int:
    route = await require_topic(admin, args.topic)
    print(f"{'#BrokerName':<24}{'#Cluster':<20}{'#BrokerAddrs'}")
    for bd in route.broker_datas:
        addrs = ", ".join(f"{bid}={addr}" for bid, addr in sorted(bd.broker_addrs.items()))
        print(f"{bd.broker_name:<24}{bd.cluster:<20}{addrs}")
    print(f"\n{'#BrokerName':<24}{'#ReadQueueNums':>16}{'#WriteQueueNums':>16}{'#Perm':>8}")
    for qd in route.queue_datas:
        print(f"{qd.broker_name:<24}{qd.read_queue_nums:>16}{qd.write_queue_nums:>16}{qd.perm:>8}")
    return 0


async def _queue_stats(admin: Admin, addr: str, mqs: list[MessageQueue]) -> dict[MessageQueue, QueueStats]:
    """GET_TOPIC_STATS_INFO's table; from a broker without it, min/max offsets and the newest message's time."""
    try:
        return await topic_stats(admin.instance.api, addr, mqs[0].topic)
    except RequestCodeNotSupported:
        pass
    out = {}
    for mq in mqs:
        lo = await admin.instance.api.get_min_offset(addr, mq)
        hi = await admin.instance.api.get_max_offset(addr, mq)
        last = 0
        if hi > lo:
            async for batch in read_range(admin.instance, "TOOLS_CONSUMER", mq, hi - 1, hi):
                last = batch[-1].store_timestamp
        out[mq] = QueueStats(lo, hi, last)
    return out


@command(
    "topicStatus",
    "Print the min and max offset of each queue of a topic",
    arg("-t", dest="topic", required=True, help="topic name"),
)
async def run_topicStatus(args: argparse.Namespace, admin: Admin) -> int:
    route = await require_topic(admin, args.topic)
    table: dict[MessageQueue, QueueStats] = {}
    for bd in route.broker_datas:
        addr = route.master_addr(bd.broker_name) or route.broker_addr(bd.broker_name)
        mqs = [mq for mq in subscribe_queues(args.topic, route) if mq.broker_name == bd.broker_name]
        if addr is not None and mqs:
            stats = await _queue_stats(admin, addr, mqs)
            table.update({mq: s for mq, s in stats.items() if mq.topic == args.topic})
    print(f"{'#Broker Name':<32}  {'#QID':<4}  {'#Min Offset':<20}  {'#Max Offset':<20}    #Last Updated")
    for mq in sorted(table):
        s = table[mq]
        last = format_ms(s.last_update_timestamp) if s.last_update_timestamp else ""
        print(f"{mq.broker_name:<32}  {mq.queue_id:<4}  {s.min_offset:<20}  {s.max_offset:<20}    {last}")
    return 0


@command(
    "topicClusterList", "Print the clusters a topic is on", arg("-t", dest="topic", required=True, help="topic name")
)
async def run_topicClusterList(args: argparse.Namespace, admin: Admin) -> int:
    route = await require_topic(admin, args.topic)
    info = await admin.cluster_info()
    names = {bd.broker_name for bd in route.broker_datas}
    for cluster in sorted(c for c, brokers in info.clusters.items() if names & set(brokers)):
        print(cluster)
    return 0


@command(
    "updateTopic",
    "Create or update a topic on a broker or on every master of a cluster",
    arg("-t", dest="topic", required=True, help="topic name"),
    arg("-b", dest="brokerAddr", help="create on this broker (ip:port)"),
    arg("-c", dest="clusterName", help="create on every master of this cluster"),
    arg("-r", dest="readQueueNums", type=int, default=8, help="read queue count (8)"),
    arg("-w", dest="writeQueueNums", type=int, default=8, help="write queue count (8)"),
    arg("-p", dest="perm", type=int, default=6, help=f"{PERM_HELP} (6)"),
    arg("-o", dest="order", type=boolean, default=False, help="ordered topic: true|false"),
)
async def run_updateTopic(args: argparse.Namespace, admin: Admin) -> int:
    if args.brokerAddr and args.clusterName:
        raise UsageError("give either -b brokerAddr or -c clusterName, not both")
    if args.brokerAddr or args.clusterName:
        await target_masters(admin, args.brokerAddr, args.clusterName)  # a typo'd name is an error, not "no master"
    targets = await admin.create_topic(
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


@command(
    "deleteTopic",
    "Delete a topic from every master of a cluster and from the NameServers",
    arg("-t", dest="topic", required=True, help="topic name"),
    arg("-c", dest="clusterName", required=True, help="cluster name"),
)
async def run_deleteTopic(args: argparse.Namespace, admin: Admin) -> int:
    await require_topic(admin, args.topic)
    api = admin.instance.api
    for addr in await target_masters(admin, None, args.clusterName):
        await changes.delete_topic_in_broker(api, addr, args.topic)
    print(f"delete topic [{args.topic}] from cluster [{args.clusterName}] success.")
    for ns in admin.instance.namesrvs:
        await changes.delete_topic_in_namesrv(api, ns, args.topic, args.clusterName)
    print(f"delete topic [{args.topic}] from NameServer success.")
    return 0


@command(
    "updateTopicPerm",
    "Change a topic's permission on a broker or on every master of a cluster",
    arg("-t", dest="topic", required=True, help="topic name"),
    arg("-p", dest="perm", type=int, required=True, choices=(2, 4, 6), help=PERM_HELP),
    arg("-b", dest="brokerAddr", help="on this broker (ip:port)"),
    arg("-c", dest="clusterName", help="on every master of this cluster"),
)
async def run_updateTopicPerm(args: argparse.Namespace, admin: Admin) -> int:
    route = await require_topic(admin, args.topic)
    targets = await target_masters(admin, args.brokerAddr, args.clusterName)
    info = await admin.cluster_info()
    name_of = {addr: name for name, bd in info.brokers.items() for addr in bd.broker_addrs.values()}
    for addr in targets:
        qd = next((q for q in route.queue_datas if q.broker_name == name_of.get(addr)), None)
        if qd is None:
            raise UnknownName(f"topic {args.topic} is not on broker {addr}")
        if qd.perm == args.perm:
            print(f"new perm equals to the old one, no update, {addr}")
            continue
        await admin.create_topic(
            args.topic,
            broker_addr=addr,
            read_queue_nums=qd.read_queue_nums,
            write_queue_nums=qd.write_queue_nums,
            perm=args.perm,
        )
        print(f"update topic perm from {qd.perm} to {args.perm} in {addr} success.")
    return 0


@command(
    "updateOrderConf",
    "Get, put or delete a topic's order configuration (brokerName:queueNum;...) on the NameServers",
    arg("-t", dest="topic", required=True, help="topic name"),
    arg("-m", dest="method", required=True, choices=("get", "put", "delete"), help="get, put or delete"),
    arg("-v", dest="orderConf", help="order conf for put, e.g. broker-a:4;broker-b:4"),
)
async def run_updateOrderConf(args: argparse.Namespace, admin: Admin) -> int:
    api, namespace = admin.instance.api, changes.NAMESPACE_ORDER_TOPIC_CONFIG
    if args.method == "get":
        value = await admin.instance.namesrv_call(lambda ns: changes.get_kv_config(api, ns, namespace, args.topic))
        if value is None:
            raise UnknownName(f"topic {args.topic} has no order conf on the NameServer")
        print(f"get orderConf success. topic=[{args.topic}], orderConf=[{value}]")
    elif args.method == "put":
        if not args.orderConf:
            raise UsageError("-m put needs -v orderConf, e.g. -v broker-a:4;broker-b:4")
        for ns in admin.instance.namesrvs:
            await changes.put_kv_config(api, ns, namespace, args.topic, args.orderConf)
        print(f"update orderConf success. topic=[{args.topic}], orderConf=[{args.orderConf}]")
    else:
        for ns in admin.instance.namesrvs:
            await changes.delete_kv_config(api, ns, namespace, args.topic)
        print(f"delete orderConf success. topic=[{args.topic}]")
    return 0


@command(
    "allocateMQ",
    "Show how the averaging strategy spreads a topic's queues over the given client ids",
    arg("-t", dest="topic", required=True, help="topic name"),
    arg("-i", dest="ipList", required=True, help="client ids (ips), comma-separated"),
)
async def run_allocateMQ(args: argparse.Namespace, admin: Admin) -> int:
    route = await require_topic(admin, args.topic)
    ips = [ip for ip in args.ipList.split(",") if ip]
    mqs = subscribe_queues(args.topic, route)
    result = {ip: [mq.to_json() for mq in allocate_averagely(ip, mqs, ips)] for ip in ips}
    print(json.dumps({"result": result}))
    return 0
