//! One test per dead-letter convention (docs/conventions.md): records with the
//! framework's exact header names and encodings go to a fresh DLQ topic on the real broker,
//! `ingest::run` stores them in a fresh SQLite and a fresh PostgreSQL store, and the test checks
//! the normalised fields and that key, value and headers came back byte for byte.

use redrive_core::model::{Convention, DeadLetter};
use redrive_testkit::ingest::{assert_stored_exactly, ingest_all};
use redrive_testkit::{create_topic, produce, unique, Backend, TestRecord};

/// Original record time used in the headers: 2024-06-10T06:13:20.123Z.
const ORIGINAL_TS: i64 = 1_718_000_000_123;
/// The DLQ record's own timestamp.
const DLQ_TS: i64 = 1_796_000_000_000;

fn h(name: &str, value: &[u8]) -> (String, Option<Vec<u8>>) {
    (name.to_string(), Some(value.to_vec()))
}

fn null(name: &str) -> (String, Option<Vec<u8>>) {
    (name.to_string(), None)
}

fn record(key: &str, value: &str, headers: Vec<(String, Option<Vec<u8>>)>) -> TestRecord {
    TestRecord {
        key: Some(key.as_bytes().to_vec()),
        value: Some(value.as_bytes().to_vec()),
        headers,
        partition: Some(0),
        timestamp_ms: Some(DLQ_TS),
    }
}

/// Java's `BigInteger.toByteArray()` for a non-negative value: minimal big-endian two's
/// complement (a leading 0x00 only when the top bit would read as a sign).
fn big_integer(v: i64) -> Vec<u8> {
    let bytes = v.to_be_bytes();
    let mut start = bytes.iter().position(|b| *b != 0).unwrap_or(7);
    if bytes[start] & 0x80 != 0 {
        start -= 1;
    }
    bytes[start..].to_vec()
}

