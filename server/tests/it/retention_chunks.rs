//! A retention purge chunk at the store's level (`docs/retention.md`, "Purge"): on PostgreSQL
//! it waits for a row another writer holds and re-checks it, it is tried again when it loses a
//! deadlock; and a run whose chunk fails for good ends `failed` with its audit row (SQLite).
//! The purge through the real binary is `retention.rs`. A bulk action's chunk, and a delete
//! or a replay of picked dead letters, tried again after a deadlock, as a purge chunk is.

use std::time::Duration;

use redrive_core::actions::{Actor, ReplayRequest, Selection};
use redrive_core::model::Status;
use redrive_core::retention::{Backpressure, RetentionConfig, RetentionStatus};
use redrive_core::store::Store;
use redrive_core::Filter;
use redrive_testkit::ingest::summaries_in;
use redrive_testkit::{fresh_database, Backend};

use crate::retention::{aged, audit_of, total, DAY_MS};
use crate::support::eventually;
use crate::support::sql::{someone_waits_on_a_lock, update_in};

/// The ids of `topic`'s stored dead letters (all statuses but deleted), ascending.
async fn ids_in(store: &Store, topic: &str) -> Vec<i64> {
    let mut ids: Vec<i64> = summaries_in(store, topic)
        .await
        .expect("list")
        .iter()
        .map(|s| s.id)
        .collect();
    ids.sort_unstable();
    ids
}

/// A purge chunk on PostgreSQL waits for a dead letter another writer holds (here the tier
/// sorter's kind of short `UPDATE`) and then re-checks its status: it is purged when the
/// status still allows it, left alone when it became `replay_pending` meanwhile. (It used to
/// skip locked rows: a run then reported `done` having silently purged fewer than it selected,
/// which failed `purges_by_age_count_and_deleted_age_in_chunks` in CI while the sorter sorted
/// the same rows at start-up.) SQLite has one writer at a time: nothing to skip or wait for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_chunk_waits_for_a_row_another_writer_holds() {
    let (url, _dir) = fresh_database(Backend::Postgres).await.expect("database");
    let store = Store::connect(&url).await.expect("connect");
    store.migrate().await.expect("migrate");
    store
        .insert_batch(&aged("held.DLT", 0, 4, 10 * DAY_MS))
        .await
        .expect("insert");
    let ids = ids_in(&store, "held.DLT").await;
    let (held, changed) = (ids[1], ids[2]);

    let other = sqlx::PgPool::connect(&url).await.expect("postgres");
    let mut tx = other.begin().await.unwrap();
    update_in(&mut tx, "tier = 'manual'", held).await;
    update_in(&mut tx, "status = 'replay_pending'", changed).await;

    let run = store
        .start_retention_run("purge", "(test)", None)
        .await
        .unwrap();
    let purge = tokio::spawn({
        let (store, ids) = (store.clone(), ids.clone());
        async move {
            store
                .purge_chunk(run, &ids, &["new", "replay_failed"], "[]")
                .await
        }
    });
    // The purge is blocked on the held rows (not past them) before the writer commits.
    eventually(
        "the purge waiting on a row lock",
        Duration::from_secs(30),
        || async { someone_waits_on_a_lock(&other).await || purge.is_finished() },
    )
    .await;
    assert!(
        !purge.is_finished(),
        "the purge went past rows another writer holds"
    );
    tx.commit().await.unwrap();
    let purged = purge.await.unwrap().expect("purge_chunk");
    assert_eq!(
        purged, 3,
        "the held row purged, the replay_pending one kept"
    );
    assert_eq!(ids_in(&store, "held.DLT").await, vec![changed]);
    let kept = store.get(changed).await.expect("get").expect("kept");
    assert_eq!(kept.summary.status, Status::ReplayPending);
    other.close().await;
}

/// A purge chunk that PostgreSQL picks as a deadlock's victim is tried again, not left as a
/// failed (or forever `running`) run. The deadlock is the one CI met at start-up between a
/// chunk and the tier sorter: the sorter's statement holds an aggregate row
/// (`dl_stats_groups`, moved by the row triggers) and then wants a dead letter the chunk has
/// locked, while the chunk's delete wants that aggregate row. The chunk waits first, so its
/// deadlock check (`deadlock_timeout` into its wait: 3 s here, `Cycle`) finds the cycle and it is the one rolled
/// back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_chunk_that_loses_a_deadlock_is_tried_again() {
    let mut cycle = Cycle::start("deadlock.DLT").await;
    let (store, purged) = (cycle.store.clone(), cycle.second);
    let run = store
        .start_retention_run("purge", "(test)", None)
        .await
        .unwrap();
    let purge = tokio::spawn({
        let store = store.clone();
        async move {
            redrive_core::retention::purge::purge_chunk_retrying(
                &store,
                run,
                &[purged],
                &["new"],
                "[]",
            )
            .await
        }
    });
    let sorted_first = cycle.close().await;
    let deleted = purge
        .await
        .unwrap()
        .expect("the chunk, tried again after the deadlock");
    assert_eq!(deleted, 1);
    assert_eq!(ids_in(&store, "deadlock.DLT").await, vec![sorted_first]);
    let runs = store.retention_runs(10).await.unwrap();
    assert_eq!((runs[0].purged, runs[0].chunks), (1, 1), "{runs:?}");
}

