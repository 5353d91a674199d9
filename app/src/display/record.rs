//! Stored records cut down to what the pages show: list rows, error groups, filter
//! suggestions and the detail page. Done on the server before anything is rendered or
//! serialised into the hydration data, so a page's size and the work to build it follow the
//! caps, not the record.

use redrive_core::{DeadLetter, DeadLetterSummary, ErrorGroup, Normalized};

use super::caps::{
    ERROR_MESSAGE_BYTES, NAME_BYTES, ROW_MESSAGE_BYTES, STACK_TRACE_BYTES, STACK_TRACE_LINES,
    SUGGESTION_BYTES, WARNINGS_SHOWN, WARNING_BYTES,
};
use super::headers::HeaderRows;
use super::payload::{self, Payload};
use super::visible::{has_hidden, name, shown, shown_lines, Lines};
use crate::api::DeadLetterDetail;

/// A text cut at `max` bytes with `…` when cut, line breaks kept (for messages whose first line
/// a row shows and whose beginning is in its tooltip).
fn message(s: &str, max: usize) -> String {
    let m = shown(s, max, Lines::Keep);
    if m.cut {
        m.text + "…"
    } else {
        m.text
    }
}

fn opt_name(s: &Option<String>) -> Option<String> {
    s.as_deref().map(|s| name(s, NAME_BYTES))
}

/// A list row: names at [`NAME_BYTES`], the message at [`ROW_MESSAGE_BYTES`].
pub fn summary_row(s: &DeadLetterSummary) -> DeadLetterSummary {
    DeadLetterSummary {
        id: s.id,
        dlq_topic: name(&s.dlq_topic, NAME_BYTES),
        dlq_partition: s.dlq_partition,
        dlq_offset: s.dlq_offset,
        source_topic: opt_name(&s.source_topic),
        source_partition: s.source_partition,
        source_offset: s.source_offset,
        consumer_group: opt_name(&s.consumer_group),
        error_class: opt_name(&s.error_class),
        error_message: s
            .error_message
            .as_deref()
            .map(|m| message(m, ROW_MESSAGE_BYTES)),
        retry_count: s.retry_count,
        status: s.status,
        convention: s.convention,
        fingerprint: name(&s.fingerprint, NAME_BYTES),
        dead_lettered_at_ms: s.dead_lettered_at_ms,
        malformed: s.malformed,
        // Bounded by the label rules (at most 20 of at most 64 characters each).
        labels: s.labels.clone(),
        group_labels: s.group_labels.clone(),
        repeat_failures: s.repeat_failures,
        tier: s.tier,
        search_match: s.search_match.as_ref().map(search_excerpt),
    }
}

/// A search match's excerpt as a list row shows it: on one line (breaks and tabs as spaces),
/// hidden characters marked, each part within [`NAME_BYTES`] (the store bounds them at
/// 40, 256 and 80 characters already).
fn search_excerpt(m: &redrive_core::search::SearchMatch) -> redrive_core::search::SearchMatch {
    let one_line = |s: &str| {
        let flat = s.replace(['\n', '\r', '\t'], " ");
        shown(&flat, NAME_BYTES, Lines::Mark).text
    };
    redrive_core::search::SearchMatch {
        field: m.field,
        before: one_line(&m.before),
        matched: one_line(&m.matched),
        after: one_line(&m.after),
        cut_before: m.cut_before,
        cut_after: m.cut_after,
    }
}

/// An error group row: the class at [`NAME_BYTES`], the example at [`ROW_MESSAGE_BYTES`].
pub fn group_row(g: &ErrorGroup) -> ErrorGroup {
    ErrorGroup {
        fingerprint: name(&g.fingerprint, NAME_BYTES),
        error_class: opt_name(&g.error_class),
        example_message: g
            .example_message
            .as_deref()
            .map(|m| message(m, ROW_MESSAGE_BYTES)),
        count: g.count,
        first_seen_ms: g.first_seen_ms,
        last_seen_ms: g.last_seen_ms,
        labels: g.labels.clone(),
        note: g.note.as_deref().map(|m| message(m, ROW_MESSAGE_BYTES)),
    }
}

/// Filter suggestions: only values that filter exactly as shown (no longer than
/// [`SUGGESTION_BYTES`], no hidden characters); anything else is typed by hand.
pub fn suggestions(values: Vec<String>) -> Vec<String> {
    values
        .into_iter()
        .filter(|v| v.len() <= SUGGESTION_BYTES && !has_hidden(v, Lines::Mark))
        .collect()
}

/// The detail page's data for `d`, every part within its display cap.
pub fn detail(d: &DeadLetter) -> DeadLetterDetail {
    let n = &d.normalized;
    let warnings = n
        .decode_warnings
        .iter()
        .take(WARNINGS_SHOWN)
        .map(|w| message(w, WARNING_BYTES))
        .collect();
    DeadLetterDetail {
        summary: summary_row(&d.summary),
        normalized: Normalized {
            source_topic: opt_name(&n.source_topic),
            source_partition: n.source_partition,
            source_offset: n.source_offset,
            source_timestamp_ms: n.source_timestamp_ms,
            consumer_group: opt_name(&n.consumer_group),
            error_class: opt_name(&n.error_class),
            error_message: None,
            stack_trace: None,
            retry_count: n.retry_count,
            message_id: opt_name(&n.message_id),
            failed_at_ms: n.failed_at_ms,
            decode_warnings: warnings,
        },
        error_message: n
            .error_message
            .as_deref()
            .map(|m| shown(m, ERROR_MESSAGE_BYTES, Lines::Keep)),
        stack_trace: n
            .stack_trace
            .as_deref()
            .map(|t| shown_lines(t, STACK_TRACE_BYTES, STACK_TRACE_LINES)),
        warnings_total: n.decode_warnings.len(),
        timestamp_ms: d.record.timestamp_ms,
        headers: HeaderRows::new(&d.record.headers),
        key: Payload::from_bytes(d.record.key.as_deref(), payload::KEY),
        value: Payload::from_bytes(d.record.value.as_deref(), payload::VALUE),
        ingested_at_ms: d.ingested_at_ms,
        replay_count: d.replay_count,
        dlq_topic_value: d.summary.dlq_topic.clone(),
        source_topic_value: n.source_topic.clone(),
        link: d.link.clone(),
        // The reason quotes record fields (error class, topics): bounded like a message.
        tiering: d.tiering.clone().map(|mut t| {
            t.reason = message(&t.reason, ROW_MESSAGE_BYTES * 4);
            t
        }),
        chain: Default::default(),
        verdict: None,
        value_schema: None,
    }
}
