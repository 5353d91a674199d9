//! The replay rows of `make bench` (issue 3; issue 9: transform and per-key order beside
//! plain replay): one replay job of `n` stored dead letters through the real outbox, relay and
//! broker (idempotent producer, acks=all), in msgs/s, from the request (one store transaction
//! writing the outbox) to the job's `finished`.
//!
//! The store is the bench's [`crate::synthetic`] one ([`crate::filled_store`]): every dead
//! letter has its own key `order-{i}` and its source offset `i`. Per-key order
//! (`docs/replay.md`, "Per-key order") is on by default, but with one record per key no
//! record ever waits for another; [`Keys::Shared`] rewrites the keys to `order-{i % k}` so
//! each key has `n / k` records that must go out one after another.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use redrive_core::actions::{
    Actor, JobStatus, ReplayOptions, ReplayRequest, Selection, TransformOptions,
};
use redrive_core::replay::{self, RelayConfig, RelayStatus};
use redrive_core::store::Store;
use redrive_core::Filter;
use redrive_testkit::{self as kit, Backend};
use tokio_util::sync::CancellationToken;

/// The transform of the transform row: a trivial Rhai script that adds one header and
/// returns the record (`docs/replay.md`, "Transform on replay").
pub const TRANSFORM_SCRIPT: &str =
    "record.headers.push(#{ name: \"x-bench\", value: \"1\" });\nrecord";

/// How the stored dead letters are keyed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    /// Key `order-{i}`: one record per key (as [`crate::synthetic`] stores them).
    Distinct,
    /// Key `order-{i % k}`: `k` keys, each with about `n / k` records in source-offset order.
    Shared(usize),
}

/// One replay row's setup.
#[derive(Debug, Clone)]
pub struct Case {
    /// Dead letters replayed in one job.
    pub n: usize,
    /// The job's rate limit, msgs/s (`None`: unthrottled).
    pub rate_per_sec: Option<u32>,
    /// How the dead letters are keyed.
    pub keys: Keys,
    /// The job's options (per-key order, transform).
    pub options: ReplayOptions,
}

impl Case {
    /// Default options, distinct keys, unthrottled: the plain replay row.
    pub fn plain(n: usize) -> Case {
        Case {
            n,
            rate_per_sec: None,
            keys: Keys::Distinct,
            options: ReplayOptions::default(),
        }
    }

    /// Per-key order turned off (`"unordered": true`), distinct keys.
    pub fn unordered(n: usize) -> Case {
        Case {
            options: ReplayOptions {
                unordered: true,
                ..ReplayOptions::default()
            },
            ..Case::plain(n)
        }
    }

    /// Per-key order on (the default) over `keys` shared keys.
    pub fn keyed(n: usize, keys: usize) -> Case {
        Case {
            keys: Keys::Shared(keys.max(1)),
            ..Case::plain(n)
        }
    }

    /// [`TRANSFORM_SCRIPT`] on every record, per-key order on (the default), distinct keys.
    pub fn transform(n: usize) -> Case {
        Case {
            options: ReplayOptions {
                transform: Some(TransformOptions {
                    script: TRANSFORM_SCRIPT.into(),
                    time_limit_ms: None,
                    max_operations: None,
                }),
                ..ReplayOptions::default()
            },
            ..Case::plain(n)
        }
    }
}

/// What one replay row measured, msgs/s.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rates {
    /// Published records per second from the request (the store transactions writing the
    /// outbox) to the job's `finished`.
    pub end_to_end: f64,
    /// The relay's share: published records per second from the request's return (the job
    /// `running`, its outbox written) to `finished`.
    pub relay: f64,
    /// A throttled job's achieved rate at the broker: `(n - 1) / (last - first)` of the
    /// records' broker timestamps (CreateTime, set by the relay when it hands a record over).
    /// `None` for an unthrottled row (reading the topic back costs time).
    pub broker: Option<f64>,
    /// The job was published while its request queued it
    /// (`ReplayOptions::publishes_while_queueing`, more than one chunk): `relay` then
    /// measures only what was left after the request, and `end_to_end` is the figure.
    pub streamed: bool,
    /// The relay's first claim of the job after the request began, s.
    pub first_claim_s: Option<f64>,
}

/// Runs `case` on a fresh store of `backend` with its own relay and target topic.
///
/// Errors: the store's, the broker's, a job that does not finish within 30 min, or one that
/// published other than `n` records.
pub async fn replay_rate(backend: Backend, case: &Case) -> Result<Rates> {
    let (mut rates, target, _store, _dir) = run(backend, case).await?;
    if case.rate_per_sec.is_some() && case.n > 1 {
        let (first, last) = timestamp_span(&target, case.n).await?;
        if last > first {
            rates.broker = Some((case.n - 1) as f64 * 1000.0 / (last - first) as f64);
        }
        eprintln!(
            "throttled replay on {backend:?}: {:?} msgs/s at the broker ({} ms from the first \
             record to the last)",
            rates.broker,
            last - first
        );
    }
    Ok(rates)
}

