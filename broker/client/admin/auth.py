"""The ACL 2.0 admin requests (AUTH_* 3001-3010, RocketMQ 5.3), one function per request, for mqadmin's
createUser ... listAcl (broker/cli/mqadmin/auth.py) and the operator's admin client.

Bodies are RocketMQ's `UserInfo` and `AclInfo` JSON; a refusal raises the SDK's error for its code
(`NoPermission` for 16) with the broker's remark, which never holds a secret. The request itself is signed by
the client's credentials (ClientConfig.credentials), not by anything here.
"""

from __future__ import annotations

from typing import Any

import orjson

from broker.client.api import ClientAPI
from broker.client.errors import for_code
from broker.protocol.bodies import fastjson_loads as loads
from broker.protocol.codes import LanguageCode, RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand

__all__ = [
    "acl_info",
    "create_acl",
    "create_user",
    "delete_acl",
    "delete_user",
    "get_acl",
    "get_user",
    "list_acls",
    "list_users",
    "update_acl",
    "update_user",
]


async def _call(api: ClientAPI, addr: str, code: int, ext: dict[str, str], body: bytes = b"") -> Any:
    cmd = RemotingCommand(code=code, ext_fields=ext, body=body, language=LanguageCode.PYTHON)
    resp = await api.invoke(addr, cmd)
    if resp.code != ResponseCode.SUCCESS:
        raise for_code(resp.code, resp.remark, addr)
    return loads(resp.body) if resp.body else None


def _user(username: str, password: str | None, user_type: str | None, user_status: str | None) -> bytes:
    data: dict[str, str] = {"username": username}
    if password is not None:
        data["password"] = password
    if user_type:
        data["userType"] = user_type
    if user_status:
        data["userStatus"] = user_status
    return orjson.dumps(data)


async def create_user(api: ClientAPI, addr: str, username: str, password: str, user_type: str | None = None) -> None:
    await _call(
        api, addr, RequestCode.AUTH_CREATE_USER, {"username": username}, _user(username, password, user_type, None)
    )


async def update_user(
    api: ClientAPI,
    addr: str,
    username: str,
    password: str | None = None,
    user_type: str | None = None,
    user_status: str | None = None,
) -> None:
    body = _user(username, password, user_type, user_status)
    await _call(api, addr, RequestCode.AUTH_UPDATE_USER, {"username": username}, body)


async def delete_user(api: ClientAPI, addr: str, username: str) -> None:
    await _call(api, addr, RequestCode.AUTH_DELETE_USER, {"username": username})


async def get_user(api: ClientAPI, addr: str, username: str) -> dict[str, Any] | None:
    """UserInfo (password included, as RocketMQ answers it), or None when there is no such user."""
    data = await _call(api, addr, RequestCode.AUTH_GET_USER, {"username": username})
    return data if isinstance(data, dict) else None


async def list_users(api: ClientAPI, addr: str, filter_text: str | None = None) -> list[dict[str, Any]]:
    ext = {"filter": filter_text} if filter_text else {}
    data = await _call(api, addr, RequestCode.AUTH_LIST_USER, ext)
    return [u for u in data if isinstance(u, dict)] if isinstance(data, list) else []


def acl_info(
    subject: str, resources: list[str], actions: list[str], source_ips: list[str] | None, decision: str
) -> dict[str, Any]:
    """AclInfo.of: one CUSTOM policy with one entry per resource."""
    entries = []
    for resource in resources:
        entry: dict[str, Any] = {"resource": resource, "actions": actions, "decision": decision}
        if source_ips:
            entry["sourceIps"] = source_ips
        entries.append(entry)
    return {"subject": subject, "policies": [{"policyType": "Custom", "entries": entries}]}


async def create_acl(api: ClientAPI, addr: str, acl: dict[str, Any]) -> None:
    await _call(api, addr, RequestCode.AUTH_CREATE_ACL, {"subject": acl["subject"]}, orjson.dumps(acl))


async def update_acl(api: ClientAPI, addr: str, acl: dict[str, Any]) -> None:
    await _call(api, addr, RequestCode.AUTH_UPDATE_ACL, {"subject": acl["subject"]}, orjson.dumps(acl))


async def delete_acl(
    api: ClientAPI, addr: str, subject: str, resource: str | None = None, policy_type: str | None = None
) -> None:
    ext = {"subject": subject}
    if resource:
        ext["resource"] = resource
    if policy_type:
        ext["policyType"] = policy_type
    await _call(api, addr, RequestCode.AUTH_DELETE_ACL, ext)


async def get_acl(api: ClientAPI, addr: str, subject: str) -> dict[str, Any] | None:
    data = await _call(api, addr, RequestCode.AUTH_GET_ACL, {"subject": subject})
    return data if isinstance(data, dict) else None


async def list_acls(
    api: ClientAPI, addr: str, subject_filter: str | None = None, resource_filter: str | None = None
) -> list[dict[str, Any]]:
    ext: dict[str, str] = {}
    if subject_filter:
        ext["subjectFilter"] = subject_filter
    if resource_filter:
        ext["resourceFilter"] = resource_filter
    data = await _call(api, addr, RequestCode.AUTH_LIST_ACL, ext)
    return [a for a in data if isinstance(a, dict)] if isinstance(data, list) else []
