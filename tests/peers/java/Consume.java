import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicIntegerArray;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.heartbeat.MessageModel;

/**
 * `consume --group G --topic T ...`: K DefaultMQPushConsumer instances (default settings, plus
 * CONSUME_FROM_FIRST_OFFSET) in one group, each printing {"event": "msg", "instance": k, ...} per
 * delivery. Options: --instances K, --broadcast, --orderly, --expr TAGS or --sql EXPR, --fail-all
 * (every delivery answers RECONSUME_LATER) with --max-reconsume M. It leaves once --expect deliveries
 * in all (and --expect-each per instance) arrived and --linger more seconds passed (rc 0), or at
 * --timeout (rc 3). With --send-count N it first waits until the instances own the topic's queues
 * between them (printing {"event": "balanced"}), then sends N canonical messages itself
 * (--send-mode sync or delay), so no rebalance happens while they are consumed. --server-rebalance
 * leaves the assignment to the broker (setClientRebalance(false): POP when the broker says so).
 */
final class Consume {
    private Consume() {}

    static int run(Args args) throws Exception {
        String topic = args.required("topic");
        String group = args.required("group");
        int instances = args.integer("instances", 1);
        boolean failAll = args.flag("fail-all");
        AtomicIntegerArray counts = new AtomicIntegerArray(instances);
        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        try {
            for (int k = 0; k < instances; k++) {
                DefaultMQPushConsumer consumer = create(args, group, topic, k, counts, failAll);
                consumers.add(consumer);
                consumer.start();
            }
            int sendCount = args.integer("send-count", 0);
            if (sendCount > 0) {
                awaitBalanced(consumers, topic, args.flag("broadcast"), args.millis("timeout", 60));
                send(args, topic, sendCount);
            }
            boolean done = awaitCounts(counts, args.integer("expect", 0), args.integer("expect-each", 0),
                    args.millis("timeout", 60));
            Thread.sleep(args.millis("linger", 1.0));
            Events.emit("done", Events.data("counts", counts.toString(), "complete", done));
            return done ? 0 : 3;
        } finally {
            for (DefaultMQPushConsumer consumer : consumers) {
                consumer.shutdown();
            }
        }
    }

    private static DefaultMQPushConsumer create(Args args, String group, String topic, int k,
            AtomicIntegerArray counts, boolean failAll) throws Exception {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group, args.aclHook());
        consumer.setNamesrvAddr(args.required("namesrv"));
        // Instances in one JVM need their own client instance, or they would be one group member.
        consumer.setInstanceName("consumer-" + k);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        if (args.flag("server-rebalance")) {
            // the broker assigns the queues and says PULL or POP for each (QUERY_ASSIGNMENT)
            consumer.setClientRebalance(false);
        }
        if (args.flag("broadcast")) {
            consumer.setMessageModel(MessageModel.BROADCASTING);
        }
        if (args.get("max-reconsume", null) != null) {
            consumer.setMaxReconsumeTimes(args.integer("max-reconsume", 16));
        }
        String sql = args.get("sql", null);
        if (sql != null) {
            consumer.subscribe(topic, MessageSelector.bySql(sql));
        } else {
            consumer.subscribe(topic, args.get("expr", "*"));
        }
        if (args.flag("orderly")) {
            consumer.registerMessageListener((MessageListenerOrderly) (msgs, context) -> {
                deliver(msgs, k, counts);
                return ConsumeOrderlyStatus.SUCCESS;
            });
        } else {
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
                deliver(msgs, k, counts);
                return failAll ? ConsumeConcurrentlyStatus.RECONSUME_LATER : ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
        }
        return consumer;
    }

    private static void deliver(List<MessageExt> msgs, int k, AtomicIntegerArray counts) {
        for (MessageExt msg : msgs) {
            var data = Events.record(msg);
            data.put("instance", k);
            Events.emit("msg", data);
            counts.incrementAndGet(k);
        }
    }

    /** Until every queue of `topic` is owned: by exactly one instance (clustering) or by all (broadcasting). */
    @SuppressWarnings("deprecation") // the only view of what a push consumer owns is its impl's rebalance table
    private static void awaitBalanced(List<DefaultMQPushConsumer> consumers, String topic, boolean broadcast,
            long timeoutMs) throws Exception {
        Set<MessageQueue> all = consumers.get(0).fetchSubscribeMessageQueues(topic);
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (System.currentTimeMillis() < deadline) {
            List<Set<MessageQueue>> owned = new ArrayList<>();
            for (DefaultMQPushConsumer consumer : consumers) {
                Set<MessageQueue> mine = new HashSet<>();
                for (MessageQueue mq : consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl()
                        .getProcessQueueTable().keySet()) {
                    if (mq.getTopic().equals(topic)) {
                        mine.add(mq);
                    }
                }
                owned.add(mine);
            }
            if (balanced(owned, all, broadcast)) {
                List<Object> sizes = new ArrayList<>();
                owned.forEach(s -> sizes.add(s.size()));
                Events.emit("balanced", Events.data("queues", all.size(), "owned", sizes));
                return;
            }
            Thread.sleep(100);
        }
        throw new IllegalStateException("consumers never owned the queues of " + topic);
    }

    private static boolean balanced(List<Set<MessageQueue>> owned, Set<MessageQueue> all, boolean broadcast) {
        if (broadcast) {
            return owned.stream().allMatch(all::equals);
        }
        Set<MessageQueue> union = new HashSet<>();
        int total = 0;
        for (Set<MessageQueue> mine : owned) {
            if (mine.isEmpty() && owned.size() <= all.size()) {
                return false;
            }
            union.addAll(mine);
            total += mine.size();
        }
        return union.equals(all) && total == all.size();
    }

    private static void send(Args args, String topic, int count) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(args.get("producer-group", "PID-java-iop"));
        producer.setNamesrvAddr(args.required("namesrv"));
        producer.setInstanceName("producer");
        producer.start();
        try {
            Produce.sendAll(producer, args.get("send-mode", "sync"), topic, args.get("origin", "java"), count,
                    args.integer("shards", 3), args.millis("interval", 0.05));
        } finally {
            producer.shutdown();
        }
    }

    private static boolean awaitCounts(AtomicIntegerArray counts, int expect, int expectEach, long timeoutMs)
            throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (System.currentTimeMillis() < deadline) {
            int total = 0;
            boolean eachDone = true;
            for (int k = 0; k < counts.length(); k++) {
                total += counts.get(k);
                eachDone &= counts.get(k) >= expectEach;
            }
            if (total >= expect && eachDone) {
                return true;
            }
            Thread.sleep(50);
        }
        return false;
    }
}
