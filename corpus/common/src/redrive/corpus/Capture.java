package redrive.corpus;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.stream.Collectors;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Reads dead letters back from a DLQ topic with a plain {@link KafkaConsumer} (bytes in, bytes
 * out: not redrive's decoder), and writes one case file of the corpus: each DLQ record's
 * coordinates, timestamp, key, value and headers (ordered, base64, null kept) beside the
 * ground truth its producing program recorded.
 */
public final class Capture {
    private Capture() {}

    /** Waits (up to {@code timeout}) until {@code topic} holds {@code expected} records; returns them in offset order. */
    public static List<ConsumerRecord<byte[], byte[]>> read(String bootstrap, String topic, int expected, Duration timeout) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, "corpus-capture-" + UUID.randomUUID());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        long deadline = System.nanoTime() + timeout.toNanos();
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            List<TopicPartition> tps = new ArrayList<>();
            while (tps.isEmpty()) {
                var infos = c.partitionsFor(topic, Duration.ofSeconds(5));
                if (infos != null) infos.forEach(i -> tps.add(new TopicPartition(i.topic(), i.partition())));
                if (tps.isEmpty()) {
                    if (System.nanoTime() > deadline) throw new IllegalStateException("topic " + topic + " never appeared");
                    sleep(200);
                }
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            while (out.size() < expected) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException(topic + ": " + out.size() + " of " + expected + " dead letters before the deadline");
                }
                c.poll(Duration.ofMillis(300)).forEach(out::add);
            }
            // Anything more than expected is a surprise worth failing on.
            c.poll(Duration.ofMillis(1500)).forEach(out::add);
        }
        if (out.size() != expected) throw new IllegalStateException(topic + ": " + out.size() + " dead letters, expected " + expected);
        out.sort((a, b) -> a.partition() != b.partition() ? Integer.compare(a.partition(), b.partition()) : Long.compare(a.offset(), b.offset()));
        return out;
    }

    static void sleep(long ms) {
        try { Thread.sleep(ms); } catch (InterruptedException e) { Thread.currentThread().interrupt(); throw new IllegalStateException(e); }
    }

    static String b64(byte[] b) { return b == null ? null : Base64.getEncoder().encodeToString(b); }

    /** One DLQ record as JSON: exactly what the topic holds. */
    public static Map<String, Object> record(ConsumerRecord<byte[], byte[]> r) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("dlq_topic", r.topic());
        m.put("dlq_partition", r.partition());
        m.put("dlq_offset", r.offset());
        m.put("timestamp_ms", r.timestamp() < 0 ? null : r.timestamp());
        m.put("timestamp_type", r.timestampType().name);
        m.put("key_b64", b64(r.key()));
        m.put("value_b64", b64(r.value()));
        List<Map<String, Object>> hs = new ArrayList<>();
        for (Header h : r.headers()) {
            Map<String, Object> hm = new LinkedHashMap<>();
            hm.put("name", h.key());
            hm.put("value_b64", b64(h.value()));
            hs.add(hm);
        }
        m.put("headers", hs);
        return m;
    }

    /** A case: framework, version, what was set up, and each dead letter with its truth. */
    public static final class Case {
        public final String framework;
        public final String version;
        public final String name;
        public final String setup;
        public final List<Map<String, Object>> records = new ArrayList<>();
        /** Normalised fields the framework does not write for this case (the test expects them empty). */
        public final List<String> notInHeaders = new ArrayList<>();

        public Case(String framework, String version, String name, String setup) {
            this.framework = framework;
            this.version = version;
            this.name = name;
            this.setup = setup;
        }

        public Case absent(String... fields) { notInHeaders.addAll(List.of(fields)); return this; }

        public void add(ConsumerRecord<byte[], byte[]> dlq, Truth truth) {
            Map<String, Object> m = record(dlq);
            m.put("truth", truth.toMap());
            records.add(m);
        }

        /** Writes {@code <dir>/<name>.json}. */
        public void write(Path dir) throws Exception {
            Files.createDirectories(dir);
            Map<String, Object> doc = new LinkedHashMap<>();
            doc.put("framework", framework);
            doc.put("framework_version", version);
            doc.put("case", name);
            doc.put("setup", setup);
            doc.put("not_in_headers", notInHeaders);
            doc.put("records", records);
            Files.writeString(dir.resolve(name + ".json"), Json.write(doc), StandardCharsets.UTF_8);
            System.out.println("corpus: wrote " + dir.resolve(name + ".json") + " (" + records.size() + " dead letter(s))");
        }
    }

    public static String describe(List<ConsumerRecord<byte[], byte[]>> rs) {
        return rs.stream().map(r -> r.topic() + "/" + r.partition() + "@" + r.offset()).collect(Collectors.joining(", "));
    }
}
