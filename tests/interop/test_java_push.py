"""Apache RocketMQ's Java push consumer (5.3.3, unchanged) against our NameServer and broker.

The first test: with default settings the Java client bumps its subscription's subVersion after each
rebalance and heartbeats again; a broker that kept the first subscription answered every pull
SUBSCRIPTION_NOT_LATEST, and the consumer received nothing, ever. The rest cover the push consumer's
features: orderly, tag and SQL92 selectors, two instances of one group (clustering: each message once
overall) and broadcasting (each instance gets everything).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

import pytest

from broker.client import BlockingAdmin
from tests.interop.interop_harness import Record, ServerPair, home_for, run_all, sdk_produce
from tests.interop.java_harness import JavaProc, check_intact, client_log_lines, ensure_java, java, java_server_pair

pytestmark = pytest.mark.peers

COUNT = 20


@pytest.fixture(scope="module")
def java_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPair]:
    problem = ensure_java()
    if problem is not None:
        pytest.skip(f"the Java RocketMQ client cannot be installed here: {problem}")
    yield from java_server_pair(tmp_path_factory.mktemp("java-push"))


def consume(servers: ServerPair, name: str, *args: str) -> JavaProc:
    """One `Interop consume` run to its end (its own timeout is 60 s); the JVM's home is named after its group."""
    proc = java(["consume", "--namesrv", servers.namesrv_addr, "--group", f"CID-{name}", "--timeout", "60", *args],
                home_for(servers.root, name), timeout=80)  # fmt: skip
    proc.start().wait()
    return proc


def seqs(records: list[Record]) -> Counter[int]:
    return Counter(r.seq for r in records)


def test_java_push_consumer_gets_what_our_producer_sent(java_servers: ServerPair) -> None:
    """CONSUME_FROM_FIRST_OFFSET, clustering, concurrently; all N messages, exactly once."""
    topic = "JavaPushRepro"
    java_servers.create_topics([topic])
    sdk_produce(java_servers.namesrv_addr, [("sync", topic)], COUNT, origin="sdk")
    run = consume(java_servers, "java-repro", "--topic", topic, "--expect", str(COUNT))
    got = run.records()
    # Before the fix every pull was answered SUBSCRIPTION_NOT_LATEST. A few such lines can still
    # appear: when the client's heartbeat after a rebalance finds its heartbeat lock taken it skips
    # it ("lock heartBeat, but failed") and pulls with a version no broker has seen yet, until a later
    # heartbeat; Apache RocketMQ's broker answers those pulls the same way.
    not_latest = [line for line in client_log_lines(run.home) if "subscription is not latest" in line]
    assert run.returncode == 0, f"{len(got)} of {COUNT} consumed; {not_latest[-2:]}\n{run.describe()}"
    assert seqs(got) == Counter(range(COUNT)), run.describe()
    for record in got:
        check_intact(record, "sdk")
    # shutdown() committed the group's offsets: nothing left to consume on any queue.
    with BlockingAdmin(java_servers.namesrv_addr) as admin:
        lag = {p.mq.queue_id: p.lag for p in admin.consumer_progress("CID-java-repro", topic)}
    assert lag == dict.fromkeys(range(4), 0), lag


def test_java_orderly_consumer_gets_each_shard_in_order(java_servers: ServerPair) -> None:
    """Ordered sends (a MessageQueueSelector on the shard) consumed by a MessageListenerOrderly."""
    topic = "JavaOrderly"
    java_servers.create_topics([topic])
    sending = ["--send-count", str(COUNT), "--send-mode", "ordered", "--origin", "javaord"]
    run = consume(java_servers, "java-orderly", "--topic", topic, "--orderly", *sending, "--expect", str(COUNT))
    assert run.returncode == 0, run.describe()
    got = run.records()
    assert seqs(got) == Counter(range(COUNT)), run.describe()
    queue_of_shard: dict[str, set[int]] = {}
    for record in got:
        check_intact(record, "javaord")
        queue_of_shard.setdefault(record.props["shard"], set()).add(record.queue_id)
    assert all(len(queues) == 1 for queues in queue_of_shard.values()), queue_of_shard
    for shard in queue_of_shard:
        order = [r.seq for r in got if r.props["shard"] == shard]
        assert order == sorted(order), f"shard {shard} consumed out of order: {order}"


