"""statsAll: per topic and consuming group, the lag, the in/out TPS and the last 24 hours' message counts.

The TPS and counts come from the brokers' statistics (VIEW_BROKER_STATS_DATA, 315: TOPIC_PUT_NUMS and
GROUP_GET_NUMS); a broker that does not answer it gets "N/A" there instead of a made-up zero.
"""

from __future__ import annotations

import argparse

from broker.cli.mqadmin.group_progress import group_stats
from broker.cli.mqadmin.groups_of import groups_of_topic
from broker.cli.mqadmin.lookup import require_topic
from broker.cli.mqadmin.output import progress
from broker.cli.mqadmin.registry import arg, command
from broker.client.admin import Admin
from broker.client.admin.views import BrokerStatsItem, view_broker_stats
from broker.client.errors import BrokerResponseError
from broker.client.route import TopicRouteData

ROW = "{:<64}  {:<64} {:>12} {:>11} {:>11} {:>14} {:>14}"


def _day_sum(stats: dict[str, BrokerStatsItem]) -> int:
    """RocketMQ's compute24HourSum: the day's sum, else the hour's, else the minute's."""
    for span in ("day", "hour", "minute"):
        if stats[span].sum:
            return stats[span].sum
    return 0


async def _traffic(admin: Admin, route: TopicRouteData, name: str, key: str) -> tuple[float, int] | None:
    """(TPS, 24 h count) summed over the topic's masters; None when no broker keeps the statistic."""
    tps, total, answered = 0.0, 0, False
    for addr in sorted(route.master_addrs()):
        try:
            stats = await view_broker_stats(admin.instance.api, addr, name, key)
        except BrokerResponseError:
            continue
        answered = True
        tps += stats["minute"].tps
        total += _day_sum(stats)
    return (tps, total) if answered else None


@command(
    "statsAll",
    "Every topic's consumer groups with their lag, TPS and 24-hour counts",
    arg("-a", dest="activeTopic", action="store_true", help="only topics with traffic in the last 24 hours"),
    arg("-t", dest="topic", help="only this topic"),
)
async def run_statsAll(args: argparse.Namespace, admin: Admin) -> int:
    if args.topic:
        await require_topic(admin, args.topic)
    topics = [args.topic] if args.topic else sorted(await admin.topic_list())
    topics = [t for t in topics if not t.startswith(("%RETRY%", "%DLQ%"))]
    print(
        ROW.format("#Topic", "#Consumer Group", "#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour", "#OutMsg24Hour")
    )
    with progress("reading statistics", len(topics)) as bar:
        for topic in topics:
            await _topic_rows(admin, topic, args.activeTopic)
            bar.advance()
    return 0


async def _topic_rows(admin: Admin, topic: str, active_only: bool) -> None:
    route = await admin.topic_route(topic)
    put = await _traffic(admin, route, "TOPIC_PUT_NUMS", topic)
    in_tps, in_day = (f"{put[0]:.2f}", put[1]) if put else ("N/A", None)
    groups = await groups_of_topic(admin, topic)
    if not groups:
        if not active_only or (in_day or 0) > 0:
            print(ROW.format(topic, "", 0, in_tps, "", "N/A" if in_day is None else in_day, "NO_CONSUMER"))
        return
    for group in groups:
        got = await _traffic(admin, route, "GROUP_GET_NUMS", f"{topic}@{group}")
        out_tps, out_day = (f"{got[0]:.2f}", got[1]) if got else ("N/A", None)
        stats = await group_stats(admin, group, topic)
        lag = max(0, sum(q.diff for mq, q in stats.queues.items() if mq.topic == topic))
        if active_only and not (in_day or out_day):
            continue
        print(
            ROW.format(
                topic,
                group,
                lag,
                in_tps,
                out_tps,
                "N/A" if in_day is None else in_day,
                "N/A" if out_day is None else out_day,
            )
        )
