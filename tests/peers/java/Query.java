import org.apache.rocketmq.client.QueryResult;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * `query --topic T --count N`: sends N canonical messages, then looks each one up with
 * DefaultMQAdminExt: by key (queryMessage), by the broker's offset id and by the client's unique id
 * (viewMessage). Prints {"event": "sent"} and {"event": "by_key" | "by_offset_id" | "by_uniq_id"}
 * with the records found. The index is built after the put, so a key lookup retries for a while.
 */
final class Query {
    private Query() {}

    static int run(Args args) throws Exception {
        String topic = args.required("topic");
        String origin = args.get("origin", "javaq");
        int count = args.integer("count", 3);
        DefaultMQProducer producer = new DefaultMQProducer(args.get("group", "PID-java-query"));
        producer.setNamesrvAddr(args.required("namesrv"));
        producer.setInstanceName("query-producer");
        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(args.required("namesrv"));
        admin.setInstanceName("query-admin");
        producer.start();
        admin.start();
        try {
            SendResult[] results = new SendResult[count];
            for (int i = 0; i < count; i++) {
                results[i] = producer.send(Fields.message(origin, topic, i, 3));
                var data = Events.sent(results[i]);
                data.put("seq", i);
                Events.emit("sent", data);
            }
            long deadline = System.currentTimeMillis() + args.millis("timeout", 20);
            for (int i = 0; i < count; i++) {
                String key = "key-" + origin + "-" + i;
                QueryResult found = admin.queryMessage(topic, key, 32, 0, Long.MAX_VALUE);
                while (found.getMessageList().isEmpty() && System.currentTimeMillis() < deadline) {
                    Thread.sleep(200);
                    found = admin.queryMessage(topic, key, 32, 0, Long.MAX_VALUE);
                }
                for (MessageExt msg : found.getMessageList()) {
                    var data = Events.record(msg);
                    data.put("seq", i);
                    Events.emit("by_key", data);
                }
                lookUp(admin, topic, "by_offset_id", results[i].getOffsetMsgId(), i);
                lookUp(admin, topic, "by_uniq_id", results[i].getMsgId(), i);
            }
            return 0;
        } finally {
            admin.shutdown();
            producer.shutdown();
        }
    }

    private static void lookUp(DefaultMQAdminExt admin, String topic, String event, String id, int seq) {
        try {
            MessageExt msg = admin.viewMessage(topic, id);
            var data = Events.record(msg);
            data.put("seq", seq);
            data.put("asked", id);
            Events.emit(event, data);
        } catch (Exception e) {
            Events.emit(event + "_error", Events.data("seq", seq, "asked", id, "error", e.toString()));
        }
    }
}
