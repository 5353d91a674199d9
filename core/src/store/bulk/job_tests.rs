//! A replay job over a filter paused or cancelled while it is still `preparing` (its bulk
//! action queueing outbox rows chunk by chunk): see `bulk/mod.rs` and `job_control.rs`.

use super::tests::{eve, store_with};
use super::*;
use crate::actions::{AuditQuery, JobStatus, ReplayJob, Selection};
use crate::filter::Filter;
use crate::model::Status;
use crate::store::Store;

/// A job as `request_replay` makes one for a filter, before its first chunk.
fn preparing_job() -> ReplayJob {
    ReplayJob {
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
        selection: serde_json::to_string(&Selection::Filter(Filter::default())).unwrap(),
        options: Default::default(),
        transform: Default::default(),
        refailed: 0,
        canary: None,
        lag: Default::default(),
    }
}

/// The store with `n` dead letters and a replay of all of them stopped after its first chunk,
/// and the directory of its file (removed when dropped).
async fn half_prepared(n: i64) -> (Store, Bulk, String, tempfile::TempDir) {
    let (store, dir) = store_with(n).await;
    let job = preparing_job();
    let max_id = store.max_dead_letter_id().await.unwrap();
    let bulk = Bulk::new(
        BulkKind::Replay,
        &eve(),
        &Filter::default(),
        None,
        Some(job.clone()),
        max_id,
    );
    let bulk = store.run_bulk_chunks(bulk, 1).await.unwrap();
    let j = store.job(&job.id).await.unwrap().unwrap();
    assert_eq!(
        (j.status, j.total),
        (JobStatus::Preparing, CHUNK_ROWS as i64)
    );
    (store, bulk, job.id, dir)
}

async fn replay_outcomes(store: &Store) -> Vec<String> {
    let q = AuditQuery {
        actor: None,
        action: Some("replay".into()),
        from_ms: None,
        to_ms: None,
        limit: 10,
        before_id: None,
    };
    let items = store.audit(&q).await.unwrap().items;
    items.into_iter().map(|a| a.outcome).collect()
}

/// Cancelled after its first chunk: the rows queued so far are released, the next chunk
/// queues nothing and ends the action with ONE audit row saying so; no row stays queued.
#[tokio::test]
async fn a_job_cancelled_while_preparing_queues_no_more_and_is_audited_once() {
    let n = (2 * CHUNK_ROWS + 10) as i64;
    let (store, bulk, job_id, _dir) = half_prepared(n).await;
    let cancelled = store.cancel_job(&eve(), &job_id).await.unwrap();
    assert_eq!(
        (cancelled.status, cancelled.cancelled),
        (JobStatus::Cancelled, CHUNK_ROWS as i64)
    );

    let rest = store.run_bulk_chunks(bulk, usize::MAX).await.unwrap();
    assert!(rest.cancelled);
    assert_eq!(
        rest.chunks, 2,
        "the chunk that saw the cancel ended the action"
    );
    let j = store.job(&job_id).await.unwrap().unwrap();
    assert_eq!(
        (j.status, j.total, j.cancelled, j.published),
        (
            JobStatus::Cancelled,
            CHUNK_ROWS as i64,
            CHUNK_ROWS as i64,
            0
        )
    );
    let fresh = Filter {
        status: Some(Status::New),
        ..Filter::default()
    };
    assert_eq!(
        store.count(&fresh).await.unwrap(),
        n,
        "every dead letter back to new"
    );
    assert!(store.active_jobs().await.unwrap().is_empty());
    let outcomes = replay_outcomes(&store).await;
    assert_eq!(outcomes.len(), 1, "{outcomes:?}");
    assert!(
        outcomes[0].starts_with("cancelled while preparing: 500 queued"),
        "{outcomes:?}"
    );
    let actions = store.bulk_actions(10).await.unwrap();
    assert_eq!(actions[0].status, "done");
    // Resuming interrupted actions finds nothing to do.
    assert_eq!(store.resume_bulk_actions(0).await.unwrap(), 0);
}

/// Paused after its first chunk: queueing goes on, the job stays `paused` (nothing is
/// published); resumed while still queueing it is `preparing` again, so the last chunk's
/// audit row is still what lets it run; resumed after, it runs.
#[tokio::test]
async fn a_job_paused_while_preparing_stays_paused_until_resumed() {
    let n = (2 * CHUNK_ROWS + 10) as i64;
    let (store, bulk, job_id, _dir) = half_prepared(n).await;
    let paused = store
        .pause_job(&eve(), &job_id, Some("hold"))
        .await
        .unwrap();
    assert_eq!(paused.status, JobStatus::Paused);
    let resumed = store.resume_job(&eve(), &job_id, None).await.unwrap();
    assert_eq!(resumed.status, JobStatus::Preparing, "still queueing");
    store.pause_job(&eve(), &job_id, None).await.unwrap();

    let done = store.run_bulk_chunks(bulk, usize::MAX).await.unwrap();
    assert!(!done.cancelled);
    let j = store.job(&job_id).await.unwrap().unwrap();
    assert_eq!((j.status, j.total), (JobStatus::Paused, n));
    assert!(
        store.active_jobs().await.unwrap().is_empty(),
        "paused: nothing to publish"
    );
    assert_eq!(store.audit_count_for_test("replay").await, 1);

    let running = store.resume_job(&eve(), &job_id, None).await.unwrap();
    assert_eq!(running.status, JobStatus::Running);
    assert_eq!(store.active_jobs().await.unwrap().len(), 1);
}