/// The earliest and latest broker timestamps (ms) of the `n` records of `topic`.
async fn timestamp_span(topic: &str, n: usize) -> Result<(i64, i64)> {
    use rdkafka::message::Message;
    let stamps = kit::consume(topic, n)
        .await?
        .iter()
        .filter_map(|m| m.timestamp().to_millis())
        .fold((i64::MAX, i64::MIN), |(first, last), ts| {
            (first.min(ts), last.max(ts))
        });
    Ok(stamps)
}

/// One run of [`replay_rate`]: (its rates, the fresh 4-partition target topic holding the `n`
/// records, the store and the directory keeping it, for a check afterwards).
type Ran = (Rates, String, Store, kit::TestDatabase);

async fn run(backend: Backend, case: &Case) -> Result<Ran> {
    let n = case.n;
    let now = 1_796_104_800_000i64;
    let (store, dir, url) = crate::filled_store_at(backend, n, now).await?;
    if let Keys::Shared(k) = case.keys {
        share_keys(&url, k).await?;
    }
    let history = crate::env_usize("BENCH_REPLAY_HISTORY", 0);
    if history > 0 {
        write_history(&url, history).await?;
    }
    let target = kit::unique("bench_replay");
    kit::create_topic(&target, 4, &[]).await?;
    let shutdown = CancellationToken::new();
    let _checkpointer = crate::start_checkpointer(&store).await?;
    // The relay on a pool of its own, as `serve` runs it; the request on the store's, as the
    // web's.
    let relay_store = store.with_own_pool(3).await?;
    let relay = tokio::spawn(replay::run(
        RelayConfig {
            brokers: kit::kafka_brokers(),
            ..RelayConfig::default()
        },
        relay_store,
        Arc::new(RelayStatus::default()),
        shutdown.clone(),
    ));
    let actor = Actor::operator("bench");
    let t = Instant::now();
    let requested_at_ms = redrive_core::clock::now_ms();
    let job = store
        .request_replay(
            &actor,
            &ReplayRequest {
                selection: Selection::Filter(Filter::default()),
                target_topic: Some(target.clone()),
                rate_per_sec: case.rate_per_sec,
                reason: Some("bench".into()),
                options: case.options.clone(),
            },
        )
        .await?;
    let requested_s = t.elapsed().as_secs_f64();
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
    let total_s = t.elapsed().as_secs_f64();
    if let (Some(rate), Some(state)) = (case.rate_per_sec, store.replay_rate_state(&job.id).await?)
    {
        // Bucket time the slots spent beyond what their records need at the rate: lost to
        // slots that started late (a relay behind by more than the tolerance) or went unused.
        let needed_us = state.granted * 1_000_000 / i64::from(rate.max(1));
        eprintln!(
            "throttled replay on {backend:?}: {} records granted in {} slots; the slots span {} ms, \
             the records need {} ms at the rate",
            state.granted,
            state.slots,
            (state.tat_us - state.first_us) / 1_000,
            needed_us / 1_000
        );
    }
    // The relay's first claim of the job (`started_at_ms`): after the whole request, or
    // after its first chunk when the job is published while queueing.
    let first_claim_s = done
        .started_at_ms
        .map(|ms| (ms - requested_at_ms) as f64 / 1000.0);
    let rates = Rates {
        end_to_end: done.published as f64 / total_s,
        relay: done.published as f64 / (total_s - requested_s).max(1e-9),
        broker: None,
        streamed: case.options.publishes_while_queueing() && n > redrive_core::store::CHUNK_ROWS,
        first_claim_s,
    };
    shutdown.cancel();
    relay.await??;
    if done.published != n as i64 {
        bail!(
            "replay published {} of {n} ({} failed, {} skipped; last error: {:?})",
            done.published,
            done.failed,
            done.skipped,
            done.last_error
        );
    }
    eprintln!(
        "replay on {backend:?} to {target} ({case:?}): {:.0} msgs/s request to finished, {:.0} \
         msgs/s the relay; the request (outbox written) took {requested_s:.1} s of {total_s:.1} s; \
         first claim {:.2?} s after the request began",
        rates.end_to_end, rates.relay, rates.first_claim_s
    );
    Ok((rates, target, store, dir))
}

