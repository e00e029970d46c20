"""Which operator replica is active, as kopf's peering decides it, for the work kopf does not pause itself.

With `--peering=<name>`, every replica writes a keep-alive (priority, lifetime, lastseen) into the status of a
ClusterKopfPeering (all namespaces) or of a KopfPeering in each watched namespace. kopf pauses a replica's
handlers while another live replica has a higher priority (and every replica while two share one), so only one
reconciles. Our own loops (the resync tick, pod events, the topic and group passes) are not kopf handlers: each
pass asks `Leadership.active` first, which applies kopf's rule to the same peering objects.

Priorities: kopf pauses every replica that shares the highest priority, and the chart's replicas all run the
same command line. So a replica without `--priority` picks its own at start (`choose_priority`): below every
live peer, so a replica that starts or restarts never takes over from the one at work, and at random when it is
alone, so two replicas starting together almost never tie.
"""

from __future__ import annotations

import datetime
import os
import random
import socket
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from rocketcluster.kube import Kube

__all__ = [
    "PEERING_API_VERSION",
    "Leadership",
    "Peer",
    "choose_priority",
    "is_active",
    "live_peers",
    "own_identity",
    "peering_arguments",
]

PEERING_API_VERSION: Final = "kopf.dev/v1"
CLUSTER_KIND: Final = "ClusterKopfPeering"
NAMESPACED_KIND: Final = "KopfPeering"
# How long a replica's keep-alive counts (kopf's settings.peering.lifetime): a replica killed without a goodbye
# is replaced this long after its last keep-alive. kopf's default is 60 s.
LIFETIME_SECONDS: Final = 30
_CACHE_SECONDS: Final = 2.0
_ALONE_PRIORITIES: Final = (1_000_000, 2_000_000)


@dataclass(frozen=True, slots=True)
class Peer:
    """One replica's keep-alive in a peering object's status."""

    identity: str
    priority: int
    deadline: datetime.datetime


def live_peers(status: Mapping[str, Any] | None, now: datetime.datetime) -> list[Peer]:
    """The peers whose keep-alive has not expired (kopf's reading: lastseen + lifetime > now). Entries that are
    not objects, or whose fields do not parse, are skipped: the object is writable by every replica."""
    peers = []
    for identity, info in (status or {}).items():
        if not isinstance(info, Mapping):
            continue
        try:
            priority = int(info.get("priority", 0))
            lifetime = datetime.timedelta(seconds=int(info.get("lifetime", 60)))
            lastseen = datetime.datetime.fromisoformat(str(info["lastseen"]))
        except (KeyError, TypeError, ValueError, OverflowError):
            continue
        if lastseen.tzinfo is None:
            lastseen = lastseen.replace(tzinfo=datetime.UTC)
        deadline = lastseen + lifetime
        if deadline > now:
            peers.append(Peer(str(identity), priority, deadline))
    return peers


def is_active(status: Mapping[str, Any] | None, identity: str, priority: int, now: datetime.datetime) -> bool:
    """kopf's rule: a replica works unless another live replica has a higher or the same priority."""
    return not any(p.identity != identity and p.priority >= priority for p in live_peers(status, now))


def choose_priority(statuses: Iterable[Mapping[str, Any] | None], identity: str, now: datetime.datetime) -> int:
    """A priority below every other live peer's (a newcomer stands by), or a random one when there is none."""
    others = [p.priority for s in statuses for p in live_peers(s, now) if p.identity != identity]
    if not others:
        return random.randint(*_ALONE_PRIORITIES)
    # random below the lowest: two standbys that start together do not tie with each other either
    return min(others) - random.randint(1, 1000)


def own_identity() -> str:
    """The identity kopf gives this replica: POD_ID (the chart sets the pod's name), else host and process."""
    return os.environ.get("POD_ID") or f"{socket.gethostname()}/{os.getpid()}"


def peering_arguments(argv: list[str]) -> tuple[str | None, int | None]:
    """(peering name, priority) from kopf's flags; no name when the operator runs standalone."""
    name: str | None = None
    priority: int | None = None
    standalone = False  # kopf: --standalone turns peering off wherever it stands
    args = iter(argv)
    for arg in args:
        if arg == "--peering":
            name = next(args, None)
        elif arg.startswith("--peering="):
            name = arg.split("=", 1)[1]
        elif arg == "--priority":
            priority = int(next(args, "0"))
        elif arg.startswith("--priority="):
            priority = int(arg.split("=", 1)[1])
        elif arg == "--standalone":
            standalone = True
    return (None if standalone else name or None), priority


@dataclass
class Leadership:
    """Whether this replica is the active one. Standalone (no peering name): always."""

    peering: str | None
    identity: str
    namespaces: list[str] | None  # None: all namespaces, one ClusterKopfPeering
    priority: int = 0
    _checked: float = field(default=-1e9, repr=False)
    _active: bool = field(default=True, repr=False)

    def _objects(self) -> list[tuple[str, str | None]]:
        if self.namespaces is None:
            return [(CLUSTER_KIND, None)]
        return [(NAMESPACED_KIND, ns) for ns in self.namespaces]

    async def statuses(self, kube: Kube) -> list[Mapping[str, Any] | None]:
        """The status of each peering object this replica takes part in (None: the object is missing)."""
        found = []
        for kind, namespace in self._objects():
            assert self.peering is not None
            obj = await kube.get(PEERING_API_VERSION, kind, namespace, self.peering)
            found.append(obj.get("status") if obj else None)
        return found

    async def active(self, kube: Kube) -> bool:
        """True when kopf would let this replica work: no other live replica at or above its priority in any
        of its peering objects (kopf pauses a replica on a conflict in any one). Read at most every 2 s."""
        if self.peering is None:
            return True
        if time.monotonic() - self._checked < _CACHE_SECONDS:
            return self._active
        now = datetime.datetime.now(datetime.UTC)
        statuses = await self.statuses(kube)
        self._active = all(is_active(s, self.identity, self.priority, now) for s in statuses)
        self._checked = time.monotonic()
        return self._active
