//! Unit tests of the actions API's parsing (selections, bodies and the audit query) and of
//! the job's public shape.

use axum::body::Bytes;
use redrive_core::actions::Selection;
use serde_json::Value;

use super::audit::audit_query;
use super::delete_restore::ChangeBody;
use super::jobs::JobItem;
use super::request::{parse_body, selection};
use crate::auth::ApiError;

#[test]
fn selections() {
    assert!(matches!(
        selection(Some(vec![3, 1, 3]), None),
        Ok(Selection::Ids(v)) if v == vec![1, 3]
    ));
    assert!(matches!(
        selection(Some(vec![]), None),
        Err(ApiError::Unprocessable(_))
    ));
    assert!(matches!(
        selection(None, None),
        Err(ApiError::Unprocessable(_))
    ));
    let obj: serde_json::Map<String, Value> =
        serde_json::from_str(r#"{"source_topic": "orders", "from": 1796104800000, "q": null}"#)
            .unwrap();
    match selection(None, Some(obj)) {
        Ok(Selection::Filter(f)) => {
            assert_eq!(f.source_topic.as_deref(), Some("orders"));
            assert_eq!(f.from_ms, Some(1_796_104_800_000));
        }
        other => panic!("{other:?}"),
    }
    for bad in [
        r#"{"colour": "red"}"#,
        r#"{"limit": "5"}"#,
        r#"{"status": ["new"]}"#,
    ] {
        let obj = serde_json::from_str(bad).unwrap();
        assert!(
            matches!(selection(None, Some(obj)), Err(ApiError::Unprocessable(_))),
            "{bad}"
        );
    }
}

#[test]
fn bodies_and_queries() {
    assert!(matches!(
        parse_body::<ChangeBody>(&Bytes::from_static(b"{not json")),
        Err(ApiError::BadRequest(_))
    ));
    assert!(matches!(
        parse_body::<ChangeBody>(&Bytes::from_static(b"{\"ids\": \"x\"}")),
        Err(ApiError::Unprocessable(_))
    ));
    assert!(matches!(
        parse_body::<ChangeBody>(&Bytes::from_static(b"{\"rate_per_sec\": 5}")),
        Err(ApiError::Unprocessable(_))
    ));
    let q = audit_query(Some("actor=alice&from=2026-12-01&limit=10&cursor=99&to=")).unwrap();
    assert_eq!(q.actor.as_deref(), Some("alice"));
    assert_eq!(q.limit, 10);
    assert_eq!(q.before_id, Some(99));
    assert_eq!(q.to_ms, None);
    assert!(audit_query(Some("who=x")).is_err());
    assert!(audit_query(Some("limit=0")).is_err());
}

/// A job of `GET /api/v1/replays` (and `/{id}`) says how many of its published records came
/// back, as the job page does.
#[test]
fn a_job_counts_what_came_back() {
    let job: redrive_core::actions::ReplayJob = serde_json::from_value(serde_json::json!({
        "id": "j", "status": "finished", "created_by": "ana", "created_at_ms": 1_000,
        "total": 10, "published": 10, "failed": 0, "cancelled": 0, "skipped": 0,
        "skipped_without_target": 0, "selection": "{\"ids\":[1]}", "refailed": 3
    }))
    .unwrap();
    let item = serde_json::to_value(JobItem::from(&job)).unwrap();
    assert_eq!(item["refailed"], 3, "{item}");
    assert_eq!(item["published"], 10, "{item}");
}
