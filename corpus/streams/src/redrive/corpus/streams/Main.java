package redrive.corpus.streams;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;

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
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.AppInfoParser;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.LogAndContinueExceptionHandler;
import org.apache.kafka.streams.errors.LogAndContinueProcessingExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;

import redrive.corpus.Capture;
import redrive.corpus.Truth;

/**
 * Kafka Streams built-in dead letters (KIP-1034, {@code errors.dead.letter.queue.topic.name},
 * Apache Kafka 4.2+): one application fails to deserialize a value
 * ({@code LogAndContinueExceptionHandler}), another throws in a processor
 * ({@code LogAndContinueProcessingExceptionHandler}). Usage: {@code Main <out-dir>}.
 */
public final class Main {
    static final String FRAMEWORK = "kafka-streams";
    static final Duration WAIT = Duration.ofSeconds(90);
    static final Map<String, Truth> TRUTH = new ConcurrentHashMap<>();

    /** The application's processor: enriching an order fails with a domain exception. */
    static final class Enricher implements FixedKeyProcessor<String, String, String> {
        private FixedKeyProcessorContext<String, String> ctx;

        @Override public void init(FixedKeyProcessorContext<String, String> ctx) { this.ctx = ctx; }

        @Override
        public void process(FixedKeyRecord<String, String> r) {
            RuntimeException e = new IllegalStateException("no customer for order " + r.key(),
                    new java.util.NoSuchElementException("customer c-77 not in the customer table"));
            Truth t = TRUTH.computeIfAbsent("orders-in", k -> new Truth());
            synchronized (t) {
                var md = ctx.recordMetadata().orElseThrow();
                t.sourceTopic = md.topic();
                t.sourcePartition = md.partition();
                t.sourceOffset = md.offset();
                t.sourceTimestampMs = r.timestamp();
                t.attempts++;
                t.thrown = e;
            }
            throw e;
        }
    }

    /** Delegates to Kafka's LongDeserializer and records what it threw. */
    static final class RecordingLong implements Deserializer<Long> {
        private final LongDeserializer delegate = new LongDeserializer();

        @Override
        public Long deserialize(String topic, byte[] data) {
            try {
                return delegate.deserialize(topic, data);
            } catch (RuntimeException e) {
                Truth t = TRUTH.computeIfAbsent(topic, k -> new Truth());
                synchronized (t) { t.attempts++; t.thrown = e; }
                throw e;
            }
        }
    }

