"""Hostile SEND_MESSAGE_V2 headers: one request must never poison a queue or its recovery.

A sender's sysFlag used to be stored as sent. With the born-host IPv6 bit (16) on a record written with
4-byte hosts, every reader misparsed the record, and a crash recovery truncated the CommitLog there,
dropping every acknowledged message after it. These tests send raw frames on a real socket to a real
`mqnamesrv` + `mqbroker` pair (subprocesses, SYNC_FLUSH), kill the broker with SIGKILL, and check that every
acknowledged message is pulled back intact before and after recovery.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.protocol.codes import RequestCode
from broker.protocol.command import RemotingCommand
from broker.protocol.message import LAYOUT_SYS_FLAGS, MessageExt, SysFlag, decode_records, sender_sys_flag
from broker.protocol.properties import encode_properties
from tests.hostile_cluster import BrokerProcs, RawClient, pull_header, running_pair, send_header

TOPIC = "Hostile"
QUEUES = 4
INT32 = st.integers(-(2**31), 2**31 - 1)
# Any text a client can put on the wire: every character but lone surrogates, which UTF-8 cannot encode
TEXT_CHARS = st.characters(blacklist_categories=("Cs",))
FIELD_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02")
INT64 = st.integers(-(2**63), 2**63 - 1)


class SendClient(RawClient):
    """The shared raw client, sending with any sysFlag and header fields, and reading a queue back."""

    def send_with(self, body: bytes, queue_id: int, sys_flag: int = 0, **fields: str) -> RemotingCommand:
        ext = send_header(TOPIC, queue_id, queues=QUEUES) | {"f": str(sys_flag)} | fields
        return self.request(RequestCode.SEND_MESSAGE_V2, ext, body)

    def pull_at(self, queue_id: int, offset: int, max_nums: int = 32) -> RemotingCommand:
        ext = pull_header(TOPIC, queue_id, offset, "HostileCG") | {"maxMsgNums": str(max_nums)}
        return self.request(RequestCode.PULL_MESSAGE, ext)

    def pull_queue(self, queue_id: int) -> list[MessageExt]:
        """Every message of one queue, from offset 0: a pull that fails to parse fails the test."""
        got: list[MessageExt] = []
        while True:
            resp = self.pull_at(queue_id, len(got))
            if resp.code != 0:  # 19/20/21: nothing more
                return got
            batch = list(decode_records(resp.body))
            assert batch, f"queue {queue_id}: a FOUND pull with no records"
            got += batch


@pytest.fixture(scope="module")
def broker_procs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcs]:
    with running_pair(tmp_path_factory.mktemp("hostile"), flushDiskType="SYNC_FLUSH") as procs:
        yield procs


def test_sys_flag_rule_table() -> None:
    """What a sender may store: the layout bits are dropped, nonsense is refused with the reason."""
    kept = {0: 0, SysFlag.COMPRESSED: 1, SysFlag.MULTI_TAGS: 2, SysFlag.TRANSACTION_PREPARED_TYPE: 4, 0x301: 0x301}
    for sent, stored in kept.items():
        assert sender_sys_flag(sent) == stored
    for layout in (SysFlag.BORNHOST_V6, SysFlag.STOREHOST_V6, SysFlag.INNER_BATCH, SysFlag.NEED_UNWRAP):
        assert sender_sys_flag(layout | SysFlag.COMPRESSED) == SysFlag.COMPRESSED
    refused = {-1: "bits", 1 << 12: "bits", 2**31 - 1: "bits", 0x8: "COMMIT", 0xC: "COMMIT"}
    for sent, words in refused.items():
        with pytest.raises(ValueError, match=words):
            sender_sys_flag(sent)


def test_the_reported_poison_sequence_survives_kill9(broker_procs: BrokerProcs) -> None:
    """A sequence to one queue: 4 valid, sysFlag 16, 4 valid, sysFlag -1, 4 valid (SYNC_FLUSH)."""
    queue = 1
    client = SendClient(broker_procs.broker_port)
    try:
        acked: list[bytes] = []
        refused: list[RemotingCommand] = []
        plan = [0] * 4 + [SysFlag.BORNHOST_V6] + [0] * 4 + [-1] + [0] * 4
        for i, sys_flag in enumerate(plan):
            body = f"message {i} sysFlag {sys_flag}".encode()
            resp = client.send_with(body, queue, sys_flag)
            if resp.code == 0:
                acked.append(body)
            else:
                refused.append(resp)
        # sysFlag 16 is stored with the layout the broker wrote; -1 is refused with a reason
        assert len(acked) == 13 and b"message 4 sysFlag 16" in acked
        assert [r.code for r in refused] == [13] and "sysFlag -1" in (refused[0].remark or "")
        before = client.pull_queue(queue)
        assert [m.body for m in before] == acked
        assert all(not m.sys_flag & LAYOUT_SYS_FLAGS for m in before)
    finally:
        client.close()

    broker_procs.kill9("mqbroker")
    broker_procs.spawn("mqbroker", broker_procs.root / "broker.conf")
    client = SendClient(broker_procs.broker_port)
    try:
        after = client.pull_queue(queue)
        assert [m.body for m in after] == acked, "the recovery lost acknowledged messages"
        assert client.send_with(b"after recovery", queue).code == 0
    finally:
        client.close()


HEADERS = st.fixed_dictionaries(
    {
        "queue_id": st.integers(-2, QUEUES + 2),
        "sys_flag": st.one_of(INT32, st.sampled_from([0, 1, 2, 4, 8, 12, 16, 32, 64, 128, 0x300, 0x7FF])),
        "flag": INT32,
        "born": INT64,
        "reconsume": st.one_of(INT32, st.just(0)),
        "properties": st.one_of(
            st.just(""),
            st.dictionaries(
                st.text(FIELD_CHARS, min_size=1, max_size=12), st.text(FIELD_CHARS, max_size=40), max_size=4
            ).map(encode_properties),
            st.text(TEXT_CHARS, max_size=60),  # separators in the wrong places, control characters, anything
        ),
        "body": st.binary(max_size=300),
    }
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sends=st.lists(HEADERS, min_size=1, max_size=8))
def test_random_headers_never_block_a_queue(broker_procs: BrokerProcs, sends: list[dict[str, object]]) -> None:
    """Every acknowledged message comes back intact at the offset the broker gave; nothing refused
    (or acknowledged) stops the queue for the valid message sent after it."""
    client = SendClient(broker_procs.broker_port)
    try:
        for send in sends:
            body = bytes(send["body"])  # type: ignore[arg-type]
            resp = client.send_with(
                body, int(send["queue_id"]), int(send["sys_flag"]),  # type: ignore[call-overload]
                h=str(send["flag"]), g=str(send["born"]), j=str(send["reconsume"]), i=str(send["properties"]),
            )  # fmt: skip
            if resp.code != 0:
                assert resp.remark, f"refused without a reason: code {resp.code}"
                continue
            props = str(send["properties"])
            if int(send["sys_flag"]) & SysFlag.TRANSACTION_MASK or "TRAN_MSG" in props or "DELAY" in props:  # type: ignore[call-overload]
                continue  # a half or delayed message waits in a system topic by design
            queue, offset = int(resp.ext_fields["queueId"]), int(resp.ext_fields["queueOffset"])
            pulled = client.pull_at(queue, offset, 1)
            assert pulled.code == 0, pulled.remark
            (stored,) = decode_records(pulled.body)
            assert (stored.body, stored.flag, stored.born_timestamp) == (body, send["flag"], send["born"])
            assert stored.offset_msg_id == resp.ext_fields["msgId"]
        for queue in range(QUEUES):  # a valid message after whatever came before is still served
            ok = client.send_with(b"canary", queue)
            assert ok.code == 0, ok.remark
            canary = client.pull_at(queue, int(ok.ext_fields["queueOffset"]), 1)
            assert [m.body for m in decode_records(canary.body)] == [b"canary"]
    finally:
        client.close()
