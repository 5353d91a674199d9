//! The dead-letter model: what Kafka gave us (bytes, exactly) and what we understood of it.

use serde::{Deserialize, Serialize};

/// One Kafka record header. Kafka headers are an *ordered list* that may repeat a name
/// (Spring appends `kafka_dlt-original-*` on every hop) and whose value may be null
/// (Kafka Connect, KIP-1034); so we never turn them into a map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// Header name (Kafka's protocol defines it as a UTF-8 string).
    pub name: String,
    /// Raw value bytes; `None` is a null-valued header, distinct from `Some(vec![])`.
    pub value: Option<Vec<u8>>,
}

/// A record exactly as consumed from a DLQ topic. Nothing here is decoded or changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawRecord {
    pub dlq_topic: String,
    pub dlq_partition: i32,
    pub dlq_offset: i64,
    /// The record timestamp in epoch ms, if the record has one.
    pub timestamp_ms: Option<i64>,
    /// `None` is a null key.
    pub key: Option<Vec<u8>>,
    /// `None` is a tombstone (null value).
    pub value: Option<Vec<u8>>,
    pub headers: Vec<Header>,
}

/// Which framework's header convention a record was recognised as (see
/// `docs/conventions.md`). Stored as its `as_str()` name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Convention {
    /// The seed design / redrive's own demo: `original_topic`, `retry_count`, `error`, ...
    Seed,
    /// Spring Kafka `DeadLetterPublishingRecoverer`: `kafka_dlt-*`.
    SpringDlt,
    /// Spring `@RetryableTopic`: `kafka_original-*`, `kafka_exception-*`, `retry_topic-*`.
    SpringRetryable,
    /// Spring Cloud Stream Kafka binder: `x-original-*`, `x-exception-*`.
    SpringCloudStream,
    /// Kafka Connect sink DLQ with context headers: `__connect.errors.*`.
    KafkaConnect,
    /// Kafka Streams built-in DLQ (KIP-1034): `__streams.errors.exception`, ...
    KafkaStreams,
    /// bakdata kafka-error-handling: `__streams.errors.description`, `.exception.class.name`, ...
    Bakdata,
    /// KIP-1191 broker-side share-group DLQ: `__dlq.errors.*`.
    ShareGroupDlq,
    /// SmallRye Reactive Messaging / Quarkus: `dead-letter-*`.
    SmallRye,
    /// Karafka (Ruby): `source_*` (2.5+), `original_*`, `original-*`.
    Karafka,
    /// Watermill poison queue (Go): `reason_poisoned`, `topic_poisoned`, ...
    Watermill,
    /// Redpanda Connect `fallback_error`.
    RedpandaConnect,
    /// Wolverine (.NET): `exception-type`, `exception-message`, `exception-stack`, ...
    Wolverine,
    /// No known convention: every normalised field is empty; raw headers are still kept.
    Unknown,
}

impl Convention {
    /// Every convention, in the order the decoder tries them.
    pub const ALL: [Convention; 14] = [
        Convention::SpringDlt,
        Convention::SpringRetryable,
        Convention::SpringCloudStream,
        Convention::KafkaConnect,
        Convention::Bakdata,
        Convention::KafkaStreams,
        Convention::ShareGroupDlq,
        Convention::SmallRye,
        Convention::Karafka,
        Convention::Wolverine,
        Convention::Watermill,
        Convention::RedpandaConnect,
        Convention::Seed,
        Convention::Unknown,
    ];

    /// The stable name stored in the database and shown in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Convention::Seed => "seed",
            Convention::SpringDlt => "spring_dlt",
            Convention::SpringRetryable => "spring_retryable",
            Convention::SpringCloudStream => "spring_cloud_stream",
            Convention::KafkaConnect => "kafka_connect",
            Convention::KafkaStreams => "kafka_streams",
            Convention::Bakdata => "bakdata",
            Convention::ShareGroupDlq => "share_group_dlq",
            Convention::SmallRye => "smallrye",
            Convention::Karafka => "karafka",
            Convention::Watermill => "watermill",
            Convention::RedpandaConnect => "redpanda_connect",
            Convention::Wolverine => "wolverine",
            Convention::Unknown => "unknown",
        }
    }

    /// Inverse of [`Convention::as_str`]; unknown names map to [`Convention::Unknown`].
    pub fn parse(s: &str) -> Convention {
        Convention::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .unwrap_or(Convention::Unknown)
    }
}

