//! The user request the demo sends through Kafka, how the producer makes good and malformed
//! ("poison") ones, and how the agent tells them apart.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::rng::Rng;

/// A well-formed user request: the value of a `user_requests` record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserRequest {
    /// UUID; also the record key. The agent's idempotency key.
    pub message_id: Uuid,
    /// The question for the LLM, e.g. "What is Kafka?".
    pub question: String,
    /// Who asked.
    pub user_id: String,
    /// When it was asked (RFC 3339).
    pub ts: DateTime<Utc>,
}

/// The ways the producer spoils a request on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoisonKind {
    /// The JSON is cut off mid-way.
    TruncatedJson,
    /// Valid JSON without the `question` field.
    MissingField,
    /// `message_id` is not a UUID and `user_id` is a number.
    WrongTypes,
    /// Not text at all: bytes that are not UTF-8.
    Binary,
}

impl PoisonKind {
    const ALL: [PoisonKind; 4] = [
        PoisonKind::TruncatedJson,
        PoisonKind::MissingField,
        PoisonKind::WrongTypes,
        PoisonKind::Binary,
    ];

    /// Stable name, stored in the demo ledger's `produced.kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            PoisonKind::TruncatedJson => "truncated_json",
            PoisonKind::MissingField => "missing_field",
            PoisonKind::WrongTypes => "wrong_types",
            PoisonKind::Binary => "binary",
        }
    }
}

const SUBJECTS: [&str; 12] = [
    "Kafka",
    "a dead letter queue",
    "exponential backoff",
    "an idempotent consumer",
    "a circuit breaker",
    "consumer lag",
    "a transactional outbox",
    "at-least-once delivery",
    "agentic RAG",
    "a vector database",
    "a retry topic",
    "a poison message",
];

/// A fresh, well-formed request.
pub fn new_request(rng: &Rng) -> UserRequest {
    UserRequest {
        message_id: Uuid::new_v4(),
        question: format!("What is {}?", SUBJECTS[rng.below(SUBJECTS.len())]),
        user_id: format!("user-{}", 1 + rng.below(50)),
        ts: Utc::now(),
    }
}

/// The value bytes for `req`, spoiled the `poison` way if given.
pub fn encode(req: &UserRequest, poison: Option<PoisonKind>) -> Vec<u8> {
    let ts = req.ts.to_rfc3339_opts(SecondsFormat::Millis, true);
    match poison {
        None => serde_json::to_vec(req).unwrap_or_default(),
        Some(PoisonKind::TruncatedJson) => {
            let full = format!(
                r#"{{"message_id":"{}","question":"{}","user_id":"{}","ts":"{ts}"}}"#,
                req.message_id, req.question, req.user_id
            );
            // Cut inside the question so the JSON is unterminated.
            let cut = full
                .find("\"question\"")
                .map(|i| i + 16)
                .unwrap_or(full.len() / 2);
            full.as_bytes()[..cut.min(full.len())].to_vec()
        }
        Some(PoisonKind::MissingField) => format!(
            r#"{{"message_id":"{}","user_id":"{}","ts":"{ts}"}}"#,
            req.message_id, req.user_id
        )
        .into_bytes(),
        Some(PoisonKind::WrongTypes) => format!(
            r#"{{"message_id":"req-{}","question":"{}","user_id":{},"ts":"{ts}"}}"#,
            &req.message_id.simple().to_string()[..8],
            req.question,
            req.user_id.trim_start_matches("user-").len()
        )
        .into_bytes(),
        Some(PoisonKind::Binary) => {
            let mut v = vec![0xff, 0xfe, 0x00, 0x7b];
            v.extend_from_slice(req.message_id.as_bytes());
            v.extend_from_slice(&[0xc3, 0x28, 0x80]);
            v
        }
    }
}

/// Decides whether message number `i` (0-based) is poison, so that exactly `ratio` of any
/// prefix is (error diffusion) — the demo shows a steady mix, and a test can count on it.
/// The kind is drawn at random.
pub fn poison_for(i: u64, ratio: f64, rng: &Rng) -> Option<PoisonKind> {
    let r = ratio.clamp(0.0, 1.0);
    let before = (i as f64 * r).floor();
    let after = ((i + 1) as f64 * r).floor();
    (after > before).then(|| PoisonKind::ALL[rng.below(PoisonKind::ALL.len())])
}

