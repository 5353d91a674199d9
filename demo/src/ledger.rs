//! The agent's own small SQLite file: which requests were produced, which were processed
//! (one row per `message_id`: the UNIQUE key is what makes processing idempotent), which
//! replay idempotency keys reached a final outcome, and which duplicate deliveries were dropped.
//!
//! Only the demo writes this file; it is not redrive's store.

use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::SqlitePool;

const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS produced (
        message_id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        topic TEXT NOT NULL,
        partition INTEGER NOT NULL,
        offset INTEGER NOT NULL,
        produced_at_ms INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS processed (
        message_id TEXT PRIMARY KEY,
        answer TEXT NOT NULL,
        attempts INTEGER NOT NULL,
        topic TEXT NOT NULL,
        partition INTEGER NOT NULL,
        offset INTEGER NOT NULL,
        replay_id TEXT,
        idempotency_key TEXT,
        processed_at_ms INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS finished_keys (
        idempotency_key TEXT PRIMARY KEY,
        message_id TEXT,
        outcome TEXT NOT NULL,
        at_ms INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS duplicates (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        message_id TEXT,
        idempotency_key TEXT,
        topic TEXT NOT NULL,
        partition INTEGER NOT NULL,
        offset INTEGER NOT NULL,
        at_ms INTEGER NOT NULL)",
];

/// Handle on the demo's SQLite file; cheap to clone.
#[derive(Debug, Clone)]
pub struct Ledger {
    pool: SqlitePool,
}

/// Where a record was read from, for the ledger's rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    /// Topic name.
    pub topic: String,
    /// Partition number.
    pub partition: i32,
    /// Offset in that partition.
    pub offset: i64,
}

/// A successful processing to remember.
#[derive(Debug, Clone)]
pub struct Processed<'a> {
    /// The request's UUID (the UNIQUE key).
    pub message_id: &'a str,
    /// The (simulated) LLM's answer.
    pub answer: &'a str,
    /// Attempts it took, 1 = first try.
    pub attempts: u32,
    /// The record whose processing succeeded (source or retry topic).
    pub at: &'a Position,
    /// `redrive-replay-id` if the record was a replay.
    pub replay_id: Option<&'a str>,
    /// `redrive-idempotency-key` if the record was a replay.
    pub idempotency_key: Option<&'a str>,
}

/// How long a connection waits for another's lock on the ledger.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether `e` is SQLite's `SQLITE_BUSY` (primary code 5, extended codes included).
fn is_busy(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db)
        if db.code().and_then(|c| c.parse::<i32>().ok()).is_some_and(|c| c & 0xff == 5))
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

