//! Each automation rule's running state (`rule_states`, migration 0022; `docs/automation.md`,
//! "Editing rules"): paused or not (written here, by a person with `manage_rules`, audited
//! `rule_pause` / `rule_resume`), and the scheduler's round columns (last round, outcome,
//! totals), which the scheduler writes with its own functions. Rows are kept by rule name
//! across rule set versions; a rule without a row has never been paused nor run a round.

use sqlx::QueryBuilder;

use super::actions::{clean_text, now_ms};
use super::audit::insert_audit;
use super::dialect::{store_error, Dialect, Val};
use super::rule_sets::RuleSetVersion;
use super::{Pool, Store, StoreError};
use crate::actions::{Actor, NewAuditEntry};
use crate::automation::view::{AutomationOverview, RuleState, TierTotal, VersionInfo, VersionText};
use crate::automation::Tier;

#[derive(Debug, sqlx::FromRow)]
struct StateRow {
    rule_name: String,
    paused: i64,
    paused_reason: Option<String>,
    paused_by: Option<String>,
    paused_at_ms: Option<i64>,
    last_round_at_ms: Option<i64>,
    last_round_outcome: Option<String>,
    last_round_message: Option<String>,
    last_job_id: Option<String>,
    rounds_run: i64,
    rounds_skipped: i64,
    replayed_total: i64,
    refailed_total: i64,
}

impl From<StateRow> for RuleState {
    fn from(r: StateRow) -> Self {
        RuleState {
            rule_name: r.rule_name,
            paused: r.paused != 0,
            paused_reason: r.paused_reason,
            paused_by: r.paused_by,
            paused_at_ms: r.paused_at_ms,
            last_round_at_ms: r.last_round_at_ms,
            last_round_outcome: r.last_round_outcome,
            last_round_message: r.last_round_message,
            last_job_id: r.last_job_id,
            rounds_run: r.rounds_run,
            rounds_skipped: r.rounds_skipped,
            replayed_total: r.replayed_total,
            refailed_total: r.refailed_total,
        }
    }
}

const STATE_COLUMNS: &str = "rule_name, CAST(paused AS BIGINT) AS paused, paused_reason, \
     paused_by, CAST(paused_at_ms AS BIGINT) AS paused_at_ms, \
     CAST(last_round_at_ms AS BIGINT) AS last_round_at_ms, last_round_outcome, \
     last_round_message, last_job_id, CAST(rounds_run AS BIGINT) AS rounds_run, \
     CAST(rounds_skipped AS BIGINT) AS rounds_skipped, \
     CAST(replayed_total AS BIGINT) AS replayed_total, \
     CAST(refailed_total AS BIGINT) AS refailed_total";

