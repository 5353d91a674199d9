//! The record a replay publishes: the dead letter's key, value and application headers,
//! byte-exact and in order, minus the recognised convention's diagnostics (unless asked to
//! forward them), plus redrive's own headers (`docs/invariants.md`, "Replayed records").

use crate::conventions::diagnostic_header;
use crate::model::{Convention, Header};

/// The replay job's id (UUID).
pub const HEADER_REPLAY_ID: &str = "redrive-replay-id";
/// The dead letter's id in redrive's store (decimal).
pub const HEADER_DEAD_LETTER_ID: &str = "redrive-dead-letter-id";
/// How many times this dead letter has been replayed, this replay included (decimal).
pub const HEADER_REPLAY_COUNT: &str = "redrive-replay-count";
/// The user who requested the replay.
pub const HEADER_REPLAYED_BY: &str = "redrive-replayed-by";
/// The outbox row's UUID: the same on every publish of that row (retries, a publish repeated
/// after a crash), so a consumer can drop a duplicate.
pub const HEADER_IDEMPOTENCY_KEY: &str = "redrive-idempotency-key";

/// The edited version published (decimal, 1, 2, ...), only on a record that is an edit of its
/// dead letter (`docs/replay.md`, "Edit and replay"); absent when the original is published.
pub const HEADER_EDIT_VERSION: &str = "redrive-edit-version";

/// Prefix of every header redrive writes. Such headers on a dead letter come from an earlier
/// replay that failed again; they are replaced, never repeated.
pub const REDRIVE_HEADER_PREFIX: &str = "redrive-";

/// What redrive adds to one published record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReplayIds<'a> {
    pub(crate) job_id: &'a str,
    pub(crate) dead_letter_id: i64,
    /// The dead letter's replay count after this replay.
    pub(crate) replay_count: i64,
    pub(crate) replayed_by: &'a str,
    pub(crate) idempotency_key: &'a str,
    /// The edited version published; 0 = the original (no [`HEADER_EDIT_VERSION`]).
    pub(crate) edit_version: i32,
}

/// The headers a replay keeps of `original`, in order (duplicates and null values kept):
/// without the diagnostics of `convention` (unless `forward_diagnostics`) and without earlier
/// `redrive-*` headers. What a transform script sees as `record.headers`.
pub(crate) fn application_headers(
    original: &[Header],
    convention: Convention,
    forward_diagnostics: bool,
) -> Vec<Header> {
    original
        .iter()
        .filter(|h| !h.name.starts_with(REDRIVE_HEADER_PREFIX))
        .filter(|h| forward_diagnostics || !diagnostic_header(convention, &h.name))
        .cloned()
        .collect()
}

/// The headers to publish: `original` in order (duplicates and null values kept) without the
/// diagnostics of `convention` (unless `forward_diagnostics`) and without earlier `redrive-*`
/// headers, then redrive's five headers (six for an edited version: [`HEADER_EDIT_VERSION`]).
pub(crate) fn replay_headers(
    original: &[Header],
    convention: Convention,
    forward_diagnostics: bool,
    ids: &ReplayIds<'_>,
) -> Vec<Header> {
    let mut out = application_headers(original, convention, forward_diagnostics);
    let text = |name: &str, value: String| Header {
        name: name.to_string(),
        value: Some(value.into_bytes()),
    };
    out.push(text(HEADER_REPLAY_ID, ids.job_id.to_string()));
    out.push(text(HEADER_DEAD_LETTER_ID, ids.dead_letter_id.to_string()));
    out.push(text(HEADER_REPLAY_COUNT, ids.replay_count.to_string()));
    out.push(text(HEADER_REPLAYED_BY, ids.replayed_by.to_string()));
    out.push(text(
        HEADER_IDEMPOTENCY_KEY,
        ids.idempotency_key.to_string(),
    ));
    if ids.edit_version > 0 {
        out.push(text(HEADER_EDIT_VERSION, ids.edit_version.to_string()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(name: &str, value: Option<&[u8]>) -> Header {
        Header {
            name: name.to_string(),
            value: value.map(<[u8]>::to_vec),
        }
    }

    #[test]
    fn keeps_application_headers_in_order_and_adds_ours() {
        let original = vec![
            h("traceparent", Some(b"00-abc")),
            h("kafka_dlt-original-topic", Some(b"orders")),
            h("x-tenant", None),
            h("x-tenant", Some(&[0xff, 0x00])),
            h("kafka_dlt-exception-message", Some(b"boom")),
            h("redrive-replay-id", Some(b"old-job")),
            h("redrive-idempotency-key", Some(b"old-key")),
        ];
        let ids = ReplayIds {
            job_id: "job-1",
            dead_letter_id: 42,
            replay_count: 2,
            replayed_by: "ann",
            idempotency_key: "5f0c6f4e-2b1d-4c1e-9a55-0d3b1f2e6a77",
            edit_version: 0,
        };
        let got = replay_headers(&original, Convention::SpringDlt, false, &ids);
        let names: Vec<&str> = got.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "traceparent",
                "x-tenant",
                "x-tenant",
                HEADER_REPLAY_ID,
                HEADER_DEAD_LETTER_ID,
                HEADER_REPLAY_COUNT,
                HEADER_REPLAYED_BY,
                HEADER_IDEMPOTENCY_KEY,
            ]
        );
        assert_eq!(got[1].value, None);
        assert_eq!(got[2].value.as_deref(), Some(&[0xff, 0x00][..]));
        assert_eq!(got[3].value.as_deref(), Some(&b"job-1"[..]));
        assert_eq!(got[4].value.as_deref(), Some(&b"42"[..]));
        assert_eq!(got[5].value.as_deref(), Some(&b"2"[..]));
        assert_eq!(got[6].value.as_deref(), Some(&b"ann"[..]));

        let forwarded = replay_headers(&original, Convention::SpringDlt, true, &ids);
        assert_eq!(
            forwarded.len(),
            5 + 5,
            "diagnostics kept, old redrive-* still replaced"
        );
        assert_eq!(forwarded[1].name, "kafka_dlt-original-topic");
    }
}
