//! Canary replay (issue 9, item 3; `docs/replay.md`, "Canary replay"): a replay job with
//! [`CanaryOptions`] publishes its first records (the canary) alone, waits `wait_ms`, counts
//! how many of them came back as dead letters (the outcome links of `docs/replay.md`,
//! "Outcome"), and pauses itself when more than `max_refailed` did; otherwise it goes on at
//! its normal rate.
//!
//! These are the shapes the API, the store and the pages share (no store code: this module
//! also compiles to wasm32); the state machine is `store/canary.rs`, the relay's hook
//! `replay/canary.rs`.

use serde::{Deserialize, Serialize};

/// Default [`CanaryOptions::wait_ms`]: how long the canary is watched after its last record
/// is published, ms (5 min: a consumer's retries and its dead-letter publish, plus ingest).
pub const CANARY_WAIT_MS: u64 = 300_000;
/// Shortest accepted `wait_ms`, ms (1 s: ingest needs a moment to see a record come back).
pub const MIN_CANARY_WAIT_MS: u64 = 1_000;
/// Longest accepted `wait_ms`, ms (24 h).
pub const MAX_CANARY_WAIT_MS: u64 = 86_400_000;
/// Largest accepted `records`: a canary is a sample, and its rows are counted on every relay
/// poll while it runs.
pub const MAX_CANARY_RECORDS: u64 = 100_000;

/// A percentage that compares by its bits, so [`crate::actions::ReplayOptions`] stays `Eq`.
/// Serialized as a plain JSON number (`0.5`, `10`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Percent(pub f64);

impl PartialEq for Percent {
    fn eq(&self, other: &Percent) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for Percent {}

/// The canary of a replay (`ReplayOptions::canary`, API body `"options": {"canary": {...}}`).
///
/// Exactly one of `records` and `percent`. Unknown fields are refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CanaryOptions {
    /// Records in the canary: the first `records` the relay publishes (1 to
    /// [`MAX_CANARY_RECORDS`]; more than the job has = the whole job).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub records: Option<u64>,
    /// Or this share of the job's records, percent: more than 0, at most 100, fractions
    /// allowed (`0.5`); rounded up to whole records, so at least 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percent: Option<Percent>,
    /// How long to watch for re-failures once every canary record is published (or failed),
    /// ms: [`MIN_CANARY_WAIT_MS`] to [`MAX_CANARY_WAIT_MS`]; [`CANARY_WAIT_MS`] when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
    /// Canary records that may come back as dead letters: the job pauses itself when MORE than
    /// this many come back (default 0: any one). Below `records` when `records` is given.
    pub max_refailed: u64,
}

impl CanaryOptions {
    /// The watch in effect, ms.
    pub fn wait_ms(&self) -> u64 {
        self.wait_ms.unwrap_or(CANARY_WAIT_MS)
    }

    /// Checks the options. Errors: what to change, naming the field.
    pub fn check(&self) -> Result<(), String> {
        match (self.records, self.percent) {
            (None, None) => {
                return Err(
                    "the canary needs its size: `records` (a count) or `percent` \
                            (a share of the job)"
                        .into(),
                )
            }
            (Some(_), Some(_)) => {
                return Err(
                    "the canary takes `records` or `percent`, not both; give one of them".into(),
                )
            }
            (Some(n), None) => {
                if n == 0 || n > MAX_CANARY_RECORDS {
                    return Err(format!(
                        "the canary's `records` must be from 1 to {MAX_CANARY_RECORDS} (got {n})"
                    ));
                }
                if self.max_refailed >= n {
                    return Err(format!(
                        "the canary's `max_refailed` ({}) must be below its `records` ({n}): \
                         otherwise it can never pause the job",
                        self.max_refailed
                    ));
                }
            }
            (None, Some(Percent(p))) => {
                if !(p.is_finite() && p > 0.0 && p <= 100.0) {
                    return Err(format!(
                        "the canary's `percent` must be more than 0 and at most 100 (got {p})"
                    ));
                }
            }
        }
        if let Some(w) = self.wait_ms {
            if !(MIN_CANARY_WAIT_MS..=MAX_CANARY_WAIT_MS).contains(&w) {
                return Err(format!(
                    "the canary's `wait_ms` must be from {MIN_CANARY_WAIT_MS} to \
                     {MAX_CANARY_WAIT_MS} ms (got {w})"
                ));
            }
        }
        Ok(())
    }

    /// The canary's size for a job of `total` queued records: `records`, or ceil(`percent` %
    /// of `total`) (at least 1), never more than `total`. 0 only for an empty job.
    pub fn size_for(&self, total: i64) -> i64 {
        let total = total.max(0);
        let want = match (self.records, self.percent) {
            (Some(n), _) => i64::try_from(n).unwrap_or(i64::MAX),
            (None, Some(Percent(p))) => {
                let exact = (total as f64) * p / 100.0;
                // A tiny tolerance: 10 % of 30 is 3, not 4 because of 3.0000000000000004.
                ((exact - 1e-9).ceil() as i64).max(1)
            }
            (None, None) => 0,
        };
        want.min(total)
    }

