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

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a term found too common skips the index step.
pub const REMEMBER_FOR: Duration = Duration::from_secs(10 * 60);
/// Most terms remembered (at most 256 characters each, `docs/limits.md`): about 300 KiB.
pub const MAX_TERMS: usize = 1_024;

/// The memory: term (as typed, case kept) → when the index step last found it too common.
#[derive(Debug, Default)]
pub(crate) struct CommonTerms {
    seen: Mutex<HashMap<String, Instant>>,
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
