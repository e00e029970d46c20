"""END_TRANSACTION (37): a producer commits or rolls back a half message (reference 8.6).

Registered by `BrokerController`. Producers send it one-way (after their local transaction, or as
the answer to CHECK_TRANSACTION_STATE with fromTransactionCheck=true), so a refusal is logged as
well as answered. The half message is found at `commitLogOffset` and must match the header
(producer group, half queue offset, commit-log offset); the TransactionService does the rest.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker.protocol.codes import ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.headers import EndTransactionRequestHeader
from broker.server.errors import RequestError
from broker.server.put_rules import PUT_STATUS_CODES
from broker.server.transaction.messages import COMMIT, UNKNOWN, validate_end
from broker.store.results import PutStatus

if TYPE_CHECKING:
    from broker.server.transaction.context import EndTransactionContext
    from broker.transport.connection import RemotingConnection

__all__ = ["EndTransactionProcessor"]

log = logging.getLogger(__name__)


class EndTransactionProcessor:
    def __init__(self, broker: EndTransactionContext) -> None:
        self.broker = broker

    async def handle(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand | None:
        try:
            response = await self._process(conn, cmd)
        except RequestError as exc:
            log.warning("END_TRANSACTION from %s refused: %s", conn.peer, exc.remark)
            response = cmd.response(exc.code, exc.remark)
        return None if cmd.is_oneway else response

    async def _process(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand | None:
        b = self.broker
        if not b.config.is_master:
            raise RequestError(ResponseCode.SLAVE_NOT_AVAILABLE, "a slave cannot end a transaction")
        h = EndTransactionRequestHeader.from_ext_fields(cmd.ext_fields)
        if h.commit_or_rollback == UNKNOWN:
            log.info("transaction %s left unknown by %s; it will be checked", h.transaction_id, conn.peer)
            return cmd.response(ResponseCode.SUCCESS)
        half = b.store.look_message_by_offset(h.commit_log_offset)
        if half is None:
            raise RequestError(
                ResponseCode.SYSTEM_ERROR,
                f"find prepared transaction message failed at commit-log offset {h.commit_log_offset}",
            )
        reason = validate_end(h, half)
        if reason is not None:
            raise RequestError(ResponseCode.SYSTEM_ERROR, reason)
        status = await b.transactions.end(half, h.commit_or_rollback == COMMIT, h.from_transaction_check)
        if status is not PutStatus.PUT_OK:
            code = PUT_STATUS_CODES.get(status, ResponseCode.SYSTEM_ERROR)
            raise RequestError(code, f"storing the committed message failed: {status.name}")
        return cmd.response(ResponseCode.SUCCESS)
