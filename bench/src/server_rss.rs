//! `BENCH_RSS=only` (issue 12 item 6): the release server's peak RSS while it ingests
//! `BENCH_RSS_RECORDS` (default 1,000,000) 1 KiB Spring records from the real broker and
//! serves pages, per database; with the ingest rate of the whole server (consumer, decode,
//! store, offset commit, with its default configuration) beside it.
//!
//! How it is measured: the records are produced once into a fresh 4-partition DLQ topic
//! before any server starts. For each database a release `redrive serve`
//! ([`ReleaseServer`]) starts on an empty store with ingest on, in a consumer group of its
//! own, so it reads the whole backlog (the "first attach to an old DLQ topic" case); a reader
//! task meanwhile GETs the list, the error groups and a text search, one after the other, with
//! 100 ms between GETs, as an on-call engineer watching the incident would. The rate is the
//! records stored (exact, from the aggregates) over the seconds from the server's start to
//! the last one stored; the peak RSS is the server's `VmHWM` (`/proc/PID/status`) at the end:
//! the most resident memory it held at any moment of the run. The store's size on disk at
//! the end (SQLite: database, WAL and shared-memory files; PostgreSQL: `pg_database_size`)
//! over the records gives the bytes a record costs.
//!
//! A [`Profile`] adds `REDRIVE_KAFKA__*` settings (librdkafka's fetch sizes): the same backlog
//! ingested with redrive's own settings and with others, side by side in one run.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use redrive_core::store::Store;
use redrive_testkit::{self as kit, Backend};

use crate::release_server::ReleaseServer;

/// The pages the reader task GETs, in turn.
const PAGES: [&str; 3] = ["/", "/groups", "/?q=calling%20payments"];

/// The longest one backend's ingest may take before the bench gives up.
const DEADLINE: Duration = Duration::from_secs(3_600);

/// librdkafka settings a run adds to redrive's own, as `REDRIVE_KAFKA__*` variables.
pub struct Profile {
    /// What the row is called in the table.
    pub name: &'static str,
    /// (variable, value) pairs, e.g. `("REDRIVE_KAFKA__FETCH_MAX_BYTES", "33554432")`.
    pub env: Vec<(&'static str, String)>,
}

impl Profile {
    /// redrive's own settings (`core/src/ingest/kafka.rs`).
    pub fn redrive() -> Profile {
        Profile {
            name: "redrive's fetch settings",
            env: Vec::new(),
        }
    }

    /// The fetch sizes compared with redrive's own (`docs/bench.md`, "Fetch sizes"): those
    /// redrive used before 2026-12-03, and intermediate ones; what each costs in memory and
    /// gains in rate.
    pub fn comparisons() -> [Profile; 2] {
        const MIB: u32 = 1024 * 1024;
        [
            Profile::fetch(
                "before 2026-12-03: fetch 32 MiB, 16 MiB per partition, queue 32 MiB",
                32 * MIB,
                16 * MIB,
                32 * 1024,
            ),
            Profile::fetch(
                "intermediate: fetch 4 MiB, 1 MiB per partition, queue 4 MiB",
                4 * MIB,
                MIB,
                4 * 1024,
            ),
        ]
    }

