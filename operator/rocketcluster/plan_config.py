"""The planner's step for broker keys applied at run time: set on each running broker what differs.

Pure, like the other planners: from the values each registered broker reported (GET_BROKER_CONFIG, in
`GroupObservation.live_config`) and the values the spec wants (`Observed.live_wanted`), one
`UpdateBrokerConfig` per broker that holds another value. Not disruptive: no pod restarts, so it goes on
beside a roll or a scale-out. A broker that did not answer is asked again next pass; a group being removed
is left alone.
"""

from __future__ import annotations

from rocketcluster import names
from rocketcluster.broker_keys import BROKER_KEYS, same_value
from rocketcluster.plan_types import Observed, UpdateBrokerConfig

__all__ = ["plan_live_config"]


def plan_live_config(observed: Observed) -> list[UpdateBrokerConfig]:
    """One action per running broker of a kept group whose run-time keys differ from the spec's."""
    actions: list[UpdateBrokerConfig] = []
    if not observed.live_wanted:
        return actions
    for group in observed.broker_groups:
        if group.index >= observed.groups:
            continue
        for broker in group.live_config:
            held = dict(broker.values)
            changed = tuple(
                (key, value)
                for key, value in observed.live_wanted
                if key in held and not same_value(BROKER_KEYS[key], held[key], value)
            )
            if changed:
                pod = names.broker_pod(observed.cluster, group.index, broker.broker_id)
                actions.append(UpdateBrokerConfig(pod, broker.addr, changed))
    return actions
