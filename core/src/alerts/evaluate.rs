//! The alert evaluator: every `alerts.interval_ms`, on the leader only, read each rule's input
//! (see `store::alert_inputs` for what each costs), step every rule × scope through
//! [`super::state::step`], and write the outcome in one store transaction
//! ([`Store::apply_alert_cycle`]). Notifications are rows in that transaction; the server's
//! dispatcher sends them, so a slow or dead receiver never holds up an evaluation.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::model::{AlertState, EventKind, ScopeState};
use super::payload::{self, AlertPayload, SCHEMA_V1};
use super::rules::{AlertsConfig, GroupBy, RuleConfig, RuleKind, OVERFLOW_LABEL};
use super::state::{step, Reading, Transition};
use super::status::AlertStatus;
use crate::actions::NewAuditEntry;
use crate::ingest::IngestStatus;
use crate::store::{
    AlertCycle, AlertFilter, GroupCount, NewAlertEvent, Store, StoreError, TopicStats, ALERTS_ACTOR,
};

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

fn filter_of(rule: &RuleConfig) -> AlertFilter {
    AlertFilter {
        dlq_topic: rule.dlq_topic.clone(),
        source_topic: rule.source_topic.clone(),
        fingerprint: rule.fingerprint.clone(),
        consumer_group: rule.consumer_group.clone(),
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

    for rule in &config.rules {
        let filter = filter_of(rule);
        let label = rule.group_by.column();
        let mut readings: BTreeMap<String, Reading> = BTreeMap::new();
        let level = |holds: bool, value: i64| Reading {
            holds,
            value,
            last_event_ms: None,
        };
        match rule.kind {
            RuleKind::DlqSize | RuleKind::OldestAge => {
                let key = (rule.group_by, filter.clone());
                if !live_cache.contains_key(&key) {
                    let rows = match from_stats(rule, &filter) {
                        Some(by) => {
                            if stats.is_none() {
                                stats = Some(store.stats(now_ms).await?);
                            }
                            let snap = stats
                                .as_ref()
                                .map(|s| s.pairs.as_slice())
                                .unwrap_or_default();
                            live_from_pairs(snap, by, &filter)
                        }
                        // Grouping or filtering by fingerprint or consumer group: the
                        // aggregates do not have it; read the matching live dead letters.
                        None => store.alert_live_by(rule.group_by, &filter).await?,
                    };
                    live_cache.insert(key.clone(), rows);
                }
                for g in live_cache.get(&key).map(Vec::as_slice).unwrap_or_default() {
                    let scope = scope_of(label, g.value.as_deref());
                    let r = if rule.kind == RuleKind::DlqSize {
                        let t = i64::try_from(rule.threshold_or_zero()).unwrap_or(i64::MAX);
                        level(g.count > t, g.count)
                    } else {
                        let age = g.at_ms.map_or(0, |t| now_ms.saturating_sub(t));
                        let max = i64::try_from(rule.max_age_ms.unwrap_or(0)).unwrap_or(i64::MAX);
                        level(age > max, age)
                    };
                    readings.insert(scope, r);
                }
            }
            RuleKind::DeadLetterRate => {
                let window = i64::try_from(rule.window()).unwrap_or(i64::MAX);
                let rate = rule.rate_per_min.map_or(0.0, |r| r.0);
                let rows = store
                    .alert_dead_lettered_since(
                        rule.group_by,
                        &filter,
                        now_ms.saturating_sub(window),
                    )
                    .await?;
                for g in rows {
                    let per_min = g.count as f64 * 60_000.0 / window as f64;
                    readings.insert(
                        scope_of(label, g.value.as_deref()),
                        level(per_min > rate, g.count),
                    );
                }
            }
            RuleKind::NewArrival => {
                if max_id > after_id {
                    for g in store
                        .alert_arrivals(rule.group_by, &filter, after_id, max_id)
                        .await?
                    {
                        readings.insert(
                            scope_of(label, g.value.as_deref()),
                            Reading {
                                holds: true,
                                value: g.count,
                                last_event_ms: g.at_ms.or(Some(now_ms)),
                            },
                        );
                    }
                }
            }
            RuleKind::NewErrorGroup => {
                if max_id > after_id {
                    for g in store
                        .alert_new_fingerprints(&filter, after_id, max_id)
                        .await?
                    {
                        readings.insert(
                            scope_of("fingerprint", g.value.as_deref()),
                            Reading {
                                holds: true,
                                value: g.count,
                                last_event_ms: g.at_ms.or(Some(now_ms)),
                            },
                        );
                    }
                }
            }
            RuleKind::ReplayFailed | RuleKind::CanaryFailed => {
                // `finished_at_ms` (a canary: its verdict's time) is stamped before the
                // relay's transaction commits, so a job may become visible after an
                // evaluation has already read past its time: look back [`JOBS_LOOKBACK_MS`]
                // (re-reading a job already seen is harmless: its state row de-duplicates
                // it), and a job seen for the first time counts from now, so that a late one
                // still fires.
                let from = if jobs_seen {
                    jobs_after.saturating_sub(JOBS_LOOKBACK_MS)
                } else {
                    jobs_after
                };
                let failed = if rule.kind == RuleKind::ReplayFailed {
                    store.alert_failed_jobs(from, now_ms).await?
                } else {
                    store.alert_failed_canaries(from, now_ms).await?
                };
                for g in failed {
                    let scope = scope_of("job", g.value.as_deref());
                    let seen = prev.contains_key(&(rule.name.clone(), scope.clone()));
                    let at = if seen { g.at_ms } else { Some(now_ms) };
                    readings.insert(
                        scope,
                        Reading {
                            holds: true,
                            value: g.count,
                            last_event_ms: at.or(Some(now_ms)),
                        },
                    );
                }
            }
            RuleKind::PoisonArrived | RuleKind::Escalated => {
                // Sorted by the leader's sorter (`docs/automation.md`): `tier_at_ms` is
                // stamped before its transaction commits, so look back as for jobs.
                let from = if jobs_seen {
                    jobs_after.saturating_sub(JOBS_LOOKBACK_MS)
                } else {
                    jobs_after
                };
                for g in store
                    .alert_tier_arrivals(
                        rule.kind == RuleKind::Escalated,
                        rule.dlq_topic.as_deref(),
                        from,
                        now_ms,
                    )
                    .await?
                {
                    let scope = scope_of("dlq_topic", g.value.as_deref());
                    let seen = prev.contains_key(&(rule.name.clone(), scope.clone()));
                    let at = if seen { g.at_ms } else { Some(now_ms) };
                    readings.insert(
                        scope,
                        Reading {
                            holds: true,
                            value: g.count,
                            last_event_ms: at.or(Some(now_ms)),
                        },
                    );
                }
            }
            RuleKind::Quarantined => {
                let t = i64::try_from(rule.threshold_or_zero()).unwrap_or(i64::MAX);
                for g in store
                    .alert_quarantine_by_topic(rule.dlq_topic.as_deref())
                    .await?
                {
                    readings.insert(
                        scope_of("dlq_topic", g.value.as_deref()),
                        level(g.count > t, g.count),
                    );
                }
            }
            RuleKind::IngestLag => {
                if let Some(ingest) = &inputs.ingest {
                    let t = i64::try_from(rule.threshold_or_zero()).unwrap_or(i64::MAX);
                    let mut by_topic: BTreeMap<String, i64> = BTreeMap::new();
                    for p in ingest.snapshot().partition_lag {
                        if rule.dlq_topic.as_ref().is_none_or(|d| d == &p.topic) {
                            *by_topic.entry(p.topic).or_default() += p.lag;
                        }
                    }
                    for (topic, lag) in by_topic {
                        readings.insert(scope_of("dlq_topic", Some(&topic)), level(lag > t, lag));
                    }
                }
            }
            RuleKind::RulePaused => {
                for (name, _) in store.self_paused_rules().await? {
                    readings.insert(scope_of("rule", Some(&name)), level(true, 1));
                }
            }
            RuleKind::IngestStalled => {
                if let Some(ingest) = &inputs.ingest {
                    let ready = ingest.is_ready();
                    readings.insert(
                        scope_of("consumer_group", Some(&inputs.group_id)),
                        level(!ready, i64::from(!ready)),
                    );
                }
            }
        }

        // Every scope read now, and every scope the rule had before (absent now = clear);
        // the summary scope is stepped last, from what the cap held back.
        let overflow_scope = scope_of(OVERFLOW_LABEL, Some(label));
        let mut scopes: Vec<(bool, String)> = readings
            .keys()
            .cloned()
            .chain(
                prev.range((rule.name.clone(), String::new())..)
                    .take_while(|((r, _), _)| r == &rule.name)
                    .map(|((_, s), _)| s.clone()),
            )
            .filter(|s| *s != overflow_scope)
            .collect::<BTreeSet<String>>()
            .into_iter()
            .map(|s| {
                let firing = prev
                    .get(&(rule.name.clone(), s.clone()))
                    .is_some_and(|b| b.state == AlertState::Firing);
                (!firing, s)
            })
            .collect();
        // Scopes already firing keep their place under the cap: they are stepped first.
        scopes.sort();
        let cap = usize::try_from(rule.max_firing).unwrap_or(usize::MAX);
        let mut firing = 0usize;
        let mut held_back = 0i64;
        for (_, scope) in scopes {
            let before = prev.get(&(rule.name.clone(), scope.clone()));
            let mut reading = readings.get(&scope).copied().unwrap_or(Reading {
                holds: false,
                value: 0,
                last_event_ms: None,
            });
            if rule.kind.is_event() {
                // Holds while the latest event is within the window.
                let window = i64::try_from(rule.window()).unwrap_or(i64::MAX);
                let last = reading
                    .last_event_ms
                    .max(before.and_then(|b| b.last_event_ms));
                reading.holds = last.is_some_and(|t| now_ms.saturating_sub(t) < window);
                if !readings.contains_key(&scope) {
                    reading.value = before.map_or(0, |b| b.value);
                }
            }
            let (mut next, mut transition) = step(
                &rule.name,
                &scope,
                before,
                reading,
                now_ms,
                rule.for_ms,
                rule.cooldown_ms,
            );
            if transition == Some(Transition::Fired) && firing >= cap {
                // Over the cap: this scope stays pending (ready to fire on its own once a
                // slot frees) and counts in the rule's summary alert instead of paging.
                transition = None;
                held_back += 1;
                next = next.map(|mut n| {
                    n.state = AlertState::Pending;
                    n.fired_at_ms = before.and_then(|b| b.fired_at_ms);
                    n
                });
                let unchanged = before.is_some_and(|b| {
                    b.state == AlertState::Pending
                        && b.value == reading.value
                        && next
                            .as_ref()
                            .is_some_and(|n| n.last_event_ms == b.last_event_ms)
                });
                if unchanged {
                    next = None;
                }
            }
            let state_now = next.as_ref().map(|n| n.state).or(before.map(|b| b.state));
            if state_now == Some(AlertState::Firing) {
                firing += 1;
            }
            if let Some(t) = transition {
                cycle.events.push(event_for(
                    config,
                    rule,
                    &scope,
                    t,
                    reading.value,
                    now_ms,
                    before,
                ));
            }
            if let Some(n) = next {
                cycle.states.push(n);
            }
        }
        // The summary alert: fires when any scope is held back, resolves when none is. The
        // held-back scopes already waited `for_ms`, so it fires at once.
        let before = prev.get(&(rule.name.clone(), overflow_scope.clone()));
        let reading = Reading {
            holds: held_back > 0,
            value: held_back,
            last_event_ms: None,
        };
        let (next, transition) = step(
            &rule.name,
            &overflow_scope,
            before,
            reading,
            now_ms,
            0,
            rule.cooldown_ms,
        );
        if let Some(t) = transition {
            cycle.events.push(event_for(
                config,
                rule,
                &overflow_scope,
                t,
                held_back,
                now_ms,
                before,
            ));
        }
        if let Some(n) = next {
            cycle.states.push(n);
        }
    }
    let n = cycle.events.len();
    store.apply_alert_cycle(&cycle).await?;
    Ok(n)
}

/// The grouping to read from the maintained aggregates (`docs/stats.md`) when `rule` groups
/// and filters by DLQ topic and source topic only; `None` when it needs the dead letters.
fn from_stats(rule: &RuleConfig, filter: &AlertFilter) -> Option<GroupBy> {
    let by = matches!(rule.group_by, GroupBy::DlqTopic | GroupBy::SourceTopic);
    (by && filter.fingerprint.is_none() && filter.consumer_group.is_none()).then_some(rule.group_by)
}

/// Live dead letters (`new`, `replay_pending`, `replay_failed`: not yet dealt with) and the
/// oldest one's `dead_lettered_at_ms`, per DLQ topic or source topic, from the aggregates'
/// (DLQ topic, source topic) pairs matching `filter`. A NULL source topic is `None`.
fn live_from_pairs(pairs: &[TopicStats], by: GroupBy, filter: &AlertFilter) -> Vec<GroupCount> {
    let mut out: BTreeMap<Option<String>, GroupCount> = BTreeMap::new();
    for p in pairs {
        let matches = |want: &Option<String>, have: &Option<String>| {
            want.as_ref()
                .is_none_or(|w| have.as_deref() == Some(w.as_str()))
        };
        if !matches(&filter.dlq_topic, &p.dlq_topic)
            || !matches(&filter.source_topic, &p.source_topic)
        {
            continue;
        }
        let live = p.counts.new + p.counts.replay_pending + p.counts.replay_failed;
        if live == 0 {
            continue;
        }
        let oldest = [
            p.oldest_ms.new,
            p.oldest_ms.replay_pending,
            p.oldest_ms.replay_failed,
        ]
        .into_iter()
        .flatten()
        .min();
        let key = match by {
            GroupBy::SourceTopic => p.source_topic.clone(),
            _ => p.dlq_topic.clone(),
        };
        let e = out.entry(key.clone()).or_insert(GroupCount {
            value: key,
            count: 0,
            at_ms: None,
        });
        e.count += live;
        e.at_ms = match (e.at_ms, oldest) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    out.into_values().collect()
}

/// What the value means, for humans.
fn describe(rule: &RuleConfig, scope: &str, value: i64) -> String {
    if let Some(column) = scope.strip_prefix(&format!("{OVERFLOW_LABEL}=")) {
        return format!(
            "{value} more {column} group(s) firing beyond this rule's max_firing = {} \
             (those page one by one; see /alerts for the rest)",
            rule.max_firing
        );
    }
    match rule.kind {
        RuleKind::DlqSize => format!(
            "{value} live dead letter(s) in {scope} (threshold {})",
            rule.threshold_or_zero()
        ),
        RuleKind::DeadLetterRate => {
            let per_min = value as f64 * 60_000.0 / rule.window() as f64;
            format!(
                "{per_min:.2} dead letters/min in {scope} over the last {} s (threshold {}/min)",
                rule.window() / 1000,
                rule.rate_per_min.map_or(0.0, |r| r.0)
            )
        }
        RuleKind::NewArrival => format!("{value} new dead letter(s) in {scope}"),
        RuleKind::OldestAge => format!(
            "the oldest live dead letter in {scope} is {} s old (threshold {} s)",
            value / 1000,
            rule.max_age_ms.unwrap_or(0) / 1000
        ),
        RuleKind::NewErrorGroup => {
            format!("a new error group appeared: {scope} ({value} dead letter(s))")
        }
        RuleKind::IngestStalled => {
            format!("ingest is not running with Kafka and the store reachable ({scope})")
        }
        RuleKind::ReplayFailed => format!("replay {scope} finished with {value} failed record(s)"),
        RuleKind::CanaryFailed => format!(
            "the canary of replay {scope} failed: {value} of its record(s) came back as dead \
             letters; the job paused itself"
        ),
        RuleKind::PoisonArrived => format!(
            "{value} dead letter(s) in {scope} went to the poison tier: they can never succeed \
             as they are and are never replayed automatically"
        ),
        RuleKind::Escalated => format!(
            "{value} dead letter(s) in {scope} came back after their automatic attempts and \
             were escalated to the manual tier"
        ),
        RuleKind::RulePaused => format!(
            "automatic replay rule {scope} paused itself: most of what it replayed came back \
             as dead letters; resume it once the cause is fixed"
        ),
        RuleKind::IngestLag => format!(
            "ingest is {value} record(s) behind in {scope} (threshold {})",
            rule.threshold_or_zero()
        ),
        RuleKind::Quarantined => format!(
            "{value} record(s) in quarantine for {scope} (threshold {})",
            rule.threshold_or_zero()
        ),
    }
}

fn event_for(
    config: &AlertsConfig,
    rule: &RuleConfig,
    scope: &str,
    t: Transition,
    value: i64,
    now_ms: i64,
    before: Option<&ScopeState>,
) -> NewAlertEvent {
    let (kind, summary, fired_at) = match t {
        Transition::Fired => (
            EventKind::Fired,
            format!("{}: {}", rule.name, describe(rule, scope, value)),
            Some(now_ms),
        ),
        Transition::Resolved => (
            EventKind::Resolved,
            format!("{}: resolved for {scope}", rule.name),
            before.and_then(|b| b.fired_at_ms),
        ),
    };
    let (unit, threshold) = if scope.starts_with(&format!("{OVERFLOW_LABEL}=")) {
        // The summary alert counts the scopes over the cap.
        ("groups", Some(f64::from(rule.max_firing)))
    } else {
        payload::unit_and_threshold(rule)
    };
    let doc = AlertPayload {
        schema: SCHEMA_V1.to_string(),
        event_id: 0,
        event: kind,
        at_ms: now_ms,
        at: payload::rfc3339(now_ms),
        rule: rule.name.clone(),
        kind: rule.kind.as_str().to_string(),
        severity: rule.severity,
        scope: scope.to_string(),
        scope_labels: payload::scope_labels(scope),
        value,
        threshold,
        unit: unit.to_string(),
        summary: summary.clone(),
        dedup_key: payload::dedup_key(&rule.name, scope),
        fired_at_ms: fired_at,
        links: payload::links(&config.public_url, scope),
    };
    NewAlertEvent {
        rule: rule.name.clone(),
        scope: scope.to_string(),
        kind,
        value,
        summary,
        payload: doc,
        notifiers: rule
            .notifiers(&config.notifiers)
            .into_iter()
            .map(str::to_string)
            .collect(),
        audit: NewAuditEntry {
            actor: ALERTS_ACTOR.to_string(),
            action: kind.audit_action().to_string(),
            outcome: "ok".to_string(),
            ..NewAuditEntry::default()
        },
    }
}

/// The test notification an operator asks for: an event of kind `test` for `notifier` by
/// `actor` (its audit row names the operator).
pub fn test_event(
    config: &AlertsConfig,
    notifier: &str,
    audit: NewAuditEntry,
    now_ms: i64,
) -> NewAlertEvent {
    let scope = format!("notifier={notifier}");
    let summary = format!("redrive test notification to {notifier}: delivery works");
    NewAlertEvent {
        rule: "test".to_string(),
        scope: scope.clone(),
        kind: EventKind::Test,
        value: 0,
        summary: summary.clone(),
        payload: AlertPayload {
            schema: SCHEMA_V1.to_string(),
            event_id: 0,
            event: EventKind::Test,
            at_ms: now_ms,
            at: payload::rfc3339(now_ms),
            rule: "test".to_string(),
            kind: "test".to_string(),
            severity: super::rules::Severity::Info,
            scope: scope.clone(),
            scope_labels: payload::scope_labels(&scope),
            value: 0,
            threshold: None,
            unit: "bool".to_string(),
            summary,
            dedup_key: payload::dedup_key("test", &format!("{scope}@{now_ms}")),
            fired_at_ms: Some(now_ms),
            links: payload::links(&config.public_url, ""),
        },
        notifiers: vec![notifier.to_string()],
        audit,
    }
}

/// Whether any state row is firing (used by tests and `/readyz`-style summaries).
pub fn any_firing(states: &[ScopeState]) -> bool {
    states.iter().any(|s| s.state == AlertState::Firing)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::PerStatus;

    fn pair(dlq: &str, src: Option<&str>, new: i64, failed: i64, replayed: i64) -> TopicStats {
        TopicStats {
            dlq_topic: Some(dlq.into()),
            source_topic: src.map(str::to_string),
            counts: PerStatus {
                new,
                replay_failed: failed,
                replayed,
                ..PerStatus::default()
            },
            oldest_ms: PerStatus {
                new: (new > 0).then_some(100),
                replay_failed: (failed > 0).then_some(50),
                replayed: (replayed > 0).then_some(1),
                ..PerStatus::default()
            },
            ..TopicStats::default()
        }
    }

    #[test]
    fn live_from_the_aggregates_counts_what_is_not_dealt_with() {
        let pairs = [
            pair("a.DLT", Some("a"), 2, 1, 7),
            pair("a.DLT", None, 1, 0, 0),
            pair("b.DLT", Some("b"), 0, 0, 9),
        ];
        let by_dlq = live_from_pairs(&pairs, GroupBy::DlqTopic, &AlertFilter::default());
        assert_eq!(by_dlq.len(), 1, "replayed ones are not live backlog");
        assert_eq!((by_dlq[0].count, by_dlq[0].at_ms), (4, Some(50)));
        let f = AlertFilter {
            source_topic: Some("a".into()),
            ..AlertFilter::default()
        };
        let by_src = live_from_pairs(&pairs, GroupBy::SourceTopic, &f);
        assert_eq!(by_src.len(), 1);
        assert_eq!(
            (by_src[0].value.as_deref(), by_src[0].count),
            (Some("a"), 3)
        );
    }
}
