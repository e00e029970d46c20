"""Controller-mode commands: getControllerMetaData, getSyncStateSet, getBrokerEpoch, electMaster,
cleanBrokerMetadata (RocketMQ 5.3's names, flags and output lines).

`-a` names the controllers (`;`-separated peer addresses); the requests that only the leader answers go to
the leader that CONTROLLER_GET_METADATA_INFO names (broker.controller.client).
"""

from __future__ import annotations

import argparse
from typing import Any

import orjson

from broker.cli.mqadmin.registry import UnknownName, UsageError, arg, command
from broker.client.admin import Admin
from broker.controller.client import ControllerClient, split_addresses
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand

_LONG_MAX = 2**63 - 1


class ControllerRefused(UnknownName):
    """The controller answered with an error code; the message carries its code and remark."""


def _controllers(args: argparse.Namespace) -> ControllerClient:
    addresses = split_addresses(args.controllerAddress or "")
    if not addresses:
        raise UsageError("-a names no controller address")
    return ControllerClient(addresses)


def _check(reply: RemotingCommand, what: str) -> RemotingCommand:
    if reply.code != ResponseCode.SUCCESS:
        raise ControllerRefused(f"{what}: CODE: {reply.code} DESC: {reply.remark or ''}")
    return reply


@command(
    "getControllerMetaData",
    "Get the controller group's metadata: its leader and peers",
    arg("-a", dest="controllerAddress", required=True, help="controller address"),
)
async def run_getControllerMetaData(args: argparse.Namespace, admin: Admin) -> int:
    controllers = _controllers(args)
    try:
        reply = _check(await controllers.metadata(controllers.addresses[0]), "get controller metadata")
    finally:
        await controllers.close()
    fields = reply.ext_fields
    print(f"#ControllerGroup\t{fields.get('group', '')}")
    print(f"#ControllerLeaderId\t{fields.get('controllerLeaderId', '')}")
    print(f"#ControllerLeaderAddress\t{fields.get('controllerLeaderAddress', '')}")
    for peer in (fields.get("peers") or "").split(";"):
        if peer:
            print(f"#Peer:\t{peer}")
    return 0


def _replica(r: dict[str, Any]) -> str:
    return (
        f"ReplicaIdentity{{brokerName='{r.get('brokerName')}', brokerId={r.get('brokerId')}, "
        f"brokerAddress='{r.get('brokerAddress')}', alive={str(r.get('alive')).lower()}}}"
    )


@command(
    "getSyncStateSet",
    "Get the SyncStateSet of broker groups from the controller",
    arg("-a", dest="controllerAddress", required=True, help="controller address"),
    arg("-b", dest="brokerName", help="broker name"),
    arg("-c", dest="clusterName", help="cluster name (needs -n)"),
)
async def run_getSyncStateSet(args: argparse.Namespace, admin: Admin) -> int:
    if args.brokerName:
        names = [args.brokerName]
    elif args.clusterName:
        info = await admin.cluster_info()
        names = sorted(info.clusters.get(args.clusterName, []))
        if not names:
            raise UnknownName(f"cluster {args.clusterName} has no broker group")
    else:
        raise UsageError("give -b brokerName or -c clusterName")
    controllers = _controllers(args)
    try:
        cmd = RemotingCommand(code=RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, body=orjson.dumps(names))
        reply = _check(await controllers.invoke_leader(cmd), "get SyncStateSet")
    finally:
        await controllers.close()
    table = orjson.loads(reply.body).get("replicasInfoTable") or {}
    for name, info in sorted(table.items()):
        in_sync = info.get("inSyncReplicas") or []
        print(f"\n#brokerName\t{name}")
        print(f"#MasterBrokerId\t{info.get('masterBrokerId')}")
        print(f"#MasterAddr\t{info.get('masterAddress')}")
        print(f"#MasterEpoch\t{info.get('masterEpoch')}")
        print(f"#SyncStateSetEpoch\t{info.get('syncStateSetEpoch')}")
        print(f"#SyncStateSetNums\t{len(in_sync)}")
        for replica in in_sync:
            print(f"\nInSyncReplica:\t{_replica(replica)}")
        for replica in info.get("notInSyncReplicas") or []:
            print(f"\nNotInSyncReplica:\t{_replica(replica)}")
    return 0


