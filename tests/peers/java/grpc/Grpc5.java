import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.Base64;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

/**
 * Driver of Apache RocketMQ's Java 5.x gRPC client (rocketmq-client-java) for tests/interop/test_java_grpc.py.
 *
 * <p>Roles (the first argument; the second is always the gRPC endpoint: host:port, plaintext, or tls:host:port,
 * which the client reaches over TLS, trusting any certificate as it does by default):
 * <ul>
 *   <li>{@code produce ENDPOINT ORIGIN TOPIC:KIND:COUNT...}: one Producer for every topic; KIND normal, fifo (message
 *       group {@code g<i % 2>}), delay (delivery 8 s ahead) or transaction (one message a transaction: seq % 3 == 0
 *       committed, 1 rolled back, 2 left open for the TransactionChecker, which commits it; the run waits for it).
 *   <li>{@code simple ENDPOINT GROUP EXPECT SECONDS TOPIC...}: SimpleConsumer receive + ack until EXPECT arrived,
 *       then one more receive (anything it gets is reported as stage "extra").
 *   <li>{@code redeliver ENDPOINT TOPIC GROUP}: one message received and left unacked (10 s invisible), received again,
 *       its invisibility changed to 1 s, received a third time, acked, then polled for 5 s more.
 *   <li>{@code push ENDPOINT TOPIC GROUP EXPECT SECONDS}: PushConsumer until EXPECT arrived.
 *   <li>{@code pushfail ENDPOINT TOPIC GROUP DELIVERIES SECONDS}: PushConsumer whose listener reports every delivery
 *       (stage "pushfail") and returns FAILURE, until DELIVERIES deliveries, then 5 s more to see any extra one.
 *   <li>{@code nack ENDPOINT TOPIC GROUP DELIVERIES SECONDS}: SimpleConsumer that never acks: every delivery (stage
 *       "nack") gets its invisibility changed to 1 s; it keeps receiving until DELIVERIES deliveries, then 8 s more
 *       (stage "nack_extra": a delivery past the last attempt).
 * </ul>
 * Every event is one JSON line on stdout (the tests parse them); messages have the content of
 * tests/interop/interop_harness.fields.
 */
public final class Grpc5 {
    private static final PrintStream OUT =
            new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
    private static final ClientServiceProvider PROVIDER = ClientServiceProvider.loadService();

