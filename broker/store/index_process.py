"""The IndexFiles written by a helper process: the broker side (the helper is broker.store.index_helper).

Why: indexing a record's UNIQ_KEY and KEYS costs the event loop ~1.5 us a send (hashing `topic#key`
the way Java does, and the hash-slot and entry writes, numpy-vectorized already), close to a tenth of the
whole send path, on the one thread that limits a broker's throughput (docs/design/performance-log.md, Session 6).
Nothing on the send or pull path needs the index: only queries by key do, and RocketMQ builds it
asynchronously too. So a helper process builds it on the other core, from the CommitLog itself: the
broker only tells it where the dispatched records end (one short line on a non-blocking pipe, at most
one per ANNOUNCE_BYTES or ANNOUNCE_S), and asks it for queries and flushes.

MessageStore starts it after recovery (which still indexes in process, so a restart finds a complete
index) and stops it at shutdown, after it has indexed everything announced. The helper inherits the
store's lock, so a broker restarted at once after a kill -9 waits until the old helper has finished
instead of indexing the same files beside it. A helper that dies is started again (at most once per
`RESTART_S`); it goes on from where its files end.
"""

from __future__ import annotations

import asyncio
import logging
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

from broker.logs.relay import Relay, child_env
from broker.store.config import StoreConfig
from broker.store.dispatch_request import call_later_or_now
from broker.store.index_file import key_hash

__all__ = ["IndexProcess"]

log = logging.getLogger(__name__)

RESTART_S = 5.0
ANSWER_TIMEOUT_S = 30.0  # a query or flush waits for everything announced before it to be indexed
STOP_TIMEOUT_S = 60.0  # at shutdown: ~300k records a second, so a backlog far beyond any real one
# Each announcement wakes the helper on the other CPU; at one per dispatch pass, a store taking 190k puts a
# second spent ~4% of its event loop in those pipe writes (py-spy). So a pass announces only once this many
# bytes of records wait, and a timer announces a smaller rest; queries, flushes and stops announce first.
ANNOUNCE_BYTES = 1 << 20
ANNOUNCE_S = 0.005


