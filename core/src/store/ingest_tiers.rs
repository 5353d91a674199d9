//! Sorting a new dead letter into its tier as ingest stores it (issue 12 item 4;
//! `docs/automation.md`, "Sorting").
//!
//! The sorter ([`Store::sort_unsorted`]) sorted every dead letter after ingest had stored
//! it, with an `UPDATE` of its `dead_letters` row: a new version of the whole row with an
//! entry in each of the table's indexes, and on PostgreSQL the aggregate triggers' transition
//! tables. That update was 5.7 s of the sorter's 10.2 s for 100,000 dead letters on
//! PostgreSQL (`docs/bench.md`, "2026-12-05 (4)"), and the sorter trailed ingest after a
//! burst. Ingest now decides each new dead letter's tier with the same [`super::decide`],
//! from the same fields as stored, under the active rule set version; the tier is written by
//! the `INSERT` itself, and the `dead_letter_tiers` row and the `tier_assigned` event in the
//! same transaction (`write_tier_rows!` in `tiers.rs`).
//!
//! Ingest leaves a dead letter unsorted (`tier` NULL), for the sorter, when the sorter reads
//! more than the record to sort it:
//! - it came back after a replay (ingest links it to its earlier self in the same
//!   transaction; the loop guard and escalation read that link);
//! - an enabled rule of the active set matches on labels ([`RuleSet::reads_labels`]);
//! - the active version cannot be read now, or does not compile (the sorter logs that and
//!   counts it in `redrive_tier_sorter_errors_total`).
//!
//! A rule set version activated while a batch is written applies from the next batch, as it
//! applied from the sorter's next pass before.

use std::sync::{Arc, Mutex};

use super::dialect::store_error;
use super::tiers::{Decision, SortReport};
use super::{Pool, Store};
use crate::automation::sort_loop::SorterStatus;
use crate::automation::{RuleSet, RuleSetSpec};

/// The rule set ingest last compiled, and the tier counters (shared by a store's handles).
#[derive(Debug, Default)]
pub(crate) struct IngestTiers {
    cached: Mutex<Option<Compiled>>,
    /// What ingest and the leader's sorter sorted (`redrive_tier_*`).
    status: Arc<SorterStatus>,
}

/// The active version ingest last read, and what it compiled of it.
#[derive(Debug, Clone)]
struct Compiled {
    /// `None`: no version stored (the built-in defaults).
    version: Option<i64>,
    /// `None`: ingest leaves sorting to the sorter under this version (module docs).
    set: Option<Arc<RuleSet>>,
}

/// The rule set one batch of ingest sorts with.
pub(crate) struct IngestRules {
    /// The active version (`None`: none stored, the built-in defaults).
    pub version: Option<i64>,
    pub set: Arc<RuleSet>,
}

impl Store {
    /// What the sorter and ingest sorted on this instance, and the sorter's state: one
    /// object per store, shared by its handles, for the metrics (`redrive_tier_*`) and the
    /// sorter loop ([`crate::automation::sort_loop::run`]).
    pub fn sorter_status(&self) -> Arc<SorterStatus> {
        self.ingest_tiers.status.clone()
    }

    /// The rule set ingest sorts its next batch with (module docs), `None` to leave the
    /// batch to the sorter. Reads the active version number (one indexed read); the set is
    /// read and compiled again only when that number changed. Never fails: a store error
    /// leaves the batch unsorted.
    pub(crate) async fn ingest_rules(&self) -> Option<IngestRules> {
        let version: Option<i64> = match on_pool!(self, |pool, DB| {
            sqlx::query_scalar::<DB, Option<i64>>(
                "SELECT CAST(MAX(version) AS BIGINT) FROM rule_set_versions",
            )
            .fetch_one(pool)
            .await
            .map_err(store_error)
        }) {
            Ok(v) => v,
            Err(e) => {
                tracing::debug!(error = %e, "ingest leaves this batch unsorted");
                return None;
            }
        };
        let cached = self.ingest_tiers.cached.lock().ok().and_then(|c| c.clone());
        if let Some(c) = cached.filter(|c| c.version == version) {
            return c.set.map(|set| IngestRules { version, set });
        }
        let set = match version {
            None => RuleSet::compile(RuleSetSpec::default()).ok(),
            Some(v) => match self.rule_set_version(v).await {
                Ok(stored) => stored.and_then(|s| s.compile().ok()),
                // Not cached: read again with the next batch.
                Err(_) => return None,
            },
        };
        let set = set.filter(|s| !s.reads_labels()).map(Arc::new);
        if let Ok(mut c) = self.ingest_tiers.cached.lock() {
            *c = Some(Compiled {
                version,
                set: set.clone(),
            });
        }
        set.map(|set| IngestRules { version, set })
    }

    /// Counts what ingest sorted, as the sorter counts its batches.
    pub(crate) fn count_sorted_at_ingest(&self, decisions: &[Decision]) {
        if decisions.is_empty() {
            return;
        }
        let mut report = SortReport {
            sorted: decisions.len() as u64,
            read: decisions.len() as u64,
            ..SortReport::default()
        };
        for d in decisions {
            *report.per_tier.entry(d.assignment.tier).or_default() += 1;
        }
        self.ingest_tiers.status.count(&report);
    }
}

