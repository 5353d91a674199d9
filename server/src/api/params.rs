//! Request parsing shared by the API handlers (and `raw.rs`): the list query string, the
//! dead-letter id in the path, and the 404 for an id that is not there.

use axum::extract::rejection::PathRejection;
use axum::extract::Path;
use redrive_core::ListQuery;

use super::ApiError;

// ---------------------------------------------------------------------------------------------
// Parameter parsing

/// Parses the query string with the shared [`ListQuery`] rules (unknown, repeated or malformed
/// parameters are refused).
pub(super) fn list_query(raw: Option<&str>) -> Result<ListQuery, ApiError> {
    let pairs: Vec<(String, String)> =
        serde_urlencoded::from_str(raw.unwrap_or("")).map_err(|_| {
            ApiError::BadRequest(
                "the query string is not valid URL encoding (name=value pairs joined by &)".into(),
            )
        })?;
    Ok(ListQuery::from_pairs(
        pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    )?)
}

/// A dead-letter id from the path: a whole number, else 400.
pub(crate) fn parse_id(path: Result<Path<String>, PathRejection>) -> Result<i64, ApiError> {
    let raw = match path {
        Ok(Path(s)) => s,
        Err(_) => {
            return Err(ApiError::BadRequest(
                "the dead-letter id is not valid".into(),
            ))
        }
    };
    raw.trim().parse::<i64>().map_err(|_| {
        ApiError::BadRequest(format!(
            "`{raw}` is not a dead-letter id: ids are whole numbers, as in /api/v1/dead-letters/42"
        ))
    })
}

pub(crate) fn not_found(id: i64) -> ApiError {
    ApiError::NotFound(format!(
        "no dead letter with id {id}; it may never have existed or been purged \
         (list them at /api/v1/dead-letters)"
    ))
}
