//! Which headers are a convention's diagnostics: what the framework added when it
//! dead-lettered the record (origin, exception, retry bookkeeping), as opposed to the
//! application's own headers. A replay drops them by default, so the consumer of the source
//! topic sees the record as the producer sent it — and a retry counter such as the seed's
//! `retry_count` does not send it straight back to the DLQ. Names as in
//! `docs/conventions.md`.

use crate::model::Convention;

/// Header names (exact) and name prefixes that one convention writes as diagnostics.
struct Diagnostics {
    exact: &'static [&'static str],
    prefixes: &'static [&'static str],
}

const NONE: Diagnostics = Diagnostics {
    exact: &[],
    prefixes: &[],
};

/// Spring Kafka (DLPR and `@RetryableTopic` alike: a record can carry both sets after a trip
/// through retry topics). `springDeserializerException*` hold a Java-serialised exception.
const SPRING: Diagnostics = Diagnostics {
    exact: &[
        "springDeserializerExceptionValue",
        "springDeserializerExceptionKey",
    ],
    prefixes: &[
        "kafka_dlt-",
        "kafka_original-",
        "kafka_exception-",
        "kafka_key-exception-",
        "retry_topic-",
    ],
};

/// The diagnostics of convention `c` (see [`diagnostic_header`]).
fn diagnostics(c: Convention) -> Diagnostics {
    match c {
        Convention::SpringDlt | Convention::SpringRetryable => SPRING,
        Convention::SpringCloudStream => Diagnostics {
            exact: &[],
            prefixes: &["x-original-", "x-exception-"],
        },
        Convention::KafkaConnect => Diagnostics {
            exact: &[],
            prefixes: &["__connect.errors."],
        },
        // bakdata and KIP-1034 share the prefix (different suffixes).
        Convention::KafkaStreams | Convention::Bakdata => Diagnostics {
            exact: &[],
            prefixes: &["__streams.errors."],
        },
        Convention::ShareGroupDlq => Diagnostics {
            exact: &[],
            prefixes: &["__dlq.errors."],
        },
        Convention::SmallRye => Diagnostics {
            exact: &[],
            prefixes: &["dead-letter-", "deserialization-failure-", "delayed-retry-"],
        },
        // `source_` alone would also catch application headers: name them.
        Convention::Karafka => Diagnostics {
            exact: &[
                "source_topic",
                "source_partition",
                "source_offset",
                "source_consumer_group",
                "source_attempts",
                "source_trace_id",
            ],
            prefixes: &["original_", "original-"],
        },
        // `_watermill_message_uuid` is the message's own id: kept.
        Convention::Watermill => Diagnostics {
            exact: &[
                "reason_poisoned",
                "topic_poisoned",
                "handler_poisoned",
                "subscriber_poisoned",
            ],
            prefixes: &[],
        },
        Convention::RedpandaConnect => Diagnostics {
            exact: &[
                "fallback_error",
                "kafka_topic",
                "kafka_partition",
                "kafka_offset",
                "kafka_timestamp_ms",
            ],
            prefixes: &[],
        },
        Convention::Wolverine => Diagnostics {
            exact: &[
                "exception-type",
                "exception-message",
                "exception-stack",
                "failed-at",
                "original-destination",
                "original-partition",
                "original-offset",
            ],
            prefixes: &[],
        },
        // `message_id` is the application's id (it links a returning dead letter): kept.
        Convention::Seed => Diagnostics {
            exact: &[
                "original_topic",
                "original_partition",
                "original_offset",
                "consumer_group",
                "retry_count",
                "error",
                "error_class",
                "traceback",
                "failed_at",
            ],
            prefixes: &[],
        },
        Convention::Unknown => NONE,
    }
}

/// True if `name` is one of the diagnostic headers convention `c` writes when it
/// dead-letters a record (origin, exception, retry bookkeeping). A record of
/// [`Convention::Unknown`] has none: every header is the application's.
pub fn diagnostic_header(c: Convention, name: &str) -> bool {
    let d = diagnostics(c);
    d.exact.contains(&name) || d.prefixes.iter().any(|p| name.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_convention_knows_its_own() {
        let cases = [
            (Convention::SpringDlt, "kafka_dlt-exception-stacktrace"),
            (Convention::SpringDlt, "kafka_original-topic"),
            (Convention::SpringRetryable, "retry_topic-attempts"),
            (Convention::SpringCloudStream, "x-original-offset"),
            (Convention::KafkaConnect, "__connect.errors.stage"),
            (Convention::KafkaStreams, "__streams.errors.exception"),
            (Convention::Bakdata, "__streams.errors.description"),
            (Convention::ShareGroupDlq, "__dlq.errors.delivery.count"),
            (Convention::SmallRye, "dead-letter-reason"),
            (Convention::SmallRye, "delayed-retry-count"),
            (Convention::Karafka, "source_attempts"),
            (Convention::Karafka, "original_topic"),
            (Convention::Watermill, "reason_poisoned"),
            (Convention::RedpandaConnect, "fallback_error"),
            (Convention::Wolverine, "exception-stack"),
            (Convention::Seed, "retry_count"),
            (Convention::Seed, "traceback"),
        ];
        for (c, name) in cases {
            assert!(diagnostic_header(c, name), "{c:?} {name}");
        }
    }

    #[test]
    fn application_headers_are_kept() {
        for c in Convention::ALL {
            for name in ["traceparent", "content-type", "x-tenant", "", "redrive"] {
                assert!(!diagnostic_header(c, name), "{c:?} {name}");
            }
        }
        assert!(!diagnostic_header(Convention::Seed, "message_id"));
        assert!(!diagnostic_header(
            Convention::Watermill,
            "_watermill_message_uuid"
        ));
        assert!(!diagnostic_header(Convention::Karafka, "source_system"));
        // Another convention's names are the application's as far as this one knows.
        assert!(!diagnostic_header(
            Convention::KafkaConnect,
            "kafka_dlt-original-topic"
        ));
        assert!(!diagnostic_header(
            Convention::Unknown,
            "kafka_dlt-original-topic"
        ));
    }
}
