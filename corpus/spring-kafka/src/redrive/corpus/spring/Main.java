package redrive.corpus.spring;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.kafka.config.KafkaListenerEndpointRegistry;
import org.springframework.kafka.listener.MessageListenerContainer;

import redrive.corpus.Capture;
import redrive.corpus.Truth;

/**
 * Spring for Apache Kafka dead letters: starts the {@link Config} context against the broker
 * in {@code -Dcorpus.bootstrap}, produces one failing record per case, waits for the dead
 * letters and writes {@code <out>/<case>.json}. Usage: {@code Main <out-dir>}.
 */
public final class Main {
    static final String FRAMEWORK = "spring-kafka";
    static final String VERSION = org.springframework.kafka.support.KafkaUtils.class.getPackage().getImplementationVersion();
    static final Duration WAIT = Duration.ofSeconds(90);

    public static void main(String[] args) throws Exception {
        Path out = Path.of(args[0]);
        String bootstrap = Config.bootstrap();
        List<String> sources = List.of("payments", "invoices", "meter-readings", "meter-readings-retained", "sensors", "orders", "accounts", "refunds", "refunds-dlt");
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            List<NewTopic> ts = new ArrayList<>();
            for (String s : sources) ts.add(new NewTopic(s, 1, (short) 1));
            admin.createTopics(ts).all().get();
        }
        try (AnnotationConfigApplicationContext ctx = new AnnotationConfigApplicationContext(Config.class)) {
            awaitAssignments(ctx.getBean(KafkaListenerEndpointRegistry.class));
            Map<String, Object> pp = Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap, ProducerConfig.ACKS_CONFIG, "all");
            try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(pp, new ByteArraySerializer(), new ByteArraySerializer())) {
                long ts = 1_796_104_800_000L; // 2026-12-01T06:40:00Z: a fixed source timestamp per case
                send(p, "payments", ts, "p-4711", "{\"payment\":4711,\"amount\":\"731.20\"}");
                send(p, "invoices", ts + 1, "inv-5", "{\"invoice\":5,\"total\":-5}");
                RecordMetadata meter = send(p, "meter-readings", ts + 2, "meter-9", new byte[] {1, 2, 3});
                RecordMetadata meterRetained = send(p, "meter-readings-retained", ts + 3, "meter-10", new byte[] {4, 5, 6});
                RecordMetadata sensor = send(p, "sensors", ts + 4, "abc".getBytes(StandardCharsets.UTF_8), "{\"t\":21.5}".getBytes(StandardCharsets.UTF_8));
                send(p, "orders", ts + 5, "o-1001", "{\"order\":\"o-1001\",\"total\":\"731.20\"}");
                send(p, "refunds", ts + 8, "r-3", "{\"refund\":\"r-3\",\"amount\":\"99.00\"}");
                send(p, "accounts", ts + 6, "acct-7".getBytes(StandardCharsets.UTF_8), null);
                send(p, "accounts", ts + 7, (byte[]) null, "{\"id\":8}".getBytes(StandardCharsets.UTF_8));

                listenerCase("listener-throws", "payments", 1, bootstrap,
                        "@KafkaListener (groupId payments-service) throws PaymentDeclinedException caused by SocketTimeoutException; "
                        + "DefaultErrorHandler(DeadLetterPublishingRecoverer, FixedBackOff(0, 2)): 1 delivery + 2 retries")
                        .absent("retry_count").write(out);
                listenerCase("listener-throws-delivery-attempt-header", "invoices", 1, bootstrap,
                        "@KafkaListener (groupId billing) throws IllegalArgumentException (no cause); ContainerProperties.deliveryAttemptHeader=true; "
                        + "DefaultErrorHandler(DeadLetterPublishingRecoverer, FixedBackOff(0, 3)): 1 delivery + 3 retries").write(out);
                deserCase("value-deserialization", "meter-readings", "metering", meter, bootstrap,
                        "value: ErrorHandlingDeserializer(LongDeserializer) fails on a 3-byte value; DeadLetterPublishingRecoverer defaults "
                        + "(retainExceptionHeader=false)").absent("retry_count").write(out);
                deserCase("value-deserialization-retained-header", "meter-readings-retained", "metering-retained", meterRetained, bootstrap,
                        "value: ErrorHandlingDeserializer(LongDeserializer) fails on a 3-byte value; DeadLetterPublishingRecoverer.setRetainExceptionHeader(true)").absent("retry_count").write(out);
                deserCase("key-deserialization", "sensors", "sensor-service", sensor, bootstrap,
                        "key: ErrorHandlingDeserializer(IntegerDeserializer) fails on a 3-byte key; DeadLetterPublishingRecoverer defaults").absent("retry_count").write(out);
                listenerCase("retryable-topic", "orders", 1, bootstrap,
                        "@RetryableTopic(attempts = 3, backOff = @BackOff(delay = 200)) on @KafkaListener (groupId order-service), which throws "
                        + "OrderRejectedException caused by IllegalStateException: orders -> retry topic -> DLT").write(out);
                listenerCase("tombstone-and-null-key", "accounts", 2, bootstrap,
                        "@KafkaListener (groupId account-service): a tombstone (null value, NullPointerException from Objects.requireNonNull) and a "
                        + "record with a null key (IllegalStateException); DefaultErrorHandler(DeadLetterPublishingRecoverer, FixedBackOff(0, 2))").absent("retry_count").write(out);
                listenerCase("dlt-reprocessed-fails-again", "refunds", "refunds-dlt", 1, bootstrap,
                        "@KafkaListener (groupId refund-service) fails 3 times -> refunds-dlt; a second @KafkaListener on refunds-dlt "
                        + "(groupId refund-dlt-replayer) fails 3 times -> refunds-dlt-dlt; DefaultErrorHandler(DeadLetterPublishingRecoverer, "
                        + "FixedBackOff(0, 2)) on both. Truth: the first source and group, the last exception, attempts over both hops")
                        .absent("retry_count").write(out);
            }
        }
    }

    static void awaitAssignments(KafkaListenerEndpointRegistry reg) {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (true) {
            boolean all = !reg.getListenerContainers().isEmpty();
            for (MessageListenerContainer c : reg.getListenerContainers()) {
                var a = c.getAssignedPartitions();
                if (a == null || a.isEmpty()) all = false;
            }
            if (all) return;
            if (System.nanoTime() > deadline) throw new IllegalStateException("listeners not assigned in time");
            sleep(200);
        }
    }

    static RecordMetadata send(KafkaProducer<byte[], byte[]> p, String topic, long ts, String key, String value) throws Exception {
        return send(p, topic, ts, key.getBytes(StandardCharsets.UTF_8), value.getBytes(StandardCharsets.UTF_8));
    }

    static RecordMetadata send(KafkaProducer<byte[], byte[]> p, String topic, long ts, String key, byte[] value) throws Exception {
        return send(p, topic, ts, key.getBytes(StandardCharsets.UTF_8), value);
    }

    static RecordMetadata send(KafkaProducer<byte[], byte[]> p, String topic, long ts, byte[] key, byte[] value) throws Exception {
        ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(topic, 0, ts, key, value);
        r.headers().add(new RecordHeader("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".getBytes(StandardCharsets.UTF_8)));
        return p.send(r).get();
    }

    /** The DLT Spring chose for {@code source} (its default destination resolver). */
    static String dltOf(String bootstrap, String source) throws Exception {
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        long deadline = System.nanoTime() + WAIT.toNanos();
        try (Admin admin = Admin.create(ap)) {
            while (true) {
                Set<String> names = admin.listTopics().names().get();
                for (String n : List.of(source + "-dlt", source + ".DLT")) if (names.contains(n)) return n;
                if (System.nanoTime() > deadline) throw new IllegalStateException("no DLT for " + source + " in " + names);
                sleep(200);
            }
        }
    }

    static Capture.Case listenerCase(String name, String source, int n, String bootstrap, String setup) throws Exception {
        return listenerCase(name, source, source, n, bootstrap, setup);
    }

    /** The dead letters of {@code lastHop}'s DLT, with the truths of records first seen on {@code source}. */
    static Capture.Case listenerCase(String name, String source, String lastHop, int n, String bootstrap, String setup) throws Exception {
        String dlt = dltOf(bootstrap, lastHop);
        List<ConsumerRecord<byte[], byte[]>> rs = Capture.read(bootstrap, dlt, n, WAIT);
        List<Truth> truths = Failures.forTopic(source);
        if (truths.size() != n) throw new IllegalStateException(source + ": " + truths.size() + " failures recorded, " + n + " expected");
        Capture.Case c = new Capture.Case(FRAMEWORK, VERSION, name, setup);
        for (int i = 0; i < n; i++) c.add(rs.get(i), truths.get(i));
        return c;
    }

    static Capture.Case deserCase(String name, String source, String group, RecordMetadata md, String bootstrap, String setup) throws Exception {
        String dlt = dltOf(bootstrap, source);
        List<ConsumerRecord<byte[], byte[]>> rs = Capture.read(bootstrap, dlt, 1, WAIT);
        Truth t = RecordingDeserializer.BY_TOPIC.get(source);
        if (t == null) throw new IllegalStateException(source + ": the deserializer never failed");
        t.sourceTopic = md.topic();
        t.sourcePartition = md.partition();
        t.sourceOffset = md.offset();
        t.sourceTimestampMs = md.timestamp();
        t.consumerGroup = group;
        Capture.Case c = new Capture.Case(FRAMEWORK, VERSION, name, setup);
        c.add(rs.get(0), t);
        return c;
    }

    static void sleep(long ms) {
        try { Thread.sleep(ms); } catch (InterruptedException e) { Thread.currentThread().interrupt(); throw new IllegalStateException(e); }
    }
}
