package redrive.corpus.connect;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.AppInfoParser;
import org.apache.kafka.connect.cli.ConnectStandalone;
import org.apache.kafka.connect.runtime.Connect;
import org.apache.kafka.connect.runtime.rest.entities.ConnectorInfo;
import org.apache.kafka.connect.runtime.standalone.StandaloneHerder;
import org.apache.kafka.connect.util.FutureCallback;

import redrive.corpus.Capture;
import redrive.corpus.Truth;

/**
 * Kafka Connect sink dead letters: an in-process standalone worker runs
 * {@code FileStreamSinkConnector}s with {@code errors.tolerance=all} and the DLQ with context
 * headers; one connector per case fails in the key converter, the value converter or a
 * transform. Usage: {@code Main <out-dir>}.
 */
public final class Main {
    static final String FRAMEWORK = "kafka-connect";
    static final Duration WAIT = Duration.ofSeconds(90);

    public static void main(String[] args) throws Exception {
        Path out = Path.of(args[0]);
        String bootstrap = System.getProperty("corpus.bootstrap", "127.0.0.1:29092");
        Path work = Path.of(System.getProperty("corpus.work", "/tmp/corpus-connect"));
        Files.createDirectories(work);
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic("inventory", 1, (short) 1), new NewTopic("shipments", 1, (short) 1),
                    new NewTopic("prices", 1, (short) 1))).all().get();
        }
        Map<String, Object> pp = Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap, ProducerConfig.ACKS_CONFIG, "all");
        long ts = 1_796_104_900_000L;
        RecordMetadata inventory, shipment;
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(pp, new ByteArraySerializer(), new ByteArraySerializer())) {
            inventory = send(p, "inventory", ts, "sku-1", "{\"sku\":\"sku-1\",\"qty\":");
            shipment = send(p, "shipments", ts + 1, "s 2", "{\"shipment\":2}");
            send(p, "prices", ts + 2, "\"sku-3\"", "{\"sku\":\"sku-3\",\"price\":-3.5}");
        }

        Map<String, String> worker = new HashMap<>();
        worker.put("bootstrap.servers", bootstrap);
        worker.put("key.converter", "org.apache.kafka.connect.storage.StringConverter");
        worker.put("value.converter", "org.apache.kafka.connect.json.JsonConverter");
        worker.put("value.converter.schemas.enable", "false");
        worker.put("offset.storage.file.filename", work.resolve("connect.offsets").toString());
        worker.put("offset.flush.interval.ms", "500");
        worker.put("listeners", "http://127.0.0.1:0");
        worker.put("plugin.discovery", "only_scan");
        Connect<StandaloneHerder> connect = new ConnectStandalone().startConnect(worker);
        try {
            Map<String, String> dlq = Map.of(
                    "errors.tolerance", "all",
                    "errors.deadletterqueue.context.headers.enable", "true",
                    "errors.deadletterqueue.topic.replication.factor", "1");
            start(connect, "inventory-sink", dlq, Map.of(
                    "topics", "inventory", "errors.deadletterqueue.topic.name", "dlq-inventory",
                    "value.converter", RecordingConverter.class.getName(),
                    "value.converter.delegate", "org.apache.kafka.connect.json.JsonConverter",
                    "value.converter.schemas.enable", "false",
                    "file", work.resolve("inventory.txt").toString()));
            start(connect, "shipments-sink", dlq, Map.of(
                    "topics", "shipments", "errors.deadletterqueue.topic.name", "dlq-shipments",
                    "key.converter", RecordingConverter.class.getName(),
                    "key.converter.delegate", "org.apache.kafka.connect.json.JsonConverter",
                    "key.converter.schemas.enable", "false",
                    "file", work.resolve("shipments.txt").toString()));
            start(connect, "prices-sink", dlq, Map.of(
                    "topics", "prices", "errors.deadletterqueue.topic.name", "dlq-prices",
                    "transforms", "reject", "transforms.reject.type", RejectNegativePrice.class.getName(),
                    "file", work.resolve("prices.txt").toString()));

            converterCase(bootstrap, "value-converter", "inventory", "dlq-inventory", "inventory-sink", inventory,
                    "FileStreamSinkConnector inventory-sink, value.converter=JsonConverter (schemas.enable=false) fails on truncated JSON; "
                    + "errors.tolerance=all, errors.deadletterqueue.context.headers.enable=true, errors.retry.timeout=0 (default)").write(out);
            converterCase(bootstrap, "key-converter", "shipments", "dlq-shipments", "shipments-sink", shipment,
                    "FileStreamSinkConnector shipments-sink, key.converter=JsonConverter (schemas.enable=false) fails on the key `s 2`; "
                    + "errors.tolerance=all, context headers on").write(out);
            Truth t = RejectNegativePrice.BY_TOPIC.get("prices");
            List<ConsumerRecord<byte[], byte[]>> rs = Capture.read(bootstrap, "dlq-prices", 1, WAIT);
            t.consumerGroup = groupOf(bootstrap, "prices");
            Capture.Case c = new Capture.Case(FRAMEWORK, AppInfoParser.getVersion(), "transformation",
                    "FileStreamSinkConnector prices-sink with the application's SMT RejectNegativePrice, which throws IllegalArgumentException; "
                    + "errors.tolerance=all, context headers on").absent("retry_count");
            c.add(rs.get(0), t);
            c.write(out);
        } finally {
            connect.stop();
        }
    }

    static void start(Connect<StandaloneHerder> connect, String name, Map<String, String> dlq, Map<String, String> extra) throws Exception {
        Map<String, String> cfg = new HashMap<>(dlq);
        cfg.putAll(extra);
        cfg.put("name", name);
        cfg.put("connector.class", "org.apache.kafka.connect.file.FileStreamSinkConnector");
        cfg.put("tasks.max", "1");
        FutureCallback<org.apache.kafka.connect.runtime.Herder.Created<ConnectorInfo>> cb = new FutureCallback<>();
        connect.herder().putConnectorConfig(name, cfg, false, cb);
        cb.get(60, TimeUnit.SECONDS);
    }

    static Capture.Case converterCase(String bootstrap, String name, String topic, String dlq, String connector, RecordMetadata md, String setup) throws Exception {
        List<ConsumerRecord<byte[], byte[]>> rs = Capture.read(bootstrap, dlq, 1, WAIT);
        Truth t = RecordingConverter.BY_TOPIC.get(topic);
        if (t == null) throw new IllegalStateException(topic + ": the converter never failed");
        t.sourceTopic = md.topic();
        t.sourcePartition = md.partition();
        t.sourceOffset = md.offset();
        t.sourceTimestampMs = md.timestamp();
        t.consumerGroup = groupOf(bootstrap, topic);
        Capture.Case c = new Capture.Case(FRAMEWORK, AppInfoParser.getVersion(), name, setup).absent("retry_count");
        c.add(rs.get(0), t);
        return c;
    }

    /** The consumer group that committed offsets on {@code topic}: the sink task's, as the broker knows it. */
    static String groupOf(String bootstrap, String topic) throws Exception {
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        long deadline = System.nanoTime() + WAIT.toNanos();
        try (Admin admin = Admin.create(ap)) {
            while (System.nanoTime() < deadline) {
                for (ConsumerGroupListing g : admin.listConsumerGroups().all().get()) {
                    Map<TopicPartition, OffsetAndMetadata> offs = admin.listConsumerGroupOffsets(g.groupId()).partitionsToOffsetAndMetadata().get();
                    if (offs.keySet().stream().anyMatch(tp -> tp.topic().equals(topic))) return g.groupId();
                }
                Thread.sleep(300);
            }
        }
        throw new IllegalStateException("no group committed offsets on " + topic);
    }

    static RecordMetadata send(KafkaProducer<byte[], byte[]> p, String topic, long ts, String key, String value) throws Exception {
        ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(topic, 0, ts, key.getBytes(StandardCharsets.UTF_8), value.getBytes(StandardCharsets.UTF_8));
        r.headers().add(new RecordHeader("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".getBytes(StandardCharsets.UTF_8)));
        return p.send(r).get();
    }
}
