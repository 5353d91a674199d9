//! The dead-letter corpus (`testkit/corpus/<framework>/<case>.json`, format in `docs/corpus.md`):
//! dead letters written by the real frameworks, each beside the ground truth its producing
//! program recorded at the failure. This module loads a case file and checks what redrive
//! normalised of a record against that truth; the core unit test (no broker) and the
//! integration test (real broker, both stores) share it.
//!
//! What "matches" means is the contract of `docs/conventions.md`:
//! - source topic/partition/offset/timestamp: the record's *first* source (the topic the
//!   application's producer wrote to), even after retry-topic hops;
//! - `error_class`/`error_message`: the exception the application's code (or the deserializer,
//!   the converter) threw: the first of `truth.exception` that is not a framework wrapper
//!   ([`user_exception`]);
//! - `retry_count`: retries after the first failed attempt, `truth.attempts - 1`;
//! - a field the case lists in `not_in_headers` must come back empty (the framework does not
//!   write it), never guessed.

use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde::Deserialize;

use crate::conventions::is_wrapper;
use crate::model::{Header, Normalized, RawRecord};

/// Why a case file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    #[error("corpus: reading {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("corpus: {path} is not a case file: {source}")]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("corpus: {path}: field `{field}` is not valid base64: {source}")]
    Base64 {
        path: PathBuf,
        field: String,
        source: base64::DecodeError,
    },
}

/// One case file: one framework setup and the dead letters it wrote.
#[derive(Debug, Clone, Deserialize)]
pub struct Case {
    /// `spring-kafka`, `kafka-connect`, ...
    pub framework: String,
    /// The framework release that wrote the records (from its jar or module).
    pub framework_version: String,
    /// The case name (the file stem).
    pub case: String,
    /// How the framework was set up, in words.
    pub setup: String,
    /// Normalised fields this setup does not write (they must decode to `None`).
    #[serde(default)]
    pub not_in_headers: Vec<String>,
    pub records: Vec<CaseRecord>,
}

/// A DLQ record as read back from the DLQ topic, with its ground truth.
#[derive(Debug, Clone, Deserialize)]
pub struct CaseRecord {
    pub dlq_topic: String,
    pub dlq_partition: i32,
    pub dlq_offset: i64,
    /// Epoch ms; `None` when the record had none.
    pub timestamp_ms: Option<i64>,
    pub key_b64: Option<String>,
    pub value_b64: Option<String>,
    pub headers: Vec<CaseHeader>,
    pub truth: Truth,
}

/// One header, in DLQ order; a null value stays `None`.
#[derive(Debug, Clone, Deserialize)]
pub struct CaseHeader {
    pub name: String,
    pub value_b64: Option<String>,
}

/// What the producing program knew at the failure.
#[derive(Debug, Clone, Deserialize)]
pub struct Truth {
    pub source_topic: Option<String>,
    pub source_partition: Option<i32>,
    pub source_offset: Option<i64>,
    pub source_timestamp_ms: Option<i64>,
    pub consumer_group: Option<String>,
    /// Failed processing attempts (deliveries, deserializations, conversions), first included.
    pub attempts: i32,
    /// The thrown exception and its causes, outermost first.
    pub exception: Option<Vec<TruthException>>,
    /// The application's message id, where the framework has one (Watermill's UUID).
    #[serde(default)]
    pub message_id: Option<String>,
}

/// One exception of the thrown chain.
#[derive(Debug, Clone, Deserialize)]
pub struct TruthException {
    pub class: String,
    pub message: Option<String>,
}

fn b64(path: &Path, field: &str, v: &Option<String>) -> Result<Option<Vec<u8>>, CorpusError> {
    v.as_deref()
        .map(|s| STANDARD.decode(s))
        .transpose()
        .map_err(|source| CorpusError::Base64 {
            path: path.to_path_buf(),
            field: field.to_string(),
            source,
        })
}

