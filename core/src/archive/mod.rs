//! The archive (`docs/retention.md`, "Archive"): dead letters written out — exact key, value
//! and header bytes (base64), normalised fields, status, history — as gzip-compressed JSON
//! Lines to a directory or an S3-compatible bucket, through the `object_store` crate.
//!
//! One run (a retention purge, or an on-demand archive of a filter) writes one directory:
//! `<location>/<YYYYMMDDTHHMMSSZ>-<kind>-<run id>/dead-letters.jsonl.gz` and, last,
//! `manifest.json` ([`manifest::Manifest`]: counts, the (topic, partition, offset) ranges, the
//! SHA-256 of each object). A directory without a manifest is an unfinished run. Writing is
//! streamed ([`writer::ArchiveWriter`]): memory stays bounded (a part of
//! [`writer::PART_BYTES`] and the dead letters of one chunk) however many rows.

pub mod export;
pub mod manifest;
pub mod record;
pub mod restore;
pub mod writer;

use std::path::PathBuf;
use std::sync::Arc;

use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::ObjectStore;

use crate::retention::ArchiveConfig;

/// Why archiving or restoring failed. The message says what to check.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("bad archive location `{0}`: {1}")]
    BadLocation(String, String),
    #[error("object storage: {0}")]
    Storage(#[from] object_store::Error),
    #[error("the archive at {0} is not usable: {1}")]
    Corrupt(String, String),
    #[error("checksum mismatch for {path}: manifest says {expected}, the object is {actual}")]
    Checksum {
        path: String,
        expected: String,
        actual: String,
    },
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// Where archives go: a bucket (and key prefix) or a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchiveLocation {
    S3 { bucket: String, prefix: String },
    Dir(PathBuf),
}

impl ArchiveLocation {
    /// `s3://BUCKET[/PREFIX]`, `file:///DIR`, or a directory path.
    ///
    /// Errors: `BadLocation` (another scheme, no bucket, an empty path).
    pub fn parse(s: &str) -> Result<ArchiveLocation, ArchiveError> {
        let s = s.trim();
        let bad = |why: &str| ArchiveError::BadLocation(s.to_string(), why.to_string());
        if let Some(rest) = s.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(bad("no bucket name (s3://BUCKET/PREFIX)"));
            }
            return Ok(ArchiveLocation::S3 {
                bucket: bucket.to_string(),
                prefix: prefix.trim_matches('/').to_string(),
            });
        }
        let path = s.strip_prefix("file://").unwrap_or(s);
        if path.is_empty() {
            return Err(bad("empty path"));
        }
        if path.contains("://") {
            return Err(bad(
                "use s3://BUCKET/PREFIX, file:///DIR or a directory path",
            ));
        }
        Ok(ArchiveLocation::Dir(PathBuf::from(path)))
    }

    /// The location with `child` appended (a run's directory, an object).
    pub fn join(&self, child: &str) -> ArchiveLocation {
        match self {
            ArchiveLocation::S3 { bucket, prefix } => ArchiveLocation::S3 {
                bucket: bucket.clone(),
                prefix: if prefix.is_empty() {
                    child.to_string()
                } else {
                    format!("{prefix}/{child}")
                },
            },
            ArchiveLocation::Dir(p) => ArchiveLocation::Dir(p.join(child)),
        }
    }
}

impl std::fmt::Display for ArchiveLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArchiveLocation::S3 { bucket, prefix } if prefix.is_empty() => {
                write!(f, "s3://{bucket}")
            }
            ArchiveLocation::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
            ArchiveLocation::Dir(p) => write!(f, "{}", p.display()),
        }
    }
}

/// An opened location: the object store, the key prefix inside it, and (for a directory) the
/// directory, for the fsyncs that make a written object durable.
#[derive(Debug, Clone)]
pub struct ArchiveTarget {
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) prefix: String,
    pub(crate) local_root: Option<PathBuf>,
    pub(crate) location: ArchiveLocation,
}

impl ArchiveTarget {
    /// Opens `location` with the S3 settings of `config` (endpoint, region, keys; the usual
    /// `AWS_*` variables fill what it leaves out). A directory is created if missing.
    ///
    /// Errors: `BadLocation`, `Storage` (the S3 client cannot be built), `Io`.
    pub fn open(
        location: &ArchiveLocation,
        config: &ArchiveConfig,
    ) -> Result<ArchiveTarget, ArchiveError> {
        match location {
            ArchiveLocation::Dir(dir) => {
                std::fs::create_dir_all(dir)?;
                let root = dir.canonicalize()?;
                let fs = LocalFileSystem::new_with_prefix(&root)?;
                Ok(ArchiveTarget {
                    store: Arc::new(fs),
                    prefix: String::new(),
                    local_root: Some(root),
                    location: location.clone(),
                })
            }
            ArchiveLocation::S3 { bucket, prefix } => {
                let mut b = AmazonS3Builder::from_env().with_bucket_name(bucket);
                b = b.with_region(
                    config
                        .s3_region
                        .clone()
                        .or_else(|| std::env::var("AWS_REGION").ok())
                        .unwrap_or_else(|| "us-east-1".to_string()),
                );
                if let Some(e) = &config.s3_endpoint {
                    b = b.with_endpoint(e);
                }
                if let Some(k) = &config.s3_access_key_id {
                    b = b.with_access_key_id(k);
                }
                if let Some(k) = &config.s3_secret_access_key {
                    b = b.with_secret_access_key(k);
                }
                b = b.with_allow_http(config.s3_allow_http);
                Ok(ArchiveTarget {
                    store: Arc::new(b.build()?),
                    prefix: prefix.clone(),
                    local_root: None,
                    location: location.clone(),
                })
            }
        }
    }

    /// The object path of `name` under this target's prefix.
    pub(crate) fn path(&self, name: &str) -> ObjectPath {
        if self.prefix.is_empty() {
            ObjectPath::from(name)
        } else {
            ObjectPath::from(format!("{}/{name}", self.prefix))
        }
    }

    /// Makes the object `name` and its directory durable (fsync) on a directory target; on
    /// object storage a completed upload already is.
    pub(crate) fn sync(&self, name: &str) -> Result<(), ArchiveError> {
        if let Some(root) = &self.local_root {
            let file = root.join(self.prefix.as_str()).join(name);
            std::fs::File::open(&file)?.sync_all()?;
            if let Some(dir) = file.parent() {
                std::fs::File::open(dir)?.sync_all()?;
            }
        }
        Ok(())
    }

    /// Where this target is, as given.
    pub fn location(&self) -> &ArchiveLocation {
        &self.location
    }
}

/// A run's directory name: `<YYYYMMDDTHHMMSSZ>-<kind>-<run id>`.
pub fn run_dir_name(at_ms: i64, kind: &str, run_id: i64) -> String {
    let t = chrono::DateTime::from_timestamp_millis(at_ms).unwrap_or_default();
    format!("{}-{kind}-{run_id}", t.format("%Y%m%dT%H%M%SZ"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse() {
        assert_eq!(
            ArchiveLocation::parse("s3://b/p/q/").unwrap(),
            ArchiveLocation::S3 {
                bucket: "b".into(),
                prefix: "p/q".into()
            }
        );
        assert_eq!(
            ArchiveLocation::parse("file:///tmp/x").unwrap(),
            ArchiveLocation::Dir("/tmp/x".into())
        );
        assert!(ArchiveLocation::parse("gs://x").is_err());
        assert!(ArchiveLocation::parse("s3://").is_err());
        let l = ArchiveLocation::parse("s3://b").unwrap().join("run");
        assert_eq!(l.to_string(), "s3://b/run");
    }
}
