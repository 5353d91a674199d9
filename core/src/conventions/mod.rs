//! Header conventions of the frameworks that write dead letters: recognising which one wrote a
//! record, and normalising its metadata into [`Normalized`]. The conventions and their pitfalls
//! are described in `docs/conventions.md` (verified against the captured corpus,
//! `docs/corpus.md`); each has its own module and fixtures.
//!
//! Decoding is total: any header list, however malformed, yields a convention and a
//! `Normalized` (problems go to `decode_warnings`), and the raw headers are never changed.

mod bakdata;
mod cloud_stream;
mod connect;
mod diagnostic;
mod display;
mod karafka;
mod redpanda;
mod seed;
mod share_group;
mod smallrye;
mod spring;
mod stack;
mod streams;
mod value;
mod watermill;
mod wolverine;

pub use diagnostic::diagnostic_header;
pub use display::{describe_header, describe_header_within, HeaderDisplay};
pub use stack::{is_wrapper, FRAMEWORK_WRAPPERS};

use crate::model::{Convention, Header, Normalized, RawRecord};

/// Recognises the record's convention and normalises its metadata. Never fails, never panics.
///
/// Conventions are tried in [`Convention::ALL`] order and the first whose headers are present
/// wins: framework-specific prefixes first, the generic seed names (`original_topic`, `error`)
/// last. A record carrying no known header is `(Convention::Unknown, Normalized::default())`.
/// Repeated names resolve to the newest occurrence: the last one, except for SmallRye, which
/// writes its headers first. Null-valued headers count as absent values.
pub fn decode(record: &RawRecord) -> (Convention, Normalized) {
    Convention::ALL
        .into_iter()
        .find(|&c| detect(c, &record.headers))
        .map(|c| (c, extract(c, record)))
        .unwrap_or((Convention::Unknown, Normalized::default()))
}

/// Whether the headers carry convention `c`'s names.
fn detect(c: Convention, h: &[Header]) -> bool {
    match c {
        Convention::SpringDlt => spring::detect_dlt(h),
        Convention::SpringRetryable => spring::detect_retryable(h),
        Convention::SpringCloudStream => cloud_stream::detect(h),
        Convention::KafkaConnect => connect::detect(h),
        Convention::Bakdata => bakdata::detect(h),
        Convention::KafkaStreams => streams::detect(h),
        Convention::ShareGroupDlq => share_group::detect(h),
        Convention::SmallRye => smallrye::detect(h),
        Convention::Karafka => karafka::detect(h),
        Convention::Wolverine => wolverine::detect(h),
        Convention::Watermill => watermill::detect(h),
        Convention::RedpandaConnect => redpanda::detect(h),
        Convention::Seed => seed::detect(h),
        Convention::Unknown => false,
    }
}

