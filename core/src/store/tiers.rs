//! Sorting dead letters into tiers (issue 13, migration 0022; `docs/automation.md`, "Sorting").
//!
//! Ingest sorts each new dead letter as it stores it (`ingest_tiers.rs`), with [`decide`] and
//! `write_tier_rows!`; what it leaves unsorted (`dead_letters.tier` NULL) the leader's sorter
//! ([`crate::automation::sort_loop`]) sorts with [`Store::sort_unsorted`] and the active rule set:
//! one write transaction per batch, oldest id first, that sets `dead_letters.tier`, writes
//! the `dead_letter_tiers` row (rule, version, reason, automation state) and a
//! `tier_assigned` history event for each. The `tier IS NULL` guard on the update makes a
//! batch sorted twice around a leader failover harmless: the second writes nothing.
//!
//! What a returning dead letter (linked to its earlier self by ingest, `dead_letter_links`)
//! inherits, in this order:
//! 1. **Loop guard**: it came back `loop_guard_returns` times or more (the link's
//!    `repeat_failures`), or its earlier self was guarded → `loop_guarded`, and a tier that
//!    would be `transient` becomes `manual`.
//! 2. **Escalation**: its tier is `transient` and its earlier self's automatic attempts
//!    (carried over) reached the rule's `max_attempts` → `manual`, `escalated`.
//! 3. Otherwise a `transient` dead letter is due at `now + delay(attempts + 1)` (the rule's
//!    backoff with jitter), its attempts carried over.

use std::collections::BTreeMap;

use sqlx::QueryBuilder;

use super::actions::{ids_json, now_ms};
use super::dialect::{store_error, Dialect, Val};
use super::tier_candidates::{CandidateScan, TierCandidate};
use super::{Pool, Store, StoreError};
use crate::automation::{Assignment, RuleSet, Tier};

/// Actor of the sorter's history events (and of age moves).
pub const SORTER_ACTOR: &str = "(rules)";

/// Most dead letters one sort batch takes.
pub const SORT_BATCH: u32 = 500;

/// What the rule set decided for one dead letter, with its automation state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub id: i64,
    pub assignment: Assignment,
    pub auto_attempts: i32,
    /// Epoch ms; `Some` only for `transient`.
    pub next_attempt_at_ms: Option<i64>,
    pub loop_guarded: bool,
    pub escalated: bool,
}

/// What one sort batch did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SortReport {
    /// Dead letters sorted (written) by this batch.
    pub sorted: u64,
    /// Candidates read (a full batch means more may wait).
    pub read: u64,
    pub per_tier: BTreeMap<Tier, u64>,
    /// Ids that went to `poison`.
    pub poison: Vec<i64>,
    /// Ids escalated to `manual` after their automatic attempts.
    pub escalated: Vec<i64>,
    /// Ids taken out of automation by the loop guard.
    pub loop_guarded: Vec<i64>,
}

/// A number in `[0, 1)` from the OS's randomness (jitter); 0.5 if none is available.
pub(crate) fn unit_random() -> f64 {
    let mut b = [0u8; 8];
    match getrandom::fill(&mut b) {
        Ok(()) => (u64::from_le_bytes(b) >> 11) as f64 / (1u64 << 53) as f64,
        Err(_) => 0.5,
    }
}

/// What a dead letter's earlier self left, as [`decide`] reads it: all zero / false for one
/// that did not come back after a replay.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Earlier {
    /// How many times it has come back after replays.
    pub repeat_failures: i32,
    /// Its earlier self's automatic attempts.
    pub auto_attempts: i32,
    /// Whether its earlier self was loop-guarded.
    pub loop_guarded: bool,
}

/// Decides the tier and automation state of one candidate (the module docs' order).
/// `unit_random` in `[0, 1)` spreads the first due time.
pub fn decide(rules: &RuleSet, c: &TierCandidate, now_ms: i64, unit_random: f64) -> Decision {
    let earlier = Earlier {
        repeat_failures: c.repeat_failures,
        auto_attempts: c.earlier_auto_attempts,
        loop_guarded: c.earlier_loop_guarded,
    };
    decide_input(rules, &c.input(now_ms), c.id, earlier, now_ms, unit_random)
}

