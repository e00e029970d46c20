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

A connection remembers the sends the full check accepted on it, by user and topic, until the users or ACLs
change (`ConnectionAuth`): a later one costs a few dict lookups and its HMAC-SHA1 (OpenSSL, from the user's
cached pads), or, under the stateful strategy, only the lookups while the connection is trusted. Other requests
take the full check, whose ACL decisions are cached per (user, resource, actions, source IP) until a change.
"""

from __future__ import annotations

import functools
import logging
import time
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

__all__ = ["AuthChecker", "AuthSettings", "ConnectionAuth", "source_ip"]

log = logging.getLogger(__name__)

_NO_PERMISSION = int(ResponseCode.NO_PERMISSION)
_SYSTEM_ERROR = int(ResponseCode.SYSTEM_ERROR)
_DECISIONS_CACHED = 65536
_USERS_PER_CONNECTION = 64  # users trusted on one connection by the stateful strategy (a client signs as one)
_SENDS_PER_CONNECTION = 1024  # (user, topic) pairs a connection remembers
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


class ConnectionAuth:
    """What the checker remembers of one connection, valid while the store's tables are those of `generation`.

    `sends` maps (user, topic) to the send the full check accepted on this connection: [trusted until, the
    user's HMAC pads]. A later send of that user and topic needs only its signature verified, or nothing while
    the stateful strategy trusts the connection. `trust` is that strategy's: user -> trusted until."""

    __slots__ = ("generation", "sends", "trust")

    def __init__(self, generation: int) -> None:
        self.generation = generation
        self.sends: dict[tuple[str, str], list[Any]] = {}
        self.trust: dict[str, float] = {}


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
        # send codes that both halves of ACL 2.0 and nothing else check -> the extField naming the topic: the
        # sends a connection's `ConnectionAuth` remembers
        self._fast_sends = (
            {
                code: key
                for code, key in _SEND_TOPIC.items()
                if code not in settings.authentication_whitelist
                and code not in settings.authorization_whitelist
                and (settings.authenticated_codes is None or code in settings.authenticated_codes)
            }
            if settings.authentication and settings.authorization and plain is None
            else {}
        )
        self._lifetime = settings.stateful_seconds

    @property
    def active(self) -> bool:
        return self.settings.enabled or self.plain is not None

    def guard(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand | None:
        """A send of a user and topic that the full check accepted on `conn` since the last change of the users
        or ACLs needs only its signature verified, or nothing while the stateful strategy trusts the
        connection: the user's existence, status and ACL decision are what they were. Everything else, and a
        remembered send whose signature fails, goes through the full check (`check`)."""
        topic_key = self._fast_sends.get(cmd.code)
        if topic_key is not None:
            state: ConnectionAuth | None = getattr(conn, "auth", None)
            if state is not None and state.generation == self.store.generation:
                fields = cmd.ext_fields
                send = state.sends.get((fields.get(ACCESS_KEY), fields.get(topic_key)))  # type: ignore[arg-type]
                if send is not None and (send[0] > time.monotonic() or self._signed_again(send, state, cmd)):
                    return None
        ip = source_ip(conn.peer)
        try:
            if self.plain is not None:
                failure = self.plain.check(cmd, ip)
                if failure is not None:
                    self.refused += 1
                    return cmd.response(_SYSTEM_ERROR, failure)
            self.check(cmd, ip, conn)
        except AuthError as exc:
            self.refused += 1
            log.debug("refused request code %d from %s: %s", cmd.code, conn.peer, exc)
            return cmd.response(_NO_PERMISSION, str(exc))
        if topic_key is not None:
            self._remember(cmd, topic_key, conn)
        return None

    def _signed_again(self, send: list[Any], state: ConnectionAuth, cmd: RemotingCommand) -> bool:
        """A remembered send's signature, verified with the user's pads (and the stateful trust renewed)."""
        if not verify_with(send[1], cmd.ext_fields, cmd.body, cmd.version):
            return False
        if self._lifetime is not None:
            send[0] = _trust(state, cmd.ext_fields[ACCESS_KEY], self._lifetime)
        return True

    def _remember(self, cmd: RemotingCommand, topic_key: str, conn: Any) -> None:
        """Remember a send the full check accepted (not of a retry topic: that needs the group's SUB)."""
        username = cmd.ext_fields.get(ACCESS_KEY)
        topic = cmd.ext_fields.get(topic_key)
        if not username or not topic or topic.startswith("%RETRY%"):
            return
        state = self._state_of(conn)
        if state is None:
            return
        if len(state.sends) >= _SENDS_PER_CONNECTION:
            state.sends.clear()
        pads = hmac_pads(self.store.users[username].password)
        state.sends[(username, topic)] = [state.trust.get(username, 0.0), pads]

    def _state_of(self, conn: Any) -> ConnectionAuth | None:
        """`conn`'s memory for the store's current tables (a fresh one after any change); None for a connection
        object without room for it, which then gets the full check every time."""
        generation = self.store.generation
        state: ConnectionAuth | None = getattr(conn, "auth", None)
        if state is None or state.generation != generation:
            state = ConnectionAuth(generation)
            try:
                conn.auth = state
            except AttributeError:
                return None
        return state

    def check(self, cmd: RemotingCommand, ip: str, conn: Any = None) -> None:
        """Raise AuthError when ACL 2.0 refuses `cmd` from `ip` (on `conn`, for the stateful strategy):
        authentication, then authorization, each from the tables."""
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
        """Whether `cmd` carries `user`'s good signature, or (stateful) `conn` carried one recently and the users
        have not changed since (a changed password or a disabled user is checked again)."""
        username = user.username
        lifetime = self._lifetime
        state = self._state_of(conn) if lifetime is not None and conn is not None else None
        if state is not None and state.trust.get(username, 0.0) > time.monotonic():
            return True
        if not verify(user.password, cmd.ext_fields, cmd.body, cmd.version):
            return False
        if state is not None and lifetime is not None:
            _trust(state, username, lifetime)
        return True

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


def _trust(state: ConnectionAuth, username: str, lifetime: float) -> float:
    """The stateful strategy trusts `username` on the connection of `state` for `lifetime` s from now; until when."""
    if len(state.trust) >= _USERS_PER_CONNECTION:
        state.trust.clear()
    until = state.trust[username] = time.monotonic() + lifetime
    return until


def _shown(name: str) -> str:
    # an unknown AccessKey may be a secret pasted into the wrong field: show only a short start of a long one
    return name if len(name) <= 32 else name[:8] + "..."