    /// `fetch.max.bytes`, `fetch.message.max.bytes` (both bytes) and
    /// `queued.max.messages.kbytes` (KiB) instead of redrive's.
    pub fn fetch(name: &'static str, fetch: u32, per_partition: u32, queue_kib: u32) -> Profile {
        Profile {
            name,
            env: vec![
                ("REDRIVE_KAFKA__FETCH_MAX_BYTES", fetch.to_string()),
                (
                    "REDRIVE_KAFKA__FETCH_MESSAGE_MAX_BYTES",
                    per_partition.to_string(),
                ),
                (
                    "REDRIVE_KAFKA__QUEUED_MAX_MESSAGES_KBYTES",
                    queue_kib.to_string(),
                ),
            ],
        }
    }
}

/// One run's figures.
pub struct Figures {
    /// The database, and [`Profile::name`].
    pub backend: Backend,
    pub profile: &'static str,
    /// Records stored, and the seconds from the server's start to the last one stored.
    pub records: usize,
    pub secs: f64,
    /// The server's peak RSS over the run, KiB.
    pub peak_rss_kib: u64,
    /// Pages served during the run, and non-2xx answers or transport errors among them.
    pub pages: usize,
    pub page_errors: usize,
    /// The store's size on disk at the end, bytes.
    pub store_bytes: u64,
}

/// Serves an empty store of `backend` with the release binary and `profile`'s settings,
/// ingesting the `n` records already in `topic`, while a reader GETs pages.
///
/// Errors: the binary is missing, the server does not start, or ingest does not store all
/// `n` records within an hour.
pub async fn measure(
    backend: Backend,
    profile: &Profile,
    topic: &str,
    n: usize,
) -> Result<Figures> {
    let (db_url, dir) = kit::fresh_database(backend).await?;
    let store = Store::connect(&db_url).await?;
    store.migrate().await?;
    let started = Instant::now();
    let server = Arc::new(
        ReleaseServer::start(
            &db_url,
            &[
                ("REDRIVE_INGEST_ENABLED", "true".into()),
                ("REDRIVE_KAFKA_BROKERS", kit::kafka_brokers()),
                ("REDRIVE_DLQ_TOPICS", topic.to_string()),
                ("REDRIVE_GROUP_ID", kit::unique("bench_rss")),
            ]
            .into_iter()
            .chain(profile.env.iter().cloned())
            .collect::<Vec<_>>(),
            Duration::from_secs(120),
        )
        .await?,
    );
    let stop = Arc::new(AtomicBool::new(false));
    let (pages, errors) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let reader = {
        let (server, stop, pages, errors) =
            (server.clone(), stop.clone(), pages.clone(), errors.clone());
        tokio::spawn(async move {
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                if server.get(PAGES[i % PAGES.len()]).await.is_err() {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
                pages.fetch_add(1, Ordering::Relaxed);
                i += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let mut last = (0i64, Instant::now());
    let mut stored = 0i64;
    while stored < n as i64 {
        if started.elapsed() > DEADLINE {
            stop.store(true, Ordering::Relaxed);
            bail!("{backend:?}: {stored} of {n} records stored after {DEADLINE:?}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        stored = crate::pages_load::ingested(&store, topic).await?;
        if stored != last.0 {
            last = (stored, Instant::now());
            eprintln!(
                "server RSS on {backend:?} ({}): {stored} of {n} stored, RSS peak {} MiB",
                profile.name,
                server.peak_rss_kib()? / 1024
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = reader.await;
    let peak_rss_kib = server.peak_rss_kib()?;
    if let Ok(server) = Arc::try_unwrap(server) {
        server.stop().await;
    }
    let store_bytes = store_bytes(&db_url, dir.path()).await?;
    store.close().await;
    Ok(Figures {
        backend,
        profile: profile.name,
        store_bytes,
        records: n,
        secs: last.1.duration_since(started).as_secs_f64(),
        peak_rss_kib,
        pages: pages.load(Ordering::Relaxed),
        page_errors: errors.load(Ordering::Relaxed),
    })
}

/// The store's size on disk, bytes: SQLite's files in `dir` (database, WAL, shared memory),
/// or PostgreSQL's `pg_database_size`.
async fn store_bytes(db_url: &str, dir: &std::path::Path) -> Result<u64> {
    if db_url.starts_with("sqlite:") {
        let mut total = 0;
        for entry in std::fs::read_dir(dir)? {
            let meta = entry?.metadata()?;
            if meta.is_file() {
                total += meta.len();
            }
        }
        return Ok(total);
    }
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(db_url).await?;
    let size: i64 = sqlx::query_scalar("SELECT pg_database_size(current_database())")
        .fetch_one(&mut conn)
        .await?;
    Ok(size as u64)
}

/// Prints one row per run: database, settings, ingest rate, peak RSS, store size per record.
pub fn print(figures: &[Figures]) {
    println!("| database | librdkafka settings | server ingest, empty store to the last stored | server peak RSS (`VmHWM`) | pages served meanwhile | store on disk |");
    println!("|---|---|---|---|---|---|");
    for f in figures {
        println!(
            "| {:?} | {} | {:.0} msgs/s ({} records in {:.0} s) | {:.0} MiB | {} ({} errors) | {:.1} MiB, {:.1} KB per record |",
            f.backend,
            f.profile,
            f.records as f64 / f.secs,
            f.records,
            f.secs,
            f.peak_rss_kib as f64 / 1024.0,
            f.pages,
            f.page_errors,
            f.store_bytes as f64 / (1024.0 * 1024.0),
            f.store_bytes as f64 / f.records.max(1) as f64 / 1000.0,
        );
    }
}
