//! The store side of scheduled reprocessing (issue 13, migration 0022; `docs/automation.md`,
//! "Scheduled reprocessing").
//!
//! A **round** of a transient rule ([`Store::run_round`]) is ONE write transaction: it picks
//! the rule's due dead letters (`dead_letter_tiers.rule_name` = the rule, tier `transient`,
//! `next_attempt_at_ms <= now`, not loop-guarded, the dead letter still `new` or
//! `replay_failed`, with a target topic), oldest due first, at most `batch_size`; replays them
//! through the same statements as a manual replay of explicit ids (`actions.rs`,
//! `replay_ids_in_tx!`: `replay_pending`, job, outbox rows with fresh UUID v4 idempotency
//! keys, per-key order, history events, audit row), with the rule as the actor
//! (`rule:<name>`); counts the attempt (`auto_attempts + 1`, `next_attempt_at_ms` NULL) for
//! each dead letter queued; and writes the rule's `rule_states` row. A crash before the
//! commit leaves nothing; after it, the relay publishes exactly the committed outbox rows,
//! each with its idempotency key. On PostgreSQL the pick locks its rows (`FOR UPDATE SKIP
//! LOCKED`) and re-checks `next_attempt_at_ms`, so two leaders overlapping around a failover
//! cannot queue one dead letter twice; on SQLite writers take turns.
//!
//! When the replayed record comes back, ingest links it to its earlier self and the sorter
//! (`tiers.rs`) sorts the new dead letter with the carried-over attempts: due again after the
//! next backoff, or escalated to `manual` once `max_attempts` are used up.

use sqlx::QueryBuilder;

use super::actions::clean_text;
use super::dialect::{store_error, Dialect, Val};
use super::replay_request::replay_ids_in_tx;
use super::{Pool, Store, StoreError};
use crate::actions::{Actor, NewAuditEntry, ReplayJob, ReplayOptions, ReplayRequest, Selection};
use crate::automation::TierRule;

/// Prefix of a rule's actor name: a round's job, events and audit rows, and a self-pause,
/// are by `rule:<name>` (a system actor, as the canary's `(canary)`).
pub const RULE_ACTOR_PREFIX: &str = "rule:";

/// The system actor of rule `name` (`rule:<name>`): admin powers, no topic scope, no client.
pub fn rule_actor(name: &str) -> Actor {
    Actor::admin(format!("{RULE_ACTOR_PREFIX}{name}"))
}

/// What a round's scheduler needs from a rule's `rule_states` row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoundState {
    /// Paused (by a person or by itself): no rounds.
    pub paused: bool,
    /// The last round that ran or was skipped, epoch ms; `None`: never.
    pub last_round_at_ms: Option<i64>,
    pub last_round_outcome: Option<String>,
    /// What the gate said, or why the round did nothing.
    pub last_round_message: Option<String>,
    /// Why it is paused (a person's reason, or the self-pause verdict).
    pub paused_reason: Option<String>,
    /// When it was last paused, epoch ms (the self-pause judges jobs created after it).
    pub paused_at_ms: Option<i64>,
}

/// The rule's due dead letters, as the gate reads them before a round.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DueSummary {
    /// Due now (at most the batch size).
    pub due: u64,
    /// Their error groups (fingerprints), distinct.
    pub fingerprints: Vec<String>,
    /// Their source topics, distinct (the lag gate's topics when the rule has no target).
    pub source_topics: Vec<String>,
}

/// What a round did.
#[derive(Debug, Clone)]
pub struct RoundResult {
    /// The replay job (`None`: nothing was due, no job was created).
    pub job: Option<ReplayJob>,
    /// Dead letters queued, ascending.
    pub queued: Vec<i64>,
}

/// A rule's replays so far, judged (`docs/automation.md`, "Rule self-pause").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RefailTally {
    /// Published by the rule's jobs since the judgement started.
    pub replayed: i64,
    /// Of those, came back or past their outcome window: judged.
    pub judged: i64,
    /// Of those, came back as dead letters.
    pub refailed: i64,
}

