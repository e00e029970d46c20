"""The IndexFiles written by a helper process (broker.store.index_process / index_helper).

Real stores on real files, a real helper process; the broker's and the helper's deaths are real
kill -9s. The helper's answers are compared with the in-process IndexService's on the same records.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from broker.protocol.message import SysFlag
from broker.store import MessageStore, MessageToStore, PutStatus, StoreConfig
from broker.store import index_process as index_process_module
from broker.store.config import INDEX_HELPER_MIN_FILE_SIZE
from broker.store.index_file import key_hash
from broker.store.index_process import IndexProcess
from tests.store.store_helpers import dispatched, message, process_gone, small_config, wait_for

REPO = Path(__file__).resolve().parents[2]  # the child scripts import tests.store.store_helpers from here
TOPIC = "TopicTest"
FAR_FUTURE = 1 << 62


def helper_config(root: Path, **kw: object) -> StoreConfig:
    return small_config(root, index_helper_enable=True, **kw)


def varied_messages(count: int) -> list[MessageToStore]:
    """Records of every kind the index treats differently: several KEYS, blank tokens, no keys at all,
    non-ASCII keys, ROLLBACK records (never indexed) and IPv6 born hosts (another record layout)."""
    out = []
    for i in range(count):
        props = {"TAGS": "TagA", "UNIQ_KEY": f"UNIQ{i:08d}"}
        kind = i % 6
        if kind == 1:
            props["KEYS"] = f"order-{i} user-{i % 7}"
        elif kind == 2:
            props["KEYS"] = f"  spaced-{i}  "
        elif kind == 3:
            props = {"TAGS": "TagB"}  # nothing to index
        elif kind == 4:
            props["KEYS"] = f"clé-{i} 键-{i}"
        out.append(
            MessageToStore(
                topic=TOPIC,
                queue_id=i % 3,
                body=os.urandom(50 + i % 300),
                properties=props,
                born_timestamp=1_700_000_000_000 + i,
                born_host=("::1", 40000) if kind == 5 else ("127.0.0.1", 40000),
                sys_flag=SysFlag.TRANSACTION_ROLLBACK_TYPE if i % 23 == 0 else 0,
            )
        )
    return out


def all_keys(messages: list[MessageToStore]) -> list[str]:
    keys = []
    for m in messages:
        props = m.properties or {}
        if "UNIQ_KEY" in props:
            keys.append(props["UNIQ_KEY"])
        keys += [k for k in props.get("KEYS", "").split(" ") if k]
    return keys


def rolled_back_unique_keys(messages: list[MessageToStore]) -> set[str]:
    """The keys of ROLLBACK records that no other record has (`user-N` keys are shared)."""
    return {k for i, m in enumerate(messages) if i % 23 == 0 for k in all_keys([m]) if not k.startswith("user-")}


def answers(store: MessageStore, keys: list[str]) -> dict[str, list[int]]:
    """CommitLog offsets found per key (as a client's QUERY_MESSAGE would get them)."""
    out = {}
    for key in keys:
        result = store.query_message(TOPIC, key, 64, 0, FAR_FUTURE)
        out[key] = sorted(int.from_bytes(v[28:36], "big") for v in result.buffers)
        result.release()
    return out


async def _store_with(config: StoreConfig, messages: list[MessageToStore]) -> MessageStore:
    store = MessageStore(config)
    await store.start()
    for m in messages:
        assert (await store.put(m)).status is PutStatus.PUT_OK
    await dispatched(store)
    return store


def test_the_helper_answers_queries_as_the_in_process_index_does(tmp_path: Path) -> None:
    messages = varied_messages(1500)  # several CommitLog and index files (small_config)
    keys = all_keys(messages)

    async def run() -> None:
        local = await _store_with(small_config(tmp_path / "local"), messages)
        helped = await _store_with(helper_config(tmp_path / "helped"), messages)
        assert isinstance(helped.index, IndexProcess) and not isinstance(local.index, IndexProcess)
        try:
            expected = answers(local, keys)
            assert sum(map(len, expected.values())) > 1000
            assert answers(helped, keys) == expected
            rollback_keys = rolled_back_unique_keys(messages)
            assert rollback_keys and all(expected[k] == [] for k in rollback_keys)
            assert len(list((tmp_path / "helped" / "index").iterdir())) > 1  # it rolled files too
        finally:
            await local.shutdown()
            await helped.shutdown()

    asyncio.run(run())


def test_a_query_sees_every_message_put_before_it(tmp_path: Path) -> None:
    async def run() -> None:
        store = await _store_with(helper_config(tmp_path), [])
        try:
            for i in range(200):
                assert (await store.put(message(i))).status is PutStatus.PUT_OK
                if i % 20 == 0:  # the query itself waits for the helper to catch up
                    await dispatched(store)
                    result = store.query_message(TOPIC, f"key-{i}", 4, 0, FAR_FUTURE)
                    assert len(result.buffers) == 1, i
                    assert result.index_last_update_phy_offset == store.max_phy_offset - result.buffers[0].nbytes
                    result.release()
        finally:
            await store.shutdown()

    asyncio.run(run())


def test_small_dispatch_passes_share_one_announcement(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each announcement wakes the helper: passes of a few records wait up to ANNOUNCE_S to go together,
    and the last one still reaches the helper without another put."""
    lines: list[str] = []
    real_send = IndexProcess._send

    def recording_send(self: IndexProcess, proc: subprocess.Popen[bytes], line: str, *, block: bool) -> bool:
        lines.append(line)
        return real_send(self, proc, line, block=block)

    monkeypatch.setattr(IndexProcess, "_send", recording_send)

    async def run() -> None:
        store = await _store_with(helper_config(tmp_path), [])
        try:
            await asyncio.sleep(index_process_module.ANNOUNCE_S * 4)
            lines.clear()
            for i in range(50):  # one dispatch pass per put
                assert (await store.put(message(i))).status is PutStatus.PUT_OK
                await dispatched(store)
            assert len(lines) <= 10, lines  # one per pass would be 50
            await asyncio.sleep(index_process_module.ANNOUNCE_S * 4)
            assert lines and lines[-1] == f"W {store.max_phy_offset}\n"
        finally:
            await store.shutdown()

    asyncio.run(run())


def test_shutdown_leaves_a_complete_index_for_the_next_start(tmp_path: Path) -> None:
    first, second = varied_messages(400), varied_messages(800)[400:]

    async def run() -> None:
        store = await _store_with(helper_config(tmp_path), first)
        pid = store.index.pid  # type: ignore[union-attr]
        await store.shutdown()
        assert pid is not None and process_gone(pid), "shutdown did not reap the helper"
        assert store.checkpoint is not None and store.checkpoint.index_msg_timestamp > 0
        store = await _store_with(helper_config(tmp_path), second)
        try:
            rollback = rolled_back_unique_keys(first + second)
            for key, offsets in answers(store, all_keys(first + second)).items():
                if key in rollback:
                    assert offsets == [], key
                elif key.startswith("UNIQ"):
                    assert len(offsets) == 1, key
                else:
                    assert offsets, key
        finally:
            await store.shutdown()

    asyncio.run(run())


def test_a_killed_helper_is_started_again_and_catches_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_process_module, "RESTART_S", 0.0)

    async def run() -> None:
        store = await _store_with(helper_config(tmp_path), [message(i) for i in range(300)])
        try:
            index = store.index
            assert isinstance(index, IndexProcess) and index.pid is not None
            old = index.pid
            os.kill(old, signal.SIGKILL)
            assert await asyncio.to_thread(wait_for, lambda: process_gone(old))
            for i in range(300, 600):
                assert (await store.put(message(i))).status is PutStatus.PUT_OK
            await dispatched(store)
            found = answers(store, [f"key-{i}" for i in range(600)])
            assert all(len(offs) == 1 for offs in found.values()), [k for k, v in found.items() if len(v) != 1]
            assert index.pid not in (None, old)
        finally:
            await store.shutdown()

    asyncio.run(run())


def test_the_helper_exits_when_the_broker_is_killed_and_recovery_indexes_the_rest(tmp_path: Path) -> None:
    # a "broker" that puts messages, prints the helper's pid, keeps putting, and dies by SIGKILL
    script = textwrap.dedent(
        f"""
        import asyncio
        from pathlib import Path
        from tests.store.store_helpers import message, process_gone, small_config, wait_for
        from broker.store import MessageStore

        async def main():
            store = MessageStore(small_config(Path({str(tmp_path)!r}), index_helper_enable=True))
            await store.start()
            print(store.index.pid, flush=True)
            i = 0
            while True:
                await store.put(message(i))
                if i == 500:
                    print("500", flush=True)
                i += 1
                if i % 50 == 0:
                    await asyncio.sleep(0)

        asyncio.run(main())
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert parent.stdout is not None
    helper_pid = int(parent.stdout.readline())
    assert parent.stdout.readline().strip() == "500"
    parent.send_signal(signal.SIGKILL)
    parent.wait()

    async def run() -> None:
        # started at once: the store waits for the orphaned helper to finish (it holds the store's lock)
        store = MessageStore(helper_config(tmp_path))
        await store.start()
        try:
            assert process_gone(helper_pid), "the helper outlived its broker"
            report = store.recovery_report
            assert report is not None and report.abnormal
            count = store.get_max_offset_in_queue(TOPIC, 0)
            assert count > 500
            found = answers(store, [f"key-{i}" for i in range(count)])
            assert all(len(offs) == 1 for offs in found.values()), [k for k, v in found.items() if len(v) != 1]
        finally:
            await store.shutdown()

    asyncio.run(run())


def test_expired_index_files_are_deleted_by_the_helper(tmp_path: Path) -> None:
    async def run() -> None:
        store = await _store_with(helper_config(tmp_path), [message(i) for i in range(3000)])
        try:
            index_dir = tmp_path / "index"
            assert store.index is not None
            await asyncio.to_thread(store.index.flush)  # the helper has indexed everything
            before = sorted(index_dir.iterdir())
            assert len(before) >= 3
            store.index.delete_expired(store.max_phy_offset)  # every file but the newest is expired
            await asyncio.to_thread(store.index.flush)  # a round trip: the deletion came before it
            assert sorted(index_dir.iterdir()) == before[-1:]
        finally:
            await store.shutdown()

    asyncio.run(run())


def _helper_process(root: Path) -> subprocess.Popen[bytes]:
    config = small_config(root)
    args = [
        sys.executable, "-m", "broker.store.index_helper",
        "--commit-log", str(config.commit_log_dir), "--file-size", str(config.mapped_file_size_commit_log),
        "--index", str(config.index_dir), "--slots", "512", "--entries", "2048",
    ]  # fmt: skip
    return subprocess.Popen(
        args,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_the_helper_survives_hostile_commands(tmp_path: Path) -> None:
    async def fill() -> int:
        store = await _store_with(small_config(tmp_path, message_index_enable=False), [message(i) for i in range(100)])
        end = store.max_phy_offset
        await store.shutdown()
        return end

    end = asyncio.run(fill())
    proc = _helper_process(tmp_path)
    assert proc.stdin is not None and proc.stdout is not None
    hostile = [
        b"\n",
        b"W\n",
        b"W not-a-number\n",
        b"W 1 2 3\n",
        b"Q 1 2\n",
        b"X 1\n",
        b"\xff\xfe\x00binary garbage\n",
        b"W -5\n",
        b"D -1\n",
        f"W {10**30}\n".encode(),  # far beyond the CommitLog: the helper waits there for records
        b"Q 7 1 -3 0 0\n",  # a negative count answers nothing
        b"x" * 200_000 + b"\n",  # longer than a command can be
        b"F 8\n",
        f"Q 9 {key_hash(f'{TOPIC}#key-42')} {10**12} 0 {FAR_FUTURE}".encode(),  # no newline yet
    ]
    for line in hostile:
        proc.stdin.write(line)
        proc.stdin.flush()
        time.sleep(0.02)
        assert proc.poll() is None, line
    proc.stdin.write(b"\n")
    proc.stdin.close()
    assert proc.wait(20) == 0
    lines = proc.stdout.read().decode().splitlines()
    by_id = {line.split()[1]: line.split()[2:] for line in lines if line.startswith("R ")}
    assert by_id["7"][2:] == []
    assert int(by_id["8"][0]) > 0  # the flush answers the store time of the last record indexed
    assert len(by_id["9"][2:]) == 1 and int(by_id["9"][1]) < end  # key-42 found, index end inside the log
    assert lines[-1].startswith("E ")
    assert b"ignored" in proc.stderr.read()  # (stderr is the broker's log)


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"mapped_file_size_commit_log": INDEX_HELPER_MIN_FILE_SIZE}, True),
        ({"mapped_file_size_commit_log": INDEX_HELPER_MIN_FILE_SIZE // 2}, False),  # tests, tools
        ({"index_helper_enable": True}, True),
        ({"mapped_file_size_commit_log": 1 << 30, "index_helper_enable": False}, False),
        ({"index_helper_enable": True, "message_index_enable": False}, False),
    ],
)
def test_which_stores_write_the_index_from_a_helper(
    tmp_path: Path, settings: dict[str, object], expected: bool
) -> None:
    assert small_config(tmp_path, **settings).index_helper() is expected
