"""ACL 1.0 ("plain ACL", RocketMQ 4.4-5.3.2): `aclEnable=true` with `$ROCKETMQ_HOME/conf/plain_acl.yml`.

The broker builds a `PlainAcl` when aclEnable is set, calls `reload_if_changed()` every few seconds (hot
reload by the files' modification times and sizes) and hands it to its `AuthChecker`, which runs `check()`
before ACL 2.0, as 5.3.0-5.3.2 run the v1 hook before the v2 pipeline. Files: `conf/plain_acl.yml` and every
`*.yml`/`*.yaml` under `conf/acl/` (recursive; `tools.yml` skipped; an AccessKey in two files: the first
wins). Checks, permissions and address patterns follow `PlainPermissionManager`, `Permission` and
`RemoteAddressStrategyFactory`; failures answer SYSTEM_ERROR with the AclException text, as a 4.x broker.

Against hostile files: a file larger than `MAX_FILE_BYTES`, YAML that does not parse (only plain YAML is
read: `yaml.safe_load`, no object tags), a wrong shape, or an account with a short key makes the load fail
with a message naming the file and the account (never a secret), and the last good configuration stays.
`migrate_to_v2()` imports the accounts as ACL 2.0 users and ACLs (RocketMQ's AuthMigrator).
"""

from __future__ import annotations

import ipaddress
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.auth.model import (
    Acl,
    Action,
    Decision,
    Policy,
    PolicyEntry,
    PolicyType,
    Resource,
    ResourcePattern,
    ResourceType,
    User,
    UserType,
)
from broker.auth.store import AuthStore
from broker.protocol.codes import RequestCode
from broker.protocol.command import RemotingCommand
from broker.protocol.signature import ACCESS_KEY, verify

