//! A rule set's dry run (`docs/automation.md`, "Dry run"): for a rule set that is being
//! edited, how many of the stored dead letters each rule would take and which tier they would
//! go to, compared with the tier they are in now. Nothing is written.
//!
//! [`DryRunTally`] is the pure part: fed one [`Assignment`] (from `RuleSet::assign`) and the
//! record's current tier at a time, it counts; the store's scan
//! (`Store::dry_run_rule_set`) reads the dead letters in id-ordered chunks, newest first, at
//! most [`MAX_DRY_RUN_ROWS`] of them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::rules::{Assignment, RuleSet};
use super::tier::Tier;

/// Most dead letters one dry run reads (the newest ones); a larger store is answered for
/// these and says so ([`DryRun::capped`]).
pub const MAX_DRY_RUN_ROWS: u64 = 200_000;

/// What a dry run found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DryRun {
    /// Dead letters read (the newest ones by id), at most [`MAX_DRY_RUN_ROWS`].
    pub scanned: u64,
    /// Live dead letters stored (every status but `deleted`) when the run started.
    pub total: u64,
    /// True when `scanned < total`: only the newest `scanned` were read.
    pub capped: bool,
    /// Each rule, in the rule set's order, with the dead letters it would take.
    pub rules: Vec<RuleCount>,
    /// Taken by no rule and without a poison signal: they go to `default_tier`.
    pub default_count: u64,
    /// The rule set's `default_tier`.
    pub default_tier: Tier,
    /// Taken by no (non-transient) rule but carrying a poison signal: they go to `poison`.
    pub poison_count: u64,
    /// Where the scanned dead letters would go, every tier listed (in [`Tier::ALL`] order).
    pub tiers: Vec<TierCount>,
    /// Dead letters whose tier would change, by (current tier, new tier); the current tier is
    /// `None` for a dead letter not sorted yet. Sorted by count, largest first.
    pub moves: Vec<TierMove>,
    /// Dead letters that would stay in the tier they are in.
    pub unchanged: u64,
}

/// One rule's share of a dry run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleCount {
    /// Position in the set, from 1.
    pub position: usize,
    pub name: String,
    pub tier: Tier,
    /// A disabled rule takes nothing.
    pub disabled: bool,
    /// Dead letters this rule would take (the first rule that matches takes a record).
    pub matched: u64,
}

/// Dead letters that would go to one tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierCount {
    pub tier: Tier,
    pub count: u64,
}

/// Dead letters that would move from one tier to another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierMove {
    /// The tier they are in now; `None`: not sorted yet.
    pub from: Option<Tier>,
    pub to: Tier,
    pub count: u64,
}

/// Counts assignments into a [`DryRun`].
#[derive(Debug, Clone)]
pub struct DryRunTally {
    rules: Vec<RuleCount>,
    by_name: BTreeMap<String, usize>,
    default_tier: Tier,
    default_count: u64,
    poison_count: u64,
    tiers: BTreeMap<Tier, u64>,
    moves: BTreeMap<(Option<Tier>, Tier), u64>,
    unchanged: u64,
    scanned: u64,
}

impl DryRunTally {
    /// An empty tally for `set`.
    pub fn new(set: &RuleSet) -> DryRunTally {
        let rules: Vec<RuleCount> = set
            .rules
            .iter()
            .map(|r| RuleCount {
                position: r.position,
                name: r.name.clone(),
                tier: r.tier,
                disabled: r.disabled,
                matched: 0,
            })
            .collect();
        let by_name = rules
            .iter()
            .enumerate()
            .map(|(i, r)| (r.name.clone(), i))
            .collect();
        DryRunTally {
            rules,
            by_name,
            default_tier: set.spec.default_tier,
            default_count: 0,
            poison_count: 0,
            tiers: BTreeMap::new(),
            moves: BTreeMap::new(),
            unchanged: 0,
            scanned: 0,
        }
    }

    /// Counts one dead letter: the set's assignment `a`, and `current`, the tier it is in now
    /// (`None`: unsorted).
    pub fn add(&mut self, a: &Assignment, current: Option<Tier>) {
        self.scanned += 1;
        match a.rule.as_deref().and_then(|n| self.by_name.get(n)) {
            Some(&i) => self.rules[i].matched += 1,
            None if a.poison_signal => self.poison_count += 1,
            None => self.default_count += 1,
        }
        *self.tiers.entry(a.tier).or_default() += 1;
        if current == Some(a.tier) {
            self.unchanged += 1;
        } else {
            *self.moves.entry((current, a.tier)).or_default() += 1;
        }
    }

