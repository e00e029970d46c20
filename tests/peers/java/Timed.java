import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * `timed --topic T --count N --origin O --in SECONDS`: the canonical messages 0..N-1, each with a
 * delivery time SECONDS ahead set through one of Message's 5.x setters in turn: setDeliverTimeMs
 * (TIMER_DELIVER_MS), setDelayTimeSec (TIMER_DELAY_SEC), setDelayTimeMs (TIMER_DELAY_MS). Prints
 * {"event": "sent", "seq": i, "api": ..., "due_ms": ...} per send or {"event": "send_error"}.
 */
final class Timed {
    private Timed() {}

    static int run(Args args) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(args.get("group", "PID-java-timed"));
        producer.setNamesrvAddr(args.required("namesrv"));
        producer.setInstanceName("timed");
        producer.start();
        try {
            String topic = args.required("topic");
            String origin = args.get("origin", "java");
            long aheadMs = args.millis("in", 2);
            for (int i = 0; i < args.integer("count", 3); i++) {
                Message msg = Fields.message(origin, topic, i, 3);
                long now = System.currentTimeMillis();
                String api;
                switch (i % 3) {
                    case 0 -> {
                        api = "setDeliverTimeMs";
                        msg.setDeliverTimeMs(now + aheadMs);
                    }
                    case 1 -> {
                        api = "setDelayTimeSec";
                        msg.setDelayTimeSec((aheadMs + 999) / 1000);
                    }
                    default -> {
                        api = "setDelayTimeMs";
                        msg.setDelayTimeMs(aheadMs);
                    }
                }
                try {
                    SendResult result = producer.send(msg);
                    var data = Events.sent(result);
                    data.putAll(Events.data("seq", i, "api", api, "due_ms", now + aheadMs));
                    Events.emit("sent", data);
                } catch (Exception e) {
                    Events.emit("send_error", Events.data("seq", i, "api", api, "error", e.toString()));
                }
            }
        } finally {
            producer.shutdown();
        }
        return 0;
    }
}
