"""Transactional messages over real TCP with our TransactionProducer: commit is visible, rollback is
not, an unknown transaction is checked and settled as the checker says, one whose producer is gone is
rolled back after transactionCheckMax checks, END_TRANSACTION is validated, and a restart does not
check settled halves again."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

from broker.client import LocalTransactionState, Message, MessageExt, PullConsumer, TransactionProducer
from broker.client.transaction import end_transaction_command
from broker.protocol.codes import ResponseCode
from broker.protocol.message import SysFlag, decode_offset_msg_id, decode_records
from broker.protocol.properties import Prop
from broker.server.topics import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from broker.server.transaction.messages import parse_op_body
from broker.transport.client import connect
from broker.transport.loop import run
from tests.features.features_harness import FeaturesCluster, features_cluster, wait_for

TOPIC = "TxT"
FAST_CHECKS = {"transactionCheckInterval": 300, "transactionTimeOut": 600, "transactionCheckMax": 3}


async def _visible(cluster: FeaturesCluster, group: str, want: int, settle: float = 0.0) -> list[MessageExt]:
    """Messages a fresh consumer group sees on TOPIC (waits for `want`, then `settle` s more)."""
    consumer = PullConsumer(
        group, client_config=cluster.client_config(), consume_from_where="CONSUME_FROM_FIRST_OFFSET"
    )
    consumer.subscribe(TOPIC, "*")
    await consumer.start()
    got: list[MessageExt] = []
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 15
        while len(got) < want and loop.time() < deadline:
            got.extend(await consumer.poll(1.0))
        if settle:
            got.extend(await consumer.poll(settle))
    finally:
        await consumer.shutdown()
    return got


def test_commit_is_visible_and_rollback_is_not(tmp_path: Path) -> None:
    async def main() -> None:
        async with features_cluster(tmp_path, **FAST_CHECKS) as cluster:
            await cluster.create_topic(TOPIC, queues=2)
            checked: list[str] = []
            producer = TransactionProducer(
                "PG-tx", client_config=cluster.client_config(), checker=lambda m: checked.append(m.body.decode())
            )

            def executor(msg: Message, arg: object) -> LocalTransactionState:
                return arg  # type: ignore[return-value]

            await producer.start()
            try:
                commit = await producer.send_message_in_transaction(
                    Message(TOPIC, "commit-me", keys="k-commit"), executor, LocalTransactionState.COMMIT_MESSAGE
                )
                rollback = await producer.send_message_in_transaction(
                    Message(TOPIC, "roll-me-back"), executor, LocalTransactionState.ROLLBACK_MESSAGE
                )
                assert commit.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE
                assert rollback.local_transaction_state is LocalTransactionState.ROLLBACK_MESSAGE
                # The send result points at the half message (reference 8.6 step 1).
                half = cluster.running_broker.store.look_message_by_offset(
                    decode_offset_msg_id(commit.send_result.offset_msg_id)[2]
                )
                assert half is not None and half.topic == TRANS_HALF_TOPIC
                assert half.properties[Prop.REAL_TOPIC] == TOPIC
                assert half.properties[Prop.TRANSACTION_ID] == commit.msg_id
                assert half.sys_flag & SysFlag.TRANSACTION_MASK == 0

                seen = await _visible(cluster, "CG-tx-1", want=1, settle=1.5)
                assert [m.body for m in seen] == [b"commit-me"]
                visible = seen[0]
                assert visible.msg_id == commit.msg_id
                assert visible.sys_flag & SysFlag.TRANSACTION_MASK == SysFlag.TRANSACTION_COMMIT_TYPE
                assert visible.prepared_transaction_offset == half.commit_log_offset
                assert Prop.REAL_TOPIC not in visible.properties and visible.keys == ["k-commit"]
                await asyncio.sleep(1.5)  # several check intervals: settled halves are never checked
                assert checked == []
                assert cluster.running_broker.transactions.checks_sent == 0
            finally:
                await producer.shutdown()

    run(main())


def test_unknown_transactions_are_checked_and_settled_as_the_checker_says(tmp_path: Path) -> None:
    async def main() -> None:
        async with features_cluster(tmp_path, **FAST_CHECKS) as cluster:
            await cluster.create_topic(TOPIC, queues=1)
            checks: Counter[str] = Counter()

            async def checker(msg: MessageExt) -> LocalTransactionState:
                body = msg.body.decode()
                checks[body] += 1
                assert msg.topic == TOPIC  # the check shows the real topic
                if body == "unknown-then-commit":
                    return LocalTransactionState.COMMIT_MESSAGE
                if body == "unknown-then-rollback":
                    return LocalTransactionState.ROLLBACK_MESSAGE
                # undecided on the first check, committed on the second
                return LocalTransactionState.COMMIT_MESSAGE if checks[body] >= 2 else LocalTransactionState.UNKNOW

            producer = TransactionProducer("PG-tx-check", client_config=cluster.client_config(), checker=checker)
            await producer.start()
            try:
                for body in ("unknown-then-commit", "unknown-then-rollback", "undecided-twice"):
                    sent = await producer.send_message_in_transaction(
                        Message(TOPIC, body), lambda m, a: LocalTransactionState.UNKNOW
                    )
                    assert sent.local_transaction_state is LocalTransactionState.UNKNOW
                seen = await _visible(cluster, "CG-tx-2", want=2, settle=1.0)
                assert sorted(m.body.decode() for m in seen) == ["undecided-twice", "unknown-then-commit"]
                assert checks["unknown-then-commit"] == 1 and checks["unknown-then-rollback"] == 1
                assert checks["undecided-twice"] == 2
                before = dict(checks)

                # Restart: settled halves are not checked again.
                await cluster.restart_broker()
                await asyncio.sleep(1.5)
                assert cluster.running_broker.transactions.checks_sent == 0
                assert dict(checks) == before

                # The same after a restart on a store whose progress an older broker saved under its old name
                # for RocketMQ's CID_RMQ_SYS_TRANS group (CID_SYS_RMQ_TRANS).
                port, progress = cluster.running_broker.port, cluster.running_broker.transactions.progress
                assert progress > 0
                await cluster.running_broker.shutdown()
                offsets = tmp_path / "store" / "config" / "consumerOffset.json"
                text = offsets.read_text()
                assert "CID_RMQ_SYS_TRANS" in text
                offsets.write_text(text.replace("CID_RMQ_SYS_TRANS", "CID_SYS_RMQ_TRANS"))
                await cluster.start_broker(port)
                assert cluster.running_broker.transactions.progress == progress  # not re-read from 0
                await asyncio.sleep(1.5)
                assert cluster.running_broker.transactions.checks_sent == 0
                assert dict(checks) == before
            finally:
                await producer.shutdown()

    run(main())


def test_a_transaction_whose_producer_is_gone_is_rolled_back_after_the_limit(tmp_path: Path) -> None:
    async def main() -> None:
        async with features_cluster(tmp_path, **FAST_CHECKS) as cluster:
            await cluster.create_topic(TOPIC, queues=1)
            producer = TransactionProducer(
                "PG-tx-gone", client_config=cluster.client_config(), checker=lambda m: LocalTransactionState.UNKNOW
            )
            await producer.start()
            sent = await producer.send_message_in_transaction(
                Message(TOPIC, "orphan"), lambda m, a: LocalTransactionState.UNKNOW
            )
            await producer.shutdown()  # nobody of the group is left to answer checks
            broker = cluster.running_broker
            tid = sent.msg_id
            await wait_for(lambda: tid in broker.transactions.settled_ids, 10, "the rollback after the limit")
            await wait_for(lambda: broker.store.get_max_offset_in_queue(TRANS_OP_HALF_TOPIC, 0) == 1, 5, "the op")
            # The op message records the rollback of the last copy, checked transactionCheckMax times.
            got = broker.store.get_message("t", TRANS_OP_HALF_TOPIC, 0, 0, 32)
            ops = list(decode_records(b"".join(got.buffers)))
            got.release()
            assert len(ops) == 1 and ops[0].properties[Prop.TRANSACTION_ID] == tid
            (half_offset,) = parse_op_body(ops[0].body)
            phy = broker.store.get_commit_log_offset_in_queue(TRANS_HALF_TOPIC, 0, half_offset)
            last_copy = broker.store.look_message_by_offset(phy)
            assert last_copy is not None
            assert last_copy.properties[Prop.TRANSACTION_CHECK_TIMES] == "3"
            assert not await _visible(cluster, "CG-tx-3", want=0, settle=1.0)

    run(main())


def test_end_transaction_is_validated(tmp_path: Path) -> None:
    async def main() -> None:
        async with features_cluster(tmp_path, **FAST_CHECKS) as cluster:
            await cluster.create_topic(TOPIC, queues=1)
            producer = TransactionProducer(
                "PG-tx-v", client_config=cluster.client_config(), checker=lambda m: LocalTransactionState.UNKNOW
            )
            await producer.start()
            try:
                sent = await producer.send_message_in_transaction(
                    Message(TOPIC, "v"), lambda m, a: LocalTransactionState.UNKNOW
                )
            finally:
                await producer.shutdown()
            offset = decode_offset_msg_id(sent.send_result.offset_msg_id)[2]
            conn = await connect(cluster.running_broker.addr)
            try:
                cases = [
                    ("PG-other", sent.send_result.queue_offset, offset, "producer group"),
                    ("PG-tx-v", sent.send_result.queue_offset + 5, offset, "state table offset"),
                    ("PG-tx-v", sent.send_result.queue_offset, offset + 1, "find prepared transaction message"),
                ]
                for group, table_offset, phy, reason in cases:
                    cmd = end_transaction_command(
                        group,
                        LocalTransactionState.COMMIT_MESSAGE,
                        tran_state_table_offset=table_offset,
                        commit_log_offset=phy,
                        msg_id=sent.msg_id,
                        transaction_id=sent.msg_id,
                        from_check=False,
                    )
                    resp = await conn.invoke(cmd, 5.0)  # answered when not sent one-way
                    assert resp.code == ResponseCode.SYSTEM_ERROR, reason
                    assert reason in (resp.remark or ""), resp.remark
                cmd = end_transaction_command(
                    "PG-tx-v",
                    LocalTransactionState.ROLLBACK_MESSAGE,
                    tran_state_table_offset=sent.send_result.queue_offset,
                    commit_log_offset=offset,
                    msg_id=sent.msg_id,
                    transaction_id=sent.msg_id,
                    from_check=False,
                )
                assert (await conn.invoke(cmd, 5.0)).code == ResponseCode.SUCCESS
                assert sent.msg_id in cluster.running_broker.transactions.settled_ids
            finally:
                conn.close()

    run(main())