/// Normalises a record as convention `c`.
fn extract(c: Convention, r: &RawRecord) -> Normalized {
    let h = &r.headers;
    match c {
        Convention::SpringDlt => spring::extract_dlt(h),
        Convention::SpringRetryable => spring::extract_retryable(h),
        Convention::SpringCloudStream => cloud_stream::extract(r),
        Convention::KafkaConnect => connect::extract(r),
        Convention::Bakdata => bakdata::extract(r),
        Convention::KafkaStreams => streams::extract(r),
        Convention::ShareGroupDlq => share_group::extract(h),
        Convention::SmallRye => smallrye::extract(h),
        Convention::Karafka => karafka::extract(h),
        Convention::Wolverine => wolverine::extract(h),
        Convention::Watermill => watermill::extract(h),
        Convention::RedpandaConnect => redpanda::extract(h),
        Convention::Seed => seed::extract(h),
        Convention::Unknown => Normalized::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::value::tests::{h, null, record};
    use super::*;

    fn conv(headers: Vec<Header>) -> Convention {
        decode(&record(headers, None)).0
    }

    #[test]
    fn picks_each_convention() {
        let cases: Vec<(Vec<Header>, Convention)> = vec![
            (
                vec![h("kafka_dlt-original-topic", b"t")],
                Convention::SpringDlt,
            ),
            (
                vec![h("kafka_original-topic", b"t")],
                Convention::SpringRetryable,
            ),
            (
                vec![h("retry_topic-attempts", &[1])],
                Convention::SpringRetryable,
            ),
            (
                vec![h("x-original-topic", b"t")],
                Convention::SpringCloudStream,
            ),
            (
                vec![h("__connect.errors.topic", b"t")],
                Convention::KafkaConnect,
            ),
            (
                vec![h("__streams.errors.description", b"d")],
                Convention::Bakdata,
            ),
            (
                vec![h("__streams.errors.exception", b"x.Y")],
                Convention::KafkaStreams,
            ),
            (
                vec![h("__dlq.errors.topic", b"t")],
                Convention::ShareGroupDlq,
            ),
            (vec![h("dead-letter-reason", b"r")], Convention::SmallRye),
            (
                vec![h("source_topic", b"t"), h("source_offset", b"1")],
                Convention::Karafka,
            ),
            (
                vec![
                    h("original_topic", b"t"),
                    h("original_consumer_group", b"g"),
                ],
                Convention::Karafka,
            ),
            (vec![h("original-topic", b"t")], Convention::Karafka),
            (
                vec![h("exception-type", b"System.Exception")],
                Convention::Wolverine,
            ),
            (vec![h("reason_poisoned", b"r")], Convention::Watermill),
            (vec![h("fallback_error", b"e")], Convention::RedpandaConnect),
            (vec![h("original_topic", b"t")], Convention::Seed),
            (vec![h("error", b"e")], Convention::Seed),
            (vec![h("traceparent", b"00-ab")], Convention::Unknown),
            (vec![], Convention::Unknown),
        ];
        for (headers, want) in cases {
            assert_eq!(conv(headers.clone()), want, "{headers:?}");
        }
    }

    #[test]
    fn unknown_is_empty() {
        let (c, n) = decode(&record(vec![h("x-note", b"<script>")], Some(1)));
        assert_eq!(c, Convention::Unknown);
        assert_eq!(n, Normalized::default());
    }

    #[test]
    fn testkit_fixture_spring() {
        let stack = "org.springframework.kafka.listener.ListenerExecutionFailedException: Listener method threw exception\n\tat org.springframework.kafka.listener.KafkaMessageListenerContainer.decorateException(KafkaMessageListenerContainer.java:2945)\nCaused by: java.lang.IllegalStateException: Payment 4711 declined by provider\n\tat com.example.payments.PaymentListener.onMessage(PaymentListener.java:42)\n\t... 12 more\n";
        let r = record(
            vec![
                h("kafka_dlt-original-topic", b"payments"),
                h("kafka_dlt-original-partition", &1i32.to_be_bytes()),
                h("kafka_dlt-original-offset", &1001i64.to_be_bytes()),
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
                    b"Listener method threw exception; Payment 4711 declined by provider",
                ),
                h("kafka_dlt-exception-stacktrace", stack.as_bytes()),
            ],
            Some(1_796_104_900_000),
        );
        let (c, n) = decode(&r);
        assert_eq!(c, Convention::SpringDlt);
        assert_eq!(n.source_topic.as_deref(), Some("payments"));
        assert_eq!(n.source_partition, Some(1));
        assert_eq!(n.source_offset, Some(1001));
        assert_eq!(n.source_timestamp_ms, Some(1_796_104_800_000));
        assert_eq!(n.consumer_group.as_deref(), Some("payments-service"));
        assert_eq!(
            n.error_class.as_deref(),
            Some("java.lang.IllegalStateException")
        );
        assert_eq!(n.stack_trace.as_deref(), Some(stack));
        assert!(n.decode_warnings.is_empty());
    }

    #[test]
    fn testkit_fixture_connect_and_seed() {
        let (c, n) = decode(&record(
            vec![
                h("__connect.errors.topic", b"inventory"),
                h("__connect.errors.partition", b"3"),
                h("__connect.errors.offset", b"42"),
                h(
                    "__connect.errors.exception.class.name",
                    b"org.apache.kafka.connect.errors.DataException",
                ),
                null("__connect.errors.exception.message"),
                h(
                    "__connect.errors.exception.stacktrace",
                    b"org.apache.kafka.connect.errors.DataException: Unknown magic byte!\n\tat io.confluent.connect.avro.AvroConverter.toConnectData(AvroConverter.java:124)\n",
                ),
                h("trace-id", &[0xc3, 0x28]),
            ],
            Some(7),
        ));
        assert_eq!(c, Convention::KafkaConnect);
        assert_eq!(
            n.error_class.as_deref(),
            Some("org.apache.kafka.connect.errors.DataException")
        );
        assert_eq!(n.error_message.as_deref(), Some("Unknown magic byte!"));
        assert_eq!((n.source_partition, n.source_offset), (Some(3), Some(42)));
        assert_eq!(n.source_timestamp_ms, Some(7));

        let (c, n) = decode(&record(
            vec![
                h("original_topic", b"comments"),
                h("retry_count", b"1"),
                h("error", b"<script>window.__pwned=1</script>"),
                h("error_class", b"ValidationError"),
                h("x-note", b"<script>"),
            ],
            None,
        ));
        assert_eq!(c, Convention::Seed);
        assert_eq!(n.retry_count, Some(1));
        assert_eq!(n.error_class.as_deref(), Some("ValidationError"));
        assert_eq!(
            n.error_message.as_deref(),
            Some("<script>window.__pwned=1</script>")
        );
    }

    /// xorshift64*: a dependency-free generator for the garbage below.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn bytes(&mut self, max: usize) -> Vec<u8> {
            let len = self.below(max + 1);
            let alphabet = b"0123456789-:. \nCaused by: x.Y\xff\xc3";
            (0..len)
                .map(|_| match self.below(3) {
                    0 => alphabet[self.below(alphabet.len())],
                    _ => self.next() as u8,
                })
                .collect()
        }
    }

    /// Every name any convention reads, so the garbage reaches every decoder.
    const NAMES: &[&str] = &[
        "kafka_dlt-original-topic",
        "kafka_dlt-original-partition",
        "kafka_dlt-original-offset",
        "kafka_dlt-original-timestamp",
        "kafka_dlt-original-consumer-group",
        "kafka_dlt-exception-fqcn",
        "kafka_dlt-exception-cause-fqcn",
        "kafka_dlt-exception-message",
        "kafka_dlt-exception-stacktrace",
        "kafka_dlt-key-exception-fqcn",
        "kafka_original-topic",
        "kafka_original-partition",
        "kafka_original-offset",
        "kafka_original-timestamp",
        "kafka_exception-stacktrace",
        "retry_topic-attempts",
        "retry_topic-original-timestamp",
        "retry_topic-backoff-timestamp",
        "kafka_deliveryAttempt",
        "x-original-topic",
        "x-original-partition",
        "x-original-offset",
        "x-original-timestamp",
        "x-exception-fqcn",
        "x-exception-stacktrace",
        "__connect.errors.topic",
        "__connect.errors.partition",
        "__connect.errors.offset",
        "__connect.errors.exception.class.name",
        "__connect.errors.exception.message",
        "__connect.errors.exception.stacktrace",
        "__streams.errors.exception",
        "__streams.errors.message",
        "__streams.errors.stacktrace",
        "__streams.errors.partition",
        "__streams.errors.offset",
        "__streams.errors.description",
        "__streams.errors.exception.stack_trace",
        "__dlq.errors.topic",
        "__dlq.errors.partition",
        "__dlq.errors.delivery.count",
        "dead-letter-reason",
        "dead-letter-partition",
        "dead-letter-offset",
        "delayed-retry-count",
        "delayed-retry-original-timestamp",
        "source_topic",
        "source_partition",
        "source_attempts",
        "original_topic",
        "original_partition",
        "original_consumer_group",
        "original-topic",
        "original-offset",
        "exception-type",
        "exception-stack",
        "failed-at",
        "original-destination",
        "reason_poisoned",
        "_watermill_message_uuid",
        "fallback_error",
        "kafka_partition",
        "kafka_timestamp_ms",
        "error",
        "retry_count",
        "traceback",
        "failed_at",
        "message_id",
        "\u{0}",
        "",
    ];

    #[test]
    fn garbage_never_panics() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..20_000 {
            let headers: Vec<Header> = (0..rng.below(8))
                .map(|_| Header {
                    name: if rng.below(8) == 0 {
                        String::from_utf8_lossy(&rng.bytes(12)).into_owned()
                    } else {
                        NAMES[rng.below(NAMES.len())].to_string()
                    },
                    value: (rng.below(6) != 0).then(|| rng.bytes(24)),
                })
                .collect();
            let r = record(headers, Some(rng.next() as i64));
            let (_, n) = decode(&r);
            let fp = crate::fingerprint::fingerprint(
                n.error_class.as_deref(),
                n.error_message.as_deref(),
            );
            assert_eq!(fp.len(), 16);
            let text = String::from_utf8_lossy(&rng.bytes(40)).into_owned() + "é 'x\" -0.5 0x";
            let _ = crate::fingerprint::mask_message(&text);
            for hd in &r.headers {
                let _ = describe_header(&hd.name, hd.value.as_deref());
            }
        }
    }
}
