//! The replay outcome of one dead letter in `GET /api/v1/dead-letters/{id}`
//! (`docs/replay.md`, "Outcome"): what it came back from, the chain around it, and the
//! "no re-failure seen" verdict — the same facts as the detail page's "Replay outcome".

use redrive_core::model::DeadLetter;
use redrive_core::outcome::{ChainLink, ReplayChain, Verdict};
use serde::Serialize;

use crate::api::rfc3339;

/// `replay_outcome` of a dead letter's JSON.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ReplayOutcomeItem {
    /// The earlier dead letter this one came back from after a replay; `null` when it did
    /// not arrive from a replay redrive knows of.
    pub came_back_from: Option<CameBackFrom>,
    /// `watching` (replayed, inside `replay_outcome_window_ms`), `no_refailure_seen`
    /// (replayed, nothing came back within the window), `came_back` (`re_failed`), or `null`
    /// (never published by a replay, or in another state).
    pub verdict: Option<&'static str>,
    /// End of the watch window, RFC 3339 UTC; only with `watching`.
    pub watching_until: Option<String>,
    /// Its latest publish by a replay, RFC 3339 UTC, and that replay job's id.
    pub last_published_at: Option<String>,
    pub last_published_job: Option<String>,
    /// Earlier dead letters of the chain, nearest first, at most 20 (`docs/limits.md`).
    pub earlier: Vec<ChainItem>,
    /// The chain goes back further than `earlier` shows.
    pub earlier_more: bool,
    /// An earlier dead letter the chain names that retention purged: its id.
    pub earlier_purged: Option<i64>,
    /// Later dead letters that came back from its replays, oldest first, at most 20.
    pub later: Vec<ChainItem>,
    /// More later ones exist than `later` shows.
    pub later_more: bool,
}

/// How a dead letter came back after a replay.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct CameBackFrom {
    /// The earlier dead letter's id (it may have been purged since).
    pub id: i64,
    /// `idempotency_key`, `dead_letter_id`, `published_position`, `source_position` or
    /// `message_id` (strongest evidence first).
    #[schema(value_type = String)]
    pub linked_via: redrive_core::model::LinkVia,
    /// The replay job whose publish came back, when known.
    pub job_id: Option<String>,
    /// How many times this record has come back (1 = the first time).
    pub repeat_failures: i32,
}

/// One dead letter of the chain.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ChainItem {
    pub id: i64,
    /// Its status now (see `status` of a dead letter).
    pub status: &'static str,
    /// RFC 3339 UTC.
    pub dead_lettered_at: Option<String>,
    /// How it was linked to the one before it; `null` for the first of the chain.
    #[schema(value_type = Option<String>)]
    pub linked_via: Option<redrive_core::model::LinkVia>,
    pub job_id: Option<String>,
    /// Its repeat-failure count (0 for the first of the chain).
    pub repeat_failures: i32,
}

impl ReplayOutcomeItem {
    /// The outcome of `dl` with its `chain`, at `now_ms` with the watch window `window_ms`.
    pub fn new(dl: &DeadLetter, chain: &ReplayChain, now_ms: i64, window_ms: u64) -> Self {
        let verdict = chain.verdict(dl.summary.status, now_ms, window_ms);
        ReplayOutcomeItem {
            came_back_from: dl.link.as_ref().map(|l| CameBackFrom {
                id: l.earlier_id,
                linked_via: l.via,
                job_id: l.job_id.clone(),
                repeat_failures: dl.summary.repeat_failures,
            }),
            verdict: verdict.map(|v| match v {
                Verdict::Watching { .. } => "watching",
                Verdict::NoRefailureSeen => "no_refailure_seen",
                Verdict::CameBack => "came_back",
            }),
            watching_until: match verdict {
                Some(Verdict::Watching { until_ms }) => rfc3339(until_ms),
                _ => None,
            },
            last_published_at: chain.last_published_at_ms.and_then(rfc3339),
            last_published_job: chain.last_published_job.clone(),
            earlier: chain.earlier.iter().map(ChainItem::from).collect(),
            earlier_more: chain.earlier_more,
            earlier_purged: chain.earlier_purged,
            later: chain.later.iter().map(ChainItem::from).collect(),
            later_more: chain.later_more,
        }
    }
}

impl From<&ChainLink> for ChainItem {
    fn from(l: &ChainLink) -> Self {
        ChainItem {
            id: l.id,
            status: l.status.as_str(),
            dead_lettered_at: rfc3339(l.dead_lettered_at_ms),
            linked_via: l.via,
            job_id: l.job_id.clone(),
            repeat_failures: l.repeat_failures,
        }
    }
}