/// [`decide`] for a dead letter given as its rule-matching view `input` (borrowed, as ingest
/// has it before storing it: `store/ingest_tiers.rs`), its id and what its earlier self left.
pub(crate) fn decide_input(
    rules: &RuleSet,
    input: &crate::automation::MatchInput<'_>,
    id: i64,
    c: Earlier,
    now_ms: i64,
    unit_random: f64,
) -> Decision {
    let mut a = rules.assign(input);
    let guard = rules.spec.loop_guard_returns;
    let attempts = c.auto_attempts.max(0);
    let mut d = Decision {
        id,
        assignment: a.clone(),
        auto_attempts: attempts,
        next_attempt_at_ms: None,
        loop_guarded: false,
        escalated: false,
    };
    if c.loop_guarded || (guard > 0 && c.repeat_failures >= guard as i32) {
        if a.tier == Tier::Transient {
            a.tier = Tier::Manual;
        }
        a.reason = format!(
            "loop guard: came back {} times after replays (loop_guard_returns = {guard}); \
             no automatic replay, a manual one needs approval and a reason; {}",
            c.repeat_failures, a.reason
        );
        d.loop_guarded = true;
        d.assignment = a;
        return d;
    }
    if a.tier == Tier::Transient {
        let schedule = a
            .rule
            .as_deref()
            .and_then(|r| rules.rule(r))
            .and_then(|r| r.schedule.clone());
        if let Some(s) = schedule {
            if c.repeat_failures > 0 && attempts >= s.max_attempts as i32 {
                a.tier = Tier::Manual;
                a.reason = format!(
                    "escalated: came back after {attempts} automatic attempts \
                     (max_attempts = {}); {}",
                    s.max_attempts, a.reason
                );
                d.escalated = true;
            } else {
                let delay = s.delay_ms(attempts as u32 + 1, unit_random);
                d.next_attempt_at_ms =
                    Some(now_ms.saturating_add(delay.min(i64::MAX as u64) as i64));
            }
        }
    }
    d.assignment = a;
    d
}

/// Writes, in transaction `$tx` of database `$DB`, the `dead_letter_tiers` row and the
/// `tier_assigned` history event (actor [`SORTER_ACTOR`]) of each of `$rows`
/// (`&[&Decision]`, sorted with rule set version `$version`, `Option<i64>`, at `$now`, epoch
/// ms), 250 per statement. A database error returns `Err(StoreError)` from the enclosing
/// function. Used by the sorter ([`Store::sort_unsorted`]) and by ingest, which sorts a new
/// dead letter as it stores it (`ingest_tiers.rs`). A macro because the two databases'
/// transactions are different types (used inside `on_pool!`).
macro_rules! write_tier_rows {
    ($tx:expr, $DB:ty, $rows:expr, $version:expr, $now:expr) => {{
        let rows: &[&$crate::store::Decision] = $rows;
        let version: Option<i64> = $version;
        let now: i64 = $now;
        for chunk in rows.chunks(250) {
            let mut qb: sqlx::QueryBuilder<'_, $DB> = sqlx::QueryBuilder::new(
                "INSERT INTO dead_letter_tiers (dead_letter_id, tier, rule_name, rule_version, \
                 reason, tier_at_ms, auto_attempts, next_attempt_at_ms, loop_guarded, escalated) ",
            );
            qb.push_values(chunk.iter(), |mut b, d| {
                b.push_bind(d.id)
                    .push_bind(d.assignment.tier.as_str())
                    .push_bind(d.assignment.rule.clone())
                    .push_bind(version)
                    .push_bind(d.assignment.reason.clone())
                    .push_bind(now)
                    .push_bind(d.auto_attempts)
                    .push_bind(d.next_attempt_at_ms)
                    .push_bind(i32::from(d.loop_guarded))
                    .push_bind(i32::from(d.escalated));
            });
            qb.push(
                " ON CONFLICT (dead_letter_id) DO UPDATE SET tier = excluded.tier, \
                 rule_name = excluded.rule_name, rule_version = excluded.rule_version, \
                 reason = excluded.reason, tier_at_ms = excluded.tier_at_ms, \
                 auto_attempts = excluded.auto_attempts, \
                 next_attempt_at_ms = excluded.next_attempt_at_ms, \
                 loop_guarded = excluded.loop_guarded, escalated = excluded.escalated",
            );
            qb.build().execute(&mut *$tx).await.map_err(store_error)?;
            let mut qb: sqlx::QueryBuilder<'_, $DB> = sqlx::QueryBuilder::new(
                "INSERT INTO dead_letter_events (dead_letter_id, at_ms, kind, actor, detail) ",
            );
            qb.push_values(chunk.iter(), |mut b, d| {
                b.push_bind(d.id)
                    .push_bind(now)
                    .push_bind("tier_assigned")
                    .push_bind($crate::store::SORTER_ACTOR)
                    .push_bind(format!("{}: {}", d.assignment.tier, d.assignment.reason));
            });
            qb.build().execute(&mut *$tx).await.map_err(store_error)?;
        }
    }};
}
pub(crate) use write_tier_rows;

