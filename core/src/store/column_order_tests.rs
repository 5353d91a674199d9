//! SQLite's `dead_letters` column order (migration 0029): the large columns come last, so a
//! list row never walks a large value's overflow pages, and the rebuild that restored that
//! order keeps every row, child row, id and schema object as migrations 0001-0028 left them.

use sqlx::SqlitePool;

use super::Store;

/// The columns that may be large, in the order they must close the row.
const LARGE_LAST: [&str; 4] = ["headers", "stack_trace", "key", "value"];

use super::test_file::sqlite_pool as pool;

/// Every column of `dead_letters`, generated ones included, in stored order.
async fn columns(pool: &SqlitePool) -> Vec<String> {
    sqlx::query_scalar("SELECT name FROM pragma_table_xinfo('dead_letters') ORDER BY cid")
        .fetch_all(pool)
        .await
        .expect("table_xinfo")
}

/// A column added after `value` (ALTER TABLE ADD COLUMN does that) fails here: add it in a
/// rebuild like migration 0029's, before `headers`.
#[tokio::test]
async fn the_large_columns_close_the_row() {
    let (url, _dir) = super::test_file::sqlite_url("order.db");
    let store = Store::connect(&url).await.expect("connect");
    store.migrate().await.expect("migrate");
    let cols = columns(pool(&store)).await;
    let tail: Vec<&str> = cols[cols.len() - LARGE_LAST.len()..]
        .iter()
        .map(String::as_str)
        .collect();
    assert_eq!(tail, LARGE_LAST, "columns in stored order: {cols:?}");
}

/// (id, status, tier, record_bytes, value, edit_version) of one dead letter.
type Row = (
    i64,
    String,
    Option<String>,
    Option<i64>,
    Option<Vec<u8>>,
    i64,
);

/// What a store at migration 0028 holds, read the same way before and after 0029.
#[derive(Debug, PartialEq)]
struct Snapshot {
    rows: Vec<Row>,
    labels: Vec<(i64, String)>,
    events: Vec<(i64, String)>,
    backlog: Vec<(i64, Option<String>)>,
    groups: Vec<(String, String, i64)>,
    sequence: i64,
    /// (type, name, sql) of every index, trigger and view but the table's own.
    objects: Vec<(String, String, Option<String>)>,
}

async fn snapshot(pool: &SqlitePool) -> Snapshot {
    Snapshot {
        rows: sqlx::query_as(
            "SELECT id, status, tier, record_bytes, value, edit_version FROM dead_letters ORDER BY id",
        )
        .fetch_all(pool)
        .await
        .expect("rows"),
        labels: sqlx::query_as("SELECT dead_letter_id, label FROM dead_letter_labels ORDER BY 1")
            .fetch_all(pool)
            .await
            .expect("labels"),
        events: sqlx::query_as("SELECT dead_letter_id, kind FROM dead_letter_events ORDER BY id")
            .fetch_all(pool)
            .await
            .expect("events"),
        backlog: sqlx::query_as("SELECT id, payload FROM search_backlog_text ORDER BY id")
            .fetch_all(pool)
            .await
            .expect("backlog"),
        groups: sqlx::query_as("SELECT status, tier, n FROM dl_stats_groups ORDER BY 1, 2")
            .fetch_all(pool)
            .await
            .expect("groups"),
        sequence: sqlx::query_scalar("SELECT seq FROM sqlite_sequence WHERE name = 'dead_letters'")
            .fetch_one(pool)
            .await
            .expect("sequence"),
        objects: sqlx::query_as(
            "SELECT type, name, sql FROM sqlite_master \
             WHERE name <> 'dead_letters' AND name NOT LIKE '_sqlx%' ORDER BY type, name",
        )
        .fetch_all(pool)
        .await
        .expect("schema"),
    }
}

#[tokio::test]
async fn the_rebuild_keeps_rows_children_ids_and_schema() {
    let (url, _dir) = super::test_file::sqlite_url("rebuild.db");
    let store = Store::connect(&url).await.expect("connect");
    let pool = pool(&store);
    store.migrate_through(28).await.expect("migrations 1-28");
    assert_eq!(columns(pool).await.last().map(String::as_str), Some("tier"));

    // Five dead letters (one with a 1 MiB value, two sorted into a tier); the fifth is
    // purged, so the AUTOINCREMENT mark (5) is above the highest id left (4).
    for i in 1..=5i64 {
        let value = if i == 3 {
            vec![b'v'; 1 << 20]
        } else {
            b"{\"n\":1}".to_vec()
        };
        sqlx::query(
            "INSERT INTO dead_letters (dlq_topic, dlq_partition, dlq_offset, dead_lettered_at_ms, \
             fingerprint, convention, ingested_at_ms, headers, stack_trace, key, value, tier) \
             VALUES ('orders.DLT', 0, ?, ?, 'fp', 'spring', 1, '[]', 'at x', x'6b', ?, ?)",
        )
        .bind(i)
        .bind(1_000 + i)
        .bind(value)
        .bind((i % 2 == 0).then_some("transient"))
        .execute(pool)
        .await
        .expect("dead letter");
    }
    sqlx::query("DELETE FROM dead_letters WHERE id = 5")
        .execute(pool)
        .await
        .expect("purge");
    // Children: a label (ON DELETE CASCADE: a drop with foreign keys on would take it), a
    // history event, a backlog row whose text the view reads from the dead letter.
    for sql in [
        "INSERT INTO dead_letter_labels VALUES (2, 'payments', 1, 'ann')",
        "INSERT INTO dead_letter_events (dead_letter_id, at_ms, kind) VALUES (3, 1, 'deleted')",
        "UPDATE dead_letters SET status = 'deleted', status_before = 'new' WHERE id = 3",
        "INSERT INTO search_backlog VALUES (4, NULL, 7)",
    ] {
        sqlx::query(sql).execute(pool).await.expect(sql);
    }
    let before = snapshot(pool).await;

    store.migrate_through(29).await.expect("migration 0029");

    assert_eq!(snapshot(pool).await, before);
    let cols = columns(pool).await;
    assert_eq!(&cols[cols.len() - LARGE_LAST.len()..], LARGE_LAST);
    let next: i64 = sqlx::query_scalar(
        "INSERT INTO dead_letters (dlq_topic, dlq_partition, dlq_offset, dead_lettered_at_ms, \
         fingerprint, convention, ingested_at_ms) VALUES ('orders.DLT', 0, 9, 2000, 'fp', \
         'spring', 2) RETURNING id",
    )
    .fetch_one(pool)
    .await
    .expect("insert after");
    assert_eq!(next, 6, "a purged id is never reused");

    // Every connection of the pool enforces foreign keys again.
    let mut held = Vec::new();
    for _ in 0..pool.options().get_max_connections() {
        let mut conn = pool.acquire().await.expect("connection");
        let on: i64 = sqlx::query_scalar("PRAGMA foreign_keys")
            .fetch_one(&mut *conn)
            .await
            .expect("pragma");
        assert_eq!(on, 1);
        held.push(conn);
    }
}
