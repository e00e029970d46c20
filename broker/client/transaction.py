"""The transaction producer (TransactionMQProducer): half message, local transaction, commit/rollback.

Applications create `TransactionProducer(group, namesrv_addr, checker=...)`, start it, and call
`send_message_in_transaction(msg, executor, arg)`: the message is sent as a half message (invisible
to consumers), `executor(msg, arg)` runs the local transaction and returns a LocalTransactionState,
and END_TRANSACTION (one-way) commits or rolls back. When the outcome never reaches the broker (an
UNKNOW answer, a crash), the broker later sends CHECK_TRANSACTION_STATE to a producer of the same
group; `checker(msg)` answers it and the producer reports with END_TRANSACTION fromTransactionCheck.
Executors and checkers may be plain functions (run in a thread) or coroutines.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from broker.client.api import decode_pulled
from broker.client.errors import ClientError
from broker.client.message import Message, MessageExt, SendResult, SendStatus
from broker.client.producer import Producer
from broker.protocol.codes import LanguageCode, RequestCode
from broker.protocol.command import RemotingCommand
from broker.protocol.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from broker.protocol.message import SysFlag, decode_offset_msg_id
from broker.protocol.properties import Prop
from broker.transport.connection import RemotingConnection

__all__ = [
    "LocalTransactionState",
    "TransactionChecker",
    "TransactionExecutor",
    "TransactionProducer",
    "TransactionSendResult",
    "end_transaction_command",
]

log = logging.getLogger(__name__)


class LocalTransactionState(Enum):
    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"  # sic: RocketMQ's spelling


_COMMIT_OR_ROLLBACK = {
    LocalTransactionState.COMMIT_MESSAGE: 8,
    LocalTransactionState.ROLLBACK_MESSAGE: 12,
    LocalTransactionState.UNKNOW: 0,
}

TransactionExecutor = Callable[[Message, Any], "LocalTransactionState | Awaitable[LocalTransactionState]"]
TransactionChecker = Callable[[MessageExt], "LocalTransactionState | Awaitable[LocalTransactionState]"]


@dataclass(slots=True)
class TransactionSendResult:
    send_result: SendResult
    local_transaction_state: LocalTransactionState

    @property
    def msg_id(self) -> str:
        return self.send_result.msg_id

    @property
    def transaction_id(self) -> str | None:
        return self.send_result.transaction_id


def end_transaction_command(
    group: str,
    state: LocalTransactionState,
    *,
    tran_state_table_offset: int,
    commit_log_offset: int,
    msg_id: str,
    transaction_id: str | None,
    from_check: bool,
) -> RemotingCommand:
    """END_TRANSACTION (37) as producers send it (one-way)."""
    header = EndTransactionRequestHeader(
        producer_group=group,
        tran_state_table_offset=tran_state_table_offset,
        commit_log_offset=commit_log_offset,
        commit_or_rollback=_COMMIT_OR_ROLLBACK[state],
        from_transaction_check=from_check,
        msg_id=msg_id,
        transaction_id=transaction_id,
    )
    return RemotingCommand(
        code=RequestCode.END_TRANSACTION, ext_fields=header.to_ext_fields(), language=LanguageCode.PYTHON
    )


async def _call(fn: Callable[..., object], *args: object) -> LocalTransactionState:
    """Run an executor/checker; anything but a LocalTransactionState (or an exception) is UNKNOW."""
    try:
        is_async = inspect.iscoroutinefunction(fn)  # a bool: no narrowing of fn for the thread branch
        value = fn(*args) if is_async else await asyncio.to_thread(fn, *args)
        if inspect.isawaitable(value):
            value = await value
    except Exception:
        log.exception("local transaction callback %r failed; the state is UNKNOW", fn)
        return LocalTransactionState.UNKNOW
    if isinstance(value, LocalTransactionState):
        return value
    log.warning("local transaction callback returned %r; treating it as UNKNOW", value)
    return LocalTransactionState.UNKNOW


class TransactionProducer(Producer):
    def __init__(
        self,
        group: str = "DEFAULT_PRODUCER",
        namesrv_addr: str | None = None,
        *,
        checker: TransactionChecker,
        **options: Any,
    ) -> None:
        super().__init__(group, namesrv_addr, **options)
        self.checker = checker
        self._checks: set[asyncio.Task[None]] = set()
        # Brokers ask this client (any producer of the group) about transactions left unknown.
        self.instance.remoting.register(RequestCode.CHECK_TRANSACTION_STATE, self._on_check)

    async def send_message_in_transaction(
        self, msg: Message, executor: TransactionExecutor, arg: Any = None
    ) -> TransactionSendResult:
        """Send `msg` as a half message, run `executor(msg, arg)`, then commit or roll back."""
        self._check_started()
        if msg.properties.get(Prop.DELAY, "0") not in ("", "0"):
            raise ClientError("a transactional message cannot have a delay level")
        msg.properties[Prop.TRAN_MSG] = "true"
        msg.properties[Prop.PGROUP] = self.group
        sys_flag, body, uniq = self._prepare(msg)
        sys_flag |= SysFlag.TRANSACTION_PREPARED_TYPE
        result = await self._send_with_retries(
            msg.topic,
            lambda mq: self._header(msg.topic, mq, sys_flag, msg.flag, msg.properties),
            body,
            [uniq],
            self.config.send_msg_timeout,
            1 + self.config.retry_times_when_send_failed,
        )
        if result.status is SendStatus.SEND_OK:
            state = await _call(executor, msg, arg)
        else:
            state = LocalTransactionState.ROLLBACK_MESSAGE  # not safely stored: do not run the transaction
        addr = await self.instance.find_master(result.message_queue.broker_name, msg.topic)
        cmd = end_transaction_command(
            self.group,
            state,
            tran_state_table_offset=result.queue_offset,
            commit_log_offset=decode_offset_msg_id(result.offset_msg_id)[2],
            msg_id=result.msg_id,
            transaction_id=result.transaction_id or uniq,
            from_check=False,
        )
        try:
            await self.instance.remoting.invoke_oneway(addr, cmd)
        except Exception as exc:  # the broker will check the transaction instead
            log.warning("END_TRANSACTION of %s to %s failed: %s", result.msg_id, addr, exc)
        return TransactionSendResult(result, state)

    async def shutdown(self) -> None:
        for task in list(self._checks):
            task.cancel()
        await super().shutdown()

    close = shutdown

    def _on_check(self, conn: RemotingConnection, cmd: RemotingCommand) -> None:
        """CHECK_TRANSACTION_STATE (one-way): answer in a task so the connection keeps reading."""
        task = asyncio.get_running_loop().create_task(self._answer_check(conn, cmd))
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    async def _answer_check(self, conn: RemotingConnection, cmd: RemotingCommand) -> None:
        try:
            h = CheckTransactionStateRequestHeader.from_ext_fields(cmd.ext_fields)
            msgs = decode_pulled(cmd.body)
        except Exception as exc:
            log.warning("ignoring a malformed CHECK_TRANSACTION_STATE from %s: %s", conn.peer, exc)
            return
        if not msgs:
            return
        msg = msgs[0]
        group = msg.properties.get(Prop.PGROUP)
        if group and group != self.group:
            log.info("ignoring a transaction check for producer group %s (this is %s)", group, self.group)
            return
        state = await _call(self.checker, msg)
        uniq = msg.properties.get(Prop.UNIQ_KEY) or h.msg_id or ""
        answer = end_transaction_command(
            self.group,
            state,
            tran_state_table_offset=h.tran_state_table_offset,
            commit_log_offset=h.commit_log_offset,
            msg_id=uniq,
            transaction_id=h.transaction_id or uniq,
            from_check=True,
        )
        try:
            await conn.invoke_oneway(answer)
        except Exception as exc:
            log.info("answering the check of %s to %s failed: %s", uniq, conn.peer, exc)