#[cfg(test)]
mod tests {
    use super::super::{CandidateScan, RuleSetOrigin};
    use super::*;
    use crate::actions::Actor;
    use crate::automation::Tier;
    use crate::model::{Convention, Header, NewDeadLetter, Normalized, RawRecord};

    fn dead_letter(offset: i64, class: &str, headers: Vec<Header>) -> NewDeadLetter {
        NewDeadLetter {
            record: RawRecord {
                dlq_topic: "orders.DLT".into(),
                dlq_partition: 0,
                dlq_offset: offset,
                timestamp_ms: Some(1_000),
                key: Some(format!("k{offset}").into_bytes()),
                value: Some(b"v".to_vec()),
                headers,
            },
            convention: Convention::Unknown,
            fingerprint: format!("f-{class}"),
            normalized: Normalized {
                source_topic: Some("orders".into()),
                error_class: Some(class.into()),
                ..Normalized::default()
            },
            dead_lettered_at_ms: 1_000,
            ingested_at_ms: 1_000,
        }
    }

    async fn tier_of(store: &Store, offset: i64) -> (Option<Tier>, Option<i64>, Vec<String>) {
        let page = store
            .list(&crate::filter::ListQuery {
                filter: crate::Filter::default(),
                limit: 100,
                cursor: None,
            })
            .await
            .expect("list");
        let id = page
            .items
            .iter()
            .find(|s| s.dlq_offset == offset)
            .expect("stored")
            .id;
        let d = store.get(id).await.expect("get").expect("exists");
        let events = store
            .history(id)
            .await
            .expect("history")
            .into_iter()
            .filter(|e| e.kind == "tier_assigned")
            .map(|e| {
                format!(
                    "{}|{}",
                    e.actor.unwrap_or_default(),
                    e.detail.unwrap_or_default()
                )
            })
            .collect();
        (
            d.summary.tier,
            d.tiering.and_then(|t| t.rule_version),
            events,
        )
    }

    /// Ingest writes the tier, the `dead_letter_tiers` row and the event in its transaction,
    /// under the version active at the batch (none, then 1), leaves the sorter nothing, and
    /// leaves a labels rule set's dead letters to the sorter.
    #[tokio::test]
    async fn ingest_sorts_what_it_stores_and_leaves_labels_to_the_sorter() {
        let store = Store::connect("sqlite::memory:").await.unwrap();
        store.migrate().await.unwrap();
        let defaults = RuleSet::compile(RuleSetSpec::default()).unwrap();

        // No version stored: the built-in defaults (manual; poison signals to poison).
        let retryable_false = vec![Header {
            name: "retryable".into(),
            value: Some(b"false".to_vec()),
        }];
        store
            .insert_batch(&[
                dead_letter(0, "Boom", vec![]),
                dead_letter(1, "Boom", retryable_false),
            ])
            .await
            .unwrap();
        let (tier, version, events) = tier_of(&store, 0).await;
        assert_eq!((tier, version), (Some(Tier::Manual), None));
        // The history names the tier once: `{tier}: {reason}`.
        assert_eq!(
            events,
            ["(rules)|manual: no rule matched: the default tier"]
        );
        let (tier, _, events) = tier_of(&store, 1).await;
        assert_eq!(tier, Some(Tier::Poison));
        assert_eq!(events, ["(rules)|poison: header retryable=false"]);
        let report = store.sort_unsorted(&defaults, None, 500).await.unwrap();
        assert_eq!(report.read, 0, "nothing left to the sorter");
        let status = store.sorter_status();
        assert_eq!(
            (
                status.sorted_into(Tier::Manual),
                status.sorted_into(Tier::Poison)
            ),
            (1, 1)
        );

        // A version saved: the next batch is sorted with it.
        let actor = Actor::operator("ana");
        let v1 = "[[rule]]\nname = \"timeouts\"\ntier = \"transient\"\n\
                  match.error_classes = [\"Timeout\"]\n\
                  schedule = { every = \"10m\", max_attempts = 3, backoff = \"1m\" }\n";
        store
            .save_rule_set(&actor, RuleSetOrigin::Api, v1, None)
            .await
            .unwrap();
        store
            .insert_batch(&[dead_letter(2, "Timeout", vec![])])
            .await
            .unwrap();
        let (tier, version, _) = tier_of(&store, 2).await;
        assert_eq!((tier, version), (Some(Tier::Transient), Some(1)));

        // A rule on labels: ingest leaves the batch unsorted; the sorter sorts it.
        let v2 = "[[rule]]\nname = \"known\"\ntier = \"archive\"\nmatch.labels = [\"known\"]\n";
        store
            .save_rule_set(&actor, RuleSetOrigin::Api, v2, None)
            .await
            .unwrap();
        store
            .insert_batch(&[dead_letter(3, "Boom", vec![])])
            .await
            .unwrap();
        assert_eq!(tier_of(&store, 3).await.0, None, "left to the sorter");
        let unsorted = store
            .tier_candidates(&CandidateScan::unsorted(10))
            .await
            .unwrap();
        assert_eq!(unsorted.len(), 1);
        let v2_set = RuleSet::parse_toml(v2).unwrap();
        let report = store.sort_unsorted(&v2_set, Some(2), 500).await.unwrap();
        assert_eq!(report.sorted, 1);
        assert_eq!(tier_of(&store, 3).await.0, Some(Tier::Manual));
    }
}
