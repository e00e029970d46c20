"""Request/Reply end to end over real TCP: our SDK's `Producer.request()` against a responder built from
our push consumer and producer, as RocketMQ does it: the reply goes to `<cluster>_REPLY_TOPIC` with
SEND_REPLY_MESSAGE_V2 and the broker pushes it to the requester's connection
(PUSH_REPLY_MESSAGE_TO_CLIENT). Also: the timeout when nobody answers, the responder's SYSTEM_ERROR when
the requester is gone, a reply without REPLY_TO_CLIENT, and that the reply is stored (or not, with
storeReplyMessageEnable=false)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from broker.client import ConsumeStatus, Message, MessageExt, Producer, PushConsumer
from broker.client.errors import BrokerSystemError
from broker.client.request import RequestTimeoutError, create_reply_message, request_table
from broker.protocol.message import decode_records
from broker.protocol.reply import ARRIVE_TIME, CORRELATION_ID, MSG_TYPE, PUSH_REPLY_TIME, REPLY_TO_CLIENT, TTL
from broker.transport.loop import run
from tests.features.features_harness import FeaturesCluster, features_cluster

REPLY_TOPIC = "FeatureCluster_REPLY_TOPIC"


async def _responder(cluster: FeaturesCluster, topic: str, group: str) -> tuple[PushConsumer, Producer]:
    """A consumer of `topic` that answers every request with `echo:<body>` through its own producer."""
    replier = Producer(f"PID-{group}", client_config=cluster.client_config())
    await replier.start()

    async def answer(msgs: list[MessageExt]) -> ConsumeStatus:
        for msg in msgs:
            reply = create_reply_message(msg, b"echo:" + msg.uncompressed_body())
            await replier.send(reply)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        group, client_config=cluster.client_config(), consume_from_where="CONSUME_FROM_FIRST_OFFSET"
    )
    consumer.subscribe(topic, "*")
    consumer.register_listener(answer)
    await consumer.start()
    return consumer, replier


def _stored_replies(cluster: FeaturesCluster) -> list[MessageExt]:
    got = cluster.running_broker.store.get_message("t", REPLY_TOPIC, 0, 0, 64)
    try:
        return list(decode_records(b"".join(got.buffers)))
    finally:
        got.release()


def test_request_gets_the_responders_reply_and_the_reply_is_stored(tmp_path: Path) -> None:
    async def main() -> None:
        async with features_cluster(tmp_path) as cluster:
            await cluster.create_topic("RpcT", queues=2)
            consumer, replier = await _responder(cluster, "RpcT", "CG-rpc")
            requester = Producer("PID-rpc-requester", client_config=cluster.client_config())
            await requester.start()
            try:
                bodies = [b"ping-0", b"ping-1" * 2000, "ünïcode-2".encode()]  # the second is compressed on the wire
                replies = [await requester.request(Message("RpcT", body), timeout=15) for body in bodies]
            finally:
                await requester.shutdown()
                await consumer.shutdown()
                await replier.shutdown()
            for body, reply in zip(bodies, replies, strict=True):
                assert reply.body == b"echo:" + body
                assert reply.topic == REPLY_TOPIC
                assert reply.properties[MSG_TYPE] == "reply"
                assert reply.properties[REPLY_TO_CLIENT] == requester.instance.client_id
                assert int(reply.properties[TTL]) == 15_000
                assert int(reply.properties[PUSH_REPLY_TIME]) <= int(reply.properties[ARRIVE_TIME])
            assert len({r.properties[CORRELATION_ID] for r in replies}) == 3
            stored = _stored_replies(cluster)
            assert sorted(m.properties[CORRELATION_ID] for m in stored) == sorted(
                r.properties[CORRELATION_ID] for r in replies
            )

    run(main())


def test_request_without_a_responder_times_out_with_a_clear_message(tmp_path: Path) -> None:
    async def main() -> None:
        async with features_cluster(tmp_path) as cluster:
            await cluster.create_topic("RpcNobody", queues=1)
            async with Producer("PID-rpc-alone", client_config=cluster.client_config()) as requester:
                started = time.monotonic()
                with pytest.raises(RequestTimeoutError, match=r"send request message to <RpcNobody> OK, but wait"):
                    await requester.request(Message("RpcNobody", b"anyone?"), timeout=1.0)
                # It waited out its timeout; epoll's millisecond granularity can wake the loop a little early.
                assert time.monotonic() - started >= 0.95
                # The request itself was stored: a late responder could still read it.
                assert cluster.running_broker.store.get_max_offset_in_queue("RpcNobody", 0) == 1

    run(main())


def test_reply_to_a_client_not_connected_is_refused_but_stored(tmp_path: Path) -> None:
    """The broker answers the responder SYSTEM_ERROR naming the client, as RocketMQ does."""

    async def main() -> None:
        async with features_cluster(tmp_path) as cluster:
            async with Producer("PID-rpc-orphan", client_config=cluster.client_config()) as replier:
                request = MessageExt(
                    topic="RpcGone",
                    body=b"",
                    properties={"CLUSTER": "FeatureCluster", CORRELATION_ID: "c-1", REPLY_TO_CLIENT: "10.9.9.9@gone"},
                )
                with pytest.raises(BrokerSystemError, match=r"channel of <10.9.9.9@gone> not found"):
                    await replier.send(create_reply_message(request, b"too late"))
                missing = Message(REPLY_TOPIC, b"x", properties={MSG_TYPE: "reply", CORRELATION_ID: "c-2"})
                with pytest.raises(BrokerSystemError, match=r"REPLY_TO_CLIENT\] is null"):
                    await replier.send(missing)
            # Stored all the same (the producer retries SYSTEM_ERROR, as Java's does, so maybe more than once).
            assert {m.properties[CORRELATION_ID] for m in _stored_replies(cluster)} == {"c-1", "c-2"}

    run(main())


def test_store_reply_message_disabled_pushes_without_storing(tmp_path: Path) -> None:
    async def main() -> None:
        async with features_cluster(tmp_path, storeReplyMessageEnable="false") as cluster:
            await cluster.create_topic("RpcNoStore", queues=1)
            consumer, replier = await _responder(cluster, "RpcNoStore", "CG-rpc-nostore")
            try:
                async with Producer("PID-rpc-nostore", client_config=cluster.client_config()) as requester:
                    reply = await requester.request(Message("RpcNoStore", b"hi"), timeout=15)
            finally:
                await consumer.shutdown()
                await replier.shutdown()
            assert reply.body == b"echo:hi"
            assert _stored_replies(cluster) == []

    run(main())


def test_a_reply_for_a_forgotten_request_is_acknowledged_and_dropped(tmp_path: Path) -> None:
    """A reply that arrives after its requester gave up: the client answers SUCCESS (the responder's send
    succeeds) and nothing is completed."""

    async def main() -> None:
        async with (
            features_cluster(tmp_path) as cluster,
            Producer("PID-rpc-late-req", client_config=cluster.client_config()) as requester,
            Producer("PID-rpc-late-rep", client_config=cluster.client_config()) as replier,
        ):
            await cluster.create_topic("RpcLate", queues=1)
            with pytest.raises(RequestTimeoutError):
                await requester.request(Message("RpcLate", b"q"), timeout=0.5)
            got = cluster.running_broker.store.get_message("t", "RpcLate", 0, 0, 1)
            try:
                request = next(iter(decode_records(b"".join(got.buffers))))
            finally:
                got.release()
            result = await replier.send(create_reply_message(request, b"late answer"))
            assert result.status.name == "SEND_OK"
            assert request_table(requester.instance).waiting == {}

    run(main())
