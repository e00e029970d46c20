"""The batch send path held to plain references.

- `batch_messages` (one loop from the body's bytes to the messages the store appends) equals
  `batch_messages_reference` (the body decoded, then each message checked and built in turn): the same
  messages, UNIQ_KEYs and errors, for varied bodies and for malformed and truncated ones.
- The store's batch append (`CommitLog.append_messages`, its ConsumeQueue units written as one run) writes
  the same CommitLog and ConsumeQueue bytes as appending the same messages one by one, with the store's
  clock held still so that both get one store timestamp.
- Over a real connection, a malformed or truncated batch body gets MESSAGE_ILLEGAL (13) and stores nothing.
"""

from __future__ import annotations

import asyncio
import itertools
import struct
import types
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import broker.store.commit_log as commit_log_module
from broker.protocol.batch import BatchMessage, encode_batch
from broker.protocol.javahash import java_string_hash
from broker.protocol.message import decode_record
from broker.protocol.properties import decode_properties, encode_properties
from broker.server.batch_send import BatchSend, batch_messages, batch_messages_reference
from broker.server.errors import RequestError
from broker.server.put_rules import checked_properties
from broker.store import MessageStore, MessageToStore
from broker.store.results import BatchToStore
from tests.server.server_harness import cluster, messages
from tests.store.store_helpers import dispatched, small_config

BORN = ("10.1.2.3", 40123)
FIELD = st.text(st.characters(codec="utf-8", exclude_characters="\x01\x02"), max_size=12)
NAMES = st.sampled_from(["KEYS", "TAGS", "UNIQ_KEY", "WAIT", "a", "ключ", "DELAY", "TRAN_MSG", "TIMER_DELAY_SEC"])


def send_of(batch_text: str = "WAIT\x01true\x02", max_size: int = 4096, cluster_name: str = "c1") -> BatchSend:
    level = batch_text
    if level and not level.endswith("\x02"):
        level += "\x02"
    return BatchSend("Tópico", 3, 0, 1_700_000_000_123, BORN, max_size, checked_properties(batch_text),
                     level + f"CLUSTER\x01{cluster_name}\x02")  # fmt: skip


def uniq_source() -> object:
    numbers = itertools.count()
    return lambda: f"GEN{next(numbers):08X}"


def outcome(fn: object, body: bytes, send: BatchSend) -> object:
    try:
        return fn(body, send, uniq_source())  # type: ignore[operator]
    except RequestError as exc:
        return ("error", exc.code, exc.remark)


def assert_same(body: bytes, send: BatchSend) -> object:
    fast = outcome(batch_messages, body, send)
    if isinstance(fast, tuple) and isinstance(fast[0], BatchToStore):
        fast = (fast[0].messages(), fast[1])  # the same messages, one object each
    plain = outcome(batch_messages_reference, body, send)
    assert fast == plain
    return fast


def inner(
    body: bytes = b"x" * 16, props: dict[str, str] | None = None, flag: int = 0, text: str | None = None
) -> BatchMessage:
    return BatchMessage(body, encode_properties(props or {}) if text is None else text, flag)


VARIED = [
    [inner(props={"KEYS": "k1 k2", "TAGS": "tag", "WAIT": "true", "UNIQ_KEY": "AC11000100002A9F0000000000000001"})],
    [inner(b"", {"UNIQ_KEY": "U1"}), inner(b"", {})],  # empty bodies; the second gets a generated UNIQ_KEY
    [inner(text="")],  # no properties at all
    [inner(text="KEYS\x01k")],  # no trailing separator
    [inner(text="TAGS\x01a\x02\x02TAGS\x01b\x02KEYS\x01\x02")],  # empty segment, repeated name, empty value
    [inner(props={"KEYS": "ключ 鍵", "TAGS": "ταγ", "UNIQ_KEY": "Ü"}, flag=7)],
    [inner(b"\x00\xff" * 2048, {"TAGS": "big"})],  # the largest body allowed (4096)
    [inner(props={"TAGS": f"t{i % 3}", "UNIQ_KEY": f"U{i}"}, flag=i) for i in range(40)],
    [inner(props={"DELAY": "0", "TRAN_MSG": "false"})],  # allowed values of the checked names
]


@pytest.mark.parametrize("messages", VARIED, ids=range(len(VARIED)))
@pytest.mark.parametrize(
    "batch_text", ["WAIT\x01true\x02", "", "TAGS\x01lvl\x02KEYS\x01lk\x02UNIQ_KEY\x01LU", "WAIT\x01false"]
)
def test_fast_path_equals_the_reference(messages: list[BatchMessage], batch_text: str) -> None:
    result = assert_same(encode_batch(messages), send_of(batch_text))
    assert not (isinstance(result, tuple) and result[0] == "error")


