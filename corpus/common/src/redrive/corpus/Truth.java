package redrive.corpus;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Ground truth about one failure, recorded by the program in which it happened (the listener,
 * the deserializer, the converter, the handler), at the moment it happened: never read back
 * from the dead letter's headers.
 */
public final class Truth {
    public String sourceTopic;
    public Integer sourcePartition;
    public Long sourceOffset;
    public Long sourceTimestampMs;
    public String consumerGroup;
    /** How many times the record was processed (or deserialized, converted) and failed. */
    public int attempts;
    /** The exception the application's code (or the deserializer/converter) threw. */
    public Throwable thrown;
    /** What the program knows that the dead letter should let an on-call engineer see. */
    public String note;

    /** The thrown exception and its causes, outermost first: [{class, message}]. */
    public static List<Map<String, Object>> chain(Throwable t) {
        List<Map<String, Object>> out = new ArrayList<>();
        for (Throwable x = t; x != null && out.size() < 16; x = x.getCause()) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("class", x.getClass().getName());
            m.put("message", x.getMessage());
            out.add(m);
            if (x.getCause() == x) break;
        }
        return out;
    }

    public Map<String, Object> toMap() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("source_topic", sourceTopic);
        m.put("source_partition", sourcePartition);
        m.put("source_offset", sourceOffset);
        m.put("source_timestamp_ms", sourceTimestampMs);
        m.put("consumer_group", consumerGroup);
        m.put("attempts", attempts);
        m.put("exception", thrown == null ? null : chain(thrown));
        if (note != null) m.put("note", note);
        return m;
    }
}
