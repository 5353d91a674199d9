//! `manifest.json`: written last in a run's directory, so its presence means the run's
//! objects are complete. `redrive archive restore` checks every object against it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The format name in every manifest.
pub const FORMAT: &str = "redrive-archive/1";
/// The manifest's object name in a run's directory.
pub const MANIFEST_NAME: &str = "manifest.json";

/// One object of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestObject {
    /// Name in the run's directory, e.g. `dead-letters.jsonl.gz`.
    pub name: String,
    /// Dead letters (lines) in it.
    pub records: u64,
    /// Its size as stored (compressed), bytes.
    pub bytes: u64,
    /// SHA-256 of the stored (compressed) bytes, lowercase hex.
    pub sha256: String,
    /// `gzip`.
    pub compression: String,
}

/// The offsets of one DLQ partition in the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoordinateRange {
    pub dlq_topic: String,
    pub partition: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    pub records: u64,
}

/// A run's manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: String,
    /// `purge` or `archive`.
    pub kind: String,
    /// The `retention_runs` id in the store that wrote it.
    pub run_id: i64,
    pub created_at_ms: i64,
    /// Who asked: `(retention)` or a user.
    pub actor: String,
    /// Why: the limits of a purge, or the filter of an on-demand archive (JSON text).
    pub reason: Option<String>,
    pub records: u64,
    pub objects: Vec<ManifestObject>,
    /// Lowest and highest dead letter id (in the source store).
    pub id_range: Option<(i64, i64)>,
    /// Oldest and newest `dead_lettered_at_ms`.
    pub dead_lettered_at_range: Option<(i64, i64)>,
    pub coordinates: Vec<CoordinateRange>,
}

/// Accumulates the ranges while writing.
#[derive(Debug, Default)]
pub(crate) struct Ranges {
    pub(crate) ids: Option<(i64, i64)>,
    pub(crate) times: Option<(i64, i64)>,
    pub(crate) coords: BTreeMap<(String, i32), (i64, i64, u64)>,
}

fn widen(r: &mut Option<(i64, i64)>, v: i64) {
    *r = Some(match *r {
        None => (v, v),
        Some((lo, hi)) => (lo.min(v), hi.max(v)),
    });
}

impl Ranges {
    pub(crate) fn add(&mut self, id: i64, at_ms: i64, topic: &str, partition: i32, offset: i64) {
        widen(&mut self.ids, id);
        widen(&mut self.times, at_ms);
        let e = self
            .coords
            .entry((topic.to_string(), partition))
            .or_insert((offset, offset, 0));
        e.0 = e.0.min(offset);
        e.1 = e.1.max(offset);
        e.2 += 1;
    }

    pub(crate) fn coordinates(&self) -> Vec<CoordinateRange> {
        self.coords
            .iter()
            .map(|((t, p), (lo, hi, n))| CoordinateRange {
                dlq_topic: t.clone(),
                partition: *p,
                first_offset: *lo,
                last_offset: *hi,
                records: *n,
            })
            .collect()
    }
}
