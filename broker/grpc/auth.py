"""Authentication and authorization of gRPC requests, over the broker's own users, ACLs and plain_acl.yml.

RocketMQ 5's proxy runs two pipelines before every RPC (and before every command of a Telemetry stream): the
signature of the `authorization` metadata, then the ACL of what the request asks for. The metadata is
`MQv2-HMAC-SHA1 Credential=<AccessKey>[/...], SignedHeaders=x-mq-date-time, Signature=<hex>`; the signed
content is the `x-mq-date-time` value, the key the user's password (ACL 2.0) or the account's secretKey
(ACL 1.0, plain_acl.yml). What each RPC needs follows RocketMQ's `DefaultAuthorizationContextBuilder` for
gRPC messages (`needs_of`). Checks run on the broker's `AuthChecker` and `PlainAcl`, as the remoting port's:
one store, one decision cache. A refusal is Code.UNAUTHORIZED (40100) in the response's status, for
authentication and authorization alike, as the proxy's ResponseBuilder answers; the broker keeps serving.

Not checked, as in RocketMQ: how old the date-time is (the Python SDK sends its local time marked `Z`, so a
freshness window would refuse every client east or west of UTC); a replayed header of the same date-time
is accepted, a header whose date-time was changed is not (the signature covers it).
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from broker.auth.checker import AuthChecker
from broker.auth.model import Action, AuthError, Resource, ResourceType
from broker.auth.plain import ANY, PUB, RETRY, SUB, PlainAcl
from broker.auth.requests import Need
from broker.grpc.pb import definition, service

__all__ = [
    "AUTHORIZATION",
    "DATE_TIME",
    "MAX_AUTHORIZATION_CHARS",
    "GrpcAuth",
    "Signed",
    "needs_of",
    "parse_authorization",
    "peer_ip",
    "v1_needs",
]

AUTHORIZATION = "authorization"
DATE_TIME = "x-mq-date-time"
#: Longer `authorization` values are refused unread: an AccessKey, a 40-hex signature and the fixed words fit in
#: a few hundred characters (grpcio already bounds the whole metadata at 8 KiB).
MAX_AUTHORIZATION_CHARS = 1024
MAX_DATE_TIME_CHARS = 64
ALGORITHM = "MQv2-HMAC-SHA1"

_PUB = (Action.PUB,)
_SUB = (Action.SUB,)
_PUB_OR_SUB = (Action.PUB, Action.SUB)
_CONSUMER_TYPES = frozenset(
    {
        int(definition.ClientType.PUSH_CONSUMER),
        int(definition.ClientType.SIMPLE_CONSUMER),
        int(definition.ClientType.PULL_CONSUMER),
    }
)


@dataclass(frozen=True, slots=True)
class Signed:
    """What the metadata says of the caller: its AccessKey, its signature (raw bytes) and the signed content."""

    username: str
    signature: bytes
    content: bytes

    def by(self, secret: str) -> bool:
        """Whether `secret` made the signature: HMAC-SHA1(secret, date-time), compared in constant time."""
        expected = hmac.new(secret.encode(), self.content, hashlib.sha1).digest()
        return hmac.compare_digest(expected, self.signature)


def parse_authorization(metadata: Mapping[str, str]) -> Signed:
    """The caller's `Signed` from the `authorization` and `x-mq-date-time` metadata; AuthError (RocketMQ's
    message, never the value's whole text) when either is missing, too long or not of RocketMQ's form."""
    header = metadata.get(AUTHORIZATION, "")
    if not header:
        raise AuthError("username cannot be null. (no authorization metadata)")
    if len(header) > MAX_AUTHORIZATION_CHARS:
        raise AuthError(
            f"authentication header is incorrect. ({len(header)} characters, at most {MAX_AUTHORIZATION_CHARS})"
        )
    date_time = metadata.get(DATE_TIME, "")
    if not date_time:
        raise AuthError("datetime is null.")
    if len(date_time) > MAX_DATE_TIME_CHARS:
        raise AuthError(f"datetime is incorrect. ({len(date_time)} characters)")
    algorithm, sep, rest = header.partition(" ")
    if not sep:
        raise AuthError("authentication header is incorrect.")
    if algorithm != ALGORITHM:
        # RocketMQ reads the items whatever the first word; naming the expected one helps a hand-made client
        raise AuthError(f"authentication header is incorrect. (algorithm {algorithm[:32]!r}, not {ALGORITHM})")
    username: str | None = None
    signature: bytes | None = None
    for item in rest.split(","):
        key, eq, value = item.strip().partition("=")
        if not eq:
            raise AuthError("authentication keyValues length is incorrect, actual length=1.")
        if key == "Credential":
            username = value.split("/", 1)[0]
        elif key == "Signature":
            try:
                signature = binascii.unhexlify(value.strip())
            except (binascii.Error, ValueError):
                raise AuthError("authentication header is incorrect. (Signature is not hexadecimal)") from None
    if not username:
        raise AuthError("username cannot be null.")
    if not signature:
        raise AuthError(f"check signature failed. (User:{_shown(username)} sent no Signature)")
    return Signed(username, signature, date_time.encode())


def peer_ip(peer: str) -> str:
    """grpcio's peer (`ipv4:10.0.0.1:5000`, `ipv6:[::1]:5000`) -> the address, as ACL source IPs are written."""
    kind, sep, rest = peer.partition(":")
    if not sep or kind not in ("ipv4", "ipv6"):
        return peer
    host, sep, _port = rest.rpartition(":")
    return (host if sep else rest).strip("[]")


