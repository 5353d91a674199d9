//! The pages' server functions and the shapes they return.
//!
//! Each function is a seam, not a place for logic: it takes the [`Store`] the site router put
//! in context, parses the page's query once with [`ListQuery::from_pairs`] (the same parser
//! the JSON API uses), calls one store method and maps the result. During server rendering
//! they run in-process; after hydration the browser calls them over HTTP, as GET requests:
//! they only read, so they are safe methods (cacheable, and exempt from the CSRF check that
//! the server applies to state-changing requests).
//!
//! [`Store`]: redrive_core::store::Store
//! [`ListQuery::from_pairs`]: redrive_core::ListQuery::from_pairs

use leptos::prelude::*;
use redrive_core::{DeadLetterSummary, ErrorGroup, Normalized, Page};
use serde::{Deserialize, Serialize};

pub use crate::trend_window::{HourlyTrend, TrendWindow};

use crate::display::{HeaderRows, Payload, Shown};

/// A list request's outcome: the data, or the reason the query was refused (a bad parameter
/// is the user's to fix, so it is shown on the page rather than treated as a failure).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Listing<T> {
    /// What the store returned for the query.
    Found(T),
    /// The query was refused; the `FilterError` message, meant for the user.
    BadQuery(String),
}

/// Distinct values for the filter bar's suggestions (mirrors the store's `Facets`, which is
/// server-only).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilterChoices {
    pub source_topics: Vec<String>,
    pub dlq_topics: Vec<String>,
    pub consumer_groups: Vec<String>,
}

/// One dead letter as the detail page shows it, every part already cut at its display cap
/// (`crate::display::caps`, built by `crate::display::record::detail`) instead of whole: the
/// raw bytes are one click away (`/dead-letters/{id}/raw/{value,key,headers}`), and a large
/// record should cost the page no more than what it shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadLetterDetail {
    /// The list row's facts, names and message cut as in the list.
    pub summary: DeadLetterSummary,
    /// Normalised facts, names cut; `error_message` and `stack_trace` are `None` here (they
    /// are the two fields below), `decode_warnings` holds the first few, each cut.
    pub normalized: Normalized,
    /// The error message, cut at `ERROR_MESSAGE_BYTES`.
    pub error_message: Option<Shown>,
    /// The stack trace, cut at `STACK_TRACE_BYTES` / `STACK_TRACE_LINES`.
    pub stack_trace: Option<Shown>,
    /// How many decode warnings the record has (more than shown when cut).
    pub warnings_total: usize,
    /// The DLQ record's own timestamp, epoch ms.
    pub timestamp_ms: Option<i64>,
    /// The first headers in record order, prepared for the header table.
    pub headers: HeaderRows,
    pub key: Payload,
    pub value: Payload,
    pub ingested_at_ms: i64,
    pub replay_count: i32,
    /// The exact stored DLQ topic and source topic (at most 249 bytes each, `docs/limits.md`),
    /// for the links to the list of the same topic: the names above are cut and have hidden
    /// characters marked, and a link built from them would select nothing (issue #12).
    pub dlq_topic_value: String,
    pub source_topic_value: Option<String>,
    /// The earlier dead letter it came back from, if it did (`docs/replay.md`, "Outcome").
    #[serde(default)]
    pub link: Option<redrive_core::ReplayLink>,
    /// Its tier, rule, reason and automation state (`docs/automation.md`, "Tiers in the UI
    /// and API"); the reason cut like a message. `None` while unsorted.
    #[serde(default)]
    pub tiering: Option<redrive_core::automation::TierInfo>,
    /// The chain of replays around it (bounded: `CHAIN_LINKS_SHOWN` a side).
    #[serde(default)]
    pub chain: redrive_core::outcome::ReplayChain,
    /// What the page says of its replay's outcome, at `as_of_ms`.
    #[serde(default)]
    pub verdict: Option<redrive_core::outcome::Verdict>,
    /// The value decoded with its schema when it is in the Schema Registry wire format and a
    /// `[schema_registry]` is configured (`docs/payloads.md`); `value` above stays the raw view.
    #[serde(default)]
    pub value_schema: Option<crate::display::schema::SchemaShown>,
}

#[cfg(feature = "ssr")]
mod seam {
    use leptos::prelude::*;
    use redrive_core::store::{Store, StoreError};
    use redrive_core::{FilterError, ListQuery};

    /// The store the site router provides; its absence is a wiring bug, reported as such.
    pub fn store() -> Result<Store, ServerFnError> {
        use_context::<Store>()
            .ok_or_else(|| ServerFnError::new("redrive is misconfigured: no store in context"))
    }

    /// Parses the raw page query exactly as the JSON API does.
    pub fn list_query(raw: &str) -> Result<ListQuery, FilterError> {
        let pairs = crate::query::parse(raw);
        ListQuery::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    }

    /// Logs the store's detail and tells the user what to do.
    pub fn store_failed(what: &str, e: StoreError) -> ServerFnError {
        tracing::error!(error = %e, "{what} failed");
        let hint = match e {
            StoreError::Unavailable(_) => "the database is unavailable; try again in a moment",
            _ => "see the server log for the cause",
        };
        ServerFnError::new(format!("Could not {what}: {hint}."))
    }
}

