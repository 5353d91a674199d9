//! The one definition of "which dead letters": parsed once at the edge (URL query, JSON body,
//! form) into [`Filter`], and used as-is by the list page, the JSON API and the store, so that
//! what a page shows and what an action touches can never disagree.

use base64::Engine;
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::automation::Tier;
use crate::model::Status;

/// Largest page the list and the API serve.
pub const MAX_LIMIT: u32 = 500;
/// Page size when none is asked for.
pub const DEFAULT_LIMIT: u32 = 50;

/// Which dead letters to show or act on. Every field narrows the set; `Default` is "all live
/// dead letters" (every status but `deleted`).
///
/// Query-string names (the page URL, `GET /api/v1/dead-letters`, and JSON bodies) are the field
/// names: `fingerprint`, `error_class`, `q`, `source_topic`, `dlq_topic`, `consumer_group`,
/// `status`, `from`, `to`, `label`, `unlabelled`, `came_back`, `tier`, `replay_job`,
/// `came_back_from_job`. Times accept RFC 3339 (`2026-12-01T06:00:00Z`), a browser's
/// `datetime-local` value (`2026-12-01T06:00`, taken as UTC), a date (`2026-12-01`) or epoch ms.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Filter {
    /// Exact error fingerprint (an error group).
    pub fingerprint: Option<String>,
    /// Exact error class, e.g. `java.lang.IllegalStateException`.
    pub error_class: Option<String>,
    /// Free text, matched case-insensitively as a substring of the error message, the first
    /// 8 KiB of the stack trace or the first 8 KiB of a text payload (`crate::search`; at
    /// most [`crate::search::MAX_QUERY_CHARS`] characters).
    pub q: Option<String>,
    pub source_topic: Option<String>,
    pub dlq_topic: Option<String>,
    pub consumer_group: Option<String>,
    /// `None` means every status except `deleted`.
    pub status: Option<Status>,
    /// Inclusive lower bound on `dead_lettered_at`, epoch ms.
    pub from_ms: Option<i64>,
    /// Exclusive upper bound on `dead_lettered_at`, epoch ms.
    pub to_ms: Option<i64>,
    /// Has this triage label, on the dead letter itself or on its error group (exact match,
    /// normalised by [`crate::labels::parse_label`]).
    #[serde(default)]
    pub label: Option<String>,
    /// Has no label at all: none of its own and none on its error group (query value
    /// `true`, `1`, `yes` or `on`, as a checkbox sends it).
    #[serde(default)]
    pub unlabelled: bool,
    /// Came back after a replay: linked by ingest to an earlier dead letter whose replay
    /// failed again (`docs/replay.md`, "Outcome"; query value as for `unlabelled`).
    #[serde(default)]
    pub came_back: bool,
    /// In this automation tier (`transient`, `manual`, `poison`, `archive`), or not sorted
    /// yet (`unsorted`; `docs/automation.md`, "Tiers in the UI and API"). `None` means every
    /// tier but `archive`: the archive tier is out of the default views, as `deleted` is
    /// out of them without a `status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<TierFilter>,
    /// Taken by this replay job: one of its outbox rows is the dead letter's (the job page's
    /// "Dead letters this replay took"). A job id as the job page shows it, at most
    /// [`MAX_JOB_ID_CHARS`] characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_job: Option<String>,
    /// Came back after this replay job published it: the new dead letters ingest linked to
    /// one of the job's outbox rows (`outbox.refailed_by_id`, the first come-back of each:
    /// what the job's "Came back: N of M published" counts; `docs/replay.md`, "Outcome").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub came_back_from_job: Option<String>,
    /// Only dead letters of these DLQ topics: the acting user's topic scope, resolved against
    /// the stored DLQ topics (`Store::limit_to_scope`, `crate::permission`). Never a query
    /// parameter, never shown in a URL ([`Filter::to_pairs`]); kept when a filter is stored
    /// (a resumed bulk action stays in its user's scope). `None`: every topic; empty: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dlq_topic_in: Option<Vec<String>>,
}

