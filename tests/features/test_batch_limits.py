"""Batch limits: one topic, no delay, no transaction, at most 4 MiB per request.
The client refuses what brokers would refuse and splits big batches; the broker refuses a bad batch
over real TCP with a remark saying why, and stores nothing of it."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from broker.client import Message, Producer
from broker.client.batch import check_batch
from broker.client.errors import ClientError
from broker.protocol.batch import BatchMessage, encode_batch
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.message import SysFlag
from broker.protocol.properties import encode_properties
from broker.transport.client import connect
from broker.transport.loop import run
from tests.features.features_harness import features_cluster

MiB = 1 << 20


@pytest.mark.parametrize(
    ("messages", "reason"),
    [
        ([], "at least one message"),
        ([Message("A", "1"), Message("B", "2")], "one topic"),
        ([Message("A", "1"), Message("A", "2", delay_time_level=2)], "delayed"),
        ([Message("A", "1", properties={"TRAN_MSG": "true"})], "transactional"),
        ([Message("%RETRY%g", "1")], "retry topics"),
    ],
)
def test_client_refuses_what_a_batch_cannot_hold(messages: list[Message], reason: str) -> None:
    with pytest.raises(ClientError, match=reason):
        check_batch(messages)


def _batch_request(topic: str, body: bytes, sys_flag: int = 0) -> RemotingCommand:
    fields = {
        "a": "PG-batch",
        "b": topic,
        "c": "TBW102",
        "d": "4",
        "e": "0",
        "f": str(sys_flag),
        "g": str(int(time.time() * 1000)),
        "h": "0",
        "i": "",
        "j": "0",
        "m": "true",
    }
    return RemotingCommand(code=RequestCode.SEND_BATCH_MESSAGE, ext_fields=fields, body=body)


def test_broker_refuses_bad_batches_and_client_splits_big_ones(tmp_path: Path) -> None:
    async def main() -> None:
        async with features_cluster(tmp_path) as cluster:
            await cluster.create_topic("BatchT", queues=1)
            store = cluster.running_broker.store
            conn = await connect(cluster.running_broker.addr)
            try:
                ok = BatchMessage(b"fine", encode_properties({"KEYS": "k"}), 0)
                cases = [
                    (encode_batch([ok, BatchMessage(os.urandom(4 * MiB), "", 0)]), 0, "exceeds the maximum 4194304"),
                    (
                        encode_batch([ok, BatchMessage(b"x", encode_properties({"DELAY": "3"}), 0)]),
                        0,
                        "batch message 1: delayed messages cannot be sent in a batch",
                    ),
                    (
                        encode_batch([BatchMessage(b"x", encode_properties({"TRAN_MSG": "true"}), 0)]),
                        0,
                        "batch message 0: transactional messages cannot be sent in a batch",
                    ),
                    (encode_batch([ok]), SysFlag.TRANSACTION_PREPARED_TYPE, "cannot be transactional"),
                ]
                for body, sys_flag, reason in cases:
                    resp = await conn.invoke(_batch_request("BatchT", body, sys_flag), 10.0)
                    assert resp.code == ResponseCode.MESSAGE_ILLEGAL, reason
                    assert reason in (resp.remark or ""), resp.remark
                resp = await conn.invoke(_batch_request("%RETRY%g", encode_batch([ok])), 5.0)
                assert resp.code == ResponseCode.MESSAGE_ILLEGAL and "retry" in (resp.remark or "")
                assert store.get_max_offset_in_queue("BatchT", 0) == 0  # nothing of a refused batch is stored
                resp = await conn.invoke(_batch_request("BatchT", encode_batch([ok, ok])), 5.0)
                assert resp.code == ResponseCode.SUCCESS and len(resp.ext_fields["msgId"].split(",")) == 2
            finally:
                conn.close()

            async with Producer("PG-batch", client_config=cluster.client_config()) as producer:
                msgs = [Message("BatchT", os.urandom(MiB), keys=f"big-{i}") for i in range(5)]  # 5 MiB in all
                results = await producer.send_batch(msgs)
            assert len(results) == 2  # split so that no request exceeds 4 MiB
            assert sum(len(r.msg_id.split(",")) for r in results) == 5
            assert store.get_max_offset_in_queue("BatchT", 0) == 7

    run(main())
