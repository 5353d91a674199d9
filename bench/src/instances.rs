//! Several instances on one PostgreSQL (issue 12, item 8): the ingest and replay rates of
//! `k` release `redrive serve` processes sharing one database (and, for ingest, one consumer
//! group), beside the same with one process, on the same machine and sizes.
//!
//! How it is measured:
//! - **Ingest**: the processes start in one group on a fresh, empty 6-partition topic. Once
//!   every process holds partitions (`redrive_ingest_assigned_partitions` on each `/metrics`
//!   adds up to 6), `BENCH_INSTANCES_RECORDS` (default 60,000) 1-KiB Spring records are
//!   produced to it, faster than they are ingested; the clock runs from the first produce to
//!   the moment the store holds every record. msgs/s = records / elapsed. (Before, the records
//!   were in the topic when the processes started: the dev broker's
//!   `group.initial.rebalance.delay.ms` is 0, so the first process ingested alone until the
//!   others joined, a quarter of the records at 60,000 and all of them at 6,000.)
//! - **Replay**: `BENCH_INSTANCES_REPLAY` (default 30,000) stored dead letters, one
//!   unthrottled replay job to a fresh 6-partition topic, from the request (one store
//!   transaction writing the outbox) to the job's `finished`, with `k` processes' relays
//!   claiming from the one outbox.
//!
//! Every process runs at `REDRIVE_LOG=warn`; the database and the broker run on the same
//! machine, so the figures say what sharing costs or gains there, not on separate hosts.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use redrive_core::actions::{Actor, JobStatus, ReplayOptions, ReplayRequest, Selection};
use redrive_core::store::{MatchCount, Store};
use redrive_core::Filter;
use redrive_testkit::{self as kit, Backend, TestRecord};

use crate::release_server::ReleaseServer;

const PARTITIONS: i32 = 6;

/// The measured figures of one instance count.
#[derive(Debug, Clone, Copy)]
pub struct Figures {
    pub instances: usize,
    /// Ingest, msgs/s.
    pub ingest: f64,
    /// Replay, msgs/s.
    pub replay: f64,
}

/// One `redrive serve` of the release binary ([`ReleaseServer`], killed when dropped), with
/// its `/metrics` public and `env` on top.
async fn start(db_url: &str, env: &[(&str, &str)]) -> Result<ReleaseServer> {
    let mut all: Vec<(&str, String)> = vec![("REDRIVE_METRICS_PUBLIC", "true".into())];
    all.extend(env.iter().map(|(k, v)| (*k, v.to_string())));
    ReleaseServer::start(db_url, &all, Duration::from_secs(60)).await
}

