//! The agent: one consumer per stage — stage 0 reads the source topic, stage `n` the retry
//! topic `<prefix>.n` — each handling up to `max_in_flight` records at once.
//!
//! Per record: wait out its backoff (`not_before_ms`), parse it (poison goes to the DLQ at once,
//! marked non-retryable), drop it if its `message_id` was processed already or its replay
//! idempotency key already reached an outcome, call the LLM through the circuit breaker, and
//! then either remember the success in the ledger, send the record to the next retry topic, or
//! dead-letter it. Only when that outcome is durable (ledger committed, or the broker
//! acknowledged the send) is the record marked done; see [`OffsetTracker`] for when its offset
//! is committed.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{SecondsFormat, Utc};
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;

use crate::control::bump;
use crate::headers::{self as h, HeaderList};
use crate::kafka::{self, Incoming, Outgoing};
use crate::ledger::{Position, Processed};
use crate::llm::LlmError;
use crate::request::{self, PoisonError};
use crate::{DemoError, Shared};

/// How long a stopping stage lets records in hand finish (an LLM call, a send) before it
/// abandons them; abandoned records are not committed and come again on the next start.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// One consumer of the pipeline.
#[derive(Debug, Clone)]
pub(crate) struct Stage {
    /// 0 = the source topic; `n` = retry topic `n`.
    pub index: u32,
    pub topic: String,
    pub group: String,
}

/// Which offsets of a stage may be committed. Records are handled concurrently and finish out
/// of order, so a partition's commit position is the lowest offset still in hand (or one past
/// the highest done when none is): every record below it has a durable outcome. Committing
/// more could lose a record on a crash; committing less only replays records the ledger then
/// recognises as duplicates.
#[derive(Debug, Default)]
pub(crate) struct OffsetTracker {
    parts: HashMap<i32, PartitionOffsets>,
}

#[derive(Debug, Default)]
struct PartitionOffsets {
    in_hand: BTreeSet<i64>,
    highest_done: Option<i64>,
    committable: Option<i64>,
}

impl OffsetTracker {
    /// A record was taken in hand.
    pub fn begin(&mut self, partition: i32, offset: i64) {
        self.parts
            .entry(partition)
            .or_default()
            .in_hand
            .insert(offset);
    }

    /// A record's outcome is durable. Returns the partition's new commit position if it moved.
    pub fn finish(&mut self, partition: i32, offset: i64) -> Option<i64> {
        let p = self.parts.entry(partition).or_default();
        p.in_hand.remove(&offset);
        p.highest_done = p.highest_done.max(Some(offset));
        let pos = match p.in_hand.first() {
            Some(&lowest) => lowest,
            None => p.highest_done? + 1,
        };
        if Some(pos) > p.committable {
            p.committable = Some(pos);
            Some(pos)
        } else {
            None
        }
    }

    /// Every partition's commit position.
    pub fn positions(&self) -> Vec<(i32, i64)> {
        self.parts
            .iter()
            .filter_map(|(&p, o)| o.committable.map(|c| (p, c)))
            .collect()
    }
}

fn commit(
    consumer: &rdkafka::consumer::StreamConsumer,
    topic: &str,
    positions: &[(i32, i64)],
    mode: CommitMode,
) {
    let mut tpl = TopicPartitionList::new();
    for &(p, o) in positions {
        if let Err(e) = tpl.add_partition_offset(topic, p, Offset::Offset(o)) {
            tracing::warn!(topic, partition = p, error = %e, "demo: bad commit position");
        }
    }
    if tpl.count() > 0 {
        if let Err(e) = consumer.commit(&tpl, mode) {
            // Not fatal: the records are redelivered after a restart and dropped as duplicates.
            tracing::warn!(topic, error = %e, "demo: commit failed");
        }
    }
}

