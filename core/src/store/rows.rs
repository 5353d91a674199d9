//! Rows as the database returns them, and their conversion to the model. The structs only use
//! types both drivers decode (`i32`, `i64`, `String`, `Vec<u8>`, `Option` of those); anything stored that
//! does not parse becomes [`StoreError::Corrupt`], never a panic.

use super::codec::{decode_headers, decode_warnings};
use super::outcome::LinkColumns;
use super::tiers::TieringColumns;
use super::StoreError;
use crate::model::{
    Convention, DeadLetter, DeadLetterSummary, ErrorGroup, Normalized, RawRecord, Status,
};

/// The columns of [`super::sql::SUMMARY_COLUMNS`].
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct SummaryRow {
    id: i64,
    dlq_topic: String,
    dlq_partition: i32,
    dlq_offset: i64,
    source_topic: Option<String>,
    source_partition: Option<i32>,
    source_offset: Option<i64>,
    consumer_group: Option<String>,
    error_class: Option<String>,
    error_message: Option<String>,
    retry_count: Option<i32>,
    status: String,
    convention: String,
    fingerprint: String,
    dead_lettered_at_ms: i64,
    decode_warnings: String,
    repeat_failures: i32,
    tier: Option<String>,
}

/// The columns of [`super::sql::FULL_COLUMNS`].
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct FullRow {
    #[sqlx(flatten)]
    summary: SummaryRow,
    source_timestamp_ms: Option<i64>,
    stack_trace: Option<String>,
    message_id: Option<String>,
    failed_at_ms: Option<i64>,
    record_timestamp_ms: Option<i64>,
    ingested_at_ms: i64,
    replay_count: i32,
    headers: String,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
}

/// One row of [`super::sql::get`]: the dead letter, its `dead_letter_tiers` row and its
/// `dead_letter_links` row (the last two all NULL when absent).
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct GetRow {
    #[sqlx(flatten)]
    pub(crate) full: FullRow,
    #[sqlx(flatten)]
    pub(crate) tiering: TieringColumns,
    #[sqlx(flatten)]
    pub(crate) link: LinkColumns,
}

/// One row of [`super::sql::error_groups`].
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct GroupRow {
    fingerprint: String,
    n: i64,
    first_seen_ms: i64,
    last_seen_ms: i64,
    error_class: Option<String>,
    error_message: Option<String>,
}

fn status(s: &str) -> Result<Status, StoreError> {
    Status::parse(s).ok_or_else(|| StoreError::Corrupt(format!("unknown status `{s}`")))
}

impl SummaryRow {
    /// Errors: `Corrupt` for an unknown status or unreadable decode warnings.
    pub(crate) fn into_summary(self) -> Result<DeadLetterSummary, StoreError> {
        let warnings = decode_warnings(&self.decode_warnings)?;
        Ok(DeadLetterSummary {
            id: self.id,
            dlq_topic: self.dlq_topic,
            dlq_partition: self.dlq_partition,
            dlq_offset: self.dlq_offset,
            source_topic: self.source_topic,
            source_partition: self.source_partition,
            source_offset: self.source_offset,
            consumer_group: self.consumer_group,
            error_class: self.error_class,
            error_message: self.error_message,
            retry_count: self.retry_count,
            status: status(&self.status)?,
            convention: Convention::parse(&self.convention),
            fingerprint: self.fingerprint,
            dead_lettered_at_ms: self.dead_lettered_at_ms,
            malformed: !warnings.is_empty(),
            labels: Vec::new(),
            group_labels: Vec::new(),
            repeat_failures: self.repeat_failures,
            tier: self
                .tier
                .as_deref()
                .and_then(crate::automation::Tier::parse),
            search_match: None,
        })
    }
}

impl FullRow {
    /// Errors: `Corrupt` for an unknown status, unreadable headers or decode warnings.
    pub(crate) fn into_dead_letter(self) -> Result<DeadLetter, StoreError> {
        let headers = decode_headers(&self.headers, self.stack_trace.as_deref())?;
        let warnings = decode_warnings(&self.summary.decode_warnings)?;
        let s = &self.summary;
        let record = RawRecord {
            dlq_topic: s.dlq_topic.clone(),
            dlq_partition: s.dlq_partition,
            dlq_offset: s.dlq_offset,
            timestamp_ms: self.record_timestamp_ms,
            key: self.key,
            value: self.value,
            headers,
        };
        let normalized = Normalized {
            source_topic: s.source_topic.clone(),
            source_partition: s.source_partition,
            source_offset: s.source_offset,
            source_timestamp_ms: self.source_timestamp_ms,
            consumer_group: s.consumer_group.clone(),
            error_class: s.error_class.clone(),
            error_message: s.error_message.clone(),
            stack_trace: self.stack_trace,
            retry_count: s.retry_count,
            message_id: self.message_id,
            failed_at_ms: self.failed_at_ms,
            decode_warnings: warnings,
        };
        Ok(DeadLetter {
            summary: self.summary.into_summary()?,
            record,
            normalized,
            ingested_at_ms: self.ingested_at_ms,
            replay_count: self.replay_count,
            // From their own tables (`GetRow`).
            link: None,
            tiering: None,
        })
    }
}

impl From<GroupRow> for ErrorGroup {
    fn from(g: GroupRow) -> ErrorGroup {
        ErrorGroup {
            fingerprint: g.fingerprint,
            error_class: g.error_class,
            example_message: g.error_message,
            count: g.n,
            first_seen_ms: g.first_seen_ms,
            last_seen_ms: g.last_seen_ms,
            labels: Vec::new(),
            note: None,
        }
    }
}
