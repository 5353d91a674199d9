package redrive.corpus.scst;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.function.Consumer;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.kafka.support.KafkaHeaders;
import org.springframework.messaging.Message;

import redrive.corpus.Capture;
import redrive.corpus.Truth;

/**
 * Spring Cloud Stream Kafka binder dead letters: a functional {@code Consumer} bean bound to
 * {@code scst-orders} (group {@code scst-billing}, {@code maxAttempts=3}) with the binder's
 * {@code enableDlq=true}; the function throws, the binder republishes to
 * {@code error.scst-orders.scst-billing}. Usage: {@code Main <out-dir>}.
 */
@SpringBootApplication
public class Main {
    static final Truth TRUTH = new Truth();
    static final Duration WAIT = Duration.ofSeconds(90);

    /** The application's exception. */
    static final class InvoiceRejectedException extends RuntimeException {
        InvoiceRejectedException(String m, Throwable cause) { super(m, cause); }
    }

    @Bean
    public Consumer<Message<byte[]>> process() {
        return m -> {
            RuntimeException e = new InvoiceRejectedException("invoice i-12 rejected: tax id missing",
                    new IllegalArgumentException("taxId must not be blank"));
            synchronized (TRUTH) {
                if (TRUTH.sourceTopic == null) {
                    TRUTH.sourceTopic = (String) m.getHeaders().get(KafkaHeaders.RECEIVED_TOPIC);
                    TRUTH.sourcePartition = (Integer) m.getHeaders().get(KafkaHeaders.RECEIVED_PARTITION);
                    TRUTH.sourceOffset = (Long) m.getHeaders().get(KafkaHeaders.OFFSET);
                    TRUTH.sourceTimestampMs = (Long) m.getHeaders().get(KafkaHeaders.RECEIVED_TIMESTAMP);
                    TRUTH.consumerGroup = (String) m.getHeaders().get(KafkaHeaders.GROUP_ID);
                }
                TRUTH.attempts++;
                TRUTH.thrown = e;
            }
            throw e;
        };
    }

    public static void main(String[] args) throws Exception {
        Path out = Path.of(args[0]);
        String bootstrap = System.getProperty("corpus.bootstrap", "127.0.0.1:29092");
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic("scst-orders", 1, (short) 1))).all().get();
        }
        SpringApplication app = new SpringApplication(Main.class);
        app.setDefaultProperties(Map.of(
                "spring.main.web-application-type", "none",
                "spring.main.banner-mode", "off",
                "logging.level.root", "WARN",
                "spring.cloud.function.definition", "process",
                "spring.cloud.stream.kafka.binder.brokers", bootstrap,
                "spring.cloud.stream.bindings.process-in-0.destination", "scst-orders",
                "spring.cloud.stream.bindings.process-in-0.group", "scst-billing",
                "spring.cloud.stream.bindings.process-in-0.consumer.max-attempts", "3",
                "spring.cloud.stream.bindings.process-in-0.consumer.back-off-initial-interval", "100",
                "spring.cloud.stream.kafka.bindings.process-in-0.consumer.enable-dlq", "true"));
        try (ConfigurableApplicationContext ctx = app.run()) {
            Map<String, Object> pp = Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap, ProducerConfig.ACKS_CONFIG, "all");
            try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(pp, new ByteArraySerializer(), new ByteArraySerializer())) {
                ProducerRecord<byte[], byte[]> r = new ProducerRecord<>("scst-orders", 0, 1_796_105_100_000L,
                        "i-12".getBytes(StandardCharsets.UTF_8), "{\"invoice\":\"i-12\",\"taxId\":\"\"}".getBytes(StandardCharsets.UTF_8));
                r.headers().add(new RecordHeader("traceparent", "00-9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b-1122334455667788-01".getBytes(StandardCharsets.UTF_8)));
                p.send(r).get();
            }
            List<ConsumerRecord<byte[], byte[]>> rs = Capture.read(bootstrap, "error.scst-orders.scst-billing", 1, WAIT);
            String version = org.springframework.cloud.stream.binder.kafka.KafkaMessageChannelBinder.class.getPackage().getImplementationVersion();
            Capture.Case c = new Capture.Case("spring-cloud-stream", version, "function-throws-dlq",
                    "Spring Boot 4.0.7, Spring Cloud Stream Kafka binder: functional Consumer<Message<byte[]>> bound to scst-orders, group scst-billing, "
                    + "maxAttempts=3, kafka.bindings.process-in-0.consumer.enableDlq=true (default DLQ name); the function throws "
                    + "InvoiceRejectedException caused by IllegalArgumentException").absent("retry_count");
            synchronized (TRUTH) { c.add(rs.get(0), TRUTH); }
            c.write(out);
        }
    }
}