/// The `tier` filter's value: one tier, or the dead letters the sorter has not reached yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TierFilter {
    Transient,
    Manual,
    Poison,
    Archive,
    /// `dead_letters.tier` NULL: stored before the sorter reached it (or before migration
    /// 0022).
    Unsorted,
}

impl TierFilter {
    /// Every value, in the order the filter form lists them.
    pub const ALL: [TierFilter; 5] = [
        TierFilter::Transient,
        TierFilter::Manual,
        TierFilter::Poison,
        TierFilter::Archive,
        TierFilter::Unsorted,
    ];

    /// The query-string value.
    pub fn as_str(self) -> &'static str {
        match self.tier() {
            Some(t) => t.as_str(),
            None => "unsorted",
        }
    }

    /// Parses [`TierFilter::as_str`]'s values.
    pub fn parse(s: &str) -> Option<TierFilter> {
        TierFilter::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// The tier, `None` for `unsorted`.
    pub fn tier(self) -> Option<Tier> {
        match self {
            TierFilter::Transient => Some(Tier::Transient),
            TierFilter::Manual => Some(Tier::Manual),
            TierFilter::Poison => Some(Tier::Poison),
            TierFilter::Archive => Some(Tier::Archive),
            TierFilter::Unsorted => None,
        }
    }
}

/// A list request: the filter plus pagination (`limit` ≤ [`MAX_LIMIT`], `cursor`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListQuery {
    pub filter: Filter,
    pub limit: u32,
    pub cursor: Option<Cursor>,
}

/// A position in the list ordered by `(dead_lettered_at DESC, id DESC)`: the next page holds
/// the rows strictly after it. Serialised as URL-safe base64 of `"<ms>:<id>"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub dead_lettered_at_ms: i64,
    pub id: i64,
}

/// Longest `replay_job` / `came_back_from_job` value (a job id is a 36-character UUID).
pub const MAX_JOB_ID_CHARS: usize = 64;

/// Why a filter or list request was refused; the message is meant for the person who sent it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    #[error("unknown parameter `{0}`; known: fingerprint, error_class, q, source_topic, dlq_topic, consumer_group, status, from, to, label, unlabelled, came_back, tier, replay_job, came_back_from_job, limit, cursor")]
    UnknownParameter(String),
    #[error("parameter `{0}` is given more than once")]
    Repeated(String),
    #[error(
        "`status` must be one of new, replay_pending, replayed, replay_failed, re_failed, deleted (got `{0}`)"
    )]
    BadStatus(String),
    #[error("`{name}` is not a time (use RFC 3339 like 2026-12-01T06:00:00Z, a date, or epoch ms): `{value}`{}", plus_hint(value))]
    BadTime { name: String, value: String },
    #[error("`limit` must be a whole number from 1 to {MAX_LIMIT} (got `{0}`)")]
    BadLimit(String),
    #[error("`cursor` is not one this server gave out")]
    BadCursor,
    #[error("`from` must be before `to`")]
    EmptyRange,
    #[error("`label`: {0}")]
    BadLabel(crate::labels::LabelError),
    /// A yes/no parameter (`unlabelled`, `came_back`) with another value: (name, value).
    #[error("`{0}` must be true or false (got `{1}`)")]
    BadFlag(&'static str, String),
    #[error("`tier` must be one of transient, manual, poison, archive, unsorted (got `{0}`)")]
    BadTier(String),
    #[error("`label` and `unlabelled` contradict each other: give one of them")]
    LabelConflict,
    /// A `replay_job` or `came_back_from_job` that cannot be a job id: (name, value).
    #[error("`{0}` is a replay job id of at most {MAX_JOB_ID_CHARS} characters without spaces (got `{1}`)")]
    BadJobId(&'static str, String),
    /// `q` longer than [`crate::search::MAX_QUERY_CHARS`] characters (its length).
    #[error("`q` is a search term of at most {max} characters (got {0})", max = crate::search::MAX_QUERY_CHARS)]
    QueryTooLong(usize),
}

impl Cursor {
    pub fn encode(&self) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(format!("{}:{}", self.dead_lettered_at_ms, self.id))
    }

    pub fn decode(s: &str) -> Result<Cursor, FilterError> {
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(s.trim())
            .map_err(|_| FilterError::BadCursor)?;
        let text = String::from_utf8(bytes).map_err(|_| FilterError::BadCursor)?;
        let (ms, id) = text.split_once(':').ok_or(FilterError::BadCursor)?;
        Ok(Cursor {
            dead_lettered_at_ms: ms.parse().map_err(|_| FilterError::BadCursor)?,
            id: id.parse().map_err(|_| FilterError::BadCursor)?,
        })
    }
}

