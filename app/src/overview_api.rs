//! The overview page's server function and the shapes it returns: a thin seam over the
//! store's maintained aggregates (`Store::stats`, `Store::arrival_series`,
//! `Store::new_error_groups`; `docs/stats.md`), which never scan `dead_letters`. The shapes
//! mirror the store's (server-only) types so the browser build can decode them.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::api::Listing;

/// Most DLQ topics and most source topics the overview lists (each); the rest are counted in
/// a "more" note and reachable from the list's filter.
pub const OVERVIEW_TOPIC_CAP: usize = 20;
/// Most "new" error groups the overview lists.
pub const OVERVIEW_NEW_GROUPS_CAP: u32 = 10;

/// The chart's span and bucket width.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChartRange {
    /// Per minute over the last 6 h (`range=6h`, the default).
    SixHours,
    /// Per hour over the last 7 days (`range=7d`).
    SevenDays,
}

impl ChartRange {
    /// From the page's `range` parameter: `6h`, `7d`, or empty / absent for the default
    /// (6 h). Errors: any other value, with a message for the page (shown with a 400).
    pub fn parse(s: &str) -> Result<ChartRange, String> {
        match s.trim() {
            "" | "6h" => Ok(ChartRange::SixHours),
            "7d" => Ok(ChartRange::SevenDays),
            other => Err(format!(
                "the chart range `{}` is unknown; use `range=6h` (per minute over 6 hours) \
                 or `range=7d` (per hour over 7 days).",
                crate::display::visible::name(other, 64)
            )),
        }
    }

    /// The `range` parameter value.
    pub fn as_str(self) -> &'static str {
        match self {
            ChartRange::SixHours => "6h",
            ChartRange::SevenDays => "7d",
        }
    }

    /// Bucket width, ms.
    pub fn bucket_ms(self) -> i64 {
        match self {
            ChartRange::SixHours => 60_000,
            ChartRange::SevenDays => 3_600_000,
        }
    }

    /// Span, ms.
    pub fn span_ms(self) -> i64 {
        match self {
            ChartRange::SixHours => 6 * 3_600_000,
            ChartRange::SevenDays => 7 * 24 * 3_600_000,
        }
    }
}

/// One row of the overview's topic tables (a DLQ topic or a source topic).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicRow {
    /// The topic as shown: cut at `NAME_BYTES`, hidden characters (control characters, bidi
    /// controls) as `⟨U+XXXX⟩` markers (`crate::display::visible`). `None` in the source
    /// table = dead letters that name no source topic.
    pub name: Option<String>,
    /// The exact stored topic, for the row's links (percent-encoded by `crate::query::href`),
    /// so the list they open filters on the very value counted here; `None` when no filter
    /// selects the row (no source topic, or the remainder beyond the aggregates' read cap).
    pub filter_value: Option<String>,
    /// Every status but deleted (what the list shows by default).
    pub live: i64,
    pub new: i64,
    pub replay_pending: i64,
    pub replayed: i64,
    pub replay_failed: i64,
    /// Replayed, then the record came back (`re_failed`).
    #[serde(default)]
    pub re_failed: i64,
    pub deleted: i64,
    /// Key + value bytes of the live ones.
    pub live_bytes: i64,
    /// Dead-lettered since `Overview::hour_since_ms` and live now (not deleted, not purged):
    /// what the list `from = hour_since_ms` shows.
    pub new_last_hour: i64,
    /// The same since `Overview::day_since_ms`.
    pub new_last_24h: i64,
    /// `dead_lettered_at_ms` of the oldest live one.
    pub oldest_live_ms: Option<i64>,
    /// Error groups first seen in the last 24 h through this topic.
    pub new_groups_24h: i64,
}

/// An error group first seen in the last 24 h.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewGroupRow {
    pub fingerprint: String,
    pub error_class: Option<String>,
    pub dlq_topic: String,
    pub first_seen_ms: i64,
    pub last_seen_ms: i64,
    pub stored: i64,
}

/// Everything the overview page shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Overview {
    /// When the figures were read (epoch ms).
    pub at_ms: i64,
    /// Start of the "last hour" window (epoch ms): the `from` of its links.
    pub hour_since_ms: i64,
    /// Start of the "last 24 h" window (epoch ms).
    pub day_since_ms: i64,
    pub totals: TopicRow,
    /// Largest live first, at most [`OVERVIEW_TOPIC_CAP`].
    pub dlq_topics: Vec<TopicRow>,
    /// DLQ topics left out by the cap.
    pub dlq_topics_more: usize,
    pub source_topics: Vec<TopicRow>,
    pub source_topics_more: usize,
    /// The chart's DLQ topic (`dlq_topic` parameter), `None` = all.
    pub chart_topic: Option<String>,
    pub range: ChartRange,
    /// `(bucket start ms, dead letters)`, oldest first, every bucket of the span.
    pub chart: Vec<(i64, i64)>,
    pub new_groups: Vec<NewGroupRow>,
    pub new_groups_total: i64,
    pub error_groups_total: i64,
    /// Replay jobs preparing, running or waiting.
    pub jobs_in_progress: i64,
    /// The aggregates held more (DLQ topic, source topic, status) rows than one read takes.
    pub truncated: bool,
}