/// Produces `records` to a fresh one-partition topic, ingests them into each backend, checks
/// byte-exactness and the convention, and hands each backend's dead letters to `check`.
async fn check_convention(
    convention: Convention,
    records: Vec<TestRecord>,
    check: impl Fn(&[DeadLetter]),
) {
    let topic = unique(&format!("dlq_{}", convention.as_str()));
    create_topic(&topic, 1, &[]).await.unwrap();
    let delivered = produce(&topic, &records).await.unwrap();
    for backend in Backend::ALL {
        let (_store, _dir, stored) = ingest_all(backend, &topic, records.len() as i64)
            .await
            .unwrap_or_else(|e| panic!("{backend:?}: {e:#}"));
        for ((sent, (partition, offset)), d) in records.iter().zip(&delivered).zip(&stored) {
            assert_eq!(d.record.dlq_topic, topic);
            assert_eq!(
                (d.record.dlq_partition, d.record.dlq_offset),
                (*partition, *offset)
            );
            assert_stored_exactly(sent, &d.record);
            assert_eq!(d.summary.convention, convention, "{backend:?}: convention");
            assert_eq!(d.summary.fingerprint.len(), 16, "fingerprint");
            assert!(d.ingested_at_ms > 0);
            if d.normalized.failed_at_ms.is_none() {
                assert_eq!(d.summary.dead_lettered_at_ms, DLQ_TS, "dead-lettered at");
            }
        }
        check(&stored);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_convention() {
    let traceback = "Traceback (most recent call last):\n  File \"agent.py\", line 12, in handle\n    reply = llm.call(prompt)\nTimeoutError: LLM call timed out after 30000 ms\n";
    let records = vec![record(
        "user-17",
        "{\"prompt\":\"hi\"}",
        vec![
            h("original_topic", b"user_requests"),
            h("retry_count", b"3"),
            h("error", b"LLM call timed out after 30000 ms"),
            h("message_id", b"0b6e6c1e-8c1d-4a53-9f0e-3a3a4a0b1c2d"),
            h("original_partition", b"2"),
            h("original_offset", b"17"),
            h("consumer_group", b"agents"),
            h("error_class", b"TimeoutError"),
            h("traceback", traceback.as_bytes()),
            h("failed_at", b"2026-12-01T06:00:00Z"),
        ],
    )];
    check_convention(Convention::Seed, records, |stored| {
        let n = &stored[0].normalized;
        assert_eq!(n.source_topic.as_deref(), Some("user_requests"));
        assert_eq!(n.source_partition, Some(2));
        assert_eq!(n.source_offset, Some(17));
        assert_eq!(n.consumer_group.as_deref(), Some("agents"));
        assert_eq!(n.error_class.as_deref(), Some("TimeoutError"));
        assert_eq!(
            n.error_message.as_deref(),
            Some("LLM call timed out after 30000 ms")
        );
        assert_eq!(n.stack_trace.as_deref(), Some(traceback));
        assert_eq!(n.retry_count, Some(3));
        assert_eq!(
            n.message_id.as_deref(),
            Some("0b6e6c1e-8c1d-4a53-9f0e-3a3a4a0b1c2d")
        );
        assert_eq!(n.failed_at_ms, Some(1_796_104_800_000));
        assert_eq!(stored[0].summary.dead_lettered_at_ms, 1_796_104_800_000);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spring_dead_letter_publishing_recoverer() {
    let stack = "org.springframework.kafka.listener.ListenerExecutionFailedException: Listener method threw exception\n\tat org.springframework.kafka.listener.KafkaMessageListenerContainer.decorateException(KafkaMessageListenerContainer.java:2945)\nCaused by: java.lang.IllegalStateException: Payment 4711 declined by provider\n\tat com.example.payments.PaymentListener.onMessage(PaymentListener.java:42)\n\t... 12 more\n";
    let records = vec![record(
        "order-4711",
        "{\"order_id\":4711}",
        vec![
            // An earlier hop (appendOriginalHeaders=true): the first occurrence is the record's
            // first source (captured: testkit/corpus/spring-kafka/dlt-reprocessed-fails-again.json).
            h("kafka_dlt-original-topic", b"orders"),
            h("kafka_dlt-original-partition", &0i32.to_be_bytes()),
            h("kafka_dlt-original-offset", &7i64.to_be_bytes()),
            h("kafka_dlt-original-topic", b"payments"),
            h("kafka_dlt-original-partition", &3i32.to_be_bytes()),
            h("kafka_dlt-original-offset", &42i64.to_be_bytes()),
            h("kafka_dlt-original-timestamp", &ORIGINAL_TS.to_be_bytes()),
            h("kafka_dlt-original-timestamp-type", b"CreateTime"),
            h("kafka_dlt-original-consumer-group", b"payments-service"),
            h(
                "kafka_dlt-exception-fqcn",
                b"org.springframework.kafka.listener.ListenerExecutionFailedException",
            ),
            h(
                "kafka_dlt-exception-cause-fqcn",
                b"java.lang.IllegalStateException",
            ),
            h(
                "kafka_dlt-exception-message",
                b"Listener method threw exception; Payment 4711 declined by provider",
            ),
            h("kafka_dlt-exception-stacktrace", stack.as_bytes()),
        ],
    )];
    check_convention(Convention::SpringDlt, records, |stored| {
        let n = &stored[0].normalized;
        assert_eq!(n.source_topic.as_deref(), Some("orders"));
        assert_eq!(n.source_partition, Some(0));
        assert_eq!(n.source_offset, Some(7));
        assert_eq!(n.source_timestamp_ms, Some(ORIGINAL_TS));
        assert_eq!(n.consumer_group.as_deref(), Some("payments-service"));
        assert_eq!(
            n.error_class.as_deref(),
            Some("java.lang.IllegalStateException")
        );
        assert!(n
            .error_message
            .as_deref()
            .is_some_and(|m| m.contains("Payment 4711 declined by provider")));
        assert_eq!(n.stack_trace.as_deref(), Some(stack));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spring_retryable_topic() {
    let stack = "org.springframework.kafka.listener.ListenerExecutionFailedException: Listener failed\nCaused by: java.net.SocketTimeoutException: Read timed out\n\tat java.base/sun.nio.ch.NioSocketImpl.timedRead(NioSocketImpl.java:278)\n";
    let common = |attempts: Vec<u8>, with_original_ts: bool| {
        let mut headers = vec![
            h("kafka_original-topic", b"shipments"),
            h("kafka_original-partition", &1i32.to_be_bytes()),
            h("kafka_original-offset", &99i64.to_be_bytes()),
        ];
        if with_original_ts {
            headers.push(h("kafka_original-timestamp", &ORIGINAL_TS.to_be_bytes()));
            headers.push(h("kafka_original-timestamp-type", b"CreateTime"));
        }
        headers.extend([
            h("kafka_original-consumer-group", b"shipping"),
            h(
                "kafka_exception-fqcn",
                b"org.springframework.kafka.listener.ListenerExecutionFailedException",
            ),
            h(
                "kafka_exception-cause-fqcn",
                b"java.net.SocketTimeoutException",
            ),
            h(
                "kafka_exception-message",
                b"Listener failed; Read timed out",
            ),
            h("kafka_exception-stacktrace", stack.as_bytes()),
            h("retry_topic-attempts", &attempts),
            h("retry_topic-original-timestamp", &big_integer(ORIGINAL_TS)),
            h(
                "retry_topic-backoff-timestamp",
                &big_integer(ORIGINAL_TS + 30_000),
            ),
        ]);
        headers
    };
    assert_eq!(
        big_integer(ORIGINAL_TS),
        vec![0x01, 0x90, 0x00, 0xc7, 0x9c, 0x7b]
    );
    let records = vec![
        record(
            "s-1",
            "{\"shipment\":1}",
            common(3i32.to_be_bytes().to_vec(), true),
        ),
        // An older release: 1-byte attempts, and only the BigInteger original timestamp.
        record("s-2", "{\"shipment\":2}", common(vec![2], false)),
    ];
    check_convention(Convention::SpringRetryable, records, |stored| {
        for d in stored {
            let n = &d.normalized;
            assert_eq!(n.source_topic.as_deref(), Some("shipments"));
            assert_eq!(n.source_partition, Some(1));
            assert_eq!(n.source_offset, Some(99));
            assert_eq!(n.source_timestamp_ms, Some(ORIGINAL_TS));
            assert_eq!(n.consumer_group.as_deref(), Some("shipping"));
            assert_eq!(
                n.error_class.as_deref(),
                Some("java.net.SocketTimeoutException")
            );
            assert_eq!(n.stack_trace.as_deref(), Some(stack));
        }
        // `retry_topic-attempts` names the attempt that would come next (captured:
        // testkit/corpus/spring-kafka/retryable-topic.json): 3 -> 1 retry, 2 -> none.
        assert_eq!(stored[0].normalized.retry_count, Some(1));
        assert_eq!(stored[1].normalized.retry_count, Some(0));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spring_cloud_stream() {
    let stack = "org.springframework.messaging.MessagingException: Exception thrown while invoking handler\n\tat org.springframework.cloud.stream.function.FunctionConfiguration.apply(FunctionConfiguration.java:800)\nCaused by: java.lang.NumberFormatException: For input string: \"12x\"\n\tat java.base/java.lang.Integer.parseInt(Integer.java:661)\n\t... 9 more\n";
    let records = vec![record(
        "inv-9",
        "{\"qty\":\"12x\"}",
        vec![
            h("x-original-topic", b"invoices"),
            h("x-original-partition", &4i32.to_be_bytes()),
            h("x-original-offset", &12_345i64.to_be_bytes()),
            h("x-original-timestamp", &ORIGINAL_TS.to_be_bytes()),
            h("x-original-timestamp-type", b"CreateTime"),
            h(
                "x-exception-fqcn",
                b"org.springframework.messaging.MessagingException",
            ),
            h(
                "x-exception-message",
                b"Exception thrown while invoking handler",
            ),
            h("x-exception-stacktrace", stack.as_bytes()),
        ],
    )];
    check_convention(Convention::SpringCloudStream, records, |stored| {
        let n = &stored[0].normalized;
        assert_eq!(n.source_topic.as_deref(), Some("invoices"));
        assert_eq!(n.source_partition, Some(4));
        assert_eq!(n.source_offset, Some(12_345));
        assert_eq!(n.source_timestamp_ms, Some(ORIGINAL_TS));
        // The fqcn is a wrapper; the first "Caused by:" line names the real error.
        assert_eq!(
            n.error_class.as_deref(),
            Some("java.lang.NumberFormatException")
        );
        assert!(n.error_message.is_some());
        assert_eq!(n.stack_trace.as_deref(), Some(stack));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_connect_with_null_exception_message() {
    let stack = "org.apache.kafka.connect.errors.DataException: Unknown magic byte!\n\tat io.confluent.connect.avro.AvroConverter.toConnectData(AvroConverter.java:124)\n";
    let mut r = record(
        "",
        "",
        vec![
            h("__connect.errors.topic", b"inventory"),
            h("__connect.errors.partition", b"3"),
            h("__connect.errors.offset", b"42"),
            h("__connect.errors.connector.name", b"jdbc-sink"),
            h("__connect.errors.task.id", b"0"),
            h("__connect.errors.stage", b"VALUE_CONVERTER"),
            h(
                "__connect.errors.class.name",
                b"io.confluent.connect.avro.AvroConverter",
            ),
            h(
                "__connect.errors.exception.class.name",
                b"org.apache.kafka.connect.errors.DataException",
            ),
            null("__connect.errors.exception.message"),
            h("__connect.errors.exception.stacktrace", stack.as_bytes()),
        ],
    );
    // Connect copies the original raw bytes: here Schema Registry framing plus junk.
    r.key = None;
    r.value = Some(vec![
        0x00, 0x00, 0x00, 0x00, 0x2a, 0xde, 0xad, 0xbe, 0xef, 0xff,
    ]);
    check_convention(Convention::KafkaConnect, vec![r], |stored| {
        let n = &stored[0].normalized;
        assert_eq!(n.source_topic.as_deref(), Some("inventory"));
        assert_eq!(n.source_partition, Some(3));
        assert_eq!(n.source_offset, Some(42));
        assert_eq!(
            n.error_class.as_deref(),
            Some("org.apache.kafka.connect.errors.DataException")
        );
        assert_eq!(n.stack_trace.as_deref(), Some(stack));
        // The null-valued header is kept as null, not as an empty value.
        assert_eq!(stored[0].record.headers[8].value, None);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_streams_kip_1034() {
    let stack = "org.apache.kafka.common.errors.SerializationException: Size of data received by IntegerDeserializer is not 4\n\tat org.apache.kafka.common.serialization.IntegerDeserializer.deserialize(IntegerDeserializer.java:37)\n";
    let records = vec![record(
        "k",
        "abc",
        vec![
            h("app-header", b"kept"),
            h(
                "__streams.errors.exception",
                b"org.apache.kafka.common.errors.SerializationException",
            ),
            h(
                "__streams.errors.message",
                b"Size of data received by IntegerDeserializer is not 4",
            ),
            h("__streams.errors.stacktrace", stack.as_bytes()),
            h("__streams.errors.topic", b"clicks"),
            h("__streams.errors.partition", b"5"),
            h("__streams.errors.offset", b"1234"),
        ],
    )];
    check_convention(Convention::KafkaStreams, records, |stored| {
        let n = &stored[0].normalized;
        assert_eq!(n.source_topic.as_deref(), Some("clicks"));
        assert_eq!(n.source_partition, Some(5));
        assert_eq!(n.source_offset, Some(1234));
        assert_eq!(
            n.error_class.as_deref(),
            Some("org.apache.kafka.common.errors.SerializationException")
        );
        assert_eq!(
            n.error_message.as_deref(),
            Some("Size of data received by IntegerDeserializer is not 4")
        );
        assert_eq!(n.stack_trace.as_deref(), Some(stack));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bakdata_error_handling() {
    let stack = "java.lang.IllegalArgumentException: Negative amount -5\n\tat com.example.Processor.process(Processor.java:20)\n";
    let records = vec![record(
        "acc-1",
        "{\"amount\":-5}",
        vec![
            h("__streams.errors.topic", b"transfers"),
            h("__streams.errors.partition", b"0"),
            h("__streams.errors.offset", b"8"),
            h("__streams.errors.description", b"Could not process record"),
            h(
                "__streams.errors.exception.class.name",
                b"java.lang.IllegalArgumentException",
            ),
            h("__streams.errors.exception.message", b"Negative amount -5"),
            h("__streams.errors.exception.stack_trace", stack.as_bytes()),
        ],
    )];
    check_convention(Convention::Bakdata, records, |stored| {
        let n = &stored[0].normalized;
        assert_eq!(n.source_topic.as_deref(), Some("transfers"));
        assert_eq!(n.source_partition, Some(0));
        assert_eq!(n.source_offset, Some(8));
        assert_eq!(
            n.error_class.as_deref(),
            Some("java.lang.IllegalArgumentException")
        );
        assert!(n
            .error_message
            .as_deref()
            .is_some_and(|m| m.contains("Negative amount -5")));
        assert_eq!(n.stack_trace.as_deref(), Some(stack));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn share_group_dlq_kip_1191() {
    let records = vec![record(
        "k",
        "v",
        vec![
            h("__dlq.errors.topic", b"payments"),
            h("__dlq.errors.partition", b"6"),
            h("__dlq.errors.offset", b"600"),
            h("__dlq.errors.group", b"share-payments"),
            h("__dlq.errors.delivery.count", b"5"),
            h("__dlq.errors.message", b"delivery attempts exhausted"),
        ],
    )];
    check_convention(Convention::ShareGroupDlq, records, |stored| {
        let n = &stored[0].normalized;
        assert_eq!(n.source_topic.as_deref(), Some("payments"));
        assert_eq!(n.source_partition, Some(6));
        assert_eq!(n.source_offset, Some(600));
        assert_eq!(n.consumer_group.as_deref(), Some("share-payments"));
        assert_eq!(n.retry_count, Some(5));
        assert_eq!(
            n.error_message.as_deref(),
            Some("delivery attempts exhausted")
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smallrye_quarkus() {
    let records = vec![record(
        "p-1",
        "{\"price\":\"abc\"}",
        vec![
            // SmallRye adds the new DLQ headers first and copies the old ones after.
            h(
                "dead-letter-exception-class-name",
                b"java.lang.IllegalArgumentException",
            ),
            h("dead-letter-reason", b"Invalid price"),
            h(
                "dead-letter-cause-class-name",
                b"java.lang.NumberFormatException",
            ),
            h("dead-letter-cause", b"For input string: \"abc\""),
            h("dead-letter-topic", b"prices"),
            h("dead-letter-partition", b"0"),
            h("dead-letter-offset", b"77"),
            h("dead-letter-topic", b"prices-retry"),
            h("dead-letter-partition", b"9"),
            h("dead-letter-offset", b"1"),
        ],
    )];
    check_convention(Convention::SmallRye, records, |stored| {
        let n = &stored[0].normalized;
        assert_eq!(n.source_topic.as_deref(), Some("prices"));
        assert_eq!(n.source_partition, Some(0));
        assert_eq!(n.source_offset, Some(77));
        assert_eq!(
            n.error_class.as_deref(),
            Some("java.lang.NumberFormatException")
        );
        assert!(n.error_message.is_some());
        assert_eq!(n.stack_trace, None, "SmallRye writes no stack trace");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn karafka_2_5() {
    let records = vec![record(
        "user-9",
        "{\"event\":\"signup\"}",
        vec![
            h("source_topic", b"events"),
            h("source_partition", b"1"),
            h("source_offset", b"500"),
            h("source_consumer_group", b"karafka_app"),
            h("source_attempts", b"4"),
            h("source_trace_id", b"2f1d9c84-62d4-4f5e-9a0e-6a1c4c1c9b11"),
        ],
    )];
    check_convention(Convention::Karafka, records, |stored| {
        let n = &stored[0].normalized;
        assert_eq!(n.source_topic.as_deref(), Some("events"));
        assert_eq!(n.source_partition, Some(1));
        assert_eq!(n.source_offset, Some(500));
        assert_eq!(n.consumer_group.as_deref(), Some("karafka_app"));
        assert_eq!(n.retry_count, Some(4));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watermill_poison_queue() {
    let records = vec![record(
        "",
        "{\"order\":1}",
        vec![
            h(
                "_watermill_message_uuid",
                b"6d6f5c2a-1b4e-4d8f-8e3b-2c1a0f9e8d7c",
            ),
            h("reason_poisoned", b"failed to process: db timeout"),
            h("topic_poisoned", b"orders"),
            h("handler_poisoned", b"order_handler"),
            h("subscriber_poisoned", b"kafka_subscriber"),
        ],
    )];
    check_convention(Convention::Watermill, records, |stored| {
        let n = &stored[0].normalized;
        assert_eq!(n.source_topic.as_deref(), Some("orders"));
        assert_eq!(n.source_partition, None);
        assert_eq!(n.source_offset, None);
        assert_eq!(
            n.error_message.as_deref(),
            Some("failed to process: db timeout")
        );
        assert_eq!(
            n.message_id.as_deref(),
            Some("6d6f5c2a-1b4e-4d8f-8e3b-2c1a0f9e8d7c")
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redpanda_connect_fallback() {
    let records = vec![record(
        "k",
        "{\"doc\":1}",
        vec![h(
            "fallback_error",
            b"http request to sink failed: 503 Service Unavailable",
        )],
    )];
    check_convention(Convention::RedpandaConnect, records, |stored| {
        let n = &stored[0].normalized;
        assert_eq!(
            n.error_message.as_deref(),
            Some("http request to sink failed: 503 Service Unavailable")
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wolverine() {
    let stack = "System.InvalidOperationException: Sequence contains no elements\n   at System.Linq.ThrowHelper.ThrowNoElementsException()\n   at Orders.Handler.Handle(PlaceOrder command) in /src/Handler.cs:line 17\n";
    let records = vec![record(
        "o-1",
        "{\"order\":1}",
        vec![
            h("exception-type", b"System.InvalidOperationException"),
            h("exception-message", b"Sequence contains no elements"),
            h("exception-stack", stack.as_bytes()),
            h("failed-at", b"2026-12-01T06:00:00.0000000+00:00"),
            h("original-destination", b"kafka://topic/orders"),
            h("original-partition", b"2"),
            h("original-offset", b"15"),
        ],
    )];
    check_convention(Convention::Wolverine, records, |stored| {
        let n = &stored[0].normalized;
        assert!(n
            .source_topic
            .as_deref()
            .is_some_and(|t| t.contains("orders")));
        assert_eq!(n.source_partition, Some(2));
        assert_eq!(n.source_offset, Some(15));
        assert_eq!(
            n.error_class.as_deref(),
            Some("System.InvalidOperationException")
        );
        assert_eq!(
            n.error_message.as_deref(),
            Some("Sequence contains no elements")
        );
        assert_eq!(n.stack_trace.as_deref(), Some(stack));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_convention() {
    let records = vec![record(
        "k",
        "plain payload",
        vec![
            h(
                "traceparent",
                b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            ),
            h("content-type", b"application/json"),
        ],
    )];
    check_convention(Convention::Unknown, records, |stored| {
        let n = &stored[0].normalized;
        assert_eq!(n.source_topic, None);
        assert_eq!(n.source_partition, None);
        assert_eq!(n.source_offset, None);
        assert_eq!(n.error_class, None);
        assert_eq!(n.error_message, None);
        assert_eq!(n.stack_trace, None);
        assert_eq!(n.retry_count, None);
    })
    .await;
}
