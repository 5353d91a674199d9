//! Automatic reprocessing (issue 13; `docs/automation.md`): the half of a DLQ that runs
//! without a person.
//!
//! - [`tier`]: the four tiers a dead letter is sorted into — `transient` (replayed on a
//!   schedule once its cause is fixed), `manual` (business errors: a person decides),
//!   `poison` (never replayed automatically; an alert), `archive` (kept for audit, out of the
//!   default views, purged by retention).
//! - [`rules`]: the ordered rule set that sorts them — written in `redrive.toml`
//!   (`[automation]`) or edited in the UI as a new, audited version — and its matching: the
//!   first rule that matches a dead letter gives its tier; none matching gives the rule set's
//!   `default_tier`.
//!
//! - [`dry_run`]: what an edited rule set would do to the stored dead letters (counts per
//!   rule and tier, and the moves from their current tier), before it is saved.
//!
//! Data flows one way: ingest stores a dead letter unsorted (`dead_letters.tier` NULL); the
//! leader's sorter assigns its tier from the active rule set version; the leader's scheduler
//! replays due transient dead letters through the same outbox, relay and audit trail as a
//! manual replay, with the rule as the actor. Sorting and rounds run on the leader only
//! (`crate::leader`); every round is one store transaction, so a crash mid-round publishes at
//! most what the committed outbox rows say, with their idempotency keys.

pub mod dry_run;
mod matcher;
mod poison;
#[cfg(feature = "server")]
pub mod rounds;
pub mod rules;
#[cfg(feature = "server")]
pub mod sort_loop;
pub mod tier;
pub mod version_diff;
pub mod view;

pub use rules::{Assignment, MatchInput, RuleSet, RuleSetError, RuleSetSpec, RuleSpec, TierRule};
pub use tier::{Tier, TierInfo};