    /// One line for the confirmation page and the job page: "the first 10 records, then watch
    /// 30 s; pause if more than 0 come back".
    pub fn describe(&self) -> String {
        let size = match (self.records, self.percent) {
            (Some(n), _) => format!("the first {n} record{}", if n == 1 { "" } else { "s" }),
            (None, Some(Percent(p))) => format!("the first {p} % of the records (rounded up)"),
            (None, None) => "no records".into(),
        };
        format!(
            "{size}, then watch {} for re-failures; pause the job if more than {} come{} back",
            duration_text(self.wait_ms()),
            self.max_refailed,
            if self.max_refailed == 1 { "s" } else { "" }
        )
    }
}

impl CanaryOptions {
    /// The confirmation page's canary fields (plain form text): `size` is a record count
    /// (`10`) or a percentage (`1 %`, `0.5%`), empty = no canary; `wait_s` the watch in
    /// seconds (empty = [`CANARY_WAIT_MS`]); `max_refailed` a count (empty = 0). The result is
    /// [`CanaryOptions::check`]ed.
    ///
    /// Errors: what to type instead.
    pub fn from_form(
        size: &str,
        wait_s: &str,
        max_refailed: &str,
    ) -> Result<Option<CanaryOptions>, String> {
        let size = size.trim();
        if size.is_empty() {
            return Ok(None);
        }
        let mut c = CanaryOptions::default();
        if let Some(p) = size.strip_suffix('%') {
            let p: f64 = p.trim().parse().map_err(|_| {
                format!("The canary size `{size}` is not a percentage; type e.g. 1 % or 0.5 %.")
            })?;
            c.percent = Some(Percent(p));
        } else {
            c.records = Some(size.parse().map_err(|_| {
                format!(
                    "The canary size `{size}` is neither a number of records (e.g. 10) nor a \
                     percentage (e.g. 1 %)."
                )
            })?);
        }
        let wait_s = wait_s.trim();
        if !wait_s.is_empty() {
            let s: f64 = wait_s.parse().map_err(|_| {
                format!("The canary's wait `{wait_s}` is not a number of seconds (e.g. 30).")
            })?;
            if !(s.is_finite() && s >= 0.0) {
                return Err(format!(
                    "The canary's wait must be a number of seconds (got {wait_s})."
                ));
            }
            c.wait_ms = Some((s * 1000.0).round() as u64);
        }
        let max = max_refailed.trim();
        if !max.is_empty() {
            c.max_refailed = max.parse().map_err(|_| {
                format!("The canary's threshold `{max}` is not a whole number of records (e.g. 0).")
            })?;
        }
        c.check()?;
        Ok(Some(c))
    }
}

/// `30 s`, `5 min`, `1 h 30 min`, `1.5 s`: a wait as a person reads it.
pub fn duration_text(ms: u64) -> String {
    if ms < 60_000 {
        if ms.is_multiple_of(1000) {
            format!("{} s", ms / 1000)
        } else {
            format!("{:.1} s", ms as f64 / 1000.0)
        }
    } else if ms < 3_600_000 {
        let (m, s) = (ms / 60_000, (ms % 60_000) / 1000);
        if s == 0 {
            format!("{m} min")
        } else {
            format!("{m} min {s} s")
        }
    } else {
        let (h, m) = (ms / 3_600_000, (ms % 3_600_000) / 60_000);
        if m == 0 {
            format!("{h} h")
        } else {
            format!("{h} h {m} min")
        }
    }
}

/// Where a job's canary is (`replay_jobs.canary_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CanaryState {
    /// The job has not run yet (a bulk replay still queueing, or not claimed yet): the size
    /// is fixed when it first runs. Nothing is claimed.
    Starting,
    /// The canary's records are being published; claims stop at its size.
    Publishing,
    /// Every canary record is published or failed; nothing more is claimed until
    /// `watch_until_ms`.
    Watching,
    /// At most `max_refailed` came back: the job goes on at its normal rate.
    Passed,
    /// More came back (or none could be published): the job paused itself.
    Failed,
}

