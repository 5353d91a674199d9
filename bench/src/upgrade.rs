//! Upgrading a SQLite store across migration 0029 (issue 12): `BENCH_UPGRADE=only`.
//!
//! Migration 0029 rebuilds `dead_letters` so that its large columns (headers, stack trace,
//! key, value) close the row. `tier` (0022) had been added by `ALTER TABLE ADD COLUMN`, which
//! stores it after `value`; SQLite reads a column by walking the record from its start, so
//! a list row of a dead letter with a tier and a large value walked every overflow page of
//! the value (a NULL tier costs nothing: NULL is told by the record's header alone). This
//! measures both sides in one run, on a store built as a redrive before 0029 left it
//! ([`Store::migrate_through`]`(28)`), bulk-loaded with `rows` dead letters ([`crate::fill`]):
//!
//! - the list page (50 newest, no filter; `Store::list`, server side) when those 50 hold
//!   1 MiB values (Kafka's default `max.message.bytes`) and a tier, p50/p99 over `queries`
//!   reads, before and after the upgrade;
//! - what the upgrade costs: its time, and the store's disk use (database, WAL and shared
//!   memory files) before it, at its peak (sampled every 100 ms while it runs) and after it.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use redrive_core::filter::ListQuery;
use redrive_core::store::Store;
use redrive_core::Filter;
use redrive_testkit::{self as kit, Backend};
use sqlx::Connection;

/// Bytes of each large value written into the first list page.
const LARGE_VALUE_BYTES: usize = 1 << 20;

/// What [`measure`] found; times in ms unless named `_s`, sizes in bytes.
pub struct Figures {
    pub rows: usize,
    pub list_before: (f64, f64),
    pub list_after: (f64, f64),
    pub migrate_s: f64,
    pub disk_before: u64,
    pub disk_peak: u64,
    pub disk_after: u64,
}

/// Builds the pre-0029 store of `rows` dead letters, gives its first list page 1 MiB values
/// and a tier, and measures the list page `queries` times before and after `Store::migrate`.
///
/// Errors: the database's; a first list page that does not hold 50 dead letters, or that
/// changes between reads.
pub async fn measure(rows: usize, queries: usize) -> Result<Figures> {
    let now = 1_796_104_800_000i64;
    let (url, dir) = kit::fresh_database(Backend::Sqlite).await?;
    let store = Store::connect(&url).await?;
    store.migrate_through(28).await?;
    crate::fill(&url, rows, now).await?;

    let query = ListQuery {
        filter: Filter::default(),
        limit: 50,
        cursor: None,
    };
    let ids: Vec<i64> = store
        .list(&query)
        .await?
        .items
        .iter()
        .map(|d| d.id)
        .collect();
    if ids.len() != 50 {
        bail!(
            "the first list page holds {} dead letters, not 50",
            ids.len()
        );
    }
    let mut conn = sqlx::SqliteConnection::connect(&url).await?;
    for id in &ids {
        sqlx::query("UPDATE dead_letters SET value = randomblob(?), tier = 'poison' WHERE id = ?")
            .bind(LARGE_VALUE_BYTES as i64)
            .bind(id)
            .execute(&mut conn)
            .await?;
    }
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(&mut conn)
        .await?;
    conn.close().await?;

    let list_before = list_times(&store, &query, &ids, queries).await?;
    let disk_before = disk_use(dir.path());

    let peak = Arc::new(AtomicU64::new(disk_before));
    let sampler = {
        let peak = peak.clone();
        let path = dir.path().to_path_buf();
        tokio::spawn(async move {
            loop {
                peak.fetch_max(disk_use(&path), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let t = Instant::now();
    store.migrate().await?;
    let migrate_s = t.elapsed().as_secs_f64();
    sampler.abort();
    let disk_after = disk_use(dir.path());
    let disk_peak = peak.load(Ordering::Relaxed).max(disk_after);

    let list_after = list_times(&store, &query, &ids, queries).await?;
    eprintln!(
        "upgrade of {rows} rows: {migrate_s:.1} s; list {list_before:?} -> {list_after:?} ms"
    );
    Ok(Figures {
        rows,
        list_before,
        list_after,
        migrate_s,
        disk_before,
        disk_peak,
        disk_after,
    })
}

/// (p50, p99) ms of `queries` reads of the list page, which must be the dead letters `ids`.
async fn list_times(
    store: &Store,
    query: &ListQuery,
    ids: &[i64],
    queries: usize,
) -> Result<(f64, f64)> {
    let mut times = Vec::with_capacity(queries);
    for _ in 0..queries {
        let t = Instant::now();
        let page = store.list(query).await?;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        let got: Vec<i64> = page.items.iter().map(|d| d.id).collect();
        if got != ids {
            bail!("the list page changed: {got:?}, expected {ids:?}");
        }
    }
    times.sort_by(|a, b| a.total_cmp(b));
    Ok((
        crate::percentile(&times, 0.5),
        crate::percentile(&times, 0.99),
    ))
}

/// Bytes of every file directly in `dir` (the database and its WAL and shared-memory files).
fn disk_use(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}

/// The figures as a markdown table.
pub fn print(f: &Figures) {
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    println!(
        "| SQLite store of {} dead letters | before 0029 | after 0029 |",
        f.rows
    );
    println!("|---|---|---|");
    println!(
        "| list page (50 newest, each with a tier and a 1 MiB value) p50 / p99 | {:.2} / {:.2} ms | {:.2} / {:.2} ms |",
        f.list_before.0, f.list_before.1, f.list_after.0, f.list_after.1
    );
    println!(
        "| disk use (database + WAL) | {:.0} MiB | {:.0} MiB |",
        mib(f.disk_before),
        mib(f.disk_after)
    );
    println!(
        "| the upgrade (migration 0029) | {:.1} s, disk peak {:.0} MiB | |",
        f.migrate_s,
        mib(f.disk_peak)
    );
}
