//! One retention tick: count each DLQ topic's usage (backpressure follows it), and on the
//! leader plan and carry out a purge run — archive first when configured, then delete in
//! chunks of `retention.chunk_rows`, each ONE short transaction, with one audit row per run.

use std::sync::Arc;

use serde::Serialize;

use super::backpressure::Backpressure;
use super::policy::{LimitAction, Policy, RetentionConfig};
use super::{RetentionStatus, RETENTION_ACTOR};
use crate::actions::NewAuditEntry;
use crate::archive::writer::ArchiveWriter;
use crate::archive::{run_dir_name, ArchiveError, ArchiveLocation, ArchiveTarget};
use crate::store::{CandidateQuery, Store, StoreError, RUN_STALE_AFTER_MS};

/// Which limit made a dead letter purgeable (the `reason` label of
/// `redrive_retention_purged_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PurgeReason {
    MaxAge,
    MaxCount,
    MaxBytes,
    DeletedMaxAge,
    ReplayedMaxAge,
    /// In the archive automation tier longer than `archive_tier_max_age_ms`.
    ArchiveTierMaxAge,
}

impl PurgeReason {
    pub const ALL: [PurgeReason; 6] = [
        PurgeReason::MaxAge,
        PurgeReason::MaxCount,
        PurgeReason::MaxBytes,
        PurgeReason::DeletedMaxAge,
        PurgeReason::ReplayedMaxAge,
        PurgeReason::ArchiveTierMaxAge,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PurgeReason::MaxAge => "max_age",
            PurgeReason::MaxCount => "max_count",
            PurgeReason::MaxBytes => "max_bytes",
            PurgeReason::DeletedMaxAge => "deleted_max_age",
            PurgeReason::ReplayedMaxAge => "replayed_max_age",
            PurgeReason::ArchiveTierMaxAge => "archive_tier_max_age",
        }
    }
}

/// The statuses an archive-tier purge deletes (re-checked by the delete): all but
/// `replay_pending`.
const ARCHIVE_TIER_STATUSES: [&str; 5] =
    ["new", "replay_failed", "replayed", "re_failed", "deleted"];

/// The dead letters one limit purges in a run, and what came of it.
#[derive(Debug, Clone, Serialize)]
pub struct PurgeGroup {
    pub dlq_topic: String,
    pub reason: PurgeReason,
    /// The statuses the delete re-checks.
    #[serde(skip)]
    statuses: Vec<&'static str>,
    #[serde(skip)]
    ids: Vec<i64>,
    /// Selected for this run.
    pub selected: u64,
    /// Deleted (a dead letter whose status changed meanwhile is left alone).
    pub purged: u64,
    pub first_id: i64,
    pub last_id: i64,
    /// Oldest and newest of the times the limit measures (dead-lettered, or deleted/replayed).
    pub oldest_ms: i64,
    pub newest_ms: i64,
}

/// What one purge run did.
#[derive(Debug, Clone, Serialize)]
pub struct PurgeReport {
    pub run_id: i64,
    pub purged: u64,
    pub archived: u64,
    /// Delete transactions.
    pub chunks: u64,
    /// The run's manifest, when it archived.
    pub archive: Option<String>,
    pub groups: Vec<PurgeGroup>,
}

use crate::clock::now_ms;

/// The configured archive opened, if purges archive first.
///
/// Errors: those of [`ArchiveTarget::open`].
pub fn archive_target(config: &RetentionConfig) -> Result<Option<ArchiveTarget>, ArchiveError> {
    match &config.archive {
        Some(a) if a.before_purge => {
            let loc = ArchiveLocation::parse(&a.location)?;
            Ok(Some(ArchiveTarget::open(&loc, a)?))
        }
        _ => Ok(None),
    }
}

/// Live usage of a topic: dead letters not `deleted`/`replayed`/`re_failed`, and their bytes.
fn live(usage: &[crate::store::StatusUsage]) -> (u64, u64) {
    usage
        .iter()
        .filter(|u| !matches!(u.status.as_str(), "deleted" | "replayed" | "re_failed"))
        .fold((0, 0), |(c, b), u| {
            (c + u.count.max(0) as u64, b + u.bytes.max(0) as u64)
        })
}

