import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.config.ConfigDef;

/**
 * Prints the Java producer's ConfigDef (ProducerConfig's private static
 * CONFIG, which every 2.x and 3.x release has) as kdiag's catalog rows:
 * name, type, default, validator, importance, tab-separated, sorted by name.
 * Defaults and validators are written as rules/data/java-producer-configs.tsv
 * writes them ("(none - required)", null, "" for an empty string, [] for an
 * empty list; atLeast(0), between(0, 5), in(a, b),
 * CaseInsensitiveValidString.in(a, b), NonEmptyString), so that one parser
 * reads both. Run by rules/upstream/java-configs.sh.
 */
public class ConfigDump {
    public static void main(String[] args) throws Exception {
        Field f = ProducerConfig.class.getDeclaredField("CONFIG");
        f.setAccessible(true);
        ConfigDef def = (ConfigDef) f.get(null);
        Map<String, ConfigDef.ConfigKey> keys = new TreeMap<>(def.configKeys());
        for (ConfigDef.ConfigKey k : keys.values()) {
            System.out.println(k.name + "\t" + k.type + "\t" + dflt(k) + "\t" + validator(k.validator) + "\t" + k.importance);
        }
    }

    static String dflt(ConfigDef.ConfigKey k) {
        Object d = k.defaultValue;
        if (d == ConfigDef.NO_DEFAULT_VALUE) return "(none - required)";
        if (d == null) return "null";
        if (k.type == ConfigDef.Type.PASSWORD) return "[hidden]";
        if (d instanceof Class) return ((Class<?>) d).getName();
        if (d instanceof List) {
            List<String> parts = new ArrayList<>();
            for (Object o : (List<?>) d) parts.add(String.valueOf(o));
            return parts.isEmpty() ? "[]" : String.join(",", parts);
        }
        String s = String.valueOf(d);
        return s.isEmpty() ? "\"\"" : s;
    }

    static String validator(ConfigDef.Validator v) {
        if (v == null) return "-";
        String name = v.getClass().getSimpleName();
        String s = v.toString();
        switch (name) {
            case "Range": {
                // "[min,...]", "[min,...,max]", "[...,max]"
                String body = s.substring(1, s.length() - 1);
                String[] p = body.split(",\\.\\.\\.,?", -1);
                String min = p[0], max = p.length > 1 ? p[1] : "";
                if (!min.isEmpty() && !max.isEmpty()) return "between(" + min + ", " + max + ")";
                if (!min.isEmpty()) return "atLeast(" + min + ")";
                return s;
            }
            case "ValidString":
                return "in(" + s.substring(1, s.length() - 1) + ")";
            case "CaseInsensitiveValidString":
                return "CaseInsensitiveValidString.in(" + s.substring(s.indexOf('[') + 1, s.lastIndexOf(']')) + ")";
            case "NonEmptyString":
                return "NonEmptyString";
            default:
                return name.isEmpty() ? s : name;
        }
    }
}
