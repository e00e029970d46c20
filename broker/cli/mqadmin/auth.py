"""mqadmin's ACL 2.0 commands, as RocketMQ 5.3.3's tools spell them: createUser, updateUser, deleteUser,
getUser, listUser, createAcl, updateAcl, deleteAcl, getAcl, listAcl, each on one broker (-b) or every master
of a cluster (-c). The requests (broker.client.admin.auth) are signed with the credentials of
$ROCKETMQ_HOME/conf/tools.yml, as RocketMQ's tools sign theirs (broker/cli/mqadmin/main.py).
"""

from __future__ import annotations

import argparse
from typing import Any

from broker.cli.mqadmin.lookup import target_masters
from broker.cli.mqadmin.registry import UsageError, arg, command
from broker.client.admin import Admin
from broker.client.admin import auth as admin_auth

__all__: list[str] = []

FORMAT_USER = "{:<20}  {:<20}  {:<10}  {:<10}"
FORMAT_ACL = "{:<24}  {:<10}  {:<30}  {:<24}  {:<20}  {:<8}"


def _target_args(what: str) -> tuple[Any, Any]:
    return (
        arg("-b", "--brokerAddr", dest="brokerAddr", help=f"{what} which broker (ip:port)"),
        arg("-c", "--clusterName", dest="clusterName", help=f"{what} every master of this cluster"),
    )


async def _targets(args: argparse.Namespace, admin: Admin) -> list[str]:
    if args.brokerAddr and args.clusterName:
        raise UsageError("give either -b brokerAddr or -c clusterName, not both")
    return await target_masters(admin, args.brokerAddr, args.clusterName)


