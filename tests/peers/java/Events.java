import java.io.FileOutputStream;
import java.io.FileDescriptor;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.MessageExt;

/** One JSON line per event on stdout, in UTF-8 whatever the locale; the Python tests parse them. */
final class Events {
    private static final PrintStream OUT =
            new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);

    private Events() {}

    static synchronized void emit(String event, Map<String, Object> data) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("event", event);
        line.putAll(data);
        OUT.println(Json.write(line));
    }

    static Map<String, Object> data(Object... pairs) {
        Map<String, Object> map = new LinkedHashMap<>();
        for (int i = 0; i + 1 < pairs.length; i += 2) {
            map.put((String) pairs[i], pairs[i + 1]);
        }
        return map;
    }

    /** A delivery in the shape of interop_harness.Record.from_event. */
    static Map<String, Object> record(MessageExt msg) {
        return data(
                "topic", msg.getTopic(),
                "tags", msg.getTags(),
                "keys", msg.getKeys(),
                "body_b64", Base64.getEncoder().encodeToString(msg.getBody()),
                "id", msg.getMsgId(),
                "queue_id", msg.getQueueId(),
                "queue_offset", msg.getQueueOffset(),
                "commit_log_offset", msg.getCommitLogOffset(),
                "reconsume_times", msg.getReconsumeTimes(),
                "props", new LinkedHashMap<>(msg.getProperties()),
                "born_ts", msg.getBornTimestamp(),
                "store_ts", msg.getStoreTimestamp(),
                "receive_ts", System.currentTimeMillis());
    }

    static Map<String, Object> sent(SendResult result) {
        return data(
                "status", result.getSendStatus().name(),
                "msg_id", result.getMsgId(),
                "offset_msg_id", result.getOffsetMsgId(),
                "queue_id", result.getMessageQueue().getQueueId(),
                "queue_offset", result.getQueueOffset());
    }
}