/// What the decoder understood of a record's headers. Every field is optional: a record with
/// no recognised convention is still a dead letter.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Normalized {
    /// The record's first source topic (before any retry-topic or DLT hop).
    pub source_topic: Option<String>,
    pub source_partition: Option<i32>,
    pub source_offset: Option<i64>,
    /// Original record timestamp, epoch ms.
    pub source_timestamp_ms: Option<i64>,
    pub consumer_group: Option<String>,
    /// The exception the application's code (or the deserializer, the converter) threw: the
    /// first exception of the cause chain that is not a framework wrapper such as
    /// `ListenerExecutionFailedException` (`docs/conventions.md`, "Which exception").
    pub error_class: Option<String>,
    /// That exception's own message.
    pub error_message: Option<String>,
    pub stack_trace: Option<String>,
    /// Retries after the first failed attempt (0: failed once, dead-lettered at once), one
    /// meaning across conventions (`docs/conventions.md`); `None` when nothing says.
    pub retry_count: Option<i32>,
    /// An application message id (seed `message_id`, Watermill `_watermill_message_uuid`),
    /// used to link a dead letter that comes back after a replay to its earlier self.
    pub message_id: Option<String>,
    /// When the record was dead-lettered (epoch ms), if a header says so (`failed_at`).
    pub failed_at_ms: Option<i64>,
    /// Problems met while decoding (a header of an unexpected length, text that is not
    /// UTF-8, ...). The record is stored anyway; a non-empty list flags it as malformed.
    pub decode_warnings: Vec<String>,
}

/// Lifecycle of a dead letter in redrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Ingested, nobody has acted on it yet.
    New,
    /// A replay was requested and sits in the outbox.
    ReplayPending,
    /// Re-published; the delivery report came back.
    Replayed,
    /// The replay failed after its retries.
    ReplayFailed,
    /// Re-published, and then the record came back: a later dead letter was linked to this
    /// one by ingest (`docs/replay.md`, "Outcome"). The later one carries the failure now.
    ReFailed,
    /// Soft-deleted: hidden from the default list, restorable until purged by retention.
    Deleted,
}

impl Status {
    pub const ALL: [Status; 6] = [
        Status::New,
        Status::ReplayPending,
        Status::Replayed,
        Status::ReplayFailed,
        Status::ReFailed,
        Status::Deleted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::New => "new",
            Status::ReplayPending => "replay_pending",
            Status::Replayed => "replayed",
            Status::ReplayFailed => "replay_failed",
            Status::ReFailed => "re_failed",
            Status::Deleted => "deleted",
        }
    }

    /// Parses the `as_str` name; `None` for anything else.
    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|x| x.as_str() == s)
    }

    /// True for `replayed`, `replay_failed` and `re_failed`: replayed before, so a replay
    /// "of all matching" (which takes every status but `deleted` and `replay_pending`) would
    /// publish it again. The confirmation page and the CLI's dry run count these.
    pub fn was_replayed(self) -> bool {
        matches!(
            self,
            Status::Replayed | Status::ReplayFailed | Status::ReFailed
        )
    }

    /// The status for people (the UI's badges and status filter): `replay pending`,
    /// `replay failed`, `re-failed` (replayed, then the record came back); the others as
    /// named. The API, the CLI and the URLs keep [`Status::as_str`].
    pub fn label(self) -> &'static str {
        match self {
            Status::New => "new",
            Status::ReplayPending => "replay pending",
            Status::Replayed => "replayed",
            Status::ReplayFailed => "replay failed",
            Status::ReFailed => "re-failed",
            Status::Deleted => "deleted",
        }
    }
}

/// A row of the dead-letter list: what the list page and `GET /api/v1/dead-letters` show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadLetterSummary {
    pub id: i64,
    pub dlq_topic: String,
    pub dlq_partition: i32,
    pub dlq_offset: i64,
    pub source_topic: Option<String>,
    pub source_partition: Option<i32>,
    pub source_offset: Option<i64>,
    pub consumer_group: Option<String>,
    pub error_class: Option<String>,
    /// The error message (the list may show it shortened; the API gives it whole).
    pub error_message: Option<String>,
    pub retry_count: Option<i32>,
    pub status: Status,
    pub convention: Convention,
    /// Error fingerprint (16 lowercase hex chars), see [`crate::fingerprint`].
    pub fingerprint: String,
    /// When it was dead-lettered, epoch ms: the `failed_at` header if present, else the DLQ
    /// record's timestamp, else the ingest time. The list is ordered by this, newest first.
    pub dead_lettered_at_ms: i64,
    /// True when decoding met a problem (see `decode_warnings` on the full record).
    pub malformed: bool,
    /// Its own triage labels, sorted (see [`crate::labels`]).
    #[serde(default)]
    pub labels: Vec<String>,
    /// Its error group's triage labels, sorted.
    #[serde(default)]
    pub group_labels: Vec<String>,
    /// How many times this record has come back after a replay (0: it did not come from a
    /// replay; see [`ReplayLink`]).
    #[serde(default)]
    pub repeat_failures: i32,
    /// Its automation tier (`docs/automation.md`); `None` until the leader's sorter has
    /// sorted it.
    #[serde(default)]
    pub tier: Option<crate::automation::Tier>,
    /// Where it matched the list's free-text search `q`, with an excerpt (`crate::search`);
    /// `None` without `q`, and on pages other than the list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_match: Option<crate::search::SearchMatch>,
}

