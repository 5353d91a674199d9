//! The tier of one dead letter: what a rule is matched against ([`MatchInput`]), the
//! first-match walk over the rules with poison routing ([`RuleSet::assign`]), and its result
//! ([`Assignment`]).

use serde::{Deserialize, Serialize};

use super::{poison_signal, RuleSet, TierRule};
use crate::automation::tier::Tier;
use crate::model::{Convention, Header};

/// What a rule is matched against: one dead letter's fields as stored.
#[derive(Debug, Clone, Copy)]
pub struct MatchInput<'a> {
    pub dlq_topic: &'a str,
    pub source_topic: Option<&'a str>,
    pub consumer_group: Option<&'a str>,
    pub error_class: Option<&'a str>,
    pub error_message: Option<&'a str>,
    pub fingerprint: &'a str,
    pub convention: Convention,
    /// The raw headers, in record order.
    pub headers: &'a [Header],
    /// Its own and its error group's labels.
    pub labels: &'a [String],
    /// Now − dead-lettered-at, ms.
    pub age_ms: i64,
}

/// The tier a rule set gives one dead letter, and why (shown on its page and in its
/// history).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assignment {
    pub tier: Tier,
    /// The rule that matched; `None` for the default tier or a poison signal.
    pub rule: Option<String>,
    /// Whether a poison signal, not a rule nor the default tier, gave it (`poison`).
    #[serde(default)]
    pub poison_signal: bool,
    /// One line that does not repeat the tier (the history writes `{tier}: {reason}`), e.g.
    /// ``rule `llm-timeouts` (#1): error class TimeoutError``, `header retryable=false`
    /// (a poison signal), `no rule matched: the default tier`.
    pub reason: String,
}

impl RuleSet {
    /// The rule named `name`.
    pub fn rule(&self, name: &str) -> Option<&TierRule> {
        self.rules.iter().find(|r| r.name == name)
    }

    /// Whether an enabled rule matches on labels. Ingest sorts a new dead letter only under a
    /// rule set that does not ([`crate::store`]'s `ingest_tiers.rs`): labels are read by the
    /// sorter, which leaves such a set's dead letters to it.
    pub fn reads_labels(&self) -> bool {
        self.rules
            .iter()
            .any(|r| !r.disabled && r.matcher.reads_labels())
    }

    /// The tier of one dead letter: the first enabled rule that matches (transient rules
    /// skipped for a record with a poison signal), else `poison` for a poison signal, else
    /// the default tier.
    pub fn assign(&self, input: &MatchInput<'_>) -> Assignment {
        let poison = if self.spec.poison_by_convention {
            poison_signal(input)
        } else {
            None
        };
        for r in &self.rules {
            if r.disabled || (poison.is_some() && r.tier == Tier::Transient) {
                continue;
            }
            if let Some(why) = r.matcher.explain(input) {
                return Assignment {
                    tier: r.tier,
                    rule: Some(r.name.clone()),
                    poison_signal: false,
                    reason: format!("rule `{}` (#{}): {why}", r.name, r.position),
                };
            }
        }
        if let Some(signal) = poison {
            return Assignment {
                tier: Tier::Poison,
                rule: None,
                poison_signal: true,
                reason: signal,
            };
        }
        Assignment {
            tier: self.spec.default_tier,
            rule: None,
            poison_signal: false,
            reason: "no rule matched: the default tier".to_string(),
        }
    }
}