def good_body() -> bytes:
    return encode_batch([inner(props={"TAGS": "a", "UNIQ_KEY": "U1"}), inner(b"second", {"KEYS": "k"})])


def with_field(body: bytes, at: int, fmt: str, value: int) -> bytes:
    out = bytearray(body)
    struct.pack_into(fmt, out, at, value)
    return bytes(out)


MALFORMED = {
    "empty": b"",
    "short": good_body()[:10],
    "truncated tail": good_body()[:-1],
    "truncated record": good_body()[:-5],
    "extra bytes": good_body() + b"\x00" * 5,
    "negative total": with_field(good_body(), 0, ">i", -1),
    "total too large": with_field(good_body(), 0, ">i", 1 << 20),
    "total too small": with_field(good_body(), 0, ">i", 21),
    "negative body length": with_field(good_body(), 16, ">i", -3),
    "negative properties length": with_field(good_body(), 20 + 16, ">h", -1),
    "properties length off": with_field(good_body(), 20 + 16, ">h", 3),
    "not UTF-8": encode_batch([inner(text="TAGS\x01a\x02")]).replace(b"TAGS", b"T\xffGS"),
    "no separator": encode_batch([inner(props={"TAGS": "a"}), inner(text="garbage\x02")]),
    "empty name": encode_batch([inner(text="\x01v\x02")]),
    "delayed": encode_batch([inner(props={"TAGS": "a"}), inner(props={"DELAY": "3"})]),
    "transactional": encode_batch([inner(props={"TRAN_MSG": "true"})]),
    "timed": encode_batch([inner(props={"TIMER_DELAY_SEC": "10"})]),
    "body too large": encode_batch([inner(), inner(b"y" * 4097)]),
    "properties too long": encode_batch([inner(text="K\x01" + "v" * (0x7FFF - 2 - 20))]),
}


@pytest.mark.parametrize("name", MALFORMED)
def test_malformed_bodies_get_the_references_error(name: str) -> None:
    result = assert_same(MALFORMED[name], send_of())
    assert isinstance(result, tuple) and result[:2] == ("error", 13), result


@given(
    st.lists(
        st.tuples(st.binary(max_size=64), st.dictionaries(NAMES, FIELD, max_size=4), st.integers(-5, 5)),
        min_size=1,
        max_size=6,
    ),
    st.integers(0, 200),
    st.binary(max_size=3),
)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_fast_path_equals_the_reference_on_generated_and_damaged_bodies(
    parts: list[tuple[bytes, dict[str, str], int]], cut: int, junk: bytes
) -> None:
    body = encode_batch([inner(b, p, f) for b, p, f in parts])
    assert_same(body, send_of())
    assert_same(body[: len(body) - cut % (len(body) + 1)] + junk, send_of())


# -- the store: a batch append writes what one-by-one appends write ----------------------------------------


def store_messages(shared_birth: bool = False) -> list[MessageToStore]:
    """Varied messages of one queue; `shared_birth`: one born timestamp, as a producer's batch has."""
    texts = [
        "TAGS\x01a\x02KEYS\x01k1\x02UNIQ_KEY\x01U1\x02",
        "TAGS\x01a\x02UNIQ_KEY\x01U2\x02",
        "TAGS\x01b\x02KEYS\x01ключ\x02UNIQ_KEY\x01U3\x02",
        "UNIQ_KEY\x01U4\x02",
        "",
    ]
    out = []
    for i, text in enumerate(texts * 3):
        keys = None
        if i % 2 == 0:  # half with the send path's dispatch hint, half found by the CommitLog
            found = checked_properties(text)
            keys = (found.get("TAGS"), found.get("KEYS"), found.get("UNIQ_KEY"))
        born = 1_700_000_000_000 + (0 if shared_birth else i)
        out.append(MessageToStore("Tópico", 1, bytes([i]) * (i * 37 % 300), i, {}, 0, born, BORN, 0, 0,
                                  text.encode(), keys))  # fmt: skip
    return out


async def written(
    root: Path, batches: list[list[MessageToStore]], how: str, index: bool
) -> tuple[bytes, bytes, list[tuple[int, int]]]:
    # the index off: the put path writes ConsumeQueue units itself (a batch's as one run); on, in this
    # process: every record goes through the reput pass
    store = MessageStore(small_config(root, mapped_file_size_commit_log=1 << 20, message_index_enable=index))
    await store.start()
    heard: list[tuple[int, int]] = []
    store.reput.add_arrival_listener(lambda _t, _q, after, code, _p: heard.append((after, code)))
    try:
        for batch in batches:
            if how == "singles":
                for msg in batch:
                    assert (await store.put(msg)).ok
            else:
                result = await store.put(batch if how == "list" else BatchToStore.of(batch))
                assert result.ok and result.message_count == len(batch)
            await dispatched(store)  # caught up: the next put is next in line (a broker's reads are loop turns apart)
        await dispatched(store)
        end = store.commit_log.max_offset
        view = store.commit_log.get_data(0, end)
        assert view is not None
        log_bytes = bytes(view)
        view.release()
        cq = store.consume_queue_store.find("Tópico", 1)
        assert cq is not None
        mf = cq.queue.files[0]
        return log_bytes, bytes(mf.mm[: mf.wrote_position]), heard
    finally:
        await store.shutdown()


