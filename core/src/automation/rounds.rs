//! The leader's scheduler of automatic replays (`docs/automation.md`, "Scheduled
//! reprocessing", "Health gates", "Rule self-pause", "One scheduler").
//!
//! Once a second, on the leader only ([`crate::leader`]), for every enabled transient rule of
//! the active rule set version whose round is due (`rule_states.last_round_at_ms` +
//! `every`, so a failover keeps the cadence):
//! 1. **Self-pause**: the rule's replays are counted ([`crate::store::Store::refail_tally`]);
//!    when more than `pause_when_refailed_over` of at least `pause_min_replayed` published
//!    records came back already, the rule pauses itself (audit row; the `rule_paused` alert
//!    reads it).
//! 2. A paused rule runs no round (outcome `paused`); a person resumes it.
//! 3. Nothing due: no gate check, no job (outcome `nothing_due`).
//! 4. **Health gate**: every check the rule's gate names must pass — an HTTP GET answering 2xx
//!    within its timeout, the consumer group's lag on the target topic(s) at most its limit,
//!    no new dead letter in the due records' error groups for `quiet_for`. A failed check
//!    skips the round with outcome `gate_closed` and a message naming the check and its
//!    answer.
//! 5. The **round**: [`crate::store::Store::run_round`], one transaction.
//!
//! HTTP and Kafka are reached through a [`GateProbe`] the server provides, so this module
//! stays free of an HTTP client; the data flows one way (store → scheduler → store/outbox →
//! relay → Kafka).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::rules::{HttpGate, Schedule};
use super::{RuleSet, Tier, TierRule};
use crate::actions::LagGate;
use crate::store::{DueSummary, RefailTally, Store};

/// How often the scheduler looks at its rules (the finest cadence a rule can have: `every`
/// is at least 1 s).
pub const TICK: Duration = Duration::from_secs(1);

/// A boxed future a [`GateProbe`] answers with.
pub type ProbeFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// The outside world a health gate asks (provided by the server).
pub trait GateProbe: Send + Sync {
    /// `GET gate.url`: `Ok(status line)` for a 2xx answer within `gate.timeout_ms`;
    /// `Err(what happened)` otherwise (the status it answered, a timeout, a refused
    /// connection).
    fn http<'a>(&'a self, gate: &'a HttpGate) -> ProbeFuture<'a, String>;
    /// Consumer group `gate.group`'s lag on `topics`, records (Σ high watermark − committed
    /// offset). Errors: what could not be read.
    fn lag<'a>(&'a self, gate: &'a LagGate, topics: &'a [String]) -> ProbeFuture<'a, i64>;
}

/// What the scheduler did per rule since start, for metrics (`docs/metrics.md`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RuleRounds {
    /// Rounds by outcome (`ran`, `nothing_due`, `gate_closed`, `paused`, `error`).
    pub rounds: BTreeMap<&'static str, u64>,
    /// The last gate check: `Some(true)` open, `Some(false)` closed, `None` not checked yet.
    pub gate_open: Option<bool>,
    /// Dead letters queued by its rounds.
    pub replayed: u64,
    /// Duration of the last gate check, ms.
    pub last_gate_ms: Option<u64>,
    /// Paused (by itself or a person) at the last look.
    pub paused: bool,
}

/// Shared between the scheduler and the server's metrics.
#[derive(Debug, Default)]
pub struct RoundsStatus {
    rules: Mutex<BTreeMap<String, RuleRounds>>,
}

impl RoundsStatus {
    /// A copy of the per-rule figures.
    pub fn snapshot(&self) -> BTreeMap<String, RuleRounds> {
        self.rules.lock().map(|g| g.clone()).unwrap_or_default()
    }

    fn with(&self, rule: &str, f: impl FnOnce(&mut RuleRounds)) {
        if let Ok(mut g) = self.rules.lock() {
            f(g.entry(rule.to_string()).or_default());
        }
    }

    fn count(&self, rule: &str, outcome: &'static str) {
        self.with(rule, |r| *r.rounds.entry(outcome).or_default() += 1);
    }
}

use crate::clock::now_ms;

/// Whether a rule's round is due at `now_ms`: never ran, or `every_ms` since the last.
pub fn round_due(last_round_at_ms: Option<i64>, every_ms: u64, now_ms: i64) -> bool {
    last_round_at_ms
        .is_none_or(|l| now_ms.saturating_sub(l) >= every_ms.min(i64::MAX as u64) as i64)
}

