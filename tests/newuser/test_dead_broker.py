"""A dead broker is not a missing topic.

`make run`, a producer sending, `kill -9` of the broker while the NameServer stays up, with real processes:
the error names the broker and says it is unreachable (not `NoRouteError: no route for topic ...`), a send
retries with backoff within its timeout (so it rides out a restart), and with two brokers the survivor takes
the sends.
"""

from __future__ import annotations

import asyncio
import re
import sys
import textwrap
from pathlib import Path

import pytest

from broker.client.send_failure import Backoff
from tests.newuser.processes import Servers
from tests.newuser.user_harness import mqadmin, user_env


@pytest.mark.parametrize(
    ("initial", "maximum", "remaining", "expected"),
    [
        (0.1, 1.0, 100.0, [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]),
        (0.1, 1.0, 0.25, [0.1, 0.2, 0.25, 0.25, 0.25, 0.25]),  # never past the send's deadline
        (0.5, 0.5, 100.0, [0.5, 0.5, 0.5, 0.5, 0.5, 0.5]),
        (0.1, 1.0, -1.0, [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
    ],
)
def test_backoff_table(initial: float, maximum: float, remaining: float, expected: list[float]) -> None:
    backoff = Backoff(initial, maximum)
    assert [backoff.delay(remaining) for _ in expected] == pytest.approx(expected)


SEND_ONE = """
    import asyncio, sys
    from rocketcluster import Message, Producer

    async def main() -> None:
        async with Producer("DeadBrokerProducer", send_msg_timeout=float(sys.argv[1])) as producer:
            print("sending", flush=True)
            result = await producer.send(Message("DeadTopic", b"x"))
            print(result.status.name, result.message_queue.broker_name, flush=True)

    asyncio.run(main())
"""


async def _start_program(source: str, *args: str, env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        textwrap.dedent(source),
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )


SEND_KILL_SEND = """
    import asyncio, sys
    from rocketcluster import Message, Producer

    async def main() -> None:
        async with Producer("DeadBrokerProducer", send_msg_timeout=3) as producer:
            result = await producer.send(Message("DeadTopic", b"before"))
            print(result.status.name, result.message_queue.broker_name, flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
            await producer.send(Message("DeadTopic", b"after"))

    asyncio.run(main())
"""


def _attempts(message: str) -> int:
    found = re.search(r"(\d+) attempt\(s\)", message)
    assert found is not None, message
    return int(found.group(1))


async def test_a_killed_broker_is_reported_unreachable_not_as_a_missing_topic(tmp_path: Path) -> None:
    servers = Servers(tmp_path)
    try:
        namesrv = await servers.namesrv()
        broker = await servers.broker("broker-a", namesrv.addr)
        env = user_env(NAMESRV_ADDR=namesrv.addr)
        created = await mqadmin("updateTopic", "-c", "UserCluster", "-t", "DeadTopic", env=env)
        assert created.code == 0, created

        program = await _start_program(SEND_KILL_SEND, env=env)
        assert program.stdout is not None and program.stdin is not None
        assert await asyncio.wait_for(program.stdout.readline(), 30) == b"SEND_OK broker-a\n"
        await broker.kill9()
        program.stdin.write(b"go\n")
        await program.stdin.drain()
        _, err = await asyncio.wait_for(program.communicate(), 60)
        assert program.returncode == 1, err.decode()
        last = err.decode().strip().splitlines()[-1]
        assert last.startswith("broker.client.errors.BrokerUnreachable: cannot send to topic DeadTopic: "), last
        assert f"broker broker-a ({broker.addr})" in last and "is unreachable" in last, last
        assert "does not exist" not in last and "no route" not in last
        # backoff, not a busy loop: a handful of attempts in the 3 s budget (a busy loop makes ~180 a second)
        assert 2 <= _attempts(last) <= 20, last

        # a program (or mqadmin) started after the kill never knew the broker: the NameServer has none
        sent = await mqadmin("sendMessage", "-t", "DeadTopic", "-p", "x", env=env, timeout=120)
        assert sent.code == 1, sent
        assert "BrokerUnreachable: cannot send to topic DeadTopic: no broker is registered with the NameServer" in (
            sent.err
        ), sent
    finally:
        await servers.close()


async def test_a_send_rides_out_a_broker_restart_within_its_timeout(tmp_path: Path) -> None:
    servers = Servers(tmp_path)
    try:
        namesrv = await servers.namesrv()
        broker = await servers.broker("broker-a", namesrv.addr)
        env = user_env(NAMESRV_ADDR=namesrv.addr)
        created = await mqadmin("updateTopic", "-c", "UserCluster", "-t", "DeadTopic", env=env)
        assert created.code == 0, created
        await broker.kill9()

        program = await _start_program(SEND_ONE, "60", env=env)
        assert program.stdout is not None
        assert await asyncio.wait_for(program.stdout.readline(), 30) == b"sending\n"
        await asyncio.sleep(1.0)  # the send is retrying against a NameServer without brokers
        await broker.start()
        out, err = await asyncio.wait_for(program.communicate(), 60)
        assert program.returncode == 0, err.decode()
        assert out.decode().strip() == "SEND_OK broker-a"
    finally:
        await servers.close()


SEND_MANY = """
    import asyncio, logging, sys
    from rocketcluster import Message, Producer

    async def main() -> None:
        logging.basicConfig(level=logging.WARNING)
        logging.getLogger("broker.client.producer").setLevel(logging.INFO)
        async with Producer("TwoBrokerProducer", send_msg_timeout=10) as producer:
            for i in range(200):
                if i == 50:
                    print("half", flush=True)
                    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
                result = await producer.send(Message("TwoBrokerTopic", f"m{i}".encode()))
                print(result.status.name, result.message_queue.broker_name, flush=True)

    asyncio.run(main())
"""


async def test_with_two_brokers_the_survivor_takes_the_sends(tmp_path: Path) -> None:
    servers = Servers(tmp_path)
    try:
        namesrv = await servers.namesrv()
        first = await servers.broker("broker-a", namesrv.addr)
        await servers.broker("broker-b", namesrv.addr)
        env = user_env(NAMESRV_ADDR=namesrv.addr)
        created = await mqadmin("updateTopic", "-c", "UserCluster", "-t", "TwoBrokerTopic", env=env)
        assert created.code == 0 and created.out.count("success") == 2, created

        program = await _start_program(SEND_MANY, env=env)
        assert program.stdout is not None and program.stdin is not None
        lines = []
        while (line := (await asyncio.wait_for(program.stdout.readline(), 30)).decode().strip()) != "half":
            lines.append(line)
        assert {line.split()[1] for line in lines} == {"broker-a", "broker-b"}
        await first.kill9()
        program.stdin.write(b"go\n")
        await program.stdin.drain()
        out, err = await asyncio.wait_for(program.communicate(), 120)
        assert program.returncode == 0, err.decode()
        after = out.decode().split()
        results = list(zip(after[::2], after[1::2], strict=True))
        assert len(results) == 150
        assert all(status == "SEND_OK" for status, _ in results)
        assert {name for _, name in results} == {"broker-b"}
        # the dead broker is avoided after its first failure, not tried again on every other send
        failures = err.decode().count("failed (attempt")
        assert failures <= 2, err.decode()
    finally:
        await servers.close()