    /// The result; `total` is the count of live dead letters stored (`capped` when more than
    /// were scanned).
    pub fn finish(self, total: u64) -> DryRun {
        let total = total.max(self.scanned);
        let mut moves: Vec<TierMove> = self
            .moves
            .into_iter()
            .map(|((from, to), count)| TierMove { from, to, count })
            .collect();
        moves.sort_by_key(|m| std::cmp::Reverse(m.count));
        DryRun {
            scanned: self.scanned,
            total,
            capped: self.scanned < total,
            rules: self.rules,
            default_count: self.default_count,
            default_tier: self.default_tier,
            poison_count: self.poison_count,
            tiers: Tier::ALL
                .into_iter()
                .map(|tier| TierCount {
                    tier,
                    count: self.tiers.get(&tier).copied().unwrap_or(0),
                })
                .collect(),
            moves,
            unchanged: self.unchanged,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::automation::MatchInput;
    use crate::model::{Convention, Header};

    const SET: &str = r#"
default_tier = "manual"

[[rule]]
name = "timeouts"
tier = "transient"
match.error_classes = ["TimeoutError"]

[[rule]]
name = "old"
tier = "archive"
disabled = true

[[rule]]
name = "invalid"
tier = "manual"
match.error_messages = ["invalid"]
"#;

    fn input<'a>(class: &'a str, message: &'a str, headers: &'a [Header]) -> MatchInput<'a> {
        MatchInput {
            dlq_topic: "orders.DLT",
            source_topic: Some("orders"),
            consumer_group: None,
            error_class: Some(class),
            error_message: Some(message),
            fingerprint: "0123456789abcdef",
            convention: Convention::Seed,
            headers,
            labels: &[],
            age_ms: 1_000,
        }
    }

    /// With `default_tier = "poison"`, a poison signal is still told from the default.
    #[test]
    fn a_poison_default_tier_is_counted_as_the_default() {
        let set = RuleSet::parse_toml("default_tier = \"poison\"").unwrap();
        let mut t = DryRunTally::new(&set);
        let poison = [Header {
            name: "retryable".into(),
            value: Some(b"false".to_vec()),
        }];
        t.add(&set.assign(&input("X", "boom", &poison)), None);
        t.add(&set.assign(&input("X", "boom", &[])), None);
        t.add(&set.assign(&input("Y", "bang", &[])), None);
        let r = t.finish(3);
        assert_eq!(
            (r.default_count, r.default_tier, r.poison_count),
            (2, Tier::Poison, 1)
        );
    }

    #[test]
    fn counts_rules_default_poison_tiers_and_moves() {
        let set = RuleSet::parse_toml(SET).unwrap();
        let mut t = DryRunTally::new(&set);
        let poison = [Header {
            name: "retryable".into(),
            value: Some(b"false".to_vec()),
        }];
        // 3 timeouts: 2 unsorted, 1 already transient.
        for current in [None, None, Some(Tier::Transient)] {
            t.add(&set.assign(&input("TimeoutError", "slow", &[])), current);
        }
        // 2 invalid: one manual now (unchanged), one in poison now (moves).
        t.add(
            &set.assign(&input("X", "Invalid amount", &[])),
            Some(Tier::Manual),
        );
        t.add(&set.assign(&input("X", "invalid", &[])), Some(Tier::Poison));
        // A timeout marked non-retryable: transient skipped, no other rule: poison.
        t.add(&set.assign(&input("TimeoutError", "slow", &poison)), None);
        // Nothing matches: default.
        t.add(
            &set.assign(&input("Other", "boom", &[])),
            Some(Tier::Manual),
        );

        let r = t.finish(10);
        assert_eq!((r.scanned, r.total, r.capped), (7, 10, true));
        let matched: Vec<(&str, u64, bool)> = r
            .rules
            .iter()
            .map(|c| (c.name.as_str(), c.matched, c.disabled))
            .collect();
        assert_eq!(
            matched,
            [
                ("timeouts", 3, false),
                ("old", 0, true),
                ("invalid", 2, false)
            ]
        );
        assert_eq!(
            (r.default_count, r.default_tier, r.poison_count),
            (1, Tier::Manual, 1)
        );
        let tiers: Vec<u64> = r.tiers.iter().map(|c| c.count).collect();
        assert_eq!(tiers, [3, 3, 1, 0]);
        assert_eq!(r.unchanged, 3);
        assert_eq!(
            r.moves,
            [
                TierMove {
                    from: None,
                    to: Tier::Transient,
                    count: 2
                },
                TierMove {
                    from: None,
                    to: Tier::Poison,
                    count: 1
                },
                TierMove {
                    from: Some(Tier::Poison),
                    to: Tier::Manual,
                    count: 1
                },
            ]
        );
    }

    #[test]
    fn an_empty_store_is_not_capped() {
        let set = RuleSet::parse_toml("").unwrap();
        let r = DryRunTally::new(&set).finish(0);
        assert_eq!((r.scanned, r.total, r.capped), (0, 0, false));
        assert!(r.moves.is_empty() && r.rules.is_empty());
    }
}
