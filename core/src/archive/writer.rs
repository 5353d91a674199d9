//! Streaming one run's archive: JSON lines through a gzip encoder into a multipart upload,
//! a part at a time, so memory stays bounded however many dead letters the run holds.

use std::io::Write as _;

use flate2::write::GzEncoder;
use flate2::Compression;
use object_store::{PutPayload, WriteMultipart};
use sha2::{Digest, Sha256};

use super::manifest::{Manifest, ManifestObject, Ranges, FORMAT, MANIFEST_NAME};
use super::record::ArchivedDeadLetter;
use super::{ArchiveError, ArchiveLocation, ArchiveTarget};
use crate::store::ArchiveRow;

/// Compressed bytes handed to the upload at a time, and its part size: S3's minimum part
/// (5 MiB). At most [`MAX_PARTS_IN_FLIGHT`] parts are uploading at once.
pub const PART_BYTES: usize = 5 * 1024 * 1024;
/// Concurrent part uploads.
pub const MAX_PARTS_IN_FLIGHT: usize = 2;
/// The data object's name in a run's directory.
pub const OBJECT_NAME: &str = "dead-letters.jsonl.gz";

/// One run's archive being written.
pub struct ArchiveWriter {
    target: ArchiveTarget,
    dir: String,
    upload: WriteMultipart,
    gz: GzEncoder<Vec<u8>>,
    sha: Sha256,
    stored_bytes: u64,
    records: u64,
    ranges: Ranges,
    kind: String,
    run_id: i64,
    actor: String,
    reason: Option<String>,
    created_at_ms: i64,
}

impl ArchiveWriter {
    /// Starts the object `<dir>/dead-letters.jsonl.gz` on `target`.
    ///
    /// Errors: `Storage` (the upload cannot be started).
    pub async fn begin(
        target: &ArchiveTarget,
        dir: &str,
        kind: &str,
        run_id: i64,
        actor: &str,
        reason: Option<String>,
        created_at_ms: i64,
    ) -> Result<ArchiveWriter, ArchiveError> {
        let path = target.path(&format!("{dir}/{OBJECT_NAME}"));
        let upload = target.store.put_multipart(&path).await?;
        Ok(ArchiveWriter {
            target: target.clone(),
            dir: dir.to_string(),
            upload: WriteMultipart::new_with_chunk_size(upload, PART_BYTES),
            gz: GzEncoder::new(Vec::with_capacity(PART_BYTES), Compression::default()),
            sha: Sha256::new(),
            stored_bytes: 0,
            records: 0,
            ranges: Ranges::default(),
            kind: kind.to_string(),
            run_id,
            actor: actor.to_string(),
            reason,
            created_at_ms,
        })
    }

    /// Where the run's manifest will be.
    pub fn manifest_location(&self) -> ArchiveLocation {
        self.target
            .location
            .join(&format!("{}/{MANIFEST_NAME}", self.dir))
    }

    /// Dead letters written so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Appends `rows`, one JSON line each.
    ///
    /// Errors: `Storage` (a part upload failed), `Io`.
    pub async fn write(&mut self, rows: &[ArchiveRow]) -> Result<(), ArchiveError> {
        for r in rows {
            let line = ArchivedDeadLetter::from_row(r);
            serde_json::to_writer(&mut self.gz, &line)
                .map_err(|e| ArchiveError::Io(std::io::Error::other(e)))?;
            self.gz.write_all(b"\n")?;
            let d = &r.dead_letter;
            self.ranges.add(
                d.summary.id,
                d.summary.dead_lettered_at_ms,
                &d.record.dlq_topic,
                d.record.dlq_partition,
                d.record.dlq_offset,
            );
            self.records += 1;
            if self.gz.get_ref().len() >= PART_BYTES {
                let buf = std::mem::take(self.gz.get_mut());
                self.push(&buf).await?;
            }
        }
        Ok(())
    }

    async fn push(&mut self, buf: &[u8]) -> Result<(), ArchiveError> {
        self.sha.update(buf);
        self.stored_bytes += buf.len() as u64;
        self.upload.write(buf);
        self.upload.wait_for_capacity(MAX_PARTS_IN_FLIGHT).await?;
        Ok(())
    }

    /// Completes the object, makes it durable, then writes the manifest (also durable).
    /// When this returns, the dead letters written may be deleted from the store.
    ///
    /// Errors: `Storage`, `Io`; the run's directory then has no manifest.
    pub async fn finish(mut self) -> Result<Manifest, ArchiveError> {
        let gz = std::mem::replace(
            &mut self.gz,
            GzEncoder::new(Vec::new(), Compression::none()),
        );
        let rest = gz.finish()?;
        self.push(&rest).await?;
        self.upload.finish().await?;
        self.target.sync(&format!("{}/{OBJECT_NAME}", self.dir))?;
        let manifest = Manifest {
            format: FORMAT.to_string(),
            kind: self.kind.clone(),
            run_id: self.run_id,
            created_at_ms: self.created_at_ms,
            actor: self.actor.clone(),
            reason: self.reason.clone(),
            records: self.records,
            objects: vec![ManifestObject {
                name: OBJECT_NAME.to_string(),
                records: self.records,
                bytes: self.stored_bytes,
                sha256: hex(&self.sha.clone().finalize()),
                compression: "gzip".to_string(),
            }],
            id_range: self.ranges.ids,
            dead_lettered_at_range: self.ranges.times,
            coordinates: self.ranges.coordinates(),
        };
        let body = serde_json::to_vec_pretty(&manifest)
            .map_err(|e| ArchiveError::Io(std::io::Error::other(e)))?;
        let name = format!("{}/{MANIFEST_NAME}", self.dir);
        self.target
            .store
            .put(&self.target.path(&name), PutPayload::from(body))
            .await?;
        self.target.sync(&name)?;
        Ok(manifest)
    }

    /// Gives up: aborts the upload (no manifest is written).
    pub async fn abort(self) {
        if let Err(e) = self.upload.abort().await {
            tracing::warn!(error = %e, "aborting an archive upload failed");
        }
    }
}

/// Lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
