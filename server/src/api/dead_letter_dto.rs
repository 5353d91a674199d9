//! The public shape of a dead letter in the API: list items, the whole record, headers, the
//! decoded value, tiering and pages, mapped from the core model.

use base64::Engine as _;
use redrive_core::{DeadLetter, DeadLetterSummary, Header};
use serde::Serialize;

use super::rfc3339;

// ---------------------------------------------------------------------------------------------
// DTOs: the public shape of the API

/// One dead letter in a list (`GET /api/v1/dead-letters`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DeadLetterItem {
    pub id: i64,
    pub dlq_topic: String,
    pub dlq_partition: i32,
    pub dlq_offset: i64,
    pub source_topic: Option<String>,
    pub source_partition: Option<i32>,
    pub source_offset: Option<i64>,
    pub consumer_group: Option<String>,
    pub error_class: Option<String>,
    pub error_message: Option<String>,
    pub retry_count: Option<i32>,
    /// `new`, `replay_pending`, `replayed`, `replay_failed`, `re_failed` or `deleted`.
    pub status: &'static str,
    /// The recognised header convention (`spring_dlt`, `kafka_connect`, ..., `unknown`).
    pub convention: &'static str,
    /// Error fingerprint, 16 lowercase hex characters: the error group.
    pub fingerprint: String,
    /// RFC 3339 UTC with milliseconds, e.g. `2026-12-01T06:00:00.123Z`.
    pub dead_lettered_at: Option<String>,
    /// True when decoding the headers met a problem (see `decode_warnings`).
    pub malformed: bool,
    /// Its own triage labels, sorted.
    pub labels: Vec<String>,
    /// Its error group's triage labels, sorted.
    pub group_labels: Vec<String>,
    /// Its automation tier: `transient`, `manual`, `poison` or `archive`; `null` while not
    /// sorted yet (`docs/automation.md`, "Tiers in the UI and API").
    pub tier: Option<&'static str>,
    /// With free text `q`: where it matched and the text around the match (`docs/triage.md`,
    /// "Search"); absent without `q`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched: Option<MatchItem>,
}

/// Where a dead letter matched the free text `q`: `field` is `message`, `stack_trace` or
/// `payload`; `before` + `match` + `after` is an excerpt of that field (plain text, as stored:
/// escape it before putting it in markup), `match` the matched part.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct MatchItem {
    pub field: &'static str,
    pub before: String,
    #[serde(rename = "match")]
    pub matched: String,
    pub after: String,
}

/// How and why a dead letter got its tier, and its automation state (`docs/automation.md`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TieringItem {
    pub tier: &'static str,
    /// The rule that gave it; `null` for the default tier or a poison signal.
    pub rule: Option<String>,
    /// The rule set version used.
    pub rule_version: Option<i64>,
    /// One line: which conditions matched, or why it escalated, was loop-guarded or moved.
    pub reason: String,
    /// When it entered this tier, RFC 3339 UTC.
    pub tier_at: Option<String>,
    /// Automatic replays so far (carried over from its earlier self when it came back).
    pub auto_attempts: i32,
    /// Its rule's `schedule.max_attempts` (transient rules only).
    pub max_attempts: Option<u32>,
    /// When the next automatic replay is due, RFC 3339 UTC; `null`: none is due.
    pub next_attempt_at: Option<String>,
    /// Taken out of automation by the loop guard: a manual replay needs the `approve`
    /// permission and a reason.
    pub loop_guarded: bool,
    /// Moved to `manual` after its automatic attempts were used up.
    pub escalated: bool,
}

impl From<&redrive_core::automation::TierInfo> for TieringItem {
    fn from(t: &redrive_core::automation::TierInfo) -> Self {
        TieringItem {
            tier: t.tier.as_str(),
            rule: t.rule.clone(),
            rule_version: t.rule_version,
            reason: t.reason.clone(),
            tier_at: rfc3339(t.tier_at_ms),
            auto_attempts: t.auto_attempts,
            max_attempts: t.max_attempts,
            next_attempt_at: t.next_attempt_at_ms.and_then(rfc3339),
            loop_guarded: t.loop_guarded,
            escalated: t.escalated,
        }
    }
}

/// A whole dead letter (`GET /api/v1/dead-letters/{id}`): the list fields plus the stack
/// trace, the raw record (base64; JSON `null` for a null key, value or header value) and the
/// bookkeeping.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DeadLetterRecord {
    #[serde(flatten)]
    pub item: DeadLetterItem,
    pub stack_trace: Option<String>,
    /// Timestamp of the original record, RFC 3339 UTC, if a header gave it.
    pub source_timestamp: Option<String>,
    /// Application message id (seed `message_id`, Watermill's uuid), if any.
    pub message_id: Option<String>,
    /// Timestamp of the record in the DLQ topic, RFC 3339 UTC, if it has one.
    pub dlq_timestamp: Option<String>,
    /// When redrive stored it, RFC 3339 UTC.
    pub ingested_at: Option<String>,
    /// How many times redrive has replayed it.
    pub replay_count: i32,
    /// Problems met while decoding the headers; empty for a clean record.
    pub decode_warnings: Vec<String>,
    /// The record key, base64 (standard alphabet, padded); `null` for a null key.
    pub key: Option<String>,
    /// The record value, base64; `null` for a tombstone.
    pub value: Option<String>,
    /// Every header in record order, duplicates kept.
    pub headers: Vec<HeaderItem>,
    /// What became of its replays and what it came back from (`docs/replay.md`, "Outcome").
    pub replay_outcome: crate::api_outcome::ReplayOutcomeItem,
    /// The value decoded with its schema, when it is in the Schema Registry wire format and
    /// `[schema_registry]` is configured; absent otherwise (`docs/payloads.md`). `value` above
    /// is the stored bytes either way.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_schema: Option<ValueSchemaItem>,
    /// Its tier's rule, reason and automation state; `null` while not sorted yet.
    pub tiering: Option<TieringItem>,
}

