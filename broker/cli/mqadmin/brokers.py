"""Broker and cluster commands: clusterList, clusterRT, brokerStatus, getBrokerConfig, updateBrokerConfig,
brokerConsumeStats, cleanExpiredCQ, cleanUnusedTopic, sendMsgStatus, wipeWritePerm, addWritePerm."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from broker.cli.mqadmin.lookup import master_of, target_masters
from broker.cli.mqadmin.registry import UnknownName, UsageError, arg, boolean, command, count, producer_config
from broker.client import Message, Producer
from broker.client.admin import Admin, changes, requests
from broker.client.admin.views import broker_consume_stats
from broker.client.errors import RocketError
from broker.client.route import MASTER_ID
from broker.transport.errors import RemotingError

ADDR_HELP = "broker address ip:port"
CLUSTER_HELP = "every broker of this cluster"


@command("clusterList", "List the clusters and their brokers, with their runtime figures")
async def run_clusterList(args: argparse.Namespace, admin: Admin) -> int:
    rows = await admin.cluster_list()
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
    "Print a broker's runtime information (GET_BROKER_RUNTIME_INFO)",
    arg("-b", dest="brokerAddr", help=ADDR_HELP),
    arg("-c", dest="clusterName", help=CLUSTER_HELP),
)
async def run_brokerStatus(args: argparse.Namespace, admin: Admin) -> int:
    addrs = await target_masters(admin, args.brokerAddr, args.clusterName, all_brokers=True)
    for addr in addrs:
        table = await admin.instance.api.get_broker_runtime_info(addr)
        for key in sorted(table):
            if args.brokerAddr:
                print(f"{key:<32}: {table[key]}")
            else:
                print(f"{addr:<24} {key:<32}: {table[key]}")
    return 0


async def _with_roles(admin: Admin, addrs: list[str]) -> list[tuple[str, str]]:
    """(heading, addr) in RocketMQ's getBrokerConfig style: masters, then each master's slaves."""
    info = await admin.cluster_info()
    out = []
    for bd in sorted(info.brokers.values(), key=lambda b: b.broker_name):
        master = bd.broker_addrs.get(MASTER_ID)
        for bid, addr in sorted(bd.broker_addrs.items()):
            if addr not in addrs:
                continue
            out.append((f"Master: {addr}" if bid == MASTER_ID else f"My Master: {master}=====Slave: {addr}", addr))
    return out


@command(
    "getBrokerConfig",
    "Print a broker's configuration",
    arg("-b", dest="brokerAddr", help=ADDR_HELP),
    arg("-c", dest="clusterName", help=CLUSTER_HELP),
)
async def run_getBrokerConfig(args: argparse.Namespace, admin: Admin) -> int:
    addrs = await target_masters(admin, args.brokerAddr, args.clusterName, all_brokers=True)
    headings = [(addr, addr)] if args.brokerAddr and (addr := addrs[0]) else await _with_roles(admin, addrs)
    for heading, addr in headings:
        print(f"============{heading}============")
        props = await requests.get_broker_config(admin.instance.api, addr)
        if not props:
            print(f"Broker[{addr}] has no config property!")
            continue
        for key, value in props.items():
            print(f"{key:<50}=  {value}")
        print()
    return 0


@command(
    "updateBrokerConfig",
    "Change one broker configuration key at runtime (the broker persists it)",
    arg("-k", dest="key", required=True, help="config key, RocketMQ's name (e.g. flushDiskType)"),
    arg("-v", dest="value", required=True, help="config value"),
    arg("-b", dest="brokerAddr", help=ADDR_HELP),
    arg("-c", dest="clusterName", help="every master of this cluster"),
    arg("-a", dest="updateAllBroker", type=boolean, default=False, help="with -c: slaves too (true|false)"),
)
async def run_updateBrokerConfig(args: argparse.Namespace, admin: Admin) -> int:
    addrs = await target_masters(admin, args.brokerAddr, args.clusterName, all_brokers=args.updateAllBroker)
    for addr in addrs:
        await changes.update_broker_config(admin.instance.api, addr, {args.key: args.value})
        print(f"update broker config success, {addr}")
    return 0


def _consume_rows(body: Mapping[str, Any]) -> list[tuple[str, str, Any, Mapping[str, Any], float]]:
    """(topic, group, queue, offsets, tps) of a ConsumeStatsList, sorted."""
    rows = []
    for entry in body.get("consumeStatsList") or []:
        for group, stats_list in (entry or {}).items():
            for stats in stats_list or []:
                tps = float(stats.get("consumeTps") or 0.0)
                for mq, wrapper in (stats.get("offsetTable") or {}).items():
                    topic = getattr(mq, "topic", None) or mq.get("topic")
                    rows.append((str(topic), str(group), mq, wrapper, tps))
    return sorted(rows, key=lambda r: (r[0], r[1], getattr(r[2], "queue_id", 0)))


@command(
    "brokerConsumeStats",
    "Every consumer group's offsets and lag on one broker, per queue",
    arg("-b", dest="brokerAddr", required=True, help=ADDR_HELP),
    arg("-t", dest="timeoutMillis", type=count, default=50000, help="request timeout in ms (50000)"),
    arg("-l", dest="level", type=int, default=0, help="print only queues whose diff is at least this (0)"),
    arg("-o", dest="order", type=boolean, default=False, help="ordered topics only (false)"),
)
async def run_brokerConsumeStats(args: argparse.Namespace, admin: Admin) -> int:
    await target_masters(admin, args.brokerAddr, None, all_brokers=True)
    admin.instance.api.timeout = args.timeoutMillis / 1000
    body = await broker_consume_stats(admin.instance.api, args.brokerAddr, args.order)
    print(
        f"{'#Topic':<64}  {'#Group':<64}  {'#Broker Name':<32}  {'#QID':<4}  {'#Broker Offset':<20}"
        f"  {'#Consumer Offset':<20}  {'#Diff':<20}  #LastTime"
    )
    for topic, group, mq, w, _tps in _consume_rows(body):
        diff = int(w.get("brokerOffset", 0)) - int(w.get("consumerOffset", 0))
        if diff < args.level:
            continue
        last = int(w.get("lastTimestamp", 0))
        when = datetime.fromtimestamp(last / 1000).strftime("%Y-%m-%d %H:%M:%S") if last else "N/A"
        print(
            f"{topic:<64}  {group:<64}  {getattr(mq, 'broker_name', ''):<32}  {getattr(mq, 'queue_id', 0):<4}"
            f"  {int(w.get('brokerOffset', 0)):<20}  {int(w.get('consumerOffset', 0)):<20}  {diff:<20}  {when}"
        )
    print(f"\nDiff Total: {int(body.get('totalDiff') or 0)}")
    return 0


async def _clean(args: argparse.Namespace, admin: Admin, call: Any) -> int:
    for addr in await target_masters(admin, args.brokerAddr, args.cluster, all_brokers=True):
        await call(admin.instance.api, addr)
    print("success")
    return 0


@command(
    "cleanExpiredCQ",
    "Drop the consume queues whose messages have all left the CommitLog (their offsets restart at 0)",
    arg("-b", dest="brokerAddr", help=ADDR_HELP),
    arg("-c", dest="cluster", help=CLUSTER_HELP),
)
async def run_cleanExpiredCQ(args: argparse.Namespace, admin: Admin) -> int:
    return await _clean(args, admin, changes.clean_expired_consume_queue)


@command(
    "cleanUnusedTopic",
    "Drop the consume queues of topics a broker no longer has",
    arg("-b", dest="brokerAddr", help=ADDR_HELP),
    arg("-c", dest="cluster", help=CLUSTER_HELP),
)
async def run_cleanUnusedTopic(args: argparse.Namespace, admin: Admin) -> int:
    return await _clean(args, admin, changes.clean_unused_topic)


def _payload(size: int) -> str:
    return ("hello jodie" * (size // 11 + 1))[:size]


@command(
    "sendMsgStatus",
    "Send messages to a broker's own topic (its brokerName) and print each send's round trip",
    arg("-b", dest="brokerName", required=True, help="broker name (not an address), e.g. broker-a"),
    arg("-s", dest="messageSize", type=count, default=128, help="message size in bytes (128)"),
    arg("-c", dest="count", type=count, default=50, help="how many messages (50)"),
)
async def run_sendMsgStatus(args: argparse.Namespace, admin: Admin) -> int:
    master_of(await admin.cluster_info(), args.brokerName)
    async with Producer("PID_SMSC", client_config=producer_config(admin)) as producer:
        await producer.send(Message(args.brokerName, _payload(16)))  # warms the route, as RocketMQ does
        for _ in range(args.count):
            began = time.monotonic()
            result = await producer.send(Message(args.brokerName, _payload(args.messageSize)))
            rt = (time.monotonic() - began) * 1000
            print(
                f"rt={rt:.0f}ms, SendResult [sendStatus={result.status.name}, msgId={result.msg_id}, "
                f"offsetMsgId={result.offset_msg_id}, messageQueue={result.message_queue}, "
                f"queueOffset={result.queue_offset}]"
            )
    return 0


@command(
    "clusterRT",
    "Measure each broker's send round trip with messages to its own topic (its brokerName)",
    arg("-a", dest="amount", type=count, default=100, help="sends per broker; RT = total time / amount (100)"),
    arg("-s", dest="size", type=count, default=128, help="message size in bytes (128)"),
    arg("-c", dest="cluster", help="only this cluster (default: every cluster)"),
    arg("-p", dest="printAsTlog", type=boolean, default=False, help="print as time|room|cluster|broker|rt lines"),
    arg("-m", dest="machineRoom", default="noname", help="machine room name for -p true (noname)"),
    arg("-i", dest="interval", type=count, help="repeat every this many seconds until interrupted (default: once)"),
)
async def run_clusterRT(args: argparse.Namespace, admin: Admin) -> int:
    info = await admin.cluster_info()
    clusters = [args.cluster] if args.cluster else sorted(info.clusters)
    if args.cluster and args.cluster not in info.clusters:
        raise UnknownName(f"cluster {args.cluster} does not exist (mqadmin clusterList lists the clusters)")
    if not args.printAsTlog:
        print(f"{'#Cluster Name':<24}  {'#Broker Name':<24}  {'#RT':<8}  {'#successCount':<16}  #failCount")
    async with Producer(f"CLUSTER_RT_{time.time_ns()}", client_config=producer_config(admin)) as producer:
        while True:
            for cluster in clusters:
                for broker_name in info.clusters[cluster]:
                    await _one_rt(args, producer, cluster, broker_name)
            if not args.interval:
                return 0
            await asyncio.sleep(args.interval)


async def _one_rt(args: argparse.Namespace, producer: Producer, cluster: str, broker_name: str) -> None:
    ok = failed = 0
    elapsed = 0.0
    for i in range(args.amount):
        began = time.monotonic()
        try:
            await producer.send(Message(broker_name, _payload(args.size)))
            ok += 1
        except (RocketError, RemotingError):
            failed += 1
        if i:  # the first send also fetches the route: left out, as RocketMQ does
            elapsed += time.monotonic() - began
    rt = elapsed * 1000 / max(args.amount - 1, 1)
    if args.printAsTlog:
        now = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
        print(f"{now}|{args.machineRoom}|{cluster}|{broker_name}|{round(rt)}")
    else:
        print(f"{cluster:<24}  {broker_name:<24}  {rt:<8.2f}  {ok:<16}  {failed}")
    if failed and not ok:
        raise UsageError(f"every send to broker {broker_name}'s topic failed (is brokerTopicEnable off?)")


async def _write_perm(args: argparse.Namespace, admin: Admin, wipe: bool) -> int:
    master_of(await admin.cluster_info(), args.brokerName)
    counts = await (admin.wipe_write_perm if wipe else admin.add_write_perm)(args.brokerName)
    verb = "wipe write perm" if wipe else "add write perm"
    for ns, changed in sorted(counts.items()):
        print(f"{verb} of broker[{args.brokerName}] in name server[{ns}] OK, {changed}")
    return 0


@command(
    "wipeWritePerm",
    "Stop routing writes to a broker group on every NameServer",
    arg("-b", dest="brokerName", required=True, help="broker name"),
)
async def run_wipeWritePerm(args: argparse.Namespace, admin: Admin) -> int:
    return await _write_perm(args, admin, wipe=True)


@command(
    "addWritePerm",
    "Route writes to a broker group again on every NameServer",
    arg("-b", dest="brokerName", required=True, help="broker name"),
)
async def run_addWritePerm(args: argparse.Namespace, admin: Admin) -> int:
    return await _write_perm(args, admin, wipe=False)
