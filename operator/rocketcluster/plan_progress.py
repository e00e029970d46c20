"""The planner's memory between reconciles, kept by the handler in the RocketCluster's status.

A reconcile takes one step and returns, so what the operator has started lives here: the pod being restarted
and since when, the pods still to restart, the groups being drained, the groups whose metadata still has to be
copied. An operator restarted mid-roll or mid-drain reads it back and picks up where it stopped.

`Progress.from_dict` trusts nothing it reads. A section it cannot make sense of is dropped and the planner
starts that work over from what it observes; that is safe because every step is gated on observed state (a
pod is taken down only when every other pod is up), and the record only orders and times the steps.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["DrainProgress", "Progress", "RollProgress"]

_T = TypeVar("_T")


class _Garbled(ValueError):
    """A stored section that is not what to_dict writes."""


@dataclass(frozen=True, slots=True)
class RollProgress:
    """A rolling restart under way.

    `pending` is the order the remaining pods will be restarted in (as far as the cluster looks now: a pod
    that becomes unready moves to the front). `current` is the pod deleted last, `current_uid` the uid of the
    instance that was deleted (its replacement has another uid: that is how a restart is told from a pod
    still terminating), `started_at` the planner's clock when it was deleted. `manual` marks a roll asked for
    with the manual-rolling-update annotation: its pods stay in `pending` until restarted, whatever their
    revision.
    """

    pending: tuple[str, ...] = ()
    current: str | None = None
    current_uid: str | None = None
    started_at: float | None = None
    reason: str | None = None
    manual: bool = False


@dataclass(frozen=True, slots=True)
class DrainProgress:
    """A group being removed: its write permission was wiped at `since`; `last_lag` is the consumer lag seen last."""

    group: int
    since: float
    last_lag: int | None = None


@dataclass(frozen=True, slots=True)
class Progress:
    """Everything the planner remembers. `created` turns true the first time the cluster is Ready."""

    roll: RollProgress | None = None
    draining: tuple[DrainProgress, ...] = ()
    new_groups: tuple[int, ...] = ()
    created: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The status fields `rollout` (None when no roll is under way: a merge patch then removes it),
        `scaling` and `created`, JSON-ready."""
        rollout: dict[str, Any] | None = None
        if self.roll is not None:
            rollout = {
                "pending": list(self.roll.pending),
                "current": self.roll.current,
                "currentUid": self.roll.current_uid,
                "startedAt": self.roll.started_at,
                "reason": self.roll.reason,
                "manual": self.roll.manual,
            }
        return {
            "created": self.created,
            "rollout": rollout,
            "scaling": {
                "draining": [{"group": d.group, "since": d.since, "lastLag": d.last_lag} for d in self.draining],
                "newGroups": list(self.new_groups),
            },
        }

    @classmethod
    def from_dict(cls, raw: object) -> Progress:
        """Read what to_dict wrote. Never raises: a missing or unreadable section reads as "nothing under way"."""
        if not isinstance(raw, Mapping):
            return cls()
        scaling = raw.get("scaling")
        if not isinstance(scaling, Mapping):
            scaling = {}
        return cls(
            roll=_section(_read_roll, raw.get("rollout"), None),
            draining=_section(_read_draining, scaling.get("draining"), ()),
            new_groups=_section(_read_groups, scaling.get("newGroups"), ()),
            created=raw.get("created") is True,
        )


def _section(read: Callable[[object], _T], value: object, empty: _T) -> _T:
    if value is None:
        return empty
    try:
        return read(value)
    except _Garbled:
        return empty


def _read_roll(value: object) -> RollProgress | None:
    if not isinstance(value, Mapping):
        raise _Garbled("rollout")
    pending = _list(value.get("pending", []))
    current = _optional_str(value.get("current"))
    current_uid = _optional_str(value.get("currentUid"))
    started_at = _optional_number(value.get("startedAt"))
    # a pod being restarted without the instance that was deleted or the time cannot be followed
    if current is not None and (current_uid is None or started_at is None):
        raise _Garbled("rollout.current")
    return RollProgress(
        pending=tuple(_str(name) for name in pending),
        current=current,
        current_uid=current_uid,
        started_at=started_at,
        reason=_optional_str(value.get("reason")),
        manual=value.get("manual") is True,
    )


def _read_draining(value: object) -> tuple[DrainProgress, ...]:
    drains = []
    seen = set()
    for item in _list(value):
        if not isinstance(item, Mapping):
            raise _Garbled("scaling.draining")
        group = _index(item.get("group"))
        if group in seen:
            raise _Garbled("scaling.draining: a group twice")
        seen.add(group)
        since = _optional_number(item.get("since"))
        if since is None:
            raise _Garbled("scaling.draining.since")
        last_lag = item.get("lastLag")
        drains.append(DrainProgress(group, since, None if last_lag is None else _index(last_lag)))
    return tuple(drains)


def _read_groups(value: object) -> tuple[int, ...]:
    return tuple(sorted({_index(item) for item in _list(value)}))


def _list(value: object) -> list[object]:
    if not isinstance(value, list | tuple):
        raise _Garbled("not a list")
    return list(value)


def _str(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise _Garbled("not a name")
    return value


def _optional_str(value: object) -> str | None:
    return None if value is None else _str(value)


def _optional_number(value: object) -> float | None:
    if value is None:
        return None
    # bool is an int to Python, never a time to us
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _Garbled("not a number")
    return float(value)


def _index(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Garbled("not a non-negative integer")
    return value
