//! The JSON API, raw downloads, health, metrics and the CLI, driven through the real `redrive`
//! binary: each test starts it on port 0 over a fresh store (pre-filled with
//! `Store::insert_batch`, no Kafka needed) and reads `listening on http://ADDR` from its stdout.
//! This module is their harness ([`Api`]) and fixtures; the tests are by route:
//! `dead_letters` (the list, a record, raw downloads; one run on PostgreSQL), `groups` (error
//! groups and their trends), `process` (health, metrics, HTTP behaviour, the whole path from
//! a real Kafka topic, the other subcommands and start-up failures).

mod dead_letters;
mod groups;
mod process;

use std::time::Duration;

use base64::Engine as _;
use redrive_core::fingerprint::fingerprint;
use redrive_core::store::Store;
use redrive_core::{Convention, Header, NewDeadLetter, Normalized, RawRecord};
use redrive_testkit::{Backend, TestRecord};
use serde_json::Value;

use crate::support::{run_redrive, Auth, TestApp};

/// Fixed times so the list order is known (2026-12-01T06:00:00Z).
const T0: i64 = 1_796_104_800_000;
const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;
/// Not valid UTF-8, on purpose.
const BINARY_VALUE: &[u8] = &[0x00, 0x9f, 0x92, 0x96, 0xff];
const PAGED: i64 = 10;

// ---------------------------------------------------------------------------------------------
// Harness

/// The real binary (the one harness, [`TestApp`]) seen through the JSON API as an admin's
/// API token: every route needs credentials (authentication itself is tested in `auth` and
/// `authz_matrix`).
struct Api {
    app: TestApp,
    token: String,
}

/// How to start the binary.
#[derive(Default)]
struct Options {
    backend: Option<Backend>,
    /// Extra `REDRIVE_*` variables; ingest is disabled unless this enables it.
    env: Vec<(&'static str, String)>,
}

impl Api {
    /// Starts redrive (ingest disabled) over a fresh SQLite store holding `records`.
    async fn with(records: &[NewDeadLetter]) -> Api {
        Api::start(records, Options::default()).await
    }

    async fn start(records: &[NewDeadLetter], options: Options) -> Api {
        let site_root = redrive_testkit::repo_root().join("target/site");
        let site_root = site_root.display().to_string();
        let mut env: Vec<(&str, &str)> = vec![("REDRIVE_SITE_ROOT", &site_root)];
        env.extend(options.env.iter().map(|(k, v)| (*k, v.as_str())));
        let backend = options.backend.unwrap_or(Backend::Sqlite);
        let app = TestApp::with_records(backend, records, &env).await;
        let token = app.admin_token().await;
        Api { app, token }
    }

    fn url(&self, path: &str) -> String {
        self.app.url(path)
    }

    async fn get(&self, path: &str) -> reqwest::Response {
        self.app.get(path, Auth::Bearer(&self.token)).await
    }

    /// GET, expecting a JSON body whatever the status.
    async fn get_json(&self, path: &str) -> (u16, Value) {
        let res = self.get(path).await;
        let status = res.status().as_u16();
        let ct = content_type(&res);
        let text = res.text().await.expect("body");
        assert!(
            ct.starts_with("application/json"),
            "GET {path}: {status} with content-type `{ct}`, body {text}"
        );
        let v = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("GET {path}: body is not JSON ({e}): {text}"));
        (status, v)
    }

    /// GET, asserting 400 with a JSON `error` message; returns the message.
    async fn bad_request(&self, path: &str) -> String {
        let (status, body) = self.get_json(path).await;
        assert_eq!(status, 400, "GET {path}: {body}");
        error_message(&body)
    }

    /// The id of the stored record at (topic, offset).
    async fn id_of(&self, dlq_topic: &str, offset: i64) -> i64 {
        let (_, body) = self
            .get_json(&format!(
                "/api/v1/dead-letters?dlq_topic={dlq_topic}&limit=500"
            ))
            .await;
        items(&body)
            .iter()
            .find(|i| i["dlq_offset"] == offset)
            .and_then(|i| i["id"].as_i64())
            .unwrap_or_else(|| panic!("no {dlq_topic}@{offset} in {body}"))
    }

    fn log(&self) -> String {
        self.app.log()
    }

    /// Sends SIGTERM and returns the exit code (within `deadline`).
    async fn terminate(self, deadline: Duration) -> (Option<i32>, String) {
        self.app.terminate(deadline).await
    }
}