/// The `WHERE` of a rule's due dead letters (after `FROM dead_letter_tiers t JOIN
/// dead_letters d ON d.id = t.dead_letter_id`).
fn push_due<'a, DB: Dialect>(
    qb: &mut QueryBuilder<'a, DB>,
    rule: &'a str,
    target: Option<&'a str>,
    now: i64,
) {
    qb.push(" WHERE t.rule_name = ");
    DB::bind(qb, Val::Text(Some(rule)));
    qb.push(
        " AND t.tier = 'transient' AND t.loop_guarded = 0 AND t.next_attempt_at_ms IS NOT NULL \
         AND t.next_attempt_at_ms <= ",
    );
    DB::bind(qb, Val::I64(Some(now)));
    // No `d.tier` condition: `t.tier` is the same value (the sorter and the age moves write
    // both in one transaction), and on PostgreSQL a `d.tier` predicate lets stale statistics
    // (analysed while the backlog was unsorted, `tier` all NULL) pick `dead_letters_by_tier`
    // as the inner side of a nested loop: one index range of every transient dead letter per
    // due row (10^10 row visits at 100k; the bench ran for 18 minutes). Without it the join
    // is by primary key: 0.3 s at 100k due.
    qb.push(" AND d.status IN ('new', 'replay_failed') AND COALESCE(");
    DB::bind(qb, Val::Text(target));
    qb.push(", d.source_topic) IS NOT NULL");
}