def _topic(resource: Any, needs: list[Need], actions: tuple[Any, ...]) -> None:
    name = resource.name
    if not name.strip():
        raise AuthError("topic is null.")
    needs.append((Resource.topic(name), actions))


def _group(resource: Any, needs: list[Need]) -> None:
    name = resource.name
    if not name.strip():
        raise AuthError("group is null.")
    needs.append((Resource.group(name), _SUB))


def needs_of(request: Any) -> list[Need]:
    """What a request of MessagingService asks for, as RocketMQ's proxy derives it (AuthError when the request
    lacks the topic or group it must name): sends, EndTransaction and a producer's settings Pub their topic;
    ReceiveMessage, AckMessage, Forward..ToDLQ and QueryAssignment Sub the group and the topic;
    ChangeInvisibleDuration, a consumer's Heartbeat and NotifyClientTermination Sub the group; QueryRoute
    needs Pub or Sub of the topic; a consumer's settings Sub its group and every subscribed topic."""
    needs: list[Need] = []
    if isinstance(request, service.SendMessageRequest):
        if not request.messages:
            raise AuthError("message is null.")
        _topic(request.messages[0].topic, needs, _PUB)
    elif isinstance(request, service.EndTransactionRequest):
        _topic(request.topic, needs, _PUB)
    elif isinstance(request, service.HeartbeatRequest):
        if int(request.client_type) in _CONSUMER_TYPES:
            _group(request.group, needs)
    elif isinstance(request, service.ReceiveMessageRequest):
        if not request.HasField("message_queue"):
            raise AuthError("messageQueue is null.")
        _group(request.group, needs)
        _topic(request.message_queue.topic, needs, _SUB)
    elif isinstance(
        request,
        (service.AckMessageRequest, service.ForwardMessageToDeadLetterQueueRequest, service.QueryAssignmentRequest),
    ):
        _group(request.group, needs)
        _topic(request.topic, needs, _SUB)
    elif isinstance(request, service.NotifyClientTerminationRequest):
        if request.group.name.strip():
            _group(request.group, needs)
    elif isinstance(request, service.ChangeInvisibleDurationRequest):
        _group(request.group, needs)
    elif isinstance(request, service.QueryRouteRequest):
        _topic(request.topic, needs, _PUB_OR_SUB)
    elif isinstance(request, service.TelemetryCommand) and request.HasField("settings"):
        settings = request.settings
        if not settings.HasField("publishing") and not settings.HasField("subscription"):
            raise AuthError("settings command doesn't have publishing or subscription.")
        for topic in settings.publishing.topics:
            _topic(topic, needs, _PUB)
        if settings.HasField("subscription"):
            _group(settings.subscription.group, needs)
            for entry in settings.subscription.subscriptions:
                _topic(entry.topic, needs, _SUB)
    return needs


def v1_needs(needs: list[Need]) -> dict[str, int]:
    """ACL 1.0's form of `needs`: topic -> PUB/SUB bits, a group as %RETRY%<group> -> SUB (PlainAccessResource).
    A QueryRoute's "Pub or Sub" asks v1 for either (its ANY)."""
    needed: dict[str, int] = {}
    for resource, actions in needs:
        bits = 0
        for action in actions:
            bits |= PUB if action in _PUB else SUB if action in _SUB else 0
        if len(actions) > 1:
            bits = ANY  # either permission is enough
        key = RETRY + (resource.name or "") if resource.type is ResourceType.GROUP else resource.name or ""
        needed[key] = needed.get(key, 0) | bits
    return needed


class GrpcAuth:
    """The checks of one broker's gRPC endpoint: `refusal(metadata, request, peer)` is None to serve the
    request, else the message of its UNAUTHORIZED status."""

    def __init__(self, checker: AuthChecker, plain: PlainAcl | None = None) -> None:
        self.checker = checker
        self.plain = plain
        self.refused = 0

    @property
    def active(self) -> bool:
        settings = self.checker.settings
        return settings.authentication or settings.authorization or self.plain is not None

    def refusal(self, metadata: Mapping[str, str], request: Any, peer: str) -> str | None:
        try:
            self._check(metadata, request, peer_ip(peer))
        except AuthError as exc:
            self.refused += 1
            return str(exc)
        return None

    def _check(self, metadata: Mapping[str, str], request: Any, ip: str) -> None:
        what = request.DESCRIPTOR.name
        settings = self.checker.settings
        signed: Signed | None = None
        if self.plain is not None:
            # a globally whitelisted address needs no signature: parse failures become "no accessKey" after it
            try:
                signed = parse_authorization(metadata)
            except AuthError:
                signed = None
            failure = self.plain.check_access(
                signed.username if signed is not None else None,
                signed.by if signed is not None else _unsigned,
                lambda: v1_needs(needs_of(request)),
                ip,
            )
            if failure is not None:
                raise AuthError(failure)
        if settings.authentication:
            signed = signed or parse_authorization(metadata)
            self.checker.authenticate_signed(signed.username, signed.by, what)
        if settings.authorization:
            username = signed.username if signed is not None else _username(metadata)
            self.checker.authorize_needs(username, needs_of(request), ip, what)


def _unsigned(_secret: str) -> bool:
    return False


def _username(metadata: Mapping[str, str]) -> str:
    """The AccessKey of the metadata without checking its signature (authorization without authentication)."""
    try:
        return parse_authorization(metadata).username
    except AuthError:
        return ""


def _shown(name: str) -> str:
    return name if len(name) <= 32 else name[:8] + "..."