/// Runs one stage until the demo stops.
pub(crate) async fn run_stage(stage: Stage, sh: Arc<Shared>) -> Result<(), DemoError> {
    let consumer = kafka::consumer(&sh.config, &stage.group)?;
    kafka::subscribe(&consumer, &stage.topic)?;
    tracing::info!(topic = %stage.topic, group = %stage.group, "demo: stage consuming");
    let slots = Arc::new(Semaphore::new(sh.config.max_in_flight));
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(i32, i64)>();
    let mut tracker = OffsetTracker::default();
    let mut tasks = JoinSet::new();
    let stage = Arc::new(stage);

    loop {
        tokio::select! {
            biased;
            _ = sh.stop.cancelled() => break,
            Some((p, o)) = done_rx.recv() => {
                if let Some(pos) = tracker.finish(p, o) {
                    commit(&consumer, &stage.topic, &[(p, pos)], CommitMode::Async);
                }
            }
            // Only fetch when a slot is free: bounded in-flight work, the rest waits in Kafka.
            m = consumer.recv(), if slots.available_permits() > 0 => {
                let m = match m {
                    Ok(m) => m,
                    Err(e) => {
                        tracing::warn!(topic = %stage.topic, error = %e, "demo: consume error");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    }
                };
                let rec = Incoming::from_message(&m);
                drop(m);
                let Ok(permit) = slots.clone().try_acquire_owned() else { continue };
                tracker.begin(rec.partition, rec.offset);
                let (sh, stage, done_tx) = (sh.clone(), stage.clone(), done_tx.clone());
                tasks.spawn(async move {
                    let pos = (rec.partition, rec.offset);
                    if handle(&stage, rec, &sh).await.is_some() {
                        let _ = done_tx.send(pos);
                    }
                    drop(permit);
                });
            }
            Some(joined) = tasks.join_next(), if !tasks.is_empty() => {
                if let Err(e) = joined {
                    if e.is_panic() {
                        tracing::error!(topic = %stage.topic, error = %e, "demo: record handler panicked");
                    }
                }
            }
        }
    }

    // Stopping: let records in hand finish for a while, committing as they do.
    let grace = tokio::time::sleep(SHUTDOWN_GRACE);
    tokio::pin!(grace);
    while !tasks.is_empty() {
        tokio::select! {
            Some((p, o)) = done_rx.recv() => { tracker.finish(p, o); }
            _ = tasks.join_next() => {}
            _ = &mut grace => { tasks.abort_all(); break; }
        }
    }
    while let Ok((p, o)) = done_rx.try_recv() {
        tracker.finish(p, o);
    }
    commit(
        &consumer,
        &stage.topic,
        &tracker.positions(),
        CommitMode::Sync,
    );
    tracing::info!(topic = %stage.topic, "demo: stage stopped");
    Ok(())
}

/// Why an attempt failed.
#[derive(Debug, Clone)]
struct Failure {
    class: &'static str,
    message: String,
    retryable: bool,
}

impl From<&PoisonError> for Failure {
    fn from(e: &PoisonError) -> Failure {
        Failure {
            class: e.class(),
            message: e.to_string(),
            retryable: false,
        }
    }
}

impl From<&LlmError> for Failure {
    fn from(e: &LlmError) -> Failure {
        Failure {
            class: e.class(),
            message: e.to_string(),
            retryable: true,
        }
    }
}

/// What one record is, as the handler sees it.
struct Context<'a> {
    stage: &'a Stage,
    rec: &'a Incoming,
    here: Position,
    /// Where the request was first consumed (the source topic).
    origin: Position,
    /// Retries already done.
    retry_count: u32,
    /// Headers to carry on: on the source topic, all but the demo's own (a fresh start).
    carried: HeaderList,
    message_id: Option<String>,
    idempotency_key: Option<String>,
}

