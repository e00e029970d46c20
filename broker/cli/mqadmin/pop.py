"""POP commands: setConsumeMode (RocketMQ's SetConsumeModeSubCommand)."""

from __future__ import annotations

import argparse

import orjson

from broker.cli.mqadmin.lookup import target_masters
from broker.cli.mqadmin.registry import arg, command
from broker.client.admin import Admin
from broker.client.errors import for_code
from broker.protocol.codes import LanguageCode, RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand


@command(
    "setConsumeMode",
    "Make a consumer group consume a topic by PULL or by POP (server-side assignment, 5.x clients)",
    arg("-b", dest="brokerAddr", help="on this broker (ip:port)"),
    arg("-c", dest="clusterName", help="on every master of this cluster"),
    arg("-t", dest="topicName", required=True, help="topic name"),
    arg("-g", dest="groupName", required=True, help="consumer group"),
    arg("-m", dest="mode", required=True, choices=("PULL", "POP"), help="PULL or POP"),
    arg("-q", dest="popShareQueueNum", type=int, default=0, help="POP: queues shared by this many clients (0 = all)"),
)
async def run_setConsumeMode(args: argparse.Namespace, admin: Admin) -> int:
    body = orjson.dumps(
        {
            "topic": args.topicName,
            "consumerGroup": args.groupName,
            "mode": args.mode,
            "popShareQueueNum": args.popShareQueueNum,
        }
    )
    for addr in await target_masters(admin, args.brokerAddr, args.clusterName):
        cmd = RemotingCommand(
            code=RequestCode.SET_MESSAGE_REQUEST_MODE, ext_fields={}, body=body, language=LanguageCode.PYTHON
        )
        resp = await admin.instance.api.invoke(addr, cmd)
        if resp.code != ResponseCode.SUCCESS:
            raise for_code(resp.code, resp.remark, addr)
        print(f"set consume mode to {addr} success.")
    print(f"topic[{args.topicName}] group[{args.groupName}] consume mode[{args.mode}] "
          f"popShareQueueNum[{args.popShareQueueNum}]")  # fmt: skip
    return 0
