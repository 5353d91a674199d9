//! A small, fixed set of dead letters covering the conventions and the awkward inputs
//! (tombstone, null key, binary payload, invalid UTF-8 header, hostile markup). Used by the
//! browser tests and by `make demo` before real demo traffic exists.

use crate::TestRecord;

fn h(name: &str, value: &[u8]) -> (String, Option<Vec<u8>>) {
    (name.to_string(), Some(value.to_vec()))
}

/// Markup that must render inert wherever it is shown.
pub const HOSTILE: &str =
    "<script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\">";

/// The fixture records, in produce order. Each has a distinct source topic or error so the
/// UI's filters and groups have something to show.
pub fn sample_dead_letters() -> Vec<TestRecord> {
    let spring_stack = "org.springframework.kafka.listener.ListenerExecutionFailedException: Listener method threw exception\n\tat org.springframework.kafka.listener.KafkaMessageListenerContainer.decorateException(KafkaMessageListenerContainer.java:2945)\nCaused by: java.lang.IllegalStateException: Payment 4711 declined by provider\n\tat com.example.payments.PaymentListener.onMessage(PaymentListener.java:42)\n\t... 12 more\n";
    let mut out = Vec::new();
    for (i, order) in [4711u32, 4712, 4713].iter().enumerate() {
        out.push(TestRecord {
            key: Some(format!("order-{order}").into_bytes()),
            value: Some(
                format!("{{\"order_id\":{order},\"amount\":\"12.50\",\"currency\":\"EUR\"}}")
                    .into_bytes(),
            ),
            headers: vec![
                h("kafka_dlt-original-topic", b"payments"),
                h("kafka_dlt-original-partition", &(i as i32).to_be_bytes()),
                h(
                    "kafka_dlt-original-offset",
                    &(1000 + i as i64).to_be_bytes(),
                ),
                h(
                    "kafka_dlt-original-timestamp",
                    &1_796_104_800_000i64.to_be_bytes(),
                ),
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
                    format!(
                        "Listener method threw exception; Payment {order} declined by provider"
                    )
                    .as_bytes(),
                ),
                h(
                    "kafka_dlt-exception-stacktrace",
                    spring_stack.replace("4711", &order.to_string()).as_bytes(),
                ),
            ],
            ..TestRecord::default()
        });
    }
    out.push(TestRecord {
        key: None,
        value: Some(vec![0x00, 0x00, 0x00, 0x00, 0x2a, 0xde, 0xad, 0xbe, 0xef, 0xff, 0x10]),
        headers: vec![
            h("__connect.errors.topic", b"inventory"),
            h("__connect.errors.partition", b"3"),
            h("__connect.errors.offset", b"42"),
            h("__connect.errors.connector.name", b"jdbc-sink"),
            h("__connect.errors.task.id", b"0"),
            h("__connect.errors.stage", b"VALUE_CONVERTER"),
            h("__connect.errors.class.name", b"io.confluent.connect.avro.AvroConverter"),
            h("__connect.errors.exception.class.name", b"org.apache.kafka.connect.errors.DataException"),
            ("__connect.errors.exception.message".to_string(), None),
            h("__connect.errors.exception.stacktrace", b"org.apache.kafka.connect.errors.DataException: Unknown magic byte!\n\tat io.confluent.connect.avro.AvroConverter.toConnectData(AvroConverter.java:124)\n"),
            h("trace-id", &[0xc3, 0x28]),
        ],
        ..TestRecord::default()
    });
    out.push(TestRecord {
        key: Some(b"user-17".to_vec()),
        value: None,
        headers: vec![
            h("original_topic", b"user_requests"),
            h("retry_count", b"3"),
            h("error", b"LLM call timed out after 30000 ms"),
            h("error_class", b"TimeoutError"),
            h("message_id", b"0b6e6c1e-8c1d-4a53-9f0e-3a3a4a0b1c2d"),
            h("failed_at", b"2026-12-01T06:00:00Z"),
        ],
        ..TestRecord::default()
    });
    out.push(TestRecord {
        key: Some(HOSTILE.as_bytes().to_vec()),
        value: Some(format!("{{\"comment\":\"{}\"}}", HOSTILE.replace('"', "\\\"")).into_bytes()),
        headers: vec![
            h("original_topic", b"comments"),
            h("retry_count", b"1"),
            h("error", HOSTILE.as_bytes()),
            h("error_class", b"ValidationError"),
            h("x-note", HOSTILE.as_bytes()),
        ],
        ..TestRecord::default()
    });
    out.push(TestRecord {
        key: Some(b"plain".to_vec()),
        value: Some(b"no headers at all".to_vec()),
        headers: vec![],
        ..TestRecord::default()
    });
    out
}

/// 2026-12-01T06:00:00Z in epoch ms: the base time of [`stored_dead_letter`].
pub const T0_MS: i64 = 1_796_104_800_000;

/// A dead letter as the store takes it (`Store::insert_batch`, no Kafka), at `dlq_topic`
/// partition 0 `offset`, with `normalized` and its fingerprint: key `k{offset}`, value
/// `{"n":offset}`, no headers, record time [`T0_MS`] + `offset` s. Change any field after.
pub fn stored_dead_letter(
    dlq_topic: &str,
    offset: i64,
    normalized: redrive_core::Normalized,
) -> redrive_core::NewDeadLetter {
    use redrive_core::{Convention, NewDeadLetter, RawRecord};
    let at = T0_MS + offset * 1000;
    NewDeadLetter {
        record: RawRecord {
            dlq_topic: dlq_topic.into(),
            dlq_partition: 0,
            dlq_offset: offset,
            timestamp_ms: Some(at),
            key: Some(format!("k{offset}").into_bytes()),
            value: Some(format!("{{\"n\":{offset}}}").into_bytes()),
            headers: vec![],
        },
        convention: Convention::Unknown,
        fingerprint: redrive_core::fingerprint::fingerprint(
            normalized.error_class.as_deref(),
            normalized.error_message.as_deref(),
        ),
        normalized,
        dead_lettered_at_ms: at,
        ingested_at_ms: at + 5,
    }
}
