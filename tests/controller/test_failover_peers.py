"""Apache RocketMQ's Java client 5.3.3 and the Go client (tests/peers, unchanged clients) through a kill -9
failover, on loopback: three controllers and a group of master + 2 slaves in controller mode (SYNC,
allAckInSyncStateSet=true). The peer's push consumer of a group first takes what our SDK sent and leaves
(committing its offsets); the peer's producer sends with its own retries only (`steady`: sync sends 50 ms
apart, going on after a failed one) while the master is killed; then every send it saw acknowledged is on the
new master, and a second run of the consumer group resumes from the committed offsets: it gets every
acknowledged message and none of the first batch again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from broker.controller.client import ControllerClient
from broker.protocol.codes import RequestCode, ResponseCode
from tests.controller.controller_procs import Controllers
from tests.controller.failover_harness import Group, wait_for
from tests.controller.test_failover import TOPIC, _read_all
from tests.interop.go_harness import ensure_go, go
from tests.interop.interop_harness import PeerProc, home_for, sdk_produce
from tests.interop.java_harness import ensure_java, java

pytestmark = [pytest.mark.peers, pytest.mark.timeout(420)]

FIRST = 40  # sent by our SDK and consumed before the failover
COUNT = 900  # the steady sends, 50 ms apart: 45 s, past the Go client's 30 s route refresh after the kill

PEERS: dict[str, tuple[Callable[[], str | None], Callable[[list[str], Path, float], PeerProc]]] = {
    "java": (ensure_java, java),
    "go": (ensure_go, go),
}


@pytest.mark.parametrize("peer", sorted(PEERS))
async def test_peer_keeps_sending_through_a_kill9_failover_and_resumes_consuming(tmp_path: Path, peer: str) -> None:
    ensure, run = PEERS[peer]
    problem = await asyncio.to_thread(ensure)
    if problem is not None:
        pytest.skip(f"the {peer} client cannot be installed here: {problem}")
    group = Group(tmp_path, Controllers(tmp_path, count=3))
    client = ControllerClient(group.controllers.addresses)
    extra = {"slaveSyncInterval": 1000}  # slaves copy the master's consumer offsets every second
    try:
        group.controllers.start_all()
        group.start_namesrv()
        for i in range(group.brokers):
            group.start_broker(i, **extra)

        async def full_set() -> dict[str, str] | None:
            fields, members = await group.replica_info(client)
            return fields if len(members) == group.brokers and fields.get("masterAddress") else None

        fields = await wait_for(full_set, 90, "a master with all 3 brokers in its SyncStateSet", group)
        old, epoch = fields["masterAddress"], int(fields["masterEpoch"])
        created = await group.request(
            old,
            RequestCode.UPDATE_AND_CREATE_TOPIC,
            {
                "topic": TOPIC,
                "defaultTopic": "TBW102",
                "readQueueNums": 4,
                "writeQueueNums": 4,
                "perm": 6,
                "topicFilterType": "SINGLE_TAG",
                "order": "false",
            },
        )
        assert created.code == ResponseCode.SUCCESS, created.remark
        await asyncio.sleep(2.0)  # the slaves copy the topic (a slave promoted without it would lack it)
        await asyncio.to_thread(sdk_produce, group.namesrv_addr, [("sync", TOPIC)], FIRST, "sdk")

        consumer_args = ["consume", "--namesrv", group.namesrv_addr, "--group", f"CID-{peer}-failover"]
        consumer_args += ["--topic", TOPIC, "--timeout", "60"]
        first = run([*consumer_args, "--expect", str(FIRST)], home_for(tmp_path, f"{peer}-consume-1"), 80)
        await asyncio.to_thread(lambda: first.start().wait())
        assert first.returncode == 0, first.describe()
        assert sorted(r.seq for r in first.records()) == list(range(FIRST))
        await asyncio.sleep(3.0)  # the committed offsets reach the slaves

        producer = run(
            [
                "produce", "--namesrv", group.namesrv_addr, "--send", f"steady:{TOPIC}", "--count", str(COUNT),
                "--interval", "0.05", "--poll", "1", "--origin", peer, "--group", f"PID-{peer}-failover",
            ],
            home_for(tmp_path, f"{peer}-produce"),
            240,
        )  # fmt: skip
        producer.start()
        await asyncio.sleep(5.0)
        group.kill9(f"broker-n{group.index_of(old)}")

        async def new_master() -> dict[str, str] | None:
            now, _ = await group.replica_info(client)
            moved = now.get("masterAddress") not in (None, "", old)
            return now if moved and int(now["masterEpoch"]) > epoch else None

        elected = await wait_for(new_master, 60, "a new master", group)
        await asyncio.to_thread(producer.wait)
        ok = [e for e in producer.of("sent") if e.get("status") == "SEND_OK"]
        failed = producer.of("send_error")
        print(f"\n{peer}: {len(ok)} of {COUNT} sends acknowledged, {len(failed)} failed after the client's retries")
        assert producer.returncode == 0, producer.describe()
        # it kept sending: the last sends, well after the election, were acknowledged by the new master
        assert any(int(e["seq"]) >= COUNT - 10 for e in ok), producer.describe()
        found = await _read_all(group, elected["masterAddress"])
        lost = [e["msg_id"] for e in ok if e["msg_id"] not in found]
        assert not lost, f"{len(lost)} acknowledged sends missing on the new master\n{group.logs()}"

        second = run([*consumer_args, "--expect", str(len(ok))], home_for(tmp_path, f"{peer}-consume-2"), 80)
        await asyncio.to_thread(lambda: second.start().wait())
        got = second.records()
        mine = {r.seq for r in got if r.origin == peer}
        assert second.returncode == 0, second.describe()
        assert {int(e["seq"]) for e in ok} <= mine, second.describe()
        assert not [r for r in got if r.origin == "sdk"], "the first batch came again: offsets not resumed"
    finally:
        await client.close()
        group.stop_all()
