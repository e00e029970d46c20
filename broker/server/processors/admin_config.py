"""Admin requests that change the broker's settings: UPDATE_BROKER_CONFIG (25) and
DELETE_SUBSCRIPTIONGROUP (207).

mqadmin updateBrokerConfig sends 25 with a `key=value` properties body (broker.server.config_update
validates, applies and persists it); deleteSubGroup sends 207 to every master of the cluster.
Registered by `BrokerController` (processors/admin_routes.py), which it sees as `AdminRoutesContext`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker.config.errors import ConfigError
from broker.config.properties import parse_properties
from broker.protocol.admin_headers import DeleteSubscriptionGroupRequestHeader
from broker.protocol.codes import ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.system_groups import SYSTEM_GROUPS
from broker.server.config_update import apply_updates
from broker.server.errors import RequestError

if TYPE_CHECKING:
    from broker.server.processors.context import AdminRoutesContext
    from broker.transport.connection import RemotingConnection

__all__ = ["AdminConfigProcessor"]

log = logging.getLogger(__name__)


class AdminConfigProcessor:
    def __init__(self, broker: AdminRoutesContext) -> None:
        self.broker = broker

    def update_broker_config(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            updates = parse_properties(bytes(cmd.body).decode("utf-8"))
        except (UnicodeDecodeError, ConfigError) as exc:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"string2Properties error: {exc}") from None
        log.info("update broker config from %s: %s", conn.peer, updates)
        result = apply_updates(self.broker, updates)
        remark = None
        if result.at_restart:
            remark = f"takes effect after a restart: {', '.join(result.at_restart)}"
        return cmd.response(ResponseCode.SUCCESS, remark)

    def delete_subscription_group(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        h = DeleteSubscriptionGroupRequestHeader.from_ext_fields(cmd.ext_fields)
        b = self.broker
        if h.group_name in SYSTEM_GROUPS:
            raise RequestError(ResponseCode.NO_PERMISSION, f"the group[{h.group_name}] is a system group")
        known = h.group_name in b.groups.table or bool(b.offsets.topics_of_group(h.group_name))
        if not known and b.consumers.get(h.group_name) is None:
            raise RequestError(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{h.group_name}] not exist"
            )
        b.groups.delete(h.group_name)
        removed = b.offsets.remove_group(h.group_name) if h.clean_offset else 0
        log.info(
            "deleted subscription group %s (offsets of %d topics removed) for %s", h.group_name, removed, conn.peer
        )
        return cmd.response(ResponseCode.SUCCESS)