impl CanaryState {
    pub const ALL: [CanaryState; 5] = [
        CanaryState::Starting,
        CanaryState::Publishing,
        CanaryState::Watching,
        CanaryState::Passed,
        CanaryState::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CanaryState::Starting => "starting",
            CanaryState::Publishing => "publishing",
            CanaryState::Watching => "watching",
            CanaryState::Passed => "passed",
            CanaryState::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<CanaryState> {
        CanaryState::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// True once the verdict is given (`passed`, `failed`).
    pub fn is_decided(self) -> bool {
        matches!(self, CanaryState::Passed | CanaryState::Failed)
    }
}

/// A job's canary as the job page and `GET /api/v1/replays/{id}` show it (`"canary"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CanaryStatus {
    pub state: CanaryState,
    /// Records in the canary; `None` while `starting`.
    pub size: Option<i64>,
    /// Canary records published so far (live until the verdict, then as judged).
    pub published: i64,
    /// Canary records that failed to publish (live until the verdict).
    pub failed: i64,
    /// Of the published canary records, the ones that came back as dead letters.
    pub refailed: i64,
    /// End of the watch, epoch ms (from `watching` on).
    pub watch_until_ms: Option<i64>,
    /// When the verdict was given, epoch ms.
    pub decided_at_ms: Option<i64>,
    /// The verdict in words, e.g. "canary: 3 of 10 came back within 30 s, more than the 1
    /// allowed; the job paused itself".
    pub reason: Option<String>,
}

impl CanaryStatus {
    /// A canary that has not run yet (a job just requested).
    pub fn starting() -> CanaryStatus {
        CanaryStatus {
            state: CanaryState::Starting,
            size: None,
            published: 0,
            failed: 0,
            refailed: 0,
            watch_until_ms: None,
            decided_at_ms: None,
            reason: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(n: u64) -> CanaryOptions {
        CanaryOptions {
            records: Some(n),
            ..CanaryOptions::default()
        }
    }

    #[test]
    fn sizes_round_up_and_stay_within_the_job() {
        assert_eq!(records(10).size_for(1000), 10);
        assert_eq!(records(10).size_for(4), 4);
        assert_eq!(records(10).size_for(0), 0);
        let pct = |p| CanaryOptions {
            percent: Some(Percent(p)),
            ..CanaryOptions::default()
        };
        assert_eq!(pct(10.0).size_for(30), 3);
        assert_eq!(pct(1.0).size_for(1_000_000), 10_000);
        assert_eq!(pct(1.0).size_for(5), 1);
        assert_eq!(pct(0.5).size_for(1001), 6);
        assert_eq!(pct(100.0).size_for(7), 7);
    }

    #[test]
    fn bad_options_say_what_to_change() {
        let e = CanaryOptions::default().check().unwrap_err();
        assert!(e.contains("`records`") && e.contains("`percent`"), "{e}");
        let both = CanaryOptions {
            records: Some(1),
            percent: Some(Percent(1.0)),
            ..CanaryOptions::default()
        };
        assert!(both.check().unwrap_err().contains("not both"));
        assert!(records(0).check().unwrap_err().contains("from 1 to"));
        for p in [0.0, -1.0, 100.5, f64::NAN] {
            let o = CanaryOptions {
                percent: Some(Percent(p)),
                ..CanaryOptions::default()
            };
            assert!(o.check().unwrap_err().contains("`percent`"), "{p}");
        }
        let o = CanaryOptions {
            wait_ms: Some(10),
            ..records(5)
        };
        assert!(o.check().unwrap_err().contains("`wait_ms`"));
        let o = CanaryOptions {
            max_refailed: 5,
            ..records(5)
        };
        assert!(o.check().unwrap_err().contains("below"));
        assert_eq!(records(5).check(), Ok(()));
    }

    #[test]
    fn options_read_from_json_and_refuse_unknown_fields() {
        let o: CanaryOptions =
            serde_json::from_str(r#"{"percent": 0.5, "wait_ms": 2000, "max_refailed": 1}"#)
                .unwrap();
        assert_eq!(o.percent, Some(Percent(0.5)));
        assert_eq!(o.wait_ms(), 2000);
        assert!(serde_json::from_str::<CanaryOptions>(r#"{"record": 1}"#).is_err());
        assert_eq!(
            records(10).describe(),
            "the first 10 records, then watch 5 min for re-failures; pause the job if more \
             than 0 come back"
        );
        assert_eq!(duration_text(30_000), "30 s");
        assert_eq!(duration_text(2_500), "2.5 s");
        assert_eq!(duration_text(5_400_000), "1 h 30 min");
    }

    #[test]
    fn the_form_takes_a_count_or_a_percentage() {
        assert_eq!(CanaryOptions::from_form(" ", "", ""), Ok(None));
        let c = CanaryOptions::from_form("10", "30", "1").unwrap().unwrap();
        assert_eq!(
            (c.records, c.wait_ms, c.max_refailed),
            (Some(10), Some(30_000), 1)
        );
        let c = CanaryOptions::from_form("0.5 %", "", "").unwrap().unwrap();
        assert_eq!((c.percent, c.wait_ms), (Some(Percent(0.5)), None));
        assert!(CanaryOptions::from_form("ten", "", "")
            .unwrap_err()
            .contains("neither"));
        assert!(CanaryOptions::from_form("5", "0.2", "")
            .unwrap_err()
            .contains("`wait_ms`"));
        assert!(CanaryOptions::from_form("5", "", "x")
            .unwrap_err()
            .contains("threshold"));
    }
}