/// For a time whose UTC offset's `+` arrived as a space (a `+` in a query string is a
/// space, `%2B` is a `+`): how to write it.
fn plus_hint(value: &str) -> &'static str {
    let offset_as_space = value
        .trim()
        .rsplit_once(' ')
        .is_some_and(|(_, tail)| tail.len() == 5 && tail.as_bytes()[2] == b':');
    if offset_as_space {
        "; in a URL, write the offset's `+` as `%2B` (or use `Z` for UTC)"
    } else {
        ""
    }
}

/// Parses a time parameter (see [`Filter`] for the accepted forms) into epoch ms.
pub fn parse_time(name: &str, value: &str) -> Result<i64, FilterError> {
    let v = value.trim();
    let bad = || FilterError::BadTime {
        name: name.to_string(),
        value: value.to_string(),
    };
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        return v.parse().map_err(|_| bad());
    }
    if let Ok(t) = DateTime::parse_from_rfc3339(v) {
        return Ok(t.timestamp_millis());
    }
    for fmt in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(t) = NaiveDateTime::parse_from_str(v, fmt) {
            return Ok(t.and_utc().timestamp_millis());
        }
    }
    if let Ok(d) = NaiveDate::parse_from_str(v, "%Y-%m-%d") {
        return Ok(d
            .and_hms_opt(0, 0, 0)
            .ok_or_else(bad)?
            .and_utc()
            .timestamp_millis());
    }
    Err(bad())
}

/// Formats epoch ms as the `datetime-local` form value (`2026-12-01T06:00`, UTC) that
/// [`parse_time`] reads back.
pub fn format_time_input(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%dT%H:%M").to_string())
        .unwrap_or_default()
}

fn non_empty(v: &str) -> Option<String> {
    let t = v.trim();
    (!t.is_empty()).then(|| t.to_string())
}

/// A topic or consumer-group value, kept byte for byte: a stored source topic comes from a
/// header that may carry anything (`"orders\n"`, `"a\u{7}b"`, `" orders"`) and a link to it
/// must select exactly it (issue #12). Only a value of nothing but spaces means "not set"
/// (an empty form field).
fn exact_value(v: &str) -> Option<String> {
    (!v.trim_matches(' ').is_empty()).then(|| v.to_string())
}

/// A checkbox-style value: `true`, `1`, `yes`, `on` (any case) or `false`, `0`, `no`, `off`,
/// empty meaning false.
fn flag(name: &'static str, value: &str) -> Result<bool, FilterError> {
    match non_empty(value).map(|v| v.to_ascii_lowercase()).as_deref() {
        None | Some("false" | "0" | "no" | "off") => Ok(false),
        Some("true" | "1" | "yes" | "on") => Ok(true),
        Some(_) => Err(FilterError::BadFlag(name, value.to_string())),
    }
}

/// A job id parameter (trimmed; empty = not set): at most [`MAX_JOB_ID_CHARS`] characters,
/// none of them whitespace or control characters.
fn job_id(name: &'static str, v: Option<String>) -> Result<Option<String>, FilterError> {
    match v {
        Some(j)
            if j.chars().count() > MAX_JOB_ID_CHARS
                || j.chars().any(|c| c.is_whitespace() || c.is_control()) =>
        {
            Err(FilterError::BadJobId(name, j))
        }
        v => Ok(v),
    }
}

/// Every query-string parameter of a [`Filter`] ([`ListQuery::from_pairs`] reads them,
/// [`Filter::to_pairs`] writes them): what a link or a form must carry over to keep the
/// current filter (the app's "Replay all matching", "Next", export links).
pub const FILTER_PARAMS: [&str; 15] = [
    "fingerprint",
    "error_class",
    "q",
    "source_topic",
    "dlq_topic",
    "consumer_group",
    "status",
    "from",
    "to",
    "label",
    "unlabelled",
    "came_back",
    "tier",
    "replay_job",
    "came_back_from_job",
];

