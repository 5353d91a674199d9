//! Finding a schema by id — local schema files first, then a Confluent-compatible Schema
//! Registry — with a bounded cache, and decoding a record value with it.
//!
//! Registry API (Confluent Schema Registry REST API; Apicurio Registry serves the same under
//! `/apis/ccompat/v7`):
//! - `GET {url}/schemas/ids/{id}` → `{"schema": "<text>", "schemaType": "AVRO"|"PROTOBUF"|"JSON",
//!   "references": [{"name", "subject", "version"}]}`; `schemaType` is absent for Avro.
//! - `GET {url}/subjects/{subject}/versions/{version}` → `{"schema", "schemaType", "references",
//!   ...}`: a reference's text (Avro named types, Protobuf imports keyed by `name`).
//! - 404 with `{"error_code": 40403}` for an unknown id.
//!
//! Local files: in each of `schema_dirs`, `<id>.avsc` (Avro), `<id>.proto` (Protobuf; its
//! imports are read from the same directory) or `<id>.json` (JSON Schema).
//!
//! Bounds (a failing registry must never slow or break a page): each registry request has a
//! timeout ([`SchemaRegistryConfig::timeout_ms`], default 2000 ms, connect 1000 ms); a failure is
//! remembered for [`NEGATIVE_TTL_MS`] so that pages in that window answer at once; at most
//! [`CACHE_ENTRIES`] schemas are cached (a schema id's text never changes in a registry, so a
//! found schema stays until evicted); at most [`MAX_REFERENCES`] references are followed; a
//! schema text over [`MAX_SCHEMA_BYTES`] is refused.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::decode::{self, Compiled, DecodedJson};
use super::{wire, SchemaType};

/// Schemas kept in the cache (found or failed); past that the oldest entries are dropped.
pub const CACHE_ENTRIES: usize = 1024;
/// How long a failure to get a schema is remembered before the registry is asked again (ms).
pub const NEGATIVE_TTL_MS: u64 = 30_000;
/// Most referenced schemas followed for one schema (all levels together).
pub const MAX_REFERENCES: usize = 64;
/// Largest schema text accepted from the registry or a file (bytes).
pub const MAX_SCHEMA_BYTES: usize = 1 << 20;

/// The `[schema_registry]` table of `redrive.toml`. With neither `url` nor `schema_dirs`,
/// values are shown as before (nothing is decoded).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchemaRegistryConfig {
    /// Base URL of a Confluent-compatible Schema Registry API, e.g. `http://registry:8081` or
    /// Apicurio Registry's `http://registry:8080/apis/ccompat/v7`. Default: none.
    #[serde(default)]
    pub url: Option<String>,
    /// HTTP basic auth user name for the registry. Default: none.
    #[serde(default)]
    pub username: Option<String>,
    /// HTTP basic auth password for the registry. Default: none.
    #[serde(default)]
    pub password: Option<String>,
    /// Directories of local schema files named by schema id (`<id>.avsc`, `<id>.proto`,
    /// `<id>.json`), looked in before the registry. Default: none.
    #[serde(default)]
    pub schema_dirs: Vec<PathBuf>,
    /// Timeout of one registry request, in ms. Default 2000.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

impl SchemaRegistryConfig {
    /// True when there is somewhere to find schemas.
    pub fn is_enabled(&self) -> bool {
        self.url.is_some() || !self.schema_dirs.is_empty()
    }
}

/// What the detail page shows of a wire-format value: its schema id, and either the decoded
/// JSON or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueSchema {
    /// The schema id from the record's header.
    pub schema_id: u32,
    /// The schema's kind, when the schema was found.
    pub schema_type: Option<SchemaType>,
    /// The decoded value, or why there is none ("could not fetch (…)", "does not decode (…)").
    pub decoded: Result<DecodedJson, String>,
}

type Entry = (Result<Arc<(SchemaType, Compiled)>, String>, Instant);

