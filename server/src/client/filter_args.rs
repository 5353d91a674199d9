//! The selection flags of the client commands: a filter with the API's own parameter names
//! (`--fingerprint` is `fingerprint`, `--error-class` is `error_class`, `-q` is `q`, ...), or
//! dead letters named by `--id`, or `--all`.
//!
//! The values are sent as given, as the list's query string (`GET /api/v1/dead-letters?...`)
//! or as the `"filter"` object of an action's body, which the server parses with the one
//! filter parser (`redrive_core::ListQuery::from_pairs`): a bad value is refused by the
//! server with its own message (exit code 2), and a filter means on the command line exactly
//! what it means in the API and on the list page. The names are checked against
//! `redrive_core::Filter::to_pairs` by this module's tests.

use clap::Args;
use serde_json::{Map, Value};

use super::http::ClientError;

/// Filter flags, one per query parameter of `GET /api/v1/dead-letters` (times: RFC 3339
/// `2026-12-01T06:00:00Z`, a date `2026-12-01` (UTC), or epoch ms).
#[derive(Debug, Clone, Default, Args)]
pub struct FilterArgs {
    /// Exact error fingerprint (an error group), 16 hex digits.
    #[arg(long, value_name = "HEX", help_heading = "Filter")]
    pub fingerprint: Option<String>,
    /// Exact error class, e.g. `java.lang.IllegalStateException`.
    #[arg(long, value_name = "CLASS", help_heading = "Filter")]
    pub error_class: Option<String>,
    /// Free text, matched case-insensitively within the error message, the stack trace or a
    /// text payload (API name `q`; docs/triage.md, "Search").
    #[arg(
        short = 'q',
        long = "q",
        visible_alias = "search",
        value_name = "TEXT",
        help_heading = "Filter"
    )]
    pub q: Option<String>,
    /// Source topic (the record's original topic), exact.
    #[arg(long, value_name = "TOPIC", help_heading = "Filter")]
    pub source_topic: Option<String>,
    /// DLQ topic, exact.
    #[arg(long, value_name = "TOPIC", help_heading = "Filter")]
    pub dlq_topic: Option<String>,
    /// Consumer group that dead-lettered it, exact.
    #[arg(long, value_name = "GROUP", help_heading = "Filter")]
    pub consumer_group: Option<String>,
    /// new, replay_pending, replayed, replay_failed, re_failed or deleted (default: every
    /// status but deleted).
    #[arg(long, value_name = "STATUS", help_heading = "Filter")]
    pub status: Option<String>,
    /// Dead-lettered at or after this time.
    #[arg(long, value_name = "TIME", help_heading = "Filter")]
    pub from: Option<String>,
    /// Dead-lettered before this time.
    #[arg(long, value_name = "TIME", help_heading = "Filter")]
    pub to: Option<String>,
    /// Has this triage label (its own or its error group's).
    #[arg(long, value_name = "LABEL", help_heading = "Filter")]
    pub label: Option<String>,
    /// Has no label at all.
    #[arg(long, help_heading = "Filter")]
    pub unlabelled: bool,
    /// Came back as a dead letter after a replay.
    #[arg(long, help_heading = "Filter")]
    pub came_back: bool,
    /// In this automation tier: transient, manual, poison, archive, or unsorted (default:
    /// every tier but archive; docs/automation.md).
    #[arg(long, value_name = "TIER", help_heading = "Filter")]
    pub tier: Option<String>,
    /// Taken by this replay job (its id, as `redrive jobs list` prints it).
    #[arg(long, value_name = "JOB", help_heading = "Filter")]
    pub replay_job: Option<String>,
    /// Came back as dead letters after this replay job published them.
    #[arg(long, value_name = "JOB", help_heading = "Filter")]
    pub came_back_from_job: Option<String>,
}

impl FilterArgs {
    /// The flags given, as (API name, value) pairs in the order of `Filter::to_pairs`.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
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
        push("status", &self.status);
        push("from", &self.from);
        push("to", &self.to);
        push("label", &self.label);
        if self.unlabelled {
            out.push(("unlabelled", "true".to_string()));
        }
        if self.came_back {
            out.push(("came_back", "true".to_string()));
        }
        if let Some(t) = &self.tier {
            out.push(("tier", t.clone()));
        }
        for (k, v) in [
            ("replay_job", &self.replay_job),
            ("came_back_from_job", &self.came_back_from_job),
        ] {
            if let Some(v) = v {
                out.push((k, v.clone()));
            }
        }
        out
    }

    /// True when no filter flag is given.
    pub fn is_empty(&self) -> bool {
        self.pairs().is_empty()
    }

    /// The flags as an action body's `"filter"` object (strings, as in the query string).
    pub fn json(&self) -> Map<String, Value> {
        self.pairs()
            .into_iter()
            .map(|(k, v)| (k.to_string(), Value::String(v)))
            .collect()
    }

    /// The flags as the filter reads in a question: `source_topic=orders, status=new`.
    pub fn describe(&self) -> String {
        self.pairs()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Which dead letters an action acts on: `--id` (repeated or comma-separated), the filter
/// flags, or `--all` (every dead letter that is not deleted; the server's `confirm_all`).
#[derive(Debug, Clone, Default, Args)]
pub struct SelectionArgs {
    /// Dead-letter ids (repeat the flag or separate with commas); no filter then.
    #[arg(
        long = "id",
        value_name = "ID",
        value_delimiter = ',',
        help_heading = "Selection"
    )]
    pub ids: Vec<i64>,
    /// Every dead letter that is not deleted (an empty filter); asks to confirm the count.
    #[arg(long, help_heading = "Selection")]
    pub all: bool,
    #[command(flatten)]
    pub filter: FilterArgs,
}

