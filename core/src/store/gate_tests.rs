//! Tests of the SQLite write gate (`gate.rs`): first-in-first-out under writers that come
//! back at once, shared by every handle on one file, a nested write refused instead of
//! hanging, and no write transaction begun anywhere but through the gate.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{Pool, Store, StoreError};
use crate::actions::NewAuditEntry;

/// Writers that loop like the relay: a short write transaction, commit, again at once.
const LOOPERS: u64 = 3;
/// Transactions of the single writer, each measured.
const SINGLE_WRITES: usize = 20;

/// A store in `<temporary directory>/<name>` with a probe table, and the directory (removed
/// when dropped).
async fn sqlite_store(name: &str) -> (Store, tempfile::TempDir) {
    let (store, dir) = super::test_file::sqlite_store(name).await;
    let Pool::Sqlite(pool) = &store.pool else {
        unreachable!("a sqlite: URL")
    };
    sqlx::query("CREATE TABLE gate_probe (id INTEGER PRIMARY KEY, who TEXT NOT NULL)")
        .execute(pool)
        .await
        .expect("probe table");
    (store, dir)
}

/// One short write transaction: insert a row, commit. Returns the gate's pass count seen
/// inside the transaction (while holding the gate).
async fn probe_write(store: &Store, who: &str) -> Result<u64, StoreError> {
    probe_write_counted(store, who)
        .await
        .map(|(_, inside)| inside)
}

/// As [`probe_write`], also returning the pass count read just before asking for the gate
/// (after the connection is in hand, with no await between the read and the request).
async fn probe_write_counted(store: &Store, who: &str) -> Result<(u64, u64), StoreError> {
    let Pool::Sqlite(pool) = &store.pool else {
        unreachable!("a sqlite store")
    };
    let conn = pool.acquire().await.map_err(super::dialect::store_error)?;
    let before = store.write_gate_stats().expect("sqlite has a gate").passes;
    let mut tx = store.begin_write_on(conn).await?;
    sqlx::query("INSERT INTO gate_probe (who) VALUES (?)")
        .bind(who)
        .execute(&mut *tx)
        .await
        .map_err(super::dialect::store_error)?;
    let inside = store.write_gate_stats().expect("sqlite has a gate").passes;
    tx.commit().await.map_err(super::dialect::store_error)?;
    Ok((before, inside))
}

/// Three writers in a tight loop of short write transactions (the relay's claims and marks,
/// ingest batches) and one writer that comes now and then: each of its 20 transactions gets
/// in after at most 3 others — one per looping writer already queued — never after an
/// unbounded run of them, which is what SQLite's polling busy handler allows. Counted in
/// transactions granted between its request and its turn, not in time.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_single_writer_gets_in_after_at_most_one_turn_of_each_looping_writer() {
    let (store, _dir) = sqlite_store("fifo.db").await;
    let stop = Arc::new(AtomicBool::new(false));
    let loop_commits = Arc::new(AtomicU64::new(0));
    let mut loopers = Vec::new();
    for l in 0..LOOPERS {
        // Each on a pool of its own, as ingest, the relay and the web are in `serve`.
        let store = store.with_own_pool(2).await.expect("own pool");
        let (stop, commits) = (stop.clone(), loop_commits.clone());
        loopers.push(tokio::spawn(async move {
            let who = format!("loop{l}");
            while !stop.load(Ordering::Relaxed) {
                probe_write(&store, &who).await?;
                commits.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<(), StoreError>(())
        }));
    }
    // Let the loopers get going before measuring.
    redrive_wait(|| loop_commits.load(Ordering::Relaxed) >= 3 * LOOPERS).await;

    let mut overtaken = Vec::new();
    for _ in 0..SINGLE_WRITES {
        // `before` is read, then the gate asked for, with no await in between: every pass
        // counted after it was granted while this writer was already queued.
        let (before, inside) = probe_write_counted(&store, "single")
            .await
            .expect("single write");
        // `inside` counts this writer's own pass too.
        overtaken.push(inside - before - 1);
        tokio::task::yield_now().await;
    }
    stop.store(true, Ordering::Relaxed);
    for l in loopers {
        l.await.expect("join").expect("looping writer");
    }

    let worst = overtaken.iter().copied().max().unwrap_or(0);
    assert!(
        worst <= LOOPERS,
        "a queued writer waited behind {worst} others (bound: one per looping writer, \
         {LOOPERS}); per write: {overtaken:?}"
    );
    let stats = store.write_gate_stats().expect("gate");
    let loops = loop_commits.load(Ordering::Relaxed);
    assert!(loops >= 3 * LOOPERS, "the looping writers ran: {loops}");
    assert!(stats.passes >= loops + SINGLE_WRITES as u64, "{stats:?}");
    // Every write of either kind is in the database.
    let Pool::Sqlite(pool) = &store.pool else {
        unreachable!()
    };
    let singles: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM gate_probe WHERE who = 'single'")
        .fetch_one(pool)
        .await
        .expect("count");
    assert_eq!(singles, SINGLE_WRITES as i64);
}