impl Store {
    /// Sorts up to `limit` unsorted dead letters with `rules` (active version `version`,
    /// `None` when no version is stored yet) in ONE write transaction (module docs).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn sort_unsorted(
        &self,
        rules: &RuleSet,
        version: Option<i64>,
        limit: u32,
    ) -> Result<SortReport, StoreError> {
        let candidates = self
            .tier_candidates(&CandidateScan::unsorted(limit))
            .await?;
        let now = now_ms();
        let decisions: Vec<Decision> = candidates
            .iter()
            .map(|c| decide(rules, c, now, unit_random()))
            .collect();
        let mut report = SortReport {
            read: candidates.len() as u64,
            ..SortReport::default()
        };
        if decisions.is_empty() {
            return Ok(report);
        }
        let mut by_tier: BTreeMap<Tier, Vec<i64>> = BTreeMap::new();
        for d in &decisions {
            by_tier.entry(d.assignment.tier).or_default().push(d.id);
        }
        let written: Vec<i64> = on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let mut written: Vec<i64> = Vec::new();
            for (tier, ids) in &by_tier {
                let mut qb: QueryBuilder<'_, DB> =
                    QueryBuilder::new("UPDATE dead_letters SET tier = ");
                DB::bind(&mut qb, Val::Text(Some(tier.as_str())));
                qb.push(" WHERE tier IS NULL AND id IN ");
                DB::push_json_ids(&mut qb, ids_json(ids));
                qb.push(" RETURNING id");
                let mut got: Vec<i64> = qb
                    .build_query_scalar()
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(store_error)?;
                written.append(&mut got);
            }
            let keep: std::collections::HashSet<i64> = written.iter().copied().collect();
            let rows: Vec<&Decision> = decisions.iter().filter(|d| keep.contains(&d.id)).collect();
            write_tier_rows!(tx, DB, &rows, version, now);
            tx.commit().await.map_err(store_error)?;
            Ok::<_, StoreError>(written)
        })?;
        let keep: std::collections::HashSet<i64> = written.iter().copied().collect();
        for d in decisions.iter().filter(|d| keep.contains(&d.id)) {
            report.sorted += 1;
            *report.per_tier.entry(d.assignment.tier).or_default() += 1;
            if d.assignment.tier == Tier::Poison {
                report.poison.push(d.id);
            }
            if d.escalated {
                report.escalated.push(d.id);
            }
            if d.loop_guarded {
                report.loop_guarded.push(d.id);
            }
        }
        Ok(report)
    }
}

#[derive(Debug, sqlx::FromRow)]
pub(crate) struct TierInfoRow {
    tier: String,
    rule_name: Option<String>,
    rule_version: Option<i64>,
    reason: String,
    tier_at_ms: i64,
    auto_attempts: i32,
    next_attempt_at_ms: Option<i64>,
    loop_guarded: i32,
    escalated: i32,
}

/// The `dead_letter_tiers` columns [`Store::get`] reads beside the row (the table joined as
/// `t`), each named `tiering_...`: all NULL for an unsorted dead letter ([`TieringColumns`]).
pub(crate) const TIERING_COLUMNS: &str = "t.tier AS tiering_tier, \
     t.rule_name AS tiering_rule_name, CAST(t.rule_version AS BIGINT) AS tiering_rule_version, \
     t.reason AS tiering_reason, t.tier_at_ms AS tiering_tier_at_ms, \
     t.auto_attempts AS tiering_auto_attempts, \
     t.next_attempt_at_ms AS tiering_next_attempt_at_ms, \
     t.loop_guarded AS tiering_loop_guarded, t.escalated AS tiering_escalated";