fn now_rfc3339() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Runs an infrastructure step (ledger) until it succeeds; `None` if the demo stops first.
async fn persist<T, F, Fut>(sh: &Shared, what: &str, mut step: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, sqlx::Error>>,
{
    loop {
        match step().await {
            Ok(v) => return Some(v),
            Err(e) => {
                tracing::warn!(error = %e, "demo: ledger {what} failed; retrying");
                tokio::select! {
                    _ = sh.stop.cancelled() => return None,
                    _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                }
            }
        }
    }
}

/// Handles one record to a durable outcome. `None` = abandoned because the demo is stopping
/// (the offset stays uncommitted).
async fn handle(stage: &Stage, rec: Incoming, sh: &Shared) -> Option<()> {
    let here = Position {
        topic: rec.topic.clone(),
        partition: rec.partition,
        offset: rec.offset,
    };
    let (retry_count, carried, origin) = if stage.index == 0 {
        (0, h::without(&rec.headers, h::MANAGED), here.clone())
    } else {
        let retry_count = h::last_str(&rec.headers, h::RETRY_COUNT)
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(stage.index);
        let num = |name| h::last_str(&rec.headers, name).and_then(|s| s.trim().parse().ok());
        let origin = match (
            h::last_str(&rec.headers, h::ORIGINAL_TOPIC),
            num(h::ORIGINAL_PARTITION),
            num(h::ORIGINAL_OFFSET),
        ) {
            (Some(t), Some(p), Some(o)) => Position {
                topic: t.to_string(),
                partition: p as i32,
                offset: o,
            },
            _ => here.clone(),
        };
        (retry_count, rec.headers.clone(), origin)
    };

    if stage.index > 0 {
        let not_before = h::last_str(&rec.headers, h::NOT_BEFORE_MS)
            .and_then(|s| s.trim().parse::<i64>().ok())
            .unwrap_or(0);
        let wait_ms = not_before - Utc::now().timestamp_millis();
        if wait_ms > 0 {
            tokio::select! {
                _ = sh.stop.cancelled() => return None,
                _ = tokio::time::sleep(Duration::from_millis(wait_ms as u64)) => {}
            }
        }
    }

    let parsed = request::parse(rec.value.as_deref());
    let idempotency_key = h::last_str(&carried, h::REDRIVE_IDEMPOTENCY_KEY).map(str::to_string);
    let message_id = match &parsed {
        Ok(r) => Some(r.message_id.to_string()),
        Err(_) => request::message_id_of(rec.value.as_deref(), rec.key.as_deref()),
    };
    let cx = Context {
        stage,
        rec: &rec,
        here,
        origin,
        retry_count,
        carried,
        message_id,
        idempotency_key,
    };

    // Copies of one request (a replay published twice, a redelivery) are handled one after
    // the other, so the second sees the first's outcome in the ledger.
    let lock_key = cx.message_id.clone().or_else(|| cx.idempotency_key.clone());
    let _turn = match lock_key {
        Some(k) => Some(sh.locks.lock(k).await),
        None => None,
    };

    if let Some(key) = &cx.idempotency_key {
        if persist(sh, "read", || sh.ledger.is_key_finished(key)).await? {
            return drop_duplicate(&cx, sh).await;
        }
    }
    let req = match parsed {
        Ok(req) => req,
        Err(poison) => return dead_letter(&cx, &Failure::from(&poison), sh).await,
    };
    let id = req.message_id.to_string();
    if persist(sh, "read", || sh.ledger.is_processed(&id)).await? {
        return drop_duplicate(&cx, sh).await;
    }

    match call_llm(&req.question, sh).await {
        Ok(answer) => {
            let replay_id = h::last_str(&cx.carried, h::REDRIVE_REPLAY_ID);
            let p = Processed {
                message_id: &id,
                answer: &answer,
                attempts: cx.retry_count + 1,
                at: &cx.here,
                replay_id,
                idempotency_key: cx.idempotency_key.as_deref(),
            };
            let fresh = persist(sh, "write", || sh.ledger.record_processed(&p)).await?;
            if fresh {
                bump(&sh.control.stats().processed);
                tracing::debug!(message_id = %id, attempts = cx.retry_count + 1, "demo: processed");
            } else {
                bump(&sh.control.stats().duplicates);
            }
            Some(())
        }
        Err(e) if cx.retry_count < sh.config.max_retries => {
            schedule_retry(&cx, &Failure::from(&e), sh).await
        }
        Err(e) => dead_letter(&cx, &Failure::from(&e), sh).await,
    }
}

/// Calls the LLM through the circuit breaker.
async fn call_llm(question: &str, sh: &Shared) -> Result<String, LlmError> {
    let breaker = sh.control.breaker();
    let permit = breaker.acquire(Instant::now()).map_err(|r| {
        tracing::debug!(next_probe_in_ms = r.retry_in_ms, "demo: breaker open");
        LlmError::CircuitOpen
    })?;
    bump(&sh.control.stats().llm_calls);
    let outage = sh.control.outage_active(Instant::now());
    let result = sh.llm.ask(question, outage, &sh.rng).await;
    breaker.record(permit, result.is_ok(), Instant::now());
    if result.is_err() {
        bump(&sh.control.stats().llm_failures);
    }
    result
}

async fn drop_duplicate(cx: &Context<'_>, sh: &Shared) -> Option<()> {
    tracing::info!(
        message_id = cx.message_id.as_deref().unwrap_or("-"),
        idempotency_key = cx.idempotency_key.as_deref().unwrap_or("-"),
        topic = %cx.here.topic, offset = cx.here.offset,
        "demo: duplicate delivery dropped"
    );
    persist(sh, "write", || {
        sh.ledger.record_duplicate(
            cx.message_id.as_deref(),
            cx.idempotency_key.as_deref(),
            &cx.here,
        )
    })
    .await?;
    bump(&sh.control.stats().duplicates);
    Some(())
}

/// Sends the record to the next retry topic with its backoff in `not_before_ms`.
async fn schedule_retry(cx: &Context<'_>, f: &Failure, sh: &Shared) -> Option<()> {
    let n = cx.retry_count + 1;
    let delay_ms = sh.backoff.delay_ms(n, &sh.rng);
    let not_before = Utc::now().timestamp_millis() + delay_ms as i64;
    let mut headers = h::without(
        &cx.carried,
        &[
            h::ORIGINAL_TOPIC,
            h::ORIGINAL_PARTITION,
            h::ORIGINAL_OFFSET,
            h::MESSAGE_ID,
            h::RETRY_COUNT,
            h::NOT_BEFORE_MS,
            h::ERROR,
            h::ERROR_CLASS,
        ],
    );
    h::push(&mut headers, h::ATTEMPT_FAILED_AT, now_rfc3339());
    h::push(
        &mut headers,
        h::ATTEMPT_ERROR,
        format!("{}: {}", f.class, f.message),
    );
    h::push(&mut headers, h::RETRY_DELAY_MS, delay_ms.to_string());
    h::push(&mut headers, h::ORIGINAL_TOPIC, cx.origin.topic.clone());
    h::push(
        &mut headers,
        h::ORIGINAL_PARTITION,
        cx.origin.partition.to_string(),
    );
    h::push(
        &mut headers,
        h::ORIGINAL_OFFSET,
        cx.origin.offset.to_string(),
    );
    if let Some(id) = &cx.message_id {
        h::push(&mut headers, h::MESSAGE_ID, id.clone());
    }
    h::push(&mut headers, h::RETRY_COUNT, n.to_string());
    h::push(&mut headers, h::NOT_BEFORE_MS, not_before.to_string());
    h::push(&mut headers, h::ERROR, f.message.clone());
    h::push(&mut headers, h::ERROR_CLASS, f.class);
    let topic = sh.config.retry_topic(n);
    let out = Outgoing {
        topic: &topic,
        key: cx.rec.key.as_deref(),
        value: cx.rec.value.as_deref(),
        headers: &headers,
    };
    kafka::send_until_acked(&sh.producer, &out, &sh.stop).await?;
    bump(&sh.control.stats().retried);
    tracing::debug!(
        message_id = cx.message_id.as_deref().unwrap_or("-"),
        retry = n,
        delay_ms,
        error_class = f.class,
        "demo: retry scheduled"
    );
    Some(())
}

/// The traceback header: every attempt's failure with its time and the backoff that followed,
/// then where the last one happened and its error.
fn traceback(cx: &Context<'_>, f: &Failure, failed_at: &str, sh: &Shared) -> String {
    let times = h::all_str(&cx.carried, h::ATTEMPT_FAILED_AT);
    let errors = h::all_str(&cx.carried, h::ATTEMPT_ERROR);
    let delays = h::all_str(&cx.carried, h::RETRY_DELAY_MS);
    let mut out = String::from("Traceback (most recent attempt last):\n");
    for (i, (t, e)) in times.iter().zip(errors.iter()).enumerate() {
        out.push_str(&format!("  attempt {} failed at {t}: {e}\n", i + 1));
        if let Some(d) = delays.get(i) {
            out.push_str(&format!("    retry {} after a {d} ms backoff\n", i + 1));
        }
    }
    let func = if f.retryable {
        "redrive_demo::agent::call_llm"
    } else {
        "redrive_demo::request::parse"
    };
    out.push_str(&format!(
        "  attempt {} failed at {failed_at}\n  in {func} (consumer group {}, topic {}, partition {}, offset {})\n{}: {}",
        cx.retry_count + 1,
        sh.config.group_id,
        cx.here.topic,
        cx.here.partition,
        cx.here.offset,
        f.class,
        f.message
    ));
    out
}

/// Sends the record, key and value unchanged, to the DLQ with the seed convention's headers.
async fn dead_letter(cx: &Context<'_>, f: &Failure, sh: &Shared) -> Option<()> {
    let failed_at = now_rfc3339();
    let mut headers = HeaderList::new();
    h::push(&mut headers, h::ORIGINAL_TOPIC, cx.origin.topic.clone());
    h::push(
        &mut headers,
        h::ORIGINAL_PARTITION,
        cx.origin.partition.to_string(),
    );
    h::push(
        &mut headers,
        h::ORIGINAL_OFFSET,
        cx.origin.offset.to_string(),
    );
    h::push(&mut headers, h::RETRY_COUNT, cx.retry_count.to_string());
    h::push(&mut headers, h::ERROR, f.message.clone());
    if let Some(id) = &cx.message_id {
        h::push(&mut headers, h::MESSAGE_ID, id.clone());
    }
    h::push(&mut headers, h::CONSUMER_GROUP, sh.config.group_id.clone());
    h::push(&mut headers, h::ERROR_CLASS, f.class);
    h::push(&mut headers, h::TRACEBACK, traceback(cx, f, &failed_at, sh));
    h::push(&mut headers, h::FAILED_AT, failed_at.clone());
    h::push(&mut headers, h::RETRYABLE, f.retryable.to_string());
    h::push(
        &mut headers,
        h::DLQ_REASON,
        if f.retryable {
            "max_retries_exceeded"
        } else {
            "non_retryable"
        },
    );
    // Then the attempt history and whatever else the record carried (application headers,
    // redrive's replay headers), in order.
    headers.extend(h::without(
        &cx.carried,
        &[
            h::ORIGINAL_TOPIC,
            h::ORIGINAL_PARTITION,
            h::ORIGINAL_OFFSET,
            h::RETRY_COUNT,
            h::ERROR,
            h::MESSAGE_ID,
            h::CONSUMER_GROUP,
            h::ERROR_CLASS,
            h::TRACEBACK,
            h::FAILED_AT,
            h::RETRYABLE,
            h::DLQ_REASON,
            h::NOT_BEFORE_MS,
        ],
    ));
    h::push(&mut headers, h::ATTEMPT_FAILED_AT, failed_at);
    h::push(
        &mut headers,
        h::ATTEMPT_ERROR,
        format!("{}: {}", f.class, f.message),
    );
    let out = Outgoing {
        topic: &sh.config.dlq_topic,
        key: cx.rec.key.as_deref(),
        value: cx.rec.value.as_deref(),
        headers: &headers,
    };
    kafka::send_until_acked(&sh.producer, &out, &sh.stop).await?;
    if let Some(key) = &cx.idempotency_key {
        persist(sh, "write", || {
            sh.ledger
                .record_key_dead_lettered(key, cx.message_id.as_deref())
        })
        .await?;
    }
    let stats = sh.control.stats();
    bump(if f.retryable {
        &stats.dead_lettered_transient
    } else {
        &stats.dead_lettered_poison
    });
    tracing::info!(
        message_id = cx.message_id.as_deref().unwrap_or("-"),
        error_class = f.class,
        retry_count = cx.retry_count,
        stage = cx.stage.index,
        "demo: dead-lettered"
    );
    Some(())
}

/// Per-key turns: the second copy of a request waits until the first is handled.
#[derive(Debug, Default)]
pub(crate) struct KeyLocks {
    map: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// Holds a key's turn; dropping it passes the turn on.
pub(crate) struct KeyTurn<'a> {
    locks: &'a KeyLocks,
    key: String,
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl KeyLocks {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<tokio::sync::Mutex<()>>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for `key`'s turn.
    pub async fn lock(&self, key: String) -> KeyTurn<'_> {
        let m = self.map().entry(key.clone()).or_default().clone();
        let guard = m.lock_owned().await;
        KeyTurn {
            locks: self,
            key,
            guard: Some(guard),
        }
    }
}

impl Drop for KeyTurn<'_> {
    fn drop(&mut self) {
        self.guard.take();
        let mut map = self.locks.map();
        // Only the map's own handle left: nobody holds or awaits this key; forget it.
        if map
            .get(&self.key)
            .is_some_and(|m| Arc::strong_count(m) == 1)
        {
            map.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_only_below_the_lowest_record_in_hand() {
        let mut t = OffsetTracker::default();
        for o in 10..14 {
            t.begin(0, o);
        }
        assert_eq!(t.finish(0, 11), Some(10), "10 is still in hand");
        assert_eq!(t.finish(0, 13), None);
        assert_eq!(t.finish(0, 10), Some(12), "12 is still in hand");
        assert_eq!(t.finish(0, 12), Some(14));
        t.begin(1, 5);
        assert_eq!(t.finish(1, 5), Some(6));
        let mut p = t.positions();
        p.sort();
        assert_eq!(p, [(0, 14), (1, 6)]);
        // A redelivered older record never moves the position back.
        t.begin(0, 3);
        assert_eq!(t.finish(0, 3), None);
    }

    #[tokio::test]
    async fn key_turns_serialise_copies_and_clean_up() {
        let locks = Arc::new(KeyLocks::default());
        let first = locks.lock("m".into()).await;
        let l2 = locks.clone();
        let second = tokio::spawn(async move {
            let _t = l2.lock("m".into()).await;
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!second.is_finished(), "waits for the first copy");
        drop(first);
        second.await.unwrap();
        assert!(locks.map().is_empty());
    }
}
