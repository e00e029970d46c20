"""The ACL 2.0 admin requests 3001-3010 (RocketMQ 5.3 `AdminBrokerProcessor`): users and ACLs over the wire.

The broker registers `AuthAdmin.routes()` (broker/server/broker.py); Java's mqadmin 5.3.3 (`createUser`,
`updateUser`, `deleteUser`, `getUser`, `listUser`, `createAcl`, `updateAcl`, `deleteAcl`, `getAcl`,
`listAcl`) and ours (broker/cli/mqadmin) send them. Headers: `username` (users), `filter` (LIST_USER),
`subject`, `policyType`, `resource` (ACLs), `subjectFilter`, `resourceFilter` (LIST_ACL). Bodies are
RocketMQ's JSON `UserInfo` and `AclInfo`. Refusals from the rules of the store (`AuthError`) answer
NO_PERMISSION with the rule's message, as RocketMQ's handleAuthException does; only a SUPER user may create,
change or delete a SUPER user when the request is signed. The requests are allowed on a slave too but change
only its copy, which the next sync from the master replaces (broker/server/slave_sync.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import orjson

from broker.auth.model import Acl, AuthError, PolicyType, Resource, User, UserStatus, UserType
from broker.auth.store import AuthStore
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.fastjson import FastjsonError, loads
from broker.protocol.signature import ACCESS_KEY

__all__ = ["AuthAdmin"]

log = logging.getLogger(__name__)

Handler = Callable[[Any, RemotingCommand], RemotingCommand]


def _body(cmd: RemotingCommand) -> Any:
    if not cmd.body:
        return None
    try:
        return loads(cmd.body)
    except FastjsonError as exc:
        raise AuthError(f"The body is not JSON: {exc}") from None


class AuthAdmin:
    def __init__(self, store: AuthStore, on_change: Callable[[], None] | None = None) -> None:
        self.store = store
        self.on_change = on_change

    def routes(self) -> dict[int, Handler]:
        rc = RequestCode
        return {
            rc.AUTH_CREATE_USER: self.create_user,
            rc.AUTH_UPDATE_USER: self.update_user,
            rc.AUTH_DELETE_USER: self.delete_user,
            rc.AUTH_GET_USER: self.get_user,
            rc.AUTH_LIST_USER: self.list_user,
            rc.AUTH_CREATE_ACL: self.put_acl,
            rc.AUTH_UPDATE_ACL: self.put_acl,
            rc.AUTH_DELETE_ACL: self.delete_acl,
            rc.AUTH_GET_ACL: self.get_acl,
            rc.AUTH_LIST_ACL: self.list_acl,
        }

    # ------------------------------------------------------------------ helpers

    def _run(self, cmd: RemotingCommand, action: Callable[[], bytes | None], what: str) -> RemotingCommand:
        try:
            body = action()
        except AuthError as exc:
            log.info("%s refused: %s", what, exc)
            return cmd.response(ResponseCode.NO_PERMISSION, str(exc))
        except OSError as exc:
            log.error("%s failed writing the auth files: %s", what, exc)
            return cmd.response(ResponseCode.SYSTEM_ERROR, "An system error occurred, please try again later.")
        return cmd.response(ResponseCode.SUCCESS, None, body=body or b"")

    def _not_super(self, cmd: RemotingCommand) -> bool:
        """isNotSuperUserLogin: a signed request by a non-SUPER user (unsigned: authentication is off)."""
        access_key = cmd.ext_fields.get(ACCESS_KEY) or ""
        return access_key != "" and not self.store.is_super(access_key)

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    # ------------------------------------------------------------------ users

    def create_user(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        username = cmd.ext_fields.get("username") or ""
        if not username:
            return cmd.response(ResponseCode.INVALID_PARAMETER, "The username is blank")

        def create() -> None:
            user = User.from_json(_body(cmd) or {}, username)
            if user.is_super and self._not_super(cmd):
                raise _SuperOnly("The super user can only be create by super user")
            self.store.create_user(user)
            log.info("created %s user %s", user.user_type.label, user.username)
            self._changed()

        return self._guarded(cmd, create, f"create user {username}")

    def update_user(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        username = cmd.ext_fields.get("username") or ""
        if not username:
            return cmd.response(ResponseCode.INVALID_PARAMETER, "The username is blank")

        def update() -> None:
            data = _body(cmd) or {}
            if not isinstance(data, dict):
                raise AuthError("The body of user is not a JSON object")
            user_type = UserType.parse(data.get("userType"))
            if user_type is UserType.SUPER and self._not_super(cmd):
                raise _SuperOnly("The super user can only be update by super user")
            old = self.store.user(username)
            if old is not None and old.is_super and self._not_super(cmd):
                raise AuthError("The super user can only be update by super user")
            password = data.get("password")
            self.store.update_user(
                username, "" if password is None else str(password), user_type, UserStatus.parse(data.get("userStatus"))
            )
            log.info("updated user %s", username)
            self._changed()

        return self._guarded(cmd, update, f"update user {username}")

    def delete_user(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        username = cmd.ext_fields.get("username") or ""

        def delete() -> None:
            old = self.store.user(username)
            if old is not None and old.is_super and self._not_super(cmd):
                raise AuthError("The super user can only be update by super user")
            self.store.delete_user(username)
            log.info("deleted user %s", username)
            self._changed()

        return self._run(cmd, delete, f"delete user {username}")

    def get_user(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        username = cmd.ext_fields.get("username") or ""
        if not username.strip():
            return cmd.response(ResponseCode.INVALID_PARAMETER, "The username is blank")
        user = self.store.user(username)
        return cmd.response(ResponseCode.SUCCESS, None, body=orjson.dumps(user.to_json()) if user else b"")

    def list_user(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        users = self.store.list_users(cmd.ext_fields.get("filter"))
        body = orjson.dumps([u.to_json() for u in users]) if users else b""
        return cmd.response(ResponseCode.SUCCESS, None, body=body)

    # ------------------------------------------------------------------ ACLs

    def put_acl(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        subject = cmd.ext_fields.get("subject")

        def put() -> None:
            acl = Acl.from_json(_body(cmd), subject)
            self.store.put_acl(acl)
            log.info("updated the ACL of %s", acl.subject)
            self._changed()

        return self._run(cmd, put, f"put acl {subject}")

    def delete_acl(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        fields = cmd.ext_fields
        subject = fields.get("subject")

        def delete() -> None:
            raw_type = fields.get("policyType")
            policy_type = PolicyType.parse(raw_type) if raw_type else None
            raw_resource = fields.get("resource")
            resource = Resource.parse(raw_resource) if raw_resource else None
            self.store.delete_acl(subject or "", policy_type, resource)
            log.info("deleted from the ACL of %s: %s", subject, raw_resource or "everything")
            self._changed()

        return self._run(cmd, delete, f"delete acl {subject}")

    def get_acl(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        subject = cmd.ext_fields.get("subject")

        def get() -> bytes | None:
            acl = self.store.acl(subject or "")
            return orjson.dumps(acl.to_json()) if acl is not None else None

        return self._run(cmd, get, f"get acl {subject}")

    def list_acl(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        fields = cmd.ext_fields
        acls = self.store.list_acls(fields.get("subjectFilter"), fields.get("resourceFilter"))
        body = orjson.dumps([a.to_json() for a in acls]) if acls else b""
        return cmd.response(ResponseCode.SUCCESS, None, body=body)

    def _guarded(self, cmd: RemotingCommand, action: Callable[[], None], what: str) -> RemotingCommand:
        try:
            return self._run(cmd, action, what)
        except _SuperOnly as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))


class _SuperOnly(Exception):
    """RocketMQ answers SYSTEM_ERROR (not NO_PERMISSION) when a non-SUPER user creates a SUPER one."""