impl Case {
    /// Loads one case file.
    pub fn load(path: &Path) -> Result<Case, CorpusError> {
        let text = std::fs::read_to_string(path).map_err(|source| CorpusError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|source| CorpusError::Json {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Every case under `dir` (`<framework>/<case>.json`), sorted by path.
    pub fn load_all(dir: &Path) -> Result<Vec<(PathBuf, Case)>, CorpusError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| CorpusError::Io { path, source }
        };
        let mut paths = Vec::new();
        for fw in std::fs::read_dir(dir).map_err(io(dir))? {
            let fw = fw.map_err(io(dir))?.path();
            if !fw.is_dir() {
                continue;
            }
            for f in std::fs::read_dir(&fw).map_err(io(&fw))? {
                let f = f.map_err(io(&fw))?.path();
                if f.extension().is_some_and(|e| e == "json") {
                    paths.push(f);
                }
            }
        }
        paths.sort();
        paths
            .into_iter()
            .map(|p| Case::load(&p).map(|c| (p, c)))
            .collect()
    }
}

impl CaseRecord {
    /// The record exactly as the DLQ topic held it (`path` names the file in errors).
    pub fn raw(&self, path: &Path) -> Result<RawRecord, CorpusError> {
        let headers = self
            .headers
            .iter()
            .map(|h| {
                Ok(Header {
                    name: h.name.clone(),
                    value: b64(path, &format!("header {}", h.name), &h.value_b64)?,
                })
            })
            .collect::<Result<Vec<_>, CorpusError>>()?;
        Ok(RawRecord {
            dlq_topic: self.dlq_topic.clone(),
            dlq_partition: self.dlq_partition,
            dlq_offset: self.dlq_offset,
            timestamp_ms: self.timestamp_ms,
            key: b64(path, "key_b64", &self.key_b64)?,
            value: b64(path, "value_b64", &self.value_b64)?,
            headers,
        })
    }
}

/// The exception of a thrown chain that redrive must report: the first that is not a framework
/// wrapper, else the innermost (`docs/conventions.md`, "Which exception").
pub fn user_exception(chain: &[TruthException]) -> Option<&TruthException> {
    chain
        .iter()
        .find(|e| !is_wrapper(&e.class))
        .or(chain.last())
}

/// Every way `n` (what redrive normalised of `record`) differs from the record's ground
/// truth under `case`'s contract (see the module doc); empty when it matches.
pub fn mismatches(case: &Case, record: &CaseRecord, n: &Normalized) -> Vec<String> {
    let t = &record.truth;
    let user = t.exception.as_deref().and_then(user_exception);
    let mut out = Vec::new();
    let mut field = |name: &str, got: Option<String>, want: Option<String>| {
        let want = if case.not_in_headers.iter().any(|f| f == name) {
            None
        } else {
            want
        };
        if got != want {
            out.push(format!("{name}: got {got:?}, truth {want:?}"));
        }
    };
    let s = |v: Option<&str>| v.map(str::to_string);
    let i = |v: Option<i64>| v.map(|x| x.to_string());
    field(
        "source_topic",
        n.source_topic.clone(),
        t.source_topic.clone(),
    );
    field(
        "source_partition",
        i(n.source_partition.map(i64::from)),
        i(t.source_partition.map(i64::from)),
    );
    field("source_offset", i(n.source_offset), i(t.source_offset));
    field(
        "source_timestamp_ms",
        i(n.source_timestamp_ms),
        i(t.source_timestamp_ms),
    );
    field(
        "consumer_group",
        n.consumer_group.clone(),
        t.consumer_group.clone(),
    );
    field(
        "error_class",
        n.error_class.clone(),
        s(user.map(|u| u.class.as_str())),
    );
    field(
        "error_message",
        n.error_message.clone(),
        user.and_then(|u| u.message.clone()),
    );
    field(
        "retry_count",
        i(n.retry_count.map(i64::from)),
        Some((i64::from(t.attempts) - 1).to_string()),
    );
    if t.message_id.is_some() && n.message_id != t.message_id {
        out.push(format!(
            "message_id: got {:?}, truth {:?}",
            n.message_id, t.message_id
        ));
    }
    if !n.decode_warnings.is_empty() {
        out.push(format!("decode warnings: {:?}", n.decode_warnings));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conventions::decode;
    use crate::model::Convention;

    fn corpus_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../testkit/corpus")
    }

    /// Every captured dead letter decodes to its ground truth (no broker needed).
    #[test]
    fn every_capture_matches_its_truth() {
        let cases = Case::load_all(&corpus_dir()).expect("corpus loads");
        assert!(!cases.is_empty(), "no corpus under {:?}", corpus_dir());
        let mut failures = Vec::new();
        let mut records = 0;
        for (path, case) in &cases {
            for r in &case.records {
                records += 1;
                let raw = r.raw(path).expect("corpus record decodes");
                let (conv, n) = decode(&raw);
                let at = format!(
                    "{}/{} {}@{}",
                    case.framework, case.case, r.dlq_topic, r.dlq_offset
                );
                if conv == Convention::Unknown {
                    failures.push(format!("{at}: convention not recognised"));
                }
                for m in mismatches(case, r, &n) {
                    failures.push(format!("{at} ({}): {m}", conv.as_str()));
                }
            }
        }
        assert!(
            failures.is_empty(),
            "{} of {records} captured dead letters differ from their truth:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
}