/// One tick (see the module docs). Returns the purge run's report, if one ran.
///
/// Errors: the store's, or the archive's (then nothing of the run was deleted).
pub async fn tick(
    config: &RetentionConfig,
    store: &Store,
    backpressure: &Arc<Backpressure>,
    status: &RetentionStatus,
    archive: Option<&ArchiveTarget>,
    leader: bool,
) -> Result<Option<PurgeReport>, ArchiveError> {
    let now = now_ms();
    if leader {
        close_interrupted_runs(store).await?;
    }
    let topics = store.retention_topics().await?;
    let mut groups = Vec::new();
    let mut budget = config.max_rows_per_run;
    for topic in &topics {
        let usage = store.retention_usage(topic).await?;
        let (count, bytes) = live(&usage);
        backpressure.set_usage(topic, count, bytes);
        if leader && budget > 0 {
            let policy = config.policy(topic);
            plan_topic(
                store,
                topic,
                &policy,
                (count, bytes),
                now,
                &mut budget,
                &mut groups,
            )
            .await?;
        }
    }
    // Every topic's usage is known now: ingest stops holding the ones it held until then.
    backpressure.mark_counted();
    if groups.is_empty() {
        return Ok(None);
    }
    let report = execute(config, store, status, archive, groups, now).await?;
    // Space freed: backpressure may lift at once rather than at the next tick.
    for g in &report.groups {
        let (count, bytes) = live(&store.retention_usage(&g.dlq_topic).await?);
        backpressure.set_usage(&g.dlq_topic, count, bytes);
    }
    Ok(Some(report))
}

fn group(topic: &str, reason: PurgeReason, statuses: Vec<&'static str>) -> PurgeGroup {
    PurgeGroup {
        dlq_topic: topic.to_string(),
        reason,
        statuses,
        ids: Vec::new(),
        selected: 0,
        purged: 0,
        first_id: i64::MAX,
        last_id: i64::MIN,
        oldest_ms: i64::MAX,
        newest_ms: i64::MIN,
    }
}

impl PurgeGroup {
    fn add(&mut self, c: &crate::store::Candidate) {
        self.ids.push(c.id);
        self.selected += 1;
        self.first_id = self.first_id.min(c.id);
        self.last_id = self.last_id.max(c.id);
        self.oldest_ms = self.oldest_ms.min(c.at_ms);
        self.newest_ms = self.newest_ms.max(c.at_ms);
    }
}

/// Adds `topic`'s purge groups to `out`, at most `budget` dead letters in all.
async fn plan_topic(
    store: &Store,
    topic: &str,
    policy: &Policy,
    (count, bytes): (u64, u64),
    now: i64,
    budget: &mut usize,
    out: &mut Vec<PurgeGroup>,
) -> Result<(), StoreError> {
    let done = [
        (
            "deleted",
            policy.deleted_max_age_ms,
            PurgeReason::DeletedMaxAge,
        ),
        (
            "replayed",
            policy.replayed_max_age_ms,
            PurgeReason::ReplayedMaxAge,
        ),
        // Replayed, then came back (`docs/replay.md`, "Outcome"): as done as `replayed`.
        (
            "re_failed",
            policy.replayed_max_age_ms,
            PurgeReason::ReplayedMaxAge,
        ),
    ];
    for (st, age, reason) in done {
        let Some(age) = age else { continue };
        if *budget == 0 {
            return Ok(());
        }
        let q = CandidateQuery::Done {
            status: st,
            before_ms: now.saturating_sub(age as i64),
        };
        let found = store.retention_candidates(topic, q, *budget).await?;
        if !found.is_empty() {
            let mut g = group(topic, reason, vec![st]);
            found.iter().for_each(|c| g.add(c));
            *budget -= found.len();
            out.push(g);
        }
    }

    // The archive automation tier (`docs/automation.md`): by time in the tier, any status
    // but `replay_pending` (a replay in flight is never purged).
    if let (Some(age), true) = (policy.archive_tier_max_age_ms, *budget > 0) {
        let q = CandidateQuery::ArchiveTier {
            before_ms: now.saturating_sub(age as i64),
        };
        let found = store.retention_candidates(topic, q, *budget).await?;
        if !found.is_empty() {
            let mut g = group(
                topic,
                PurgeReason::ArchiveTierMaxAge,
                ARCHIVE_TIER_STATUSES.to_vec(),
            );
            found.iter().for_each(|c| g.add(c));
            *budget -= found.len();
            out.push(g);
        }
    }

    // Live dead letters: oldest first, while a limit says so.
    let purge_limits = policy.action == LimitAction::Purge;
    let excess_count = match policy.max_count {
        Some(max) if purge_limits => count.saturating_sub(max),
        _ => 0,
    };
    let excess_bytes = match policy.max_bytes {
        Some(max) if purge_limits => bytes.saturating_sub(max),
        _ => 0,
    };
    let cutoff = policy.max_age_ms.map(|a| now.saturating_sub(a as i64));
    if cutoff.is_none() && excess_count == 0 && excess_bytes == 0 {
        return Ok(());
    }
    let statuses: Vec<&'static str> = if policy.purge_new {
        vec!["replay_failed", "new"]
    } else {
        vec!["replay_failed"]
    };
    // Bytes: how many rows free them is unknown, so look at up to the budget.
    let limit = if excess_bytes > 0 || excess_count == 0 {
        *budget
    } else {
        (*budget).min(usize::try_from(excess_count).unwrap_or(usize::MAX))
    };
    if limit == 0 {
        return Ok(());
    }
    let q = CandidateQuery::Live {
        statuses: &statuses,
        before_ms: if excess_count == 0 && excess_bytes == 0 {
            cutoff
        } else {
            None
        },
    };
    let found = store.retention_candidates(topic, q, limit).await?;
    let mut by_reason: Vec<PurgeGroup> = Vec::new();
    let (mut taken, mut freed) = (0u64, 0u64);
    for c in &found {
        let reason = if cutoff.is_some_and(|t| c.at_ms < t) {
            PurgeReason::MaxAge
        } else if taken < excess_count {
            PurgeReason::MaxCount
        } else if freed < excess_bytes {
            PurgeReason::MaxBytes
        } else {
            break;
        };
        taken += 1;
        freed += c.bytes.max(0) as u64;
        match by_reason.iter_mut().find(|g| g.reason == reason) {
            Some(g) => g.add(c),
            None => {
                let mut g = group(topic, reason, statuses.clone());
                g.add(c);
                by_reason.push(g);
            }
        }
    }
    if (taken < excess_count || freed < excess_bytes) && found.len() < limit {
        tracing::warn!(
            dlq_topic = topic,
            live = count,
            bytes,
            purge_new = policy.purge_new,
            "over a retention limit with nothing more to purge: only replay_failed dead \
             letters are purged unless purge_new = true"
        );
    }
    *budget -= taken as usize;
    out.extend(by_reason);
    Ok(())
}

