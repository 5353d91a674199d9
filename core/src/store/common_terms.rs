//! Terms the search's index step found too common (`docs/triage.md`, "Search", step 2).
//!
//! The index step asks the trigram index for at most [`super::search::INDEX_ROWS`] + 1 ids
//! and gives up on a term with more. Giving up still costs the index's whole posting lists
//! for the term: on PostgreSQL a GIN index answers with a bitmap, built in full before the
//! LIMIT applies (270 ms at 10M rows for a term in 2 % of the dead letters, `docs/bench.md`).
//! Which terms are too common does not depend on the other filters (the step reads the index
//! for `q` alone), so a term found too common once (or taken as such from the newest dead
//! letters: `search::COMMON_HITS`) is remembered for [`REMEMBER_FOR`], and
//! the next pages of it ("Next", the page's count, another user's same search) skip the step
//! and are the scan's bounded, continued answer, which is what the step gave them anyway.
//!
//! A term is forgotten after [`REMEMBER_FOR`]: the index only grows with ingest, but a
//! retention purge or a bulk delete may take a term back under the cap, and then its pages
//! return to the index step at most that much later (until then they are the scan's correct,
//! continued answer). One memory per [`super::Store`] handle and its clones; each instance of
//! `redrive serve` learns on its own.
//!
//! **One index step per term at a time** ([`CommonTerms::index_step_turn`]). Until a step
//! has found a term too common, every search of it asks the index; when several users search
//! the same new term at once (an incident: everyone pastes the same error), each built the
//! same bitmap of every match side by side, each slower for the others: a closed loop of 20
//! users on 10M rows had search p99s of 1.7–2.5 s on PostgreSQL (`docs/bench.md`,
//! "2026-12-05"). And a search page's list and count each asked the index for the same term.
//! Now a search whose term's step is already running in this process waits for it and takes
//! its outcome (the step depends on the term alone, not on the other filters): its ids, or
//! "skip" (too common, or the backlog too long). It is at most one step older than its own
//! would have been. A step that failed or was cancelled hands the turn to a waiting search.
//! Step 0 (the rare word's probe, SQLite) takes turns the same way ([`Step::Probe`]): a
//! page's list and its count each began with it, side by side.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

/// How long a term found too common skips the index step.
pub const REMEMBER_FOR: Duration = Duration::from_secs(10 * 60);
/// Most terms remembered (at most 256 characters each, `docs/limits.md`): about 300 KiB.
pub const MAX_TERMS: usize = 1_024;

/// The memory: term (as typed, case kept) → when the index step last found it too common.
#[derive(Debug, Default)]
pub(crate) struct CommonTerms {
    seen: Mutex<HashMap<String, Instant>>,
    /// (step, term) pairs whose step is running, and how to learn that it ended (the sender
    /// is dropped).
    in_flight: Mutex<HashMap<(Step, String), StepDone>>,
}

/// How a search waiting for a running step learns its outcome (`None` until it ends).
type StepDone = watch::Receiver<Option<StepOutcome>>;

/// Which step of a search takes turns (`search.rs`'s module documentation numbers them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Step {
    /// Step 0: the dead letters holding a rare word of the term (SQLite).
    Probe,
    /// Step 2: the trigram index for the term.
    Index,
}

/// What a finished index step found, as the searches that waited for it take it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StepOutcome {
    /// Every dead letter whose text matches the term (ascending ids).
    Ids(Arc<Vec<i64>>),
    /// The page is the scan's: the term is too common, or the backlog too long to read.
    Skip,
}

/// Whose turn the index step of a term is ([`CommonTerms::index_step_turn`]).
pub(crate) enum Turn<'a> {
    /// This search runs the step and then [`Leading::finish`]es it.
    Lead(Leading<'a>),
    /// Another search ran it meanwhile: its outcome.
    Follow(StepOutcome),
}

/// The index step of a term, while it runs: [`Leading::finish`] gives its outcome to the
/// searches waiting for it; dropped without it (the step failed or was cancelled), the first
/// of them runs the step itself.
pub(crate) struct Leading<'a> {
    terms: &'a CommonTerms,
    key: (Step, String),
    done: watch::Sender<Option<StepOutcome>>,
}

impl Leading<'_> {
    /// The step found `outcome`: the waiting searches take it.
    pub(crate) fn finish(self, outcome: StepOutcome) {
        // No one waiting is not an error.
        let _ = self.done.send(Some(outcome));
    }
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        let mut in_flight = self
            .terms
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        in_flight.remove(&self.key);
    }
}

impl CommonTerms {
    /// Whether `q` was found too common within the last [`REMEMBER_FOR`].
    pub(crate) fn is_common(&self, q: &str) -> bool {
        self.is_common_at(q, Instant::now())
    }

    /// Notes that the index step found `q` too common.
    pub(crate) fn remember(&self, q: &str) {
        self.remember_at(q, Instant::now());
    }

