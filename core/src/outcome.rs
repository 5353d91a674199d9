//! What became of a replay: the chain of dead letters that came back after replays, and the
//! verdict shown for a replayed one (`docs/replay.md`, "Outcome").
//!
//! Ingest links a dead letter that came back to its earlier self (`store/outcome.rs`); these
//! are the shapes the detail pages, the job page and the JSON API read.

use serde::{Deserialize, Serialize};

use crate::model::{LinkVia, Status};

/// Default of `replay_outcome_window_ms` (server configuration): how long after its last
/// publish a replayed dead letter is watched for a re-failure before the pages say "no
/// re-failure seen", ms (1 h).
pub const DEFAULT_WINDOW_MS: u64 = 3_600_000;

/// The watch window in force (`replay_outcome_window_ms`), ms: set once by `redrive serve`
/// from its configuration ([`set_window_ms`]), [`DEFAULT_WINDOW_MS`] until then.
static WINDOW_MS: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(DEFAULT_WINDOW_MS);

/// Sets the watch window for this process (ms).
pub fn set_window_ms(ms: u64) {
    WINDOW_MS.store(ms, std::sync::atomic::Ordering::Relaxed);
}

/// The watch window for this process (ms).
pub fn window_ms() -> u64 {
    WINDOW_MS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Most links the detail page shows on each side of the chain (earlier, later); the rest
/// are counted as "more" (`docs/limits.md`).
pub const CHAIN_LINKS_SHOWN: usize = 20;

/// One dead letter of a chain, as the detail page lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainLink {
    pub id: i64,
    pub status: Status,
    /// When it was dead-lettered, epoch ms.
    pub dead_lettered_at_ms: i64,
    /// How it was linked to the one before it (`None` for the first of the chain).
    pub via: Option<LinkVia>,
    /// The replay job whose publish came back as this one, when known.
    pub job_id: Option<String>,
    /// Its repeat-failure count (0 for the first of the chain).
    pub repeat_failures: i32,
}

/// The chain around one dead letter: the earlier dead letters it came back from, nearest
/// first, and the later ones that came back from its replays, oldest first; each side at most
/// [`CHAIN_LINKS_SHOWN`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayChain {
    /// Earlier dead letters, nearest first (the one this came back from, then the one that
    /// came back from, ...).
    pub earlier: Vec<ChainLink>,
    /// The chain goes back further than shown.
    pub earlier_more: bool,
    /// An earlier dead letter named by the chain that is no longer stored (purged by
    /// retention): its id.
    pub earlier_purged: Option<i64>,
    /// Later dead letters that came back from this one's replays, oldest first.
    pub later: Vec<ChainLink>,
    /// More later ones exist than shown.
    pub later_more: bool,
    /// This dead letter's latest publish by a replay, epoch ms (`None`: never published).
    pub last_published_at_ms: Option<i64>,
    /// The job of that publish.
    pub last_published_job: Option<String>,
}

/// What the pages say about a replayed dead letter's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "verdict")]
pub enum Verdict {
    /// Published, still inside the window: a re-failure may yet arrive (until `until_ms`).
    Watching { until_ms: i64 },
    /// Published, and nothing came back within the window.
    NoRefailureSeen,
    /// It came back after its replay (`re_failed`).
    CameBack,
}

impl ReplayChain {
    /// The outcome verdict for a dead letter of `status` with this chain at `now_ms`, given
    /// the watch window `window_ms`; `None` when it was never published by a replay or is
    /// not in a replayed state (new, pending, failed, deleted).
    pub fn verdict(&self, status: Status, now_ms: i64, window_ms: u64) -> Option<Verdict> {
        match status {
            Status::ReFailed => Some(Verdict::CameBack),
            Status::Replayed => {
                let published = self.last_published_at_ms?;
                let until = published.saturating_add(i64::try_from(window_ms).unwrap_or(i64::MAX));
                Some(if now_ms >= until {
                    Verdict::NoRefailureSeen
                } else {
                    Verdict::Watching { until_ms: until }
                })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_follows_status_and_window() {
        let chain = ReplayChain {
            last_published_at_ms: Some(1_000),
            ..ReplayChain::default()
        };
        assert_eq!(
            chain.verdict(Status::Replayed, 1_500, 1_000),
            Some(Verdict::Watching { until_ms: 2_000 })
        );
        assert_eq!(
            chain.verdict(Status::Replayed, 2_000, 1_000),
            Some(Verdict::NoRefailureSeen)
        );
        assert_eq!(
            chain.verdict(Status::ReFailed, 0, 1_000),
            Some(Verdict::CameBack)
        );
        assert_eq!(chain.verdict(Status::New, 5_000, 1_000), None);
        assert_eq!(
            ReplayChain::default().verdict(Status::Replayed, 5_000, 1_000),
            None
        );
        assert_eq!(
            chain.verdict(Status::Replayed, 5_000, u64::MAX),
            Some(Verdict::Watching { until_ms: i64::MAX })
        );
    }
}