impl Ledger {
    /// Opens (creating if missing) the SQLite file at `url` (`sqlite:PATH`, or a bare path)
    /// and creates the tables. The parent directory is created too.
    pub async fn open(url: &str) -> Result<Ledger, sqlx::Error> {
        let path = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
            .unwrap_or(url);
        let path = path.split('?').next().unwrap_or(path);
        if let Some(dir) = std::path::Path::new(path).parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir)?;
            }
        }
        let opts = SqliteConnectOptions::from_str(&format!("sqlite:{path}"))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            // Several tasks write; let them queue instead of failing with SQLITE_BUSY.
            .busy_timeout(BUSY_TIMEOUT);
        // A second opener of a new file (a test reading the ledger while the demo starts)
        // can meet the first one's switch to WAL, which SQLite answers with SQLITE_BUSY at
        // once, without the busy handler: try again until the busy timeout has passed.
        let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
        let pool = loop {
            match SqlitePoolOptions::new()
                .max_connections(4)
                .connect_with(opts.clone())
                .await
            {
                Err(e) if is_busy(&e) && std::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                other => break other?,
            }
        };
        for stmt in SCHEMA {
            sqlx::query(stmt).execute(&pool).await?;
        }
        Ok(Ledger { pool })
    }

    /// Remembers a produced request (`kind` is `valid` or a poison kind).
    pub async fn record_produced(
        &self,
        message_id: &str,
        kind: &str,
        at: &Position,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(
            "INSERT INTO produced (message_id, kind, topic, partition, offset, produced_at_ms)
             VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (message_id) DO NOTHING",
        )
        .bind(message_id)
        .bind(kind)
        .bind(&at.topic)
        .bind(at.partition)
        .bind(at.offset)
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Has `message_id` been processed already?
    pub async fn is_processed(&self, message_id: &str) -> Result<bool, sqlx::Error> {
        let row: Option<(i64,)> = sqlx::query_as("SELECT 1 FROM processed WHERE message_id = ?")
            .bind(message_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.is_some())
    }

    /// Has a record carrying this replay idempotency key reached a final outcome?
    pub async fn is_key_finished(&self, key: &str) -> Result<bool, sqlx::Error> {
        let row: Option<(i64,)> =
            sqlx::query_as("SELECT 1 FROM finished_keys WHERE idempotency_key = ?")
                .bind(key)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.is_some())
    }

    /// Records a successful processing, and its idempotency key as finished, in one
    /// transaction. Returns `false` if the message was already processed (the UNIQUE key
    /// refused a second row).
    pub async fn record_processed(&self, p: &Processed<'_>) -> Result<bool, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let inserted = sqlx::query(
            "INSERT INTO processed (message_id, answer, attempts, topic, partition, offset,
                 replay_id, idempotency_key, processed_at_ms)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (message_id) DO NOTHING",
        )
        .bind(p.message_id)
        .bind(p.answer)
        .bind(p.attempts as i64)
        .bind(&p.at.topic)
        .bind(p.at.partition)
        .bind(p.at.offset)
        .bind(p.replay_id)
        .bind(p.idempotency_key)
        .bind(now_ms())
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if let Some(key) = p.idempotency_key {
            insert_key(&mut tx, key, Some(p.message_id), "processed").await?;
        }
        tx.commit().await?;
        Ok(inserted)
    }

    /// Records that the record carrying `key` was dead-lettered (a final outcome).
    pub async fn record_key_dead_lettered(
        &self,
        key: &str,
        message_id: Option<&str>,
    ) -> Result<(), sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        insert_key(&mut tx, key, message_id, "dead_lettered").await?;
        tx.commit().await
    }

    /// Records a duplicate delivery that was dropped.
    pub async fn record_duplicate(
        &self,
        message_id: Option<&str>,
        key: Option<&str>,
        at: &Position,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(
            "INSERT INTO duplicates (message_id, idempotency_key, topic, partition, offset, at_ms)
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(message_id)
        .bind(key)
        .bind(&at.topic)
        .bind(at.partition)
        .bind(at.offset)
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The pool, for tests and `/status` queries.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }
}

async fn insert_key(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    key: &str,
    message_id: Option<&str>,
    outcome: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO finished_keys (idempotency_key, message_id, outcome, at_ms)
         VALUES (?, ?, ?, ?) ON CONFLICT (idempotency_key) DO NOTHING",
    )
    .bind(key)
    .bind(message_id)
    .bind(outcome)
    .bind(now_ms())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two openers of one new file at the same moment (the demo starting while a test opens
    /// its ledger) both get the ledger: the second one's switch to WAL, which SQLite refuses
    /// at once while the first switches, is tried again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_openers_of_one_new_file_both_open_it() {
        for trial in 0..100 {
            let dir = tempfile::tempdir().unwrap();
            let url = format!("sqlite:{}", dir.path().join("agent.db").display());
            let (a, b) = tokio::join!(Ledger::open(&url), Ledger::open(&url));
            a.unwrap_or_else(|e| panic!("trial {trial}, first: {e}"));
            b.unwrap_or_else(|e| panic!("trial {trial}, second: {e}"));
        }
    }

    #[tokio::test]
    async fn a_message_is_processed_once_and_keys_are_remembered() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("sub/demo.db").display());
        let ledger = Ledger::open(&url).await.unwrap();
        let at = Position {
            topic: "t".into(),
            partition: 0,
            offset: 1,
        };
        let p = Processed {
            message_id: "m1",
            answer: "a",
            attempts: 1,
            at: &at,
            replay_id: None,
            idempotency_key: Some("k1"),
        };
        assert!(!ledger.is_processed("m1").await.unwrap());
        assert!(ledger.record_processed(&p).await.unwrap());
        assert!(!ledger.record_processed(&p).await.unwrap(), "UNIQUE");
        assert!(ledger.is_processed("m1").await.unwrap());
        assert!(ledger.is_key_finished("k1").await.unwrap());
        ledger.record_key_dead_lettered("k2", None).await.unwrap();
        assert!(ledger.is_key_finished("k2").await.unwrap());
        // Reopening keeps everything.
        let again = Ledger::open(&url).await.unwrap();
        assert!(again.is_processed("m1").await.unwrap());
    }
}