impl Store {
    /// The scheduler's view of rule `name`'s `rule_states` row (default when it has none).
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn round_state(&self, name: &str) -> Result<RoundState, StoreError> {
        #[allow(clippy::type_complexity)]
        let row: Option<(
            i32,
            Option<i64>,
            Option<String>,
            Option<i64>,
            Option<String>,
            Option<String>,
        )> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT paused, last_round_at_ms, last_round_outcome, paused_at_ms, \
                     last_round_message, paused_reason FROM rule_states WHERE rule_name = ",
            );
            DB::bind(&mut qb, Val::Text(Some(name)));
            qb.build_query_as().fetch_optional(pool).await
        })
        .map_err(store_error)?;
        Ok(row
            .map(|(p, at, outcome, paused_at, message, reason)| RoundState {
                paused: p != 0,
                last_round_at_ms: at,
                last_round_outcome: outcome,
                last_round_message: message,
                paused_reason: reason,
                paused_at_ms: paused_at,
            })
            .unwrap_or_default())
    }

    /// Rule `rule`'s dead letters due at `now_ms` (at most its batch size), with their error
    /// groups and source topics: what the health gate checks before a round.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn due_summary(
        &self,
        rule: &TierRule,
        now_ms: i64,
    ) -> Result<DueSummary, StoreError> {
        let Some(s) = &rule.schedule else {
            return Ok(DueSummary::default());
        };
        let target = s.target_topic.as_deref();
        let rows: Vec<(String, Option<String>)> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT d.fingerprint, d.source_topic FROM dead_letter_tiers t \
                 JOIN dead_letters d ON d.id = t.dead_letter_id",
            );
            push_due(&mut qb, &rule.name, target, now_ms);
            qb.push(" ORDER BY t.next_attempt_at_ms, t.dead_letter_id LIMIT ");
            DB::bind(&mut qb, Val::I64(Some(i64::from(s.batch_size.max(1)))));
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        let mut out = DueSummary {
            due: rows.len() as u64,
            ..DueSummary::default()
        };
        for (fp, src) in rows {
            out.fingerprints.push(fp);
            if let Some(s) = src {
                out.source_topics.push(s);
            }
        }
        out.fingerprints.sort();
        out.fingerprints.dedup();
        out.source_topics.sort();
        out.source_topics.dedup();
        Ok(out)
    }

    /// The newest `dead_lettered_at_ms` among the dead letters of the error groups
    /// `fingerprints` (any status), epoch ms; `None` when there is none. The quiet-for gate:
    /// an error group is quiet when this is at least `quiet_for` ago. Index
    /// `dead_letters_by_fingerprint`.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn newest_in_groups(
        &self,
        fingerprints: &[String],
    ) -> Result<Option<i64>, StoreError> {
        if fingerprints.is_empty() {
            return Ok(None);
        }
        let mut newest: Option<i64> = None;
        for fp in fingerprints.iter().take(1_000) {
            let at: Option<i64> = on_pool!(self, |pool, DB| {
                let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                    "SELECT MAX(dead_lettered_at_ms) FROM dead_letters WHERE fingerprint = ",
                );
                DB::bind(&mut qb, Val::Text(Some(fp.as_str())));
                qb.build_query_scalar().fetch_one(pool).await
            })
            .map_err(store_error)?;
            newest = newest.max(at);
        }
        Ok(newest)
    }

    /// Runs one round of transient rule `rule` (active rule set `version`) at `now_ms`, in
    /// ONE write transaction (module docs). Nothing due: no job, and the `rule_states` row
    /// says `nothing_due`. The job's lag gate is the rule's, so the relay also holds it while
    /// the consumer group is over its limit.
    ///
    /// Errors: `Invalid` (a rule without a schedule, a bad target topic), `Unavailable`,
    /// `Database`. On error nothing is changed.
    pub async fn run_round(
        &self,
        rule: &TierRule,
        version: i64,
        now_ms: i64,
    ) -> Result<RoundResult, StoreError> {
        let Some(schedule) = &rule.schedule else {
            return Err(StoreError::Invalid(format!(
                "rule `{}` has no schedule: only a transient rule runs rounds",
                rule.name
            )));
        };
        let actor = rule_actor(&rule.name);
        let target_in = schedule.target_topic.as_deref();
        let limit = i64::from(schedule.batch_size.max(1));
        let base_req = ReplayRequest {
            selection: Selection::Ids(Vec::new()),
            target_topic: schedule.target_topic.clone(),
            rate_per_sec: Some(
                schedule
                    .rate_per_sec
                    .clamp(1, crate::actions::MAX_RATE_PER_SEC),
            ),
            reason: Some(format!(
                "scheduled round of rule {} (rule set v{version})",
                rule.name
            )),
            options: ReplayOptions {
                lag_gate: rule.gate.lag.clone(),
                ..ReplayOptions::default()
            },
        };
        let (target, reason) = super::replay_request::check_replay(&base_req)?;
        let approval: Option<&super::approvals::ApprovalLink> = None;
        let result: RoundResult = on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT t.dead_letter_id FROM dead_letter_tiers t \
                 JOIN dead_letters d ON d.id = t.dead_letter_id",
            );
            push_due(&mut qb, &rule.name, target_in, now_ms);
            qb.push(" ORDER BY t.next_attempt_at_ms, t.dead_letter_id LIMIT ");
            DB::bind(&mut qb, Val::I64(Some(limit)));
            qb.push(DB::SKIP_LOCKED);
            let mut picked: Vec<i64> = qb
                .build_query_scalar()
                .fetch_all(&mut *tx)
                .await
                .map_err(store_error)?;
            picked.sort_unstable();
            if picked.is_empty() {
                upsert_state::<DB>(
                    &rule.name,
                    now_ms,
                    "nothing_due",
                    "nothing was due",
                    None,
                    0,
                    0,
                    0,
                )
                .build()
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
                tx.commit().await.map_err(store_error)?;
                return Ok(RoundResult {
                    job: None,
                    queued: Vec::new(),
                });
            }
            let req = ReplayRequest {
                selection: Selection::Ids(picked),
                ..base_req.clone()
            };
            let selection_json = serde_json::to_string(&req.selection)
                .map_err(|e| StoreError::Invalid(format!("selection: {e}")))?;
            let mut job = super::replay_request::new_replay_job(
                &actor,
                &req,
                target.clone(),
                reason.clone(),
                now_ms,
                selection_json,
            );
            let sel = &req.selection;
            let target = target.as_deref();
            let queued: Vec<i64> =
                replay_ids_in_tx!(tx, job, &actor, sel, target, reason, approval, now_ms);
            if !queued.is_empty() {
                let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                    "UPDATE dead_letter_tiers SET auto_attempts = auto_attempts + 1, \
                     next_attempt_at_ms = NULL WHERE dead_letter_id IN ",
                );
                DB::push_json_ids(&mut qb, super::actions::ids_json(&queued));
                qb.build().execute(&mut *tx).await.map_err(store_error)?;
            }
            let message = format!(
                "{} replayed by job {} ({} skipped)",
                queued.len(),
                job.id,
                job.skipped
            );
            upsert_state::<DB>(
                &rule.name,
                now_ms,
                "ran",
                &message,
                Some(job.id.as_str()),
                1,
                0,
                queued.len() as i64,
            )
            .build()
            .execute(&mut *tx)
            .await
            .map_err(store_error)?;
            tx.commit().await.map_err(store_error)?;
            Ok::<RoundResult, StoreError>(RoundResult {
                job: Some(job),
                queued,
            })
        })?;
        if let Some(job) = &result.job {
            tracing::info!(
                rule = %rule.name,
                job = %job.id,
                queued = result.queued.len(),
                "scheduled round replayed transient dead letters"
            );
        }
        Ok(result)
    }

    /// Records a round that did not run (`outcome`: `nothing_due`, `gate_closed`, `paused`,
    /// `error`, with `message`: which check, what it answered) at `now_ms`; `gate_closed` and
    /// `error` count in `rounds_skipped`.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn record_skipped_round(
        &self,
        rule: &str,
        outcome: &str,
        message: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let skipped = i32::from(matches!(outcome, "gate_closed" | "error"));
        let message = clean_text(message);
        on_write_conn!(self, |conn, DB| {
            let mut qb = upsert_state::<DB>(rule, now_ms, outcome, &message, None, 0, skipped, 0);
            qb.build().execute(conn).await.map_err(store_error)?;
            Ok(())
        })
    }

    /// Rule `rule`'s replays published since `since_ms` (jobs by `rule:<rule>` created after
    /// it), judged at `now_ms` with outcome window `window_ms`: a published record is judged
    /// once it came back (the outbox row's `refailed_by_id`) or its window has passed.
    /// Also stores in the rule's `rule_states` row (when it has one) `refailed_total`: how
    /// many of everything the rule ever published came back, beside `replayed_total` (the
    /// `/automation` page's "N replayed, M came back").
    ///
    /// Cost: one read of the rule's jobs' counters (`replay_jobs_by_creator`; `published` and
    /// `refailed` are kept by the marks and by ingest, `job_tallies.rs`, `outcome.rs`), plus
    /// the published rows of only those jobs that finished less than `window_ms` ago or still
    /// run (a job finished before `now_ms - window_ms` has every record judged). Before, each
    /// round read every published row the rule ever replayed, the write lock held on SQLite
    /// (`docs/bench.md`, "2026-12-06 (9)").
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn refail_tally(
        &self,
        rule: &str,
        since_ms: i64,
        now_ms: i64,
        window_ms: u64,
    ) -> Result<RefailTally, StoreError> {
        let actor = format!("{RULE_ACTOR_PREFIX}{rule}");
        let judged_before = now_ms.saturating_sub(window_ms.min(i64::MAX as u64) as i64);
        // (replayed, refailed, judged by finishing early enough, refailed ever)
        type JobSums = (Option<i64>, Option<i64>, Option<i64>, Option<i64>);
        let (jobs, recent): (JobSums, Option<i64>) = on_pool!(self, |pool, DB| {
            let published = super::job_tallies::counter("published");
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("SELECT CAST(SUM(CASE WHEN created_at_ms > ");
            DB::bind(&mut qb, Val::I64(Some(since_ms)));
            qb.push(format!(" THEN {published} ELSE 0 END) AS BIGINT), "));
            qb.push("CAST(SUM(CASE WHEN created_at_ms > ");
            DB::bind(&mut qb, Val::I64(Some(since_ms)));
            qb.push(" THEN refailed ELSE 0 END) AS BIGINT), CAST(SUM(CASE WHEN created_at_ms > ");
            DB::bind(&mut qb, Val::I64(Some(since_ms)));
            qb.push(" AND finished_at_ms <= ");
            DB::bind(&mut qb, Val::I64(Some(judged_before)));
            qb.push(format!(
                " THEN {published} ELSE 0 END) AS BIGINT), CAST(SUM(refailed) AS BIGINT) \
                 FROM replay_jobs WHERE created_by = "
            ));
            DB::bind(&mut qb, Val::Text(Some(actor.as_str())));
            let jobs: JobSums = qb
                .build_query_as()
                .fetch_one(pool)
                .await
                .map_err(store_error)?;
            // The rows of the jobs still within the window: the rule's jobs first
            // (`replay_jobs_by_creator`), then each one's published rows (`outbox_claimable`).
            // SQLite keeps a `CROSS JOIN`'s order; otherwise it read every published row of
            // every job (docs/bench.md "2026-12-06 (7)").
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT CAST(SUM(CASE WHEN o.refailed_by_id IS NOT NULL OR o.published_at_ms <= ",
            );
            DB::bind(&mut qb, Val::I64(Some(judged_before)));
            qb.push(
                " THEN 1 ELSE 0 END) AS BIGINT) FROM replay_jobs j CROSS JOIN outbox o \
                 WHERE o.job_id = j.id AND j.created_by = ",
            );
            DB::bind(&mut qb, Val::Text(Some(actor.as_str())));
            qb.push(" AND j.created_at_ms > ");
            DB::bind(&mut qb, Val::I64(Some(since_ms)));
            qb.push(" AND (j.finished_at_ms IS NULL OR j.finished_at_ms > ");
            DB::bind(&mut qb, Val::I64(Some(judged_before)));
            qb.push(") AND o.status = 'published'");
            let (recent,): (Option<i64>,) = qb
                .build_query_as()
                .fetch_one(pool)
                .await
                .map_err(store_error)?;
            Ok::<_, StoreError>((jobs, recent))
        })?;
        let refailed_total = jobs.3.unwrap_or(0);
        on_write_conn!(self, |conn, DB| {
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("UPDATE rule_states SET refailed_total = ");
            DB::bind(&mut qb, Val::I64(Some(refailed_total)));
            qb.push(" WHERE rule_name = ");
            DB::bind(&mut qb, Val::Text(Some(rule)));
            qb.build().execute(&mut *conn).await.map_err(store_error)?;
            Ok::<(), StoreError>(())
        })?;
        Ok(RefailTally {
            replayed: jobs.0.unwrap_or(0),
            judged: jobs.2.unwrap_or(0) + recent.unwrap_or(0),
            refailed: jobs.1.unwrap_or(0),
        })
    }

    /// Pauses rule `rule` by itself (`docs/automation.md`, "Rule self-pause") at `now_ms`:
    /// `rule_states.paused` with `reason`, `paused_by` = `rule:<rule>`, and an audit row
    /// `rule_pause` by the same actor, in one transaction. Returns false (and writes nothing)
    /// when the rule was already paused.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn self_pause_rule(
        &self,
        rule: &str,
        reason: &str,
        tally: RefailTally,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let actor = rule_actor(rule);
        let reason = clean_text(reason);
        on_pool!(self, |pool, DB| {
            let mut tx = self.begin_write(pool).await?;
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("INSERT INTO rule_states (rule_name, paused) VALUES (");
            DB::bind(&mut qb, Val::Text(Some(rule)));
            qb.push(", 0) ON CONFLICT (rule_name) DO NOTHING");
            qb.build().execute(&mut *tx).await.map_err(store_error)?;
            let mut qb: QueryBuilder<'_, DB> =
                QueryBuilder::new("UPDATE rule_states SET paused = 1, paused_reason = ");
            DB::bind(&mut qb, Val::Text(Some(reason.as_str())));
            qb.push(", paused_by = ");
            DB::bind(&mut qb, Val::Text(Some(actor.user.as_str())));
            qb.push(", paused_at_ms = ");
            DB::bind(&mut qb, Val::I64(Some(now_ms)));
            qb.push(" WHERE paused = 0 AND rule_name = ");
            DB::bind(&mut qb, Val::Text(Some(rule)));
            let n = qb
                .build()
                .execute(&mut *tx)
                .await
                .map_err(store_error)?
                .rows_affected();
            if n == 0 {
                tx.rollback().await.map_err(store_error)?;
                return Ok(false);
            }
            let audit = NewAuditEntry {
                count: tally.replayed,
                reason: Some(reason.clone()),
                detail: Some(
                    serde_json::json!({
                        "rule": rule,
                        "replayed": tally.replayed,
                        "judged": tally.judged,
                        "refailed": tally.refailed,
                    })
                    .to_string(),
                ),
                ..NewAuditEntry::by(&actor, "rule_pause", "ok: the rule paused itself")
            };
            super::audit::insert_audit::<DB>(&audit, now_ms)
                .build()
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
            tx.commit().await.map_err(store_error)?;
            Ok::<bool, StoreError>(true)
        })
    }

    /// Rules that paused themselves and are still paused: (rule name, paused_at_ms), for
    /// the `rule_paused` alert.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn self_paused_rules(&self) -> Result<Vec<(String, i64)>, StoreError> {
        on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT rule_name, COALESCE(paused_at_ms, 0) FROM rule_states \
                 WHERE paused = 1 AND paused_by LIKE ",
            );
            DB::bind(&mut qb, Val::Text(Some("rule:%")));
            qb.push(" ORDER BY rule_name");
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)
    }
}