/// One page of dead letters for the raw query string `query` (the page URL's, as typed).
#[server(input = leptos::server_fn::codec::GetUrl)]
pub async fn list_dead_letters(
    query: String,
) -> Result<Listing<Page<DeadLetterSummary>>, ServerFnError> {
    let store = seam::store()?;
    let mut q = match seam::list_query(&query) {
        Ok(q) => q,
        Err(e) => return Ok(Listing::BadQuery(e.to_string())),
    };
    crate::auth_context::limit_to_scope(&store, &mut q.filter)
        .await
        .map_err(|e| seam::store_failed("list dead letters", e))?;
    let page = store
        .list(&q)
        .await
        .map_err(|e| seam::store_failed("list dead letters", e))?;
    Ok(Listing::Found(Page {
        items: page
            .items
            .iter()
            .map(crate::display::record::summary_row)
            .collect(),
        next_cursor: page.next_cursor,
    }))
}

/// The groups page's data: the groups, and per group its hourly arrivals over the last 24 h
/// (the sparkline) and whether it was first seen in the last 24 h (the "new" badge), both
/// from the maintained aggregates (`docs/stats.md`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupsView {
    pub groups: Vec<ErrorGroup>,
    /// Same order as `groups`: the group's arrivals (under every filter) per bucket of
    /// [`TrendWindow::bucket_ms`] over [`GroupsView::trend_window`].
    pub trends: Vec<HourlyTrend>,
    /// What the sparklines cover: the filter's time range, else the last 24 h.
    #[serde(default)]
    pub trend_window: TrendWindow,
    /// Same order as `groups`: first seen (ever, not only under this filter) in the last 24 h.
    pub new: Vec<bool>,
    /// `Some(n)`: the filter names something the maintained aggregate does not keep and more
    /// than `n` dead letters match it, so only the newest `n` are counted (the counts are
    /// "at least"); `None`: every match is counted (`Store::error_groups_counted`).
    #[serde(default)]
    pub counted_among_newest: Option<i64>,
}

/// Error groups of the dead letters matching the raw query string `query` (its `limit`
/// bounds the number of groups; a `cursor` is accepted and has no effect), with their trends.
#[server(input = leptos::server_fn::codec::GetUrl)]
pub async fn list_error_groups(query: String) -> Result<Listing<GroupsView>, ServerFnError> {
    let store = seam::store()?;
    let mut q = match seam::list_query(&query) {
        Ok(q) => q,
        Err(e) => return Ok(Listing::BadQuery(e.to_string())),
    };
    crate::auth_context::limit_to_scope(&store, &mut q.filter)
        .await
        .map_err(|e| seam::store_failed("list dead letters", e))?;
    let listing = store
        .error_groups_counted(&q.filter, q.limit)
        .await
        .map_err(|e| seam::store_failed("list error groups", e))?;
    let counted_among_newest = match listing.counted {
        redrive_core::store::GroupsCounted::Exact => None,
        redrive_core::store::GroupsCounted::AmongNewest(n) => Some(n),
    };
    let groups = listing.groups;
    let fingerprints: Vec<String> = groups.iter().map(|g| g.fingerprint.clone()).collect();
    let trends = crate::trend_window::GroupTrends::read(
        &store,
        &fingerprints,
        q.filter.from_ms,
        q.filter.to_ms,
        redrive_core::clock::now_ms(),
    )
    .await
    .map_err(|e| seam::store_failed("read the error group trends", e))?;
    Ok(Listing::Found(GroupsView {
        trends: trends.trends,
        trend_window: trends.window,
        new: trends.new,
        groups: groups
            .iter()
            .map(crate::display::record::group_row)
            .collect(),
        counted_among_newest,
    }))
}

/// Values present in the store, offered as suggestions by the filter bar.
#[server(input = leptos::server_fn::codec::GetUrl)]
pub async fn get_filter_choices() -> Result<FilterChoices, ServerFnError> {
    let store = seam::store()?;
    let f = store
        .facets()
        .await
        .map_err(|e| seam::store_failed("read the filter choices", e))?;
    use crate::display::record::suggestions;
    let sees = crate::auth_context::topic_check();
    let dlq_topics = f.dlq_topics.into_iter().filter(|t| sees(t)).collect();
    Ok(FilterChoices {
        source_topics: suggestions(f.source_topics),
        dlq_topics: suggestions(dlq_topics),
        consumer_groups: suggestions(f.consumer_groups),
    })
}

/// The dead letter `id`, or `None` if there is none.
#[server(input = leptos::server_fn::codec::GetUrl)]
pub async fn get_dead_letter(id: i64) -> Result<Option<DeadLetterDetail>, ServerFnError> {
    let store = seam::store()?;
    let found = store
        .get(id)
        .await
        .map_err(|e| seam::store_failed("read the dead letter", e))?;
    // Outside the actor's DLQ-topic scope a record is absent.
    let Some(d) = found.filter(|d| crate::auth_context::sees_topic(&d.summary.dlq_topic)) else {
        return Ok(None);
    };
    let mut detail = crate::display::record::detail(&d);
    detail.chain = store
        .replay_chain_from(id, d.link.as_ref().map(|l| l.earlier_id))
        .await
        .map_err(|e| seam::store_failed("read the replay chain", e))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|t| t.as_millis() as i64)
        .unwrap_or(0);
    detail.verdict =
        detail
            .chain
            .verdict(d.summary.status, now, redrive_core::outcome::window_ms());
    // Schema-aware payloads: only this page's value, within its display cap; a failing
    // registry answers within its timeout and is then remembered (docs/payloads.md).
    if let (Some(resolver), Some(value)) = (
        redrive_core::schema::resolver::installed(),
        d.record.value.as_deref(),
    ) {
        if let Some(v) = resolver
            .decode_value(value, crate::display::caps::VALUE_TEXT_BYTES)
            .await
        {
            detail.value_schema = Some(crate::display::schema::shown(v));
        }
    }
    Ok(Some(detail))
}
