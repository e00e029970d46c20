"""Run inside a pod by e2e/test_security_node.py: send COUNT messages to a topic of a secured RocketCluster and
consume them all with our SDK, signing with ACCESS_KEY/SECRET_KEY when the environment has them (from a
RocketUser's Secret) and connecting with TLS, its certificate checked against TLS_CA_FILE.

Prints one JSON line: how many sends were acknowledged and how many distinct messages came back, or, when the
brokers refuse the client, `refused` and the error's text (the test asserts the secret is not in it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys


async def roundtrip(topic: str, group: str, count: int, timeout: float) -> dict[str, object]:
    from broker.client import ClientConfig, ConsumeStatus, Credentials, Message, Producer, PushConsumer
    from broker.client.errors import RocketError

    access_key, secret_key = os.environ.get("ACCESS_KEY"), os.environ.get("SECRET_KEY")
    config = ClientConfig(
        namesrv_addr=os.environ["NAMESRV_ADDR"],
        credentials=Credentials(access_key, secret_key) if access_key and secret_key else None,
        use_tls=True,
        tls_ca_file=os.environ["TLS_CA_FILE"],
        tls_check_hostname=False,  # the brokers are dialled by pod IP, which the certificate does not name
    )
    producer = Producer(f"{group}-producer", client_config=config)
    acked = 0
    try:
        await producer.start()
        for i in range(count):
            await producer.send(Message(topic, f"secure {i}".encode(), keys=f"k{i}"))
            acked += 1
    except RocketError as exc:
        return {"refused": True, "acked": acked, "error": str(exc)[:500]}
    finally:
        await producer.shutdown()
    consumed: set[str] = set()

    async def on_messages(msgs: list) -> ConsumeStatus:  # type: ignore[type-arg]
        consumed.update(m.keys[0] for m in msgs if m.keys)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(group, client_config=config)
    consumer.subscribe(topic, "*")
    consumer.register_listener(on_messages)
    await consumer.start()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while len(consumed) < count and loop.time() < deadline:
        await asyncio.sleep(0.2)
    await consumer.shutdown()
    return {"refused": False, "acked": acked, "consumed": len(consumed)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args()
    result = asyncio.run(roundtrip(args.topic, args.group, args.count, args.timeout))
    print(json.dumps(result), flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
