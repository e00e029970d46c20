import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.RequestTimeoutException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.client.producer.RequestCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Request/Reply with DefaultMQProducer.request() (5.3.3, unchanged).
 *
 * `request --topic T --count N --origin O [--request-timeout SECONDS] [--api callback|sync]`: N
 * canonical messages, each sent with producer.request() (by default the overload with a queue
 * selector and a RequestCallback, see requestWithCallback); prints {"event": "reply", "seq": i,
 * ...record} per reply, or {"event": "request_timeout"} / {"event": "request_error"}; then it stays
 * --linger seconds (a late reply is still pushed to it meanwhile).
 *
 * `respond --group G --topic T --expect N`: a push consumer that answers every message with
 * MessageUtil.createReplyMessage(msg, "echo:" + body) sent by its own producer, printing
 * {"event": "replied", "seq": ..., "status": ...}; it leaves after N replies (rc 0) or --timeout (rc 3).
 */
final class Request {
    static final byte[] ECHO = "echo:".getBytes(java.nio.charset.StandardCharsets.UTF_8);

    private Request() {}

    static int request(Args args) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(args.get("group", "PID-java-requester"));
        producer.setNamesrvAddr(args.required("namesrv"));
        producer.setInstanceName("requester");
        producer.start();
        try {
            String topic = args.required("topic");
            String origin = args.get("origin", "java");
            long timeoutMs = args.millis("request-timeout", 15);
            boolean sync = args.get("api", "callback").equals("sync");
            for (int i = 0; i < args.integer("count", 3); i++) {
                Message msg = Fields.message(origin, topic, i, 3);
                long started = System.currentTimeMillis();
                try {
                    Message reply = sync ? producer.request(msg, timeoutMs) : requestWithCallback(producer, msg, i,
                            timeoutMs);
                    var data = reply instanceof MessageExt ext
                            ? Events.record(ext)
                            : Events.data("topic", reply.getTopic(), "props", reply.getProperties());
                    data.put("seq", i);
                    data.put("reply_body_b64", java.util.Base64.getEncoder().encodeToString(reply.getBody()));
                    data.put("elapsed_ms", System.currentTimeMillis() - started);
                    Events.emit("reply", data);
                } catch (RequestTimeoutException e) {
                    Events.emit("request_timeout", Events.data("seq", i, "error", e.getMessage(),
                            "elapsed_ms", System.currentTimeMillis() - started));
                } catch (Exception e) {
                    Events.emit("request_error", Events.data("seq", i, "error", e.toString()));
                }
            }
            Thread.sleep(args.millis("linger", 0));
        } finally {
            producer.shutdown();
        }
        return 0;
    }

    /**
     * request(msg, selector, arg, callback, timeout). The synchronous request(msg, timeout) of 5.3.1 to
     * 5.3.3 counts its latch down when the request's send is acknowledged (apache/rocketmq#9319), so
     * it throws RequestTimeoutException before any reply can arrive, whatever the broker; this
     * overload's callback only runs for the reply or the timeout.
     */
    private static Message requestWithCallback(DefaultMQProducer producer, Message msg, int seq, long timeoutMs)
            throws Exception {
        CompletableFuture<Message> outcome = new CompletableFuture<>();
        MessageQueueSelector bySeq = (mqs, m, arg) -> mqs.get((Integer) arg % mqs.size());
        producer.request(msg, bySeq, seq, new RequestCallback() {
            @Override
            public void onSuccess(Message reply) {
                outcome.complete(reply);
            }

            @Override
            public void onException(Throwable e) {
                outcome.completeExceptionally(e);
            }
        }, timeoutMs);
        try {
            // The client's own scan reports a timeout up to a second or two after it passed.
            return outcome.get(timeoutMs + 5000, TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof Exception cause) {
                throw cause;
            }
            throw e;
        }
    }

    static int respond(Args args) throws Exception {
        String topic = args.required("topic");
        int expect = args.integer("expect", 1);
        AtomicInteger replied = new AtomicInteger();
        DefaultMQProducer producer = new DefaultMQProducer(args.get("producer-group", "PID-java-responder"));
        producer.setNamesrvAddr(args.required("namesrv"));
        producer.setInstanceName("responder-producer");
        producer.start();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args.required("group"));
        consumer.setNamesrvAddr(args.required("namesrv"));
        consumer.setInstanceName("responder-consumer");
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt msg : msgs) {
                byte[] body = new byte[ECHO.length + msg.getBody().length];
                System.arraycopy(ECHO, 0, body, 0, ECHO.length);
                System.arraycopy(msg.getBody(), 0, body, ECHO.length, msg.getBody().length);
                try {
                    Message reply = MessageUtil.createReplyMessage(msg, body);
                    SendResult result = producer.send(reply);
                    Events.emit("replied", Events.data("seq", msg.getUserProperty("seq"),
                            "status", result.getSendStatus().name(), "reply_topic", reply.getTopic()));
                } catch (Exception e) {
                    Events.emit("reply_error", Events.data("seq", msg.getUserProperty("seq"), "error", e.toString()));
                }
                replied.incrementAndGet();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        Events.emit("ready", Events.data("topic", topic));
        try {
            long deadline = System.currentTimeMillis() + args.millis("timeout", 60);
            while (replied.get() < expect && System.currentTimeMillis() < deadline) {
                Thread.sleep(50);
            }
            return replied.get() >= expect ? 0 : 3;
        } finally {
            consumer.shutdown();
            producer.shutdown();
        }
    }
}
