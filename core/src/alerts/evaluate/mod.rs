//! The alert evaluator: every `alerts.interval_ms`, on the leader only, read each rule's input
//! (see `store::alert_inputs` for what each costs), step every rule × scope through
//! [`super::state::step`], and write the outcome in one store transaction
//! ([`Store::apply_alert_cycle`]). Notifications are rows in that transaction; the server's
//! dispatcher sends them, so a slow or dead receiver never holds up an evaluation.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::model::{AlertState, ScopeState};
use super::rules::{AlertsConfig, GroupBy};
use super::status::AlertStatus;
use crate::ingest::IngestStatus;
use crate::store::{AlertCycle, AlertFilter, GroupCount, Store, StoreError};

mod aggregates;
mod events;
mod readings;
#[cfg(test)]
mod tests;
mod transitions;

pub use events::test_event;
use readings::{read_rule, Marks};
use transitions::step_rule;

/// Watermark: the largest dead-letter id the arrival and new-group rules have seen.
pub const DEAD_LETTER_WATERMARK: &str = "dead_letters.id";
/// Watermark: the latest `finished_at_ms` of replay jobs the `replay_failed` rules have seen.
pub const JOBS_WATERMARK: &str = "replay_jobs.finished_at_ms";
/// How far before [`JOBS_WATERMARK`] each evaluation reads again, ms: a job's finish time is
/// stamped before its transaction commits (seen missed on PostgreSQL under load).
pub const JOBS_LOOKBACK_MS: i64 = 60_000;

/// What the evaluator reads besides the store.
#[derive(Clone)]
pub struct EvaluatorInputs {
    /// Ingest's live status; `None` when ingest is disabled (then `ingest_stalled` is inert).
    pub ingest: Option<Arc<IngestStatus>>,
    /// The consumer group ingest uses (`group_id`): the scope of `ingest_stalled`.
    pub group_id: String,
}

/// Whether this instance may evaluate (the leadership); called before every evaluation.
pub type IsLeader = Arc<dyn Fn() -> bool + Send + Sync>;

use crate::clock::now_ms;

/// Runs until `shutdown`: evaluates every `interval_ms` while `is_leader()`, and refreshes the
/// state counts of the metrics on every instance. Store errors are logged and retried at the
/// next tick.
pub async fn run(
    config: Arc<AlertsConfig>,
    store: Store,
    inputs: EvaluatorInputs,
    status: Arc<AlertStatus>,
    is_leader: IsLeader,
    shutdown: CancellationToken,
) {
    let every = Duration::from_millis(config.interval_ms);
    loop {
        let leader = is_leader();
        status.set_leader(leader);
        if leader && !config.rules.is_empty() {
            let now = now_ms();
            match evaluate_once(&config, &store, &inputs, now).await {
                Ok(n) => {
                    status.evaluated(now);
                    if n > 0 {
                        tracing::info!(events = n, "alert events recorded");
                    }
                }
                Err(e) => {
                    status.evaluation_failed();
                    tracing::warn!(error = %e, "alert evaluation failed; retrying at the next interval");
                }
            }
        }
        match store.alert_state_counts().await {
            Ok(c) => status.set_states(c),
            Err(e) => tracing::debug!(error = %e, "reading alert state counts failed"),
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}

fn scope_of(label: &str, value: Option<&str>) -> String {
    format!("{label}={}", value.unwrap_or(""))
}

/// One evaluation of every rule at `now_ms`. Returns how many events it recorded.
///
/// Errors: the store's (nothing is written then; the next evaluation reads the same input).
pub async fn evaluate_once(
    config: &AlertsConfig,
    store: &Store,
    inputs: &EvaluatorInputs,
    now_ms: i64,
) -> Result<usize, StoreError> {
    let mut prev: BTreeMap<(String, String), ScopeState> = BTreeMap::new();
    for s in store.alert_states().await? {
        prev.insert((s.rule.clone(), s.scope.clone()), s);
    }
    let max_id = store.alert_max_dead_letter_id().await?;
    // First run: start from now, so a fresh evaluator does not fire for history.
    let after_id = store
        .alert_watermark(DEAD_LETTER_WATERMARK)
        .await?
        .unwrap_or(max_id)
        .min(max_id);
    let jobs_mark = store.alert_watermark(JOBS_WATERMARK).await?;
    let jobs_seen = jobs_mark.is_some();
    let jobs_after = jobs_mark.unwrap_or(now_ms);

    let mut live_cache: BTreeMap<(GroupBy, AlertFilter), Vec<GroupCount>> = BTreeMap::new();
    // The maintained aggregates (migration 0006), read at most once per evaluation.
    let mut stats: Option<crate::store::StatsSnapshot> = None;
    let mut cycle = AlertCycle {
        now_ms,
        watermarks: vec![
            (DEAD_LETTER_WATERMARK.to_string(), max_id),
            (JOBS_WATERMARK.to_string(), now_ms.max(jobs_after)),
        ],
        prune_before_ms: Some(
            now_ms.saturating_sub(i64::try_from(config.history_ms).unwrap_or(i64::MAX)),
        ),
        ..AlertCycle::default()
    };
    let marks = Marks {
        now_ms,
        max_id,
        after_id,
        jobs_seen,
        jobs_after,
    };

    for rule in &config.rules {
        let readings = read_rule(
            rule,
            store,
            inputs,
            &prev,
            marks,
            &mut live_cache,
            &mut stats,
        )
        .await?;
        step_rule(config, rule, &prev, &readings, now_ms, &mut cycle);
    }
    let n = cycle.events.len();
    store.apply_alert_cycle(&cycle).await?;
    Ok(n)
}

/// Whether any state row is firing (used by tests and `/readyz`-style summaries).
pub fn any_firing(states: &[ScopeState]) -> bool {
    states.iter().any(|s| s.state == AlertState::Firing)
}
