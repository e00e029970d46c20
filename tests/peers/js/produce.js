// Peer script for ali-ons (pure-JS RocketMQ remoting client), run by tests/peers/__init__.py with
// NODE_PATH pointing at the ali-ons install from scripts/peers.sh. Starts a consumer (so the broker
// sees a heartbeat with string enums and a pull), sends COUNT messages, prints one JSON line per
// send result, lingers for the consumer's rebalance, then exits: ali-ons timers keep node alive.
'use strict';

const { Producer, Consumer, Message } = require('ali-ons');

function arg(name, fallback) {
  const i = process.argv.indexOf('--' + name);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

// ali-ons asserts an httpclient even with nameSrv set; it is only used to resolve onsAddr.
const httpclient = { request: async () => { throw new Error('no http in tests'); } };

async function main() {
  const nameSrv = arg('namesrv');
  const topic = arg('topic');
  const count = Number(arg('count', '1'));
  const linger = Number(arg('linger', '2')) * 1000;
  const common = { httpclient, nameSrv, clientIP: '127.0.0.1' };

  const consumer = new Consumer({ ...common, consumerGroup: arg('consumer-group', 'CID-golden') });
  consumer.subscribe(topic, 'tagA', async () => {});
  await consumer.ready();

  const producer = new Producer({ ...common, producerGroup: arg('group', 'PID-golden') });
  await producer.ready();
  for (let i = 0; i < count; i++) {
    const msg = new Message(topic, 'tagA', 'golden body ' + i);
    msg.keys = ['k' + i];
    msg.properties.color = 'blue';
    const result = await producer.send(msg);
    console.log(JSON.stringify({ status: result.sendStatus, msg_id: result.msgId, offset: result.queueOffset }));
  }
  await new Promise((resolve) => setTimeout(resolve, linger));
  process.exit(0);
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : String(err));
  process.exit(1);
});