/// [`TIERING_COLUMNS`] as read.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct TieringColumns {
    tiering_tier: Option<String>,
    tiering_rule_name: Option<String>,
    tiering_rule_version: Option<i64>,
    tiering_reason: Option<String>,
    tiering_tier_at_ms: Option<i64>,
    tiering_auto_attempts: Option<i32>,
    tiering_next_attempt_at_ms: Option<i64>,
    tiering_loop_guarded: Option<i32>,
    tiering_escalated: Option<i32>,
}

impl TieringColumns {
    /// The `dead_letter_tiers` row, `None` when there is none (its NOT NULL columns NULL).
    pub(crate) fn into_row(self) -> Option<TierInfoRow> {
        Some(TierInfoRow {
            tier: self.tiering_tier?,
            rule_name: self.tiering_rule_name,
            rule_version: self.tiering_rule_version,
            reason: self.tiering_reason?,
            tier_at_ms: self.tiering_tier_at_ms?,
            auto_attempts: self.tiering_auto_attempts?,
            next_attempt_at_ms: self.tiering_next_attempt_at_ms,
            loop_guarded: self.tiering_loop_guarded?,
            escalated: self.tiering_escalated?,
        })
    }
}

impl Store {
    /// A `dead_letter_tiers` row as shown, with its rule's `max_attempts` read from the rule
    /// set version it was sorted with.
    ///
    /// Errors: `Unavailable`, `Database`, `Corrupt` (an unknown stored tier).
    pub(crate) async fn tiering(
        &self,
        r: TierInfoRow,
    ) -> Result<crate::automation::TierInfo, StoreError> {
        let tier = Tier::parse(&r.tier)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown tier `{}`", r.tier)))?;
        let mut max_attempts = None;
        if let (Some(rule), Some(v)) = (&r.rule_name, r.rule_version) {
            if let Some(set) = self
                .rule_set_version(v)
                .await?
                .and_then(|v| v.compile().ok())
            {
                max_attempts = set
                    .rule(rule)
                    .and_then(|r| r.schedule.as_ref())
                    .map(|s| s.max_attempts);
            }
        }
        Ok(crate::automation::TierInfo {
            tier,
            rule: r.rule_name,
            rule_version: r.rule_version,
            reason: r.reason,
            tier_at_ms: r.tier_at_ms,
            auto_attempts: r.auto_attempts,
            max_attempts,
            next_attempt_at_ms: r.next_attempt_at_ms,
            loop_guarded: r.loop_guarded != 0,
            escalated: r.escalated != 0,
        })
    }

