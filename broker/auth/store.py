"""Where a broker keeps its ACL 2.0 users and ACLs: two JSON files under `<storePathRootDir>/config/`.

RocketMQ keeps them in RocksDB (`config/users`, `config/acls`); we keep JSON as we do our other metadata, with
the store's atomic write (`broker.store.config_files.ConfigFile`: temp file, fsync, rename, `.bak`), files
readable by the broker's user only (they hold passwords, as RocketMQ's RocksDB does). The admin requests
(broker/auth/admin.py) change them through the methods here, which apply the rules of RocketMQ's
`AuthenticationMetadataManagerImpl` and `AuthorizationMetadataManagerImpl` and raise `AuthError` with their
messages; a slave replaces both tables with the master's (`replace`, broker/server/slave_sync.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any

from broker.auth.model import Acl, AuthError, PolicyType, Resource, User, UserType, subject_user
from broker.protocol.bodies import DataVersion
from broker.store.config_files import BAK_SUFFIX, ConfigFile

__all__ = ["ACLS_FILE", "USERS_FILE", "AuthStore"]

log = logging.getLogger(__name__)

USERS_FILE = "users.json"
ACLS_FILE = "acls.json"


class AuthStore:
    """Users by name and ACLs by user name; `config_dir` None keeps them in memory only (the NameServer)."""

    def __init__(self, config_dir: Path | None) -> None:
        self.users: dict[str, User] = {}
        self.acls: dict[str, Acl] = {}
        self.data_version = DataVersion()
        #: moves on with every change of either table, however made (a slave's `replace` installs the master's
        #: version, which need not be newer): what the checker's remembered decisions are valid for
        self.generation = 0
        self._users_file = ConfigFile(config_dir / USERS_FILE) if config_dir is not None else None
        self._acls_file = ConfigFile(config_dir / ACLS_FILE) if config_dir is not None else None

    # ------------------------------------------------------------------ files

    def load(self) -> None:
        """Read both files; an entry that does not parse is skipped with a warning naming it (never its secret)."""
        if self._users_file is not None:
            data = self._users_file.load() or {}
            self.data_version = DataVersion.from_json(data.get("dataVersion"))
            self.users = _users_of(data.get("users"), str(self._users_file.path))
        if self._acls_file is not None:
            data = self._acls_file.load() or {}
            self.acls = _acls_of(data.get("acls"), str(self._acls_file.path))
        self.generation += 1

    def to_json(self) -> dict[str, Any]:
        """Both tables and the version, the body a slave pulls (broker/auth/admin.py GET_ALL_AUTH_METADATA)."""
        return {
            "dataVersion": self.data_version.to_json(),
            "users": [u.to_json() for u in self.users.values()],
            "acls": [a.to_json() for a in self.acls.values()],
        }

    def replace(self, data: dict[str, Any]) -> bool:
        """Install a master's tables (the slave's sync); False when its version is the one held already."""
        version = DataVersion.from_json(data.get("dataVersion"))
        if version == self.data_version:
            return False
        self.users = _users_of(data.get("users"), "the master's users")
        self.acls = _acls_of(data.get("acls"), "the master's ACLs")
        self.data_version = version
        self.generation += 1
        self._persist()
        return True

    def replace_tables(self, users: Any, acls: Any) -> bool:
        """Install a master's users and ACLs as LIST_USER and LIST_ACL answered them (the slave's sync): False
        when they equal the ones held. The version moves on, so the checker's cached decisions are dropped."""
        new_users = _users_of(users, "the master's users")
        new_acls = _acls_of(acls, "the master's ACLs")
        same_users = {n: u.to_json() for n, u in new_users.items()} == {n: u.to_json() for n, u in self.users.items()}
        same_acls = {n: a.to_json() for n, a in new_acls.items()} == {n: a.to_json() for n, a in self.acls.items()}
        if same_users and same_acls:
            return False
        self.users, self.acls = new_users, new_acls
        self._changed()
        return True

    def _changed(self) -> None:
        self.data_version.next_version()
        self.generation += 1
        self._persist()

    def _persist(self) -> None:
        users = {"dataVersion": self.data_version.to_json(), "users": [u.to_json() for u in self.users.values()]}
        acls = {"acls": [a.to_json() for a in self.acls.values()]}
        for file, data in ((self._users_file, users), (self._acls_file, acls)):
            if file is None:
                continue
            file.save(data)
            for path in (file.path, file.path.with_name(file.path.name + BAK_SUFFIX)):
                with contextlib.suppress(FileNotFoundError):
                    os.chmod(path, 0o600)

    # ------------------------------------------------------------------ users

    def user(self, username: str) -> User | None:
        return self.users.get(username)

    def is_super(self, username: str) -> bool:
        user = self.users.get(username)
        return user is not None and user.is_super

    def create_user(self, user: User) -> None:
        if not user.username.strip():
            raise AuthError("username can not be blank")
        if not user.password.strip():
            raise AuthError("password can not be blank")
        if user.username in self.users:
            raise AuthError("The user is existed")
        self.users[user.username] = user
        self._changed()

    def ensure_user(self, user: User) -> bool:
        """Create `user` unless one of that name exists (initAuthenticationUser, the inner client's user)."""
        if user.username in self.users:
            return False
        self.create_user(user)
        return True

    def update_user(self, username: str, password: str, user_type: UserType | None, status: Any) -> None:
        """Only what is given changes (a blank password keeps the old one), as RocketMQ's updateUser."""
        old = self.users.get(username)
        if old is None:
            raise AuthError("The user is not exist")
        self.users[username] = User(
            username,
            password if password.strip() else old.password,
            user_type or old.user_type,
            status or old.user_status,
        )
        self._changed()

    def delete_user(self, username: str) -> None:
        """Deleting a user deletes its ACL; deleting a missing user succeeds."""
        if not username.strip():
            raise AuthError("username can not be blank")
        had_user = self.users.pop(username, None) is not None
        had_acl = self.acls.pop(username, None) is not None
        if had_user or had_acl:
            self._changed()

    def list_users(self, filter_text: str | None) -> list[User]:
        return [u for name, u in sorted(self.users.items()) if not filter_text or filter_text in name]

    # ------------------------------------------------------------------ ACLs

    def acl(self, subject: str) -> Acl | None:
        username = subject_user(subject)
        if username not in self.users:
            raise AuthError("The subject is not exist.")
        return self.acls.get(username)

    def put_acl(self, acl: Acl) -> None:
        """createAcl and updateAcl alike: merge into the user's ACL (policy by type, entry by resource)."""
        if acl.username not in self.users:
            raise AuthError(f"The subject of {acl.subject} is not exist.")
        old = self.acls.get(acl.username)
        if old is None:
            self.acls[acl.username] = acl
        else:
            old.update(acl.policies)
        self._changed()

    def delete_acl(self, subject: str, policy_type: PolicyType | None, resource: Resource | None) -> None:
        username = subject_user(subject)
        if username not in self.users:
            raise AuthError("The subject is not exist.")
        acl = self.acls.get(username)
        if acl is None:
            raise AuthError("The acl is not exist.")
        if resource is not None:
            acl.delete(policy_type or PolicyType.CUSTOM, resource)
        if resource is None or not acl.policies:
            del self.acls[username]
        self._changed()

    def list_acls(self, subject_filter: str | None, resource_filter: str | None) -> list[Acl]:
        """LocalAuthorizationMetadataProvider.listAcl: subjects containing the filter; ACLs keep only the
        entries whose resource key contains the resource filter (and are left out when none is left)."""
        result: list[Acl] = []
        for _name, acl in sorted(self.acls.items()):
            if subject_filter and subject_filter not in acl.subject:
                continue
            if not resource_filter:
                result.append(acl)
                continue
            policies = []
            for policy in acl.policies:
                entries = [e for e in policy.entries if resource_filter in e.resource.key]
                if entries:
                    policies.append(type(policy)(policy.policy_type, entries))
            if policies:
                result.append(Acl(acl.username, policies))
        return result


def _users_of(raw: Any, where: str) -> dict[str, User]:
    users: dict[str, User] = {}
    for index, item in enumerate(raw if isinstance(raw, list) else []):
        try:
            user = User.from_json(item)
        except AuthError as exc:
            log.warning("%s: user #%d skipped: %s", where, index, exc)
            continue
        users[user.username] = user
    return users


def _acls_of(raw: Any, where: str) -> dict[str, Acl]:
    acls: dict[str, Acl] = {}
    for index, item in enumerate(raw if isinstance(raw, list) else []):
        try:
            acl = Acl.from_json(item)
        except AuthError as exc:
            log.warning("%s: ACL #%d skipped: %s", where, index, exc)
            continue
        acls[acl.username] = acl
    return acls