/// A wire-format value decoded for reading (`docs/payloads.md`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ValueSchemaItem {
    /// The schema id in the value's header (bytes 1..5, big-endian).
    pub schema_id: u32,
    /// `AVRO`, `PROTOBUF` or `JSON`; `null` when the schema could not be fetched.
    pub schema_type: Option<&'static str>,
    /// Protobuf: the full name of the message decoded.
    pub message: Option<String>,
    /// The decoded value (Avro: fields in schema order, unions unwrapped; Protobuf: the
    /// Protobuf JSON mapping); `null` when it could not be decoded or was cut.
    pub decoded: Option<serde_json::Value>,
    /// True when the decoded JSON was longer than the display cap (256 KiB): `decoded` is
    /// then `null`; the raw `value` is whole.
    pub cut: bool,
    /// Why there is no decoded value: `could not fetch (...)` or `does not decode (...)`.
    pub error: Option<String>,
}

impl ValueSchemaItem {
    pub(super) fn new(v: redrive_core::schema::ValueSchema) -> Self {
        let (decoded, message, cut, error) = match v.decoded {
            Ok(d) if d.cut => (None, d.message, true, None),
            Ok(d) => match serde_json::from_str(&d.json) {
                Ok(json) => (Some(json), d.message, false, None),
                Err(e) => (
                    None,
                    d.message,
                    false,
                    Some(format!("does not decode ({e})")),
                ),
            },
            Err(e) => (None, None, false, Some(e)),
        };
        ValueSchemaItem {
            schema_id: v.schema_id,
            schema_type: v.schema_type.map(|t| t.as_str()),
            message,
            decoded,
            cut,
            error,
        }
    }
}

/// One Kafka header.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct HeaderItem {
    pub name: String,
    /// Base64 of the value bytes; `null` for a null-valued header (distinct from `""`).
    pub value: Option<String>,
}

/// A page of dead letters.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DeadLetterPage {
    pub items: Vec<DeadLetterItem>,
    /// Pass as `cursor` to get the next (older) page; `null` on the last page.
    pub next_cursor: Option<String>,
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

impl From<&DeadLetterSummary> for DeadLetterItem {
    fn from(s: &DeadLetterSummary) -> Self {
        DeadLetterItem {
            id: s.id,
            dlq_topic: s.dlq_topic.clone(),
            dlq_partition: s.dlq_partition,
            dlq_offset: s.dlq_offset,
            source_topic: s.source_topic.clone(),
            source_partition: s.source_partition,
            source_offset: s.source_offset,
            consumer_group: s.consumer_group.clone(),
            error_class: s.error_class.clone(),
            error_message: s.error_message.clone(),
            retry_count: s.retry_count,
            status: s.status.as_str(),
            convention: s.convention.as_str(),
            fingerprint: s.fingerprint.clone(),
            dead_lettered_at: rfc3339(s.dead_lettered_at_ms),
            malformed: s.malformed,
            labels: s.labels.clone(),
            group_labels: s.group_labels.clone(),
            tier: s.tier.map(|t| t.as_str()),
            matched: s.search_match.as_ref().map(|m| MatchItem {
                field: m.field.as_str(),
                before: m.before.clone(),
                matched: m.matched.clone(),
                after: m.after.clone(),
            }),
        }
    }
}

impl DeadLetterRecord {
    /// The JSON of `d`, with its replay `chain` (`Store::replay_chain`) read at `now_ms`.
    pub fn new(d: &DeadLetter, chain: &redrive_core::outcome::ReplayChain, now_ms: i64) -> Self {
        let n = &d.normalized;
        DeadLetterRecord {
            item: DeadLetterItem::from(&d.summary),
            stack_trace: n.stack_trace.clone(),
            source_timestamp: n.source_timestamp_ms.and_then(rfc3339),
            message_id: n.message_id.clone(),
            dlq_timestamp: d.record.timestamp_ms.and_then(rfc3339),
            ingested_at: rfc3339(d.ingested_at_ms),
            replay_count: d.replay_count,
            decode_warnings: n.decode_warnings.clone(),
            key: d.record.key.as_deref().map(b64),
            value: d.record.value.as_deref().map(b64),
            headers: d.record.headers.iter().map(HeaderItem::from).collect(),
            replay_outcome: crate::api_outcome::ReplayOutcomeItem::new(
                d,
                chain,
                now_ms,
                redrive_core::outcome::window_ms(),
            ),
            value_schema: None,
            tiering: d.tiering.as_ref().map(TieringItem::from),
        }
    }
}

impl From<&Header> for HeaderItem {
    fn from(h: &Header) -> Self {
        HeaderItem {
            name: h.name.clone(),
            value: h.value.as_deref().map(b64),
        }
    }
}