fn content_type(res: &reqwest::Response) -> String {
    res.headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

fn items(body: &Value) -> &Vec<Value> {
    body["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items in {body}"))
}

fn error_message(body: &Value) -> String {
    body["error"]
        .as_str()
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| panic!("no `error` message in {body}"))
        .to_string()
}

// ---------------------------------------------------------------------------------------------
// Fixtures

fn header(name: &str, value: Option<&[u8]>) -> Header {
    Header {
        name: name.into(),
        value: value.map(<[u8]>::to_vec),
    }
}

struct Spec {
    topic: &'static str,
    offset: i64,
    at: i64,
    source_topic: Option<&'static str>,
    group: Option<&'static str>,
    class: Option<&'static str>,
    message: Option<&'static str>,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<Header>,
}

fn dead_letter(s: Spec) -> NewDeadLetter {
    let normalized = Normalized {
        source_topic: s.source_topic.map(String::from),
        source_partition: s.source_topic.map(|_| 3),
        source_offset: s.source_topic.map(|_| 1_000 + s.offset),
        source_timestamp_ms: Some(s.at - 60_000),
        consumer_group: s.group.map(String::from),
        error_class: s.class.map(String::from),
        error_message: s.message.map(String::from),
        stack_trace: s
            .class
            .map(|c| format!("{c}: boom\n\tat com.acme.Handler.handle(Handler.java:42)")),
        retry_count: Some(3),
        message_id: Some(format!("msg-{}", s.offset)),
        failed_at_ms: None,
        decode_warnings: vec![],
    };
    NewDeadLetter {
        record: RawRecord {
            dlq_topic: s.topic.into(),
            dlq_partition: 0,
            dlq_offset: s.offset,
            timestamp_ms: Some(s.at),
            key: s.key,
            value: s.value,
            headers: s.headers,
        },
        convention: if s.source_topic.is_some() {
            Convention::SpringDlt
        } else {
            Convention::Unknown
        },
        fingerprint: fingerprint(s.class, s.message),
        normalized,
        dead_lettered_at_ms: s.at,
        ingested_at_ms: s.at + 5,
    }
}

/// Twelve dead letters:
/// - `orders.DLT`@0: the "interesting" one (binary value, ordered headers with a duplicate, a
///   null and an empty value), a timeout from consumer group `billing`, at T0;
/// - `payments-dlt`@0: a tombstone with a null key and no headers, a validation error, at T0+1s;
/// - `orders.DLT`@1..=10: NullPointerExceptions at T0+10s, +11s, ..., for paging.
fn fixtures() -> Vec<NewDeadLetter> {
    let mut v = vec![
        dead_letter(Spec {
            topic: "orders.DLT",
            offset: 0,
            at: T0,
            source_topic: Some("orders"),
            group: Some("billing"),
            class: Some("java.util.concurrent.TimeoutException"),
            message: Some("Timeout talking to payments after 30000 ms"),
            key: Some(b"order-7".to_vec()),
            value: Some(BINARY_VALUE.to_vec()),
            headers: vec![
                header("kafka_dlt-original-topic", Some(b"orders")),
                header("trace", None),
                header("kafka_dlt-original-topic", Some(b"orders-retry")),
                header("empty", Some(b"")),
            ],
        }),
        dead_letter(Spec {
            topic: "payments-dlt",
            offset: 0,
            at: T0 + 1_000,
            source_topic: Some("payments"),
            group: Some("ledger"),
            class: Some("com.acme.ValidationException"),
            message: Some("amount must be positive"),
            key: None,
            value: None,
            headers: vec![],
        }),
    ];
    for i in 1..=PAGED {
        v.push(dead_letter(Spec {
            topic: "orders.DLT",
            offset: i,
            at: T0 + 10_000 + i * 1_000,
            source_topic: None,
            group: None,
            class: Some("java.lang.NullPointerException"),
            message: Some("Cannot invoke \"String.length()\" because \"s\" is null"),
            key: Some(format!("k{i}").into_bytes()),
            value: Some(format!("{{\"n\":{i}}}").into_bytes()),
            headers: vec![],
        }));
    }
    v
}

const LIST_FIELDS: &[&str] = &[
    "id",
    "dlq_topic",
    "dlq_partition",
    "dlq_offset",
    "source_topic",
    "source_partition",
    "source_offset",
    "consumer_group",
    "error_class",
    "error_message",
    "retry_count",
    "status",
    "convention",
    "fingerprint",
    "dead_lettered_at",
    "malformed",
];