@pytest.mark.parametrize("index", [False, True], ids=["direct dispatch", "reput pass"])
@pytest.mark.parametrize(
    ("how", "mixed"),
    [("list", False), ("list", True), ("batch", False)],
    ids=["list", "list of mixed sysFlag and born host", "BatchToStore"],
)
def test_batch_append_writes_what_single_appends_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str, mixed: bool, index: bool
) -> None:
    monkeypatch.setattr(commit_log_module, "time", types.SimpleNamespace(time_ns=lambda: 1_800_000_000_000_000_000))
    msgs = store_messages(shared_birth=how == "batch")
    if mixed:
        msgs[3].born_host = ("10.9.9.9", 1)
        msgs[4].sys_flag = 2  # compressed
    batches = [msgs[:7], msgs[7:8], msgs[8:]]

    async def main() -> None:
        batch_log, batch_cq, heard = await written(tmp_path / "batch", batches, how, index)
        single_log, single_cq, _ = await written(tmp_path / "single", batches, "singles", index)
        assert batch_log == single_log
        assert batch_cq == single_cq and len(batch_cq) == 20 * len(msgs)
        if not mixed and not index:  # a run tells each listener once per distinct tags code, of the offset after it
            a, b = java_string_hash("a"), java_string_hash("b")
            assert heard[-3:] == [(15, 0), (15, a), (15, b)] and heard[-4][0] == 8

    asyncio.run(main())


# -- over a real connection: MESSAGE_ILLEGAL, and nothing stored ------------------------------------------


async def test_malformed_batches_store_nothing_and_good_ones_are_pulled_back(tmp_path: Path) -> None:
    async with cluster(tmp_path, maxMessageSize=4096) as c:
        cli = await c.client()
        assert (await cli.send("Batched", b"create the topic")).code == 0
        assert c.broker is not None
        store = c.broker.store
        phy = store.max_phy_offset
        for name, body in MALFORMED.items():
            resp = await cli.send("Batched", body, code=320)
            assert resp.code == 13, (name, resp.code, resp.remark)
            assert resp.remark, name
        assert store.max_phy_offset == phy, "a rejected batch was stored"
        good = [inner(f"m{i}".encode(), {"TAGS": "t", "KEYS": f"k{i}", "UNIQ_KEY": f"UK{i}"}) for i in range(5)]
        resp = await cli.send("Batched", encode_batch(good), code=320, props={"WAIT": "true"})
        assert resp.code == 0
        assert len(resp.ext_fields["msgId"].split(",")) == 5  # each message's offsetMsgId
        pulled = messages(await cli.pull("Batched", 1))
        assert [(m.body, m.properties["KEYS"], m.properties["UNIQ_KEY"]) for m in pulled] == [
            (f"m{i}".encode(), f"k{i}", f"UK{i}") for i in range(5)
        ]
        assert all(m.properties["WAIT"] == "true" and m.properties.get("CLUSTER") for m in pulled)


def test_batches_roll_over_small_files_and_read_back(tmp_path: Path) -> None:
    """A BatchToStore that does not fit the rest of a CommitLog file goes whole into the next one."""

    async def main() -> None:
        store = MessageStore(small_config(tmp_path, mapped_file_size_commit_log=8 * 1024, message_index_enable=False))
        await store.start()
        try:
            sent: list[MessageToStore] = []
            for n in range(20):
                batch = store_messages(shared_birth=True)[: 3 + n % 5]
                for i, msg in enumerate(batch):
                    msg.body = bytes([n, i]) * (50 + 40 * i)
                assert (await store.put(BatchToStore.of(batch))).ok
                sent += batch
                await dispatched(store)
            assert len(store.commit_log.queue.files) > 3
            got = []
            offset = 0
            while offset < store.get_max_offset_in_queue("Tópico", 1):
                result = store.get_message("G", "Tópico", 1, offset, 32)
                got += [decode_record(bytes(b), verify_crc=True) for b in result.buffers]
                offset = result.next_begin_offset
                result.release()
            assert [(m.body, m.properties) for m in got] == [
                (bytes(m.body), decode_properties((m.properties_bytes or b"").decode())) for m in sent
            ]
            assert [m.queue_offset for m in got] == list(range(len(sent)))
        finally:
            await store.shutdown()

    asyncio.run(main())
