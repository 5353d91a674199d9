//! Header names the demo writes and reads, and small helpers over an ordered header list.
//!
//! Dead letters carry the seed convention (`docs/conventions.md`): `original_topic`,
//! `retry_count`, `error`, plus `message_id`, `original_partition`, `original_offset`,
//! `consumer_group`, `error_class`, `traceback`, `failed_at` (RFC 3339); all UTF-8 text.
//! The demo adds `retryable` (`true`/`false`), `dlq_reason` and, per failed attempt, one
//! `attempt_failed_at` / `attempt_error` pair and one `retry_delay_ms` per scheduled retry (the
//! same name repeats, in order: Kafka headers are a list).

/// Seed: the topic the request was first consumed from.
pub const ORIGINAL_TOPIC: &str = "original_topic";
/// Seed: its partition there (decimal).
pub const ORIGINAL_PARTITION: &str = "original_partition";
/// Seed: its offset there (decimal).
pub const ORIGINAL_OFFSET: &str = "original_offset";
/// Seed: retries done so far (decimal); 0 on a first attempt and on poison dead letters.
pub const RETRY_COUNT: &str = "retry_count";
/// Seed: the last error's message.
pub const ERROR: &str = "error";
/// Seed: the request's UUID.
pub const MESSAGE_ID: &str = "message_id";
/// Seed: the consumer group that gave up on it.
pub const CONSUMER_GROUP: &str = "consumer_group";
/// Seed: the last error's class, e.g. `LlmTimeoutError`, `ValidationError`.
pub const ERROR_CLASS: &str = "error_class";
/// Seed: every attempt's error, and where the last one happened.
pub const TRACEBACK: &str = "traceback";
/// Seed: when it was dead-lettered (RFC 3339, ms precision, UTC).
pub const FAILED_AT: &str = "failed_at";
/// Demo: `false` for poison (never worth a retry), `true` otherwise.
pub const RETRYABLE: &str = "retryable";
/// Demo: `max_retries_exceeded` or `non_retryable`.
pub const DLQ_REASON: &str = "dlq_reason";
/// Demo: a retry record is not to be processed before this time (epoch ms, decimal).
pub const NOT_BEFORE_MS: &str = "not_before_ms";
/// Demo: when an attempt failed (RFC 3339, ms), one per failed attempt.
pub const ATTEMPT_FAILED_AT: &str = "attempt_failed_at";
/// Demo: `Class: message` of an attempt's failure, one per failed attempt.
pub const ATTEMPT_ERROR: &str = "attempt_error";
/// Demo: the backoff chosen before a retry (ms, jitter included), one per retry.
pub const RETRY_DELAY_MS: &str = "retry_delay_ms";

/// redrive's replay relay: stable per outbox row; a consumer drops a second delivery.
pub const REDRIVE_IDEMPOTENCY_KEY: &str = "redrive-idempotency-key";
/// redrive's replay relay: the replay job.
pub const REDRIVE_REPLAY_ID: &str = "redrive-replay-id";

/// Headers the demo itself manages. A record consumed from the source topic (a new request or
/// a replay) starts afresh: these are dropped so an old dead letter's diagnostics, should a
/// replay carry them, neither mislead nor cut the new retry budget short.
pub const MANAGED: &[&str] = &[
    ORIGINAL_TOPIC,
    ORIGINAL_PARTITION,
    ORIGINAL_OFFSET,
    RETRY_COUNT,
    ERROR,
    MESSAGE_ID,
    CONSUMER_GROUP,
    ERROR_CLASS,
    TRACEBACK,
    FAILED_AT,
    RETRYABLE,
    DLQ_REASON,
    NOT_BEFORE_MS,
    ATTEMPT_FAILED_AT,
    ATTEMPT_ERROR,
    RETRY_DELAY_MS,
];

/// An ordered header list, names with raw (possibly null) values.
pub type HeaderList = Vec<(String, Option<Vec<u8>>)>;

/// The last value of `name` as UTF-8 text, if present and text.
pub fn last_str<'a>(headers: &'a [(String, Option<Vec<u8>>)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .rev()
        .find(|(n, _)| n == name)
        .and_then(|(_, v)| v.as_deref())
        .and_then(|v| std::str::from_utf8(v).ok())
}

/// Every value of `name` that is UTF-8 text, in order.
pub fn all_str<'a>(headers: &'a [(String, Option<Vec<u8>>)], name: &str) -> Vec<&'a str> {
    headers
        .iter()
        .filter(|(n, _)| n == name)
        .filter_map(|(_, v)| v.as_deref())
        .filter_map(|v| std::str::from_utf8(v).ok())
        .collect()
}

/// `headers` without any header named in `names` (order otherwise kept).
pub fn without(headers: &[(String, Option<Vec<u8>>)], names: &[&str]) -> HeaderList {
    headers
        .iter()
        .filter(|(n, _)| !names.contains(&n.as_str()))
        .cloned()
        .collect()
}

/// Appends a text header.
pub fn push(headers: &mut HeaderList, name: &str, value: impl Into<String>) {
    headers.push((name.to_string(), Some(value.into().into_bytes())));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_keep_order_and_repeats() {
        let mut h = HeaderList::new();
        push(&mut h, "a", "1");
        push(&mut h, RETRY_COUNT, "0");
        h.push(("bin".into(), Some(vec![0xff])));
        h.push(("null".into(), None));
        push(&mut h, "a", "2");
        assert_eq!(last_str(&h, "a"), Some("2"));
        assert_eq!(all_str(&h, "a"), ["1", "2"]);
        assert_eq!(last_str(&h, "bin"), None);
        let kept = without(&h, MANAGED);
        assert_eq!(
            kept.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
            ["a", "bin", "null", "a"]
        );
    }
}
