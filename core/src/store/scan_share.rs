//! One scan for a search's list page and its count (`search.rs`, step 1).
//!
//! A search page asks for its first list page and for its count at once (two server
//! functions, run side by side when the page is rendered). Both start from the same scan:
//! the newest [`super::search::SCAN_ROWS`] dead letters under the other filters, each
//! checked against its text. That check is what a search costs: on PostgreSQL `ILIKE` over
//! every row's message, stack trace and payload, 50 ms for 2,000 rows of Spring records
//! unloaded, and the two scans were 120 s of the 254 s PostgreSQL spent on statements while
//! 20 users browsed (`docs/bench.md`, "2026-12-04 (5)").
//!
//! When the list's scan did not fill its page, it read the whole window and found every
//! match in it: their number is the count's answer. So the list *announces* its scan before
//! it starts ([`ScanShare::announce`]) and *publishes* (matches, bound) when it read the whole
//! window; a count of the same filter and term that finds the announcement waits for it
//! ([`ScanShare::take`]) instead of scanning again. A list that filled its page early (a
//! common term: cheap, it stopped early), failed or was cancelled publishes nothing, and the
//! count scans on its own, as before. The count is then of the window the list read, at
//! most [`SHARE_FOR`] earlier: a count is a moment's answer anyway.
//!
//! One memory per [`super::Store`] handle and its clones: a page's list and count, rendered
//! by one process, share; across instances of `redrive serve` nothing is shared (the count
//! scans, as before).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::filter::{Cursor, Filter};

/// How long after a list's scan was announced a count may take its answer.
pub const SHARE_FOR: Duration = Duration::from_secs(2);
/// Most scans remembered at once (older ones are dropped first when expired; past this, a
/// new scan is not announced and its count scans on its own).
pub const MAX_SCANS: usize = 256;

/// What a scan found: matches among its window, and the window's last row (`None`: the
/// window held every remaining row), as `scanned_count!` gives them.
pub(crate) type Scanned = (i64, Option<Cursor>);

/// An announced scan: when, and where its answer will be.
type Entry = (Instant, watch::Receiver<Option<Scanned>>);

/// The announced scans by key ([`key`]).
#[derive(Debug, Default)]
pub(crate) struct ScanShare {
    scans: Mutex<HashMap<String, Entry>>,
}

/// A list's announced scan; [`Announced::publish`] gives its answer to the counts waiting.
/// Dropped without publishing, it tells them to scan on their own.
pub(crate) struct Announced(watch::Sender<Option<Scanned>>);

impl Announced {
    /// The list read its whole window and found `scanned.0` matches in it.
    pub(crate) fn publish(self, scanned: Scanned) {
        // No receiver left (no count came, the entry was dropped) is not an error.
        let _ = self.0.send(Some(scanned));
    }
}

/// The key of a scan: the filter without its term, and the term.
pub(crate) fn key(base: &Filter, q: &str) -> String {
    let filter = serde_json::to_string(base).unwrap_or_default();
    format!("{q}\u{0}{filter}")
}

impl ScanShare {
    /// Announces a list's scan of `key` from the newest row.
    pub(crate) fn announce(&self, key: String) -> Announced {
        self.announce_at(key, Instant::now())
    }

    fn announce_at(&self, key: String, now: Instant) -> Announced {
        let (tx, rx) = watch::channel(None);
        let mut scans = self.scans.lock().unwrap_or_else(|p| p.into_inner());
        scans.retain(|_, (at, _)| now.saturating_duration_since(*at) < SHARE_FOR);
        if scans.len() < MAX_SCANS || scans.contains_key(&key) {
            scans.insert(key, (now, rx));
        }
        Announced(tx)
    }

    /// The answer of a list's scan of `key` announced within [`SHARE_FOR`], waiting for it if
    /// the scan is still running; `None` when there is none, or it published nothing.
    pub(crate) async fn take(&self, key: &str) -> Option<Scanned> {
        let rx = self.announced(key, Instant::now())?;
        Self::answer(rx).await
    }

    fn announced(&self, key: &str, now: Instant) -> Option<watch::Receiver<Option<Scanned>>> {
        let scans = self.scans.lock().unwrap_or_else(|p| p.into_inner());
        let (at, rx) = scans.get(key)?;
        (now.saturating_duration_since(*at) < SHARE_FOR).then(|| rx.clone())
    }

    async fn answer(mut rx: watch::Receiver<Option<Scanned>>) -> Option<Scanned> {
        // Err: the list dropped its announcement without an answer.
        let answer = rx.wait_for(Option::is_some).await.ok()?;
        *answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound() -> Option<Cursor> {
        Some(Cursor {
            dead_lettered_at_ms: 5,
            id: 9,
        })
    }

    #[tokio::test]
    async fn a_count_waits_for_the_announced_scan_and_takes_its_answer() {
        let share = ScanShare::default();
        let k = key(&Filter::default(), "timeout");
        let announced = share.announce(k.clone());
        let count = share.take(&k);
        let publish = async {
            tokio::task::yield_now().await;
            announced.publish((7, bound()));
        };
        let (taken, ()) = tokio::join!(count, publish);
        assert_eq!(taken, Some((7, bound())));
        // Another count of the same page, later but within SHARE_FOR, takes it too.
        assert_eq!(share.take(&k).await, Some((7, bound())));
    }

    #[tokio::test]
    async fn nothing_announced_dropped_or_expired_means_the_count_scans() {
        let share = ScanShare::default();
        let k = key(&Filter::default(), "timeout");
        assert_eq!(share.take(&k).await, None, "nothing announced");

        drop(share.announce(k.clone()));
        assert_eq!(share.take(&k).await, None, "the list published nothing");

        let t0 = Instant::now();
        share.announce_at(k.clone(), t0).publish((3, None));
        assert!(share.announced(&k, t0 + SHARE_FOR).is_none(), "expired");
        assert!(share.announced(&k, t0 + SHARE_FOR / 2).is_some());
    }

    #[test]
    fn the_key_tells_filters_and_terms_apart() {
        let topic = Filter {
            dlq_topic: Some("orders.DLT".into()),
            ..Filter::default()
        };
        let keys = [
            key(&Filter::default(), "timeout"),
            key(&Filter::default(), "Timeout"),
            key(&topic, "timeout"),
        ];
        assert_ne!(keys[0], keys[1]);
        assert_ne!(keys[0], keys[2]);
        assert_eq!(keys[0], key(&Filter::default(), "timeout"));
    }

    #[test]
    fn at_most_max_scans_are_remembered() {
        let share = ScanShare::default();
        let now = Instant::now();
        let held: Vec<Announced> = (0..MAX_SCANS + 5)
            .map(|i| share.announce_at(format!("k{i}"), now))
            .collect();
        assert_eq!(share.scans.lock().unwrap().len(), MAX_SCANS);
        // Once they expire, new scans are remembered again.
        drop(held);
        share.announce_at("new".into(), now + SHARE_FOR);
        assert_eq!(share.scans.lock().unwrap().len(), 1);
    }
}