/// A deadlock a chunk loses, made on purpose (PostgreSQL): two `new` dead letters of one
/// topic and fingerprint (one aggregate row for both), and another writer — the tier
/// sorter's kind of `UPDATE` — that has sorted the first, holding the aggregate rows it moved.
struct Cycle {
    store: Store,
    _dir: redrive_testkit::TestDatabase,
    other: sqlx::PgPool,
    /// The other writer's open transaction, until [`Cycle::close`] commits it.
    tx: Option<sqlx::Transaction<'static, sqlx::Postgres>>,
    first: i64,
    /// The dead letter the chunk under test is to change.
    second: i64,
    /// Its `dead_lettered_at_ms`.
    second_at: i64,
}

impl Cycle {
    async fn start(topic: &str) -> Cycle {
        let (url, _dir) = fresh_database(Backend::Postgres).await.expect("database");
        // PostgreSQL checks for a deadlock once per lock wait, `deadlock_timeout` after it
        // began. The store's sessions check 3 s into a wait, so the cycle is closed by then
        // even when the machine stalls (a busy CI run once let the chunk's check pass
        // before the other writer waited, and the other writer lost); the other writer
        // checks only after 60 s, so it is never the one rolled back.
        let other = sqlx::PgPool::connect(&url).await.expect("postgres");
        let db: String = sqlx::query_scalar("SELECT current_database()")
            .fetch_one(&other)
            .await
            .unwrap();
        sqlx::query(&format!(
            "ALTER DATABASE \"{db}\" SET deadlock_timeout = '3s'"
        ))
        .execute(&other)
        .await
        .unwrap();
        let store = Store::connect(&url).await.expect("connect");
        store.migrate().await.expect("migrate");
        let mut rows = aged(topic, 0, 2, 10 * DAY_MS);
        rows[1].fingerprint = rows[0].fingerprint.clone();
        rows[1].normalized = rows[0].normalized.clone();
        let second_at = rows[1].dead_lettered_at_ms;
        store.insert_batch(&rows).await.expect("insert");
        let ids = ids_in(&store, topic).await;
        let mut tx = other.begin().await.unwrap();
        sqlx::query("SET LOCAL deadlock_timeout = '60s'")
            .execute(&mut *tx)
            .await
            .unwrap();
        update_in(&mut tx, "tier = 'poison'", ids[0]).await;
        Cycle {
            store,
            _dir,
            other,
            tx: Some(tx),
            first: ids[0],
            second: ids[1],
            second_at,
        }
    }

    /// Once the chunk has locked the second dead letter and waits for the aggregate row, the
    /// other writer goes on to that dead letter: a cycle. The chunk is rolled back by its
    /// deadlock check (3 s into its wait, [`Cycle::start`]); the other writer then has the
    /// row and commits (`update_in` panics if it is the victim instead).
    /// Returns the first dead letter's id.
    async fn close(&mut self) -> i64 {
        let other = self.other.clone();
        eventually(
            "the chunk waiting on a lock",
            Duration::from_secs(30),
            || someone_waits_on_a_lock(&other),
        )
        .await;
        let mut tx = self.tx.take().expect("closed once");
        update_in(&mut tx, "tier = 'poison'", self.second).await;
        tx.commit().await.unwrap();
        self.other.close().await;
        self.first
    }
}

/// A purge run whose chunk fails for good ends `failed` at once, with its error, what its
/// committed chunks purged, and an audit row; it is not left `running` for the stale-run
/// sweep to call "interrupted" ten minutes later. SQLite; a trigger refuses deleting one
/// dead letter, so the second chunk fails after the first has committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_run_that_fails_midway_ends_failed_with_its_audit_row() {
    let (url, _dir) = fresh_database(Backend::Sqlite).await.expect("database");
    let store = Store::connect(&url).await.expect("connect");
    store.migrate().await.expect("migrate");
    store
        .insert_batch(&aged("fails.DLT", 0, 20, 10 * DAY_MS))
        .await
        .expect("insert");
    let refused = ids_in(&store, "fails.DLT").await[15];
    let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(&url)
        .await
        .expect("sqlite");
    sqlx::query(&format!(
        "CREATE TRIGGER refuse_one BEFORE DELETE ON dead_letters WHEN old.id = {refused} \
         BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
    ))
    .execute(&mut conn)
    .await
    .unwrap();

    let config: RetentionConfig = toml::from_str(
        "interval_ms = 300\nchunk_rows = 10\n[default]\nmax_age_ms = 1\npurge_new = true\n",
    )
    .unwrap();
    let status = RetentionStatus::default();
    let bp = std::sync::Arc::new(Backpressure::new(&config));
    let err = redrive_core::retention::purge::tick(&config, &store, &bp, &status, None, true)
        .await
        .expect_err("the second chunk is refused");
    assert!(err.to_string().contains("refused by the test"), "{err}");

    let runs = store.retention_runs(10).await.unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let run = &runs[0];
    assert_eq!(run.status, "failed", "{run:?}");
    assert_eq!(
        (run.purged, run.chunks),
        (10, 1),
        "the first chunk committed"
    );
    assert!(run.finished_at_ms.is_some(), "{run:?}");
    assert!(
        run.error
            .as_deref()
            .unwrap_or("")
            .contains("refused by the test"),
        "{run:?}"
    );
    let audit = audit_of(&store, "retention_purge").await;
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0].count, 10);
    assert!(
        audit[0].outcome.starts_with("failed: ")
            && audit[0].outcome.contains("10 purged in 1 chunks before it"),
        "{}",
        audit[0].outcome
    );
    assert_eq!(total(&store, "fails.DLT").await, 10);
}