    public static void main(String[] args) throws Exception {
        Path out = Path.of(args[0]);
        String bootstrap = System.getProperty("corpus.bootstrap", "127.0.0.1:29092");
        String work = System.getProperty("corpus.work", "/tmp/corpus-streams");
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic("readings", 1, (short) 1), new NewTopic("orders-in", 1, (short) 1),
                    new NewTopic("meter-aggregator-dlq", 1, (short) 1), new NewTopic("order-enricher-dlq", 1, (short) 1),
                    new NewTopic("orders-enriched", 1, (short) 1), new NewTopic("prices-raw", 1, (short) 1),
                    new NewTopic("prices-normalized", 1, (short) 1), new NewTopic("price-normalizer-dead-letters", 1, (short) 1))).all().get();
        }

        StreamsBuilder b1 = new StreamsBuilder();
        Serde<Long> longs = Serdes.serdeFrom(Serdes.Long().serializer(), new RecordingLong());
        b1.stream("readings", Consumed.with(Serdes.String(), longs)).foreach((k, v) -> { });
        Properties p1 = props(bootstrap, work, "meter-aggregator");
        p1.put(StreamsConfig.DESERIALIZATION_EXCEPTION_HANDLER_CLASS_CONFIG, LogAndContinueExceptionHandler.class.getName());
        p1.put(StreamsConfig.ERRORS_DEAD_LETTER_QUEUE_TOPIC_NAME_CONFIG, "meter-aggregator-dlq");

        StreamsBuilder b2 = new StreamsBuilder();
        b2.stream("orders-in", Consumed.with(Serdes.String(), Serdes.String())).processValues(Enricher::new)
                .to("orders-enriched", org.apache.kafka.streams.kstream.Produced.with(Serdes.String(), Serdes.String()));
        Properties p2 = props(bootstrap, work, "order-enricher");
        p2.put(StreamsConfig.PROCESSING_EXCEPTION_HANDLER_CLASS_CONFIG, LogAndContinueProcessingExceptionHandler.class.getName());
        p2.put(StreamsConfig.ERRORS_DEAD_LETTER_QUEUE_TOPIC_NAME_CONFIG, "order-enricher-dlq");

        // bakdata kafka-error-handling: captureErrors around the application's mapper, the errors
        // to a dead-letter topic through ErrorHeaderProcessor (its header flavour).
        StreamsBuilder b3 = new StreamsBuilder();
        var processed = b3.stream("prices-raw", Consumed.with(Serdes.String(), Serdes.String()))
                .mapValues(com.bakdata.kafka.ErrorCapturingValueMapper.captureErrors(Main::parsePrice));
        processed.flatMapValues(com.bakdata.kafka.ProcessedValue::getValues)
                .to("prices-normalized", org.apache.kafka.streams.kstream.Produced.with(Serdes.String(), Serdes.Double()));
        processed.flatMapValues(com.bakdata.kafka.ProcessedValue::getErrors)
                .processValues(com.bakdata.kafka.ErrorHeaderProcessor.<String, String>withErrorHeaders("price could not be parsed"))
                .to("price-normalizer-dead-letters", org.apache.kafka.streams.kstream.Produced.with(Serdes.String(), Serdes.String()));
        Properties p3 = props(bootstrap, work, "price-normalizer");

        Map<String, Object> pp = Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap, ProducerConfig.ACKS_CONFIG, "all");
        long ts = 1_796_105_000_000L;
        RecordMetadata reading, price;
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(pp, new ByteArraySerializer(), new ByteArraySerializer())) {
            reading = send(p, "readings", ts, "meter-12", new byte[] {7, 7, 7});
            price = send(p, "prices-raw", ts + 2, "sku-4", "12,50 EUR".getBytes(StandardCharsets.UTF_8));
            send(p, "orders-in", ts + 1, "o-77", "{\"order\":\"o-77\",\"customer\":\"c-77\"}".getBytes(StandardCharsets.UTF_8));
        }
        try (KafkaStreams s1 = new KafkaStreams(b1.build(), p1); KafkaStreams s2 = new KafkaStreams(b2.build(), p2);
                KafkaStreams s3 = new KafkaStreams(b3.build(), p3)) {
            for (KafkaStreams s : List.of(s1, s2, s3)) {
                s.setUncaughtExceptionHandler(e -> {
                    e.printStackTrace();
                    return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
                });
            }
            s1.start();
            s2.start();
            s3.start();
            List<ConsumerRecord<byte[], byte[]>> r1 = Capture.read(bootstrap, "meter-aggregator-dlq", 1, WAIT);
            Truth t1 = TRUTH.get("readings");
            t1.sourceTopic = reading.topic();
            t1.sourcePartition = reading.partition();
            t1.sourceOffset = reading.offset();
            t1.sourceTimestampMs = reading.timestamp();
            t1.consumerGroup = "meter-aggregator";
            Capture.Case c1 = new Capture.Case(FRAMEWORK, AppInfoParser.getVersion(), "deserialization",
                    "application.id meter-aggregator, value Serde with LongDeserializer fails on a 3-byte value; "
                    + "deserialization.exception.handler=LogAndContinueExceptionHandler, errors.dead.letter.queue.topic.name=meter-aggregator-dlq")
                    .absent("consumer_group", "retry_count");
            c1.add(r1.get(0), t1);
            c1.write(out);

            List<ConsumerRecord<byte[], byte[]>> r2 = Capture.read(bootstrap, "order-enricher-dlq", 1, WAIT);
            Truth t2 = TRUTH.get("orders-in");
            t2.consumerGroup = "order-enricher";
            Capture.Case c2 = new Capture.Case(FRAMEWORK, AppInfoParser.getVersion(), "processing",
                    "application.id order-enricher, a FixedKeyProcessor throws IllegalStateException caused by NoSuchElementException; "
                    + "processing.exception.handler=LogAndContinueProcessingExceptionHandler, errors.dead.letter.queue.topic.name=order-enricher-dlq")
                    .absent("consumer_group", "retry_count");
            c2.add(r2.get(0), t2);
            c2.write(out);

            List<ConsumerRecord<byte[], byte[]>> r3 = Capture.read(bootstrap, "price-normalizer-dead-letters", 1, WAIT);
            Truth t3 = TRUTH.get("prices-raw");
            t3.sourceTopic = price.topic();
            t3.sourcePartition = price.partition();
            t3.sourceOffset = price.offset();
            t3.sourceTimestampMs = price.timestamp();
            t3.consumerGroup = "price-normalizer";
            Capture.Case c3 = new Capture.Case("bakdata-kafka-error-handling", BAKDATA_VERSION, "error-headers",
                    "Kafka Streams " + AppInfoParser.getVersion() + ", application.id price-normalizer: mapValues(captureErrors(parsePrice)), "
                    + "errors -> processValues(ErrorHeaderProcessor.withErrorHeaders(\"price could not be parsed\")) -> price-normalizer-dead-letters; "
                    + "parsePrice throws NumberFormatException from Double.parseDouble")
                    .absent("consumer_group", "retry_count");
            c3.add(r3.get(0), t3);
            c3.write(out);
        }
    }

    static final String BAKDATA_VERSION = "2.1.2";

    /** The application's mapper: a price as text to a number. */
    static Double parsePrice(String v) {
        try {
            return Double.parseDouble(v);
        } catch (RuntimeException e) {
            Truth t = TRUTH.computeIfAbsent("prices-raw", k -> new Truth());
            synchronized (t) { t.attempts++; t.thrown = e; }
            throw e;
        }
    }

    static Properties props(String bootstrap, String work, String app) {
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, app);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.STATE_DIR_CONFIG, work + "/" + app);
        p.put("consumer.auto.offset.reset", "earliest");
        return p;
    }

    static RecordMetadata send(KafkaProducer<byte[], byte[]> p, String topic, long ts, String key, byte[] value) throws Exception {
        ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(topic, 0, ts, key.getBytes(StandardCharsets.UTF_8), value);
        r.headers().add(new RecordHeader("traceparent", "00-5c2a6f0d0a8e4b3c9d1e2f3a4b5c6d7e-1a2b3c4d5e6f7a8b-01".getBytes(StandardCharsets.UTF_8)));
        return p.send(r).get();
    }
}
