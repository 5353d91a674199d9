//! What each rule kind reads (the store, the maintained aggregates or ingest's live status) and
//! whether its condition holds, per scope: the readings of one rule in one evaluation.

use std::collections::BTreeMap;

use super::aggregates::{from_stats, live_from_pairs};
use super::{scope_of, EvaluatorInputs, JOBS_LOOKBACK_MS};
use crate::alerts::model::ScopeState;
use crate::alerts::rules::{GroupBy, RuleConfig, RuleKind};
use crate::alerts::state::Reading;
use crate::store::{AlertFilter, GroupCount, StatsSnapshot, Store, StoreError};

/// The time of one evaluation and the range of dead letters and jobs it reads (see
/// [`super::DEAD_LETTER_WATERMARK`] and [`super::JOBS_WATERMARK`]).
#[derive(Clone, Copy)]
pub(super) struct Marks {
    /// The evaluation's time, epoch ms.
    pub(super) now_ms: i64,
    /// The largest dead-letter id in the store now.
    pub(super) max_id: i64,
    /// The largest dead-letter id already seen (`max_id` on the first run).
    pub(super) after_id: i64,
    /// Whether [`super::JOBS_WATERMARK`] was stored by an earlier evaluation.
    pub(super) jobs_seen: bool,
    /// [`super::JOBS_WATERMARK`], or `now_ms` on the first run, epoch ms.
    pub(super) jobs_after: i64,
}

fn filter_of(rule: &RuleConfig) -> AlertFilter {
    AlertFilter {
        dlq_topic: rule.dlq_topic.clone(),
        source_topic: rule.source_topic.clone(),
        fingerprint: rule.fingerprint.clone(),
        consumer_group: rule.consumer_group.clone(),
    }
}

/// The readings of `rule`, by scope. `prev` is every stored state row by (rule, scope);
/// `live_cache` and `stats` are shared by the rules of one evaluation, so that each input is
/// read at most once.
///
/// Errors: the store's.
pub(super) async fn read_rule(
    rule: &RuleConfig,
    store: &Store,
    inputs: &EvaluatorInputs,
    prev: &BTreeMap<(String, String), ScopeState>,
    marks: Marks,
    live_cache: &mut BTreeMap<(GroupBy, AlertFilter), Vec<GroupCount>>,
    stats: &mut Option<StatsSnapshot>,
) -> Result<BTreeMap<String, Reading>, StoreError> {
    let Marks {
        now_ms,
        max_id,
        after_id,
        jobs_seen,
        jobs_after,
    } = marks;
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
                            *stats = Some(store.stats(now_ms).await?);
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
                .alert_dead_lettered_since(rule.group_by, &filter, now_ms.saturating_sub(window))
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
    Ok(readings)
}
