//! An interrupted bulk delete and replay, resumed; and the helpers `job_tests.rs` shares (a
//! store with `n` dead letters, the actor, audit rows counted).

use super::*;
use crate::actions::{Actor, JobStatus, ReplayJob, ReplayRequest, Selection};
use crate::filter::Filter;
use crate::model::{NewDeadLetter, Status};
use crate::store::Store;

fn dead_letter(offset: i64) -> NewDeadLetter {
    crate::store::test_records::dead_letter(offset, None)
}

pub(super) fn eve() -> Actor {
    Actor {
        client_ip: Some("192.0.2.7".into()),
        ..Actor::operator("eve")
    }
}

impl Store {
    pub(super) async fn audit_count_for_test(&self, action: &str) -> usize {
        let q = crate::actions::AuditQuery {
            actor: None,
            action: Some(action.to_string()),
            from_ms: None,
            to_ms: None,
            limit: 100,
            before_id: None,
        };
        self.audit(&q).await.unwrap().items.len()
    }
}

/// A store in a temporary file with `n` dead letters (removed when the directory is
/// dropped).
pub(super) async fn store_with(n: i64) -> (Store, tempfile::TempDir) {
    let (store, dir) = crate::store::test_file::sqlite_store("t.db").await;
    let rows: Vec<NewDeadLetter> = (0..n).map(dead_letter).collect();
    for chunk in rows.chunks(1000) {
        store.insert_batch(chunk).await.unwrap();
    }
    (store, dir)
}

/// A delete over a filter that is interrupted after 2 of its 3 chunks (as a crash would
/// leave it): visible as `running` with its progress, and no audit row yet; resumed, it
/// finishes the rest once, and ONE audit row carries the final count.
#[tokio::test]
async fn an_interrupted_bulk_delete_is_visible_and_resumed_with_one_audit_row() {
    let n = (2 * CHUNK_ROWS + 500) as i64;
    let (store, _dir) = store_with(n).await;
    let max_id = store.max_dead_letter_id().await.unwrap();
    let bulk = Bulk::new(
        BulkKind::Delete,
        &eve(),
        &Filter::default(),
        Some("cleanup".into()),
        None,
        max_id,
    );
    let half = store.run_bulk_chunks(bulk, 2).await.unwrap();
    assert_eq!(half.done, 2 * CHUNK_ROWS as i64);
    let listed = store.bulk_actions(10).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].status.as_str(), listed[0].done, listed[0].chunks),
        ("running", 2 * CHUNK_ROWS as i64, 2)
    );
    assert_eq!(store.audit_count_for_test("delete").await, 0);

    // Not stale yet: left alone. Stale: resumed and finished.
    assert_eq!(store.resume_bulk_actions(STALE_AFTER_MS).await.unwrap(), 0);
    assert_eq!(store.resume_bulk_actions(0).await.unwrap(), 1);
    let listed = store.bulk_actions(10).await.unwrap();
    assert_eq!((listed[0].status.as_str(), listed[0].done), ("done", n));
    assert_eq!(listed[0].resumed, 1);
    let deleted = Filter {
        status: Some(Status::Deleted),
        ..Filter::default()
    };
    assert_eq!(store.count(&deleted).await.unwrap(), n);
    assert_eq!(store.audit_count_for_test("delete").await, 1);
    assert!(longest_bulk_transaction() > std::time::Duration::ZERO);
}

/// A replay over a filter interrupted half-way publishes nothing (its job is
/// `preparing`); resumed, the job becomes `running` with every row queued once.
#[tokio::test]
async fn an_interrupted_bulk_replay_stays_preparing_until_resumed() {
    let n = (CHUNK_ROWS + 10) as i64;
    let (store, _dir) = store_with(n).await;
    let job = ReplayJob {
        id: uuid::Uuid::new_v4().to_string(),
        status: JobStatus::Preparing,
        created_by: "eve".into(),
        created_at_ms: 1,
        started_at_ms: None,
        finished_at_ms: None,
        target_topic: Some("orders".into()),
        rate_per_sec: None,
        reason: None,
        total: 0,
        published: 0,
        failed: 0,
        cancelled: 0,
        skipped: 0,
        skipped_without_target: 0,
        last_error: None,
        selection: serde_json::to_string(
            &ReplayRequest {
                selection: Selection::Filter(Filter::default()),
                target_topic: None,
                rate_per_sec: None,
                reason: None,
                options: Default::default(),
            }
            .selection,
        )
        .unwrap(),
        options: Default::default(),
        transform: Default::default(),
        refailed: 0,
        canary: None,
        lag: Default::default(),
        queueing: None,
    };
    let max_id = store.max_dead_letter_id().await.unwrap();
    let bulk = Bulk::new(
        BulkKind::Replay,
        &eve(),
        &Filter::default(),
        None,
        Some(job.clone()),
        max_id,
    );
    store.run_bulk_chunks(bulk, 1).await.unwrap();
    let j = store.job(&job.id).await.unwrap().unwrap();
    assert_eq!(
        (j.status, j.total),
        (JobStatus::Preparing, CHUNK_ROWS as i64)
    );
    assert!(
        store.active_jobs().await.unwrap().is_empty(),
        "nothing to publish yet"
    );
    assert_eq!(store.resume_bulk_actions(0).await.unwrap(), 1);
    let j = store.job(&job.id).await.unwrap().unwrap();
    assert_eq!((j.status, j.total, j.skipped), (JobStatus::Running, n, 0));
    assert_eq!(store.audit_count_for_test("replay").await, 1);
}

/// A chunk raises its SQLite connection's page cache for its transaction only: after a bulk
/// delete of two chunks on a one-connection pool, that connection has the small cache again
/// (`SQLITE_WRITER_CACHE_KIB`, `chunk.rs`).
#[tokio::test]
async fn a_chunk_gives_its_connection_the_small_page_cache_back() {
    let (store, _dir) = store_with(CHUNK_ROWS as i64 + 10).await;
    let one = store.with_own_pool(1).await.expect("own pool");
    let bulk = Bulk::new(
        BulkKind::Delete,
        &eve(),
        &Filter::default(),
        None,
        None,
        one.max_dead_letter_id().await.unwrap(),
    );
    let done = one.run_bulk(bulk).await.unwrap();
    assert_eq!((done.done, done.chunks), (CHUNK_ROWS as i64 + 10, 2));
    let mut c = crate::store::test_file::sqlite_pool(&one)
        .acquire()
        .await
        .expect("the pool's one connection");
    let cache: i64 = sqlx::query_scalar("PRAGMA cache_size")
        .fetch_one(&mut *c)
        .await
        .unwrap();
    assert_eq!(cache, -i64::from(crate::store::SQLITE_CACHE_KIB));
}
