//! Error groups (`GET /api/v1/error-groups`): their public shape and the handler.

use axum::extract::{RawQuery, State};
use axum::Json;
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
}

impl From<&ErrorGroup> for ErrorGroupItem {
    fn from(g: &ErrorGroup) -> Self {
        ErrorGroupItem {
            fingerprint: g.fingerprint.clone(),
            error_class: g.error_class.clone(),
            example_message: g.example_message.clone(),
            count: g.count,
            first_seen: rfc3339(g.first_seen_ms),
            last_seen: rfc3339(g.last_seen_ms),
            labels: g.labels.clone(),
            note: g.note.clone(),
        }
    }
}

/// `GET /api/v1/error-groups?FILTER&limit=`: groups by fingerprint, largest first.
pub async fn list_error_groups(
    State(state): State<AppState>,
    Caller(actor): Caller,
    RawQuery(raw): RawQuery,
) -> Result<Json<ErrorGroupList>, ApiError> {
    let mut query = list_query(raw.as_deref())?;
    state
        .store
        .limit_to_scope(&actor, &mut query.filter)
        .await
        .map_err(|e| state.store_failed("error_groups", e))?;
    if query.cursor.is_some() {
        return Err(ApiError::BadRequest(
            "`cursor` does not apply to error groups: they come as one list of at most `limit` \
             (up to 500), largest first"
                .into(),
        ));
    }
    let listing = state
        .store
        .error_groups_counted(&query.filter, query.limit)
        .await
        .map_err(|e| state.store_failed("error_groups", e))?;
    let counted_among_newest = match listing.counted {
        GroupsCounted::Exact => None,
        GroupsCounted::AmongNewest(n) => Some(n),
    };
    Ok(Json(ErrorGroupList {
        items: listing.groups.iter().map(ErrorGroupItem::from).collect(),
        exact: counted_among_newest.is_none(),
        counted_among_newest,
    }))
}