impl Filter {
    /// True when no field the user chose narrows the set (a topic scope,
    /// [`Filter::dlq_topic_in`], is not a choice: "all" of a scoped user is all they see).
    pub fn is_empty(&self) -> bool {
        Filter {
            dlq_topic_in: None,
            ..self.clone()
        } == Filter::default()
    }

    /// Sets one query-string parameter. Empty values mean "not set" (an HTML form sends every
    /// field). Returns `Ok(false)` if `name` is not a filter parameter.
    fn set(&mut self, name: &str, value: &str) -> Result<bool, FilterError> {
        let v = non_empty(value);
        match name {
            "fingerprint" => self.fingerprint = v,
            "error_class" => self.error_class = v,
            "q" => {
                if let Some(n) = v.as_ref().map(|q| q.chars().count()) {
                    if n > crate::search::MAX_QUERY_CHARS {
                        return Err(FilterError::QueryTooLong(n));
                    }
                }
                self.q = v
            }
            "source_topic" => self.source_topic = exact_value(value),
            "dlq_topic" => self.dlq_topic = exact_value(value),
            "consumer_group" => self.consumer_group = exact_value(value),
            "status" => {
                self.status = match v {
                    None => None,
                    Some(s) => Some(Status::parse(&s).ok_or(FilterError::BadStatus(s))?),
                }
            }
            "from" => self.from_ms = v.map(|s| parse_time(name, &s)).transpose()?,
            "to" => self.to_ms = v.map(|s| parse_time(name, &s)).transpose()?,
            "label" => {
                self.label = v
                    .map(|s| crate::labels::parse_label(&s))
                    .transpose()
                    .map_err(FilterError::BadLabel)?
            }
            "unlabelled" => self.unlabelled = flag("unlabelled", value)?,
            "came_back" => self.came_back = flag("came_back", value)?,
            "tier" => {
                self.tier = match v {
                    None => None,
                    Some(s) => Some(TierFilter::parse(&s).ok_or(FilterError::BadTier(s))?),
                }
            }
            "replay_job" => self.replay_job = job_id("replay_job", v)?,
            "came_back_from_job" => self.came_back_from_job = job_id("came_back_from_job", v)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The filter as query-string pairs (only the fields that are set), the inverse of
    /// [`ListQuery::from_pairs`]; times are written as epoch ms.
    pub fn to_pairs(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        let mut push = |k: &'static str, v: &Option<String>| {
            if let Some(v) = v {
                out.push((k, v.clone()));
            }
        };
        push("fingerprint", &self.fingerprint);
        push("error_class", &self.error_class);
        push("q", &self.q);
        push("source_topic", &self.source_topic);
        push("dlq_topic", &self.dlq_topic);
        push("consumer_group", &self.consumer_group);
        push("status", &self.status.map(|s| s.as_str().to_string()));
        push("from", &self.from_ms.map(|v| v.to_string()));
        push("to", &self.to_ms.map(|v| v.to_string()));
        push("label", &self.label);
        if self.unlabelled {
            out.push(("unlabelled", "true".to_string()));
        }
        if self.came_back {
            out.push(("came_back", "true".to_string()));
        }
        if let Some(t) = self.tier {
            out.push(("tier", t.as_str().to_string()));
        }
        if let Some(j) = &self.replay_job {
            out.push(("replay_job", j.clone()));
        }
        if let Some(j) = &self.came_back_from_job {
            out.push(("came_back_from_job", j.clone()));
        }
        out
    }

    fn check(&self) -> Result<(), FilterError> {
        if self.unlabelled && self.label.is_some() {
            return Err(FilterError::LabelConflict);
        }
        match (self.from_ms, self.to_ms) {
            (Some(a), Some(b)) if a >= b => Err(FilterError::EmptyRange),
            _ => Ok(()),
        }
    }
}

impl ListQuery {
    /// Parses query-string pairs (already percent-decoded). Unknown or repeated parameters,
    /// bad times, statuses, limits and cursors are errors, never silently ignored.
    pub fn from_pairs<'a, I>(pairs: I) -> Result<ListQuery, FilterError>
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        let mut q = ListQuery {
            limit: DEFAULT_LIMIT,
            ..ListQuery::default()
        };
        let mut seen: Vec<&str> = Vec::new();
        for (name, value) in pairs {
            if seen.contains(&name) {
                return Err(FilterError::Repeated(name.to_string()));
            }
            seen.push(name);
            match name {
                "limit" => {
                    if let Some(v) = non_empty(value) {
                        q.limit = v
                            .parse::<u32>()
                            .ok()
                            .filter(|n| (1..=MAX_LIMIT).contains(n))
                            .ok_or(FilterError::BadLimit(v))?;
                    }
                }
                "cursor" => q.cursor = non_empty(value).map(|c| Cursor::decode(&c)).transpose()?,
                _ => {
                    if !q.filter.set(name, value)? {
                        return Err(FilterError::UnknownParameter(name.to_string()));
                    }
                }
            }
        }
        q.filter.check()?;
        Ok(q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`FILTER_PARAMS`] names exactly what the filter reads and writes: a name missing from
    /// it made links drop that part of the filter ("Replay all matching" on `/?tier=manual`
    /// offered to replay every dead letter, poison included; 2026-12-03).
    #[test]
    fn filter_params_are_exactly_the_filters_names() {
        for name in FILTER_PARAMS {
            assert_eq!(Filter::default().set(name, ""), Ok(true), "{name}");
        }
        assert_eq!(Filter::default().set("cursor", ""), Ok(false));
        let every = ListQuery::from_pairs([
            ("fingerprint", "f"),
            ("error_class", "E"),
            ("q", "x"),
            ("source_topic", "s"),
            ("dlq_topic", "d"),
            ("consumer_group", "g"),
            ("status", "new"),
            ("from", "1000"),
            ("to", "2000"),
            ("label", "a"),
            ("came_back", "true"),
            ("tier", "poison"),
            ("replay_job", "j-1"),
            ("came_back_from_job", "j-2"),
        ])
        .unwrap();
        let written: Vec<&str> = every
            .filter
            .to_pairs()
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(written.len(), FILTER_PARAMS.len() - 1, "{written:?}");
        for name in written {
            assert!(FILTER_PARAMS.contains(&name), "{name}");
        }
    }

