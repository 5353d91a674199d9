//! Full HTML pages under load (issue 12 item 7): `BENCH_LOAD_USERS` (default 20) concurrent
//! signed-in users GET the list, a filtered list, a text search, the error groups and random
//! detail pages for `BENCH_LOAD_SECS` (default 30) s, over HTTP against the release binary
//! serving a store of `BENCH_ROWS` rows, while that same server ingests Spring records from
//! the real broker at `BENCH_LOAD_INGEST` (default 1,000) msgs/s.
//!
//! How it is measured: the store is the run's shared one ([`crate::shared_store`]), filled by
//! the database itself, already sorted into tiers as ingest and the server's sorter would have
//! left it (`bulk_load`, `Tiers::Sorted`), the release
//! server ([`ReleaseServer`]) consumes a fresh 4-partition DLQ topic that a producer task
//! feeds in 100 ms ticks, and each user loops over the five page kinds in turn (each user
//! starting at a different kind), timing each GET from request to last byte. Latencies are
//! per kind (p50, p99, count); the server's peak RSS (`VmHWM`) covers the whole run; the
//! ingest achieved is the rows the store gained during the run. A non-2xx answer is counted
//! as an error, never timed.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use redrive_core::store::{CandidateScan, MatchCount, Store};
use redrive_core::Filter;
use redrive_testkit::{self as kit, Backend, TestRecord};

use crate::release_server::{p50_p99, ReleaseServer};
use crate::shared_store::SharedStores;

/// The page kinds, in the order a user visits them.
pub const KINDS: [&str; 5] = ["list", "filtered list", "search", "groups", "detail"];