/// Finds schemas by id and decodes wire-format values. Cheap to share (`Arc` inside the cache);
/// one per process ([`install`] / [`installed`]).
pub struct SchemaResolver {
    config: SchemaRegistryConfig,
    http: Option<reqwest::Client>,
    cache: Mutex<HashMap<u32, Entry>>,
}

/// The registry's answer for a schema (by id or by subject version).
#[derive(Debug, Deserialize)]
struct RegistrySchema {
    schema: String,
    #[serde(rename = "schemaType", default)]
    schema_type: Option<SchemaType>,
    #[serde(default)]
    references: Vec<RegistryReference>,
}

#[derive(Debug, Deserialize)]
struct RegistryReference {
    name: String,
    subject: String,
    version: i64,
}

impl SchemaResolver {
    /// A resolver for `config`.
    ///
    /// # Errors
    /// When the HTTP client cannot be built (TLS setup).
    pub fn new(config: SchemaRegistryConfig) -> Result<SchemaResolver, String> {
        let http = match &config.url {
            Some(_) => Some(
                reqwest::Client::builder()
                    .connect_timeout(Duration::from_millis(1000))
                    .timeout(Duration::from_millis(config.timeout_ms.unwrap_or(2000)))
                    .build()
                    .map_err(|e| format!("schema registry client: {e}"))?,
            ),
            None => None,
        };
        Ok(SchemaResolver {
            config,
            http,
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// `value` decoded for display with its schema, at most `max` bytes of JSON; `None` when
    /// `value` is not in the wire format (or nothing is configured).
    pub async fn decode_value(&self, value: &[u8], max: usize) -> Option<ValueSchema> {
        if !self.config.is_enabled() {
            return None;
        }
        let framed = wire::split(value)?;
        let schema = self.schema(framed.schema_id).await;
        Some(match schema {
            Err(reason) => ValueSchema {
                schema_id: framed.schema_id,
                schema_type: None,
                decoded: Err(format!("could not fetch ({reason})")),
            },
            Ok(found) => ValueSchema {
                schema_id: framed.schema_id,
                schema_type: Some(found.0),
                decoded: decode::decode(&found.1, framed.payload, max)
                    .map_err(|e| format!("does not decode ({e})")),
            },
        })
    }

    /// The compiled schema `id`, from the cache, the schema files or the registry.
    ///
    /// # Errors
    /// Why it cannot be had (not found, registry unreachable or timed out, invalid schema);
    /// remembered for [`NEGATIVE_TTL_MS`].
    pub async fn schema(&self, id: u32) -> Result<Arc<(SchemaType, Compiled)>, String> {
        if let Some((found, at)) = self
            .cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
        {
            if found.is_ok() || at.elapsed() < Duration::from_millis(NEGATIVE_TTL_MS) {
                return found.clone();
            }
        }
        let found = self.load(id).await.map(Arc::new);
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= CACHE_ENTRIES && !cache.contains_key(&id) {
            if let Some(oldest) = cache.iter().min_by_key(|(_, (_, at))| *at).map(|(k, _)| *k) {
                cache.remove(&oldest);
            }
        }
        cache.insert(id, (found.clone(), Instant::now()));
        found
    }

    async fn load(&self, id: u32) -> Result<(SchemaType, Compiled), String> {
        if let Some(found) = self.in_schema_dirs(id)? {
            return Ok(found);
        }
        if self.http.is_none() {
            return Err(format!(
                "no file {id}.avsc, {id}.proto or {id}.json in the schema directories"
            ));
        }
        let root: RegistrySchema = self.get(&format!("schemas/ids/{id}")).await?;
        let kind = root.schema_type.unwrap_or(SchemaType::Avro);
        let references = self.references(&root.references).await?;
        decode::compile(kind, &root.schema, &references).map(|c| (kind, c))
    }

    /// Every schema `refs` reference, depth first (a referenced schema's own references come
    /// before it, as Avro's parser wants named types defined before use), each once.
    async fn references(
        &self,
        refs: &[RegistryReference],
    ) -> Result<Vec<(String, String)>, String> {
        let mut out: Vec<(String, String)> = Vec::new();
        let mut seen: HashSet<(String, i64)> = HashSet::new();
        // Explicit stack of (reference, children done) instead of async recursion.
        let mut stack: Vec<(String, String, i64, Option<String>)> = refs
            .iter()
            .rev()
            .map(|r| (r.name.clone(), r.subject.clone(), r.version, None))
            .collect();
        while let Some((name, subject, version, text)) = stack.pop() {
            match text {
                Some(text) => out.push((name, text)),
                None => {
                    if !seen.insert((subject.clone(), version)) {
                        continue;
                    }
                    if seen.len() > MAX_REFERENCES {
                        return Err(format!("more than {MAX_REFERENCES} schema references"));
                    }
                    let path = format!(
                        "subjects/{}/versions/{version}",
                        encode_path_segment(&subject)
                    );
                    let found: RegistrySchema = self.get(&path).await?;
                    stack.push((name, subject, version, Some(found.schema)));
                    for r in found.references.iter().rev() {
                        stack.push((r.name.clone(), r.subject.clone(), r.version, None));
                    }
                }
            }
        }
        Ok(out)
    }

    /// `GET {url}/{path}` as JSON, within the timeout and [`MAX_SCHEMA_BYTES`].
    async fn get<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T, String> {
        let (Some(http), Some(base)) = (&self.http, &self.config.url) else {
            return Err("no schema registry configured".into());
        };
        let url = format!("{}/{path}", base.trim_end_matches('/'));
        let mut req = http.get(&url).header(
            "Accept",
            "application/vnd.schemaregistry.v1+json, application/json",
        );
        if let Some(user) = &self.config.username {
            req = req.basic_auth(user, self.config.password.as_deref());
        }
        let res = req.send().await.map_err(|e| {
            if e.is_timeout() {
                "the schema registry did not answer in time".to_string()
            } else {
                format!("the schema registry is unreachable: {}", root_cause(&e))
            }
        })?;
        let status = res.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Err(format!("the schema registry has no {path}"));
        }
        if !status.is_success() {
            return Err(format!("the schema registry answered {status} to {path}"));
        }
        if res.content_length().unwrap_or(0) > MAX_SCHEMA_BYTES as u64 {
            return Err("the schema is larger than 1 MiB".into());
        }
        let body = res
            .bytes()
            .await
            .map_err(|e| format!("reading the schema registry's answer: {}", root_cause(&e)))?;
        if body.len() > MAX_SCHEMA_BYTES {
            return Err("the schema is larger than 1 MiB".into());
        }
        serde_json::from_slice(&body)
            .map_err(|e| format!("the schema registry's answer to {path} is not a schema: {e}"))
    }

    /// Schema `id` from the first schema directory that has `<id>.avsc`, `.proto` or `.json`.
    fn in_schema_dirs(&self, id: u32) -> Result<Option<(SchemaType, Compiled)>, String> {
        for dir in &self.config.schema_dirs {
            for (ext, kind) in [
                ("avsc", SchemaType::Avro),
                ("proto", SchemaType::Protobuf),
                ("json", SchemaType::Json),
            ] {
                let name = format!("{id}.{ext}");
                let path = dir.join(&name);
                let Ok(meta) = std::fs::metadata(&path) else {
                    continue;
                };
                if meta.len() > MAX_SCHEMA_BYTES as u64 {
                    return Err(format!("{} is larger than 1 MiB", path.display()));
                }
                let compiled = match kind {
                    SchemaType::Protobuf => {
                        let include = protox::file::IncludeFileResolver::new(dir.clone());
                        decode::compile_proto(&name, Box::new(include))?
                    }
                    _ => {
                        let text = std::fs::read_to_string(&path)
                            .map_err(|e| format!("{}: {e}", path.display()))?;
                        decode::compile(kind, &text, &[])?
                    }
                };
                return Ok(Some((kind, compiled)));
            }
        }
        Ok(None)
    }
}

/// The innermost error of a chain (reqwest's outer message hides the cause: "connection refused").
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

/// `s` percent-encoded for one URL path segment (a subject name may hold `/` or spaces).
fn encode_path_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

static INSTALLED: OnceLock<SchemaResolver> = OnceLock::new();

/// Makes `resolver` the process's (once; `redrive serve` does it at start from
/// `[schema_registry]`). Later calls are ignored and return false.
pub fn install(resolver: SchemaResolver) -> bool {
    INSTALLED.set(resolver).is_ok()
}

/// The process's resolver, if [`install`] was called.
pub fn installed() -> Option<&'static SchemaResolver> {
    INSTALLED.get()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The registry's answer shapes (Confluent Schema Registry API, `GET /schemas/ids/{id}`):
    /// `schemaType` absent for Avro, references by name, subject and version.
    #[test]
    fn registry_answers_parse() {
        let avro: RegistrySchema = serde_json::from_str(r#"{"schema":"\"string\""}"#).unwrap();
        assert_eq!(avro.schema_type, None);
        assert!(avro.references.is_empty());
        let proto: RegistrySchema = serde_json::from_str(
            r#"{"schema":"syntax = \"proto3\";","schemaType":"PROTOBUF",
                "references":[{"name":"common/money.proto","subject":"money","version":2}],
                "maxId":9}"#,
        )
        .unwrap();
        assert_eq!(proto.schema_type, Some(SchemaType::Protobuf));
        assert_eq!(proto.references[0].name, "common/money.proto");
        assert_eq!(proto.references[0].subject, "money");
        assert_eq!(proto.references[0].version, 2);
    }

    #[test]
    fn subjects_are_path_encoded() {
        assert_eq!(encode_path_segment("orders-value"), "orders-value");
        assert_eq!(encode_path_segment("a/b c"), "a%2Fb%20c");
    }

    #[tokio::test]
    async fn local_files_by_id() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("7.avsc"),
            r#"{"type":"record","name":"R","fields":[{"name":"n","type":"long"}]}"#,
        )
        .unwrap();
        std::fs::write(
            dir.path().join("common.proto"),
            "syntax = \"proto3\"; message C { int32 x = 1; }",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("8.proto"),
            "syntax = \"proto3\"; import \"common.proto\"; message M { C c = 1; }",
        )
        .unwrap();
        let r = SchemaResolver::new(SchemaRegistryConfig {
            schema_dirs: vec![dir.path().to_path_buf()],
            ..Default::default()
        })
        .unwrap();
        let v = r.decode_value(&[0, 0, 0, 0, 7, 84], 1024).await.unwrap();
        assert_eq!(v.schema_type, Some(SchemaType::Avro));
        assert_eq!(v.decoded.unwrap().json, r#"{"n":42}"#);
        let v = r
            .decode_value(&[0, 0, 0, 0, 8, 0, 0x0a, 2, 0x08, 9], 1024)
            .await
            .unwrap();
        assert_eq!(v.decoded.unwrap().json, r#"{"c":{"x":9}}"#);
        let v = r.decode_value(&[0, 0, 0, 0, 9, 1], 1024).await.unwrap();
        assert_eq!(v.schema_id, 9);
        assert!(v
            .decoded
            .unwrap_err()
            .starts_with("could not fetch (no file 9.avsc"));
        assert!(r.decode_value(b"plain", 1024).await.is_none());
    }

    #[tokio::test]
    async fn an_unreachable_registry_fails_fast_and_is_remembered() {
        // A port nothing listens on: connection refused at once.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let r = SchemaResolver::new(SchemaRegistryConfig {
            url: Some(format!("http://127.0.0.1:{port}")),
            ..Default::default()
        })
        .unwrap();
        let v = r.decode_value(&[0, 0, 0, 0, 5, 1], 1024).await.unwrap();
        let why = v.decoded.unwrap_err();
        assert!(why.contains("unreachable"), "{why}");
        // Remembered: the same answer without asking again.
        assert_eq!(
            r.schema(5).await.unwrap_err(),
            r.schema(5).await.unwrap_err()
        );
        assert_eq!(r.cache.lock().unwrap().len(), 1);
    }
}
