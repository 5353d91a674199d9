//! `redrive archive restore <location>`: stores an archived run's dead letters again.
//! Every object is checked against the manifest's SHA-256 first (a whole pass that stores
//! nothing), then read again and stored in chunks; a (DLQ topic, partition, offset) already in
//! the store is left alone, so a restore can be repeated.

use std::io::Write as _;

use flate2::write::GzDecoder;
use futures_util::StreamExt;
use sha2::{Digest, Sha256};

use super::manifest::{Manifest, FORMAT, MANIFEST_NAME};
use super::record::ArchivedDeadLetter;
use super::writer::hex;
use super::{ArchiveError, ArchiveLocation, ArchiveTarget};
use crate::retention::ArchiveConfig;
use crate::store::{RestoredDeadLetter, Store};

/// Dead letters stored per transaction by a restore.
pub const RESTORE_CHUNK: usize = 500;

/// What a restore did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RestoreReport {
    /// The manifest read.
    pub manifest: String,
    /// Dead letters in the archive.
    pub records: u64,
    /// Of which were stored again (the rest were already in the store).
    pub restored: u64,
    pub already_present: u64,
}

/// `location` is a run's directory or its `manifest.json`. Returns the run's directory.
///
/// Errors: `BadLocation`.
pub fn run_directory(location: &str) -> Result<ArchiveLocation, ArchiveError> {
    let trimmed = location.trim().trim_end_matches('/');
    let dir = trimmed
        .strip_suffix(MANIFEST_NAME)
        .map(|d| d.trim_end_matches('/'))
        .unwrap_or(trimmed);
    ArchiveLocation::parse(dir)
}

/// Restores the run at `location` into `store` as `actor`.
///
/// Errors: `BadLocation`, `Storage` (an object cannot be read), `Corrupt` (no manifest, an
/// unknown format, a line that does not parse, a count that differs), `Checksum`, `Store`.
pub async fn restore(
    store: &Store,
    location: &str,
    config: &ArchiveConfig,
    actor: &str,
) -> Result<RestoreReport, ArchiveError> {
    let dir = run_directory(location)?;
    let target = ArchiveTarget::open(&dir, config)?;
    let manifest_at = dir.join(MANIFEST_NAME).to_string();
    let raw = target
        .store
        .get(&target.path(MANIFEST_NAME))
        .await?
        .bytes()
        .await?;
    let manifest: Manifest = serde_json::from_slice(&raw)
        .map_err(|e| ArchiveError::Corrupt(manifest_at.clone(), format!("manifest: {e}")))?;
    if manifest.format != FORMAT {
        return Err(ArchiveError::Corrupt(
            manifest_at,
            format!(
                "unknown format `{}` (this redrive reads {FORMAT})",
                manifest.format
            ),
        ));
    }
    for obj in &manifest.objects {
        let actual = checksum(&target, &obj.name).await?;
        if actual != obj.sha256 {
            return Err(ArchiveError::Checksum {
                path: dir.join(&obj.name).to_string(),
                expected: obj.sha256.clone(),
                actual,
            });
        }
    }
    let mut report = RestoreReport {
        manifest: manifest_at.clone(),
        records: 0,
        restored: 0,
        already_present: 0,
    };
    for obj in &manifest.objects {
        let n = import(store, &target, &obj.name, actor, &manifest_at, &mut report).await?;
        if n != obj.records {
            return Err(ArchiveError::Corrupt(
                manifest_at,
                format!(
                    "{} holds {n} dead letters, the manifest says {}",
                    obj.name, obj.records
                ),
            ));
        }
    }
    report.already_present = report.records - report.restored;
    Ok(report)
}

async fn checksum(target: &ArchiveTarget, name: &str) -> Result<String, ArchiveError> {
    let mut stream = target.store.get(&target.path(name)).await?.into_stream();
    let mut sha = Sha256::new();
    while let Some(chunk) = stream.next().await {
        sha.update(&chunk?);
    }
    Ok(hex(&sha.finalize()))
}

/// Streams one object into the store; returns its line count.
async fn import(
    store: &Store,
    target: &ArchiveTarget,
    name: &str,
    actor: &str,
    source: &str,
    report: &mut RestoreReport,
) -> Result<u64, ArchiveError> {
    let mut stream = target.store.get(&target.path(name)).await?.into_stream();
    let mut gz = GzDecoder::new(Vec::new());
    let mut pending: Vec<RestoredDeadLetter> = Vec::with_capacity(RESTORE_CHUNK);
    let mut lines = 0u64;
    let mut line_start = 0usize;
    let corrupt = |why: String| ArchiveError::Corrupt(format!("{source} ({name})"), why);
    loop {
        let chunk = stream.next().await;
        let done = chunk.is_none();
        match chunk {
            Some(bytes) => gz.write_all(&bytes?)?,
            None => gz.try_finish()?,
        }
        // Complete lines in the decoded buffer.
        let buf = gz.get_mut();
        while let Some(nl) = buf[line_start..].iter().position(|b| *b == b'\n') {
            let line = &buf[line_start..line_start + nl];
            line_start += nl + 1;
            if line.is_empty() {
                continue;
            }
            lines += 1;
            let archived: ArchivedDeadLetter =
                serde_json::from_slice(line).map_err(|e| corrupt(format!("line {lines}: {e}")))?;
            pending.push(
                archived
                    .into_restored()
                    .map_err(|e| corrupt(format!("line {lines}: {e}")))?,
            );
            if pending.len() >= RESTORE_CHUNK {
                report.restored += store.restore_archived(&pending, actor, source).await?;
                report.records += pending.len() as u64;
                pending.clear();
            }
        }
        buf.drain(..line_start);
        line_start = 0;
        if done {
            if !buf.is_empty() {
                return Err(corrupt("the last line is incomplete".to_string()));
            }
            break;
        }
    }
    if !pending.is_empty() {
        report.restored += store.restore_archived(&pending, actor, source).await?;
        report.records += pending.len() as u64;
    }
    Ok(lines)
}
