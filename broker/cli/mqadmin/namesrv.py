"""NameServer commands: getNamesrvConfig, updateNamesrvConfig, updateKvConfig, deleteKvConfig."""

from __future__ import annotations

import argparse

from broker.cli.mqadmin.registry import UnknownName, arg, command
from broker.client.admin import Admin, changes


@command("getNamesrvConfig", "Print every NameServer's configuration")
async def run_getNamesrvConfig(args: argparse.Namespace, admin: Admin) -> int:
    for ns in admin.instance.namesrvs:
        props = await changes.get_namesrv_config(admin.instance.api, ns)
        print(f"============{ns}============")
        for key, value in props.items():
            print(f"{key:<50}=  {value}")
    return 0


@command(
    "updateNamesrvConfig",
    "Change one NameServer configuration key at runtime on every NameServer",
    arg("-k", dest="key", required=True, help="config key, RocketMQ's name"),
    arg("-v", dest="value", required=True, help="config value"),
)
async def run_updateNamesrvConfig(args: argparse.Namespace, admin: Admin) -> int:
    for ns in admin.instance.namesrvs:
        await changes.update_namesrv_config(admin.instance.api, ns, {args.key: args.value})
    print(f"update name server config success!{admin.instance.namesrvs}\n{args.key} : {args.value}")
    return 0


@command(
    "updateKvConfig",
    "Create or update a KV config entry on every NameServer",
    arg("-s", dest="namespace", required=True, help="namespace"),
    arg("-k", dest="key", required=True, help="key"),
    arg("-v", dest="value", required=True, help="value"),
)
async def run_updateKvConfig(args: argparse.Namespace, admin: Admin) -> int:
    for ns in admin.instance.namesrvs:
        await changes.put_kv_config(admin.instance.api, ns, args.namespace, args.key, args.value)
    print("create or update kv config to namespace success.")
    return 0


@command(
    "deleteKvConfig",
    "Delete a KV config entry from every NameServer",
    arg("-s", dest="namespace", required=True, help="namespace"),
    arg("-k", dest="key", required=True, help="key"),
)
async def run_deleteKvConfig(args: argparse.Namespace, admin: Admin) -> int:
    api = admin.instance.api
    if await admin.instance.namesrv_call(lambda ns: changes.get_kv_config(api, ns, args.namespace, args.key)) is None:
        raise UnknownName(f"the NameServer has no KV config {args.key} in namespace {args.namespace}")
    for ns in admin.instance.namesrvs:
        await changes.delete_kv_config(admin.instance.api, ns, args.namespace, args.key)
    print("delete kv config from namespace success.")
    return 0