/// The self-pause verdict: `Some(reason)` when at least `pause_min_replayed` (and at least
/// one) records were published and more than `pause_when_refailed_over` of them came back
/// already.
///
/// The share is of everything published, not only of the records judged so far: a record is
/// judged the moment it comes back but only after its outcome window (1 h by default) when it
/// does not, so early on every judged record is one that came back, and a rule whose replays
/// mostly succeeded read as "13 of 13 judged came back (100 %)" when 13 of 71 had (the demo's
/// rule, replaying between scheduled outages). What came back so far over what was published
/// is a lower bound of the share that will have come back once all are judged: a pause on it
/// is never premature, and once every record is judged it is the share itself.
pub fn pause_verdict(t: RefailTally, s: &Schedule) -> Option<String> {
    if t.replayed <= 0 || t.replayed < i64::from(s.pause_min_replayed) {
        return None;
    }
    let ratio = t.refailed as f64 / t.replayed as f64;
    let waiting = (t.replayed - t.judged).max(0);
    (ratio > s.pause_when_refailed_over).then(|| {
        format!(
            "{} of {} replays came back as dead letters ({:.0} %, over \
             pause_when_refailed_over = {}{}); the rule paused itself",
            t.refailed,
            t.replayed,
            ratio * 100.0,
            s.pause_when_refailed_over,
            if waiting > 0 {
                format!("; {waiting} still within their outcome window")
            } else {
                String::new()
            }
        )
    })
}

/// The rules the scheduler runs: enabled, transient, with a schedule.
pub fn scheduled_rules(set: &RuleSet) -> impl Iterator<Item = &TierRule> {
    set.rules
        .iter()
        .filter(|r| !r.disabled && r.tier == Tier::Transient && r.schedule.is_some())
}