    /// Whose turn the index step for `q` is: this search's ([`Turn::Lead`]) when no other
    /// in this process runs it, else (after waiting for that one) its outcome. Waiting costs
    /// no more than running the same step beside it.
    pub(crate) async fn index_step_turn(&self, q: &str) -> Turn<'_> {
        self.turn(Step::Index, q).await
    }

    /// Whose turn step 0 for `q` is, as [`Self::index_step_turn`]. Its outcome: the ids of
    /// every match, or [`StepOutcome::Skip`] when the probe did not decide (the later steps
    /// do).
    pub(crate) async fn probe_turn(&self, q: &str) -> Turn<'_> {
        self.turn(Step::Probe, q).await
    }

    async fn turn(&self, step: Step, q: &str) -> Turn<'_> {
        let key = (step, q.to_owned());
        loop {
            let mut running = {
                let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
                match in_flight.get(&key) {
                    Some(rx) => rx.clone(),
                    None => {
                        let (done, rx) = watch::channel(None);
                        in_flight.insert(key.clone(), rx);
                        return Turn::Lead(Leading {
                            terms: self,
                            key,
                            done,
                        });
                    }
                }
            };
            loop {
                if let Some(outcome) = running.borrow_and_update().clone() {
                    return Turn::Follow(outcome);
                }
                if running.changed().await.is_err() {
                    break;
                }
            }
            // The step ended without an outcome; unless its term is known too common, the
            // turn is free again.
            if self.is_common(q) {
                return Turn::Follow(StepOutcome::Skip);
            }
        }
    }

    fn is_common_at(&self, q: &str, now: Instant) -> bool {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.get(q)
            .is_some_and(|at| now.saturating_duration_since(*at) < REMEMBER_FOR)
    }

    fn remember_at(&self, q: &str, now: Instant) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() >= MAX_TERMS && !seen.contains_key(q) {
            seen.retain(|_, at| now.saturating_duration_since(*at) < REMEMBER_FOR);
            if seen.len() >= MAX_TERMS {
                // Full of live terms: forget the oldest, so the memory stays bounded.
                if let Some(oldest) = seen
                    .iter()
                    .min_by_key(|(_, at)| **at)
                    .map(|(k, _)| k.clone())
                {
                    seen.remove(&oldest);
                }
            }
        }
        seen.insert(q.to_owned(), now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lead(turn: Turn<'_>) -> Leading<'_> {
        match turn {
            Turn::Lead(l) => l,
            Turn::Follow(o) => panic!("expected to lead, followed {o:?}"),
        }
    }

    /// Polls `f` once: whether it is still waiting (no timing involved: the turn is decided
    /// on the first poll).
    fn waits<F: std::future::Future + Unpin>(f: &mut F) -> bool {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        std::pin::Pin::new(f).poll(&mut cx).is_pending()
    }

    fn follow(turn: Turn<'_>) -> StepOutcome {
        match turn {
            Turn::Follow(o) => o,
            Turn::Lead(_) => panic!("expected to follow"),
        }
    }

    #[tokio::test]
    async fn one_index_step_per_term_at_a_time() {
        let terms = CommonTerms::default();
        let first = lead(terms.index_step_turn("order 42").await);
        // Another term is not held up, nor the same term's other step.
        drop(lead(terms.index_step_turn("reset").await));
        drop(lead(terms.probe_turn("order 42").await));
        // A second search of the term waits for the running step and takes its ids.
        let waiting = terms.index_step_turn("order 42");
        tokio::pin!(waiting);
        assert!(waits(&mut waiting), "it waits while the step runs");
        let ids = StepOutcome::Ids(Arc::new(vec![3, 7]));
        first.finish(ids.clone());
        assert_eq!(follow(waiting.await), ids);
        // Finished, the turn is free: the next search runs its own step.
        drop(lead(terms.index_step_turn("order 42").await));

        // A step that failed or was cancelled hands the turn to the search waiting for it...
        let first = lead(terms.index_step_turn("timeout").await);
        let waiting = terms.index_step_turn("timeout");
        tokio::pin!(waiting);
        assert!(waits(&mut waiting));
        drop(first);
        let second = lead(waiting.await);
        // ...unless the term is known too common meanwhile.
        let waiting = terms.index_step_turn("timeout");
        tokio::pin!(waiting);
        assert!(waits(&mut waiting));
        terms.remember("timeout");
        drop(second);
        assert_eq!(follow(waiting.await), StepOutcome::Skip);
    }

    #[test]
    fn a_term_is_remembered_for_a_while_and_the_memory_is_bounded() {
        let terms = CommonTerms::default();
        let t0 = Instant::now();
        assert!(!terms.is_common_at("connection reset", t0));
        terms.remember_at("connection reset", t0);
        assert!(terms.is_common_at("connection reset", t0 + Duration::from_secs(1)));
        // Case is kept: another spelling is another term.
        assert!(!terms.is_common_at("Connection reset", t0));
        assert!(!terms.is_common_at("connection reset", t0 + REMEMBER_FOR));

        for i in 0..MAX_TERMS + 10 {
            terms.remember_at(&format!("term {i}"), t0 + Duration::from_millis(i as u64));
        }
        let len = terms.seen.lock().unwrap().len();
        assert_eq!(len, MAX_TERMS);
        // The newest are kept, the oldest went first.
        assert!(terms.is_common_at(&format!("term {}", MAX_TERMS + 9), t0));
        assert!(!terms.is_common_at("term 0", t0));
    }
}
