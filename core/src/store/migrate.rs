//! Applying the schema migrations (`core/migrations/{sqlite,postgres}`): on SQLite on one
//! connection with foreign keys off, as SQLite's procedure for rebuilding a table asks.

use sqlx::migrate::Migrator;

use super::dialect::store_error;
use super::{Pool, Store, StoreError};

/// A migration's error in the store's vocabulary: `Unavailable` when the database cannot be
/// reached, else `Migrate`.
fn migrate_error(e: sqlx::migrate::MigrateError) -> StoreError {
    match e {
        sqlx::migrate::MigrateError::Execute(inner) => match store_error(inner) {
            StoreError::Unavailable(m) => StoreError::Unavailable(m),
            other => StoreError::Migrate(other.to_string()),
        },
        other => StoreError::Migrate(other.to_string()),
    }
}

/// Applies `migrator` to a SQLite store on a connection of its own with foreign keys off,
/// as SQLite's procedure for schema changes asks (https://www.sqlite.org/lang_altertable.html,
/// "Making Other Kinds Of Table Schema Changes"): migration 0029 rebuilds `dead_letters`, and
/// dropping a table with foreign keys on first deletes its rows, which ON DELETE CASCADE
/// would carry to the labels, notes, links and tiers. Each migration is still one
/// transaction (sqlx). Afterwards `PRAGMA foreign_key_check` must find nothing, else
/// `Migrate` names the first violation; then a truncating checkpoint returns the WAL's disk.
/// Foreign keys are back on before the connection returns to the pool (it is closed instead
/// if that fails).
///
/// Errors: as [`Store::migrate`].
async fn migrate_sqlite(pool: &sqlx::SqlitePool, migrator: &Migrator) -> Result<(), StoreError> {
    // A pooled connection, not a detached one: an in-memory store lives only as long as it.
    let mut conn = pool.acquire().await.map_err(store_error)?;
    let off = sqlx::query("PRAGMA foreign_keys = OFF")
        .execute(&mut *conn)
        .await
        .map_err(store_error);
    let ran = match off {
        Ok(_) => migrator.run(&mut *conn).await.map_err(migrate_error),
        Err(e) => Err(e),
    };
    let checked = match ran {
        Ok(()) => first_foreign_key_violation(&mut conn).await,
        Err(e) => Err(e),
    };
    // A rebuild writes the whole table to the WAL (4.5 GB at 1M dead letters), and SQLite
    // keeps a WAL file at its largest size; a truncating checkpoint gives that disk back.
    // (A checkpoint only copies committed pages into the database; if a reader holds the WAL,
    // it stops short and reports "busy" in its row, which is not an error.)
    let checked = match checked {
        Ok(()) => sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&mut *conn)
            .await
            .map(drop)
            .map_err(store_error),
        Err(e) => Err(e),
    };
    // Back on before the connection returns to the pool; if that fails, it is not returned.
    if sqlx::query("PRAGMA foreign_keys = ON")
        .execute(&mut *conn)
        .await
        .is_err()
    {
        conn.close_on_drop();
    }
    checked
}

/// `Migrate` naming the first row `PRAGMA foreign_key_check` reports, if any.
async fn first_foreign_key_violation(
    conn: &mut sqlx::pool::PoolConnection<sqlx::Sqlite>,
) -> Result<(), StoreError> {
    let violation: Option<(String, Option<i64>, String)> =
        sqlx::query_as("SELECT \"table\", rowid, parent FROM pragma_foreign_key_check LIMIT 1")
            .fetch_optional(&mut **conn)
            .await
            .map_err(store_error)?;
    match violation {
        Some((table, rowid, parent)) => Err(StoreError::Migrate(format!(
            "after the migrations, row {rowid:?} of {table} refers to a missing row of {parent}"
        ))),
        None => Ok(()),
    }
}

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/postgres");

impl Store {
    /// Applies the migrations of this store's database (idempotent).
    ///
    /// Errors: `Migrate` (e.g. the database has a migration this build does not know, or one
    /// was edited after it was applied), `Unavailable` if the database cannot be reached.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        self.run_migrator(self.migrations()).await
    }

    /// Applies this store's migrations numbered up to `last` (e.g. 28: the schema as a redrive
    /// built before migration 0029 left it), the same way [`Store::migrate`] applies them all.
    /// For the benches and tests of an upgrade: a store that is then filled and migrated the
    /// rest of the way is what an existing deployment meets when it takes a new release.
    ///
    /// Errors: as [`Store::migrate`].
    pub async fn migrate_through(&self, last: i64) -> Result<(), StoreError> {
        let all = self.migrations();
        // The same struct `sqlx::migrate!` builds (its fields are public but undocumented in
        // sqlx 0.8; sqlx has no public "run up to version N").
        let first_ones = Migrator {
            migrations: std::borrow::Cow::Owned(
                all.migrations
                    .iter()
                    .filter(|m| m.version <= last)
                    .cloned()
                    .collect(),
            ),
            ..Migrator::DEFAULT
        };
        self.run_migrator(&first_ones).await
    }

    /// Every migration this build knows for the store's database.
    fn migrations(&self) -> &'static Migrator {
        match &self.pool {
            Pool::Sqlite(_) => &SQLITE_MIGRATIONS,
            Pool::Postgres(_) => &POSTGRES_MIGRATIONS,
        }
    }

    /// Applies `migrator` (SQLite: with foreign keys off, [`migrate_sqlite`]).
    async fn run_migrator(&self, migrator: &Migrator) -> Result<(), StoreError> {
        match &self.pool {
            Pool::Sqlite(p) => migrate_sqlite(p, migrator).await,
            Pool::Postgres(p) => migrator.run(p).await.map_err(migrate_error),
        }
    }
}
