"""Send ten messages and consume them back with the Python SDK (run `make run` first).

export NAMESRV_ADDR=127.0.0.1:9876
.venv/bin/python examples/quickstart.py
"""

from __future__ import annotations

import asyncio

from rocketcluster import ConsumeStatus, Message, MessageExt, Producer, PushConsumer


async def main() -> None:
    received: asyncio.Queue[MessageExt] = asyncio.Queue()

    async def on_messages(msgs: list[MessageExt]) -> ConsumeStatus:
        for msg in msgs:
            received.put_nowait(msg)
        return ConsumeStatus.CONSUME_SUCCESS

    # No address given: the SDK takes $NAMESRV_ADDR (or python -X rocketmq.namesrv.addr=...), as RocketMQ's do
    consumer = PushConsumer("QuickstartGroup")
    consumer.subscribe("QuickstartTopic", "TagA || TagB")
    consumer.register_listener(on_messages)

    async with Producer("QuickstartProducer") as producer:
        for i in range(10):
            msg = Message("QuickstartTopic", f"hello {i}", tags="TagA" if i % 2 else "TagB", keys=f"order-{i}")
            result = await producer.send(msg)
            print(f"sent {result.msg_id} to queue {result.message_queue.queue_id} at offset {result.queue_offset}")

    await consumer.start()
    try:
        for _ in range(10):
            msg = await asyncio.wait_for(received.get(), timeout=30)
            print(f"received {msg.msg_id} tags={msg.tags} keys={msg.keys} body={msg.uncompressed_body().decode()}")
    finally:
        await consumer.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