/// A checked selection.
#[derive(Debug, Clone, PartialEq)]
pub enum Selection {
    Ids(Vec<i64>),
    /// The filter flags (never empty).
    Filter(Box<FilterArgs>),
    /// `--all`: the empty filter.
    All,
}

impl PartialEq for FilterArgs {
    fn eq(&self, other: &Self) -> bool {
        self.pairs() == other.pairs()
    }
}

impl SelectionArgs {
    /// Exactly one of ids, filter flags and `--all`; errors (exit code 2) otherwise.
    pub fn selection(&self) -> Result<Selection, ClientError> {
        let filter = !self.filter.is_empty();
        match (!self.ids.is_empty(), filter, self.all) {
            (true, false, false) => Ok(Selection::Ids(self.ids.clone())),
            (false, true, false) => Ok(Selection::Filter(Box::new(self.filter.clone()))),
            (false, false, true) => Ok(Selection::All),
            (false, false, false) => Err(ClientError::usage(
                "say which dead letters: --id ID..., filter flags (--fingerprint, \
                 --source-topic, --status, ...; see --help), or --all",
            )),
            _ => Err(ClientError::usage(
                "give one of --id, filter flags and --all, not several",
            )),
        }
    }
}

impl Selection {
    /// The body's selection: `"ids"` or `"filter"` (`--all` is `{}`).
    pub fn body(&self) -> Map<String, Value> {
        let mut m = Map::new();
        match self {
            Selection::Ids(ids) => {
                m.insert("ids".into(), Value::from(ids.clone()));
            }
            Selection::Filter(f) => {
                m.insert("filter".into(), Value::Object(f.json()));
            }
            Selection::All => {
                m.insert("filter".into(), Value::Object(Map::new()));
            }
        }
        m
    }

    /// True when the action must be confirmed (`--yes` or a question on a terminal): a
    /// filter or `--all`, whose reach is a count, not a list the caller wrote down.
    pub fn needs_confirmation(&self) -> bool {
        !matches!(self, Selection::Ids(_))
    }

    /// In words, for a question: `the 3 named dead letters`, `dead letters matching
    /// status=new`, `every dead letter that is not deleted`.
    pub fn describe(&self) -> String {
        match self {
            Selection::Ids(ids) => format!("the {} named dead letter(s)", ids.len()),
            Selection::Filter(f) => format!("dead letters matching {}", f.describe()),
            Selection::All => "every dead letter that is not deleted".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redrive_core::{Filter, ListQuery, Status};

    fn every_flag() -> FilterArgs {
        FilterArgs {
            fingerprint: Some("00000000000000aa".into()),
            error_class: Some("java.lang.IllegalStateException".into()),
            q: Some("timeout".into()),
            source_topic: Some("orders".into()),
            dlq_topic: Some("orders.DLT".into()),
            consumer_group: Some("billing".into()),
            status: Some("new".into()),
            from: Some("2026-12-01".into()),
            to: Some("1796108400000".into()),
            label: Some("needs-fix".into()),
            unlabelled: false,
            came_back: true,
            tier: Some("transient".into()),
            replay_job: Some("j-1".into()),
            came_back_from_job: Some("j-2".into()),
        }
    }

    /// Every parameter the core filter writes has a flag, under the same name, in the same
    /// order: a new filter field without a flag fails here.
    #[test]
    fn the_flags_are_the_filters_parameters() {
        let full = Filter {
            fingerprint: Some("f".into()),
            error_class: Some("c".into()),
            q: Some("q".into()),
            source_topic: Some("s".into()),
            dlq_topic: Some("d".into()),
            consumer_group: Some("g".into()),
            status: Some(Status::New),
            from_ms: Some(1),
            to_ms: Some(2),
            label: Some("l".into()),
            unlabelled: true,
            came_back: true,
            tier: Some(redrive_core::filter::TierFilter::Transient),
            replay_job: Some("j".into()),
            came_back_from_job: Some("k".into()),
            dlq_topic_in: None,
        };
        let core: Vec<&str> = full.to_pairs().into_iter().map(|(k, _)| k).collect();
        let mut flags = every_flag();
        flags.unlabelled = true;
        let ours: Vec<&str> = flags.pairs().into_iter().map(|(k, _)| k).collect();
        assert_eq!(ours, core);
    }

    /// What the flags send is what the server's parser reads back.
    #[test]
    fn the_servers_parser_reads_the_flags() {
        let pairs = every_flag().pairs();
        let q = ListQuery::from_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str()))).unwrap();
        assert_eq!(q.filter.source_topic.as_deref(), Some("orders"));
        assert_eq!(q.filter.status, Some(Status::New));
        assert_eq!(q.filter.from_ms, Some(1_796_083_200_000));
        assert!(q.filter.came_back);
    }

    #[test]
    fn exactly_one_selection() {
        let mut s = SelectionArgs::default();
        assert!(s.selection().is_err());
        s.ids = vec![3, 1];
        assert_eq!(s.selection().unwrap(), Selection::Ids(vec![3, 1]));
        s.filter.status = Some("new".into());
        assert!(s.selection().is_err());
        s.ids.clear();
        assert!(matches!(s.selection().unwrap(), Selection::Filter(_)));
        s.all = true;
        assert!(s.selection().is_err());
        s.filter = FilterArgs::default();
        assert_eq!(s.selection().unwrap(), Selection::All);
        assert_eq!(
            Value::Object(Selection::All.body()),
            serde_json::json!({"filter": {}})
        );
    }
}