class IndexProcess:
    """What MessageStore needs of an index (dispatched_to, query, flush, delete_expired), done by the helper."""

    def __init__(self, config: StoreConfig, *, lock_fd: int = -1) -> None:
        self.config = config
        self.lock_fd = lock_fd
        self.last_timestamp = 0  # store time of the last record the helper indexed, as of its last answer
        # IndexService's, as of the last query
        self.last_update_timestamp = 0
        self.end_phy_offset = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._announced = -1
        self._sent = -1
        self._request_id = 0
        self._answers = b""
        self._ask_lock = threading.Lock()  # one question at a time: answers come back in order
        self._restart_lock = threading.Lock()
        self._started_at = 0.0
        self._stopping = False
        self._timer: asyncio.TimerHandle | None = None  # announces a rest under ANNOUNCE_BYTES

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    # -- lifecycle ------------------------------------------------------------------------------------

    def start(self, start_offset: int | None = None, *, after_crash: bool = False) -> bool:
        config = self.config
        args = [
            sys.executable, "-m", "broker.store.index_helper",
            "--commit-log", str(config.commit_log_dir),
            "--file-size", str(config.mapped_file_size_commit_log),
            "--index", str(config.index_dir),
            "--slots", str(config.max_hash_slot_num),
            "--entries", str(config.max_index_num),
        ]  # fmt: skip
        if start_offset is not None:
            args += ["--start", str(start_offset)]
        if after_crash:
            args.append("--after-crash")
        self._started_at = time.monotonic()
        # Its log records come on its stderr, a pipe of our own (not Popen's: communicate() in stop() would
        # read it too), and a Relay writes them through our handlers: one format, one writer of the log file.
        log_read, log_write = os.pipe()
        try:
            self._proc = subprocess.Popen(
                args,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log_write,
                pass_fds=(self.lock_fd,) if self.lock_fd >= 0 else (),
                # numpy's BLAS would start a thread per core, for nothing the index does
                env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", **child_env()},
            )
        except OSError as exc:
            os.close(log_read)
            log.error("index helper not started: %s; messages are not indexed by key", exc)
            self._proc = None
            return False
        finally:
            os.close(log_write)
        Relay(os.fdopen(log_read, "rb"), "index-helper")
        assert self._proc.stdin is not None
        os.set_blocking(self._proc.stdin.fileno(), False)
        self._answers = b""
        self._sent = -1
        log.info("index helper started (pid %d)", self._proc.pid)
        return True

    def stop(self) -> None:
        """Close the pipe; the helper indexes what was announced, flushes and exits. Blocking: run in an
        executor."""
        self._stopping = True
        with self._ask_lock:  # after a question in flight (the answers share the pipe)
            proc, self._proc = self._proc, None
            if proc is None:
                return
            self._send(proc, f"W {self._announced}\n", block=True)
            try:
                out, _ = proc.communicate(timeout=STOP_TIMEOUT_S)  # closes the pipe: the helper finishes
            except subprocess.TimeoutExpired:
                log.error("index helper did not finish in %.0f s: killed (recovery indexes the rest)", STOP_TIMEOUT_S)
                proc.kill()
                proc.wait()
                return
        for line in (self._answers + out).splitlines():
            if line.startswith(b"E "):
                self.last_timestamp = int(line.split()[1])
        if proc.returncode:
            log.error("index helper exited with status %d", proc.returncode)

    def _running(self) -> subprocess.Popen[bytes] | None:
        """The helper, started again if it died (not more often than every RESTART_S)."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            return proc
        with self._restart_lock:  # the event loop and the flush thread may both find it gone
            if self._stopping or self._proc is not proc:
                return self._proc
            if proc is not None:
                log.error("index helper exited with status %s", proc.returncode)
                self._proc = None
                for pipe in (proc.stdin, proc.stdout):
                    if pipe is not None:
                        pipe.close()
            if time.monotonic() - self._started_at < RESTART_S or not self.start(after_crash=True):
                return None
            return self._proc

    # -- commands -------------------------------------------------------------------------------------

    def _send(self, proc: subprocess.Popen[bytes], line: str, *, block: bool) -> bool:
        """Write one line (under PIPE_BUF: all of it or nothing). Without `block`, False when the pipe is
        full (the helper lags: a later line says more)."""
        assert proc.stdin is not None
        data = line.encode()
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        while True:
            try:
                os.write(proc.stdin.fileno(), data)
                return True
            except BlockingIOError:
                if not block or time.monotonic() > deadline:
                    return False
                select.select([], [proc.stdin], [], 0.1)
            except (OSError, ValueError):  # gone (EPIPE), or closed meanwhile
                return False

    def dispatched_to(self, end: int) -> None:
        """A dispatch pass ended at CommitLog offset `end`: tell the helper, now or within ANNOUNCE_S
        (never blocks; off an event loop, now)."""
        self._announced = max(self._announced, end)
        if self._announced - self._sent >= ANNOUNCE_BYTES:
            self.write_pending()
        elif self._timer is None and self._announced > self._sent:
            self._timer = call_later_or_now(ANNOUNCE_S, self.write_pending)

    def write_pending(self) -> None:
        """Send the newest announcement if the helper has not got it yet."""
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        if self._announced <= self._sent:
            return
        proc = self._proc or self._running()
        if proc is None:
            return
        if self._send(proc, f"W {self._announced}\n", block=False):
            self._sent = self._announced
        elif proc.poll() is not None:  # not a full pipe: it is gone; the next pass tells the new one
            self._running()

    def _ask(self, command: str, fields: Sequence[int]) -> list[int] | None:
        """Send `command <id> fields...` after the newest announcement; the answer's numbers, or None."""
        with self._ask_lock:
            proc = self._running()
            if proc is None:
                return None
            assert proc.stdout is not None
            self._request_id += 1
            rid = self._request_id
            line = " ".join(map(str, [command, rid, *fields]))
            if not self._send(proc, f"W {self._announced}\n{line}\n", block=True):
                return None
            self._sent = self._announced
            deadline = time.monotonic() + ANSWER_TIMEOUT_S
            fd = proc.stdout.fileno()
            while True:
                while b"\n" in self._answers:
                    answer, self._answers = self._answers.split(b"\n", 1)
                    words = answer.split()
                    if len(words) >= 2 and words[0] == b"R" and int(words[1]) == rid:
                        return [int(w) for w in words[2:]]
                left = deadline - time.monotonic()
                if left <= 0:
                    log.error("index helper did not answer %s in %.0f s", command, ANSWER_TIMEOUT_S)
                    return None
                ready, _, _ = select.select([fd], [], [], left)
                if ready:
                    data = os.read(fd, 65536)
                    if not data:
                        return None
                    self._answers += data

    def query(self, topic: str, key: str, max_num: int, begin_ts: int, end_ts: int) -> list[int]:
        """IndexService.query, answered by the helper once it has indexed everything dispatched so far."""
        answer = self._ask("Q", (key_hash(f"{topic}#{key}"), max_num, begin_ts, end_ts))
        if answer is None or len(answer) < 2:
            log.error("query by key %r: the index helper is not available", key)
            return []
        self.last_update_timestamp, self.end_phy_offset = answer[0], answer[1]
        return answer[2:]

    def flush(self) -> int:
        """Have the helper index what was dispatched and fdatasync its files; returns the store time of the
        last record indexed (the checkpoint's indexMsgTimestamp). Blocking: run in an executor."""
        answer = self._ask("F", ())
        if answer:
            self.last_timestamp = answer[0]
        return self.last_timestamp

    def delete_expired(self, min_phy_offset: int) -> int:
        """Ask the helper to delete the files that point only below `min_phy_offset` (returns at once)."""
        proc = self._running()
        if proc is not None:
            self._send(proc, f"W {self._announced}\nD {min_phy_offset}\n", block=True)
        return 0
