//! `Store::refail_tally` (`rounds.rs`) from the jobs' counters against the rows themselves.

use super::test_file::{sqlite_pool, sqlite_store};
use super::test_records::dead_letter;
use super::RefailTally;

const NOW: i64 = 10_000_000;
const WINDOW: u64 = 1_000_000;
/// `NOW - WINDOW`: a record published at or before it is judged.
const JUDGED_BEFORE: i64 = 9_000_000;
const SINCE: i64 = 5_000_000;

/// One outbox row of a job: its status, when it was published, whether it came back.
type Row = (&'static str, Option<i64>, bool);

struct Job {
    id: &'static str,
    created_by: &'static str,
    created_at_ms: i64,
    finished_at_ms: Option<i64>,
    /// The `published` counter still in tally rows (a running job's marks), not yet folded.
    tallied: bool,
    rows: Vec<Row>,
}

fn jobs() -> Vec<Job> {
    let published = |at: i64, back: bool| ("published", Some(at), back);
    vec![
        // Before the judgement started: only in `refailed_total`.
        Job {
            id: "j-before-pause",
            created_by: "rule:r",
            created_at_ms: 1_000_000,
            finished_at_ms: Some(2_000_000),
            tallied: false,
            rows: vec![published(1_500_000, true), published(1_500_000, false)],
        },
        // Finished before the window: every record judged.
        Job {
            id: "j-old",
            created_by: "rule:r",
            created_at_ms: 6_000_000,
            finished_at_ms: Some(7_000_000),
            tallied: false,
            rows: vec![
                published(6_500_000, true),
                published(6_500_000, true),
                published(6_600_000, false),
                published(6_700_000, false),
                ("failed", None, false),
            ],
        },
        // Finished within the window: some records not judged yet.
        Job {
            id: "j-recent",
            created_by: "rule:r",
            created_at_ms: 8_500_000,
            finished_at_ms: Some(9_500_000),
            tallied: false,
            rows: vec![
                published(8_600_000, false),
                published(9_200_000, false),
                published(9_300_000, true),
                ("failed", None, false),
            ],
        },
        // Still running, its counter in tally rows.
        Job {
            id: "j-running",
            created_by: "rule:r",
            created_at_ms: 9_600_000,
            finished_at_ms: None,
            tallied: true,
            rows: vec![
                published(9_700_000, true),
                published(9_700_000, false),
                ("pending", None, false),
                ("claimed", None, false),
            ],
        },
        // Someone else's: not counted.
        Job {
            id: "j-alice",
            created_by: "alice",
            created_at_ms: 6_000_000,
            finished_at_ms: None,
            tallied: false,
            rows: vec![published(6_100_000, true), published(6_100_000, false)],
        },
    ]
}

/// The tally as the rows say it (the statement `refail_tally` ran before it read counters).
async fn from_rows(pool: &sqlx::SqlitePool) -> (RefailTally, i64) {
    let (replayed, judged, refailed, total): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT \
           SUM(CASE WHEN j.created_at_ms > ?1 THEN 1 ELSE 0 END), \
           SUM(CASE WHEN j.created_at_ms > ?1 \
               AND (o.refailed_by_id IS NOT NULL OR o.published_at_ms <= ?2) THEN 1 ELSE 0 END), \
           SUM(CASE WHEN j.created_at_ms > ?1 AND o.refailed_by_id IS NOT NULL THEN 1 ELSE 0 END), \
           SUM(CASE WHEN o.refailed_by_id IS NOT NULL THEN 1 ELSE 0 END) \
         FROM replay_jobs j JOIN outbox o ON o.job_id = j.id \
         WHERE j.created_by = 'rule:r' AND o.status = 'published'",
    )
    .bind(SINCE)
    .bind(JUDGED_BEFORE)
    .fetch_one(pool)
    .await
    .expect("tally from rows");
    (
        RefailTally {
            replayed,
            judged,
            refailed,
        },
        total,
    )
}

/// The rule's counts from the jobs' counters are the counts of its rows: replayed (published
/// since the pause), judged (came back, or published before the window), came back, and
/// came back ever (`rule_states.refailed_total`); other actors' jobs and the rows that are
/// not published do not count.
#[tokio::test]
async fn the_tally_from_counters_matches_the_rows() {
    let (store, _dir) = sqlite_store("refail-tally.db").await;
    let jobs = jobs();
    let rows: usize = jobs.iter().map(|j| j.rows.len()).sum();
    // A dead letter per outbox row, and one per come-back to point at.
    let records: Vec<_> = (0..2 * rows as i64).map(|o| dead_letter(o, None)).collect();
    store.insert_batch(&records).await.expect("insert");
    let pool = sqlite_pool(&store);
    sqlx::query("INSERT INTO rule_states (rule_name, paused) VALUES ('r', 0)")
        .execute(pool)
        .await
        .expect("rule state");
    let mut next = 1_i64;
    for job in &jobs {
        let published = job.rows.iter().filter(|r| r.0 == "published").count() as i64;
        let back = job.rows.iter().filter(|r| r.2).count() as i64;
        let status = if job.finished_at_ms.is_some() {
            "finished"
        } else {
            "running"
        };
        sqlx::query(
            "INSERT INTO replay_jobs (id, status, created_by, created_at_ms, finished_at_ms, \
             total, published, refailed, selection) VALUES (?, ?, ?, ?, ?, ?, ?, ?, '{}')",
        )
        .bind(job.id)
        .bind(status)
        .bind(job.created_by)
        .bind(job.created_at_ms)
        .bind(job.finished_at_ms)
        .bind(job.rows.len() as i64)
        .bind(if job.tallied { 0 } else { published })
        .bind(back)
        .execute(pool)
        .await
        .expect("job");
        if job.tallied {
            for _ in 0..published {
                sqlx::query("INSERT INTO replay_job_tallies (job_id, published) VALUES (?, 1)")
                    .bind(job.id)
                    .execute(pool)
                    .await
                    .expect("tally row");
            }
        }
        for (status, published_at, came_back) in &job.rows {
            let refailed_by = came_back.then_some(rows as i64 + next);
            sqlx::query(
                "INSERT INTO outbox (job_id, dead_letter_id, idempotency_key, target_topic, \
                 status, next_attempt_at_ms, created_at_ms, published_at_ms, refailed_by_id) \
                 VALUES (?, ?, ?, 'orders', ?, 0, 0, ?, ?)",
            )
            .bind(job.id)
            .bind(next)
            .bind(format!("key-{next}"))
            .bind(status)
            .bind(published_at)
            .bind(refailed_by)
            .execute(pool)
            .await
            .expect("outbox row");
            next += 1;
        }
    }

    let tally = store
        .refail_tally("r", SINCE, NOW, WINDOW)
        .await
        .expect("tally");
    let (expected, total) = from_rows(pool).await;
    assert_eq!(tally, expected);
    // The figures themselves, so that a fixture that counts nothing cannot pass.
    assert_eq!(
        (tally.replayed, tally.judged, tally.refailed, total),
        (9, 7, 4, 5)
    );
    let stored: i64 =
        sqlx::query_scalar("SELECT refailed_total FROM rule_states WHERE rule_name = 'r'")
            .fetch_one(pool)
            .await
            .expect("rule state");
    assert_eq!(stored, total);

    // A rule without jobs: nothing, and no error.
    assert_eq!(
        store
            .refail_tally("other", SINCE, NOW, WINDOW)
            .await
            .expect("tally"),
        RefailTally::default()
    );
}
