//! The parts of an action request that every surface takes — the selection (ids or a filter),
//! the reason, the replay rate and the target topic — parsed and checked once, here, so the
//! UI's server functions (`app`), the JSON API (`server`) and the store cannot disagree on a
//! limit. The store checks the same values again with the same functions (a request that
//! reaches it by another way is held to the same rules).
//!
//! | part | accepted | limit |
//! |---|---|---|
//! | ids | 1 to [`MAX_SELECTION_IDS`] dead-letter ids, sorted and de-duplicated | [`MAX_SELECTION_IDS`] |
//! | filter | the list's query parameters ([`crate::ListQuery::from_pairs`]), `limit` and `cursor` excepted | those of [`crate::filter`] |
//! | reason | free text, trimmed; empty = none | [`crate::actions::MAX_REASON_CHARS`] characters |
//! | rate | whole msgs/s; empty = unthrottled | 1 to [`crate::actions::MAX_RATE_PER_SEC`] |
//! | target topic | a Kafka topic name ([`crate::actions::valid_topic_name`]), trimmed; empty = each record's source topic | 249 bytes |

use serde_json::{Map, Value};

use crate::actions::{valid_topic_name, Selection, MAX_RATE_PER_SEC, MAX_REASON_CHARS};
use crate::filter::FILTER_PARAMS;
use crate::{Filter, ListQuery};

/// Most dead-letter ids one request (API body or UI form) may name; more is a filter's job.
pub const MAX_SELECTION_IDS: usize = 100_000;

/// Why a request part was refused: a sentence saying what to change (shown as it is by the
/// UI and the API, which answer it with 422).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RequestError(pub String);

/// An id selection: non-empty, at most [`MAX_SELECTION_IDS`], sorted and de-duplicated.
pub fn ids(mut ids: Vec<i64>) -> Result<Selection, RequestError> {
    if ids.is_empty() {
        return Err(RequestError(
            "`ids` is empty: name at least one dead letter".into(),
        ));
    }
    if ids.len() > MAX_SELECTION_IDS {
        return Err(RequestError(format!(
            "`ids` names {} dead letters; at most {MAX_SELECTION_IDS} per request (or use a \
             filter)",
            ids.len()
        )));
    }
    ids.sort_unstable();
    ids.dedup();
    Ok(Selection::Ids(ids))
}

/// A filter given as `(name, value)` pairs of the list's query string (`limit` and `cursor`
/// page the list: they are not part of a filter).
pub fn filter_pairs<'a>(
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<Filter, RequestError> {
    let pairs: Vec<(&str, &str)> = pairs.into_iter().collect();
    if let Some((k, _)) = pairs.iter().find(|(k, _)| *k == "limit" || *k == "cursor") {
        return Err(RequestError(format!(
            "`{k}` pages the list; it is not part of a filter"
        )));
    }
    if let Some((k, _)) = pairs.iter().find(|(k, _)| !FILTER_PARAMS.contains(k)) {
        return Err(RequestError(format!(
            "a filter has no `{k}`; its names: {}",
            FILTER_PARAMS.join(", ")
        )));
    }
    ListQuery::from_pairs(pairs)
        .map(|q| q.filter)
        .map_err(|e| RequestError(format!("filter: {e}")))
}

/// A filter given as a JSON object of the list's query parameters: strings as given, numbers
/// and booleans as their text, `null` as "not set"; arrays and objects are refused. Unlike a
/// query string (where an HTML form's empty field means "any"), an empty or blank string
/// that would set nothing is refused: `{"label": ""}` would otherwise widen an action to
/// every dead letter the rest of the filter matches (a CLI `--label ""`).
pub fn filter_json(obj: &Map<String, Value>) -> Result<Filter, RequestError> {
    let mut pairs: Vec<(String, String)> = Vec::with_capacity(obj.len());
    for (k, v) in obj {
        let text = match v {
            Value::Null => continue,
            Value::String(s) if sets_nothing(k, s) => {
                return Err(RequestError(format!(
                    "filter `{k}` is empty; leave it out (or send null) to match any {k}"
                )))
            }
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            _ => {
                return Err(RequestError(format!(
                    "filter `{k}` must be a string (as in the list's query string)"
                )))
            }
        };
        pairs.push((k.clone(), text));
    }
    filter_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
}

/// Whether the filter parameter `name` = `value`, blank, would set nothing (a known name: an
/// unknown one is refused by [`filter_pairs`] with its own message).
fn sets_nothing(name: &str, value: &str) -> bool {
    if !value.trim().is_empty() {
        return false;
    }
    FILTER_PARAMS.contains(&name)
        && ListQuery::from_pairs([(name, value)]).is_ok_and(|q| q.filter == Filter::default())
}

/// Exactly one of `ids` ([`ids`]) and `filter` ([`filter_json`]).
pub fn selection(
    ids_given: Option<Vec<i64>>,
    filter: Option<&Map<String, Value>>,
) -> Result<Selection, RequestError> {
    match (ids_given, filter) {
        (Some(_), Some(_)) | (None, None) => Err(RequestError(
            "give exactly one of `ids` (a list of dead-letter ids) and `filter` (an object with \
             the list's filter parameters)"
                .into(),
        )),
        (Some(list), None) => ids(list),
        (None, Some(obj)) => filter_json(obj).map(Selection::Filter),
    }
}