    /// How many dead letters of `selection` (not `deleted`) are loop-guarded
    /// (`dead_letter_tiers.loop_guarded = 1`): a manual replay of them needs the `approve`
    /// permission and a reason ([`check_loop_guard`]). Served by the partial index
    /// `dead_letter_tiers_loop_guarded` (migration 0023).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn loop_guarded_in(
        &self,
        selection: &crate::actions::Selection,
    ) -> Result<i64, StoreError> {
        on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("SELECT COUNT(*) FROM dead_letters");
            super::actions::push_selection(&mut qb, selection);
            qb.push(
                " AND status <> 'deleted' AND id IN \
                 (SELECT dead_letter_id FROM dead_letter_tiers WHERE loop_guarded = 1)",
            );
            qb.build_query_scalar::<i64>()
                .fetch_one(pool)
                .await
                .map_err(store_error)
        })
    }

    /// Counts one automatic replay of each of `ids` (a scheduled round queued them): their
    /// `auto_attempts` grow by one and no further attempt is due (`next_attempt_at_ms`
    /// NULL) — a record that comes back is a new dead letter that inherits the count
    /// ([`decide`]). Returns how many rows changed.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn note_automatic_attempts(&self, ids: &[i64]) -> Result<u64, StoreError> {
        if ids.is_empty() {
            return Ok(0);
        }
        let json = ids_json(ids);
        on_write_conn!(self, |conn, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "UPDATE dead_letter_tiers SET auto_attempts = auto_attempts + 1, \
                 next_attempt_at_ms = NULL WHERE dead_letter_id IN ",
            );
            DB::push_json_ids(&mut qb, json);
            qb.build()
                .execute(&mut *conn)
                .await
                .map(|r| r.rows_affected())
                .map_err(store_error)
        })
    }

    /// Alert input (`poison_arrived`, `escalated`; `docs/alerts.md`): dead letters that
    /// entered the poison tier (`escalated` false) or were escalated to manual (`escalated`
    /// true) with `after_ms < tier_at_ms <= upto_ms`, by DLQ topic (optionally only
    /// `dlq_topic`): (topic, count, newest `tier_at_ms`). Served by the indexes of migration
    /// 0023 on `dead_letter_tiers`.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn alert_tier_arrivals(
        &self,
        escalated: bool,
        dlq_topic: Option<&str>,
        after_ms: i64,
        upto_ms: i64,
    ) -> Result<Vec<super::alert_inputs::GroupCount>, StoreError> {
        on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT d.dlq_topic AS value, COUNT(*) AS count, MAX(t.tier_at_ms) AS at_ms \
                 FROM dead_letter_tiers t JOIN dead_letters d ON d.id = t.dead_letter_id WHERE ",
            );
            qb.push(if escalated {
                "t.escalated = 1"
            } else {
                "t.tier = 'poison'"
            });
            qb.push(" AND t.tier_at_ms > ");
            DB::bind(&mut qb, Val::I64(Some(after_ms)));
            qb.push(" AND t.tier_at_ms <= ");
            DB::bind(&mut qb, Val::I64(Some(upto_ms)));
            if let Some(t) = dlq_topic {
                qb.push(" AND d.dlq_topic = ");
                DB::bind(&mut qb, Val::Text(Some(t)));
            }
            qb.push(" GROUP BY d.dlq_topic ORDER BY d.dlq_topic LIMIT 1000");
            qb.build_query_as()
                .fetch_all(pool)
                .await
                .map_err(store_error)
        })
    }
}

