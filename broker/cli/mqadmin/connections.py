"""Connection commands: consumerConnection, producerConnection, consumerStatus; and the group summaries
consumerProgress prints (client count, version, type, model, which client holds which queue)."""

from __future__ import annotations

import argparse
import json

from broker.cli.mqadmin.lookup import require_group, require_topic, target_masters
from broker.cli.mqadmin.registry import UnknownName, arg, command
from broker.client.admin import Admin
from broker.client.admin.views import (
    ConnectionInfo,
    ConsumerConnection,
    consumer_connection,
    consumer_running_info,
    producer_connection,
)
from broker.client.errors import BrokerResponseError, BrokerSystemError, ConsumerNotOnline
from broker.client.message import MessageQueue

# MQVersion.Version ordinals: V3_0_0_SNAPSHOT is 0, V4_0_0 is 213, then a SNAPSHOT and a release per version
V4_0_0 = 213


def version_desc(ordinal: int) -> str:
    """RocketMQ's MQVersion.getVersionDesc for 4.x and 5.x clients (e.g. 479 -> V5_3_3)."""
    if ordinal < V4_0_0 - 1:
        return f"V3({ordinal})"
    release = ordinal if (ordinal - V4_0_0) % 2 == 0 else ordinal + 1
    k = (release - V4_0_0) // 2
    name = f"V{4 + k // 100}_{k % 100 // 10}_{k % 10}"
    return name if release == ordinal else f"{name}_SNAPSHOT"


async def find_consumer_connection(admin: Admin, group: str, broker_addr: str | None = None) -> ConsumerConnection:
    """The group's online consumers, from `broker_addr` or the first master that has any."""
    addrs = [broker_addr] if broker_addr else (await admin.cluster_info()).masters()
    for addr in addrs:
        try:
            cc = await consumer_connection(admin.instance.api, addr, group)
        except ConsumerNotOnline:
            continue
        if cc.connections:
            return cc
    raise UnknownName(f"consumer group {group} has no consumer online (consumerProgress shows its committed offsets)")


async def group_summary(admin: Admin, group: str) -> tuple[int, str, str, str]:
    """(client count, oldest client version or OFFLINE, PUSH|PULL, model) as consumerProgress lists groups."""
    try:
        cc = await find_consumer_connection(admin, group)
    except (UnknownName, BrokerResponseError):
        return 0, "OFFLINE", "", ""
    kind = "PULL" if cc.consume_type == "CONSUME_ACTIVELY" else "PUSH" if cc.consume_type else ""
    return len(cc.connections), version_desc(min(c.version for c in cc.connections)), kind, cc.message_model


async def allocation(admin: Admin, group: str) -> dict[MessageQueue, str]:
    """Which client (by address) holds each queue, from each online client's running info; {} when the
    group is offline or its clients do not report it."""
    owners: dict[MessageQueue, str] = {}
    try:
        cc = await find_consumer_connection(admin, group)
    except (UnknownName, BrokerResponseError):
        return owners
    master = (await admin.cluster_info()).masters()[0]
    for conn in cc.connections:
        try:
            info = await consumer_running_info(admin.instance.api, master, group, conn.client_id)
        except BrokerResponseError:
            continue
        for key in info.get("mqTable") or {}:
            topic, broker, qid = (
                getattr(key, "topic", None),
                getattr(key, "broker_name", None),
                getattr(key, "queue_id", None),
            )
            if topic is not None and broker is not None and qid is not None:
                owners[MessageQueue(topic, broker, qid)] = conn.client_addr.split(":")[0]
    return owners