/// Archives (when configured) then deletes the planned groups, chunk by chunk.
async fn execute(
    config: &RetentionConfig,
    store: &Store,
    status: &RetentionStatus,
    archive: Option<&ArchiveTarget>,
    mut groups: Vec<PurgeGroup>,
    now: i64,
) -> Result<PurgeReport, ArchiveError> {
    let run_id = store
        .start_retention_run("purge", RETENTION_ACTOR, None)
        .await?;
    let mut report = PurgeReport {
        run_id,
        purged: 0,
        archived: 0,
        chunks: 0,
        archive: None,
        groups: Vec::new(),
    };
    if let Some(target) = archive {
        match archive_groups(config, store, target, &groups, run_id, now).await {
            Ok((archived, location)) => {
                store
                    .update_retention_run(run_id, archived as i64, Some(&location))
                    .await?;
                report.archived = archived;
                report.archive = Some(location);
            }
            Err(e) => {
                let outcome = format!("failed: archiving first: {e}; nothing purged");
                end_failed(store, run_id, &groups, outcome, 0, &e.to_string()).await;
                return Err(e);
            }
        }
    }
    let deleted = async {
        for i in 0..groups.len() {
            let ids = std::mem::take(&mut groups[i].ids);
            for chunk in ids.chunks(config.chunk_rows) {
                let detail = detail_json(&groups);
                let n = purge_chunk_retrying(store, run_id, chunk, &groups[i].statuses, &detail)
                    .await?;
                groups[i].purged += n;
                report.purged += n;
                report.chunks += 1;
                status.record_purged(&groups[i].dlq_topic, groups[i].reason, n);
            }
        }
        Ok::<(), StoreError>(())
    }
    .await;
    if let Err(e) = deleted {
        // Its committed chunks stay purged; the next tick plans again from what is left.
        let outcome = format!(
            "failed: {e}; {} purged in {} chunks before it",
            report.purged, report.chunks
        );
        end_failed(
            store,
            run_id,
            &groups,
            outcome,
            report.purged,
            &e.to_string(),
        )
        .await;
        return Err(e.into());
    }
    let detail = detail_json(&groups);
    let reasons: Vec<String> = groups
        .iter()
        .filter(|g| g.purged > 0)
        .map(|g| format!("{} {} by {}", g.purged, g.dlq_topic, g.reason.as_str()))
        .collect();
    let archived = match &report.archive {
        Some(loc) => format!("; archived first to {loc}"),
        None => String::new(),
    };
    let outcome = format!(
        "ok: {} purged in {} chunks ({}){archived}",
        report.purged,
        report.chunks,
        reasons.join(", ")
    );
    let audit = run_audit(&groups, &detail, outcome, report.purged);
    store
        .finish_retention_run(run_id, "done", &detail, None, &audit)
        .await?;
    status.record_run(report.archived, report.chunks, now_ms());
    tracing::info!(
        run = run_id,
        purged = report.purged,
        chunks = report.chunks,
        archived = report.archived,
        "retention purge run finished"
    );
    report.groups = groups;
    Ok(report)
}