/// The manual-replay check of the loop guard (`docs/automation.md`, "Escalation and loop
/// guard"): a replay whose selection holds `guarded` loop-guarded dead letters needs the
/// `approve` permission (held by the actor, or given by an approver on the four-eyes path,
/// `approved`) and a non-empty reason.
///
/// Errors: `Invalid` naming how many are loop-guarded and what is missing.
pub fn check_loop_guard(
    actor: &crate::actions::Actor,
    reason: Option<&str>,
    approved: bool,
    guarded: i64,
) -> Result<(), StoreError> {
    if guarded <= 0 {
        return Ok(());
    }
    let may_approve = approved || actor.can(crate::permission::Permission::Approve);
    let has_reason = reason.is_some_and(|r| !r.trim().is_empty());
    let missing = match (may_approve, has_reason) {
        (true, true) => return Ok(()),
        (false, false) => "the approve permission and a reason",
        (false, true) => "the approve permission",
        (true, false) => "a reason",
    };
    Err(StoreError::Invalid(format!(
        "{guarded} of the selected dead letters are loop-guarded (they came back after \
         replays too often); replaying them by hand needs {missing}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Convention;

    fn candidate(repeat: i32, attempts: i32) -> TierCandidate {
        TierCandidate {
            id: 7,
            dlq_topic: "llm.requests.dlq".into(),
            source_topic: Some("llm.requests".into()),
            consumer_group: None,
            error_class: Some("TimeoutError".into()),
            error_message: None,
            fingerprint: "0123456789abcdef".into(),
            convention: Convention::Seed,
            headers: vec![],
            labels: vec![],
            dead_lettered_at_ms: 1_000,
            tier: None,
            repeat_failures: repeat,
            earlier_auto_attempts: attempts,
            earlier_loop_guarded: false,
        }
    }

    const RULES: &str = r#"
loop_guard_returns = 5
[[rule]]
name = "t"
tier = "transient"
match.error_classes = ["TimeoutError"]
schedule = { max_attempts = 2, backoff = "10s", jitter = 0.0 }
"#;

    #[test]
    fn fresh_transient_is_due_after_the_first_backoff() {
        let rules = RuleSet::parse_toml(RULES).unwrap();
        let d = decide(&rules, &candidate(0, 0), 50_000, 0.5);
        assert_eq!(d.assignment.tier, Tier::Transient);
        assert_eq!(d.next_attempt_at_ms, Some(60_000));
        assert!(!d.escalated && !d.loop_guarded);
    }

    #[test]
    fn returning_record_carries_attempts_then_escalates() {
        let rules = RuleSet::parse_toml(RULES).unwrap();
        let d = decide(&rules, &candidate(1, 1), 50_000, 0.5);
        assert_eq!((d.assignment.tier, d.auto_attempts), (Tier::Transient, 1));
        assert_eq!(d.next_attempt_at_ms, Some(70_000));
        let d = decide(&rules, &candidate(2, 2), 50_000, 0.5);
        assert_eq!(d.assignment.tier, Tier::Manual);
        assert!(d.escalated);
        assert!(
            d.assignment.reason.starts_with("escalated"),
            "{}",
            d.assignment.reason
        );
        assert_eq!(d.next_attempt_at_ms, None);
    }

    fn actor(role: crate::actions::Role) -> crate::actions::Actor {
        crate::actions::Actor::new("u", role)
    }

    #[test]
    fn a_loop_guarded_replay_needs_approve_and_a_reason() {
        use crate::actions::Role;
        assert!(check_loop_guard(&actor(Role::Viewer), None, false, 0).is_ok());
        let admin = actor(Role::Admin);
        assert!(check_loop_guard(&admin, Some("INC-7 fixed"), false, 2).is_ok());
        let e = check_loop_guard(&admin, Some("  "), false, 2).unwrap_err();
        assert!(
            e.to_string()
                .contains("2 of the selected dead letters are loop-guarded"),
            "{e}"
        );
        assert!(e.to_string().ends_with("needs a reason"), "{e}");
        let viewer = actor(Role::Viewer);
        let e = check_loop_guard(&viewer, None, false, 1).unwrap_err();
        assert!(
            e.to_string()
                .contains("the approve permission and a reason"),
            "{e}"
        );
        // The four-eyes path: an approver approved it.
        assert!(check_loop_guard(&viewer, Some("why"), true, 1).is_ok());
        let mut token = actor(Role::Admin);
        token.read_only = true;
        assert!(check_loop_guard(&token, Some("why"), false, 1).is_err());
    }

    #[test]
    fn move_passes_follow_the_shortest_move_after() {
        use crate::automation::sort_loop::{move_interval, MOVE_INTERVAL};
        let none = RuleSet::parse_toml(RULES).unwrap();
        assert_eq!(move_interval(&none), MOVE_INTERVAL);
        let set = RuleSet::parse_toml(
            "[[rule]]\nname = \"m\"\ntier = \"manual\"\nmove_after = { after = \"4s\", to = \"archive\" }",
        )
        .unwrap();
        assert_eq!(move_interval(&set), std::time::Duration::from_secs(2));
        let e = RuleSet::parse_toml(
            "[[rule]]\nname = \"m\"\ntier = \"manual\"\nmove_after = { after = \"1s\", to = \"transient\" }",
        )
        .unwrap_err();
        assert!(e.0.contains("cannot be `transient`"), "{e}");
        let e = RuleSet::parse_toml(
            "[[rule]]\nname = \"m\"\ntier = \"manual\"\nmove_after = { after = \"500ms\", to = \"archive\" }",
        )
        .unwrap_err();
        assert!(e.0.contains("at least 1s"), "{e}");
    }

    #[test]
    fn loop_guard_wins_over_everything() {
        let rules = RuleSet::parse_toml(RULES).unwrap();
        let d = decide(&rules, &candidate(5, 0), 50_000, 0.5);
        assert_eq!(d.assignment.tier, Tier::Manual);
        assert!(d.loop_guarded && !d.escalated);
        let mut c = candidate(1, 0);
        c.earlier_loop_guarded = true;
        assert!(decide(&rules, &c, 0, 0.5).loop_guarded);
    }
}
