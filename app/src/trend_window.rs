//! The window of the groups page's sparklines (`/groups`): the filter's time range, cut to
//! now and to the hourly counts kept, else the last 24 h, in buckets of whole hours.

use serde::{Deserialize, Serialize};

const HOUR_MS: i64 = 3_600_000;
/// Most bars in a sparkline: a longer window is drawn in buckets of several hours.
pub const TREND_MAX_BUCKETS: i64 = 48;

/// The window of the groups page's sparklines: `[start_ms, end_ms)` (epoch ms), in buckets of
/// `bucket_ms` (a whole number of hours) from the hour `start_ms` falls in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrendWindow {
    pub start_ms: i64,
    pub end_ms: i64,
    pub bucket_ms: i64,
    /// The filter's time range (`from` / `to`); `false`: the last 24 h.
    pub ranged: bool,
    /// The range began before the hours the aggregate keeps: the window starts there.
    pub cut: bool,
    /// How long hourly counts are kept (`redrive_core::store::GROUP_HOURS_KEPT_MS`), ms.
    pub kept_ms: i64,
}

impl Default for TrendWindow {
    fn default() -> Self {
        TrendWindow {
            start_ms: 0,
            end_ms: 24 * HOUR_MS,
            bucket_ms: HOUR_MS,
            ranged: false,
            cut: false,
            kept_ms: 0,
        }
    }
}

impl TrendWindow {
    /// The window for a filter's `from` (inclusive) and `to` (exclusive) at `now_ms`, as the
    /// list reads them: the range cut to now and to the `kept_ms` before it (only `from`:
    /// from it to now; only `to`: everything before it, so from the oldest hour kept, `cut`),
    /// else the 24 h before `now_ms`. Buckets of one hour, or of as many hours as keep the
    /// bars at [`TREND_MAX_BUCKETS`] or fewer. A range wholly outside the kept hours, or in
    /// the future, gives an empty window (`start_ms == end_ms`).
    pub fn of(from_ms: Option<i64>, to_ms: Option<i64>, now_ms: i64, kept_ms: i64) -> Self {
        let day = 24 * HOUR_MS;
        let (start, end, ranged) = match (from_ms, to_ms) {
            (None, None) => (now_ms - day + HOUR_MS, now_ms, false),
            (f, t) => (f.unwrap_or(i64::MIN), t.unwrap_or(now_ms).min(now_ms), true),
        };
        let oldest = now_ms - kept_ms + HOUR_MS;
        let cut = ranged && start < oldest;
        let start = start.max(oldest);
        if start >= end {
            return TrendWindow {
                start_ms: end,
                end_ms: end,
                bucket_ms: HOUR_MS,
                ranged,
                cut,
                kept_ms,
            };
        }
        let hours = (end - start.div_euclid(HOUR_MS) * HOUR_MS + HOUR_MS - 1) / HOUR_MS;
        let per = ((hours + TREND_MAX_BUCKETS - 1) / TREND_MAX_BUCKETS).max(1);
        TrendWindow {
            start_ms: start,
            end_ms: end,
            bucket_ms: per * HOUR_MS,
            ranged,
            cut,
            kept_ms,
        }
    }

    /// Where the first bucket starts (epoch ms): the hour `start_ms` falls in, or `end_ms`
    /// for an empty window (no buckets).
    pub fn first_bucket_ms(&self) -> i64 {
        if self.start_ms < self.end_ms {
            self.start_ms.div_euclid(HOUR_MS) * HOUR_MS
        } else {
            self.end_ms
        }
    }

    /// Hours per bucket.
    pub fn hours_per_bucket(&self) -> usize {
        (self.bucket_ms / HOUR_MS).max(1) as usize
    }
}

/// Dead letters per bucket: `counts[i]` arrived in the bucket starting at `start_ms + i`
/// buckets of [`TrendWindow::bucket_ms`] (epoch ms, UTC), oldest first. One start and bare
/// counts, not a time per bucket: the page's hydration data carries it once per group.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HourlyTrend {
    pub start_ms: i64,
    pub counts: Vec<i64>,
}

impl HourlyTrend {
    /// From `(hour start ms, count)` pairs of consecutive hours, oldest first, summed
    /// `hours_per_bucket` at a time (the last bucket may hold fewer hours).
    pub fn from_series(series: &[(i64, i64)], hours_per_bucket: usize) -> Self {
        HourlyTrend {
            start_ms: series.first().map_or(0, |(t, _)| *t),
            counts: series
                .chunks(hours_per_bucket.max(1))
                .map(|c| c.iter().map(|(_, n)| *n).sum())
                .collect(),
        }
    }
}

/// Error groups' sparklines and "new group" flags, as the groups page and
/// `GET /api/v1/error-groups` show them, from the maintained aggregates (`docs/stats.md`).
#[cfg(feature = "ssr")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupTrends {
    /// What the trends cover.
    pub window: TrendWindow,
    /// One per fingerprint asked for, same order: its arrivals (under every filter) per
    /// bucket of the window.
    pub trends: Vec<HourlyTrend>,
    /// One per fingerprint, same order: first seen (ever, not only under a filter) in the
    /// 24 h before now.
    pub new: Vec<bool>,
}