/// The overview for the raw page query `query` (`range=6h|7d`, `dlq_topic` for the chart);
/// `Listing::BadQuery` for a `range` it does not know (the page answers 400 with the message).
#[server(input = leptos::server_fn::codec::GetUrl)]
pub async fn get_overview(query: String) -> Result<Listing<Overview>, ServerFnError> {
    seam::overview(&query).await
}

#[cfg(feature = "ssr")]
mod seam {
    use leptos::prelude::*;
    use redrive_core::store::{
        ArrivalScope, Resolution, Store, StoreError, TopicStats, OTHER_SOURCES,
    };

    use super::*;
    use crate::display::caps::NAME_BYTES;
    use crate::display::visible;

    fn failed(e: StoreError) -> ServerFnError {
        tracing::error!(error = %e, "reading the overview failed");
        let hint = match e {
            StoreError::Unavailable(_) => "the database is unavailable; try again in a moment",
            _ => "see the server log for the cause",
        };
        ServerFnError::new(format!("Could not read the overview: {hint}."))
    }

    fn row(t: &TopicStats, name: Option<String>) -> TopicRow {
        TopicRow {
            name: name.as_deref().map(|n| visible::name(n, NAME_BYTES)),
            // A name of nothing but spaces is "not set" to the filter: no link.
            filter_value: name.filter(|n| n != OTHER_SOURCES && !n.trim_matches(' ').is_empty()),
            live: t.counts.live(),
            new: t.counts.new,
            replay_pending: t.counts.replay_pending,
            replayed: t.counts.replayed,
            replay_failed: t.counts.replay_failed,
            re_failed: t.counts.re_failed,
            deleted: t.counts.deleted,
            live_bytes: t.bytes.live(),
            new_last_hour: t.new_last_hour,
            new_last_24h: t.new_last_24h,
            oldest_live_ms: t.oldest_ms.oldest_live(),
            new_groups_24h: t.new_groups_24h,
        }
    }

    pub(super) async fn overview(raw: &str) -> Result<Listing<Overview>, ServerFnError> {
        let store = use_context::<Store>()
            .ok_or_else(|| ServerFnError::new("redrive is misconfigured: no store in context"))?;
        let pairs = crate::query::parse(raw);
        // As the list does: a parameter the page does not take is refused, not ignored (a
        // `from` here would otherwise look applied to figures it does not change).
        if let Some((name, _)) = pairs.iter().find(|(k, _)| k != "range" && k != "dlq_topic") {
            return Ok(Listing::BadQuery(format!(
                "unknown parameter `{}`; the overview takes `range` (6h or 7d) and `dlq_topic` \
                 (the chart's DLQ topic). Filters such as `from` and `to` belong to the \
                 dead-letter list and the error groups.",
                crate::display::visible::name(name, 64)
            )));
        }
        let range = match ChartRange::parse(crate::query::value(&pairs, "range")) {
            Ok(r) => r,
            Err(message) => return Ok(Listing::BadQuery(message)),
        };
        let chart_topic = Some(crate::query::value(&pairs, "dlq_topic").trim().to_string())
            .filter(|t| !t.is_empty());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let mut stats = store.stats(now).await.map_err(failed)?;
        // A user limited to some DLQ topics sees their figures only (`docs/access.md`).
        let actor = crate::auth_context::signed_in()?;
        let scope = store.topics_in_scope(&actor).await.map_err(failed)?;
        let sees = crate::auth_context::topic_check();
        if scope.is_some() {
            stats.retain_dlq_topics(&sees);
        }
        let by_dlq = stats.by_dlq_topic();
        let by_source = stats.by_source_topic();
        let resolution = match range {
            ChartRange::SixHours => Resolution::Minute,
            ChartRange::SevenDays => Resolution::Hour,
        };
        let end = resolution.floor(now) + resolution.bucket_ms();
        let chart = store
            .arrival_series(
                resolution,
                end - range.span_ms(),
                end,
                &ArrivalScope {
                    dlq_topic: chart_topic.clone(),
                    source_topic: None,
                    dlq_topic_in: scope.clone(),
                },
            )
            .await
            .map_err(failed)?;
        let mut new_groups = store
            .new_error_groups(stats.day_since_ms, OVERVIEW_NEW_GROUPS_CAP)
            .await
            .map_err(failed)?;
        if scope.is_some() {
            new_groups.retain(|g| sees(&g.dlq_topic));
        }
        Ok(Listing::Found(Overview {
            at_ms: now,
            hour_since_ms: stats.hour_since_ms,
            day_since_ms: stats.day_since_ms,
            totals: row(&stats.totals(), None),
            dlq_topics_more: by_dlq.len().saturating_sub(OVERVIEW_TOPIC_CAP),
            dlq_topics: by_dlq
                .iter()
                .take(OVERVIEW_TOPIC_CAP)
                .map(|t| row(t, t.dlq_topic.clone()))
                .collect(),
            source_topics_more: by_source.len().saturating_sub(OVERVIEW_TOPIC_CAP),
            source_topics: by_source
                .iter()
                .take(OVERVIEW_TOPIC_CAP)
                .map(|t| row(t, t.source_topic.clone()))
                .collect(),
            chart_topic,
            range,
            chart,
            new_groups: new_groups
                .into_iter()
                .map(|g| NewGroupRow {
                    fingerprint: g.fingerprint,
                    error_class: g.error_class.map(|c| visible::name(&c, 200)),
                    dlq_topic: visible::name(&g.dlq_topic, NAME_BYTES),
                    first_seen_ms: g.first_seen_ms,
                    last_seen_ms: g.last_seen_ms,
                    stored: g.stored,
                })
                .collect(),
            new_groups_total: stats.error_groups_new_24h,
            error_groups_total: stats.error_groups_total,
            jobs_in_progress: stats.replay_jobs.in_progress(),
            truncated: stats.truncated,
        }))
    }
}

