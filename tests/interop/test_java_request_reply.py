"""Request/Reply with Apache RocketMQ's Java client 5.3.3 (unchanged) against our broker.

`DefaultMQProducer.request()` waits for a reply that a responder sends to `<cluster>_REPLY_TOPIC`
(MessageUtil.createReplyMessage, sent with SEND_REPLY_MESSAGE_V2) and that our broker pushes to the
requester's connection (PUSH_REPLY_MESSAGE_TO_CLIENT). Each side is played by the Java client and by
our SDK in turn, and a request nobody answers ends in the Java client's RequestTimeoutException.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator

import pytest

from broker.client import BlockingProducer, BlockingPushConsumer, ConsumeStatus, MessageExt, Producer
from broker.client.request import create_reply_message
from broker.protocol.reply import CORRELATION_ID, MSG_TYPE, REPLY_TO_CLIENT
from broker.transport.loop import run
from tests.interop.interop_harness import (
    CLUSTER,
    Record,
    ServerPair,
    fields,
    home_for,
    run_all,
    sdk_message,
    sdk_pull_all,
)
from tests.interop.java_harness import JavaProc, check_intact, client_log_lines, ensure_java, java, java_server_pair

pytestmark = pytest.mark.peers

COUNT = 3
REPLY_TOPIC = f"{CLUSTER}_REPLY_TOPIC"


@pytest.fixture(scope="module")
def java_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPair]:
    problem = ensure_java()
    if problem is not None:
        pytest.skip(f"the Java RocketMQ client cannot be installed here: {problem}")
    yield from java_server_pair(tmp_path_factory.mktemp("java-request"))


def java_run(servers: ServerPair, name: str, args: list[str]) -> JavaProc:
    return java([*args, "--namesrv", servers.namesrv_addr, "--timeout", "60"], home_for(servers.root, name), 80)


def echo(body: bytes) -> bytes:
    return b"echo:" + body


def check_replies(requester: JavaProc, origin: str, topic: str) -> None:
    assert requester.returncode == 0, requester.describe()
    replies = sorted(requester.of("reply"), key=lambda e: e["seq"])
    assert [e["seq"] for e in replies] == list(range(COUNT)), requester.describe()
    for e in replies:
        want = fields(origin, topic, e["seq"])["body"].encode()
        assert base64.b64decode(e["reply_body_b64"]) == echo(want), e
        assert e["topic"] == REPLY_TOPIC and e["props"][MSG_TYPE] == "reply", e
        assert e["props"][CORRELATION_ID] and e["props"][REPLY_TO_CLIENT], e


class SdkResponder:
    """Our push consumer answering every request through our producer (threads of the blocking SDK)."""

    def __init__(self, servers: ServerPair, group: str, topic: str) -> None:
        self.replied: list[MessageExt] = []
        self.done = threading.Event()
        self.producer = BlockingProducer(f"PID-{group}", servers.namesrv_addr)
        self.consumer = BlockingPushConsumer(group, servers.namesrv_addr, consume_from_where=4)
        self.consumer.subscribe(topic, "*")
        self.consumer.register_listener(self._answer)

    def _answer(self, msgs: list[MessageExt]) -> ConsumeStatus:
        for msg in msgs:
            self.producer.send(create_reply_message(msg, echo(msg.uncompressed_body())))
            self.replied.append(msg)
        if len(self.replied) >= COUNT:
            self.done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    def __enter__(self) -> SdkResponder:
        self.producer.start()
        self.consumer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.consumer.shutdown()
        self.producer.shutdown()


def test_java_requester_gets_replies_from_our_sdk(java_servers: ServerPair) -> None:
    topic = "JavaRequestToSdk"
    java_servers.create_topics([topic])
    with SdkResponder(java_servers, "CID-sdk-responder", topic) as responder:
        requester = java_run(java_servers, "java-requester", ["request", "--topic", topic, "--origin", "javareq",
                                                               "--count", str(COUNT)])  # fmt: skip
        requester.start().wait()
    check_replies(requester, "javareq", topic)
    assert len(responder.replied) == COUNT
    for msg in responder.replied:  # the request arrived intact, with what a request carries
        check_intact(Record.from_message(msg), "javareq")
        assert msg.properties[REPLY_TO_CLIENT] and msg.properties[CORRELATION_ID], msg
        assert msg.properties["TTL"] == "15000", msg


def test_java_requester_and_java_responder(java_servers: ServerPair) -> None:
    topic = "JavaRequestToJava"
    java_servers.create_topics([topic])
    respond = ["respond", "--group", "CID-java-responder", "--topic", topic, "--expect", str(COUNT)]
    responder = java_run(java_servers, "java-responder", respond)
    requester = java_run(java_servers, "java-requester-2", ["request", "--topic", topic, "--origin", "javareq2",
                                                             "--count", str(COUNT)])  # fmt: skip
    run_all([responder, requester])
    check_replies(requester, "javareq2", topic)
    assert responder.returncode == 0, responder.describe()
    assert {e["status"] for e in responder.of("replied")} == {"SEND_OK"}, responder.describe()


def test_our_requester_gets_replies_from_the_java_client(java_servers: ServerPair) -> None:
    topic = "SdkRequestToJava"
    java_servers.create_topics([topic])
    respond = ["respond", "--group", "CID-java-responder-sdk", "--topic", topic, "--expect", str(COUNT)]
    responder = java_run(java_servers, "java-responder-sdk", respond)
    responder.start()

    async def ask() -> list[MessageExt]:
        async with Producer("PID-sdk-requester", java_servers.namesrv_addr) as producer:
            return [await producer.request(sdk_message("sdkreq", topic, i), timeout=30) for i in range(COUNT)]

    try:
        replies = run(ask())
    finally:
        responder.wait()
    assert responder.returncode == 0, responder.describe()
    for i, reply in enumerate(replies):
        assert reply.body == echo(fields("sdkreq", topic, i)["body"].encode()), reply
        assert reply.topic == REPLY_TOPIC and reply.properties[MSG_TYPE] == "reply", reply


def test_java_request_without_responder_times_out(java_servers: ServerPair) -> None:
    topic = "JavaRequestNobody"
    java_servers.create_topics([topic])
    requester = java_run(java_servers, "java-requester-alone", ["request", "--topic", topic, "--origin", "javaalone",
                                                                 "--count", "1", "--request-timeout", "2"])  # fmt: skip
    requester.start().wait()
    assert requester.returncode == 0, requester.describe()
    [timeout] = requester.of("request_timeout")
    assert "CODE: 10006" in timeout["error"] and "no reply message" in timeout["error"], timeout
    assert timeout["elapsed_ms"] >= 2000, timeout
    assert not requester.of("reply"), requester.describe()


def test_java_sync_request_gives_up_at_the_send_acknowledgement(java_servers: ServerPair) -> None:
    """Java 5.3.1-5.3.3's synchronous request(msg, timeout) counts its latch down when the request's
    send is acknowledged (apache/rocketmq#9319): it throws RequestTimeoutException at once, before a
    reply can exist. Our broker still pushes the reply, which the client logs as unmatched."""
    topic = "JavaSyncRequest"
    java_servers.create_topics([topic])
    with SdkResponder(java_servers, "CID-sdk-responder-sync", topic) as responder:
        request = [
            "request",
            "--api",
            "sync",
            "--topic",
            topic,
            "--origin",
            "javasync",
            "--count",
            "1",
            "--linger",
            "3",
        ]
        requester = java_run(java_servers, "java-requester-sync", request)
        requester.start().wait()
        assert responder.done.wait(10) or responder.replied, "the request never reached the responder"
    [timeout] = requester.of("request_timeout")
    assert "wait reply message timeout, 15000 ms" in timeout["error"] and timeout["elapsed_ms"] < 15000, timeout
    logged = "\n".join(client_log_lines(requester.home))
    assert "receive reply message, but not matched any request" in logged, requester.describe()


def test_java_timed_delivery_with_each_setter(java_servers: ServerPair) -> None:
    """Message.setDeliverTimeMs / setDelayTimeSec / setDelayTimeMs (TIMER_* properties, 5.x): each
    message is stored in its topic no sooner than asked, intact."""
    topic, count = "JavaTimed", 6
    java_servers.create_topics([topic])
    timed = java_run(java_servers, "java-timed", ["timed", "--topic", topic, "--origin", "javatimed",
                                                  "--count", str(count), "--in", "2"])  # fmt: skip
    timed.start().wait()
    assert timed.returncode == 0 and not timed.of("send_error"), timed.describe()
    due = {e["seq"]: e["due_ms"] for e in timed.of("sent")}
    assert {e["api"] for e in timed.of("sent")} == {"setDeliverTimeMs", "setDelayTimeSec", "setDelayTimeMs"}
    stored = sdk_pull_all(java_servers.namesrv_addr, "CID-java-timed-check", topic, count, timeout=20)
    assert sorted(r.seq for r in stored) == list(range(count)), stored
    for record in stored:
        check_intact(record, "javatimed")
        # due_ms is the Java side's clock before the send; the broker computed the relative ones later
        assert record.store_ts >= due[record.seq], (record.seq, record.store_ts - due[record.seq])
        assert "TIMER_OUT_MS" not in record.props and int(record.props["TIMER_DEQUEUE_MS"]) >= due[record.seq], record
