import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * `produce --send MODE:TOPIC ...`: the canonical messages 0..count-1 to TOPIC with one send API of
 * DefaultMQProducer. MODE is sync, async, oneway, batch, ordered (a MessageQueueSelector on the
 * message's shard, so one shard stays on one queue), delay (sync with delay level 2) or steady (sync,
 * --interval seconds apart, going on after a failed send: a producer through a failover, with the
 * client's own retries and its route poll every --poll seconds). Prints {"event": "sent"} per result
 * (one per batch) or {"event": "send_error"}.
 */
final class Produce {
    static final int DELAY_LEVEL = 2;

    private Produce() {}

    static int run(Args args) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(args.get("group", "PID-java-iop"), args.aclHook());
        producer.setNamesrvAddr(args.required("namesrv"));
        producer.setInstanceName(args.get("instance", "producer"));
        producer.setPollNameServerInterval((int) args.millis("poll", 30));
        producer.start();
        try {
            String origin = args.get("origin", "java");
            int count = args.integer("count", 4);
            int shards = args.integer("shards", 3);
            for (String send : args.all("send")) {
                String[] parts = send.split(":", 2);
                try {
                    sendAll(producer, parts[0], parts[1], origin, count, shards, args.millis("interval", 0.05));
                } catch (Exception e) {
                    Events.emit("send_error", Events.data("mode", parts[0], "topic", parts[1], "error", e.toString()));
                }
            }
            // One-way sends are fire-and-forget: give the socket a moment before the process ends.
            Thread.sleep(args.millis("linger", 0.5));
        } finally {
            producer.shutdown();
        }
        return 0;
    }

    static void sendAll(DefaultMQProducer producer, String mode, String topic, String origin, int count, int shards,
            long interval) throws Exception {
        List<Message> msgs = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            msgs.add(Fields.message(origin, topic, i, shards));
        }
        switch (mode) {
            case "batch" -> {
                SendResult result = producer.send(msgs);
                var data = Events.sent(result);
                data.putAll(Events.data("mode", mode, "topic", topic, "n", count));
                Events.emit("sent", data);
            }
            case "async" -> sendAsync(producer, topic, msgs);
            case "steady" -> sendSteady(producer, topic, msgs, interval);
            case "oneway" -> {
                for (int i = 0; i < count; i++) {
                    producer.sendOneway(msgs.get(i));
                    Events.emit("sent", Events.data("mode", mode, "topic", topic, "seq", i));
                }
            }
            case "sync", "delay", "ordered" -> {
                MessageQueueSelector byShard = (mqs, msg, shard) -> mqs.get((Integer) shard % mqs.size());
                for (int i = 0; i < count; i++) {
                    Message msg = msgs.get(i);
                    SendResult result;
                    if (mode.equals("ordered")) {
                        result = producer.send(msg, byShard, i % shards);
                    } else {
                        if (mode.equals("delay")) {
                            msg.setDelayTimeLevel(DELAY_LEVEL);
                        }
                        result = producer.send(msg);
                    }
                    var data = Events.sent(result);
                    data.putAll(Events.data("mode", mode, "topic", topic, "seq", i));
                    Events.emit("sent", data);
                }
            }
            default -> throw new IllegalArgumentException("unknown send mode " + mode);
        }
    }

    private static void sendSteady(DefaultMQProducer producer, String topic, List<Message> msgs, long interval)
            throws InterruptedException {
        for (int i = 0; i < msgs.size(); i++) {
            try {
                var data = Events.sent(producer.send(msgs.get(i)));
                data.putAll(Events.data("mode", "steady", "topic", topic, "seq", i));
                Events.emit("sent", data);
            } catch (Exception e) {
                Events.emit("send_error", Events.data("mode", "steady", "topic", topic, "seq", i, "error", e.toString()));
            }
            Thread.sleep(interval);
        }
    }

    private static void sendAsync(DefaultMQProducer producer, String topic, List<Message> msgs) throws Exception {
        CountDownLatch done = new CountDownLatch(msgs.size());
        for (int i = 0; i < msgs.size(); i++) {
            final int seq = i;
            producer.send(msgs.get(i), new SendCallback() {
                @Override
                public void onSuccess(SendResult result) {
                    var data = Events.sent(result);
                    data.putAll(Events.data("mode", "async", "topic", topic, "seq", seq));
                    Events.emit("sent", data);
                    done.countDown();
                }

                @Override
                public void onException(Throwable e) {
                    Events.emit("send_error", Events.data("mode", "async", "topic", topic, "seq", seq,
                            "error", e.toString()));
                    done.countDown();
                }
            });
        }
        if (!done.await(30, TimeUnit.SECONDS)) {
            Events.emit("send_error", Events.data("mode", "async", "topic", topic, "error", "callbacks timed out"));
        }
    }
}
