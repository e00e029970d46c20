// Interop driver for ali-ons (pure-JS RocketMQ remoting client), run by tests/interop with NODE_PATH
// pointing at the ali-ons install from scripts/peers.sh, against a real NameServer + broker.
// Prints one JSON line per event on stdout so the test can check every field:
//
//   produce --send MODE:TOPIC[:COUNT] MODE is sync (producer.send), delay (delayTimeLevel 2) or
//                                    sharding (msg.shardingKey = shard, ali-ons' ordered-send selector);
//                                    ali-ons has no one-way or batch send API.
//   consume --topic T [...] --expect N [--fail-once] [--expression "tagA || tagB"] [--sql] [--linger S]
//                                    a push consumer prints {"event":"msg",...} per delivery and
//                                    exits once N deliveries succeeded (rc 0) or at --timeout (rc 3).
//                                    --fail-once throws on a first delivery so the client sends the
//                                    message back (CONSUMER_SEND_MSG_BACK) and the broker redelivers.
//                                    --sql subscribes with {expressionType: 'SQL92', subString: expression}
//                                    (ali-ons' buildSubscriptionData takes such an object); --linger keeps
//                                    consuming (and printing) S seconds after N, to catch extra deliveries.
//
// The message fields must match tests/peers/py/interop.py (`fields`) exactly: the tests compare
// what every client received against that one definition. process.exit at the end, because ali-ons
// timers keep node alive.
'use strict';

const { Producer, Consumer, Message } = require('ali-ons');

function args() {
  const out = { send: [], topic: [] };
  const argv = process.argv.slice(2);
  out.command = argv[0];
  for (let i = 1; i < argv.length; i++) {
    const name = argv[i].replace(/^--/, '');
    if (name === 'fail-once') { out.failOnce = true; continue; }
    if (name === 'sql') { out.sql = true; continue; }
    const value = argv[++i];
    if (Array.isArray(out[name])) out[name].push(value); else out[name] = value;
  }
  return out;
}

// stdout is a pipe to the test: make writes synchronous, or process.exit() drops what is still queued.
if (process.stdout._handle && process.stdout._handle.setBlocking) process.stdout._handle.setBlocking(true);

function emit(event, data) {
  process.stdout.write(JSON.stringify({ event, ...data }) + '\n');
}

// Delay level of "delay" sends: the test broker maps every level to 1 s.
const DELAY_LEVEL = 2;

// ali-ons asserts an httpclient even with nameSrv set; it is only used to resolve onsAddr.
const httpclient = { request: async () => { throw new Error('no http in tests'); } };

function fields(origin, topic, i, shards) {
  return {
    topic,
    tags: 'tag' + (i % 2),
    keys: `key-${origin}-${i}`,
    // Every fifth message is ~12 KiB: above the 4 KiB where clients compress (sysFlag bit 0).
    body: `héllo wörld 世界 🚀 ${origin} #${i}`.repeat(i % 5 === 4 ? 400 : 1),
    props: { color: 'blue', city: 'Zürich', seq: String(i), shard: String(i % shards), origin },
  };
}

async function produce(opts, common) {
  const producer = new Producer({ ...common, producerGroup: opts.group });
  producer.on('error', (err) => process.stderr.write(`producer error: ${err.message}\n`));
  await producer.ready();
  const count = Number(opts.count || 4);
  const shards = Number(opts.shards || 3);
  for (const send of opts.send) {
    // MODE:TOPIC[:COUNT]
    const [mode, topic, n] = send.split(':');
    for (let i = 0; i < (n ? Number(n) : count); i++) {
      const f = fields(opts.origin || 'alions', topic, i, shards);
      const msg = new Message(topic, f.tags, f.body);
      msg.keys = [f.keys];
      Object.assign(msg.properties, f.props);
      if (mode === 'sharding') msg.shardingKey = f.props.shard;
      else if (mode === 'delay') msg.delayTimeLevel = DELAY_LEVEL;
      else if (mode !== 'sync') throw new Error('unknown mode ' + mode);
      const r = await producer.send(msg);
      emit('sent', { mode, topic, seq: i, status: r.sendStatus, msg_id: r.msgId, offset: r.queueOffset,
        queue_id: r.messageQueue && r.messageQueue.queueId });
    }
  }
  await producer.close();
}

async function consume(opts, common) {
  const expect = Number(opts.expect || 1);
  let ok = 0;
  let finish;
  const done = new Promise((resolve) => { finish = resolve; });
  const consumer = new Consumer({
    ...common,
    consumerGroup: opts.group,
    consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET',
  });
  consumer.on('error', (err) => process.stderr.write(`consumer error: ${err.message}\n`));
  const handler = async (msg) => {
    const record = {
      topic: msg.topic,
      tags: msg.tags,
      keys: msg.keys,
      body_b64: Buffer.from(msg.body || []).toString('base64'),
      id: msg.msgId,
      queue_id: msg.queueId,
      queue_offset: Number(msg.queueOffset),
      reconsume_times: msg.reconsumeTimes,
      born_ts: Number(msg.bornTimestamp),
      store_ts: Number(msg.storeTimestamp),
      props: msg.properties,
    };
    if (opts.failOnce && msg.reconsumeTimes === 0) {
      emit('fail', record);
      throw new Error('failing the first delivery on purpose');
    }
    emit('msg', record);
    if (++ok >= expect) finish(true);
  };
  // A SQL92 selector: ali-ons puts expressionType into the heartbeat's subscription data and the
  // PULL_MESSAGE header, and filters nothing itself (its client-side filter is for tags only).
  const expression = opts.sql ? { expressionType: 'SQL92', subString: opts.expression } : (opts.expression || '*');
  for (const topic of opts.topic) consumer.subscribe(topic, expression, handler);
  await consumer.ready();
  emit('started', {});
  const timeout = Number(opts.timeout || 60) * 1000;
  const reached = await Promise.race([done, new Promise((r) => setTimeout(() => r(false), timeout))]);
  // The last handler is still returning: give its offset update a moment, then close, which
  // persists offsets (UPDATE_CONSUMER_OFFSET) and unregisters, as a real application would.
  await new Promise((r) => setTimeout(r, Math.max(300, Number(opts.linger || 0) * 1000)));
  await consumer.close();
  emit('done', { ok, reached });
  return reached ? 0 : 3;
}

async function main() {
  const opts = args();
  const common = { httpclient, nameSrv: opts.namesrv, clientIP: '127.0.0.1' };
  const rc = opts.command === 'produce' ? (await produce(opts, common), 0) : await consume(opts, common);
  process.exit(rc);
}

main().catch((err) => {
  emit('error', { error: String(err && err.message) });
  process.stderr.write((err && err.stack ? err.stack : String(err)) + '\n');
  process.exit(2);
});
