"""`mqadmin`: RocketMQ's admin command line, with its subcommand names, flags and meanings.

A RocketMQ operator types the commands they know (`mqadmin clusterList -n host:9876`, `updateTopic`,
`consumerProgress`, `queryMsgByOffset`, `consumeMessage`...). One module per family of commands registers
them (registry); each is a small coroutine over the admin client (broker.client.admin and the request
modules beside it); main parses, runs and maps failures to exit statuses. `-n` defaults to NAMESRV_ADDR, as
in RocketMQ (or `python -X rocketmq.namesrv.addr=... -m broker.cli.mqadmin`). docs/mqadmin.md lists every
command and each difference from RocketMQ.
"""

from __future__ import annotations

from broker.cli.mqadmin.main import build_parser, main
from broker.cli.mqadmin.timestamps import parse_reset_timestamp

__all__ = ["build_parser", "main", "parse_reset_timestamp"]