#: name -> (selector options, which seqs match). SQL92 needs enablePropertyFilter (JAVA_BROKER_CONF).
SELECTORS: dict[str, tuple[list[str], Callable[[int], bool]]] = {
    "tag": (["--expr", "tag1"], lambda i: i % 2 == 1),
    "tags": (["--expr", "tag0 || tag9"], lambda i: i % 2 == 0),
    "sql92": (["--sql", "shard = '1' AND seq > 5"], lambda i: i % 3 == 1 and i > 5),
}


@pytest.fixture(scope="module")
def selector_runs(java_servers: ServerPair) -> dict[str, JavaProc]:
    """One consumer JVM per selector, all at once, each on its own topic of COUNT messages from our SDK."""
    topics = {name: f"JavaSelect-{name}" for name in SELECTORS}
    java_servers.create_topics(topics.values())
    sdk_produce(java_servers.namesrv_addr, [("sync", topic) for topic in topics.values()], COUNT, origin="sdk")
    runs: dict[str, JavaProc] = {}
    for name, (selector, matches) in SELECTORS.items():
        expect = sum(1 for i in range(COUNT) if matches(i))
        # Two more seconds of consuming after the last match: anything else would show up.
        args = ["consume", "--namesrv", java_servers.namesrv_addr, "--group", f"CID-java-select-{name}",
                "--topic", topics[name], *selector, "--expect", str(expect),
                "--linger", "2", "--timeout", "60"]  # fmt: skip
        runs[name] = java(args, home_for(java_servers.root, f"java-select-{name}"), timeout=80)
    run_all(list(runs.values()))
    return runs


@pytest.mark.parametrize("name", SELECTORS)
def test_java_selector_gets_exactly_the_matching_messages(selector_runs: dict[str, JavaProc], name: str) -> None:
    run = selector_runs[name]
    assert run.returncode == 0, run.describe()
    got = run.records()
    assert seqs(got) == Counter(i for i in range(COUNT) if SELECTORS[name][1](i)), run.describe()
    for record in got:
        check_intact(record, "sdk")


def test_java_two_instances_of_a_group_get_each_message_once(java_servers: ServerPair) -> None:
    """Clustering: once both instances own two of the four queues, each message goes to one of them."""
    topic = "JavaClustering"
    java_servers.create_topics([topic])
    sending = ["--send-count", str(COUNT), "--origin", "javaclu"]
    run = consume(java_servers, "java-clustering", "--topic", topic, "--instances", "2", *sending,
                  "--expect", str(COUNT), "--linger", "2")  # fmt: skip
    assert run.returncode == 0, run.describe()
    assert run.of("balanced")[0]["owned"] == [2, 2], run.describe()
    got = run.records()
    assert seqs(got) == Counter(range(COUNT)), run.describe()
    queues = [{int(e["queue_id"]) for e in run.of("msg") if e["instance"] == k} for k in (0, 1)]
    assert queues[0] and queues[1] and not queues[0] & queues[1], f"queues consumed per instance: {queues}"
    for record in got:
        check_intact(record, "javaclu")


def test_java_broadcasting_instances_each_get_everything(java_servers: ServerPair) -> None:
    topic = "JavaBroadcast"
    java_servers.create_topics([topic])
    sdk_produce(java_servers.namesrv_addr, [("sync", topic)], COUNT, origin="sdk")
    run = consume(java_servers, "java-broadcast", "--topic", topic, "--instances", "2", "--broadcast",
                  "--expect-each", str(COUNT), "--linger", "2")  # fmt: skip
    assert run.returncode == 0, run.describe()
    for k in (0, 1):
        mine = [Record.from_event(e) for e in run.of("msg") if e["instance"] == k]
        assert seqs(mine) == Counter(range(COUNT)), f"instance {k}: {sorted(seqs(mine))}"
        for record in mine:
            check_intact(record, "sdk")