/// `INSERT ... ON CONFLICT DO UPDATE` of a rule's round columns: `last_round_*` from the
/// arguments, `rounds_run + ran`, `replayed_total + replayed`, `last_job_id` kept unless
/// given, `rounds_skipped + skipped`.
#[allow(clippy::too_many_arguments)]
fn upsert_state<'a, DB: Dialect>(
    rule: &'a str,
    now_ms: i64,
    outcome: &'a str,
    message: &'a str,
    job_id: Option<&'a str>,
    ran: i32,
    skipped: i32,
    replayed: i64,
) -> QueryBuilder<'a, DB> {
    let mut qb: QueryBuilder<'a, DB> = QueryBuilder::new(
        "INSERT INTO rule_states (rule_name, last_round_at_ms, last_round_outcome, \
         last_round_message, last_job_id, rounds_run, rounds_skipped, replayed_total) VALUES (",
    );
    DB::bind(&mut qb, Val::Text(Some(rule)));
    qb.push(", ");
    DB::bind(&mut qb, Val::I64(Some(now_ms)));
    qb.push(", ");
    DB::bind(&mut qb, Val::Text(Some(outcome)));
    qb.push(", ");
    DB::bind(&mut qb, Val::Text(Some(message)));
    qb.push(", ");
    DB::bind(&mut qb, Val::Text(job_id));
    qb.push(", ");
    DB::bind(&mut qb, Val::I32(Some(ran)));
    qb.push(", ");
    DB::bind(&mut qb, Val::I32(Some(skipped)));
    qb.push(", ");
    DB::bind(&mut qb, Val::I64(Some(replayed)));
    qb.push(
        ") ON CONFLICT (rule_name) DO UPDATE SET last_round_at_ms = excluded.last_round_at_ms, \
         last_round_outcome = excluded.last_round_outcome, \
         last_round_message = excluded.last_round_message, \
         last_job_id = COALESCE(excluded.last_job_id, rule_states.last_job_id), \
         rounds_run = rule_states.rounds_run + excluded.rounds_run, \
         rounds_skipped = rule_states.rounds_skipped + excluded.rounds_skipped, \
         replayed_total = rule_states.replayed_total + excluded.replayed_total",
    );
    qb
}