__all__ = [
    "ANY",
    "MAX_FILE_BYTES",
    "PUB",
    "RETRY",
    "SUB",
    "PlainAcl",
    "PlainAclError",
    "address_matcher",
    "migrate_to_v2",
]

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 1024 * 1024
MAX_FILES = 256
DENY, ANY, PUB, SUB = 1, 2, 4, 8
_PERMS = {"DENY": DENY, "PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB}
RETRY = "%RETRY%"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
EXCEPTION = "org.apache.rocketmq.acl.common.AclException"
rc = RequestCode
ADMIN_CODES = frozenset(
    {
        rc.UPDATE_AND_CREATE_TOPIC,
        rc.UPDATE_BROKER_CONFIG,
        rc.DELETE_TOPIC_IN_BROKER,
        rc.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        rc.DELETE_SUBSCRIPTIONGROUP,
        50,  # UPDATE_AND_CREATE_ACL_CONFIG
        51,  # DELETE_ACL_CONFIG
        52,  # GET_BROKER_CLUSTER_ACL_INFO
        513,  # UPDATE_AND_CREATE_STATIC_TOPIC
    }
)


class PlainAclError(ValueError):
    """A plain_acl.yml that cannot be used; the message names the file and the account, not a secret."""


def parse_perm(text: Any) -> int:
    """Permission.parsePermFromString: unknown or missing -> DENY."""
    return _PERMS.get(str(text).strip().upper() if text is not None else "", DENY)


def _perm_ok(needed: int, owned: int) -> bool:
    if owned & DENY:
        return False
    if needed == ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


# ------------------------------------------------------------------------------- address patterns


def address_matcher(pattern: str | None) -> Callable[[str], bool]:
    """RemoteAddressStrategyFactory: blank never matches; `*`; `a.b.c.{1,2}`; `a,b`; `192.168.*.*`,
    `192.168.1.1-100`; an exact IPv4/IPv6 address."""
    text = (pattern or "").strip()
    if not text:
        return lambda _ip: False
    if text in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return lambda _ip: True
    if text.endswith("}") and "{" in text:
        head, _, rest = text.partition("{")
        wanted = {_normal(head + part.strip()) for part in rest[:-1].split(",") if part.strip()}
        return lambda ip: _normal(ip) in wanted
    if "," in text:
        wanted = {_normal(part.strip()) for part in text.split(",") if part.strip()}
        return lambda ip: _normal(ip) in wanted
    if "*" in text or "-" in text:
        return _range_matcher(text)
    exact = _normal(text)
    return lambda ip: _normal(ip) == exact


def _normal(ip: str) -> str:
    try:
        address = ipaddress.ip_address(ip.strip().strip("[]"))
    except ValueError:
        return ip.strip()
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return address.exploded.upper()
    return str(address)


def _range_matcher(text: str) -> Callable[[str], bool]:
    separator = ":" if ":" in text else "."
    parts = text.split(separator)
    base = 16 if separator == ":" else 10
    for index, part in enumerate(parts):
        if part == "*" or "-" in part:
            prefix = parts[:index]
            if part == "*":
                low, high = 0, 0xFFFF if base == 16 else 255
            else:
                a, _, b = part.partition("-")
                try:
                    low, high = int(a, base), int(b, base)
                except ValueError:
                    raise PlainAclError(f"address pattern {text!r} has a bad range") from None
            tail = parts[index + 1 :]
            if any(t != "*" for t in tail):
                raise PlainAclError(f"address pattern {text!r}: only * may follow a range")

            def match(ip: str, prefix: list[str] = prefix, low: int = low, high: int = high, at: int = index) -> bool:
                got = _normal(ip).split(separator) if separator == ":" else ip.strip().split(separator)
                if len(got) != len(parts) or [p.upper() for p in got[:at]] != [p.upper() for p in prefix]:
                    return False
                try:
                    return low <= int(got[at], base) <= high
                except ValueError:
                    return False

            return match
    raise PlainAclError(f"address pattern {text!r} is not understood")


# ------------------------------------------------------------------------------- the configuration


@dataclass(slots=True)
class Account:
    access_key: str
    secret_key: str = field(repr=False)
    white: Callable[[str], bool]
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    topic_perms: dict[str, int]
    group_perms: dict[str, int]  # keyed by %RETRY%<group>, as PlainPermissionManager stores them
    raw: dict[str, Any] = field(repr=False)


@dataclass(slots=True)
class PlainConfig:
    global_white: list[Callable[[str], bool]]
    accounts: dict[str, Account]


def _text(value: Any) -> str:
    # YAML reads 12345678 as an int; RocketMQ treats keys as strings
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _perm_list(raw: Any, where: str, key: str, prefix: str = "") -> dict[str, int]:
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise PlainAclError(f"{where}: {key} is not a list of name=PERM")
    perms: dict[str, int] = {}
    for item in raw:
        name, sep, perm = _text(item).partition("=")
        if not sep or not name.strip():
            raise PlainAclError(f"{where}: {key} entry {_text(item)[:64]!r} is not name=PERM")
        perms[prefix + name.strip()] = parse_perm(perm)
    return perms


def _account(raw: Any, where: str) -> Account:
    if not isinstance(raw, dict):
        raise PlainAclError(f"{where}: an account is not a mapping")
    access_key = _text(raw.get("accessKey")).strip()
    secret_key = _text(raw.get("secretKey")).strip()
    if len(access_key) <= 6:
        raise PlainAclError(f"{where}: accessKey {access_key[:64]!r} must be longer than 6 characters")
    if len(secret_key) <= 6:
        raise PlainAclError(f"{where}: the secretKey of accessKey {access_key!r} must be longer than 6 characters")
    where = f"{where} (accessKey {access_key})"
    return Account(
        access_key=access_key,
        secret_key=secret_key,
        white=address_matcher(_text(raw.get("whiteRemoteAddress"))),
        admin=raw.get("admin") is True or _text(raw.get("admin")).lower() == "true",
        default_topic_perm=parse_perm(raw.get("defaultTopicPerm")),
        default_group_perm=parse_perm(raw.get("defaultGroupPerm")),
        topic_perms=_perm_list(raw.get("topicPerms"), where, "topicPerms"),
        group_perms=_perm_list(raw.get("groupPerms"), where, "groupPerms", RETRY),
        raw=raw,
    )


def _read_yaml(path: Path) -> Any:
    try:
        import yaml  # type: ignore[import-untyped]  # no stubs installed
    except ImportError:  # pragma: no cover - pyyaml is a dependency
        raise PlainAclError("aclEnable needs PyYAML (pip install pyyaml)") from None
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise PlainAclError(f"{path}: {size} bytes is more than the {MAX_FILE_BYTES} an ACL file may have")
    with path.open("rb") as file:
        raw = file.read(MAX_FILE_BYTES + 1)
    if len(raw) > MAX_FILE_BYTES:
        raise PlainAclError(f"{path}: more than the {MAX_FILE_BYTES} bytes an ACL file may have")
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise PlainAclError(
            f"{path}: not valid YAML{at}: {getattr(exc, 'problem', None) or type(exc).__name__}"
        ) from None
    except RecursionError:
        raise PlainAclError(f"{path}: nested too deeply") from None


def load_files(paths: list[Path]) -> PlainConfig:
    """Read and validate every file; raises PlainAclError on the first problem (nothing is half-applied)."""
    global_white: list[Callable[[str], bool]] = []
    accounts: dict[str, Account] = {}
    for path in paths:
        data = _read_yaml(path)
        if data is None:
            continue
        if not isinstance(data, dict):
            raise PlainAclError(f"{path}: the top level is not a mapping")
        white = data.get("globalWhiteRemoteAddresses") or []
        if not isinstance(white, list):
            raise PlainAclError(f"{path}: globalWhiteRemoteAddresses is not a list")
        for pattern in white:
            global_white.append(address_matcher(_text(pattern)))
        raw_accounts = data.get("accounts") or []
        if not isinstance(raw_accounts, list):
            raise PlainAclError(f"{path}: accounts is not a list")
        for index, raw in enumerate(raw_accounts):
            account = _account(raw, f"{path} account #{index}")
            accounts.setdefault(account.access_key, account)  # the first file wins
    return PlainConfig(global_white, accounts)


class PlainAcl:
    """The v1 configuration of one ROCKETMQ_HOME, with hot reload."""

    def __init__(self, home: Path, acl_file: str | None = None) -> None:
        self.home = Path(home)
        self.main_file = self.home / (acl_file or os.path.join("conf", "plain_acl.yml"))
        self.config = PlainConfig([], {})
        self.loaded = False
        self.last_error: str | None = None
        self._stamp: tuple[tuple[str, int, int], ...] | None = None

    def files(self) -> list[Path]:
        found = [self.main_file] if self.main_file.is_file() else []
        acl_dir = self.home / "conf" / "acl"
        if acl_dir.is_dir():
            extra = sorted(
                p for p in acl_dir.rglob("*") if p.suffix in (".yml", ".yaml") and p.name != "tools.yml" and p.is_file()
            )
            found += [p for p in extra if p != self.main_file]
        if len(found) > MAX_FILES:
            raise PlainAclError(f"{acl_dir}: {len(found)} ACL files, more than {MAX_FILES}")
        return found

    def _current_stamp(self) -> tuple[tuple[str, int, int], ...]:
        stamp = []
        for path in self.files():
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            stamp.append((str(path), st.st_mtime_ns, st.st_size))
        return tuple(stamp)

    def load(self) -> bool:
        """(Re)load every file. On failure keep the last good config, log and remember the error."""
        try:
            stamp = self._current_stamp()
            config = load_files([Path(p) for p, _m, _s in stamp])
        except (PlainAclError, OSError) as exc:
            self.last_error = str(exc)
            self._stamp = self._stamp_or_empty()
            log.error("ACL 1.0 config not loaded, keeping the previous one: %s", exc)
            return False
        self.config, self._stamp, self.loaded, self.last_error = config, stamp, True, None
        log.info("ACL 1.0 config loaded: %d accounts from %d files", len(config.accounts), len(stamp))
        return True

    def _stamp_or_empty(self) -> tuple[tuple[str, int, int], ...] | None:
        try:
            return self._current_stamp()  # do not retry the same broken files every poll
        except (PlainAclError, OSError):
            return None

    def reload_if_changed(self) -> bool:
        """Reload when a file appeared, disappeared or changed since the last load; True if reloaded."""
        try:
            stamp = self._current_stamp()
        except (PlainAclError, OSError) as exc:
            if self.last_error != str(exc):
                self.last_error = str(exc)
                log.error("ACL 1.0 config not reloaded, keeping the previous one: %s", exc)
            return False
        if stamp == self._stamp:
            return False
        return self.load()

    # -------------------------------------------------------------------------- the check

    def check(self, cmd: RemotingCommand, ip: str) -> str | None:
        """None when v1 accepts the request, else the SYSTEM_ERROR remark (AclException text)."""
        fields = cmd.ext_fields
        return self.check_access(
            fields.get(ACCESS_KEY),
            lambda secret: verify(secret, fields, cmd.body, cmd.version),
            lambda: needed_perms(cmd),
            ip,
            cmd.code,
        )

    def check_access(
        self,
        access_key: str | None,
        signed: Callable[[str], bool],
        needed_of: Callable[[], dict[str, int]],
        ip: str,
        code: int | None = None,
    ) -> str | None:
        """The v1 check of one request, however it was signed: `signed(secret)` says whether the account's
        secret made its signature, `needed_of()` gives what it needs (resource -> PUB/SUB; a group as
        %RETRY%<group>), `code` the remoting request code (None for a gRPC RPC, which is never an admin code).
        None when v1 accepts it, else the AclException text."""
        config = self.config
        for white in config.global_white:
            if white(ip):
                return None
        if not access_key:
            return f"{EXCEPTION}: No accessKey is configured"
        account = config.accounts.get(access_key)
        if account is None:
            return f"{EXCEPTION}: No acl config for {access_key[:64]}"
        if account.white(ip):
            return None
        if not signed(account.secret_key):
            return f"{EXCEPTION}: Check signature failed for accessKey={access_key}"
        needed = needed_of()
        if needed.get(TRACE_TOPIC, 0) & PUB:
            return None
        if account.admin:
            return None
        if code is not None and code in ADMIN_CODES:
            return f"{EXCEPTION}: Need admin permission for request code={code}, but accessKey={access_key} is not"
        for resource, perm in needed.items():
            is_group = resource.startswith(RETRY)
            explicit = (account.group_perms if is_group else account.topic_perms).get(resource)
            kind = "group" if is_group else "topic"
            shown = resource[len(RETRY) :] if is_group else resource
            if explicit is not None:
                if not _perm_ok(perm, explicit):
                    return f"{EXCEPTION}: No permission for {kind}:{shown}"
                continue
            default = account.default_group_perm if is_group else account.default_topic_perm
            if not _perm_ok(perm, default):
                return f"{EXCEPTION}: No default permission for {kind}:{shown}"
        return None


def needed_perms(cmd: RemotingCommand) -> dict[str, int]:
    """PlainAccessResource.parse (5.3.2): resource (a topic, or %RETRY%group) -> permission needed."""
    f = cmd.ext_fields
    code = cmd.code
    needed: dict[str, int] = {}

    def add(resource: str | None, perm: int) -> None:
        if resource:
            needed[resource] = needed.get(resource, 0) | perm

    if code in (rc.SEND_MESSAGE, rc.SEND_MESSAGE_V2, rc.SEND_BATCH_MESSAGE):
        topic = f.get("topic") if code == rc.SEND_MESSAGE else f.get("b")
        add(topic, PUB)
        if topic and topic.startswith(RETRY):
            needed[topic] = SUB
    elif code == rc.CONSUMER_SEND_MSG_BACK:
        add(RETRY + (f.get("group") or ""), SUB)
    elif code in (rc.PULL_MESSAGE, rc.UPDATE_CONSUMER_OFFSET):
        add(f.get("topic"), SUB)
        add(RETRY + (f.get("consumerGroup") or ""), SUB)
    elif code == rc.QUERY_MESSAGE:
        add(f.get("topic"), SUB)
    elif code in (rc.UNREGISTER_CLIENT, rc.GET_CONSUMER_LIST_BY_GROUP):
        add(RETRY + (f.get("consumerGroup") or ""), SUB)
    elif code == rc.HEART_BEAT:
        from broker.auth.requests import _json

        try:
            data = _json(cmd.body)
            for consumer in data.get("consumerDataSet") or ():
                add(RETRY + str(consumer.get("groupName") or ""), SUB)
                for sub in consumer.get("subscriptionDataSet") or ():
                    add(str(sub.get("topic") or ""), SUB)
        except (ValueError, TypeError, AttributeError):
            pass
    return needed


# ------------------------------------------------------------------------------- migration


def _actions(perm_text: str) -> tuple[tuple[Action, ...], Decision]:
    text = (perm_text or "").strip()
    decision = Decision.DENY if not text or text == "DENY" else Decision.ALLOW
    if text == "PUB":
        return (Action.PUB,), decision
    if text == "SUB":
        return (Action.SUB,), decision
    if text in ("PUB|SUB", "SUB|PUB"):
        return (Action.PUB, Action.SUB), decision
    return (Action.ALL,), decision


def migrate_to_v2(plain: PlainAcl, store: AuthStore) -> int:
    """AuthMigrator: each v1 account whose user does not exist yet becomes a user (admin -> SUPER) with an
    ACL of its topic/group perms (CUSTOM) and its default perms (DEFAULT, `Topic:*`/`Group:*`)."""
    migrated = 0
    for account in plain.config.accounts.values():
        if store.user(account.access_key) is not None:
            continue
        raw = account.raw
        store.create_user(
            User(account.access_key, account.secret_key, UserType.SUPER if account.admin else UserType.NORMAL)
        )
        custom: list[PolicyEntry] = []
        for key, kind in (("topicPerms", Resource.topic), ("groupPerms", Resource.group)):
            for item in raw.get(key) or []:
                name, sep, perm = _text(item).partition("=")
                if sep and name.strip():
                    actions, decision = _actions(perm)
                    custom.append(PolicyEntry(kind(name.strip()), actions, (), decision))
        defaults: list[PolicyEntry] = []
        for key, rtype in (("defaultTopicPerm", ResourceType.TOPIC), ("defaultGroupPerm", ResourceType.GROUP)):
            text = _text(raw.get(key)).strip()
            if text:
                actions, decision = _actions(text)
                defaults.append(PolicyEntry(Resource(rtype, None, ResourcePattern.ANY), actions, (), decision))
        policies = []
        if custom:
            policies.append(Policy(PolicyType.CUSTOM, custom))
        if defaults:
            policies.append(Policy(PolicyType.DEFAULT, defaults))
        if policies:
            store.put_acl(Acl(account.access_key, policies))
        migrated += 1
        log.info(
            "migrated ACL 1.0 account %s to ACL 2.0 (%s)", account.access_key, "SUPER" if account.admin else "NORMAL"
        )
    return migrated
