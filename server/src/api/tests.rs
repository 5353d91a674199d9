//! Unit tests of the API's shared parsing and time format.

use axum::extract::Path;

use super::params::list_query;
use super::*;

#[test]
fn times_are_rfc3339_utc_with_milliseconds() {
    assert_eq!(
        rfc3339(1_764_568_800_123).as_deref(),
        Some("2025-12-01T06:00:00.123Z")
    );
    assert_eq!(rfc3339(0).as_deref(), Some("1970-01-01T00:00:00.000Z"));
    assert_eq!(rfc3339(i64::MAX), None);
}

#[test]
fn query_strings_are_parsed_strictly() {
    assert!(list_query(None).is_ok());
    assert!(list_query(Some("q=a%20b&limit=5")).is_ok());
    assert!(matches!(
        list_query(Some("colour=red")),
        Err(ApiError::BadRequest(_))
    ));
    assert!(matches!(
        list_query(Some("limit=501")),
        Err(ApiError::BadRequest(_))
    ));
    assert!(matches!(
        list_query(Some("q=%ZZ")),
        Err(ApiError::BadRequest(_)) | Ok(_)
    ));
}

#[test]
fn ids_must_be_numbers() {
    assert_eq!(parse_id(Ok(Path("42".into()))).ok(), Some(42));
    assert!(matches!(
        parse_id(Ok(Path("abc".into()))),
        Err(ApiError::BadRequest(_))
    ));
    assert!(matches!(
        parse_id(Ok(Path("99999999999999999999".into()))),
        Err(ApiError::BadRequest(_))
    ));
}
