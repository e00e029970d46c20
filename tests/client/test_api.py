"""Reply parsing and request bodies of the client API, checked against the broker's own codecs."""

from __future__ import annotations

import zlib

import pytest

from broker.client.api import heartbeat_body, lock_body, pull_result, send_result
from broker.client.errors import SystemBusy, TopicNotExist
from broker.client.message import MessageQueue, PullStatus, SendStatus
from broker.client.subscription import parse_subscription
from broker.protocol.bodies import HeartbeatData, LockBatchRequestBody
from broker.protocol.codes import ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.message import MessageExt, SysFlag, encode_record

MQ = MessageQueue("T", "b", 0)
SEND_EXT = {"msgId": "7F00000100002A9F0000000000000010", "queueId": "3", "queueOffset": "41"}
PULL_EXT = {"suggestWhichBrokerId": "0", "nextBeginOffset": "12", "minOffset": "0", "maxOffset": "12"}


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (ResponseCode.SUCCESS, SendStatus.SEND_OK),
        (ResponseCode.FLUSH_DISK_TIMEOUT, SendStatus.FLUSH_DISK_TIMEOUT),
        (ResponseCode.FLUSH_SLAVE_TIMEOUT, SendStatus.FLUSH_SLAVE_TIMEOUT),
        (ResponseCode.SLAVE_NOT_AVAILABLE, SendStatus.SLAVE_NOT_AVAILABLE),
    ],
)
def test_send_result_statuses(code: int, status: SendStatus) -> None:
    result = send_result(RemotingCommand(code=code, ext_fields=SEND_EXT), MQ, ["UNIQ1"], "b:1")
    assert result.status is status
    assert result.msg_id == "UNIQ1" and result.offset_msg_id == SEND_EXT["msgId"]
    assert result.message_queue == MessageQueue("T", "b", 3) and result.queue_offset == 41


@pytest.mark.parametrize(("code", "exc"), [(ResponseCode.SYSTEM_BUSY, SystemBusy), (17, TopicNotExist)])
def test_send_failures_raise(code: int, exc: type) -> None:
    with pytest.raises(exc, match="busy"):
        send_result(RemotingCommand(code=code, remark="busy"), MQ, ["U"], "b:1")


def test_pull_result_inflates_compressed_bodies() -> None:
    plain = MessageExt(topic="T", body=b"p", queue_offset=10, properties={"TAGS": "a"})
    packed = MessageExt(
        topic="T",
        body=zlib.compress(b"z" * 5000),
        queue_offset=11,
        sys_flag=SysFlag.COMPRESSED | SysFlag.COMPRESSION_ZLIB,
    )
    body = encode_record(plain) + encode_record(packed)
    result = pull_result(RemotingCommand(code=0, ext_fields=PULL_EXT, body=body), "b:1")
    assert result.status is PullStatus.FOUND and result.next_begin_offset == 12
    assert [m.body for m in result.messages] == [b"p", b"z" * 5000]
    assert not result.messages[1].sys_flag & SysFlag.COMPRESSED


@pytest.mark.parametrize(
    ("code", "status"),
    [(19, PullStatus.NO_NEW_MSG), (20, PullStatus.NO_MATCHED_MSG), (21, PullStatus.OFFSET_ILLEGAL)],
)
def test_pull_not_found_codes(code: int, status: PullStatus) -> None:
    result = pull_result(RemotingCommand(code=code, ext_fields=PULL_EXT), "b:1")
    assert result.status is status and result.messages == [] and result.max_offset == 12


def test_heartbeat_body_is_what_the_broker_parses() -> None:
    consumer = {
        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
        "consumeType": "CONSUME_PASSIVELY",
        "groupName": "CG",
        "messageModel": "BROADCASTING",
        "subscriptionDataSet": [parse_subscription("T", "a || b").to_json()],
        "unitMode": False,
    }
    hb = HeartbeatData.from_json(heartbeat_body("127.0.0.1@x", ["PG"], [consumer]))
    assert hb.client_id == "127.0.0.1@x"
    assert [p.group_name for p in hb.producers] == ["PG"]
    (cd,) = hb.consumers
    assert cd.group_name == "CG" and cd.message_model.name == "BROADCASTING"
    assert cd.consume_from_where.name == "CONSUME_FROM_FIRST_OFFSET"
    assert cd.subscriptions[0].tags_set == ("a", "b")


def test_lock_body_is_what_the_broker_parses() -> None:
    body = LockBatchRequestBody.from_json(lock_body("CG", "cid", [MQ, MessageQueue("T", "b", 1)]))
    assert body.consumer_group == "CG" and body.client_id == "cid"
    assert {(m.topic, m.broker_name, m.queue_id) for m in body.mq_set} == {("T", "b", 0), ("T", "b", 1)}
