import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;

/**
 * The Java load generator of bench/vs_grpc.py: Apache RocketMQ's 5.x gRPC client (rocketmq-client-java) against
 * a gRPC endpoint, plaintext. One JSON line on stdout at the end (the fields of LoadGen's); options are --name value.
 *
 *   send    --endpoint H:P --topic T --threads N --seconds S --size B [--warmup 0]
 *                                          sync sends from N threads on one Producer for warmup + S seconds,
 *                                          the last S counted
 *   consume --endpoint H:P --topic T --group G --count M [--threads 4] [--batch 32] [--wait 300]
 *                                          one SimpleConsumer, N threads each receiving up to `batch` and acking
 *                                          them, until M messages arrived; the rate is from the first message
 */
public final class GrpcLoadGen {
    private static final ClientServiceProvider PROVIDER = ClientServiceProvider.loadService();

    private GrpcLoadGen() {}

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = new HashMap<>();
        for (int i = 1; i + 1 < argv.length; i += 2) {
            a.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        String result = switch (argv.length == 0 ? "" : argv[0]) {
            case "send" -> send(a);
            case "consume" -> consume(a);
            default -> throw new IllegalArgumentException("usage: GrpcLoadGen send|consume --endpoint H:P ...");
        };
        System.out.println(result);
        System.out.flush();
        System.exit(0); // the client's gRPC and scheduler threads would keep the JVM up
    }

    static long num(Map<String, String> a, String key, long otherwise) {
        return a.containsKey(key) ? Long.parseLong(a.get(key)) : otherwise;
    }

    static ClientConfiguration config(Map<String, String> a) {
        return ClientConfiguration.newBuilder()
                .setEndpoints(a.get("endpoint"))
                // Apache's proxy serves TLS and plaintext on one port, ours plaintext: the same setting for both.
                .enableSsl(false)
                .setRequestTimeout(Duration.ofSeconds(10))
                .build();
    }

    static String send(Map<String, String> a) throws Exception {
        int threads = (int) num(a, "threads", 1);
        String topic = a.get("topic");
        byte[] body = new byte[(int) num(a, "size", 1024)];
        Arrays.fill(body, (byte) 'x');
        Message msg = PROVIDER.newMessageBuilder().setTopic(topic).setBody(body).build();
        AtomicLong failures = new AtomicLong();
        long[][] latencies = new long[threads][];
        // setTopics: the route is fetched at build time, before the clock starts.
        try (Producer producer = PROVIDER.newProducerBuilder().setClientConfiguration(config(a)).setTopics(topic)
                .build()) {
            long start = System.nanoTime() + TimeUnit.SECONDS.toNanos(num(a, "warmup", 0));
            long deadline = start + TimeUnit.SECONDS.toNanos(num(a, "seconds", 10));
            List<Thread> workers = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                final int slot = t;
                Thread worker = new Thread(() -> {
                    long[] lat = new long[1 << 14];
                    int n = 0;
                    while (System.nanoTime() < deadline) {
                        long begin = System.nanoTime();
                        boolean ok;
                        try {
                            producer.send(msg);
                            ok = true;
                        } catch (Exception e) {
                            ok = false;
                        }
                        if (begin < start) {
                            continue;
                        }
                        if (!ok) {
                            failures.incrementAndGet();
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
            double elapsed = (System.nanoTime() - start) / 1e9;
            long[] all = Arrays.stream(latencies).flatMapToLong(Arrays::stream).sorted().toArray();
            long count = all.length - failures.get();
            return String.format(
                "{\"mode\": \"send\", \"threads\": %d, \"batch\": 1, \"count\": %d, \"seconds\": %.3f, "
                    + "\"msgs_per_s\": %.1f, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"failures\": %d}",
                threads, count, elapsed, count / elapsed, quantile(all, 0.50), quantile(all, 0.99), failures.get());
        }
    }

    static double quantile(long[] sorted, double q) {
        return sorted.length == 0 ? 0.0 : sorted[(int) Math.min(sorted.length - 1, sorted.length * q)] / 1e6;
    }

    static String consume(Map<String, String> a) throws Exception {
        long target = num(a, "count", 100000);
        int threads = (int) num(a, "threads", 4);
        int batch = (int) num(a, "batch", 32);
        long waitUntil = System.nanoTime() + TimeUnit.SECONDS.toNanos(num(a, "wait", 300));
        AtomicLong seen = new AtomicLong();
        AtomicLong failures = new AtomicLong();
        AtomicLong first = new AtomicLong();
        AtomicLong last = new AtomicLong();
        long start = System.nanoTime();
        try (SimpleConsumer consumer = PROVIDER.newSimpleConsumerBuilder()
                .setClientConfiguration(config(a))
                .setConsumerGroup(a.get("group"))
                .setAwaitDuration(Duration.ofSeconds(5))
                .setSubscriptionExpressions(Collections.singletonMap(a.get("topic"), FilterExpression.SUB_ALL))
                .build()) {
            List<Thread> workers = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                Thread worker = new Thread(() -> {
                    while (seen.get() < target && System.nanoTime() < waitUntil) {
                        List<MessageView> views;
                        try {
                            views = consumer.receive(batch, Duration.ofSeconds(30));
                        } catch (Exception e) {
                            failures.incrementAndGet();
                            continue;
                        }
                        if (views.isEmpty()) {
                            continue;
                        }
                        first.compareAndSet(0, System.nanoTime());
                        List<CompletableFuture<Void>> acks = new ArrayList<>(views.size());
                        for (MessageView view : views) {
                            acks.add(consumer.ackAsync(view));
                        }
                        for (CompletableFuture<Void> ack : acks) {
                            try {
                                ack.join();
                            } catch (Exception e) {
                                failures.incrementAndGet();
                            }
                        }
                        seen.addAndGet(views.size());
                        last.set(System.nanoTime());
                    }
                });
                worker.start();
                workers.add(worker);
            }
            for (Thread worker : workers) {
                worker.join();
            }
        }
        long from = first.get() == 0 ? start : first.get();
        long to = last.get() == 0 ? System.nanoTime() : last.get();
        double draining = (to - from) / 1e9;
        return String.format(
            "{\"mode\": \"consume\", \"count\": %d, \"complete\": %b, \"seconds\": %.3f, "
                + "\"to_first_s\": %.3f, \"msgs_per_s\": %.1f, \"failures\": %d}",
            seen.get(), seen.get() >= target, draining, (from - start) / 1e9,
            seen.get() / Math.max(draining, 1e-9), failures.get());
    }
}
