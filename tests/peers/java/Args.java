import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** `--name value` options (repeatable); a `--name` followed by another option or nothing is a flag. */
final class Args {
    final String command;
    private final Map<String, List<String>> options = new HashMap<>();

    Args(String[] argv) {
        if (argv.length == 0) {
            throw new IllegalArgumentException("usage: Interop COMMAND [--name value ...]");
        }
        command = argv[0];
        for (int i = 1; i < argv.length; i++) {
            if (!argv[i].startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument " + argv[i]);
            }
            String name = argv[i].substring(2);
            String value = "true";
            if (i + 1 < argv.length && !argv[i + 1].startsWith("--")) {
                value = argv[++i];
            }
            options.computeIfAbsent(name, k -> new ArrayList<>()).add(value);
        }
    }

    /** `--access-key AK --secret-key SK`: an AclClientRPCHook signing every request (ACL), else null. */
    org.apache.rocketmq.remoting.RPCHook aclHook() {
        String accessKey = get("access-key", null);
        if (accessKey == null) {
            return null;
        }
        return new org.apache.rocketmq.acl.common.AclClientRPCHook(
            new org.apache.rocketmq.acl.common.SessionCredentials(accessKey, required("secret-key")));
    }

    String get(String name, String fallback) {
        List<String> values = options.get(name);
        return values == null ? fallback : values.get(values.size() - 1);
    }

    String required(String name) {
        String value = get(name, null);
        if (value == null) {
            throw new IllegalArgumentException("--" + name + " is required for " + command);
        }
        return value;
    }

    int integer(String name, int fallback) {
        return Integer.parseInt(get(name, Integer.toString(fallback)));
    }

    boolean flag(String name) {
        return Boolean.parseBoolean(get(name, "false"));
    }

    List<String> all(String name) {
        return options.getOrDefault(name, List.of());
    }

    /** Milliseconds from a seconds option such as `--timeout 30` or `--linger 0.5`. */
    long millis(String name, double fallbackSeconds) {
        return Math.round(Double.parseDouble(get(name, Double.toString(fallbackSeconds))) * 1000);
    }
}
