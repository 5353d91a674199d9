//! Request parsing shared by the action handlers and the other API modules: JSON bodies,
//! selections (`ids` or `filter`), filters, query strings, and the empty filter's
//! `confirm_all` check.

use axum::body::Bytes;
use redrive_core::actions::Selection;
use serde::Deserialize;
use serde_json::Value;

use crate::api::AppState;
use crate::auth::ApiError;

/// Refuses an "all" action (`selection` is an empty filter) unless `given` is the number of
/// dead letters the empty filter matches now: 422 saying how many and what to send.
pub(crate) async fn confirm_all(
    state: &AppState,
    selection: &Selection,
    given: Option<i64>,
    action: &str,
) -> Result<(), ApiError> {
    use redrive_core::store::ConfirmAllError;
    match state.store.check_confirm_all(selection, given).await {
        Ok(_) => Ok(()),
        Err(ConfirmAllError::Missing { matched }) => Err(ApiError::Unprocessable(format!(
            "the filter is empty, so this {action} would act on every dead letter that is not \
             deleted: {matched} now. Nothing was changed. Narrow the filter, or confirm by \
             adding \"confirm_all\": {matched} to the body (the count POST \
             /api/v1/replays/dry-run reports as `confirm_all`)"
        ))),
        Err(ConfirmAllError::Wrong { matched, given }) => Err(ApiError::Unprocessable(format!(
            "\"confirm_all\" is {given}, but the empty filter matches {matched} dead letters \
             now; nothing was changed. Send \"confirm_all\": {matched} to act on all of \
             them, or narrow the filter"
        ))),
        Err(ConfirmAllError::Store(e)) => Err(state.action_failed("all_count", e)),
    }
}

/// Parses a JSON body: 400 if it is not JSON, 422 if it does not fit `T`.
pub(crate) fn parse_body<T: for<'de> Deserialize<'de>>(body: &Bytes) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        use serde_json::error::Category;
        match e.classify() {
            Category::Data => ApiError::Unprocessable(format!("the body does not fit: {e}")),
            _ => ApiError::BadRequest(format!(
                "the body is not valid JSON ({e}); send a JSON object (docs/api.md gives each \
                 route's fields) with Content-Type: application/json"
            )),
        }
    })
}

/// Exactly one of `ids` and `filter` (the list's names), parsed by the domain's one parser
/// ([`redrive_core::request::selection`]): 422 otherwise.
pub(crate) fn selection(
    ids: Option<Vec<i64>>,
    filter: Option<serde_json::Map<String, Value>>,
) -> Result<Selection, ApiError> {
    Ok(redrive_core::request::selection(ids, filter.as_ref())?)
}

/// The filter object through the domain's one parser ([`redrive_core::request::filter_json`]).
pub(crate) fn filter_from_json(
    obj: &serde_json::Map<String, Value>,
) -> Result<redrive_core::Filter, ApiError> {
    Ok(redrive_core::request::filter_json(obj)?)
}

pub(super) fn query_pairs(raw: Option<&str>) -> Result<Vec<(String, String)>, ApiError> {
    serde_urlencoded::from_str(raw.unwrap_or("")).map_err(|_| {
        ApiError::BadRequest(
            "the query string is not valid URL encoding (name=value pairs joined by &)".into(),
        )
    })
}