def _plain(value: object) -> object:
    """JSON-printable: fastjson's object keys (queues) become their text."""
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@command(
    "consumerConnection",
    "A consumer group's online clients and subscriptions",
    arg("-g", dest="consumerGroup", required=True, help="consumer group"),
    arg("-b", dest="brokerAddr", help="ask this broker (ip:port)"),
)
async def run_consumerConnection(args: argparse.Namespace, admin: Admin) -> int:
    await require_group(admin, args.consumerGroup)
    if args.brokerAddr:
        await target_masters(admin, args.brokerAddr, None, all_brokers=True)
    cc = await find_consumer_connection(admin, args.consumerGroup, args.brokerAddr)
    print(f"{'#ClientId':<36} {'#ClientAddr':<22} {'#Language':<10} #Version")
    for i, c in enumerate(cc.connections, 1):
        print(f"{i:03d}  {c.client_id:<36} {c.client_addr:<22} {c.language:<10} {version_desc(c.version)}")
    print("\nBelow is subscription:")
    print(f"{'#Topic':<20} #SubExpression")
    for i, (topic, expression) in enumerate(cc.subscriptions.items(), 1):
        print(f"{i:03d}  {topic:<20} {expression}")
    print()
    print(f"ConsumeType: {cc.consume_type}")
    print(f"MessageModel: {cc.message_model}")
    print(f"ConsumeFromWhere: {cc.consume_from_where}")
    return 0


@command(
    "producerConnection",
    "A producer group's clients connected to the brokers of a topic",
    arg("-g", dest="producerGroup", required=True, help="producer group"),
    arg("-t", dest="topic", required=True, help="topic name"),
)
async def run_producerConnection(args: argparse.Namespace, admin: Admin) -> int:
    route = await require_topic(admin, args.topic)
    seen: dict[str, ConnectionInfo] = {}
    for addr in sorted(route.master_addrs()):
        try:
            conns = await producer_connection(admin.instance.api, addr, args.producerGroup)
        except BrokerSystemError as exc:
            if "not exist" not in str(exc):  # RocketMQ's answer for a group with no producer there
                raise
            conns = []
        for c in conns:
            seen.setdefault(c.client_id, c)
    if not seen:
        raise UnknownName(
            f"producer group {args.producerGroup} has no producer connected to the brokers of {args.topic}"
        )
    for i, c in enumerate(sorted(seen.values(), key=lambda c: c.client_id), 1):
        print(f"{i:04d}  {c.client_id:<32} {c.client_addr:<22} {c.language:<8} {version_desc(c.version)}")
    return 0


@command(
    "consumerStatus",
    "Each online consumer's running state (subscriptions, queues held, settings), as the client reports it",
    arg("-g", dest="consumerGroup", required=True, help="consumer group"),
    arg("-i", dest="clientId", help="print this client's full running info"),
    arg("-b", dest="brokerAddr", help="ask through this broker (ip:port)"),
    arg("-s", dest="jstack", action="store_true", help="ask for the client's thread stacks"),
)
async def run_consumerStatus(args: argparse.Namespace, admin: Admin) -> int:
    await require_group(admin, args.consumerGroup)
    cc = await find_consumer_connection(admin, args.consumerGroup, args.brokerAddr)
    addr = args.brokerAddr or (await admin.cluster_info()).masters()[0]
    api = admin.instance.api
    if args.clientId:
        if args.clientId not in {c.client_id for c in cc.connections}:
            raise UnknownName(
                f"client {args.clientId} is not an online consumer of {args.consumerGroup} (see consumerConnection)"
            )
        info = await consumer_running_info(api, addr, args.consumerGroup, args.clientId, args.jstack)
        print(json.dumps(_plain(info), indent=2, sort_keys=True, default=str))
        return 0
    for i, c in enumerate(cc.connections, 1):
        info = await consumer_running_info(api, addr, args.consumerGroup, c.client_id, args.jstack)
        queues = len(info.get("mqTable") or {})
        subs = ", ".join(sorted(str(s.get("topic")) for s in info.get("subscriptionSet") or []))
        print(f"{i:03d}  {c.client_id:<40} {version_desc(c.version):<20} queues={queues} subscriptions=[{subs}]")
    return 0