/// Makes the store one that has replayed before (`BENCH_REPLAY_HISTORY`): 20 finished jobs
/// holding `rows` published outbox rows in all (of the stored dead letters, in turn), then
/// `ANALYZE`, so the statistics say the outbox is all published when the measured job
/// queues its pending rows, as a store's do between autovacuum's runs (PostgreSQL) or after
/// an `ANALYZE` (SQLite runs none itself). docs/bench.md "2026-12-06 (8)".
async fn write_history(url: &str, rows: usize) -> Result<()> {
    const JOBS: usize = 20;
    // `g` from 1 to `n`: PostgreSQL's generate_series, SQLite's recursive CTE.
    let series = |n: usize| {
        if url.starts_with("postgres") {
            format!("generate_series(1, {n}) AS s(g)")
        } else {
            format!(
                "(WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < {n}) \
                 SELECT g FROM s)"
            )
        }
    };
    let per_job = rows / JOBS;
    execute_all(
        url,
        &[
            format!(
                "INSERT INTO replay_jobs (id, status, created_by, created_at_ms, finished_at_ms, \
                 total, published, selection) SELECT 'history-' || g, 'finished', 'bench', g, g, \
                 {per_job}, {per_job}, '{{}}' FROM {}",
                series(JOBS)
            ),
            format!(
                "INSERT INTO outbox (job_id, dead_letter_id, idempotency_key, target_topic, \
                 status, next_attempt_at_ms, created_at_ms, published_partition, \
                 published_offset, published_at_ms) SELECT 'history-' || (1 + g % {JOBS}), \
                 (SELECT MIN(id) FROM dead_letters) + g % (SELECT COUNT(*) FROM dead_letters), \
                 'history-' || g, 'bench_history', 'published', 0, 0, 0, g, 0 FROM {}",
                series(rows)
            ),
            "ANALYZE".to_string(),
        ],
    )
    .await
}

/// Rewrites every stored key to `order-{source_offset % k}` (the key's records then follow
/// each other in source-offset order, interleaved with the other keys'). No trigger reads
/// `dead_letters.key`, so nothing else changes.
async fn share_keys(url: &str, k: usize) -> Result<()> {
    let sql = if url.starts_with("postgres") {
        format!("UPDATE dead_letters SET key = convert_to('order-' || (source_offset % {k})::text, 'UTF8')")
    } else {
        format!("UPDATE dead_letters SET key = CAST('order-' || (source_offset % {k}) AS BLOB)")
    };
    execute_all(url, &[sql]).await
}

/// Runs `statements` (no parameters) in order on one connection to `url`, PostgreSQL or
/// SQLite.
async fn execute_all(url: &str, statements: &[String]) -> Result<()> {
    use sqlx::Connection as _;
    if url.starts_with("postgres") {
        let mut c = sqlx::PgConnection::connect(url).await?;
        for sql in statements {
            sqlx::query(sql).execute(&mut c).await?;
        }
    } else {
        let mut c = sqlx::SqliteConnection::connect(url).await?;
        for sql in statements {
            sqlx::query(sql).execute(&mut c).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use rdkafka::message::{Headers, Message, OwnedMessage};

    use super::*;

    /// The header [`TRANSFORM_SCRIPT`] adds (name, value).
    const TRANSFORM_HEADER: (&str, &[u8]) = ("x-bench", b"1");

    fn header<'a>(m: &'a OwnedMessage, name: &str) -> Option<&'a [u8]> {
        let hs = m.headers()?;
        hs.iter().find(|h| h.key == name).and_then(|h| h.value)
    }

    /// Each replay row's case does what its label says, on both databases: all `n` records
    /// published; the keyed case has `k` keys, each published in source-offset order; the transform case's records carry the script's header
    /// and the other cases' do not.
    #[tokio::test]
    async fn replay_cases_publish_what_their_rows_say() {
        let n = 60;
        let k = 7;
        for backend in Backend::ALL {
            let cases = [
                Case::plain(n),
                Case::unordered(n),
                Case::keyed(n, k),
                Case::transform(n),
            ];
            for case in cases {
                let (rates, target, store, _dir) = run(backend, &case).await.expect("replay");
                assert!(rates.end_to_end > 0.0, "{backend:?} {case:?}");
                let got = kit::consume(&target, n)
                    .await
                    .expect("the replayed records");
                let keys: BTreeSet<Vec<u8>> = got
                    .iter()
                    .map(|m| m.key().expect("a key").to_vec())
                    .collect();
                let want_keys = match case.keys {
                    Keys::Distinct => n,
                    Keys::Shared(k) => k,
                };
                assert_eq!(keys.len(), want_keys, "{backend:?} {case:?}");
                let transformed = case.options.transform.is_some();
                for m in &got {
                    let h = header(m, TRANSFORM_HEADER.0);
                    assert_eq!(
                        h,
                        transformed.then_some(TRANSFORM_HEADER.1),
                        "{backend:?} {case:?}"
                    );
                }
                if let Keys::Shared(_) = case.keys {
                    let mut per_key: BTreeMap<Vec<u8>, Vec<i64>> = BTreeMap::new();
                    for m in &got {
                        let id = header(m, "redrive-dead-letter-id")
                            .and_then(|v| std::str::from_utf8(v).ok())
                            .and_then(|v| v.parse().ok())
                            .expect("redrive-dead-letter-id");
                        let stored = store.get(id).await.expect("get").expect("stored");
                        let offset = stored.normalized.source_offset.expect("source offset");
                        assert_eq!(
                            stored.record.key.as_deref(),
                            m.key(),
                            "{backend:?}: the key published is the stored one"
                        );
                        per_key
                            .entry(m.key().expect("key").to_vec())
                            .or_default()
                            .push(offset);
                    }
                    for (key, offsets) in per_key {
                        assert!(
                            offsets.windows(2).all(|w| w[0] < w[1]),
                            "{backend:?}: key {key:?} out of source order: {offsets:?}"
                        );
                    }
                }
            }
        }
    }
}
