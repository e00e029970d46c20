import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.protocol.body.ClusterInfo;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * The load generator of bench/vs_rocketmq.py: the same Java client (rocketmq-client) against both
 * brokers. One JSON line on stdout at the end; options are --name value.
 *
 *   topic   --namesrv A --topic T [--queues 8] [--topics K]    create T on every master of the cluster
 *                                                              (K > 1: the K topics T-0 .. T-(K-1))
 *   send    --namesrv A --topic T --threads N --seconds S --size B [--batch 1] [--warmup 0]
 *           [--topics K] [--rate R]                            sync sends (or batches) for S seconds;
 *                                                              K > 1: spread over T-0 .. T-(K-1);
 *                                                              R > 0: paced at R messages/s in all
 *   fill    --namesrv A --topic T --count M --threads N --size B [--batch 32]
 *                                                              M messages in batches, as fast as it goes
 *   consume --namesrv A --topic T --count M [--wait 300] [--groups G]
 *                                                              push-consume M messages from the start,
 *                                                              in each of G new consumer groups
 *
 * send and consume also report client_cpu_s, this JVM's CPU time (all its threads, user + system) over the
 * measured part: how much of the shared cores the client itself took.
 *
 * topic and send also take --accessKey AK --secretKey SK: every request is then signed by rocketmq-client's
 * AclClientRPCHook, as an application with ACL credentials signs them.
 */
public final class LoadGen {
    private LoadGen() {}

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = new HashMap<>();
        for (int i = 1; i + 1 < argv.length; i += 2) {
            a.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        String result = switch (argv.length == 0 ? "" : argv[0]) {
            case "topic" -> topic(a);
            case "send" -> send(a, num(a, "seconds", 10), Long.MAX_VALUE);
            case "fill" -> send(a, 86400, num(a, "count", 100000));
            case "consume" -> consume(a);
            default -> throw new IllegalArgumentException("usage: LoadGen topic|send|fill|consume --namesrv A ...");
        };
        System.out.println(result);
        System.out.flush();
        System.exit(0); // the client's non-daemon threads would keep the JVM up
    }

