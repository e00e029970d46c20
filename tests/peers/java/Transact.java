import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * `transact --topic T --outcome O ...`: a TransactionMQProducer sends canonical message i with user
 * property `outcome` = the i-th --outcome. Its local transaction answers commit -> COMMIT_MESSAGE,
 * rollback -> ROLLBACK_MESSAGE, and check-commit / check-rollback -> UNKNOW, so the broker must ask
 * back; the check-back then answers COMMIT_MESSAGE or ROLLBACK_MESSAGE. Prints {"event": "sent"},
 * {"event": "check"} per check-back, and leaves once every UNKNOW message was checked and --linger
 * seconds passed (rc 0), or at --timeout (rc 3).
 */
final class Transact {
    private Transact() {}

    static int run(Args args) throws Exception {
        String topic = args.required("topic");
        List<String> outcomes = args.all("outcome");
        Set<String> checked = ConcurrentHashMap.newKeySet();
        TransactionMQProducer producer = new TransactionMQProducer(args.get("group", "PID-java-tx"));
        producer.setNamesrvAddr(args.required("namesrv"));
        producer.setInstanceName("transact");
        producer.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return switch (msg.getUserProperty("outcome")) {
                    case "commit" -> LocalTransactionState.COMMIT_MESSAGE;
                    case "rollback" -> LocalTransactionState.ROLLBACK_MESSAGE;
                    default -> LocalTransactionState.UNKNOW;
                };
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                String outcome = msg.getUserProperty("outcome");
                LocalTransactionState answer = "check-rollback".equals(outcome)
                        ? LocalTransactionState.ROLLBACK_MESSAGE : LocalTransactionState.COMMIT_MESSAGE;
                Events.emit("check", Events.data("seq", msg.getUserProperty("seq"), "outcome", outcome,
                        "answer", answer.name(), "transaction_id", msg.getTransactionId()));
                checked.add(msg.getUserProperty("seq"));
                return answer;
            }
        });
        producer.start();
        try {
            String origin = args.get("origin", "javatx");
            long unknowns = 0;
            for (int i = 0; i < outcomes.size(); i++) {
                Message msg = Fields.message(origin, topic, i, 3);
                msg.putUserProperty("outcome", outcomes.get(i));
                unknowns += outcomes.get(i).startsWith("check-") ? 1 : 0;
                TransactionSendResult result = producer.sendMessageInTransaction(msg, null);
                var data = Events.sent(result);
                data.putAll(Events.data("seq", i, "outcome", outcomes.get(i),
                        "local_state", result.getLocalTransactionState().name()));
                Events.emit("sent", data);
            }
            long deadline = System.currentTimeMillis() + args.millis("timeout", 60);
            while (checked.size() < unknowns && System.currentTimeMillis() < deadline) {
                Thread.sleep(100);
            }
            Thread.sleep(args.millis("linger", 1.0));
            Events.emit("done", Events.data("checked", checked.size(), "unknowns", unknowns));
            return checked.size() >= unknowns ? 0 : 3;
        } finally {
            producer.shutdown();
        }
    }
}
