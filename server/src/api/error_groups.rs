//! Error groups (`GET /api/v1/error-groups`): their public shape and the handler.

use axum::extract::{RawQuery, State};
use axum::Json;
use redrive_app::trend_window::GroupTrends;
use redrive_core::store::GroupsCounted;
use redrive_core::ErrorGroup;
use serde::Serialize;

use super::params::list_query;
use super::{rfc3339, ApiError, AppState};
use crate::auth::Caller;

/// One error group (`GET /api/v1/error-groups`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorGroupItem {
    pub fingerprint: String,
    pub error_class: Option<String>,
    pub example_message: Option<String>,
    pub count: i64,
    pub first_seen: Option<String>,
    pub last_seen: Option<String>,
    /// The group's triage labels, sorted.
    pub labels: Vec<String>,
    /// The group's triage note.
    pub note: Option<String>,
    /// Its dead letters (under every filter) per bucket of the list's `trend`, oldest first:
    /// the groups page's sparkline.
    pub trend: Vec<i64>,
    /// First seen (ever, not only under this filter) in the last 24 h: the page's
    /// "new group" badge.
    pub new_group: bool,
}

/// What each group's `trend` covers: the filter's time range (`from` / `to`; only `from`:
/// to now; only `to`: from the oldest hour kept) cut to now and to the 8 days of hourly
/// counts kept, else the last 24 h; buckets of whole hours, at most 48 of them
/// (`docs/stats.md`, "Error groups per filter"). A range in the future or wholly older
/// than the hours kept has `from == to` and no buckets.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TrendSpan {
    /// The first bucket starts at the hour this falls in (RFC 3339, UTC).
    pub from: Option<String>,
    /// Exclusive end (RFC 3339, UTC): now, or the range's end.
    pub to: Option<String>,
    /// One bucket's length, ms (3,600,000 or a multiple).
    pub bucket_ms: i64,
    /// True when the filter's range starts before the hours kept: `from` is later than the
    /// range's start.
    pub cut: bool,
}

/// The error groups matching a filter, largest first.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorGroupList {
    pub items: Vec<ErrorGroupItem>,
    /// True when every matching dead letter is counted: a filter on fingerprint, DLQ topic,
    /// source topic, consumer group, error class, status and tier only (read from the
    /// maintained aggregate), the same with a time range (its whole hours from the aggregate's
    /// hours, each partial first or last hour from at most 20,000 rows on one side of its
    /// cut), or one that matches fewer dead letters than `counted_among_newest` would be.
    pub exact: bool,
    /// When not `exact`: the counts are of this many newest matching dead letters only
    /// (100,000; by dead-letter time, then id), so each `count` is "at least" and a group
    /// whose dead letters are all older is missing. `null` when `exact`.
    pub counted_among_newest: Option<i64>,
    /// What each item's `trend` covers.
    pub trend: TrendSpan,
}

impl ErrorGroupItem {
    fn new(g: &ErrorGroup, trend: Vec<i64>, new_group: bool) -> Self {
        ErrorGroupItem {
            fingerprint: g.fingerprint.clone(),
            error_class: g.error_class.clone(),
            example_message: g.example_message.clone(),
            count: g.count,
            first_seen: rfc3339(g.first_seen_ms),
            last_seen: rfc3339(g.last_seen_ms),
            labels: g.labels.clone(),
            note: g.note.clone(),
            trend,
            new_group,
        }
    }
}

/// `GET /api/v1/error-groups?FILTER&limit=`: groups by fingerprint, largest first, each with
/// its trend and "new group" flag (from the aggregates, as the groups page shows them).
pub async fn list_error_groups(
    State(state): State<AppState>,
    Caller(actor): Caller,
    RawQuery(raw): RawQuery,
) -> Result<Json<ErrorGroupList>, ApiError> {
    // Before the query is parsed, so any `cursor` (one that would not parse too) gets
    // this message rather than "not one this server gave out".
    let has_cursor = raw
        .as_deref()
        .is_some_and(|q| url::form_urlencoded::parse(q.as_bytes()).any(|(k, _)| k == "cursor"));
    if has_cursor {
        return Err(ApiError::BadRequest(
            "`cursor` does not apply to error groups: they come as one list of at most `limit` \
             (up to 500), largest first"
                .into(),
        ));
    }
    let mut query = list_query(raw.as_deref())?;
    state
        .store
        .limit_to_scope(&actor, &mut query.filter)
        .await
        .map_err(|e| state.store_failed("error_groups", e))?;
    let listing = state
        .store
        .error_groups_counted(&query.filter, query.limit)
        .await
        .map_err(|e| state.store_failed("error_groups", e))?;
    let counted_among_newest = match listing.counted {
        GroupsCounted::Exact => None,
        GroupsCounted::AmongNewest(n) => Some(n),
    };
    let fingerprints: Vec<String> = listing
        .groups
        .iter()
        .map(|g| g.fingerprint.clone())
        .collect();
    let trends = GroupTrends::read(
        &state.store,
        &fingerprints,
        query.filter.from_ms,
        query.filter.to_ms,
        redrive_core::clock::now_ms(),
    )
    .await
    .map_err(|e| state.store_failed("error_group_trends", e))?;
    let window = trends.window;
    Ok(Json(ErrorGroupList {
        items: listing
            .groups
            .iter()
            .zip(trends.trends)
            .zip(trends.new)
            .map(|((g, t), new)| ErrorGroupItem::new(g, t.counts, new))
            .collect(),
        exact: counted_among_newest.is_none(),
        counted_among_newest,
        trend: TrendSpan {
            from: rfc3339(window.first_bucket_ms()),
            to: rfc3339(window.end_ms),
            bucket_ms: window.bucket_ms,
            cut: window.cut,
        },
    }))
}
