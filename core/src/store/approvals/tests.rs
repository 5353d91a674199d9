//! An approved bulk replay acting on what was asked for; small actions passing and a decline
//! writing nothing.

use crate::actions::{Actor, ReplayOptions, ReplayRequest, Selection};
use crate::approval::{ActionKind, ApprovalPolicy, RequestStatus};
use crate::approval::{ApprovalConfig, ReasonsConfig};
use crate::model::{Convention, NewDeadLetter, Normalized, RawRecord, Status};
use crate::store::CHUNK_ROWS;
use crate::store::{Store, StoreError};
use crate::Filter;

fn record(topic: &str, offset: i64) -> NewDeadLetter {
    NewDeadLetter {
        record: RawRecord {
            dlq_topic: topic.into(),
            dlq_partition: 0,
            dlq_offset: offset,
            timestamp_ms: Some(1_000),
            key: None,
            value: Some(b"v".to_vec()),
            headers: vec![],
        },
        convention: Convention::Unknown,
        fingerprint: "f".into(),
        normalized: Normalized {
            source_topic: Some("orders".into()),
            ..Normalized::default()
        },
        dead_lettered_at_ms: 1_000,
        ingested_at_ms: 1_000,
    }
}

/// A store in a temporary file (removed when the directory is dropped).
async fn store_with(topic: &str, n: i64) -> (Store, tempfile::TempDir) {
    let (store, dir) = crate::store::test_file::sqlite_store("t.db").await;
    // Approval acts as the requester as they are now: they must exist.
    for name in ["ann", "bob"] {
        store
            .create_user(&crate::store::NewUser {
                name,
                role: crate::permission::Role::Operator,
                password_hash: "x",
                created_at_ms: 0,
            })
            .await
            .unwrap();
    }
    let rows: Vec<NewDeadLetter> = (0..n).map(|o| record(topic, o)).collect();
    for chunk in rows.chunks(1000) {
        store.insert_batch(chunk).await.unwrap();
    }
    (store, dir)
}

fn policy(min: u64) -> ApprovalPolicy {
    ApprovalPolicy::new(
        &ApprovalConfig {
            min_records: min,
            dlq_topics: vec!["payments.DLT".into()],
            ..ApprovalConfig::default()
        },
        &ReasonsConfig::default(),
    )
    .unwrap()
}

fn replay_all(topic: &str) -> ReplayRequest {
    ReplayRequest {
        selection: Selection::Filter(Filter {
            dlq_topic: Some(topic.into()),
            ..Filter::default()
        }),
        target_topic: None,
        rate_per_sec: None,
        reason: Some("OPS-1".into()),
        options: ReplayOptions::default(),
    }
}

/// A replay over a filter of more than one chunk waits (nothing queued), is approved by
/// another user, and queues exactly the records that matched at request time.
#[tokio::test]
async fn an_approved_bulk_replay_acts_on_what_was_asked_for() {
    let n = (CHUNK_ROWS + 10) as i64;
    let (store, _dir) = store_with("orders.DLT", n).await;
    let req = replay_all("orders.DLT");
    let pending = store
        .submit_for_approval(
            &policy(100),
            &Actor::operator("ann"),
            ActionKind::Replay,
            &req,
        )
        .await
        .unwrap()
        .expect("over min_records: pending");
    assert_eq!(pending.count, n);
    assert_eq!(pending.per_topic, vec![("orders.DLT".to_string(), n)]);
    assert_eq!(store.outbox_rows().await.unwrap(), 0);
    assert!(store.jobs(10).await.unwrap().is_empty());
    // Arriving later: not swept in.
    store
        .insert_batch(&[record("orders.DLT", n)])
        .await
        .unwrap();

    let e = store
        .approve_request(&Actor::operator("ann"), pending.id, None)
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Invalid(_)), "{e}");
    let out = store
        .approve_request(&Actor::operator("bob"), pending.id, Some("ok"))
        .await
        .unwrap();
    assert_eq!(out.affected, n);
    assert_eq!(out.request.status, RequestStatus::Approved);
    let job = out.job.expect("a job");
    assert_eq!(out.request.job_id.as_deref(), Some(job.id.as_str()));
    assert_eq!(store.outbox_rows().await.unwrap(), n);
    let late = Filter {
        dlq_topic: Some("orders.DLT".into()),
        status: Some(Status::New),
        ..Filter::default()
    };
    assert_eq!(store.count(&late).await.unwrap(), 1, "only the late one");
    let e = store
        .approve_request(&Actor::operator("bob"), pending.id, None)
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Conflict(_)), "{e}");
}

/// Small and outside the topics: no request. On a gated topic: a request, which a
/// decline closes without writing anything.
#[tokio::test]
async fn small_actions_pass_and_declines_write_nothing() {
    let (store, _dir) = store_with("payments.DLT", 2).await;
    let small = replay_all("orders.DLT");
    assert!(store
        .submit_for_approval(
            &policy(100),
            &Actor::operator("ann"),
            ActionKind::Replay,
            &small
        )
        .await
        .unwrap()
        .is_none());
    let req = ReplayRequest {
        reason: None,
        ..replay_all("payments.DLT")
    };
    let r = store
        .submit_for_approval(
            &policy(100),
            &Actor::operator("ann"),
            ActionKind::Delete,
            &req,
        )
        .await
        .unwrap()
        .expect("a gated topic");
    assert!(r.why.contains("payments.DLT"), "{}", r.why);
    assert!(matches!(
        store
            .decline_request(&Actor::operator("bob"), r.id, None)
            .await,
        Err(StoreError::Invalid(_))
    ));
    let d = store
        .decline_request(&Actor::operator("bob"), r.id, Some("no"))
        .await
        .unwrap();
    assert_eq!(d.status, RequestStatus::Declined);
    assert_eq!(store.outbox_rows().await.unwrap(), 0);
    let deleted = Filter {
        status: Some(Status::Deleted),
        ..Filter::default()
    };
    assert_eq!(store.count(&deleted).await.unwrap(), 0);
    assert!(matches!(
        store
            .cancel_request(&Actor::operator("ann"), r.id, None)
            .await,
        Err(StoreError::Conflict(_))
    ));
}