/// The reason: trimmed, `None` when empty, at most [`MAX_REASON_CHARS`] characters.
pub fn reason(text: Option<&str>) -> Result<Option<String>, RequestError> {
    let Some(r) = text.map(str::trim).filter(|r| !r.is_empty()) else {
        return Ok(None);
    };
    if r.chars().count() > MAX_REASON_CHARS {
        return Err(RequestError(format!(
            "the reason is longer than {MAX_REASON_CHARS} characters; shorten it"
        )));
    }
    Ok(Some(r.to_string()))
}

/// A replay rate, msgs/s: `None` = unthrottled, else 1 to [`MAX_RATE_PER_SEC`].
pub fn rate(rate: Option<u32>) -> Result<Option<u32>, RequestError> {
    match rate {
        Some(r) if r == 0 || r > MAX_RATE_PER_SEC => Err(RequestError(format!(
            "the rate must be from 1 to {MAX_RATE_PER_SEC} msgs/s, or empty for no limit (got \
             {r})"
        ))),
        other => Ok(other),
    }
}

/// A replay rate typed in a form field: empty = unthrottled, else as [`rate`].
pub fn rate_text(text: &str) -> Result<Option<u32>, RequestError> {
    let t = text.trim();
    if t.is_empty() {
        return Ok(None);
    }
    let r = t.parse::<u32>().map_err(|_| {
        RequestError(format!(
            "the rate limit must be a whole number of messages per second from 1 to \
             {MAX_RATE_PER_SEC}, or empty for no limit"
        ))
    })?;
    rate(Some(r))
}

/// The target topic override: trimmed, `None` when absent or empty (each record's own source
/// topic), else a legal Kafka topic name.
pub fn target_topic(text: Option<&str>) -> Result<Option<String>, RequestError> {
    match text.map(str::trim) {
        None | Some("") => Ok(None),
        Some(t) if valid_topic_name(t) => Ok(Some(t.to_string())),
        Some(t) => Err(RequestError(format!(
            "`{t}` is not a Kafka topic name (1 to 249 of a-z, A-Z, 0-9, `.`, `_`, `-`)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selections() {
        assert_eq!(ids(vec![3, 1, 3]), Ok(Selection::Ids(vec![1, 3])));
        assert!(ids(vec![]).is_err());
        assert!(ids(vec![1; MAX_SELECTION_IDS + 1]).is_err());
        assert!(selection(None, None).is_err());
        let obj: Map<String, Value> =
            serde_json::from_str(r#"{"source_topic": "orders", "from": 1796104800000, "q": null}"#)
                .unwrap();
        assert!(selection(Some(vec![1]), Some(&obj)).is_err());
        match selection(None, Some(&obj)) {
            Ok(Selection::Filter(f)) => {
                assert_eq!(f.source_topic.as_deref(), Some("orders"));
                assert_eq!(f.from_ms, Some(1_796_104_800_000));
            }
            other => panic!("{other:?}"),
        }
        for bad in [
            r#"{"colour": "red"}"#,
            r#"{"limit": "5"}"#,
            r#"{"status": ["new"]}"#,
        ] {
            let obj: Map<String, Value> = serde_json::from_str(bad).unwrap();
            assert!(selection(None, Some(&obj)).is_err(), "{bad}");
        }
        // An unknown name is told the filter's names, not the list's paging ones.
        let obj: Map<String, Value> = serde_json::from_str(r#"{"topic": "x"}"#).unwrap();
        let e = selection(None, Some(&obj)).unwrap_err().0;
        assert!(
            e.contains("`topic`") && e.contains("came_back_from_job"),
            "{e}"
        );
        assert!(!e.contains("limit") && !e.contains("cursor"), "{e}");
    }

    /// An empty value in a JSON filter is refused, not dropped: `--label ""` would otherwise
    /// delete every dead letter the rest of the filter matches. A value the filter keeps
    /// (a topic of one newline, byte for byte) and a null are not refused.
    #[test]
    fn empty_filter_values_are_refused() {
        for bad in [
            r#"{"label": ""}"#,
            r#"{"source_topic": "", "status": "new"}"#,
            r#"{"q": "   "}"#,
            r#"{"fingerprint": ""}"#,
            r#"{"tier": ""}"#,
        ] {
            let obj: Map<String, Value> = serde_json::from_str(bad).unwrap();
            let e = selection(None, Some(&obj)).unwrap_err().0;
            assert!(e.contains("is empty; leave it out"), "{bad}: {e}");
        }
        for good in [
            r#"{"source_topic": "\n"}"#,
            r#"{"label": null, "status": "new"}"#,
        ] {
            let obj: Map<String, Value> = serde_json::from_str(good).unwrap();
            assert!(selection(None, Some(&obj)).is_ok(), "{good}");
        }
    }

    #[test]
    fn reason_rate_and_target() {
        assert_eq!(reason(Some("  ")), Ok(None));
        assert_eq!(reason(Some(" why ")), Ok(Some("why".into())));
        assert!(reason(Some(&"x".repeat(MAX_REASON_CHARS + 1))).is_err());
        assert_eq!(rate(None), Ok(None));
        assert!(rate(Some(0)).is_err());
        assert!(rate(Some(MAX_RATE_PER_SEC + 1)).is_err());
        assert_eq!(rate_text(" 50 "), Ok(Some(50)));
        assert_eq!(rate_text(""), Ok(None));
        assert!(rate_text("fast").is_err());
        assert!(rate_text("0").is_err());
        assert_eq!(target_topic(Some(" orders ")), Ok(Some("orders".into())));
        assert_eq!(target_topic(Some("")), Ok(None));
        assert!(target_topic(Some("a b")).is_err());
    }
}
