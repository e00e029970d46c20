import java.util.List;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * `litepull --group G --topic T --expect N`: a DefaultLitePullConsumer (subscribe mode, automatic
 * offset commits) polls from the first offset and prints {"event": "msg"} per message; it leaves
 * once N arrived and --linger more seconds of polls brought nothing new (rc 0), or at --timeout (rc 3).
 */
final class LitePull {
    private LitePull() {}

    static int run(Args args) throws Exception {
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(args.required("group"));
        consumer.setNamesrvAddr(args.required("namesrv"));
        consumer.setInstanceName("litepull");
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(args.required("topic"), args.get("expr", "*"));
        consumer.start();
        try {
            int expect = args.integer("expect", 1);
            long deadline = System.currentTimeMillis() + args.millis("timeout", 60);
            int got = 0;
            while (got < expect && System.currentTimeMillis() < deadline) {
                got += print(consumer.poll(500));
            }
            long lingerEnd = System.currentTimeMillis() + args.millis("linger", 1.0);
            while (System.currentTimeMillis() < lingerEnd) {
                got += print(consumer.poll(200));
            }
            Events.emit("done", Events.data("count", got, "complete", got >= expect));
            return got >= expect ? 0 : 3;
        } finally {
            consumer.shutdown();
        }
    }

    private static int print(List<MessageExt> msgs) {
        for (MessageExt msg : msgs) {
            Events.emit("msg", Events.record(msg));
        }
        return msgs.size();
    }
}
