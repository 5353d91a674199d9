//! Poison signals: what in a dead letter's own metadata says it can never succeed as it is
//! (`docs/automation.md`, "Poison routing"). Checked before the rules.

use super::matcher::header_text;
use super::rules::MatchInput;

/// Whether the record's own metadata says it can never succeed as it is, and which signal
/// (`docs/automation.md`, "Poison routing"; conventions from `docs/conventions.md`):
/// - the seed/demo convention's `retryable: false` header;
/// - a deserialization failure: an error class ending in `DeserializationException` or
///   `SerializationException` (Spring's `ErrorHandlingDeserializer`, Kafka's
///   deserializers, Connect's converters), or SmallRye's `deserialization-failure-reason`
///   header;
/// - Kafka Connect's `__connect.errors.stage` of a converter (`KEY_CONVERTER`,
///   `VALUE_CONVERTER`, `HEADER_CONVERTER`).
pub fn poison_signal(d: &MatchInput<'_>) -> Option<String> {
    if let Some(v) = header_text(d.headers, "retryable") {
        if v.trim().eq_ignore_ascii_case("false") {
            return Some("header retryable=false".into());
        }
    }
    if let Some(c) = d.error_class {
        let simple = c.rsplit(['.', '$']).next().unwrap_or(c);
        if simple.ends_with("DeserializationException")
            || simple.ends_with("SerializationException")
        {
            return Some(format!("deserialization failure ({c})"));
        }
    }
    if header_text(d.headers, "deserialization-failure-reason").is_some() {
        return Some("deserialization failure (SmallRye deserialization-failure-reason)".into());
    }
    if let Some(stage) = header_text(d.headers, "__connect.errors.stage") {
        if stage.ends_with("_CONVERTER") {
            return Some(format!("Kafka Connect converter failure ({stage})"));
        }
    }
    None
}
