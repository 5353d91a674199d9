package redrive.corpus.spring;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.serialization.Deserializer;

import redrive.corpus.Truth;

/**
 * Delegates to a real Kafka deserializer and records what it threw, per topic, before the
 * exception goes on to Spring's {@code ErrorHandlingDeserializer}.
 */
public final class RecordingDeserializer<T> implements Deserializer<T> {
    static final Map<String, Truth> BY_TOPIC = new ConcurrentHashMap<>();
    private final Deserializer<T> delegate;

    public RecordingDeserializer(Deserializer<T> delegate) { this.delegate = delegate; }

    @Override public void configure(Map<String, ?> configs, boolean isKey) { delegate.configure(configs, isKey); }

    @Override public T deserialize(String topic, byte[] data) { return deserialize(topic, null, data); }

    @Override public T deserialize(String topic, Headers headers, byte[] data) {
        try {
            return headers == null ? delegate.deserialize(topic, data) : delegate.deserialize(topic, headers, data);
        } catch (RuntimeException e) {
            Truth t = BY_TOPIC.computeIfAbsent(topic, k -> new Truth());
            synchronized (t) { t.attempts++; t.thrown = e; }
            throw e;
        }
    }

    @Override public void close() { delegate.close(); }
}
