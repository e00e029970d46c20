/**
 * Interop driver for Apache RocketMQ's Java client (rocketmq-client and rocketmq-tools 5.3.3 from
 * Maven Central, unchanged), run by tests/interop against our NameServer and broker. The first
 * argument picks the role: produce, consume, litepull, transact, query, request, respond or timed
 * (see each class). Every result is one JSON line on stdout; the exit code is 0 when the role
 * finished, 3 on its timeout.
 */
public final class Interop {
    private Interop() {}

    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        int rc = switch (args.command) {
            case "produce" -> Produce.run(args);
            case "consume" -> Consume.run(args);
            case "litepull" -> LitePull.run(args);
            case "transact" -> Transact.run(args);
            case "query" -> Query.run(args);
            case "request" -> Request.request(args);
            case "respond" -> Request.respond(args);
            case "timed" -> Timed.run(args);
            default -> throw new IllegalArgumentException("unknown command " + args.command);
        };
        // The client's non-daemon threads may outlive shutdown(); the result is already printed.
        System.exit(rc);
    }
}