@command(
    "getBrokerEpoch",
    "Get the epoch history of each broker of a group (controller mode)",
    arg("-b", dest="brokerName", help="broker name"),
    arg("-c", dest="clusterName", help="cluster name"),
)
async def run_getBrokerEpoch(args: argparse.Namespace, admin: Admin) -> int:
    info = await admin.cluster_info()
    if args.brokerName:
        names = [args.brokerName]
    elif args.clusterName:
        names = sorted(info.clusters.get(args.clusterName, []))
    else:
        raise UsageError("give -b brokerName or -c clusterName")
    for name in names:
        group = info.brokers.get(name)
        if group is None:
            raise UnknownName(f"broker group {name} is not registered with the NameServer")
        for _broker_id, addr in sorted(group.broker_addrs.items()):
            cmd = RemotingCommand(code=RequestCode.GET_BROKER_EPOCH_CACHE)
            reply = _check(await admin.instance.api.invoke(addr, cmd), f"get epoch of {addr}")
            cache = orjson.loads(reply.body)
            print(f"\n#clusterName\t{cache.get('clusterName')}")
            print(f"#brokerName\t{cache.get('brokerName')}")
            print(f"#brokerAddr\t{addr}")
            print(f"#brokerId\t{cache.get('brokerId')}")
            epochs = cache.get("epochList") or []
            for i, entry in enumerate(epochs):
                end = entry.get("endOffset")
                if i == len(epochs) - 1:
                    end = cache.get("maxOffset", end)
                print(
                    f"#Epoch: EpochEntry{{epoch={entry.get('epoch')}, startOffset={entry.get('startOffset')}, "
                    f"endOffset={end}}}"
                )
    return 0


@command(
    "electMaster",
    "Make a broker of the SyncStateSet the master of its group",
    arg("-a", dest="controllerAddress", required=True, help="controller address"),
    arg("-b", dest="brokerId", required=True, type=int, help="the broker id to elect"),
    arg("-bn", dest="brokerName", required=True, help="broker name"),
    arg("-c", dest="clusterName", required=True, help="cluster name"),
)
async def run_electMaster(args: argparse.Namespace, admin: Admin) -> int:
    controllers = _controllers(args)
    try:
        reply = _check(await controllers.elect_master(args.clusterName, args.brokerName, args.brokerId), "elect master")
    finally:
        await controllers.close()
    out = reply.ext_fields
    print(f"\n#ClusterName\t{args.clusterName}")
    print(f"#BrokerName\t{args.brokerName}")
    print(f"#BrokerMasterAddr\t{out.get('masterAddress', '')}")
    print(f"#MasterEpoch\t{out.get('masterEpoch', '')}")
    print(f"#SyncStateSetEpoch\t{out.get('syncStateSetEpoch', '')}")
    members = (orjson.loads(reply.body).get("brokerMemberGroup") or {}).get("brokerAddrs") or {} if reply.body else {}
    for broker_id, addr in sorted(members.items(), key=lambda kv: int(kv[0])):
        print(f"\t#Broker\t{broker_id}\t{addr}")
    return 0


@command(
    "cleanBrokerMetadata",
    "Remove a broker group, or some of its brokers, from the controller",
    arg("-a", dest="controllerAddress", required=True, help="controller address"),
    arg("-bn", dest="brokerName", required=True, help="broker name"),
    arg("-b", dest="brokerControllerIdsToClean", help="the broker ids to clean, 1;2"),
    arg("-c", dest="clusterName", help="cluster name (required unless -l)"),
    arg("-l", dest="cleanLivingBroker", action="store_true", help="clean brokers that are alive too"),
)
async def run_cleanBrokerMetadata(args: argparse.Namespace, admin: Admin) -> int:
    if not args.cleanLivingBroker and not args.clusterName:
        raise UsageError("-c clusterName is required unless -l")
    ids = args.brokerControllerIdsToClean or ""
    if ids and not all(part.strip().isdigit() for part in ids.split(";") if part.strip()):
        raise UsageError(f"-b {ids!r}: broker ids are numbers separated by ;")
    controllers = _controllers(args)
    fields = {
        "clusterName": args.clusterName or "",
        "brokerName": args.brokerName,
        "brokerControllerIdsToClean": ids,
        "isCleanLivingBroker": "true" if args.cleanLivingBroker else "false",
    }
    try:
        cmd = RemotingCommand(code=RequestCode.CLEAN_BROKER_DATA, ext_fields=fields)
        _check(await controllers.invoke_leader(cmd), "clean broker metadata")
    finally:
        await controllers.close()
    print(f"clear broker {args.brokerName} metadata from controller success! ")
    return 0
