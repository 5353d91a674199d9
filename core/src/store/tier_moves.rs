//! Age-based tier moves (`docs/automation.md`, "Age-based movement"): a rule's
//! `move_after` moves the dead letters it sorted, once they have been in its tier long
//! enough, to another tier, with a history event each and one audit row per rule and pass.

use sqlx::QueryBuilder;

use super::actions::ids_json;
use super::dialect::{store_error, Dialect, Val};
use super::tiers::SORTER_ACTOR;
use super::{Pool, Store, StoreError};
use crate::automation::{RuleSet, Tier};

/// Most dead letters one age move takes per rule and pass.
pub const MOVE_BATCH: u32 = 500;

/// What one age-move pass did (`docs/automation.md`, "Age-based movement").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MoveReport {
    /// Dead letters moved, all rules.
    pub moved: u64,
    /// (rule, from, to, how many) per rule that moved any.
    pub per_rule: Vec<(String, Tier, Tier, u64)>,
    /// Some rule filled its batch: more may be due now.
    pub more: bool,
}

impl Store {
    /// Moves the dead letters each enabled rule with a `move_after` sorted, and that have
    /// been in the rule's tier for at least `after`, to `to`: at most `limit` per rule, one
    /// write transaction per rule that sets `dead_letters.tier` and the `dead_letter_tiers`
    /// row (tier, `tier_at_ms` = now, reason, no automatic attempt due), writes a
    /// `tier_moved` history event each and ONE audit row (`tier_move`, actor `(rules)`,
    /// the ids, detail `{"rule","from","to","after_ms"}`). The `tier = <from>` guards make
    /// a pass run twice around a failover harmless.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn move_aged(
        &self,
        rules: &RuleSet,
        now: i64,
        limit: u32,
    ) -> Result<MoveReport, StoreError> {
        let limit = i64::from(limit.clamp(1, 5_000));
        let mut report = MoveReport::default();
        for rule in rules.rules.iter().filter(|r| !r.disabled) {
            let Some(mv) = rule.move_after else { continue };
            let from = rule.tier;
            let cutoff = now.saturating_sub(mv.after_ms.min(i64::MAX as u64) as i64);
            let due: Vec<i64> = on_pool!(self, |pool, DB| {
                let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                    "SELECT dead_letter_id FROM dead_letter_tiers WHERE rule_name = ",
                );
                DB::bind(&mut qb, Val::Text(Some(rule.name.as_str())));
                qb.push(" AND tier = ");
                DB::bind(&mut qb, Val::Text(Some(from.as_str())));
                qb.push(" AND tier_at_ms <= ");
                DB::bind(&mut qb, Val::I64(Some(cutoff)));
                qb.push(" ORDER BY tier_at_ms LIMIT ");
                DB::bind(&mut qb, Val::I64(Some(limit)));
                qb.build_query_scalar::<i64>()
                    .fetch_all(pool)
                    .await
                    .map_err(store_error)
            })?;
            if due.is_empty() {
                continue;
            }
            report.more |= due.len() as i64 >= limit;
            let after_text =
                humantime::format_duration(std::time::Duration::from_millis(mv.after_ms))
                    .to_string();
            let reason = format!(
                "moved by rule `{}` (#{}): {after_text} in {from} (move_after.to = {})",
                rule.name, rule.position, mv.to
            );
            let moved: Vec<i64> = on_pool!(self, |pool, DB| {
                let mut tx = self.begin_write(pool).await?;
                let mut qb: QueryBuilder<'_, DB> =
                    QueryBuilder::new("UPDATE dead_letters SET tier = ");
                DB::bind(&mut qb, Val::Text(Some(mv.to.as_str())));
                qb.push(" WHERE tier = ");
                DB::bind(&mut qb, Val::Text(Some(from.as_str())));
                qb.push(" AND id IN ");
                DB::push_json_ids(&mut qb, ids_json(&due));
                qb.push(" RETURNING id");
                let mut moved: Vec<i64> = qb
                    .build_query_scalar()
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(store_error)?;
                moved.sort_unstable();
                if !moved.is_empty() {
                    let mut qb: QueryBuilder<'_, DB> =
                        QueryBuilder::new("UPDATE dead_letter_tiers SET tier = ");
                    DB::bind(&mut qb, Val::Text(Some(mv.to.as_str())));
                    qb.push(", tier_at_ms = ");
                    DB::bind(&mut qb, Val::I64(Some(now)));
                    qb.push(", next_attempt_at_ms = NULL, reason = ");
                    DB::bind(&mut qb, Val::OwnedText(Some(reason.clone())));
                    qb.push(" WHERE dead_letter_id IN ");
                    DB::push_json_ids(&mut qb, ids_json(&moved));
                    qb.build().execute(&mut *tx).await.map_err(store_error)?;
                    let detail = format!("{from} → {}: ", mv.to);
                    super::actions::insert_events_for_ids::<DB>(
                        &moved,
                        now,
                        "tier_moved",
                        SORTER_ACTOR,
                        |qb| {
                            DB::bind(qb, Val::OwnedText(Some(detail)));
                        },
                        reason.clone(),
                        None,
                    )
                    .build()
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
                    let audit = crate::actions::NewAuditEntry {
                        actor: SORTER_ACTOR.to_string(),
                        action: "tier_move".to_string(),
                        outcome: format!("ok: {} moved from {from} to {}", moved.len(), mv.to),
                        count: moved.len() as i64,
                        ids: Some(ids_json(&moved)),
                        filter: None,
                        reason: Some(reason.clone()),
                        client_ip: None,
                        user_agent: None,
                        job_id: None,
                        via_token: None,
                        detail: Some(
                            serde_json::json!({
                                "rule": rule.name,
                                "from": from.as_str(),
                                "to": mv.to.as_str(),
                                "after_ms": mv.after_ms,
                            })
                            .to_string(),
                        ),
                    };
                    super::audit::insert_audit::<DB>(&audit, now)
                        .build()
                        .execute(&mut *tx)
                        .await
                        .map_err(store_error)?;
                }
                tx.commit().await.map_err(store_error)?;
                Ok::<_, StoreError>(moved)
            })?;
            if !moved.is_empty() {
                report.moved += moved.len() as u64;
                report
                    .per_rule
                    .push((rule.name.clone(), from, mv.to, moved.len() as u64));
            }
        }
        Ok(report)
    }
}
