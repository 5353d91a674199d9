//! Scheduled reprocessing (`docs/automation.md`, "Scheduled reprocessing"): one round of a
//! transient rule over `BENCH_ROUNDS` (default 100,000; 0 skips) due transient dead letters,
//! on SQLite and PostgreSQL:
//!
//! - the round's own time: [`Store::run_round`] — pick the due ones (`batch_size` =
//!   [`MAX_BATCH_SIZE`]), the job, its outbox rows, events, audit row and `rule_states`, ONE
//!   transaction;
//! - the publish rate of the round's job by the relay (unthrottled: the rule's
//!   `rate_per_sec` at the maximum), from the round's start to `finished`;
//! - the gate overhead: an HTTP gate check (`GET` of a local endpoint answering 200, p50 of
//!   200), and a `quiet_for` check over the due records' error groups (one store read).
//!
//! `BENCH_ROUNDS_ONLY=1` runs only these rows.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use redrive_core::actions::{Actor, JobStatus, MAX_RATE_PER_SEC};
use redrive_core::automation::rules::MAX_BATCH_SIZE;
use redrive_core::replay::{self, RelayConfig, RelayStatus};
use redrive_core::store::{RuleSetOrigin, Store};
use redrive_testkit::{self as kit, Backend};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// One backend's figures.
#[derive(Debug, Clone, Copy, Default)]
pub struct Figures {
    /// Dead letters due (and sorted transient) before the round.
    pub due: usize,
    /// Queued by the round.
    pub queued: i64,
    /// The round's transaction, s.
    pub round_s: f64,
    /// msgs/s, round start to the job `finished`.
    pub publish_rate: f64,
    /// `quiet_for` check over the due records' error groups, ms.
    pub quiet_ms: f64,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A local endpoint answering every request `200 OK` (the gate's target).
async fn health_endpoint(stop: CancellationToken) -> Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/health", listener.local_addr()?);
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = stop.cancelled() => return,
            };
            let Ok((mut s, _)) = accepted else { continue };
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                let _ = s
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
            });
        }
    });
    Ok(url)
}

/// p50 of 200 HTTP gate checks (a fresh connection each, as the gate's GET every round), ms.
pub async fn http_gate_p50_ms() -> Result<f64> {
    let stop = CancellationToken::new();
    let url = health_endpoint(stop.clone()).await?;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(0)
        .build()?;
    let mut ms = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        let r = client
            .get(&url)
            .timeout(Duration::from_secs(5))
            .send()
            .await?;
        if !r.status().is_success() {
            bail!("the local health endpoint answered {}", r.status());
        }
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    stop.cancel();
    ms.sort_by(|a, b| a.total_cmp(b));
    Ok(ms[ms.len() / 2])
}

/// One backend: `n` dead letters sorted transient by one rule, then one round.
pub async fn round(backend: Backend, n: usize) -> Result<Figures> {
    let (store, _dir, _url) = crate::filled_store_at(backend, n, now_ms()).await?;
    let target = kit::unique("bench_rounds");
    kit::create_topic(&target, 4, &[]).await?;
    let rules = format!(
        r#"
[[rule]]
name = "bench"
tier = "transient"
schedule = {{ every = "1s", backoff = "0s", jitter = 0.0, batch_size = {MAX_BATCH_SIZE}, rate_per_sec = {MAX_RATE_PER_SEC}, target_topic = "{target}" }}
gate.quiet_for = "1s"
"#
    );
    let admin = Actor::admin("bench");
    let version = store
        .save_rule_set(&admin, RuleSetOrigin::Api, &rules, None)
        .await?;
    let set = version.compile().map_err(|e| anyhow::anyhow!(e.0))?;
    let t = Instant::now();
    loop {
        let r = store
            .sort_unsorted(&set, Some(version.version), 5_000)
            .await?;
        if r.read == 0 {
            break;
        }
    }
    eprintln!(
        "rounds on {backend:?}: sorted {n} dead letters in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let rule = set.rule("bench").context("the rule")?;
    let now = now_ms() + 1_000;
    let due = store.due_summary(rule, now).await?;
    let t = Instant::now();
    let newest = store.newest_in_groups(&due.fingerprints).await?;
    let quiet_ms = t.elapsed().as_secs_f64() * 1000.0;
    let _ = newest;

    let shutdown = CancellationToken::new();
    let relay = tokio::spawn(replay::run(
        RelayConfig {
            brokers: kit::kafka_brokers(),
            ..RelayConfig::default()
        },
        store.clone(),
        Arc::new(RelayStatus::default()),
        shutdown.clone(),
    ));
    let t = Instant::now();
    let result = store.run_round(rule, version.version, now).await?;
    let round_s = t.elapsed().as_secs_f64();
    let job = result.job.context("the round created no job")?;
    let done = kit::wait_for(
        "the round's job to finish",
        Duration::from_secs(1800),
        || {
            let store: Store = store.clone();
            let id = job.id.clone();
            async move {
                let j = store.job(&id).await.ok().flatten()?;
                (j.status == JobStatus::Finished).then_some(j)
            }
        },
    )
    .await?;
    let publish_rate = done.published as f64 / t.elapsed().as_secs_f64();
    shutdown.cancel();
    relay.await??;
    if done.published != done.total {
        bail!(
            "the round's job published {} of {} (last error {:?})",
            done.published,
            done.total,
            done.last_error
        );
    }
    let f = Figures {
        due: n,
        queued: job.total,
        round_s,
        publish_rate,
        quiet_ms,
    };
    eprintln!("rounds on {backend:?}: {f:?}");
    Ok(f)
}

/// Both backends (`BENCH_ROUNDS` dead letters; `None` when 0) and the HTTP gate's p50.
pub async fn measure() -> Result<Option<(Figures, Figures, f64)>> {
    let n = crate::env_usize("BENCH_ROUNDS", 100_000);
    if n == 0 {
        return Ok(None);
    }
    let sqlite = round(Backend::Sqlite, n).await?;
    let postgres = round(Backend::Postgres, n).await?;
    let http = http_gate_p50_ms().await?;
    Ok(Some((sqlite, postgres, http)))
}

/// The rows of the side-by-side table.
pub fn print(figures: &Option<(Figures, Figures, f64)>) {
    let Some((s, p, http)) = figures else { return };
    println!(
        "| scheduled round over {} due transient dead letters: the round (pick {} + job + outbox rows + events + audit, one transaction) | {:.2} s | {:.2} s |",
        s.due, s.queued, s.round_s, p.round_s
    );
    println!(
        "| publish rate of the round's job (unthrottled, round start to `finished`) | {:.0} msgs/s | {:.0} msgs/s |",
        s.publish_rate, p.publish_rate
    );
    println!(
        "| gate overhead: `quiet_for` over the due records' error groups | {:.1} ms | {:.1} ms |",
        s.quiet_ms, p.quiet_ms
    );
    println!("| gate overhead: one HTTP gate check (local 200 endpoint, p50 of 200) | {http:.2} ms | {http:.2} ms |");
}