impl Store {
    /// Every rule's state row, by rule name (rules never paused nor run have none).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn rule_states(&self) -> Result<Vec<RuleState>, StoreError> {
        let rows: Vec<StateRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(format!(
                "SELECT {STATE_COLUMNS} FROM rule_states ORDER BY rule_name"
            ));
            qb.build_query_as::<StateRow>()
                .fetch_all(pool)
                .await
                .map_err(store_error)
        })?;
        Ok(rows.into_iter().map(RuleState::from).collect())
    }

    /// Pauses (`paused` true) or resumes rule `rule` of the active rule set, in ONE
    /// transaction with its audit row (`rule_pause` / `rule_resume`, detail `{"rule",
    /// "version", "was_paused"}`), and returns its state. Pausing a paused rule (or resuming
    /// a running one) changes nothing but is audited all the same. A resume clears the pause
    /// columns. The round columns are the scheduler's and are left alone.
    ///
    /// Errors: `NotFound` (no such rule in the active rule set), `Invalid` (the rule is not
    /// `transient`: only a transient rule runs rounds), `Unavailable`, `Database`.
    pub async fn set_rule_paused(
        &self,
        actor: &Actor,
        rule: &str,
        paused: bool,
        reason: Option<&str>,
    ) -> Result<RuleState, StoreError> {
        let active = self.active_rule_set().await?;
        let set = active
            .as_ref()
            .map(|v| v.compile().map_err(|e| StoreError::Invalid(e.0)))
            .transpose()?;
        let tier = set
            .as_ref()
            .and_then(|s| s.rule(rule))
            .map(|r| r.tier)
            .ok_or_else(|| StoreError::NotFound(format!("rule `{rule}` in the active rule set")))?;
        if tier != Tier::Transient {
            return Err(StoreError::Invalid(format!(
                "rule `{rule}` gives the `{tier}` tier and runs no rounds; only a transient \
                 rule can be paused"
            )));
        }
        let version = active.map(|v| v.version);
        let reason = reason.map(clean_text).filter(|r| !r.trim().is_empty());
        let by = clean_text(&actor.user);
        let now = now_ms();
        let action = if paused { "rule_pause" } else { "rule_resume" };
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let mut q: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT CAST(paused AS BIGINT) FROM rule_states WHERE rule_name = ",
            );
            DB::bind(&mut q, Val::Text(Some(rule)));
            let was: Option<i64> = q
                .build_query_scalar()
                .fetch_optional(&mut *tx)
                .await
                .map_err(store_error)?;
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "INSERT INTO rule_states (rule_name, paused, paused_reason, paused_by, \
                 paused_at_ms) VALUES (",
            );
            // On resume `paused_at_ms` becomes the resume time (not NULL): the scheduler's
            // self-pause judges only the rule's jobs made after it, so the replays that made
            // the rule pause itself do not pause it again at once.
            let (p, r, b, at) = if paused {
                (1, reason.as_deref(), Some(by.as_str()), Some(now))
            } else {
                (0, None, None, Some(now))
            };
            let values = [
                Val::Text(Some(rule)),
                Val::I32(Some(p)),
                Val::Text(r),
                Val::Text(b),
                Val::I64(at),
            ];
            for (i, v) in values.into_iter().enumerate() {
                if i > 0 {
                    qb.push(", ");
                }
                DB::bind(&mut qb, v);
            }
            qb.push(
                ") ON CONFLICT (rule_name) DO UPDATE SET paused = excluded.paused, \
                 paused_reason = excluded.paused_reason, paused_by = excluded.paused_by, \
                 paused_at_ms = excluded.paused_at_ms",
            );
            qb.build().execute(&mut *tx).await.map_err(store_error)?;
            let mut audit = NewAuditEntry::by(actor, action, "ok");
            audit.reason = reason.clone();
            audit.detail = Some(
                serde_json::json!({
                    "rule": rule,
                    "version": version,
                    "was_paused": was.unwrap_or(0) != 0,
                })
                .to_string(),
            );
            insert_audit::<DB>(&audit, now)
                .build()
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
            tx.commit().await.map_err(store_error)?;
            Ok::<(), StoreError>(())
        })?;
        Ok(self
            .rule_states()
            .await?
            .into_iter()
            .find(|s| s.rule_name == rule)
            .unwrap_or_default())
    }

    /// What `/automation` shows: the active version (compiled), each rule with its state,
    /// and the live dead letters per tier.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn automation_overview(&self) -> Result<AutomationOverview, StoreError> {
        let active = self.active_rule_set().await?;
        let states = self.rule_states().await?;
        let tiers = self.tier_totals().await?;
        let (info, source, set) = match active {
            Some(v) => {
                let set = v.compile().map_err(|e| e.0);
                (Some(version_info(&v)), v.source, set)
            }
            None => (
                None,
                String::new(),
                crate::automation::RuleSet::compile(Default::default()).map_err(|e| e.0),
            ),
        };
        Ok(AutomationOverview::build(info, source, set, states, tiers))
    }

    /// Version `version` with its text and its line diff against the version before it;
    /// `None` when not stored.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn rule_set_version_text(
        &self,
        version: i64,
    ) -> Result<Option<VersionText>, StoreError> {
        let Some(v) = self.rule_set_version(version).await? else {
            return Ok(None);
        };
        let before = if version > 1 {
            self.rule_set_version(version - 1).await?
        } else {
            None
        };
        let diff =
            before.map(|b| crate::automation::version_diff::diff_lines(&b.source, &v.source));
        Ok(Some(VersionText {
            info: version_info(&v),
            source: v.source,
            diff,
        }))
    }

    /// Live dead letters (every status but `deleted`) per tier, `None` = not sorted yet:
    /// one `GROUP BY` answered from the tier index. Tiers with none are absent.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn tier_totals(&self) -> Result<Vec<TierTotal>, StoreError> {
        let rows: Vec<(Option<String>, i64)> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT tier, CAST(COUNT(*) AS BIGINT) FROM dead_letters \
                 WHERE status <> 'deleted' GROUP BY tier",
            );
            qb.build_query_as::<(Option<String>, i64)>()
                .fetch_all(pool)
                .await
                .map_err(store_error)
        })?;
        Ok(rows
            .into_iter()
            .map(|(t, count)| TierTotal {
                tier: t.as_deref().and_then(Tier::parse),
                count,
            })
            .collect())
    }
}

/// The listing fields of a stored version.
pub fn version_info(v: &RuleSetVersion) -> VersionInfo {
    VersionInfo {
        version: v.version,
        origin: v.origin.as_str().to_string(),
        created_by: v.created_by.clone(),
        created_at_ms: v.created_at_ms,
        reason: v.reason.clone(),
        sha256: v.sha256.clone(),
    }
}