/// Runs until `shutdown` (module docs).
pub async fn run(
    store: Store,
    is_leader: impl Fn() -> bool + Send + 'static,
    probe: Arc<dyn GateProbe>,
    status: Arc<RoundsStatus>,
    shutdown: CancellationToken,
) {
    let mut compiled: Option<(i64, RuleSet)> = None;
    loop {
        if is_leader() {
            if let Err(e) = pass(&store, &mut compiled, probe.as_ref(), &status).await {
                tracing::warn!(error = %e, "the scheduler of automatic replays cannot run yet");
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(TICK) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}

/// One look at every scheduled rule of the active version.
async fn pass(
    store: &Store,
    compiled: &mut Option<(i64, RuleSet)>,
    probe: &dyn GateProbe,
    status: &RoundsStatus,
) -> Result<(), String> {
    let Some(active) = store.active_rule_set().await.map_err(|e| e.to_string())? else {
        return Ok(());
    };
    if compiled.as_ref().map(|c| c.0) != Some(active.version) {
        let set = active
            .compile()
            .map_err(|e| format!("rule set version {} does not compile: {e}", active.version))?;
        *compiled = Some((active.version, set));
    }
    let (version, set) = compiled.as_ref().expect("compiled above");
    for rule in scheduled_rules(set) {
        if let Err(e) = tick_rule(store, rule, *version, probe, status).await {
            tracing::warn!(rule = %rule.name, error = %e, "scheduled round failed");
            status.count(&rule.name, "error");
            let _ = store
                .record_skipped_round(&rule.name, "error", &e, now_ms())
                .await;
        }
    }
    Ok(())
}

/// The module docs' steps for one rule.
async fn tick_rule(
    store: &Store,
    rule: &TierRule,
    version: i64,
    probe: &dyn GateProbe,
    status: &RoundsStatus,
) -> Result<(), String> {
    let schedule = rule.schedule.as_ref().expect("scheduled_rules keeps these");
    let now = now_ms();
    let state = store
        .round_state(&rule.name)
        .await
        .map_err(|e| e.to_string())?;
    status.with(&rule.name, |r| r.paused = state.paused);
    if !round_due(state.last_round_at_ms, schedule.every_ms, now) {
        return Ok(());
    }
    if state.paused {
        if state.last_round_outcome.as_deref() != Some("paused") {
            status.count(&rule.name, "paused");
            store
                .record_skipped_round(&rule.name, "paused", "the rule is paused", now)
                .await
                .map_err(|e| e.to_string())?;
        }
        return Ok(());
    }
    let tally = store
        .refail_tally(
            &rule.name,
            state.paused_at_ms.unwrap_or(0),
            now,
            crate::outcome::window_ms(),
        )
        .await
        .map_err(|e| e.to_string())?;
    if let Some(reason) = pause_verdict(tally, schedule) {
        if store
            .self_pause_rule(&rule.name, &reason, tally, now)
            .await
            .map_err(|e| e.to_string())?
        {
            tracing::warn!(rule = %rule.name, %reason, "rule paused itself");
        }
        status.with(&rule.name, |r| r.paused = true);
        return Ok(());
    }
    let due = store
        .due_summary(rule, now)
        .await
        .map_err(|e| e.to_string())?;
    if due.due == 0 {
        // No round (and no gate check): a record sorted in the meantime waits for the next
        // one, so that nothing is ever replayed past a gate that was not asked.
        status.count(&rule.name, "nothing_due");
        return store
            .record_skipped_round(&rule.name, "nothing_due", "nothing was due", now)
            .await
            .map_err(|e| e.to_string());
    }
    if !rule.gate.is_open() {
        let started = std::time::Instant::now();
        let verdict = check_gate(store, rule, &due, probe, now).await;
        let ms = started.elapsed().as_millis() as u64;
        status.with(&rule.name, |r| {
            r.gate_open = Some(verdict.is_ok());
            r.last_gate_ms = Some(ms);
        });
        if let Err(message) = verdict {
            tracing::info!(rule = %rule.name, %message, "health gate closed: round skipped");
            status.count(&rule.name, "gate_closed");
            return store
                .record_skipped_round(&rule.name, "gate_closed", &message, now)
                .await
                .map_err(|e| e.to_string());
        }
    }
    let result = store
        .run_round(rule, version, now)
        .await
        .map_err(|e| e.to_string())?;
    if result.job.is_some() {
        status.count(&rule.name, "ran");
        status.with(&rule.name, |r| r.replayed += result.queued.len() as u64);
    } else {
        status.count(&rule.name, "nothing_due");
    }
    Ok(())
}

/// The rule's health gate for the records `due` (module docs, step 4). `Err`: the message
/// of the first check that failed.
pub async fn check_gate(
    store: &Store,
    rule: &TierRule,
    due: &DueSummary,
    probe: &dyn GateProbe,
    now_ms: i64,
) -> Result<(), String> {
    if let Some(h) = &rule.gate.http {
        probe
            .http(h)
            .await
            .map_err(|e| format!("http: GET {} {e}", h.url))?;
    }
    if let Some(g) = &rule.gate.lag {
        let topics: Vec<String> = match rule.schedule.as_ref().and_then(|s| s.target_topic.clone())
        {
            Some(t) => vec![t],
            None => due.source_topics.clone(),
        };
        if !topics.is_empty() {
            let lag = probe.lag(g, &topics).await.map_err(|e| {
                format!(
                    "lag: cannot read the lag of consumer group `{}`: {e}",
                    g.group
                )
            })?;
            if lag > g.max_lag.min(i64::MAX as u64) as i64 {
                return Err(format!(
                    "lag: consumer group `{}` is {lag} records behind on {} (max_lag {})",
                    g.group,
                    topics.join(", "),
                    g.max_lag
                ));
            }
        }
    }
    if let Some(q) = rule.gate.quiet_for_ms {
        let newest = store
            .newest_in_groups(&due.fingerprints)
            .await
            .map_err(|e| format!("quiet_for: {e}"))?;
        if let Some(at) = newest {
            let since = now_ms.saturating_sub(at);
            if since < q.min(i64::MAX as u64) as i64 {
                return Err(format!(
                    "quiet_for: the due records' error groups had a new dead letter {} s ago \
                     (quiet_for {} s)",
                    since / 1000,
                    q / 1000
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule() -> Schedule {
        let set = RuleSet::parse_toml(
            r#"
[[rule]]
name = "t"
tier = "transient"
match.error_classes = ["TimeoutError"]
schedule = { every = "1s", pause_when_refailed_over = 0.5, pause_min_replayed = 4 }
"#,
        )
        .unwrap();
        set.rules[0].schedule.clone().unwrap()
    }

    #[test]
    fn a_round_is_due_after_its_cadence() {
        assert!(round_due(None, 1_000, 5));
        assert!(!round_due(Some(1_000), 1_000, 1_999));
        assert!(round_due(Some(1_000), 1_000, 2_000));
    }

    #[test]
    fn a_rule_pauses_when_most_of_what_it_replayed_came_back() {
        let s = schedule();
        let t = |replayed, refailed| RefailTally {
            replayed,
            judged: replayed,
            refailed,
        };
        assert_eq!(
            pause_verdict(t(3, 3), &s),
            None,
            "fewer than pause_min_replayed"
        );
        assert_eq!(pause_verdict(t(4, 2), &s), None, "exactly half is not over");
        let why = pause_verdict(t(4, 3), &s).unwrap();
        assert!(why.contains("3 of 4 replays came back"), "{why}");
        assert!(!why.contains("outcome window"), "{why}");
    }

    /// Records that came back are judged at once, the others only after their outcome
    /// window: the share is of what was published, so a rule whose replays mostly succeeded
    /// is not paused by its first few failures.
    #[test]
    fn records_not_yet_judged_count_against_a_pause() {
        let s = schedule();
        let early = RefailTally {
            replayed: 71,
            judged: 13,
            refailed: 13,
        };
        assert_eq!(pause_verdict(early, &s), None, "13 of 71 is 18 %");
        let failing = RefailTally {
            replayed: 10,
            judged: 6,
            refailed: 6,
        };
        let why = pause_verdict(failing, &s).unwrap();
        assert!(
            why.starts_with("6 of 10 replays came back as dead letters (60 %"),
            "{why}"
        );
        assert!(why.contains("4 still within their outcome window"), "{why}");
    }
}
