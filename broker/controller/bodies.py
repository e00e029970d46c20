"""JSON bodies of the controller requests, as RocketMQ's fastjson writes and reads them.

`SyncStateSet`, `ElectMasterResponseBody` and `BrokerReplicasInfo` (shared/reference/controller-mode.md
section 3.3). Decoders refuse what is not the expected shape (`BodyError`), with a bound on the number of
ids and names, so a hostile body costs no more than its frame.
"""

from __future__ import annotations

from typing import Any

import orjson

from broker.controller.state import BrokerGroup

__all__ = [
    "BodyError",
    "decode_broker_names",
    "decode_sync_state_set",
    "encode_elect_body",
    "encode_replicas_info",
    "encode_sync_state_set",
]

MAX_IDS = 1024
MAX_NAMES = 10_000
_LONG = 2**63


class BodyError(ValueError):
    """A request body that is not the JSON the request code carries."""


def _json(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BodyError(f"body is not JSON: {exc}") from None


def _long(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not -_LONG <= value < _LONG:
        raise BodyError(f"{what} is not a long: {value!r}")
    return value


def encode_sync_state_set(ids: set[int], epoch: int) -> bytes:
    return orjson.dumps({"syncStateSet": sorted(ids), "syncStateSetEpoch": epoch})


def decode_sync_state_set(body: bytes) -> tuple[set[int], int]:
    """`{"syncStateSet":[1,2],"syncStateSetEpoch":3}` -> ({1, 2}, 3)."""
    data = _json(body)
    if not isinstance(data, dict):
        raise BodyError("SyncStateSet body is not an object")
    raw = data.get("syncStateSet")
    if not isinstance(raw, list) or len(raw) > MAX_IDS:
        raise BodyError(f"syncStateSet is not a list of at most {MAX_IDS} ids")
    return {_long(i, "a syncStateSet id") for i in raw}, _long(data.get("syncStateSetEpoch", 0), "syncStateSetEpoch")


def decode_broker_names(body: bytes) -> list[str]:
    """The JSON array of brokerNames of CONTROLLER_GET_SYNC_STATE_DATA."""
    data = _json(body)
    if not isinstance(data, list) or len(data) > MAX_NAMES or not all(isinstance(n, str) for n in data):
        raise BodyError("body is not a JSON array of broker names")
    return list(dict.fromkeys(data))


def encode_elect_body(group: BrokerGroup) -> bytes:
    """ElectMasterResponseBody: the group's members and its SyncStateSet."""
    members = {
        "cluster": group.cluster_name,
        "brokerName": group.broker_name,
        "brokerAddrs": {str(i): a for i, a in sorted(group.addresses.items())},
    }
    return orjson.dumps({"brokerMemberGroup": members, "syncStateSet": sorted(group.sync_state_set)})


def encode_replicas_info(groups: list[BrokerGroup], alive: dict[str, set[int]]) -> bytes:
    """BrokerReplicasInfo for CONTROLLER_GET_SYNC_STATE_DATA; `alive`: brokerName -> ids seen alive."""
    table: dict[str, Any] = {}
    for group in groups:
        live = alive.get(group.broker_name, set())

        def replica(i: int, group: BrokerGroup = group, live: set[int] = live) -> dict[str, Any]:
            return {
                "brokerName": group.broker_name,
                "brokerId": i,
                "brokerAddress": group.addresses.get(i, ""),
                "alive": i in live,
            }

        table[group.broker_name] = {
            "masterBrokerId": group.master_broker_id if group.master_broker_id is not None else -1,
            "masterAddress": group.master_address,
            "masterEpoch": group.master_epoch,
            "syncStateSetEpoch": group.sync_state_set_epoch,
            "inSyncReplicas": [replica(i) for i in sorted(group.sync_state_set)],
            "notInSyncReplicas": [replica(i) for i in sorted(group.addresses) if i not in group.sync_state_set],
        }
    return orjson.dumps({"replicasInfoTable": table})
