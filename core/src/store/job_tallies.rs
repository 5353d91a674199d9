//! A replay job's counters as its relay's marks add them (migration 0030, `docs/replay.md`
//! "Job counters").
//!
//! A mark does not write the job's row: it inserts one `replay_job_tallies` row with what it
//! counted ([`insert`]). So marks of one job run side by side on PostgreSQL — before, each
//! locked the job's row first and held it to its commit, and the relay's rate was one mark
//! per batch of 1,000 rows (about 6,000 msgs/s, `docs/bench.md` 2026-12-03).
//!
//! - A counter's value is its `replay_jobs` column plus the sum of the job's tally rows
//!   ([`counter`]); every reader of `published`, `failed`, `cancelled`, `transformed`,
//!   `skipped_by_script` and `failed_by_script` reads it that way.
//! - When the job finishes, [`fold`] moves its tally rows into its row. On PostgreSQL one
//!   statement deletes the rows and adds exactly the rows it deleted, so a tally committed
//!   meanwhile is neither lost nor counted twice, whatever lock its writer holds. On SQLite
//!   the store's one writer makes the two statements atomic.

use sqlx::QueryBuilder;

use super::dialect::{Dialect, Val};

/// The counters a tally row carries, in `replay_jobs` column names.
const COUNTERS: [&str; 6] = [
    "published",
    "failed",
    "cancelled",
    "transformed",
    "skipped_by_script",
    "failed_by_script",
];

/// What one mark counted for its job (records; `cancelled` is negative: records of a
/// cancelled job whose publish was in flight, counted published instead).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Tally {
    pub(super) published: i64,
    pub(super) failed: i64,
    pub(super) cancelled: i64,
    pub(super) skipped_by_script: i64,
    pub(super) failed_by_script: i64,
}

impl Tally {
    fn is_zero(&self) -> bool {
        *self == Tally::default()
    }
}

/// `(replay_jobs.<name> + <the job's tally rows' sum>) AS <name>`: the counter as it is now,
/// for a query over `replay_jobs` (not aliased). `name` is one of the six counters.
pub(crate) fn counter(name: &str) -> String {
    debug_assert!(COUNTERS.contains(&name), "{name} is not a job counter");
    format!(
        "(replay_jobs.{name} + (SELECT CAST(COALESCE(SUM(t.{name}), 0) AS BIGINT) \
         FROM replay_job_tallies t WHERE t.job_id = replay_jobs.id))"
    )
}

/// `INSERT INTO replay_job_tallies ...` of `tally` for `job_id`, plus `transformed`: the
/// rows among `transformed_ids` this mark published under `token` at `now` (a transform
/// job's records the script changed). `None` when there is nothing to count.
pub(super) fn insert<'a, DB: Dialect>(
    job_id: &'a str,
    tally: Tally,
    transformed: Option<(&[i64], &'a str, i64)>,
) -> Option<QueryBuilder<'a, DB>> {
    let transformed = transformed.filter(|(ids, _, _)| !ids.is_empty());
    if tally.is_zero() && transformed.is_none() {
        return None;
    }
    let mut qb = QueryBuilder::new(
        "INSERT INTO replay_job_tallies (job_id, published, failed, cancelled, \
         skipped_by_script, failed_by_script, transformed) VALUES (",
    );
    DB::bind(&mut qb, Val::Text(Some(job_id)));
    for n in [
        tally.published,
        tally.failed,
        tally.cancelled,
        tally.skipped_by_script,
        tally.failed_by_script,
    ] {
        qb.push(", ");
        DB::bind(&mut qb, Val::I64(Some(n)));
    }
    qb.push(", ");
    match transformed {
        Some((ids, token, now)) => {
            qb.push("(SELECT COUNT(*) FROM outbox WHERE id IN ");
            DB::push_json_ids(&mut qb, super::actions::ids_json(ids));
            qb.push(" AND claim_token = ");
            DB::bind(&mut qb, Val::Text(Some(token)));
            qb.push(" AND status = 'published' AND published_at_ms = ");
            DB::bind(&mut qb, Val::I64(Some(now)));
            qb.push(")");
        }
        None => {
            qb.push("0");
        }
    }
    qb.push(")");
    Some(qb)
}

/// The statements that move `job_id`'s tally rows into its `replay_jobs` row, to run in
/// order in one transaction (see the module doc for why they are exact).
pub(super) fn fold<'a, DB: Dialect>(job_id: &'a str) -> Vec<QueryBuilder<'a, DB>> {
    let sums = |from: &str| {
        COUNTERS
            .iter()
            .map(|c| format!("{c} = {c} + (SELECT CAST(COALESCE(SUM({c}), 0) AS BIGINT) {from})"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if DB::ONE_WRITER {
        let mut update = QueryBuilder::new(format!(
            "UPDATE replay_jobs SET {} WHERE id = ",
            sums("FROM replay_job_tallies t WHERE t.job_id = replay_jobs.id")
        ));
        DB::bind(&mut update, Val::Text(Some(job_id)));
        let mut delete = QueryBuilder::new("DELETE FROM replay_job_tallies WHERE job_id = ");
        DB::bind(&mut delete, Val::Text(Some(job_id)));
        vec![update, delete]
    } else {
        let mut qb =
            QueryBuilder::new("WITH gone AS (DELETE FROM replay_job_tallies WHERE job_id = ");
        DB::bind(&mut qb, Val::Text(Some(job_id)));
        qb.push(format!(
            " RETURNING {}) UPDATE replay_jobs SET {} WHERE id = ",
            COUNTERS.join(", "),
            sums("FROM gone")
        ));
        DB::bind(&mut qb, Val::Text(Some(job_id)));
        vec![qb]
    }
}
