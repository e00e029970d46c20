"""The per-request check: ACL 1.0 (plain_acl.yml) then ACL 2.0 authentication and authorization.

The broker (broker/server/broker.py) and the NameServer install `AuthChecker.guard` on their dispatcher
(`Dispatcher.set_guard`), which calls it before the processor of every request; a refusal is the response
(a one-way request gets none, the connection answers nothing to those) and the processor never runs. Nothing
here blocks or touches the connection: a refused client keeps its connection, and others are not disturbed.

ACL 2.0 (RocketMQ 5.3 `AuthenticationPipeline`/`AuthorizationPipeline`): authentication checks the
AccessKey's user exists, is enabled and signed the request with its password (broker.protocol.signature);
authorization lets SUPER users through, derives what the request needs (broker/auth/requests.py) and asks
the user's ACL for each (broker/auth/model.py). Failures answer NO_PERMISSION (16) with RocketMQ's message,
which names the user, the resource and the action, never the secret. A code listed in a whitelist skips that
half. ACL 1.0 (broker/auth/plain.py) answers SYSTEM_ERROR with the AclException text, as 4.x brokers do.

Cost on the send path: one dict lookup, one HMAC-SHA1 (OpenSSL, one call) and, for NORMAL users, a decision
cached per (user, resource, actions, source IP) until the users or ACLs change (docs/benchmarks.md).
"""

from __future__ import annotations

import functools
import logging
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker.auth.model import Action, AuthError, Decision, Resource, User
from broker.auth.requests import Need, derive
from broker.auth.store import AuthStore
from broker.protocol.codes import ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.signature import ACCESS_KEY, hmac_pads, verify, verify_with

if TYPE_CHECKING:
    from broker.auth.plain import PlainAcl

__all__ = ["AuthChecker", "AuthSettings", "source_ip"]

log = logging.getLogger(__name__)

_NO_PERMISSION = int(ResponseCode.NO_PERMISSION)
_SYSTEM_ERROR = int(ResponseCode.SYSTEM_ERROR)
_DECISIONS_CACHED = 65536
_USERS_PER_CONNECTION = 64  # users trusted on one connection by the stateful strategy (a client signs as one)
_PUB = (Action.PUB,)
# send codes -> the extField naming the topic (derive() makes Topic:<it> Pub of them, or Group Sub for retries)
_SEND_TOPIC = {310: "b", 320: "b", 10: "topic", 325: "b", 324: "topic"}


@dataclass(frozen=True, slots=True)
class AuthSettings:
    authentication: bool = False
    authorization: bool = False
    authentication_whitelist: frozenset[int] = field(default_factory=frozenset)
    authorization_whitelist: frozenset[int] = field(default_factory=frozenset)
    #: The `Cluster:<name>` of admin requests.
    cluster: str = "DefaultCluster"
    #: Only these codes are authenticated (the NameServer's writes); None: every code but the whitelisted.
    authenticated_codes: frozenset[int] | None = None
    #: RocketMQ's StatefulAuthenticationStrategy: a user whose signature a connection carried is trusted on that
    #: connection for this many seconds (None: the default stateless strategy checks every request)
    stateful_seconds: float | None = None

    @property
    def enabled(self) -> bool:
        return self.authentication or self.authorization


@functools.lru_cache(maxsize=4096)  # a connection's peer is asked on each of its requests
def source_ip(peer: str) -> str:
    """`host:port` (a connection's peer) -> host, as RemotingHelper.parseChannelRemoteAddr + substringBeforeLast."""
    host, sep, _port = peer.rpartition(":")
    return (host if sep else peer).strip("[]")


