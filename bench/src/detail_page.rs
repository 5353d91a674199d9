//! Detail-page render time and peak RSS for pathological dead letters (issue #7: every page
//! is bounded by what it shows, `docs/limits.md`, "Display caps").
//!
//! How it is measured: the release `redrive` binary (beside this bench's own executable,
//! built by `scripts/bench`) serves a fresh SQLite store holding one dead letter per shape.
//! For each shape the server's peak RSS is reset (`echo 5 > /proc/PID/clear_refs`), the detail
//! page is fetched once to warm up and then `DETAIL_RUNS` times, and the server's `VmHWM` is
//! read from `/proc/PID/status`: the peak while it rendered that shape. Time is the median
//! wall time of one GET (request to last byte, loopback, no compression), so it includes
//! reading the record from the store.

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use redrive_core::model::{Convention, Header, NewDeadLetter, Normalized, RawRecord};
use redrive_core::store::Store;
use redrive_testkit::{self as kit, Backend};
use tokio::process::Command;

const DETAIL_RUNS: usize = 5;
const USER: &str = "bench";
const PASSWORD: &str = "bench-password-1";

/// One measured shape.
pub struct Figure {
    pub shape: &'static str,
    /// Stored size of the record's key + value + headers, bytes.
    pub stored_bytes: usize,
    /// The page's HTML, bytes.
    pub page_bytes: usize,
    /// Median GET time, ms.
    pub median_ms: f64,
    /// Server peak RSS while rendering it, KiB.
    pub peak_rss_kib: u64,
}

fn record(offset: i64, value: Vec<u8>, headers: Vec<Header>) -> NewDeadLetter {
    NewDeadLetter {
        record: RawRecord {
            dlq_topic: "bench_detail.DLT".into(),
            dlq_partition: 0,
            dlq_offset: offset,
            timestamp_ms: Some(1_796_104_800_000),
            key: Some(b"key".to_vec()),
            value: Some(value),
            headers,
        },
        convention: Convention::Unknown,
        normalized: Normalized {
            error_class: Some("com.example.Pathological".into()),
            error_message: Some("pathological shape".into()),
            ..Normalized::default()
        },
        fingerprint: "0000000000000000".into(),
        dead_lettered_at_ms: 1_796_104_800_000 + offset,
        ingested_at_ms: 1_796_104_800_000 + offset,
    }
}

fn shapes() -> Vec<(&'static str, NewDeadLetter)> {
    let h = |name: String, v: &[u8]| Header {
        name,
        value: Some(v.to_vec()),
    };
    let mut nested = vec![b'['; 100_000];
    nested.extend(vec![b']'; 100_000]);
    let mut json = b"{\"items\":[".to_vec();
    while json.len() < 8 << 20 {
        json.extend_from_slice(b"{\"sku\":\"A-1\",\"qty\":1,\"note\":\"\\u202e x\"},");
    }
    json.extend_from_slice(b"{}]}");
    vec![
        (
            "small JSON (baseline)",
            record(0, b"{\"a\":1}".to_vec(), vec![]),
        ),
        ("8 MiB JSON value", record(1, json, vec![])),
        ("8 MiB binary value", record(2, vec![0xff; 8 << 20], vec![])),
        ("100k-deep JSON nesting", record(3, nested, vec![])),
        ("1 MiB single line", record(4, vec![b'x'; 1 << 20], vec![])),
        (
            "10k headers",
            record(
                5,
                b"{}".to_vec(),
                (0..10_000).map(|i| h(format!("h{i}"), b"value")).collect(),
            ),
        ),
        (
            "64 KiB header name",
            record(6, b"{}".to_vec(), vec![h("n".repeat(64 * 1024), b"v")]),
        ),
    ]
}

fn stored_bytes(d: &NewDeadLetter) -> usize {
    d.record.key.as_ref().map_or(0, Vec::len)
        + d.record.value.as_ref().map_or(0, Vec::len)
        + d.record
            .headers
            .iter()
            .map(|h| h.name.len() + h.value.as_ref().map_or(0, Vec::len))
            .sum::<usize>()
}

fn vm_hwm_kib(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmHWM in /proc/PID/status")
}

fn reset_peak(pid: u32) -> Result<()> {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").context("reset the peak RSS")
}

/// Measures every shape; `Err` when the release binary is missing or the server fails.
pub async fn figures() -> Result<Vec<Figure>> {
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
    let (db_url, _dir) = kit::fresh_database(Backend::Sqlite).await?;
    let store = Store::connect(&db_url).await?;
    store.migrate().await?;
    let shapes = shapes();
    let records: Vec<NewDeadLetter> = shapes.iter().map(|(_, d)| d.clone()).collect();
    store.insert_batch(&records).await?;
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
    let pid = child.id().context("no pid")?;
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while client.get(format!("{base}/healthz")).send().await.is_err() {
        if Instant::now() > deadline {
            bail!("redrive did not answer /healthz within 60 s");
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
    let ids: Vec<i64> = {
        let q = redrive_core::filter::ListQuery::from_pairs([("limit", "100")])?;
        let mut items = store.list(&q).await?.items;
        items.sort_by_key(|d| d.dlq_offset);
        items.iter().map(|d| d.id).collect()
    };
    let mut out = Vec::new();
    for ((shape, d), id) in shapes.iter().zip(ids) {
        let url = format!("{base}/dead-letters/{id}");
        let get = || async {
            let res = client.get(&url).header("Cookie", &cookie).send().await?;
            if !res.status().is_success() {
                bail!("GET {url}: {}", res.status());
            }
            Ok::<usize, anyhow::Error>(res.bytes().await?.len())
        };
        reset_peak(pid)?;
        let page_bytes = get().await?;
        let mut times = Vec::new();
        for _ in 0..DETAIL_RUNS {
            let t = Instant::now();
            get().await?;
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        times.sort_by(f64::total_cmp);
        let figure = Figure {
            shape,
            stored_bytes: stored_bytes(d),
            page_bytes,
            median_ms: times[times.len() / 2],
            peak_rss_kib: vm_hwm_kib(pid)?,
        };
        eprintln!(
            "detail page, {shape}: {} bytes, {:.1} ms, peak RSS {} KiB",
            figure.page_bytes, figure.median_ms, figure.peak_rss_kib
        );
        out.push(figure);
    }
    let _ = child.kill().await;
    Ok(out)
}
