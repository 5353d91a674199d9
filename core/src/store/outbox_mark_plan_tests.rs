//! The plans of the relay's marks on the SQLite the binary bundles (`outbox_mark.rs`).

use sqlx::Row;

use super::*;

/// SQLite's plan of `sql` (unbound parameters are NULL: the plan is the same).
async fn plan(pool: &sqlx::SqlitePool, sql: &str) -> Vec<String> {
    sqlx::query(&format!("EXPLAIN QUERY PLAN {sql}"))
        .fetch_all(pool)
        .await
        .expect("plan")
        .iter()
        .map(|r| r.get::<String, _>("detail"))
        .collect()
}

/// A claim's marks find its rows by id, also under the statistics of an empty outbox.
/// With a partial index on `status = 'claimed'` (`outbox_leases`, migration 0034) and no
/// hint, the SQLite the binary bundles (3.46) marked 1,000 rows published by scanning
/// every claimed row and, for each, the 1,000 marked ids: 65 ms a mark instead of a few
/// (docs/bench.md "2026-12-06 (7)"). The retry, failure and release marks likewise, and
/// `release_next` (per-key order) its published rows, which it found by scanning
/// `outbox_by_order_key` (docs/bench.md "2026-12-06 (8)").
#[tokio::test]
async fn sqlite_marks_a_claims_rows_by_their_ids() {
    let (store, _dir) = super::super::test_file::sqlite_store("plan.db").await;
    let pool = super::super::test_file::sqlite_pool(&store);
    // Statistics of an empty outbox, as the bench's store has them (its bulk load ends
    // with ANALYZE) and any store analyzed before its first replay: under them the
    // planner takes a small partial index over the primary key.
    sqlx::query("ANALYZE").execute(pool).await.expect("analyze");
    let chunk: Vec<Published> = (1..=1_000)
        .map(|i| Published {
            outbox_id: i,
            partition: 0,
            offset: i,
        })
        .collect();
    let ids: Vec<i64> = (1..=1_000).collect();
    let mut held = update_outbox::<sqlx::Sqlite>("status = 'pending'");
    push_held(&mut held, &ids, "token");
    let release = super::super::order::release_next::<sqlx::Sqlite>(&ids);
    for sql in [
        mark_published_chunk::<sqlx::Sqlite>(&chunk, "token", 0, "claimed").sql(),
        held.sql(),
        release.sql(),
    ] {
        let plan = plan(pool, sql).await;
        assert!(
            plan.iter()
                .any(|l| l.contains("SEARCH outbox USING INTEGER PRIMARY KEY")),
            "{sql}\nplan: {plan:?}"
        );
        assert!(
            !plan.iter().any(|l| l.starts_with("SCAN outbox")
                || l.starts_with("SCAN p")
                || l.contains("outbox_leases")),
            "{sql}\nplan: {plan:?}"
        );
    }
}