/// A whole dead letter: the raw record, byte-exact, plus everything normalised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadLetter {
    pub summary: DeadLetterSummary,
    pub record: RawRecord,
    pub normalized: Normalized,
    /// When redrive stored it, epoch ms.
    pub ingested_at_ms: i64,
    /// How many times redrive has replayed it.
    pub replay_count: i32,
    /// Where it came back from, if it arrived from an earlier replay.
    #[serde(default)]
    pub link: Option<ReplayLink>,
    /// Which tier it got, from which rule and why, and its automation state; `None` while
    /// unsorted.
    #[serde(default)]
    pub tiering: Option<crate::automation::TierInfo>,
}

/// How a dead letter that came back after a replay was linked to its earlier self, by
/// ingest in the insert's transaction (`docs/replay.md`, "Outcome").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayLink {
    /// The earlier dead letter (now `re_failed`, unless someone changed it since; it may
    /// have been purged by retention).
    pub earlier_id: i64,
    /// How the link was found.
    pub via: LinkVia,
    /// The replay job whose publish came back, when known.
    pub job_id: Option<String>,
}

/// Which evidence linked a returning dead letter to its earlier self, strongest first; ingest
/// tries them in this order and takes the first that names a replayed dead letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkVia {
    /// The `redrive-idempotency-key` header names one of redrive's outbox rows (one publish).
    IdempotencyKey,
    /// The `redrive-dead-letter-id` header names a replayed dead letter (and, with
    /// `redrive-replay-id`, a job that replayed it).
    DeadLetterId,
    /// The decoded source topic / partition / offset is where a replay published a record.
    PublishedPosition,
    /// The decoded source topic / partition / offset is that of a replayed dead letter (the
    /// framework kept the original record's coordinates).
    SourcePosition,
    /// The application message id (seed `message_id`, Watermill uuid) of a replayed one.
    MessageId,
}

impl LinkVia {
    /// Every kind, strongest first.
    pub const ALL: [LinkVia; 5] = [
        LinkVia::IdempotencyKey,
        LinkVia::DeadLetterId,
        LinkVia::PublishedPosition,
        LinkVia::SourcePosition,
        LinkVia::MessageId,
    ];

    /// The stable name stored in `dead_letters.linked_via`.
    pub fn as_str(self) -> &'static str {
        match self {
            LinkVia::IdempotencyKey => "idempotency_key",
            LinkVia::DeadLetterId => "dead_letter_id",
            LinkVia::PublishedPosition => "published_position",
            LinkVia::SourcePosition => "source_position",
            LinkVia::MessageId => "message_id",
        }
    }

    /// Inverse of [`LinkVia::as_str`].
    pub fn parse(s: &str) -> Option<LinkVia> {
        LinkVia::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// What the detail page says about it.
    pub fn describe(self) -> &'static str {
        match self {
            LinkVia::IdempotencyKey => "its redrive-idempotency-key header",
            LinkVia::DeadLetterId => "its redrive-dead-letter-id header",
            LinkVia::PublishedPosition => "its source offset is where the replay published it",
            LinkVia::SourcePosition => "the same source topic, partition and offset",
            LinkVia::MessageId => "the same message id",
        }
    }
}

/// A dead letter ready to be stored: produced by ingest from a [`RawRecord`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewDeadLetter {
    pub record: RawRecord,
    pub convention: Convention,
    pub normalized: Normalized,
    pub fingerprint: String,
    pub dead_lettered_at_ms: i64,
    pub ingested_at_ms: i64,
}

/// One error group: all dead letters sharing a fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorGroup {
    pub fingerprint: String,
    pub error_class: Option<String>,
    /// One message of the group, as an example.
    pub example_message: Option<String>,
    pub count: i64,
    pub first_seen_ms: i64,
    pub last_seen_ms: i64,
    /// The group's triage labels, sorted (see [`crate::labels`]).
    #[serde(default)]
    pub labels: Vec<String>,
    /// The group's triage note, whole (pages shorten it).
    #[serde(default)]
    pub note: Option<String>,
}

/// One page of a keyset-paginated list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Opaque cursor for the next (older) page; `None` on the last page.
    pub next_cursor: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::Status;

    /// Every status reads as words for people (no underscore), `re_failed` as "re-failed",
    /// and each label is distinct; the machine name round-trips.
    #[test]
    fn statuses_read_as_words() {
        let labels: Vec<&str> = Status::ALL.iter().map(|s| s.label()).collect();
        assert_eq!(
            labels,
            [
                "new",
                "replay pending",
                "replayed",
                "replay failed",
                "re-failed",
                "deleted"
            ]
        );
        for s in Status::ALL {
            assert_eq!(Status::parse(s.as_str()), Some(s));
        }
    }
}
