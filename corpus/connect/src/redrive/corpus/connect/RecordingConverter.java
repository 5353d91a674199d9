package redrive.corpus.connect;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.kafka.common.header.Headers;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.storage.Converter;

import redrive.corpus.Truth;

/**
 * A converter that delegates to a real one ({@code delegate=<class>}, the other settings passed
 * on) and records, per topic, what that converter threw and how often, before Connect's error
 * handling sees it.
 */
public final class RecordingConverter implements Converter {
    static final Map<String, Truth> BY_TOPIC = new ConcurrentHashMap<>();
    private Converter delegate;

    @Override
    public void configure(Map<String, ?> configs, boolean isKey) {
        Map<String, Object> rest = new HashMap<>(configs);
        Object cls = rest.remove("delegate");
        try {
            delegate = (Converter) Class.forName(String.valueOf(cls)).getDeclaredConstructor().newInstance();
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("delegate converter " + cls, e);
        }
        delegate.configure(rest, isKey);
    }

    @Override public byte[] fromConnectData(String topic, Schema schema, Object value) { return delegate.fromConnectData(topic, schema, value); }

    @Override public byte[] fromConnectData(String topic, Headers headers, Schema schema, Object value) { return delegate.fromConnectData(topic, headers, schema, value); }

    @Override public SchemaAndValue toConnectData(String topic, byte[] value) { return toConnectData(topic, null, value); }

    @Override
    public SchemaAndValue toConnectData(String topic, Headers headers, byte[] value) {
        try {
            return headers == null ? delegate.toConnectData(topic, value) : delegate.toConnectData(topic, headers, value);
        } catch (RuntimeException e) {
            Truth t = BY_TOPIC.computeIfAbsent(topic, k -> new Truth());
            synchronized (t) { t.attempts++; t.thrown = e; }
            throw e;
        }
    }
}
