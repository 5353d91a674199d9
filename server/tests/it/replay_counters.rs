//! A replay job's counters are tally rows its relay's marks insert (migration 0030;
//! `docs/replay.md`, "Job counters"), so a mark never waits for the job's row: before, every
//! mark locked the row first, and two marks of one job never overlapped on PostgreSQL.
//!
//! The test holds the job's row the way a cancel, a pause or ingest's `refailed` count does
//! (`FOR NO KEY UPDATE`, in a transaction of its own) and sees the relay's marks commit
//! meanwhile; once it lets go, the job finishes with its counts, the tally rows folded into
//! the job's row.

use std::time::Duration;

use redrive_core::actions::{JobStatus, ReplayRequest, Selection};
use redrive_core::model::NewDeadLetter;
use redrive_core::Filter;
use redrive_testkit::{create_topic, kafka_brokers, unique, wait_for, Backend};

use crate::support::replay::{ann, dead_letter, record_count, wait_job};
use crate::support::TestApp;

#[tokio::test]
async fn marks_count_records_while_another_transaction_holds_the_jobs_row() {
    // Throttled, so that the job is still publishing when the row is taken (6 s at the
    // rate); the claims of a throttled job are a second's worth (100 rows).
    const N: i64 = 600;
    const RATE: u32 = 100;
    let target = unique("tallies");
    create_topic(&target, 1, &[]).await.expect("topic");
    let brokers = kafka_brokers();
    let env = [
        ("REDRIVE_KAFKA_BROKERS", brokers.as_str()),
        ("REDRIVE_RELAY_POLL_INTERVAL_MS", "100"),
    ];
    let records: Vec<NewDeadLetter> = (0..N)
        .map(|i| {
            dead_letter(
                i,
                Some(format!("k{i}").into_bytes()),
                Some(vec![b'x'; 64]),
                vec![],
            )
        })
        .collect();
    let app = TestApp::with_records(Backend::Postgres, &records, &env).await;
    let job = app
        .store
        .request_replay(
            &ann(),
            &ReplayRequest {
                selection: Selection::Filter(Filter::default()),
                target_topic: Some(target.clone()),
                rate_per_sec: Some(RATE),
                reason: None,
                options: Default::default(),
            },
        )
        .await
        .expect("replay");
    // The first claim stamps `started_at_ms`, the one write of the job's row a claim makes.
    wait_for(
        "the relay's first claim",
        Duration::from_secs(60),
        || async {
            let j = app.store.job(&job.id).await.ok().flatten()?;
            j.started_at_ms.map(|_| ())
        },
    )
    .await
    .expect("the job started");

    let pool = sqlx::PgPool::connect(&app.db_url).await.expect("pool");
    let mut holder = pool.begin().await.expect("begin");
    let _: (String,) = sqlx::query_as("SELECT id FROM replay_jobs WHERE id = $1 FOR NO KEY UPDATE")
        .bind(&job.id)
        .fetch_one(&mut *holder)
        .await
        .expect("the job's row, locked");
    let before = app
        .store
        .job(&job.id)
        .await
        .expect("job")
        .expect("job")
        .published;
    assert!(
        before < N,
        "the job is still publishing when its row is taken: {before}"
    );
    let during = wait_for(
        "a mark to commit while the job's row is held",
        Duration::from_secs(60),
        || async {
            let j = app.store.job(&job.id).await.ok().flatten()?;
            (j.published > before).then_some(j.published)
        },
    )
    .await
    .expect("marks do not wait for the job's row");
    let tallies: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM replay_job_tallies WHERE job_id = $1")
            .bind(&job.id)
            .fetch_one(&pool)
            .await
            .expect("tally rows");
    assert!(tallies > 0, "{during} counted from {tallies} tally rows");
    holder.rollback().await.expect("let go of the row");

    let done = wait_job(
        &app.store,
        &job.id,
        Duration::from_secs(120),
        JobStatus::Finished,
    )
    .await;
    assert_eq!(
        (done.published, done.failed, done.cancelled),
        (N, 0, 0),
        "{done:?}"
    );
    assert_eq!(record_count(&target, 1), N);
    // Folded: the job's row alone holds its counts now.
    let (left, published): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM replay_job_tallies WHERE job_id = $1), \
         (SELECT published FROM replay_jobs WHERE id = $1)",
    )
    .bind(&job.id)
    .fetch_one(&pool)
    .await
    .expect("the job's row");
    assert_eq!((left, published), (0, N));
    pool.close().await;
}