def _list(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


@command(
    "createUser",
    "Create an ACL 2.0 user on a broker or on every master of a cluster",
    *_target_args("create user to"),
    arg("-u", "--username", dest="username", required=True, help="the username of user to create"),
    arg("-p", "--password", dest="password", required=True, help="the password of user to create"),
    arg("-t", "--userType", dest="userType", help="Super or Normal (Normal)"),
)
async def run_createUser(args: argparse.Namespace, admin: Admin) -> int:
    for addr in await _targets(args, admin):
        await admin_auth.create_user(admin.instance.api, addr, args.username, args.password, args.userType)
        print(f"create user to {addr} success.")
    return 0


@command(
    "updateUser",
    "Change a user's password, type or status",
    *_target_args("update user to"),
    arg("-u", "--username", dest="username", required=True, help="the username of user to update"),
    arg("-p", "--password", dest="password", help="the new password"),
    arg("-t", "--userType", dest="userType", help="Super or Normal"),
    arg("-s", "--userStatus", dest="userStatus", help="enable or disable"),
)
async def run_updateUser(args: argparse.Namespace, admin: Admin) -> int:
    if not (args.password or args.userType or args.userStatus):
        raise UsageError("give -p password, -t userType or -s userStatus")
    for addr in await _targets(args, admin):
        await admin_auth.update_user(
            admin.instance.api, addr, args.username, args.password, args.userType, args.userStatus
        )
        print(f"update user to {addr} success.")
    return 0


@command(
    "deleteUser",
    "Delete a user (and its ACL)",
    *_target_args("delete user from"),
    arg("-u", "--username", dest="username", required=True, help="the username of user to delete"),
)
async def run_deleteUser(args: argparse.Namespace, admin: Admin) -> int:
    for addr in await _targets(args, admin):
        await admin_auth.delete_user(admin.instance.api, addr, args.username)
        print(f"delete user from {addr} success.")
    return 0


@command(
    "getUser",
    "Print a user (its password is shown masked)",
    *_target_args("get user from"),
    arg("-u", "--username", dest="username", required=True, help="the username of user to get"),
)
async def run_getUser(args: argparse.Namespace, admin: Admin) -> int:
    for addr in await _targets(args, admin):
        user = await admin_auth.get_user(admin.instance.api, addr, args.username)
        print(FORMAT_USER.format("#UserName", "#Password", "#UserType", "#UserStatus"))
        if user is not None:
            print(_user_row(user))
    return 0


def _user_row(user: dict[str, Any]) -> str:
    # RocketMQ prints the password; a terminal and a shell history are no place for it
    shown = "******" if user.get("password") else ""
    return FORMAT_USER.format(str(user.get("username")), shown, str(user.get("userType")), str(user.get("userStatus")))


@command(
    "listUser",
    "List the users of a broker",
    *_target_args("list user of"),
    arg("-f", "--filter", dest="filter", help="only names containing this"),
)
async def run_listUser(args: argparse.Namespace, admin: Admin) -> int:
    for addr in await _targets(args, admin):
        print(FORMAT_USER.format("#UserName", "#Password", "#UserType", "#UserStatus"))
        for user in await admin_auth.list_users(admin.instance.api, addr, args.filter):
            print(_user_row(user))
    return 0


def _acl_arguments(verb: str) -> tuple[Any, ...]:
    return (
        *_target_args(f"{verb} acl to"),
        arg("-s", "--subject", dest="subject", required=True, help="User:<name>"),
        arg("-r", "--resources", dest="resources", required=True, help="Topic:x, Topic:pre*, Group:g, *, comma list"),
        arg("-a", "--actions", dest="actions", required=True, help="Pub, Sub, Create, Update, Delete, Get, List, All"),
        arg("-d", "--decision", dest="decision", required=True, help="Allow or Deny"),
        arg("-i", "--sourceIp", dest="sourceIp", help="source IPs or CIDR blocks, comma list"),
    )


async def _put_acl(args: argparse.Namespace, admin: Admin, update: bool) -> int:
    acl = admin_auth.acl_info(
        args.subject, _list(args.resources), _list(args.actions), _list(args.sourceIp) or None, args.decision
    )
    for addr in await _targets(args, admin):
        if update:
            await admin_auth.update_acl(admin.instance.api, addr, acl)
            print(f"update acl to {addr} success.")
        else:
            await admin_auth.create_acl(admin.instance.api, addr, acl)
            print(f"create acl to {addr} success.")
    return 0


@command("createAcl", "Create ACL entries for a subject", *_acl_arguments("create"))
async def run_createAcl(args: argparse.Namespace, admin: Admin) -> int:
    return await _put_acl(args, admin, update=False)


@command("updateAcl", "Change ACL entries of a subject", *_acl_arguments("update"))
async def run_updateAcl(args: argparse.Namespace, admin: Admin) -> int:
    return await _put_acl(args, admin, update=True)


@command(
    "deleteAcl",
    "Delete a subject's ACL, or only its entries for some resources",
    *_target_args("delete acl from"),
    arg("-s", "--subject", dest="subject", required=True, help="User:<name>"),
    arg("-r", "--resources", dest="resources", help="only these resources (comma list)"),
)
async def run_deleteAcl(args: argparse.Namespace, admin: Admin) -> int:
    for addr in await _targets(args, admin):
        resources: list[str | None] = [*_list(args.resources)] or [None]
        for resource in resources:
            await admin_auth.delete_acl(admin.instance.api, addr, args.subject, resource)
        print(f"delete acl from {addr} success.")
    return 0


def _print_acls(acls: list[dict[str, Any]]) -> None:
    print(FORMAT_ACL.format("#Subject", "#PolicyType", "#Resource", "#Actions", "#SourceIp", "#Decision"))
    for acl in acls:
        subject = str(acl.get("subject"))
        for policy in acl.get("policies") or []:
            for entry in policy.get("entries") or []:
                print(
                    FORMAT_ACL.format(
                        subject,
                        str(policy.get("policyType")),
                        str(entry.get("resource")),
                        ",".join(entry.get("actions") or []),
                        ",".join(entry.get("sourceIps") or []),
                        str(entry.get("decision")),
                    )
                )


@command(
    "getAcl",
    "Print a subject's ACL",
    *_target_args("get acl from"),
    arg("-s", "--subject", dest="subject", required=True, help="User:<name>"),
)
async def run_getAcl(args: argparse.Namespace, admin: Admin) -> int:
    for addr in await _targets(args, admin):
        acl = await admin_auth.get_acl(admin.instance.api, addr, args.subject)
        _print_acls([acl] if acl else [])
    return 0


@command(
    "listAcl",
    "List the ACLs of a broker",
    *_target_args("list acl of"),
    arg("-s", "--subject", dest="subject", help="only subjects containing this"),
    arg("-r", "--resource", dest="resource", help="only entries whose resource contains this"),
)
async def run_listAcl(args: argparse.Namespace, admin: Admin) -> int:
    for addr in await _targets(args, admin):
        _print_acls(await admin_auth.list_acls(admin.instance.api, addr, args.subject, args.resource))
    return 0