#[cfg(feature = "ssr")]
impl GroupTrends {
    /// Reads the trends of `fingerprints` over [`TrendWindow::of`] the filter's `from_ms` /
    /// `to_ms` at `now_ms` (epoch ms), and their first-seen times: two reads of the
    /// aggregates, at once. Errors: the store's (`Unavailable`, `Database`).
    pub async fn read(
        store: &redrive_core::store::Store,
        fingerprints: &[String],
        from_ms: Option<i64>,
        to_ms: Option<i64>,
        now_ms: i64,
    ) -> Result<GroupTrends, redrive_core::store::StoreError> {
        let window = TrendWindow::of(
            from_ms,
            to_ms,
            now_ms,
            redrive_core::store::GROUP_HOURS_KEPT_MS,
        );
        let (mut series, stats) = store
            .error_group_trends_and_stats(fingerprints, window.start_ms, window.end_ms)
            .await?;
        let first_seen: std::collections::HashMap<String, i64> = stats
            .into_iter()
            .map(|g| (g.fingerprint, g.first_seen_ms))
            .collect();
        let day_ago = now_ms - 24 * HOUR_MS;
        Ok(GroupTrends {
            trends: fingerprints
                .iter()
                .map(|f| match series.remove(f) {
                    // An empty window (a range in the future, or wholly before the hours
                    // kept) has no buckets, not the one hour its start falls in.
                    Some(s) if window.start_ms < window.end_ms => {
                        HourlyTrend::from_series(&s, window.hours_per_bucket())
                    }
                    _ => HourlyTrend {
                        start_ms: window.first_bucket_ms(),
                        counts: Vec::new(),
                    },
                })
                .collect(),
            new: fingerprints
                .iter()
                .map(|f| first_seen.get(f).is_some_and(|t| *t >= day_ago))
                .collect(),
            window,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{TrendWindow, HOUR_MS};

    const NOW: i64 = 1_796_104_800_000 + 20 * 60_000; // 20 minutes past an hour
    const KEPT: i64 = 8 * 24 * HOUR_MS;

    #[test]
    fn without_a_range_the_last_24_hours_by_the_hour() {
        let w = TrendWindow::of(None, None, NOW, KEPT);
        assert_eq!(
            (w.start_ms, w.end_ms, w.bucket_ms),
            (NOW - 23 * HOUR_MS, NOW, HOUR_MS)
        );
        assert!(!w.ranged && !w.cut);
    }

    #[test]
    fn a_range_is_drawn_by_the_hour_up_to_48_bars_then_in_longer_buckets() {
        let w = TrendWindow::of(Some(NOW - 6 * HOUR_MS), None, NOW, KEPT);
        assert_eq!(
            (w.start_ms, w.end_ms, w.bucket_ms),
            (NOW - 6 * HOUR_MS, NOW, HOUR_MS)
        );
        assert!(w.ranged && !w.cut);
        // From a whole hour 47 h 20 min ago: 48 hours begun, one bar each; from 48 h ago
        // (20 minutes past an hour), 49 hours begun: bars of 2 h.
        let two_days =
            TrendWindow::of(Some(NOW - 47 * HOUR_MS - 20 * 60_000), Some(NOW), NOW, KEPT);
        assert_eq!(two_days.bucket_ms, HOUR_MS);
        let longer = TrendWindow::of(Some(NOW - 48 * HOUR_MS), Some(NOW), NOW, KEPT);
        assert_eq!(longer.bucket_ms, 2 * HOUR_MS);
        // Only a start: from it to now, as the list reads it (three days: 2-hour bars).
        let w = TrendWindow::of(Some(NOW - 72 * HOUR_MS), None, NOW, KEPT);
        assert_eq!((w.start_ms, w.end_ms), (NOW - 72 * HOUR_MS, NOW));
        assert_eq!(w.bucket_ms, 2 * HOUR_MS);
        assert!(!w.cut);
        // Only an end: everything before it, so from the oldest hour kept, and cut.
        let w = TrendWindow::of(None, Some(NOW - HOUR_MS), NOW, KEPT);
        assert_eq!(
            (w.start_ms, w.end_ms),
            (NOW - KEPT + HOUR_MS, NOW - HOUR_MS)
        );
        assert!(w.cut);
        // An end in the future stops at now; a start in the future is an empty window.
        let w = TrendWindow::of(Some(NOW - HOUR_MS), Some(NOW + 9 * HOUR_MS), NOW, KEPT);
        assert_eq!(w.end_ms, NOW);
        let w = TrendWindow::of(Some(NOW + HOUR_MS), None, NOW, KEPT);
        assert_eq!((w.start_ms, w.end_ms), (NOW, NOW));
    }

    #[test]
    fn a_range_older_than_the_kept_hours_is_cut_or_empty() {
        let w = TrendWindow::of(Some(NOW - 30 * 24 * HOUR_MS), Some(NOW), NOW, KEPT);
        assert!(w.cut);
        assert_eq!(w.start_ms, NOW - KEPT + HOUR_MS);
        assert_eq!(w.bucket_ms, 4 * HOUR_MS, "8 days in 48 bars at most");
        let gone = TrendWindow::of(
            Some(NOW - 30 * 24 * HOUR_MS),
            Some(NOW - 20 * 24 * HOUR_MS),
            NOW,
            KEPT,
        );
        assert!(gone.cut);
        assert_eq!(gone.start_ms, gone.end_ms, "nothing kept to draw");
    }
}