class AuthChecker:
    """`guard(conn, cmd)`: None lets the request through, else the refusal to answer with."""

    def __init__(self, settings: AuthSettings, store: AuthStore, plain: PlainAcl | None = None) -> None:
        self.settings = settings
        self.store = store
        self.plain = plain
        self.refused = 0
        # (user, resource, actions, ip) -> allowed; valid for one version of the ACL tables
        self._decisions: dict[tuple[str, Resource, tuple[Action, ...], str], bool] = {}
        self._sends: dict[tuple[str, str, str], bool] = {}
        self._decisions_of = -1
        # the send fast path: (user, topic, ip) -> the User the plain check accepted a send of and its password's
        # HMAC pads, valid while the tables are the ones of `_sends_of` (any user or ACL change drops it); only
        # the signature (or the stateful trust) is checked again per request
        self._send_users: dict[tuple[str, str, str], tuple[User, tuple[Any, Any]]] = {}
        self._sends_of: tuple[Any, ...] = ()
        # send codes that both halves check (neither whitelisted) -> the extField naming the topic
        self._fast_sends = (
            {
                code: key
                for code, key in _SEND_TOPIC.items()
                if code not in settings.authentication_whitelist
                and code not in settings.authorization_whitelist
                and (settings.authenticated_codes is None or code in settings.authenticated_codes)
            }
            if settings.authentication and settings.authorization
            else {}
        )
        self._stateful = settings.stateful_seconds is not None
        # the stateful strategy: connection -> {user: (trusted until, users' data version)}, for connections that
        # take no `auth_trust` attribute (a RemotingConnection holds its own: one attribute load per request)
        self._verified: weakref.WeakKeyDictionary[Any, dict[str, tuple[float, int]]] = weakref.WeakKeyDictionary()

    @property
    def active(self) -> bool:
        return self.settings.enabled or self.plain is not None

    def guard(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand | None:
        ip = source_ip(conn.peer)
        if self.plain is not None:
            failure = self.plain.check(cmd, ip)
            if failure is not None:
                self.refused += 1
                return cmd.response(_SYSTEM_ERROR, failure)
        try:
            self.check(cmd, ip, conn)
        except AuthError as exc:
            self.refused += 1
            log.debug("refused request code %d from %s: %s", cmd.code, conn.peer, exc)
            return cmd.response(_NO_PERMISSION, str(exc))
        return None

    def check(self, cmd: RemotingCommand, ip: str, conn: Any = None) -> None:
        """Raise AuthError when ACL 2.0 refuses `cmd` from `ip` (on `conn`, for the stateful strategy).

        A send of a user whose sends of that topic from that address the plain check (`check_plain`) accepted
        since the last change of the users or ACLs needs only its signature checked: the user's existence,
        status and ACL decision are what they were. Everything else goes through `check_plain`."""
        topic_key = self._fast_sends.get(cmd.code)
        if topic_key is None:
            self.check_plain(cmd, ip, conn)
            return
        fields = cmd.ext_fields
        username = fields.get(ACCESS_KEY)
        topic = fields.get(topic_key)
        if not username or not topic or topic.startswith("%RETRY%"):
            self.check_plain(cmd, ip, conn)
            return
        store = self.store
        version = store.data_version
        sends = self._send_users
        held = self._sends_of
        if (
            not held
            or held[0] is not store.users
            or held[1] is not store.acls
            or held[2] is not version
            or held[3] != version.counter
            or len(sends) > _DECISIONS_CACHED
        ):
            sends.clear()
            self._sends_of = (store.users, store.acls, version, version.counter)
        key = (username, topic, ip)
        held_user = sends.get(key)
        if held_user is None:
            self.check_plain(cmd, ip, conn)
            user = store.users[username]
            sends[key] = (user, hmac_pads(user.password))
            return
        user, pads = held_user
        if not (self._signed(user, cmd, conn) if self._stateful else verify_with(pads, fields, cmd.body, cmd.version)):
            raise AuthError(f"check signature failed. (User:{username}, request code {cmd.code})")

    def check_plain(self, cmd: RemotingCommand, ip: str, conn: Any = None) -> None:
        """`check` without its send fast path: authentication, then authorization, each from the tables."""
        settings = self.settings
        code = cmd.code
        if (
            settings.authentication
            and code not in settings.authentication_whitelist
            and (settings.authenticated_codes is None or code in settings.authenticated_codes)
        ):
            self.authenticate(cmd, conn)
        if settings.authorization and code not in settings.authorization_whitelist:
            self.authorize(cmd, ip)

    def authenticate(self, cmd: RemotingCommand, conn: Any = None) -> None:
        fields = cmd.ext_fields
        username = fields.get(ACCESS_KEY)
        if not username:
            raise AuthError(f"username cannot be null. (request code {cmd.code} carries no AccessKey)")
        user = self._user(username, "is not found.")
        if not self._signed(user, cmd, conn):
            raise AuthError(f"check signature failed. (User:{username}, request code {cmd.code})")

    def authenticate_signed(self, username: str, signed: Callable[[str], bool], what: str) -> None:
        """Authentication of a request signed otherwise than the remoting way (the gRPC endpoint's
        `authorization` metadata): `signed(password)` says whether the user's password made its signature;
        `what` names the request in the refusal. Raises AuthError with RocketMQ's messages."""
        if not username:
            raise AuthError(f"username cannot be null. ({what} carries no AccessKey)")
        user = self._user(username, "is not found.")
        if not signed(user.password):
            raise AuthError(f"check signature failed. (User:{username}, {what})")

    def _user(self, username: str, missing: str) -> User:
        user = self.store.users.get(username)
        if user is None:
            raise AuthError(f"User:{_shown(username)} {missing}")
        if not user.enabled:
            raise AuthError(f"User:{username} is disabled.")
        return user

    def _signed(self, user: User, cmd: RemotingCommand, conn: Any) -> bool:
        """Whether `cmd` carries `user`'s good signature, or (stateful) `conn` carried one recently."""
        username = user.username
        lifetime = self.settings.stateful_seconds
        if lifetime is not None and conn is not None:
            # the stateful strategy: `conn` carried a good signature of this user within the lifetime, and the
            # users have not changed since (a changed password or a disabled user is checked again)
            seen = self._trust_of(conn)
            entry = None if seen is None else seen.get(username)
            if entry is not None and entry[1] == self.store.data_version.counter and time.monotonic() < entry[0]:
                return True
        if not verify(user.password, cmd.ext_fields, cmd.body, cmd.version):
            return False
        if lifetime is not None and conn is not None:
            self._trust(conn, username, lifetime)
        return True

    def _trust_of(self, conn: Any) -> dict[str, tuple[float, int]] | None:
        seen: dict[str, tuple[float, int]] | None = getattr(conn, "auth_trust", None)
        return seen if seen is not None else self._verified.get(conn)

    def _trust(self, conn: Any, username: str, lifetime: float) -> None:
        users = self._trust_of(conn)
        if users is None:
            users = {}
            try:
                conn.auth_trust = users
            except AttributeError:  # a connection object without room for it: kept beside, weakly
                self._verified[conn] = users
        if len(users) >= _USERS_PER_CONNECTION:
            users.clear()
        users[username] = (time.monotonic() + lifetime, self.store.data_version.counter)

    def authorize(self, cmd: RemotingCommand, ip: str) -> None:
        username = cmd.ext_fields.get(ACCESS_KEY)
        if not username:
            raise AuthError(f"username cannot be null. (request code {cmd.code} carries no AccessKey)")
        if self._user(username, "not found.").is_super:
            return
        self._fresh_decisions()
        topic_key = _SEND_TOPIC.get(cmd.code)
        if topic_key is not None:  # the hot path: a send to a plain topic, decided once per (user, topic, ip)
            topic = cmd.ext_fields.get(topic_key)
            if topic and not topic.startswith("%RETRY%"):
                send_key = (username, topic, ip)
                allowed = self._sends.get(send_key)
                if allowed is True:
                    return
                if allowed is None:
                    allowed = self._sends[send_key] = self._decide(username, Resource.topic(topic), _PUB, ip) is None
                    if allowed:
                        return
                raise AuthError(self._denial(username, Resource.topic(topic), _PUB, ip))
        self._authorize_needs(username, derive(cmd, self.settings.cluster), ip)

    def authorize_needs(self, username: str, needs: list[Need], ip: str, what: str = "the request") -> None:
        """Authorization of a request whose needs its caller derived (the gRPC endpoint's RPCs): the user's
        existence and status, SUPER users through, then each need against the ACLs (decisions cached as for
        remoting requests). Raises AuthError with RocketMQ's messages."""
        if not username:
            raise AuthError(f"username cannot be null. ({what} carries no AccessKey)")
        if self._user(username, "not found.").is_super:
            return
        self._fresh_decisions()
        self._authorize_needs(username, needs, ip)

    def _fresh_decisions(self) -> None:
        counter = self.store.data_version.counter
        if self._decisions_of != counter or len(self._decisions) > _DECISIONS_CACHED:
            self._decisions.clear()
            self._sends.clear()
            self._decisions_of = counter

    def _authorize_needs(self, username: str, needs: list[Need], ip: str) -> None:
        if not needs:
            return
        decisions = self._decisions
        for resource, actions in needs:
            key = (username, resource, actions, ip)
            allowed = decisions.get(key)
            if allowed is None:
                allowed = decisions[key] = self._decide(username, resource, actions, ip) is None
            if not allowed:
                raise AuthError(self._denial(username, resource, actions, ip))

    def _decide(self, username: str, resource: Resource, actions: tuple[Action, ...], ip: str) -> str | None:
        acl = self.store.acls.get(username)
        decision = acl.decide(resource, actions, ip) if acl is not None else None
        if decision is None:
            return "no matched policies."
        if decision is Decision.DENY:
            return "the decision is deny."
        return None

    def _denial(self, username: str, resource: Resource, actions: tuple[Action, ...], ip: str) -> str:
        detail = self._decide(username, resource, actions, ip) or "the decision is deny."
        wanted = ",".join(a.label for a in actions)
        return f"User:{username} has no permission to access {resource.key} from {ip} (action {wanted}), {detail}"

    def check_needs(self, username: str, needs: list[Need], ip: str) -> None:
        """Authorization of explicit needs (tests and tools): raises AuthError like `authorize`."""
        for resource, actions in needs:
            if self._decide(username, resource, actions, ip) is not None:
                raise AuthError(self._denial(username, resource, actions, ip))


def _shown(name: str) -> str:
    # an unknown AccessKey may be a secret pasted into the wrong field: show only a short start of a long one
    return name if len(name) <= 32 else name[:8] + "..."