    #[test]
    fn parses_every_parameter_and_round_trips() {
        let q = ListQuery::from_pairs([
            ("fingerprint", "abc"),
            ("q", " timeout "),
            ("source_topic", "orders"),
            ("status", "replayed"),
            ("from", "2026-12-01T06:00"),
            ("to", "1796108400000"),
            ("limit", "10"),
            ("dlq_topic", ""),
            ("label", " known:  INC-1 "),
        ])
        .unwrap();
        assert_eq!(q.filter.label.as_deref(), Some("known: INC-1"));
        assert_eq!(q.limit, 10);
        assert_eq!(q.filter.q.as_deref(), Some("timeout"));
        assert_eq!(q.filter.dlq_topic, None);
        assert_eq!(q.filter.status, Some(Status::Replayed));
        assert_eq!(q.filter.from_ms, Some(1_796_104_800_000));
        let pairs = q.filter.to_pairs();
        let back = ListQuery::from_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str()))).unwrap();
        assert_eq!(back.filter, q.filter);
    }

    #[test]
    fn topic_values_are_kept_byte_for_byte() {
        let q = ListQuery::from_pairs([
            ("source_topic", "orders\n"),
            ("dlq_topic", " orders.DLT"),
            ("consumer_group", "\u{7}bell"),
        ])
        .unwrap();
        assert_eq!(q.filter.source_topic.as_deref(), Some("orders\n"));
        assert_eq!(q.filter.dlq_topic.as_deref(), Some(" orders.DLT"));
        assert_eq!(q.filter.consumer_group.as_deref(), Some("\u{7}bell"));
        let q = ListQuery::from_pairs([("source_topic", "\n")]).unwrap();
        assert_eq!(q.filter.source_topic.as_deref(), Some("\n"));
        let q = ListQuery::from_pairs([("source_topic", "   ")]).unwrap();
        assert_eq!(q.filter.source_topic, None);
    }

    #[test]
    fn refuses_what_it_does_not_understand() {
        assert!(matches!(
            ListQuery::from_pairs([("colour", "red")]),
            Err(FilterError::UnknownParameter(_))
        ));
        assert!(matches!(
            ListQuery::from_pairs([("status", "gone")]),
            Err(FilterError::BadStatus(_))
        ));
        assert!(matches!(
            ListQuery::from_pairs([("limit", "501")]),
            Err(FilterError::BadLimit(_))
        ));
        assert!(matches!(
            ListQuery::from_pairs([("limit", "0")]),
            Err(FilterError::BadLimit(_))
        ));
        assert!(matches!(
            ListQuery::from_pairs([("from", "yesterday")]),
            Err(FilterError::BadTime { .. })
        ));
        // A `+` of an offset, sent unencoded, arrives as a space: the message says so.
        let e = ListQuery::from_pairs([("from", "2026-12-07T18:13:00 00:00")]).unwrap_err();
        assert!(e.to_string().contains("`%2B`"), "{e}");
        let e = ListQuery::from_pairs([("from", "garbage")]).unwrap_err();
        assert!(!e.to_string().contains("`%2B`"), "{e}");
        assert!(matches!(
            ListQuery::from_pairs([("cursor", "!!")]),
            Err(FilterError::BadCursor)
        ));
        assert!(matches!(
            ListQuery::from_pairs([("q", "a"), ("q", "b")]),
            Err(FilterError::Repeated(_))
        ));
        assert!(matches!(
            ListQuery::from_pairs([("from", "2"), ("to", "1")]),
            Err(FilterError::EmptyRange)
        ));
        assert!(matches!(
            ListQuery::from_pairs([("label", "<b>")]),
            Err(FilterError::BadLabel(_))
        ));
        assert!(matches!(
            ListQuery::from_pairs([("unlabelled", "maybe")]),
            Err(FilterError::BadFlag("unlabelled", _))
        ));
        assert!(matches!(
            ListQuery::from_pairs([("unlabelled", "on"), ("label", "x")]),
            Err(FilterError::LabelConflict)
        ));
        assert!(matches!(
            ListQuery::from_pairs([("came_back", "perhaps")]),
            Err(FilterError::BadFlag("came_back", _))
        ));
        assert!(matches!(
            ListQuery::from_pairs([("tier", "limbo")]),
            Err(FilterError::BadTier(_))
        ));
        for t in TierFilter::ALL {
            let q = ListQuery::from_pairs([("tier", t.as_str())]).unwrap();
            assert_eq!(q.filter.tier, Some(t));
            let pairs = q.filter.to_pairs();
            let back = ListQuery::from_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str()))).unwrap();
            assert_eq!(back.filter, q.filter);
        }
        for bad in ["a b", &"j".repeat(MAX_JOB_ID_CHARS + 1), "a\u{7}"] {
            assert!(matches!(
                ListQuery::from_pairs([("replay_job", bad)]),
                Err(FilterError::BadJobId("replay_job", _))
            ));
        }
        let q = ListQuery::from_pairs([
            ("replay_job", " 0b6e1c3e-2a39-4c57-9f3b-7a1f1d1e2c3d "),
            ("came_back_from_job", ""),
        ])
        .unwrap();
        assert_eq!(
            q.filter.replay_job.as_deref(),
            Some("0b6e1c3e-2a39-4c57-9f3b-7a1f1d1e2c3d")
        );
        assert_eq!(q.filter.came_back_from_job, None);
        let q = ListQuery::from_pairs([("unlabelled", "on"), ("came_back", "1")]).unwrap();
        assert!(q.filter.unlabelled && q.filter.came_back);
        let pairs = q.filter.to_pairs();
        let back = ListQuery::from_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str()))).unwrap();
        assert_eq!(back.filter, q.filter);
    }

    #[test]
    fn cursor_round_trips() {
        let c = Cursor {
            dead_lettered_at_ms: 1_764_568_800_123,
            id: 42,
        };
        assert_eq!(Cursor::decode(&c.encode()).unwrap(), c);
    }
}
