package redrive.corpus.connect;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.transforms.Transformation;

import redrive.corpus.Truth;

/** The application's own single message transform: rejects a negative price (and records it). */
public final class RejectNegativePrice implements Transformation<SinkRecord> {
    static final Map<String, Truth> BY_TOPIC = new ConcurrentHashMap<>();

    @Override
    public SinkRecord apply(SinkRecord r) {
        if (r.value() instanceof Map<?, ?> m && m.get("price") instanceof Number n && n.doubleValue() < 0) {
            IllegalArgumentException e = new IllegalArgumentException("price must not be negative: " + n + " (sku " + m.get("sku") + ")");
            Truth t = BY_TOPIC.computeIfAbsent(r.topic(), k -> new Truth());
            synchronized (t) {
                t.attempts++;
                t.thrown = e;
                t.sourceTopic = r.originalTopic();
                t.sourcePartition = r.originalKafkaPartition();
                t.sourceOffset = r.originalKafkaOffset();
                t.sourceTimestampMs = r.timestamp();
            }
            throw e;
        }
        return r;
    }

    @Override public ConfigDef config() { return new ConfigDef(); }
    @Override public void configure(Map<String, ?> configs) {}
    @Override public void close() {}
}