/// `redrive_ingest_assigned_partitions` of one instance (0 when it does not answer).
async fn assigned(i: &ReleaseServer) -> i64 {
    let Ok(res) = reqwest::get(format!("{}/metrics", i.base)).await else {
        return 0;
    };
    let text = res.text().await.unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("redrive_ingest_assigned_partitions "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

async fn fresh_store() -> Result<(Store, String, kit::TestDatabase)> {
    let (url, dir) = kit::fresh_database(Backend::Postgres).await?;
    let store = Store::connect(&url).await?;
    store.migrate().await?;
    Ok((store, url, dir))
}

async fn produce(topic: &str, n: usize) -> Result<()> {
    let producer = crate::spring_records::backlog_producer()?;
    let value = vec![b'x'; 1024];
    let mut i = 0;
    while i < n {
        let end = (i + 10_000).min(n);
        let batch: Vec<TestRecord> = (i..end)
            .map(|j| TestRecord {
                key: Some(format!("order-{j}").into_bytes()),
                value: Some(value.clone()),
                headers: crate::spring_headers(j),
                partition: Some(j as i32 % PARTITIONS),
                timestamp_ms: None,
            })
            .collect();
        kit::produce_with(&producer, topic, &batch).await?;
        i = end;
    }
    Ok(())
}

/// Ingest rate of `k` instances over `n` records produced to a fresh topic once every
/// instance holds partitions, msgs/s.
async fn ingest_rate(k: usize, n: usize) -> Result<f64> {
    let topic = kit::unique("bench_instances.DLT");
    kit::create_topic(&topic, PARTITIONS, &[]).await?;
    let (store, url, _dir) = fresh_store().await?;
    let group = kit::unique("bench_instances");
    let brokers = kit::kafka_brokers();
    let env = [
        ("REDRIVE_INGEST_ENABLED", "true"),
        ("REDRIVE_KAFKA_BROKERS", brokers.as_str()),
        ("REDRIVE_DLQ_TOPICS", topic.as_str()),
        ("REDRIVE_GROUP_ID", group.as_str()),
    ];
    let mut instances = Vec::new();
    for _ in 0..k {
        instances.push(start(&url, &env).await?);
    }
    // From the maintained aggregate (exact for a DLQ topic filter), as the pages count: an
    // exact `COUNT(*)` every 20 ms would scan `dead_letters` beside the ingest it measures.
    let count = || async {
        let filter = Filter {
            dlq_topic: Some(topic.clone()),
            ..Filter::default()
        };
        match store.count_matching(&filter, i64::MAX - 1).await {
            Ok(MatchCount::Exact(n) | MatchCount::MoreThan(n) | MatchCount::AtLeast(n)) => n,
            Err(_) => 0,
        }
    };
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let mut sum = 0;
        let mut all = true;
        for i in &instances {
            let a = assigned(i).await;
            all &= a > 0;
            sum += a;
        }
        if all && sum == i64::from(PARTITIONS) {
            break;
        }
        if Instant::now() > deadline {
            bail!("the {k} instances did not split the partitions within 300 s");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let t = Instant::now();
    produce(&topic, n).await?;
    let produced_s = t.elapsed().as_secs_f64();
    while count().await < n as i64 {
        if Instant::now() > deadline + Duration::from_secs(1500) {
            bail!("{} of {n} stored after 30 min", count().await);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let rate = n as f64 / t.elapsed().as_secs_f64();
    eprintln!("ingest with {k} instance(s): {rate:.0} msgs/s (the {n} records produced in {produced_s:.1} s)");
    drop(instances);
    Ok(rate)
}

/// Replay rate of `k` instances over `n` stored dead letters, msgs/s.
async fn replay_rate(k: usize, n: usize) -> Result<f64> {
    let now = 1_796_104_800_000i64;
    let (store, _dir, url) = crate::filled_store_at(Backend::Postgres, n, now).await?;
    let target = kit::unique("bench_instances_replay");
    kit::create_topic(&target, PARTITIONS, &[]).await?;
    let brokers = kit::kafka_brokers();
    let env = [
        ("REDRIVE_INGEST_ENABLED", "false"),
        ("REDRIVE_KAFKA_BROKERS", brokers.as_str()),
    ];
    let mut instances = Vec::new();
    for _ in 0..k {
        instances.push(start(&url, &env).await?);
    }
    let actor = Actor::operator("bench");
    let t = Instant::now();
    let job = store
        .request_replay(
            &actor,
            &ReplayRequest {
                selection: Selection::Filter(Filter::default()),
                target_topic: Some(target.clone()),
                rate_per_sec: None,
                reason: Some("bench".into()),
                options: ReplayOptions::default(),
            },
        )
        .await?;
    let done = kit::wait_for(
        "the replay job to finish",
        Duration::from_secs(1800),
        || {
            let store = store.clone();
            let id = job.id.clone();
            async move {
                let j = store.job(&id).await.ok().flatten()?;
                (j.status == JobStatus::Finished).then_some(j)
            }
        },
    )
    .await?;
    let rate = done.published as f64 / t.elapsed().as_secs_f64();
    drop(instances);
    if done.published != n as i64 {
        bail!(
            "replay published {} of {n} ({} failed; last error: {:?})",
            done.published,
            done.failed,
            done.last_error
        );
    }
    eprintln!("replay with {k} instance(s): {rate:.0} msgs/s");
    Ok(rate)
}

/// Measures one instance and `k` instances (ingest of `records`, replay of `replays`).
pub async fn measure(k: usize, records: usize, replays: usize) -> Result<Vec<Figures>> {
    let mut out = Vec::new();
    for instances in [1, k] {
        out.push(Figures {
            instances,
            ingest: ingest_rate(instances, records).await?,
            replay: replay_rate(instances, replays).await?,
        });
    }
    Ok(out)
}

/// The rows, for the table `main` prints.
pub fn print(figures: &[Figures], records: usize, replays: usize) {
    println!("| instances on one PostgreSQL (release binaries, one machine) | ingest, {records} x 1 KiB Spring records, 6 partitions | replay, {replays} dead letters, unthrottled |");
    println!("|---|---|---|");
    for f in figures {
        println!(
            "| {} | {:.0} msgs/s | {:.0} msgs/s |",
            f.instances, f.ingest, f.replay
        );
    }
}