/// Why a record's value is not a usable request. Never worth a retry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoisonError {
    /// Not UTF-8, or not JSON.
    #[error("{0}")]
    Decode(String),
    /// JSON, but not a request: a field is missing or of the wrong type.
    #[error("{0}")]
    Validation(String),
}

impl PoisonError {
    /// The `error_class` header value.
    pub fn class(&self) -> &'static str {
        match self {
            PoisonError::Decode(_) => "JsonDecodeError",
            PoisonError::Validation(_) => "ValidationError",
        }
    }
}

/// Parses and validates a record value.
pub fn parse(value: Option<&[u8]>) -> Result<UserRequest, PoisonError> {
    let bytes = value.ok_or_else(|| PoisonError::Decode("the record has no value".into()))?;
    let text = std::str::from_utf8(bytes).map_err(|e| {
        PoisonError::Decode(format!(
            "the value is not UTF-8 text: {e} (byte {})",
            e.valid_up_to()
        ))
    })?;
    let json: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| PoisonError::Decode(format!("the value is not valid JSON: {e}")))?;
    let req: UserRequest = serde_json::from_value(json)
        .map_err(|e| PoisonError::Validation(format!("not a user request: {e}")))?;
    if req.question.trim().is_empty() {
        return Err(PoisonError::Validation(
            "not a user request: `question` is empty".into(),
        ));
    }
    Ok(req)
}

/// The best message id for a record that may be poison: the value's `message_id` if it is a
/// UUID, else the record key if it is one (the producer keys every record by its id).
pub fn message_id_of(value: Option<&[u8]>, key: Option<&[u8]>) -> Option<String> {
    let from_value = value
        .and_then(|v| serde_json::from_slice::<serde_json::Value>(v).ok())
        .and_then(|j| {
            j.get("message_id")
                .and_then(|m| m.as_str())
                .and_then(|s| Uuid::parse_str(s).ok())
        });
    from_value
        .or_else(|| {
            key.and_then(|k| std::str::from_utf8(k).ok())
                .and_then(|s| Uuid::parse_str(s.trim()).ok())
        })
        .map(|u| u.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_requests_round_trip() {
        let rng = Rng::new(Some(1));
        let req = new_request(&rng);
        assert!(req.question.starts_with("What is "));
        let bytes = encode(&req, None);
        assert_eq!(parse(Some(&bytes)).unwrap(), req);
        assert_eq!(
            message_id_of(Some(&bytes), None),
            Some(req.message_id.to_string())
        );
    }

    #[test]
    fn every_poison_kind_is_rejected_with_its_class() {
        let rng = Rng::new(Some(2));
        let req = new_request(&rng);
        let key = req.message_id.to_string();
        let expect = [
            (PoisonKind::TruncatedJson, "JsonDecodeError"),
            (PoisonKind::MissingField, "ValidationError"),
            (PoisonKind::WrongTypes, "ValidationError"),
            (PoisonKind::Binary, "JsonDecodeError"),
        ];
        for (kind, class) in expect {
            let bytes = encode(&req, Some(kind));
            let err = parse(Some(&bytes)).unwrap_err();
            assert_eq!(err.class(), class, "{kind:?}: {err}");
            // The key still names the message, so the dead letter can be linked.
            assert_eq!(
                message_id_of(Some(&bytes), Some(key.as_bytes())),
                Some(key.clone())
            );
        }
        assert_eq!(parse(None).unwrap_err().class(), "JsonDecodeError");
    }

    #[test]
    fn poison_ratio_is_exact_over_any_prefix() {
        let rng = Rng::new(None);
        let n = (0..20)
            .filter(|&i| poison_for(i, 0.25, &rng).is_some())
            .count();
        assert_eq!(n, 5);
        assert!((0..100).all(|i| poison_for(i, 0.0, &rng).is_none()));
        assert!((0..100).all(|i| poison_for(i, 1.0, &rng).is_some()));
    }
}
