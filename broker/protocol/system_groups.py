"""The subscription groups every RocketMQ broker creates at start (MixAll's system groups).

Shared by the broker, which creates them, and the admin client, which leaves them out when it copies one
broker's groups to another.
"""

from __future__ import annotations

__all__ = ["SYSTEM_GROUPS"]

SYSTEM_GROUPS = (
    "TOOLS_CONSUMER",
    "FILTERSRV_CONSUMER",
    "__MONITOR_CONSUMER",
    "CLIENT_INNER_PRODUCER",
    "SELF_TEST_P_GROUP",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
    "CID_ONSAPI_PULL",
    "CID_RMQ_SYS_TRANS",
)