/// One backend's figures.
pub struct Figures {
    pub backend: Backend,
    /// (kind, p50 ms, p99 ms, requests).
    pub pages: Vec<(&'static str, f64, f64, usize)>,
    /// Non-2xx answers and transport errors.
    pub errors: usize,
    /// Records the store gained during the run, per second.
    pub ingest_rate: f64,
    /// The server's peak RSS over the run, KiB.
    pub peak_rss_kib: u64,
    /// Users, seconds.
    pub users: usize,
    pub secs: u64,
    /// Each user's pause after a page, ms (0: a closed loop, the next request the moment the
    /// last one ends).
    pub think_ms: u64,
}

fn path(kind: &str, i: usize, rows: usize) -> String {
    match kind {
        "list" => "/".into(),
        "filtered list" => format!("/?source_topic=service{}.events&status=new", i % 20),
        // Group 7's message ("Connection reset while calling payments ...") is 1 in 50 rows.
        "search" => "/?q=calling%20payments".into(),
        "groups" => "/groups".into(),
        _ => {
            // Spread over the whole store; ids are 1..=rows after a bulk load.
            let id = 1 + (i.wrapping_mul(2_654_435_761) % rows.max(1));
            format!("/dead-letters/{id}")
        }
    }
}

/// Dead letters stored from `topic` (exact, from the aggregates).
pub(crate) async fn ingested(store: &Store, topic: &str) -> Result<i64> {
    let filter = Filter {
        dlq_topic: Some(topic.to_string()),
        ..Filter::default()
    };
    Ok(match store.count_matching(&filter, i64::MAX).await? {
        MatchCount::Exact(n) | MatchCount::MoreThan(n) | MatchCount::AtLeast(n) => n,
    })
}

/// Serves `shared`'s store of `rows` on `backend` (filled first if no section did) with the
/// release binary while ingest runs, and loads it with `users` users for `secs` s, once per
/// think time in `think` (ms; one [`Figures`] each, in that order, on the same store and
/// server). Its ingest adds rows to the shared store: run it after the other sections that
/// read that store.
///
/// Errors: the binary is missing, the fill, the broker or the server fails.
pub(crate) async fn figures(
    shared: &SharedStores,
    backend: Backend,
    rows: usize,
    users: usize,
    secs: u64,
    think: &[u64],
    ingest_per_s: usize,
) -> Result<Vec<Figures>> {
    let filled = shared.get(backend, rows, "pages under load").await?;
    let db_url = filled.url.clone();
    let store = filled.connect().await?;
    let topic = kit::unique("bench_load.DLT");
    kit::create_topic(&topic, 4, &[]).await?;
    let server = Arc::new(
        ReleaseServer::start(
            &db_url,
            &[
                ("REDRIVE_INGEST_ENABLED", "true".into()),
                ("REDRIVE_KAFKA_BROKERS", kit::kafka_brokers()),
                ("REDRIVE_DLQ_TOPICS", topic.clone()),
                ("REDRIVE_GROUP_ID", kit::unique("bench_load")),
            ],
            Duration::from_secs(120),
        )
        .await?,
    );
    let stop = Arc::new(AtomicBool::new(false));
    let producer = {
        let stop = stop.clone();
        let topic = topic.clone();
        tokio::spawn(async move {
            let p = kit::producer(&[("linger.ms", "5")])?;
            let per_tick = (ingest_per_s / 10).max(1);
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            let mut j = 0usize;
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                let batch: Vec<TestRecord> = (j..j + per_tick)
                    .map(|k| TestRecord {
                        key: Some(format!("order-{k}").into_bytes()),
                        value: Some(vec![b'x'; 1024]),
                        headers: crate::spring_headers(k),
                        partition: Some((k % 4) as i32),
                        timestamp_ms: None,
                    })
                    .collect();
                kit::produce_with(&p, &topic, &batch).await?;
                j += per_tick;
            }
            Ok::<usize, anyhow::Error>(j)
        })
    };
    // A store that has been running has sorted its dead letters into tiers, and so has the
    // bulk load (`Tiers::Sorted`); what ingest adds, the server's automation sorts. Time
    // pages once nothing waits for it.
    let sorted_in = until_sorted(&store, Duration::from_secs(3_600)).await?;
    eprintln!(
        "pages under load: the server sorted the {rows} rows into tiers in {:.1} s",
        sorted_in.as_secs_f64()
    );
    // Let ingest reach its pace before timing pages.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut figs = Vec::new();
    for &think_ms in think {
        server.reset_peak()?;
        let before = ingested(&store, &topic).await?;
        let started = Instant::now();
        let (mut all, errors) = load_phase(&server, users, secs, think_ms, rows).await?;
        let elapsed = started.elapsed().as_secs_f64();
        let stored = ingested(&store, &topic).await? - before;
        figs.push(Figures {
            backend,
            pages: KINDS
                .iter()
                .map(|k| {
                    let v = all.remove(k).unwrap_or_default();
                    let n = v.len();
                    let (p50, p99) = p50_p99(v);
                    (*k, p50, p99, n)
                })
                .collect(),
            errors,
            ingest_rate: stored as f64 / elapsed,
            peak_rss_kib: server.peak_rss_kib()?,
            users,
            secs,
            think_ms,
        });
    }
    stop.store(true, Ordering::Relaxed);
    let produced = producer.await??;
    eprintln!("pages under load on {backend:?}: produced {produced} records meanwhile");
    if let Ok(server) = Arc::try_unwrap(server) {
        server.stop().await;
    }
    store.close().await;
    Ok(figs)
}