/// Polls `done` until true, yielding between polls (the loopers need the runtime); gives up
/// after 60 s so a broken gate fails the test instead of hanging it.
async fn redrive_wait(done: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the looping writers made no progress in 60 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A task holding a write transaction that asks for another write (a nested write) gets an
/// error at once instead of waiting for itself forever; after the transaction ends it can
/// write again. (Checked inside tokio tasks, where all of `serve`'s work runs; a
/// `block_on` body has no task id.)
#[tokio::test]
async fn a_nested_write_is_refused_instead_of_hanging() {
    let (store, _dir) = sqlite_store("nested.db").await;
    let task = tokio::spawn(async move {
        let Pool::Sqlite(pool) = &store.pool else {
            unreachable!()
        };
        let entry = NewAuditEntry {
            actor: "eve".into(),
            action: "gate_test".into(),
            outcome: "ok".into(),
            ..NewAuditEntry::default()
        };
        let tx = store.begin_write(pool).await.expect("begin");
        // A deadline only so that a regression fails instead of hanging the suite.
        let nested = tokio::time::timeout(Duration::from_secs(60), store.record_audit(&entry))
            .await
            .expect("a nested write must not wait for itself");
        match nested {
            Err(StoreError::Database(m)) => assert!(m.contains("nested write"), "{m}"),
            other => panic!("expected a nested-write error, got {other:?}"),
        }
        // The same through another handle on the same file (a pool of its own): one gate.
        let other = store.with_own_pool(2).await.expect("own pool");
        let nested = tokio::time::timeout(Duration::from_secs(60), other.record_audit(&entry))
            .await
            .expect("a nested write must not wait for itself");
        assert!(matches!(nested, Err(StoreError::Database(_))), "{nested:?}");
        tx.commit().await.expect("commit");
        store
            .record_audit(&entry)
            .await
            .expect("a write after the transaction");
    });
    task.await.expect("the nested-write task");
}

/// Every handle on one SQLite file in this process shares one gate: `with_own_pool` and a
/// second `Store::connect` by another spelling of the path. Another file has its own.
#[tokio::test]
async fn handles_on_one_file_share_one_gate() {
    let (store, dir) = sqlite_store("shared.db").await;
    let spelled = dir.path().join(".").join("shared.db");
    let again = Store::connect(&format!("sqlite:{}", spelled.display()))
        .await
        .expect("connect again");
    let own = store.with_own_pool(2).await.expect("own pool");
    let before = store.write_gate_stats().expect("gate").passes;
    probe_write(&again, "again").await.expect("write");
    probe_write(&own, "own").await.expect("write");
    assert_eq!(store.write_gate_stats().expect("gate").passes, before + 2);
    let (elsewhere, _other) = sqlite_store("other.db").await;
    let theirs = elsewhere.write_gate_stats().expect("gate").passes;
    probe_write(&store, "mine").await.expect("write");
    assert_eq!(elsewhere.write_gate_stats().expect("gate").passes, theirs);
}

/// No code of the store begins a transaction except `gate.rs`: a `pool.begin()` (SQLite's
/// deferred `BEGIN`) or a `begin_with` elsewhere would bypass the gate, and on SQLite a
/// deferred transaction that reads then writes fails at once with "database is locked".
#[test]
fn only_the_gate_begins_write_transactions() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut offenders = Vec::new();
    let mut dirs = vec![root];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if !name.ends_with(".rs") || name == "gate.rs" || name == "gate_tests.rs" {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read file");
            for (n, line) in text.lines().enumerate() {
                if line.trim_start().starts_with("//") {
                    continue; // documentation may name them
                }
                if [".begin()", "begin_with(", "BEGIN IMMEDIATE", "BEGIN_WRITE"]
                    .iter()
                    .any(|p| line.contains(p))
                {
                    offenders.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "begin write transactions with Store::begin_write (gate.rs):\n{}",
        offenders.join("\n")
    );
}
