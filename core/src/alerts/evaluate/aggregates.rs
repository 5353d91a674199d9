//! The live backlog per DLQ topic or source topic from the maintained aggregates
//! (`docs/stats.md`), for the `dlq_size` and `oldest_age` rules that need no dead letter.

use std::collections::BTreeMap;

use crate::alerts::rules::{GroupBy, RuleConfig};
use crate::store::{AlertFilter, GroupCount, TopicStats};

/// The grouping to read from the maintained aggregates (`docs/stats.md`) when `rule` groups
/// and filters by DLQ topic and source topic only; `None` when it needs the dead letters.
pub(super) fn from_stats(rule: &RuleConfig, filter: &AlertFilter) -> Option<GroupBy> {
    let by = matches!(rule.group_by, GroupBy::DlqTopic | GroupBy::SourceTopic);
    (by && filter.fingerprint.is_none() && filter.consumer_group.is_none()).then_some(rule.group_by)
}

/// Live dead letters (`new`, `replay_pending`, `replay_failed`: not yet dealt with) and the
/// oldest one's `dead_lettered_at_ms`, per DLQ topic or source topic, from the aggregates'
/// (DLQ topic, source topic) pairs matching `filter`. A NULL source topic is `None`.
pub(super) fn live_from_pairs(
    pairs: &[TopicStats],
    by: GroupBy,
    filter: &AlertFilter,
) -> Vec<GroupCount> {
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