    private Grpc5() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            throw new IllegalArgumentException("usage: Grpc5 ROLE ENDPOINT ...");
        }
        boolean ssl = args[1].startsWith("tls:");
        ClientConfiguration config = ClientConfiguration.newBuilder()
                .setEndpoints(ssl ? args[1].substring("tls:".length()) : args[1])
                // The client speaks TLS unless told otherwise; a plaintext endpoint needs it off.
                .enableSsl(ssl)
                .setRequestTimeout(Duration.ofSeconds(5))
                .build();
        switch (args[0]) {
            case "produce" -> produce(config, args[2], Arrays.copyOfRange(args, 3, args.length));
            case "simple" -> simple(config, args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]),
                    Arrays.copyOfRange(args, 5, args.length));
            case "redeliver" -> redeliver(config, args[2], args[3]);
            case "push" -> push(config, args[2], args[3], Integer.parseInt(args[4]), Integer.parseInt(args[5]));
            case "pushfail" -> pushFail(config, args[2], args[3], Integer.parseInt(args[4]),
                    Integer.parseInt(args[5]));
            case "nack" -> nack(config, args[2], args[3], Integer.parseInt(args[4]), Integer.parseInt(args[5]));
            default -> throw new IllegalArgumentException("unknown role " + args[0]);
        }
        emit("done", data());
        // Client threads (gRPC, schedulers) may linger after close(); the run is over.
        System.exit(0);
    }

    // ---- producing ------------------------------------------------------------------------------------------

    static Message message(String origin, String topic, int i, String kind) {
        String unit = "héllo wörld 世界 🚀 " + origin + " #" + i;
        // Every fifth message is ~12 KiB, as in interop_harness.fields.
        String body = unit.repeat(i % 5 == 4 ? 400 : 1);
        MessageBuilder builder = PROVIDER.newMessageBuilder()
                .setTopic(topic)
                .setTag("tag" + (i % 2))
                .setKeys("key-" + origin + "-" + i)
                .setBody(body.getBytes(StandardCharsets.UTF_8))
                .addProperty("color", "blue")
                .addProperty("city", "Zürich")
                .addProperty("seq", Integer.toString(i))
                .addProperty("shard", Integer.toString(i % 3))
                .addProperty("origin", origin);
        if (kind.equals("fifo")) {
            builder.setMessageGroup("g" + (i % 2));
        } else if (kind.equals("delay")) {
            builder.setDeliveryTimestamp(System.currentTimeMillis() + 8000);
        }
        return builder.build();
    }

    static void produce(ClientConfiguration config, String origin, String[] specs) throws Exception {
        String[] topics = new String[specs.length];
        int open = 0;
        for (int s = 0; s < specs.length; s++) {
            String[] spec = specs[s].split(":");
            topics[s] = spec[0];
            if (spec[1].equals("transaction")) {
                open += (Integer.parseInt(spec[2]) + 1) / 3;
            }
        }
        // Transactions left open: the checker commits them and says so.
        CountDownLatch checked = new CountDownLatch(open);
        var builder = PROVIDER.newProducerBuilder()
                .setClientConfiguration(config)
                .setTopics(topics)
                .setTransactionChecker(view -> {
                    emit("check", data("topic", view.getTopic(), "message_id", view.getMessageId().toString(),
                            "seq", view.getProperties().get("seq")));
                    checked.countDown();
                    return TransactionResolution.COMMIT;
                });
        try (Producer producer = builder.build()) {
            for (String specText : specs) {
                String[] spec = specText.split(":");
                String topic = spec[0];
                String kind = spec[1];
                for (int i = 0; i < Integer.parseInt(spec[2]); i++) {
                    Message msg = message(origin, topic, i, kind);
                    SendReceipt receipt;
                    String outcome = "";
                    if (kind.equals("transaction")) {
                        Transaction tx = producer.beginTransaction();
                        receipt = producer.send(msg, tx);
                        switch (i % 3) {
                            case 0 -> { tx.commit(); outcome = "commit"; }
                            case 1 -> { tx.rollback(); outcome = "rollback"; }
                            default -> outcome = "open";
                        }
                    } else {
                        receipt = producer.send(msg);
                    }
                    emit("sent", data("topic", topic, "seq", i, "kind", kind,
                            "message_id", receipt.getMessageId().toString(), "outcome", outcome,
                            "message_group", msg.getMessageGroup().orElse(null),
                            "delivery_ts", msg.getDeliveryTimestamp().orElse(null)));
                }
            }
            if (!checked.await(60, TimeUnit.SECONDS)) {
                emit("error", data("stage", "check", "error", "checker not called for every open transaction"));
            }
        }
    }

    // ---- consuming ------------------------------------------------------------------------------------------

    static SimpleConsumer simpleConsumer(ClientConfiguration config, String group, int awaitSeconds,
            String... topics) throws Exception {
        Map<String, FilterExpression> subscriptions = new LinkedHashMap<>();
        for (String topic : topics) {
            subscriptions.put(topic, FilterExpression.SUB_ALL);
        }
        return PROVIDER.newSimpleConsumerBuilder()
                .setClientConfiguration(config)
                .setConsumerGroup(group)
                .setAwaitDuration(Duration.ofSeconds(awaitSeconds))
                .setSubscriptionExpressions(subscriptions)
                .build();
    }

    static void simple(ClientConfiguration config, String group, int expect, int seconds, String[] topics)
            throws Exception {
        long deadline = System.currentTimeMillis() + seconds * 1000L;
        int got = 0;
        try (SimpleConsumer consumer = simpleConsumer(config, group, 3, topics)) {
            while (got < expect && System.currentTimeMillis() < deadline) {
                for (MessageView view : consumer.receive(16, Duration.ofSeconds(30))) {
                    emit("msg", record(view, "simple"));
                    consumer.ack(view);
                    got++;
                }
            }
            // Every topic once more: what was meant never to arrive (a rolled-back transaction) has had its chance.
            for (int i = 0; i < topics.length; i++) {
                for (MessageView view : consumer.receive(16, Duration.ofSeconds(30))) {
                    emit("msg", record(view, "extra"));
                    consumer.ack(view);
                }
            }
        }
    }

    /** The first message of a receive that returns any within the deadline, or null. */
    static MessageView receiveOne(SimpleConsumer consumer, Duration invisible, long deadline) throws Exception {
        while (System.currentTimeMillis() < deadline) {
            List<MessageView> views = consumer.receive(1, invisible);
            if (!views.isEmpty()) {
                return views.get(0);
            }
        }
        return null;
    }

    static void redeliver(ClientConfiguration config, String topic, String group) throws Exception {
        long deadline = System.currentTimeMillis() + 60_000;
        try (SimpleConsumer consumer = simpleConsumer(config, group, 3, topic)) {
            // 10 s is the least invisible duration a receive may ask for.
            MessageView first = receiveOne(consumer, Duration.ofSeconds(10), deadline);
            if (first == null) {
                emit("error", data("stage", "first", "error", "nothing received"));
                return;
            }
            emit("msg", record(first, "first"));
            MessageView second = receiveOne(consumer, Duration.ofSeconds(10), deadline);
            if (second == null) {
                emit("error", data("stage", "second", "error", "the unacked message never came back"));
                return;
            }
            emit("msg", record(second, "second"));
            consumer.changeInvisibleDuration(second, Duration.ofSeconds(1));
            emit("changed", data("message_id", second.getMessageId().toString()));
            MessageView third = receiveOne(consumer, Duration.ofSeconds(10), deadline);
            if (third == null) {
                emit("error", data("stage", "third", "error", "not back after changeInvisibleDuration"));
                return;
            }
            emit("msg", record(third, "third"));
            consumer.ack(third);
            emit("acked", data("message_id", third.getMessageId().toString()));
            MessageView after = receiveOne(consumer, Duration.ofSeconds(10), System.currentTimeMillis() + 5_000);
            if (after != null) {
                emit("msg", record(after, "after_ack"));
            }
        }
    }

    static void push(ClientConfiguration config, String topic, String group, int expect, int seconds)
            throws Exception {
        CountDownLatch latch = new CountDownLatch(expect);
        PushConsumer consumer = PROVIDER.newPushConsumerBuilder()
                .setClientConfiguration(config)
                .setConsumerGroup(group)
                .setSubscriptionExpressions(Collections.singletonMap(topic, FilterExpression.SUB_ALL))
                .setMessageListener(view -> {
                    emit("msg", record(view, "push"));
                    latch.countDown();
                    return ConsumeResult.SUCCESS;
                })
                .build();
        try {
            if (!latch.await(seconds, TimeUnit.SECONDS)) {
                emit("error", data("stage", "push", "error", "only " + (expect - latch.getCount()) + " arrived"));
            }
            // Acks go out after the listener returns: give the last ones a moment before closing.
            Thread.sleep(1000);
        } finally {
            consumer.close();
        }
    }

    static void pushFail(ClientConfiguration config, String topic, String group, int deliveries, int seconds)
            throws Exception {
        CountDownLatch latch = new CountDownLatch(deliveries);
        PushConsumer consumer = PROVIDER.newPushConsumerBuilder()
                .setClientConfiguration(config)
                .setConsumerGroup(group)
                .setSubscriptionExpressions(Collections.singletonMap(topic, FilterExpression.SUB_ALL))
                .setMessageListener(view -> {
                    emit("msg", record(view, "pushfail"));
                    latch.countDown();
                    return ConsumeResult.FAILURE;
                })
                .build();
        try {
            if (!latch.await(seconds, TimeUnit.SECONDS)) {
                emit("error", data("stage", "pushfail",
                        "error", "only " + (deliveries - latch.getCount()) + " deliveries"));
            }
            // The last failure's forward to the DLQ goes out after the listener returns; an extra delivery would
            // come within the first retry delay (1 s).
            Thread.sleep(5000);
        } finally {
            consumer.close();
        }
    }

    static void nack(ClientConfiguration config, String topic, String group, int deliveries, int seconds)
            throws Exception {
        long deadline = System.currentTimeMillis() + seconds * 1000L;
        int got = 0;
        try (SimpleConsumer consumer = simpleConsumer(config, group, 2, topic)) {
            while (got < deliveries && System.currentTimeMillis() < deadline) {
                for (MessageView view : consumer.receive(16, Duration.ofSeconds(10))) {
                    emit("msg", record(view, "nack"));
                    got++;
                    consumer.changeInvisibleDuration(view, Duration.ofSeconds(1));
                }
            }
            if (got < deliveries) {
                emit("error", data("stage", "nack", "error", "only " + got + " deliveries"));
            }
            long after = System.currentTimeMillis() + 8000;
            while (System.currentTimeMillis() < after) {
                for (MessageView view : consumer.receive(16, Duration.ofSeconds(10))) {
                    emit("msg", record(view, "nack_extra"));
                    consumer.changeInvisibleDuration(view, Duration.ofSeconds(1));
                }
            }
        }
    }

    // ---- output ---------------------------------------------------------------------------------------------

    /** A delivery in the shape interop_harness.Record.from_event reads (queue position is not in the API). */
    static Map<String, Object> record(MessageView view, String stage) {
        ByteBuffer buffer = view.getBody().duplicate();
        byte[] body = new byte[buffer.remaining()];
        buffer.get(body);
        return data(
                "stage", stage,
                "topic", view.getTopic(),
                "tags", view.getTag().orElse(null),
                "keys", String.join(" ", view.getKeys()),
                "body_b64", Base64.getEncoder().encodeToString(body),
                "id", view.getMessageId().toString(),
                "queue_id", -1,
                "queue_offset", -1,
                "reconsume_times", view.getDeliveryAttempt() - 1,
                "delivery_attempt", view.getDeliveryAttempt(),
                "message_group", view.getMessageGroup().orElse(null),
                "delivery_ts", view.getDeliveryTimestamp().orElse(null),
                "props", new LinkedHashMap<>(view.getProperties()),
                "born_ts", view.getBornTimestamp(),
                "born_host", view.getBornHost(),
                "receive_ts", System.currentTimeMillis());
    }

    static Map<String, Object> data(Object... pairs) {
        Map<String, Object> map = new LinkedHashMap<>();
        for (int i = 0; i + 1 < pairs.length; i += 2) {
            map.put((String) pairs[i], pairs[i + 1]);
        }
        return map;
    }

    static synchronized void emit(String event, Map<String, Object> fields) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("event", event);
        line.putAll(fields);
        OUT.println(Json.write(line));
    }
}