/// A bulk action's chunk ("delete all matching") that PostgreSQL picks as a deadlock's victim
/// is tried again, so the action finishes with its one audit row instead of failing the
/// request (and waiting for the stale-action sweep). The same cycle as the purge's above:
/// another writer (the tier sorter's kind of `UPDATE`) holds the aggregate row of the
/// chunk's dead letter's key, then wants that dead letter, which the chunk has locked. The
/// filter's time range keeps the other writer's dead letter out of the chunk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_action_chunk_that_loses_a_deadlock_is_tried_again() {
    a_delete_that_loses_a_deadlock("bulk-deadlock.DLT", |c| {
        Selection::Filter(Filter {
            dlq_topic: Some("bulk-deadlock.DLT".into()),
            from_ms: Some(c.second_at),
            ..Filter::default()
        })
    })
    .await;
}

/// The same for a delete of picked dead letters (one transaction, not chunks): tried again,
/// not a 503 the user has to repeat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_picked_delete_that_loses_a_deadlock_is_tried_again() {
    a_delete_that_loses_a_deadlock("picked-deadlock.DLT", |c| Selection::Ids(vec![c.second])).await;
}

/// Deletes `selection` (the second dead letter of a [`Cycle`]) while the cycle closes, and
/// checks it finished once, with one audit row.
async fn a_delete_that_loses_a_deadlock(topic: &str, selection: impl Fn(&Cycle) -> Selection) {
    let mut cycle = Cycle::start(topic).await;
    let store = cycle.store.clone();
    let selection = selection(&cycle);
    let delete = tokio::spawn({
        let store = store.clone();
        async move {
            store
                .delete(&Actor::operator("eve"), &selection, Some("deadlock test"))
                .await
        }
    });
    let sorted_first = cycle.close().await;
    let n = delete
        .await
        .unwrap()
        .expect("the delete, tried again after the deadlock");
    assert_eq!(n, 1);
    assert_eq!(ids_in(&store, topic).await, vec![sorted_first]);
    let audit = audit_of(&store, "delete").await;
    assert_eq!(audit.len(), 1, "one audit row: {audit:?}");
    assert_eq!(audit[0].count, 1, "{audit:?}");
}

/// A replay of picked dead letters (one transaction: `replay_pending`, the job, the outbox
/// row, the audit row) that loses the same deadlock is tried again from the job as
/// requested: one job with the right count, one outbox row, one audit row, not a 503 the
/// user has to repeat (without the retry: "deadlock detected").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_picked_replay_that_loses_a_deadlock_is_tried_again() {
    let mut cycle = Cycle::start("replay-deadlock.DLT").await;
    let store = cycle.store.clone();
    let req = ReplayRequest {
        selection: Selection::Ids(vec![cycle.second]),
        target_topic: Some("orders".into()),
        rate_per_sec: None,
        reason: Some("deadlock test".into()),
        options: Default::default(),
    };
    let replay = tokio::spawn({
        let store = store.clone();
        async move { store.request_replay(&Actor::operator("eve"), &req).await }
    });
    cycle.close().await;
    let job = replay
        .await
        .unwrap()
        .expect("the replay, tried again after the deadlock");
    assert_eq!((job.total, job.skipped), (1, 0), "{job:?}");
    let jobs = store.jobs(10).await.unwrap();
    assert_eq!(jobs.len(), 1, "one job: {jobs:?}");
    assert_eq!((jobs[0].id.as_str(), jobs[0].total), (job.id.as_str(), 1));
    assert_eq!(store.outbox_rows().await.unwrap(), 1, "one outbox row");
    let audit = audit_of(&store, "replay").await;
    assert_eq!(audit.len(), 1, "one audit row: {audit:?}");
    assert_eq!(audit[0].count, 1, "{audit:?}");
}
