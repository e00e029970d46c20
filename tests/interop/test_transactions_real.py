"""Transactional messages from a real client: COMMIT, ROLLBACK and UNKNOW answered by a check-back.

Only rocketmq-python-cvs 2.1.0.3 can send them: its bundled C++ core (rocketmq-client-cpp 2.1.0)
exports CreateTransactionProducer / SendMessageTransaction, which the driver calls through ctypes
(`transact` in tests/peers/py/interop.py) exactly as Apache rocketmq-client-python 2.0.0's
TransactionMQProducer does. rocketmq 0.4.4 (1.x core) and ali-ons 3.12.0 have no transaction
producer (docs/compatibility.md gives the evidence).

One producer run sends three transactional messages to one topic: seq 0's local transaction
returns COMMIT, seq 1's ROLLBACK and seq 2's UNKNOW. The broker (`feature_servers`: 1 s
transactionTimeOut and transactionCheckInterval) must then send CHECK_TRANSACTION_STATE for seq 2
to the client's checker, which answers COMMIT. Our SDK's pull consumer then reads the whole topic.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.interop.interop_harness import (
    PEER_ORIGINS,
    PeerProc,
    Record,
    ServerPair,
    check_intact,
    home_for,
    sdk_pull_all,
)

pytestmark = pytest.mark.peers

CVS = "rocketmq-python-cvs-2.1.0.3"
ORIGIN = PEER_ORIGINS[CVS]
TOPIC = f"IopTx-{ORIGIN}"
OUTCOMES = ["commit", "rollback", "unknown"]
COMMIT, ROLLBACK, UNKNOWN = range(3)  # seq of each outcome


@dataclass
class TxRun:
    producer: PeerProc
    delivered: list[Record]
    broker_log: str

    def sent(self, seq: int) -> dict[str, object]:
        return next(e for e in self.producer.of("sent") if e["seq"] == seq)


@pytest.fixture(scope="module")
def tx(peers_available: None, feature_servers: ServerPair, work_dir: Path) -> TxRun:
    feature_servers.create_topics([TOPIC])
    args = ["transact", "--namesrv", feature_servers.namesrv_addr, "--group", f"PID-iopt-{ORIGIN}",
            "--origin", ORIGIN, "--topic", TOPIC, *[a for o in OUTCOMES for a in ("--outcome", o)],
            "--checks", "1", "--timeout", "20", "--linger", "1"]  # fmt: skip
    producer = PeerProc(CVS, args, home_for(work_dir, f"tx-{ORIGIN}"), timeout=30).start().wait()
    delivered = sdk_pull_all(feature_servers.namesrv_addr, "CID-iopt-sdk", TOPIC, expect=2)
    broker_log = (feature_servers.root / "mqbroker.log").read_text(errors="replace")
    return TxRun(producer, delivered, broker_log)


def test_transactional_sends_complete(tx: TxRun) -> None:
    proc = tx.producer
    assert proc.returncode == 0 and not proc.of("error"), proc.describe()
    # Every half message was stored (SEND_OK) and each local transaction ran once, in order.
    assert [(e["seq"], e["rc"], e["status"]) for e in proc.of("sent")] == [(i, 0, 0) for i in range(3)], proc.describe()
    assert [(e["seq"], e["outcome"]) for e in proc.of("local")] == list(enumerate(OUTCOMES)), proc.describe()


def test_commit_is_delivered_once_intact(tx: TxRun) -> None:
    got = [r for r in tx.delivered if r.seq == COMMIT]
    assert len(got) == 1, tx.delivered
    check_intact(got[0], ORIGIN)
    assert got[0].props["UNIQ_KEY"] == tx.sent(COMMIT)["msg_id"]
    assert got[0].props["outcome"] == "commit"
    # The visible copy is the real topic's, not the half topic's, and it was never checked.
    assert got[0].topic == TOPIC
    assert all(int(c["props"]["seq"]) != COMMIT for c in tx.producer.of("check")), tx.producer.describe()


def test_rollback_is_never_delivered(tx: TxRun) -> None:
    assert ROLLBACK not in [r.seq for r in tx.delivered], tx.delivered
    assert all(int(c["props"]["seq"]) != ROLLBACK for c in tx.producer.of("check")), tx.producer.describe()
    # The broker settled it with an op message at END_TRANSACTION (not after a check).
    assert f"transaction {tx.sent(ROLLBACK)['msg_id']} rolled back (half offset" in tx.broker_log


def test_unknown_is_checked_back_and_the_checkers_commit_is_delivered(tx: TxRun) -> None:
    proc = tx.producer
    checks = proc.of("check")
    assert checks, proc.describe()
    # CHECK_TRANSACTION_STATE reached the client's checker with the half message of seq 2 only:
    # same id, the user properties intact, and the broker's check count.
    assert {int(c["props"]["seq"]) for c in checks} == {UNKNOWN}, proc.describe()
    check = Record.from_event(checks[0])
    assert check.props["UNIQ_KEY"] == tx.sent(UNKNOWN)["msg_id"]
    assert checks[0]["outcome"] == "unknown" and checks[0]["check_times"] == "1"
    assert check.body.decode() == f"héllo wörld 世界 🚀 {ORIGIN} #{UNKNOWN}"
    # The checker's COMMIT (END_TRANSACTION with fromTransactionCheck) made it visible, once.
    assert f"transaction {tx.sent(UNKNOWN)['msg_id']} committed after a check" in tx.broker_log
    got = [r for r in tx.delivered if r.seq == UNKNOWN]
    assert len(got) == 1, tx.delivered
    check_intact(got[0], ORIGIN)
    assert got[0].props["UNIQ_KEY"] == tx.sent(UNKNOWN)["msg_id"]
    assert sorted(r.seq for r in tx.delivered) == [COMMIT, UNKNOWN]
