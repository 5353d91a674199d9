//! Overview page and `/metrics` latency over HTTP against the release `redrive` binary, at
//! `BENCH_ROWS` stored dead letters (issue 8: neither may scan the store per view or scrape).
//!
//! How it is measured: a fresh store of each backend is filled by the database itself
//! (`bulk_load`, the migration 0006 triggers maintaining the aggregates as rows go in), the
//! release binary serves it (beside this bench's executable, built by `scripts/bench`), and
//! `OVERVIEW_RUNS` sequential GETs of each path are timed, request to last byte on loopback.
//! `/metrics` serves cached store figures for 10 s, so its p50 is the cached scrape and the
//! first GET (reported apart) is the uncached one; `Store::stats` is also timed in process
//! (what one refresh costs).

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use redrive_core::store::Store;
use redrive_testkit::{self as kit, Backend};
use tokio::process::Command;

const OVERVIEW_RUNS: usize = 50;
const USER: &str = "bench";
const PASSWORD: &str = "bench-password-1";

/// One backend's figures, ms.
pub struct Figures {
    pub overview: (f64, f64),
    pub metrics_first: f64,
    pub metrics: (f64, f64),
    /// `Store::stats` in process, median of 5.
    pub stats_ms: f64,
    /// How long the fill took, s.
    pub fill_s: f64,
}

fn p50_p99(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize];
    (at(0.5), at(0.99))
}

/// Fills a store of `backend` with `rows`, serves it with the release binary, times the
/// pages. Errors: the binary is missing, the fill or the server fails.
pub async fn figures(backend: Backend, rows: usize, now: i64) -> Result<Figures> {
    let bin = std::env::current_exe()?
        .parent()
        .context("no directory")?
        .join("redrive");
    if !bin.exists() {
        bail!(
            "{} is missing: `cargo build --release -p redrive` first",
            bin.display()
        );
    }
    let (db_url, _dir) = kit::fresh_database(backend).await?;
    let store = Store::connect(&db_url).await?;
    store.migrate().await?;
    let fill = crate::bulk_load::bulk_load(&db_url, rows, now).await?;
    eprintln!(
        "overview bench: filled {rows} rows on {backend:?} in {:.1} s",
        fill.as_secs_f64()
    );
    let mut stats_times = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        store.stats(now).await?;
        store.arrival_totals(400).await?;
        stats_times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let site = tempfile::tempdir()?;
    let mut child = Command::new(&bin)
        .arg("serve")
        .env("REDRIVE_DATABASE_URL", &db_url)
        .env("REDRIVE_LISTEN", format!("127.0.0.1:{port}"))
        .env("REDRIVE_INGEST_ENABLED", "false")
        .env("REDRIVE_KAFKA_BROKERS", "127.0.0.1:9")
        .env("REDRIVE_SITE_ROOT", site.path())
        .env("REDRIVE_ADMIN_USER", USER)
        .env("REDRIVE_ADMIN_PASSWORD", PASSWORD)
        .env("REDRIVE_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let deadline = Instant::now() + Duration::from_secs(120);
    while client.get(format!("{base}/healthz")).send().await.is_err() {
        if Instant::now() > deadline {
            bail!("redrive did not answer /healthz within 120 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let res = client
        .post(format!("{base}/auth/sign-in"))
        .header("Accept", "application/json")
        .form(&[("user", USER), ("password", PASSWORD)])
        .send()
        .await?;
    let cookie = res
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .context("sign-in gave no session cookie")?
        .to_string();
    let time = |path: &'static str| {
        let client = client.clone();
        let cookie = cookie.clone();
        let url = format!("{base}{path}");
        async move {
            let t = Instant::now();
            let res = client.get(&url).header("Cookie", &cookie).send().await?;
            if !res.status().is_success() {
                bail!("GET {url}: {}", res.status());
            }
            res.bytes().await?;
            Ok::<f64, anyhow::Error>(t.elapsed().as_secs_f64() * 1000.0)
        }
    };
    let metrics_first = time("/metrics").await?;
    let mut overview = Vec::new();
    let mut metrics = Vec::new();
    for _ in 0..OVERVIEW_RUNS {
        overview.push(time("/overview").await?);
        metrics.push(time("/metrics").await?);
    }
    let _ = child.kill().await;
    let mut s = stats_times;
    s.sort_by(f64::total_cmp);
    Ok(Figures {
        overview: p50_p99(overview),
        metrics_first,
        metrics: p50_p99(metrics),
        stats_ms: s[s.len() / 2],
        fill_s: fill.as_secs_f64(),
    })
}
