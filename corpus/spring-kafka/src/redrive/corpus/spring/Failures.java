package redrive.corpus.spring;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.springframework.kafka.support.KafkaUtils;

import redrive.corpus.Truth;

/**
 * The application side's record of every failure: who failed, where the record first came
 * from, with what exception, how often. Filled in by the listeners and the recording
 * deserializer at the moment of failure, never from a dead letter's headers.
 */
public final class Failures {
    private Failures() {}

    /** Truth per logical message (key|value, stable across retry-topic hops), in first-failure order. */
    static final Map<String, Truth> BY_MESSAGE = new ConcurrentHashMap<>();
    static final List<String> ORDER = java.util.Collections.synchronizedList(new ArrayList<>());

    static String id(Object key, Object value) {
        return text(key) + "|" + text(value);
    }

    static String text(Object o) {
        if (o == null) return "<null>";
        if (o instanceof byte[] b) return new String(b, StandardCharsets.UTF_8);
        return o.toString();
    }

    /** Called by a listener just before it throws {@code e} for {@code r}. */
    static RuntimeException listenerFailed(ConsumerRecord<?, ?> r, String originalTopic, RuntimeException e) {
        String id = id(r.key(), r.value());
        Truth t = BY_MESSAGE.computeIfAbsent(id, k -> { ORDER.add(k); return new Truth(); });
        synchronized (t) {
            if (r.topic().equals(originalTopic) && t.sourceTopic == null) {
                t.sourceTopic = r.topic();
                t.sourcePartition = r.partition();
                t.sourceOffset = r.offset();
                t.sourceTimestampMs = r.timestamp();
                t.consumerGroup = KafkaUtils.getConsumerGroupId();
            }
            t.attempts++;
            t.thrown = e;
        }
        return e;
    }

    /** Truths for a source topic, in first-failure order. */
    static List<Truth> forTopic(String topic) {
        List<Truth> out = new ArrayList<>();
        synchronized (ORDER) {
            for (String id : ORDER) {
                Truth t = BY_MESSAGE.get(id);
                if (topic.equals(t.sourceTopic)) out.add(t);
            }
        }
        return out;
    }
}
