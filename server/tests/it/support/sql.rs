//! Plain SQL on a test's database, outside the store: to set up a state the store's API
//! would not make (an action a dead process left a while ago) or to read ground truth that
//! does not come from the store's own queries. Each call opens and closes a pool of its own.

use redrive_testkit::Backend;

/// Runs one statement on the database behind `url`. Panics (with the statement) on an error.
pub async fn exec(backend: Backend, url: &str, sql: &str) {
    match backend {
        Backend::Sqlite => {
            let pool = sqlx::SqlitePool::connect(url).await.expect("sqlite");
            sqlx::query(sql).execute(&pool).await.expect(sql);
            pool.close().await;
        }
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(url).await.expect("postgres");
            sqlx::query(sql).execute(&pool).await.expect(sql);
            pool.close().await;
        }
    }
}

/// One integer from one query on the database behind `url` (a `BIGINT` on PostgreSQL).
/// Panics (with the query) on an error.
pub async fn scalar(backend: Backend, url: &str, sql: &str) -> i64 {
    match backend {
        Backend::Sqlite => {
            let pool = sqlx::SqlitePool::connect(url).await.expect("sqlite");
            let v = sqlx::query_scalar(sql).fetch_one(&pool).await.expect(sql);
            pool.close().await;
            v
        }
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(url).await.expect("postgres");
            let v = sqlx::query_scalar(sql).fetch_one(&pool).await.expect(sql);
            pool.close().await;
            v
        }
    }
}

/// Every row of one query on the database behind `url`, as `T`. Panics (with the query) on an
/// error.
pub async fn rows<T>(backend: Backend, url: &str, sql: &str) -> Vec<T>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow>
        + for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>
        + Send
        + Unpin,
{
    match backend {
        Backend::Sqlite => {
            let pool = sqlx::SqlitePool::connect(url).await.expect("sqlite");
            let v = sqlx::query_as(sql).fetch_all(&pool).await.expect(sql);
            pool.close().await;
            v
        }
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(url).await.expect("postgres");
            let v = sqlx::query_as(sql).fetch_all(&pool).await.expect(sql);
            pool.close().await;
            v
        }
    }
}

/// True when a session of `pool`'s PostgreSQL database waits on a lock.
pub async fn someone_waits_on_a_lock(pool: &sqlx::PgPool) -> bool {
    let waiting: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM pg_stat_activity \
         WHERE datname = current_database() AND wait_event_type = 'Lock'",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    waiting > 0
}

/// `UPDATE dead_letters SET <set> WHERE id = <id>` in another writer's open transaction
/// (PostgreSQL). Panics on an error, a deadlock's included.
pub async fn update_in(tx: &mut sqlx::PgConnection, set: &str, id: i64) {
    sqlx::query(&format!("UPDATE dead_letters SET {set} WHERE id = $1"))
        .bind(id)
        .execute(tx)
        .await
        .unwrap();
}
