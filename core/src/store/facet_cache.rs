//! The filter bar's choices ([`super::Facets`]: the distinct source topics, DLQ topics and
//! consumer groups), kept for [`FRESH_FOR`] instead of read on every page.
//!
//! Every list, search and groups page offers them, and reading them is three loose index
//! scans (`sql::facet`), one index probe per distinct value: 0.3–0.9 ms each on PostgreSQL at
//! 1M rows, a round trip apiece, about a third of the database time of a list page
//! (`docs/bench.md`, "2026-12-04 (8)": list 8.0 → 5.1 ms). They change when a dead letter brings a value not
//! seen before, or when the last dead letter of a value is purged.
//!
//! - A batch this handle stores with a value the kept choices lack drops them
//!   ([`FacetCache::note_stored`]), so the next page reads them again: a new topic is offered
//!   at once on the instance that ingested it.
//! - Otherwise they are read again after [`FRESH_FOR`]: another instance's new value, or a
//!   purged one, shows up (or goes) within that time. They are suggestions (a `<datalist>`):
//!   a value typed that is not offered still filters.
//!
//! One cache per [`super::Store`] handle and its clones, shared with the handles of
//! [`super::Store::with_own_pool`] (ingest's batches drop the web's copy).

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::Facets;

/// How long read choices are offered before they are read again.
pub const FRESH_FOR: Duration = Duration::from_secs(10);

#[derive(Debug)]
struct Kept {
    /// When the read that gave them began.
    at: Instant,
    facets: Facets,
    /// Every value of the three lists, to check a stored batch against.
    known: HashSet<String>,
}

#[derive(Debug, Default)]
struct State {
    kept: Option<Kept>,
    /// When stored values last made the choices out of date: a read that began before is
    /// not kept (it may have missed them).
    stale_since: Option<Instant>,
}

/// The kept choices (module docs).
#[derive(Debug, Default)]
pub(crate) struct FacetCache {
    state: Mutex<State>,
}

impl FacetCache {
    /// The kept choices if their read began less than [`FRESH_FOR`] ago.
    pub(crate) fn get(&self) -> Option<Facets> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state
            .kept
            .as_ref()
            .filter(|k| k.at.elapsed() < FRESH_FOR)
            .map(|k| k.facets.clone())
    }

    /// Keeps `facets`, whose read began at `read_at`, unless a batch stored since then made
    /// them out of date ([`FacetCache::note_stored`]).
    pub(crate) fn put(&self, facets: &Facets, read_at: Instant) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.stale_since.is_some_and(|t| t >= read_at) {
            return;
        }
        let known = facets
            .source_topics
            .iter()
            .chain(&facets.dlq_topics)
            .chain(&facets.consumer_groups)
            .cloned()
            .collect();
        state.kept = Some(Kept {
            at: read_at,
            facets: facets.clone(),
            known,
        });
    }

    /// A batch was committed with these values (source topic, DLQ topic, consumer group of
    /// its rows): drops the kept choices if one of them is new to them, and refuses to keep
    /// a read that began before this call. With nothing kept, any batch counts as new.
    pub(crate) fn note_stored<'v>(&self, values: impl IntoIterator<Item = &'v str>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let new = match &state.kept {
            Some(k) => values.into_iter().any(|v| !k.known.contains(v)),
            None => true,
        };
        if new {
            state.kept = None;
            state.stale_since = Some(Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facets(topics: &[&str]) -> Facets {
        Facets {
            dlq_topics: topics.iter().map(|t| t.to_string()).collect(),
            ..Facets::default()
        }
    }

    #[test]
    fn a_known_value_keeps_them_a_new_one_drops_them() {
        let cache = FacetCache::default();
        assert_eq!(cache.get(), None);
        cache.put(&facets(&["a.DLT"]), Instant::now());
        assert_eq!(cache.get(), Some(facets(&["a.DLT"])));
        cache.note_stored(["a.DLT"]);
        assert_eq!(cache.get(), Some(facets(&["a.DLT"])), "nothing new");
        cache.note_stored(["a.DLT", "b.DLT"]);
        assert_eq!(cache.get(), None, "b.DLT is new");
    }

    #[test]
    fn a_read_that_began_before_a_new_value_is_not_kept() {
        let cache = FacetCache::default();
        let read_at = Instant::now();
        cache.note_stored(["b.DLT"]);
        cache.put(&facets(&["a.DLT"]), read_at);
        assert_eq!(cache.get(), None);
        cache.put(&facets(&["a.DLT", "b.DLT"]), Instant::now());
        assert_eq!(cache.get(), Some(facets(&["a.DLT", "b.DLT"])));
    }

    #[test]
    fn they_are_read_again_after_a_while() {
        let cache = FacetCache::default();
        let long_ago = Instant::now()
            .checked_sub(FRESH_FOR + Duration::from_secs(1))
            .expect("an instant 11 s ago");
        cache.put(&facets(&["a.DLT"]), long_ago);
        assert_eq!(cache.get(), None);
    }
}