/// Waits until no dead letter of `store` is unsorted (the server's automation sorts them,
/// `docs/automation.md`; asked as the sorter asks, one row of its page), at most `within`;
/// returns the time it took.
///
/// Errors: the store's, or still unsorted after `within`.
async fn until_sorted(store: &Store, within: Duration) -> Result<Duration> {
    let started = Instant::now();
    let one = CandidateScan {
        with_labels: false,
        ..CandidateScan::unsorted(1)
    };
    while !store.tier_candidates(&one).await?.is_empty() {
        if started.elapsed() > within {
            anyhow::bail!("dead letters still unsorted after {within:?}");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Ok(started.elapsed())
}

/// One timed phase: `users` users each loop over [`KINDS`] for `secs` s, pausing `think_ms`
/// after each page. Returns the latencies (ms) per kind and the errors, and prints the
/// slowest requests with when they started ([`print_slowest`]).
async fn load_phase(
    server: &Arc<ReleaseServer>,
    users: usize,
    secs: u64,
    think_ms: u64,
    rows: usize,
) -> Result<(BTreeMap<&'static str, Vec<f64>>, usize)> {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for u in 0..users {
        let server = server.clone();
        tasks.push(tokio::spawn(async move {
            let mut times: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
            // (start, s after the phase began; kind; ms) of every request.
            let mut log: Vec<(f64, &'static str, f64)> = Vec::new();
            let mut errors = 0usize;
            let mut i = u;
            // Paced users start spread over one think time, not all at once.
            if think_ms > 0 {
                let offset = think_ms * u as u64 / users.max(1) as u64;
                tokio::time::sleep(Duration::from_millis(offset)).await;
            }
            while Instant::now() < deadline {
                let kind = KINDS[i % KINDS.len()];
                let at = started.elapsed().as_secs_f64();
                match server
                    .get(&path(kind, i / KINDS.len() + u * 7919, rows))
                    .await
                {
                    Ok((ms, _)) => {
                        times.entry(kind).or_default().push(ms);
                        log.push((at, kind, ms));
                    }
                    Err(e) => {
                        if errors == 0 {
                            eprintln!("pages under load: {e:#}");
                        }
                        errors += 1;
                    }
                }
                i += 1;
                if think_ms > 0 {
                    tokio::time::sleep(Duration::from_millis(think_ms)).await;
                }
            }
            (times, log, errors)
        }));
    }
    let mut all: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    let mut every = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (times, log, e) = t.await?;
        errors += e;
        every.extend(log);
        for (k, v) in times {
            all.entry(k).or_default().extend(v);
        }
    }
    print_slowest(think_ms, every);
    Ok((all, errors))
}

/// How many of a phase's slowest requests [`print_slowest`] names.
const SLOWEST_SHOWN: usize = 10;

/// Prints (stderr) a phase's [`SLOWEST_SHOWN`] slowest requests as `start s kind ms`, by
/// start: slow pages that all began within the same second point to one stall every user
/// met (a lock, a checkpoint, a pause of the server), not to slow pages of one kind.
fn print_slowest(think_ms: u64, mut log: Vec<(f64, &'static str, f64)>) {
    log.sort_by(|a, b| b.2.total_cmp(&a.2));
    log.truncate(SLOWEST_SHOWN);
    log.sort_by(|a, b| a.0.total_cmp(&b.0));
    let shown: Vec<String> = log
        .iter()
        .map(|(at, kind, ms)| format!("{at:.1} s {kind} {ms:.0} ms"))
        .collect();
    eprintln!(
        "pages under load ({think_ms} ms think time): the slowest requests by start: {}",
        shown.join("; ")
    );
}

/// Prints the table, one column per database measured.
pub fn print(rows: usize, figs: &[Figures]) {
    let Some(first) = figs.first() else { return };
    let row = |label: String, cell: &dyn Fn(&Figures) -> String| {
        let cells: Vec<String> = figs.iter().map(cell).collect();
        println!("| {label} | {} |", cells.join(" | "));
    };
    println!();
    let names: Vec<String> = figs
        .iter()
        .map(|f| {
            let db = match f.backend {
                Backend::Sqlite => "SQLite",
                Backend::Postgres => "PostgreSQL",
            };
            match f.think_ms {
                0 => format!("{db}, closed loop"),
                t => format!("{db}, {t} ms think time"),
            }
        })
        .collect();
    println!(
        "| pages under load: {} users for {} s at {rows} rows, ingest running | {} |",
        first.users,
        first.secs,
        names.join(" | ")
    );
    println!("|{}", "---|".repeat(figs.len() + 1));
    for (i, kind) in KINDS.iter().enumerate() {
        row(format!("`{kind}` p50 / p99 (requests)"), &|f| {
            let (_, p50, p99, n) = f.pages[i];
            format!("{p50:.1} / {p99:.1} ms ({n})")
        });
    }
    row("pages served per second".into(), &|f| {
        let n: usize = f.pages.iter().map(|p| p.3).sum();
        format!("{:.0}", n as f64 / f.secs as f64)
    });
    row("errors (non-2xx)".into(), &|f| f.errors.to_string());
    row("ingest achieved meanwhile".into(), &|f| {
        format!("{:.0} msgs/s", f.ingest_rate)
    });
    row("server peak RSS over the run".into(), &|f| {
        format!("{:.0} MiB", f.peak_rss_kib as f64 / 1024.0)
    });
}
