//! Unit tests of the API's shared parsing, time format and 404 message.

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

#[test]
fn an_unknown_path_under_known_routes_names_them() {
    let documented = || {
        crate::openapi::spec()
            .paths
            .paths
            .keys()
            .map(String::as_str)
    };
    // A prefix of existing routes: the routes under it, not the dead-letter ones.
    for path in [
        "/api/v1/automation",
        "/api/v1/automation/",
        "/api/v1/automation/nope",
    ] {
        let m = not_found_message(&Method::GET, path, documented());
        assert!(m.starts_with(&format!("no API route GET {path};")), "{m}");
        assert!(
            m.contains("the routes under /api/v1/automation are")
                && m.contains("/api/v1/automation/rules,")
                && m.contains("/api/v1/automation/versions")
                && m.contains("/api/v1/automation/dry-run")
                && m.contains("/api/docs"),
            "{m}"
        );
        assert!(!m.contains("/api/v1/dead-letters"), "{m}");
    }
    // The longest prefix wins, and a `{param}` segment matches any segment.
    let m = not_found_message(&Method::POST, "/api/v1/automation/rules/r1", documented());
    assert!(
        m.contains("under /api/v1/automation/rules/r1 are")
            && m.contains("/api/v1/automation/rules/{name}/pause")
            && m.contains("/api/v1/automation/rules/{name}/resume"),
        "{m}"
    );
    assert!(!m.contains("/api/v1/automation/versions"), "{m}");
    let m = not_found_message(&Method::GET, "/api/v1/dead-letters/7/raw", documented());
    assert!(
        m.contains("/api/v1/dead-letters/{id}/raw/value")
            && m.contains("/api/v1/dead-letters/{id}/raw/headers"),
        "{m}"
    );
    // Nothing under it: the main routes, as before.
    for path in ["/api/v1", "/api/v1/", "/api/v1/no-such-thing"] {
        let m = not_found_message(&Method::GET, path, documented());
        assert!(
            m.contains("see /api/v1/dead-letters, /api/v1/dead-letters/{id}")
                && m.contains("/api/docs"),
            "{path}: {m}"
        );
    }
    // A long list is cut, and says how many it left out.
    let many: Vec<String> = (0..12).map(|i| format!("/api/v1/things/t{i}")).collect();
    let m = not_found_message(
        &Method::GET,
        "/api/v1/things",
        many.iter().map(String::as_str),
    );
    assert!(
        m.contains("/api/v1/things/t7 and 4 more") && !m.contains("t8"),
        "{m}"
    );
    let one = ["/api/v1/thing/only"];
    let m = not_found_message(&Method::GET, "/api/v1/thing", one.into_iter());
    assert!(
        m.contains("the route under /api/v1/thing is /api/v1/thing/only"),
        "{m}"
    );
}
