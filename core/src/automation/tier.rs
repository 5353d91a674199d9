//! The tiers of automatic reprocessing (`docs/automation.md`, "Tiers"): the design note's
//! multi-layer DLQ (layer 1 transient, layer 2 business errors, layer 3 long-term archive)
//! plus a poison tier for records that can never be processed.

use serde::{Deserialize, Serialize};

/// Which tier a dead letter is in. Stored as [`Tier::as_str`] in `dead_letters.tier`
/// (NULL there: not sorted yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// A transient failure (a timeout, a dependency down): replayed automatically on its
    /// rule's schedule, behind its health gate, up to its maximum attempts.
    Transient,
    /// A business error: never replayed automatically; a person decides.
    Manual,
    /// Can never be processed as it is (corrupt payload, deserialization failure, marked
    /// non-retryable): never replayed automatically, and its arrival raises an alert.
    Poison,
    /// Kept for audit: hidden from the default views; retention archives and purges it.
    Archive,
}

impl Tier {
    /// Every tier, in the order the UI lists them.
    pub const ALL: [Tier; 4] = [Tier::Transient, Tier::Manual, Tier::Poison, Tier::Archive];

    /// The stable name stored in the database and used in TOML, JSON and URLs.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Transient => "transient",
            Tier::Manual => "manual",
            Tier::Poison => "poison",
            Tier::Archive => "archive",
        }
    }

    /// Parses [`Tier::as_str`]'s names; `None` for anything else.
    pub fn parse(s: &str) -> Option<Tier> {
        Tier::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// Whether records in this tier may be replayed without a person (only `transient`).
    pub fn is_automatic(self) -> bool {
        self == Tier::Transient
    }
}

/// How and why one dead letter got its tier, and its automation state: its
/// `dead_letter_tiers` row (migration 0022), shown on its page and in
/// `GET /api/v1/dead-letters/{id}` (`docs/automation.md`, "Tiers in the UI and API").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierInfo {
    pub tier: Tier,
    /// The rule that gave it; `None` for the default tier, a poison signal, or an age move
    /// by a rule since removed.
    pub rule: Option<String>,
    /// The rule set version the sorter used; `None` when no version was stored yet.
    pub rule_version: Option<i64>,
    /// One line: which conditions matched, or why it escalated, was loop-guarded or moved.
    pub reason: String,
    /// When it entered this tier, epoch ms.
    pub tier_at_ms: i64,
    /// Automatic replays so far (carried over from its earlier self when it came back).
    pub auto_attempts: i32,
    /// Its rule's `schedule.max_attempts` in that version (`transient` rules only).
    pub max_attempts: Option<u32>,
    /// When the next automatic replay is due, epoch ms; `None`: none is due.
    pub next_attempt_at_ms: Option<i64>,
    /// Came back `loop_guard_returns` times: no automation; a manual replay needs the
    /// `approve` permission and a reason.
    pub loop_guarded: bool,
    /// Moved to `manual` after its automatic attempts were used up.
    pub escalated: bool,
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for t in Tier::ALL {
            assert_eq!(Tier::parse(t.as_str()), Some(t));
        }
        assert_eq!(Tier::parse("Transient"), None);
        assert!(Tier::Transient.is_automatic());
        assert!(!Tier::Poison.is_automatic());
    }
}