/// Most rows the list's "how many match" counts when the aggregates cannot answer the filter
/// (any filter beyond DLQ topic, source topic and status): above it the page says "more than".
pub const MATCH_COUNT_CAP: i64 = 100_000;

/// How many dead letters match the list's filter (`Store::count_matching`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MatchShown {
    Exact(i64),
    MoreThan(i64),
    /// A free-text search counted among the newest dead letters only.
    AtLeast(i64),
}

impl MatchShown {
    /// "1 dead letter matches", "12,345 dead letters match", "more than 100,000 dead letters match".
    pub fn text(self) -> String {
        fn grouped(n: i64) -> String {
            let s = n.to_string();
            let mut out = String::new();
            for (i, c) in s.chars().enumerate() {
                if i > 0 && (s.len() - i).is_multiple_of(3) && c != '-' {
                    out.push(',');
                }
                out.push(c);
            }
            out
        }
        match self {
            MatchShown::Exact(1) => "1 dead letter matches".into(),
            MatchShown::Exact(n) => format!("{} dead letters match", grouped(n)),
            MatchShown::MoreThan(n) => format!("more than {} dead letters match", grouped(n)),
            MatchShown::AtLeast(n) => format!(
                "at least {} dead letters match (counted among the newest ones the search read)",
                grouped(n)
            ),
        }
    }
}

/// How many dead letters match the raw list query `query` (cursor and limit ignored); `None`
/// for a query the list refuses (the list says why). Exact from the aggregates for DLQ
/// topic / source topic / status filters, else a count stopped at [`MATCH_COUNT_CAP`].
#[server(input = leptos::server_fn::codec::GetUrl)]
pub async fn count_dead_letters(query: String) -> Result<Option<MatchShown>, ServerFnError> {
    use redrive_core::store::{MatchCount, Store};
    let store = use_context::<Store>()
        .ok_or_else(|| ServerFnError::new("redrive is misconfigured: no store in context"))?;
    let pairs = crate::query::parse(&query);
    let Ok(mut q) =
        redrive_core::ListQuery::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    else {
        return Ok(None);
    };
    if let Err(e) = crate::auth_context::limit_to_scope(&store, &mut q.filter).await {
        tracing::error!(error = %e, "counting matching dead letters failed");
        return Ok(None);
    }
    match store.count_matching(&q.filter, MATCH_COUNT_CAP).await {
        Ok(MatchCount::Exact(n)) => Ok(Some(MatchShown::Exact(n))),
        Ok(MatchCount::MoreThan(n)) => Ok(Some(MatchShown::MoreThan(n))),
        Ok(MatchCount::AtLeast(n)) => Ok(Some(MatchShown::AtLeast(n))),
        Err(e) => {
            tracing::error!(error = %e, "counting matching dead letters failed");
            Ok(None)
        }
    }
}
