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
        queueing: None,
    }
}

/// The store with `n` dead letters and a replay of all of them (`unordered` or keeping
/// per-key order) stopped after `chunks` chunks, and the directory of its file (removed when
/// dropped).
async fn half_queued(
    n: i64,
    chunks: usize,
    unordered: bool,
) -> (Store, Bulk, ReplayJob, tempfile::TempDir) {
    let (store, dir) = store_with(n).await;
    let mut job = preparing_job();
    job.options.unordered = unordered;
    let max_id = store.max_dead_letter_id().await.unwrap();
    let bulk = Bulk::new(
        BulkKind::Replay,
        &eve(),
        &Filter::default(),
        None,
        Some(job.clone()),
        max_id,
    );
    let bulk = store.run_bulk_chunks(bulk, chunks).await.unwrap();
    (store, bulk, job, dir)
}

/// A replay keeping per-key order (the default) stopped after its first chunk: `preparing`.
async fn half_prepared(n: i64) -> (Store, Bulk, String, tempfile::TempDir) {
    let (store, bulk, job, dir) = half_queued(n, 1, false).await;
    let j = store.job(&job.id).await.unwrap().unwrap();
    assert_eq!(
        (j.status, j.total),
        (JobStatus::Preparing, CHUNK_ROWS as i64)
    );
    // The job page shows how far the queueing has come.
    let q = j.queueing.expect("still queueing");
    assert_eq!((q.chunks, q.max_id), (1, bulk.max_id));
    assert!(
        q.cursor_id >= CHUNK_ROWS as i64 && q.cursor_id < bulk.max_id,
        "{q:?}"
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

/// Publishing while queueing (`ReplayOptions::publishes_while_queueing`): an unordered job
/// without a canary, stopped after `chunks` chunks of a replay of `n` dead letters.
async fn half_streamed(n: i64, chunks: usize) -> (Store, Bulk, ReplayJob, tempfile::TempDir) {
    half_queued(n, chunks, true).await
}

/// Claims and marks published every row of `job` that is due now; returns how many.
async fn publish_due(store: &Store, job: &ReplayJob) -> usize {
    let mut n = 0;
    loop {
        let claim = crate::store::canary::tests::claim(store, job).await;
        if claim.rows.is_empty() {
            return n;
        }
        n += claim.rows.len();
        crate::store::canary::tests::publish(store, job, &claim).await;
    }
}

/// An unordered replay over a filter is `running` from its first chunk, with a
/// `replay_started` audit row written before any of its rows can be claimed; its rows are
/// claimable chunk by chunk, and the job does not finish while the action still queues,
/// even with nothing left to publish between two chunks. The last chunk writes the `replay`
/// row with the final count, and the job finishes when the relay has published the rest.
#[tokio::test]
async fn an_unordered_replay_is_published_while_its_chunks_queue_it() {
    let n = (2 * CHUNK_ROWS + 10) as i64;
    let (store, bulk, job, _dir) = half_streamed(n, 1).await;
    let j = store.job(&job.id).await.unwrap().unwrap();
    assert_eq!((j.status, j.total), (JobStatus::Running, CHUNK_ROWS as i64));
    assert_eq!(j.queueing.map(|q| q.chunks), Some(1), "still queueing");
    assert_eq!(store.active_jobs().await.unwrap().len(), 1);
    assert_eq!(store.audit_count_for_test("replay_started").await, 1);
    assert_eq!(store.audit_count_for_test("replay").await, 0);

    assert_eq!(publish_due(&store, &job).await, CHUNK_ROWS);
    assert!(
        !store.finish_job_if_done(&job.id).await.unwrap(),
        "nothing left to publish, but the action still queues"
    );
    let j = store.job(&job.id).await.unwrap().unwrap();
    assert_eq!(
        (j.status, j.published),
        (JobStatus::Running, CHUNK_ROWS as i64)
    );

    let done = store.run_bulk_chunks(bulk, usize::MAX).await.unwrap();
    assert_eq!(done.chunks, 3);
    let j = store.job(&job.id).await.unwrap().unwrap();
    assert_eq!((j.status, j.total), (JobStatus::Running, n));
    assert_eq!(j.queueing, None, "every row queued");
    let outcomes = replay_outcomes(&store).await;
    assert_eq!(outcomes.len(), 1, "{outcomes:?}");
    assert!(
        outcomes[0].starts_with(&format!("ok: {n} queued"))
            && outcomes[0].contains("in 3 chunks, published while queueing"),
        "{outcomes:?}"
    );
    assert_eq!(publish_due(&store, &job).await, n as usize - CHUNK_ROWS);
    let j = store.job(&job.id).await.unwrap().unwrap();
    assert_eq!((j.status, j.published), (JobStatus::Finished, n));
    assert_eq!(store.audit_count_for_test("replay_started").await, 1);
}

/// The relay published every row before the last chunk, and the last chunk queues none:
/// that chunk finishes the job itself (no relay would, with nothing left to claim).
#[tokio::test]
async fn a_streamed_replay_whose_rows_are_all_published_ends_with_its_last_chunk() {
    let n = (2 * CHUNK_ROWS) as i64;
    let (store, bulk, job, _dir) = half_streamed(n, 2).await;
    assert_eq!(publish_due(&store, &job).await, n as usize);
    let j = store.job(&job.id).await.unwrap().unwrap();
    assert_eq!(j.status, JobStatus::Running);

    let done = store.run_bulk_chunks(bulk, usize::MAX).await.unwrap();
    assert_eq!(done.chunks, 3, "the third chunk found no row");
    let j = store.job(&job.id).await.unwrap().unwrap();
    assert_eq!(
        (j.status, j.total, j.published),
        (JobStatus::Finished, n, n)
    );
    assert!(j.finished_at_ms.is_some());
}

/// Paused while it queues, a streamed job stays `paused` through its last chunk and is
/// `running` again when resumed, even while still queueing: its audit row is written. A
/// cancel while it queues ends the action with the `replay` row saying so.
#[tokio::test]
async fn a_streamed_replay_can_be_paused_resumed_and_cancelled_while_it_queues() {
    let n = (3 * CHUNK_ROWS + 10) as i64;
    let (store, bulk, job, _dir) = half_streamed(n, 1).await;
    let paused = store.pause_job(&eve(), &job.id, None).await.unwrap();
    assert_eq!(paused.status, JobStatus::Paused);
    let bulk = store.run_bulk_chunks(bulk, 1).await.unwrap();
    let j = store.job(&job.id).await.unwrap().unwrap();
    assert_eq!(
        j.status,
        JobStatus::Paused,
        "a chunk keeps a person's pause"
    );
    assert!(store.active_jobs().await.unwrap().is_empty());
    let resumed = store.resume_job(&eve(), &job.id, None).await.unwrap();
    assert_eq!(
        resumed.status,
        JobStatus::Running,
        "published while queueing"
    );
    assert_eq!(publish_due(&store, &job).await, 2 * CHUNK_ROWS);

    store.cancel_job(&eve(), &job.id).await.unwrap();
    let rest = store.run_bulk_chunks(bulk, usize::MAX).await.unwrap();
    assert!(rest.cancelled);
    let j = store.job(&job.id).await.unwrap().unwrap();
    assert_eq!(
        (j.status, j.total, j.published),
        (
            JobStatus::Cancelled,
            2 * CHUNK_ROWS as i64,
            2 * CHUNK_ROWS as i64
        )
    );
    let outcomes = replay_outcomes(&store).await;
    assert_eq!(outcomes.len(), 1, "{outcomes:?}");
    assert!(
        outcomes[0].starts_with("cancelled while queueing: 1000 queued"),
        "{outcomes:?}"
    );
}

/// A replay that keeps per-key order (the default) or has a canary is still `preparing`
/// until its last chunk: both need the whole outbox first.
#[test]
fn only_an_unordered_replay_without_a_canary_is_published_while_queueing() {
    let mut options = crate::actions::ReplayOptions::default();
    assert!(!options.publishes_while_queueing());
    options.unordered = true;
    assert!(options.publishes_while_queueing());
    options.canary = Some(crate::canary::CanaryOptions {
        records: Some(10),
        ..Default::default()
    });
    assert!(!options.publishes_while_queueing());
}

/// An unordered replay that fits in one chunk is one transaction as before: `running` with
/// its one `replay` audit row, no `replay_started` row.
#[tokio::test]
async fn an_unordered_replay_of_one_chunk_is_running_with_one_audit_row() {
    let n = 10;
    let (store, done, job, _dir) = half_streamed(n, usize::MAX).await;
    assert_eq!(done.chunks, 1);
    let j = store.job(&job.id).await.unwrap().unwrap();
    assert_eq!((j.status, j.total), (JobStatus::Running, n));
    assert_eq!(store.audit_count_for_test("replay_started").await, 0);
    let outcomes = replay_outcomes(&store).await;
    assert_eq!(outcomes.len(), 1, "{outcomes:?}");
    assert!(
        !outcomes[0].contains("published while queueing"),
        "{outcomes:?}"
    );
    assert_eq!(publish_due(&store, &job).await, n as usize);
    let j = store.job(&job.id).await.unwrap().unwrap();
    assert_eq!(j.status, JobStatus::Finished);
}
