"""Which of a RocketCluster's broker keys apply at run time and which roll the pods, and the values the brokers
should hold now.

A key in broker_keys.LIVE_KEYS is set in place on every running broker (UPDATE_BROKER_CONFIG, planned by
plan_config); every other key of spec.broker.config is read at start only, so only those enter the pods'
config-hash annotation (render.config_hash) and a change to them rolls the pods. The ConfigMap carries every
key either way, so a restarted broker starts with the values it held.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rocketcluster.broker_keys import LIVE_DEFAULTS, LIVE_KEYS, OWNED_KEYS
from rocketcluster.model import RocketClusterSpec

__all__ = ["live_split", "live_wanted", "restart_only"]


def live_split(spec: RocketClusterSpec) -> tuple[list[str], list[str]]:
    """spec.broker.config's keys as (applied live, applied by a rolling restart), each sorted."""
    keys = sorted(spec.broker.config)
    return [k for k in keys if k in LIVE_KEYS], [k for k in keys if k not in LIVE_KEYS]


def restart_only(properties: Mapping[str, str]) -> dict[str, str]:
    """A broker.conf's properties without the keys the broker applies live (what a restart must follow)."""
    return {k: v for k, v in properties.items() if k not in LIVE_KEYS}


def live_wanted(spec: RocketClusterSpec, managed_before: Iterable[str] = ()) -> dict[str, str]:
    """The live keys the operator keeps on the running brokers, with their values: those spec.broker.config
    sets, and those it set before (`managed_before`, from the status) and no longer does, back to the broker's
    default. Keys the operator itself owns (brokerPermission: its drain) are never touched here."""
    config = {k: v.strip() for k, v in spec.broker.config.items()}
    keys = (set(config) | set(managed_before)) & LIVE_KEYS
    return {k: config.get(k, LIVE_DEFAULTS[k]) for k in sorted(keys) if k not in OWNED_KEYS}