fn limits_summary(groups: &[PurgeGroup]) -> String {
    let mut names: Vec<&str> = groups.iter().map(|g| g.reason.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    names.join(", ")
}

/// The run's per-group detail as JSON (counts and id/time ranges).
fn detail_json(groups: &[PurgeGroup]) -> String {
    serde_json::to_string(groups).unwrap_or_else(|_| "[]".to_string())
}

/// Writes every planned dead letter to ONE archive object of the run, then its manifest.
/// Returns how many were written and the manifest's location.
async fn archive_groups(
    config: &RetentionConfig,
    store: &Store,
    target: &ArchiveTarget,
    groups: &[PurgeGroup],
    run_id: i64,
    now: i64,
) -> Result<(u64, String), ArchiveError> {
    let dir = run_dir_name(now, "purge", run_id);
    let reason = Some(format!("retention limits: {}", limits_summary(groups)));
    let mut w =
        ArchiveWriter::begin(target, &dir, "purge", run_id, RETENTION_ACTOR, reason, now).await?;
    let result = async {
        for g in groups {
            for chunk in g.ids.chunks(config.chunk_rows) {
                let rows = store.archive_rows(chunk).await?;
                w.write(&rows).await?;
            }
        }
        Ok::<(), ArchiveError>(())
    }
    .await;
    if let Err(e) = result {
        w.abort().await;
        return Err(e);
    }
    let location = w.manifest_location().to_string();
    let manifest = w.finish().await?;
    Ok((manifest.records, location))
}

/// A purge run's audit row: `outcome`, `count` dead letters purged, the run's `detail` as the
/// filter and its limits as the reason.
fn run_audit(groups: &[PurgeGroup], detail: &str, outcome: String, count: u64) -> NewAuditEntry {
    NewAuditEntry {
        actor: RETENTION_ACTOR.to_string(),
        action: "retention_purge".to_string(),
        outcome,
        count: count as i64,
        filter: Some(detail.to_string()),
        reason: Some(format!("retention limits: {}", limits_summary(groups))),
        ..NewAuditEntry::default()
    }
}

/// Ends run `run_id` `failed` with `error` and its audit row (`outcome`, `purged`), at once:
/// left `running`, it would wait for the stale-run sweep and then be called interrupted. If
/// even that write fails, it is logged and the sweep closes the run later.
async fn end_failed(
    store: &Store,
    run_id: i64,
    groups: &[PurgeGroup],
    outcome: String,
    purged: u64,
    error: &str,
) {
    let detail = detail_json(groups);
    let audit = run_audit(groups, &detail, outcome, purged);
    if let Err(closing) = store
        .finish_retention_run(run_id, "failed", &detail, Some(error), &audit)
        .await
    {
        tracing::warn!(run = run_id, error = %closing, "could not record the purge run's failure; the stale-run sweep will");
    }
}

/// [`Store::purge_chunk`], tried again (after 100 ms, then 200 ms) while its error is
/// transient ([`StoreError::is_transient`]), at most [`crate::store::TX_ATTEMPTS`] times.
/// On PostgreSQL a chunk can be the victim of a deadlock (40P01) with another writer of the
/// same dead letters and the same aggregate rows (`dl_stats_groups`, updated by the row
/// triggers in each statement's row order), such as the tier sorter; the database rolls it
/// back, and the chunk, read again under its status condition, is safe to repeat — even
/// after a failed commit, which then deletes nothing more. Returns how many dead letters
/// were deleted.
///
/// Errors: the last attempt's.
pub async fn purge_chunk_retrying(
    store: &Store,
    run_id: i64,
    ids: &[i64],
    statuses: &[&str],
    detail: &str,
) -> Result<u64, StoreError> {
    crate::store::retry_rolled_back("purge chunk", || async {
        // Every error counts as before the commit: repeating is safe either way.
        Ok(store.purge_chunk(run_id, ids, statuses, detail).await?)
    })
    .await
}

/// Audits runs whose process died mid-way (left `running`), as `interrupted`.
async fn close_interrupted_runs(store: &Store) -> Result<(), StoreError> {
    for r in store.stale_retention_runs(RUN_STALE_AFTER_MS).await? {
        let audit = NewAuditEntry {
            actor: r.actor.clone(),
            action: if r.kind == "purge" {
                "retention_purge".to_string()
            } else {
                "archive".to_string()
            },
            outcome: format!(
                "interrupted: {} purged in {} chunks before its process stopped",
                r.purged, r.chunks
            ),
            count: r.purged,
            filter: Some(r.detail.clone()),
            ..NewAuditEntry::default()
        };
        store
            .finish_retention_run(r.id, "interrupted", &r.detail, None, &audit)
            .await?;
    }
    Ok(())
}
