import java.nio.charset.StandardCharsets;
import org.apache.rocketmq.common.message.Message;

/**
 * Message i of a run: must stay identical to `fields` in tests/interop/interop_harness.py (and the
 * py/js drivers), so a test compares what arrived with what was meant, field by field.
 */
final class Fields {
    private Fields() {}

    static Message message(String origin, String topic, int i, int shards) {
        String unit = "héllo wörld 世界 🚀 " + origin + " #" + i;
        // Every fifth message is ~12 KiB: above the 4 KiB where clients compress (sysFlag bit 0).
        String body = unit.repeat(i % 5 == 4 ? 400 : 1);
        Message msg = new Message(topic, "tag" + (i % 2), "key-" + origin + "-" + i,
                body.getBytes(StandardCharsets.UTF_8));
        msg.putUserProperty("color", "blue");
        msg.putUserProperty("city", "Zürich");
        msg.putUserProperty("seq", Integer.toString(i));
        msg.putUserProperty("shard", Integer.toString(i % shards));
        msg.putUserProperty("origin", origin);
        return msg;
    }
}