    /** This JVM's CPU time so far, in ns (every thread, user and system). */
    static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
            .getProcessCpuTime();
    }

    static long num(Map<String, String> a, String key, long otherwise) {
        return a.containsKey(key) ? Long.parseLong(a.get(key)) : otherwise;
    }

    /** --accessKey/--secretKey: the ACL signing hook (null without them). */
    static RPCHook hook(Map<String, String> a) {
        if (!a.containsKey("accessKey")) {
            return null;
        }
        return new AclClientRPCHook(new SessionCredentials(a.get("accessKey"), a.get("secretKey")));
    }

    static String topic(Map<String, String> a) throws Exception {
        RPCHook rpcHook = hook(a);
        DefaultMQAdminExt admin = rpcHook == null ? new DefaultMQAdminExt(5000) : new DefaultMQAdminExt(rpcHook, 5000);
        admin.setNamesrvAddr(a.get("namesrv"));
        admin.setInstanceName("loadgen-admin-" + ProcessHandle.current().pid());
        admin.start();
        try {
            int queues = (int) num(a, "queues", 8);
            List<String> names = topics(a);
            ClusterInfo info = admin.examineBrokerClusterInfo();
            int masters = 0;
            for (BrokerData broker : info.getBrokerAddrTable().values()) {
                String master = broker.getBrokerAddrs().get(0L);
                if (master != null) {
                    for (String name : names) {
                        admin.createAndUpdateTopicConfig(master, new TopicConfig(name, queues, queues));
                    }
                    masters++;
                }
            }
            return "{\"mode\": \"topic\", \"masters\": " + masters + ", \"topics\": " + names.size() + "}";
        } finally {
            admin.shutdown();
        }
    }

    /** --topic T alone, or with --topics K > 1 the K topics T-0 .. T-(K-1). */
    static List<String> topics(Map<String, String> a) {
        int count = (int) num(a, "topics", 1);
        List<String> names = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            names.add(count == 1 ? a.get("topic") : a.get("topic") + "-" + i);
        }
        return names;
    }

    /**
     * Sync sends from N threads until `seconds` pass or `total` messages are sent, after --warmup seconds
     * of the same sends that are not counted (this JVM's JIT warms up, and the broker's).
     */
    static String send(Map<String, String> a, long seconds, long total) throws Exception {
        int threads = (int) num(a, "threads", 1);
        int batch = (int) num(a, "batch", a.containsKey("count") ? 32 : 1);
        byte[] body = new byte[(int) num(a, "size", 1024)];
        Arrays.fill(body, (byte) 'x');
        List<String> topics = topics(a);
        double rate = Double.parseDouble(a.getOrDefault("rate", "0"));
        // Paced: each thread sends one message (or batch) every `gap` ns, so that all together send `rate`.
        long gap = rate > 0 ? (long) (1e9 * threads * batch / rate) : 0;
        DefaultMQProducer producer = new DefaultMQProducer("loadgen-producer", hook(a));
        producer.setNamesrvAddr(a.get("namesrv"));
        producer.setInstanceName("loadgen-" + ProcessHandle.current().pid());
        producer.setSendMsgTimeout(10000);
        producer.setCompressMsgBodyOverHowmuch(Integer.MAX_VALUE);
        producer.start();
        // Fetch the routes before the clock starts.
        for (String topic : topics) {
            producer.fetchPublishMessageQueues(topic);
        }
        AtomicLong sent = new AtomicLong();
        AtomicLong failures = new AtomicLong();
        long[][] latencies = new long[threads][];
        long start = System.nanoTime() + TimeUnit.SECONDS.toNanos(num(a, "warmup", 0));
        long deadline = start + TimeUnit.SECONDS.toNanos(seconds);
        AtomicLong cpuAtStart = new AtomicLong();
        Thread marker = new Thread(() -> {
            LockSupport.parkNanos(start - System.nanoTime());
            cpuAtStart.set(cpuNanos());
        });
        marker.start();
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            final int slot = t;
            Thread worker = new Thread(() -> {
                long[] lat = new long[1 << 14];
                int n = 0;
                // one batch a topic; thread t starts at topic t, so that the threads spread over them
                List<List<Message>> perTopic = new ArrayList<>();
                for (String topic : topics) {
                    List<Message> msgs = new ArrayList<>();
                    for (int i = 0; i < batch; i++) {
                        msgs.add(new Message(topic, body));
                    }
                    perTopic.add(msgs);
                }
                long next = System.nanoTime();
                for (long round = slot; System.nanoTime() < deadline; round++) {
                    List<Message> msgs = perTopic.get((int) (round % perTopic.size()));
                    if (gap > 0) {
                        next += gap;
                        long wait = next - System.nanoTime();
                        if (wait > 0) {
                            LockSupport.parkNanos(wait);
                        } else if (wait < -1_000_000_000L) {
                            next = System.nanoTime(); // a second behind: no burst to catch up
                        }
                    }
                    long begin = System.nanoTime();
                    boolean counted = begin >= start;
                    if (counted && sent.addAndGet(batch) > total) {
                        break;
                    }
                    boolean ok;
                    try {
                        SendResult r = batch == 1 ? producer.send(msgs.get(0)) : producer.send(msgs);
                        ok = r.getSendStatus() == SendStatus.SEND_OK;
                    } catch (Exception e) {
                        ok = false;
                    }
                    if (!counted) {
                        continue;
                    }
                    if (!ok) {
                        failures.addAndGet(batch);
                    }
                    if (n == lat.length) {
                        lat = Arrays.copyOf(lat, n * 2);
                    }
                    lat[n++] = System.nanoTime() - begin;
                }
                latencies[slot] = Arrays.copyOf(lat, n);
            });
            worker.start();
            workers.add(worker);
        }
        for (Thread worker : workers) {
            worker.join();
        }
        long cpuAtEnd = cpuNanos();
        marker.join();
        double elapsed = (System.nanoTime() - start) / 1e9;
        producer.shutdown();
        long[] all = Arrays.stream(latencies).flatMapToLong(Arrays::stream).sorted().toArray();
        long count = (long) all.length * batch - failures.get();
        return String.format(
            "{\"mode\": \"%s\", \"threads\": %d, \"batch\": %d, \"count\": %d, \"seconds\": %.3f, "
                + "\"msgs_per_s\": %.1f, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"failures\": %d, "
                + "\"client_cpu_s\": %.3f}",
            total == Long.MAX_VALUE ? "send" : "fill", threads, batch, count, elapsed, count / elapsed,
            quantile(all, 0.50), quantile(all, 0.99), failures.get(), (cpuAtEnd - cpuAtStart.get()) / 1e9);
    }

    static double quantile(long[] sorted, double q) {
        return sorted.length == 0 ? 0.0 : sorted[(int) Math.min(sorted.length - 1, sorted.length * q)] / 1e6;
    }

    static String consume(Map<String, String> a) throws Exception {
        long target = num(a, "count", 100000);
        int groups = (int) num(a, "groups", 1);
        AtomicLong seen = new AtomicLong();
        AtomicLong first = new AtomicLong();
        AtomicLong cpuAtFirst = new AtomicLong();
        CountDownLatch done = new CountDownLatch(groups);
        String prefix = "loadgen-consumer-" + System.currentTimeMillis();
        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        for (int g = 0; g < groups; g++) {
            DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(groups == 1 ? prefix : prefix + "-" + g);
            consumer.setNamesrvAddr(a.get("namesrv"));
            consumer.setInstanceName("loadgen-" + ProcessHandle.current().pid() + "-" + g);
            consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            consumer.subscribe(a.get("topic"), "*");
            AtomicLong mine = new AtomicLong();
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
                if (first.compareAndSet(0, System.nanoTime())) {
                    cpuAtFirst.set(cpuNanos());
                }
                seen.addAndGet(msgs.size());
                long before = mine.getAndAdd(msgs.size());
                if (before < target && before + msgs.size() >= target) {
                    done.countDown();
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            consumers.add(consumer);
        }
        long start = System.nanoTime();
        for (DefaultMQPushConsumer consumer : consumers) {
            consumer.start();
        }
        boolean all = done.await(num(a, "wait", 300), TimeUnit.SECONDS);
        long end = System.nanoTime();
        long cpuAtEnd = cpuNanos();
        for (DefaultMQPushConsumer consumer : consumers) {
            consumer.shutdown();
        }
        long from = first.get() == 0 ? start : first.get();
        double draining = (end - from) / 1e9;
        return String.format(
            "{\"mode\": \"consume\", \"count\": %d, \"complete\": %b, \"seconds\": %.3f, "
                + "\"to_first_s\": %.3f, \"msgs_per_s\": %.1f, \"client_cpu_s\": %.3f}",
            seen.get(), all, draining, (from - start) / 1e9, seen.get() / Math.max(draining, 1e-9),
            (cpuAtEnd - cpuAtFirst.get()) / 1e9);
    }
}
