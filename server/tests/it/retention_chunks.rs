//! A retention purge chunk at the store's level (`docs/retention.md`, "Purge"): on PostgreSQL
//! it waits for a row another writer holds and re-checks it, it is tried again when it loses a
//! deadlock; and a run whose chunk fails for good ends `failed` with its audit row (SQLite).
//! The purge through the real binary is `retention.rs`.

use std::time::Duration;

use redrive_core::model::Status;
use redrive_core::retention::{Backpressure, RetentionConfig, RetentionStatus};
use redrive_core::store::Store;
use redrive_testkit::ingest::summaries_in;
use redrive_testkit::{fresh_database, Backend};

use crate::retention::{aged, audit_of, total, DAY_MS};
use crate::support::eventually;

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

/// True when a session of `pool`'s PostgreSQL database waits on a lock.
async fn someone_waits_on_a_lock(pool: &sqlx::PgPool) -> bool {
    let waiting: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM pg_stat_activity \
         WHERE datname = current_database() AND wait_event_type = 'Lock'",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    waiting > 0
}

/// `UPDATE dead_letters SET <set> WHERE id = <id>` in another writer's open transaction.
async fn update_in(tx: &mut sqlx::PgConnection, set: &str, id: i64) {
    sqlx::query(&format!("UPDATE dead_letters SET {set} WHERE id = $1"))
        .bind(id)
        .execute(tx)
        .await
        .unwrap();
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
/// deadlock check (after `deadlock_timeout`, 1 s) finds the cycle and it is the one rolled
/// back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_chunk_that_loses_a_deadlock_is_tried_again() {
    let (url, _dir) = fresh_database(Backend::Postgres).await.expect("database");
    let store = Store::connect(&url).await.expect("connect");
    store.migrate().await.expect("migrate");
    // One topic, one fingerprint, one tier, all `new`: one aggregate row for them all.
    let mut rows = aged("deadlock.DLT", 0, 2, 10 * DAY_MS);
    rows[1].fingerprint = rows[0].fingerprint.clone();
    rows[1].normalized = rows[0].normalized.clone();
    store.insert_batch(&rows).await.expect("insert");
    let ids = ids_in(&store, "deadlock.DLT").await;
    let (sorted_first, purged) = (ids[0], ids[1]);

    // The "sorter": sorts one dead letter, holding the aggregate rows it moved.
    let other = sqlx::PgPool::connect(&url).await.expect("postgres");
    let mut tx = other.begin().await.unwrap();
    update_in(&mut tx, "tier = 'poison'", sorted_first).await;

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
    // The chunk has locked its dead letter and waits for the aggregate row.
    eventually(
        "the chunk waiting on a lock",
        Duration::from_secs(30),
        || someone_waits_on_a_lock(&other),
    )
    .await;
    // The "sorter" goes on to the chunk's dead letter: a cycle. It waits until the chunk's
    // deadlock check rolls the chunk back, then has the row.
    // (`update_in` fails the test if the "sorter" is the victim instead.)
    update_in(&mut tx, "tier = 'poison'", purged).await;
    tx.commit().await.unwrap();
    let deleted = purge
        .await
        .unwrap()
        .expect("the chunk, tried again after the deadlock");
    assert_eq!(deleted, 1);
    assert_eq!(ids_in(&store, "deadlock.DLT").await, vec![sorted_first]);
    let runs = store.retention_runs(10).await.unwrap();
    assert_eq!((runs[0].purged, runs[0].chunks), (1, 1), "{runs:?}");
    other.close().await;
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
