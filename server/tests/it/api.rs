//! The JSON API, raw downloads, health, metrics and the CLI, driven through the real `redrive`
//! binary: each test starts it on port 0 over a fresh store (pre-filled with
//! `Store::insert_batch`, no Kafka needed) and reads `listening on http://ADDR` from its stdout.
//! One test runs the whole path from a real Kafka topic to the API; one runs on PostgreSQL.

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

// ---------------------------------------------------------------------------------------------
// The list

#[tokio::test]
async fn lists_newest_first_and_pages_with_next_cursor() {
    let app = Api::with(&fixtures()).await;
    let (status, first) = app.get_json("/api/v1/dead-letters").await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(items(&first).len(), 12);
    assert!(first["next_cursor"].is_null(), "{first}");
    for field in LIST_FIELDS {
        assert!(
            items(&first)[0].get(*field).is_some(),
            "list item lacks `{field}`: {}",
            items(&first)[0]
        );
    }
    let newest = &items(&first)[0];
    assert_eq!(newest["dlq_offset"], PAGED);
    assert_eq!(newest["dead_lettered_at"], "2026-12-01T06:00:20.000Z");
    assert_eq!(newest["status"], "new");
    assert!(newest["source_topic"].is_null());

    // Pages of 5: 5 + 5 + 2, in the same order as the one-page list, no duplicates.
    let mut seen = Vec::new();
    let mut path = "/api/v1/dead-letters?limit=5".to_string();
    let mut pages = 0;
    loop {
        let (status, page) = app.get_json(&path).await;
        assert_eq!(status, 200, "{page}");
        pages += 1;
        seen.extend(items(&page).iter().map(|i| i["id"].clone()));
        match page["next_cursor"].as_str() {
            Some(c) => path = format!("/api/v1/dead-letters?limit=5&cursor={c}"),
            None => break,
        }
        assert!(pages < 10, "pagination does not end");
    }
    let all: Vec<Value> = items(&first).iter().map(|i| i["id"].clone()).collect();
    assert_eq!(seen, all);
    assert_eq!(pages, 3);
}

#[tokio::test]
async fn every_filter_parameter_narrows_the_list() {
    let app = Api::with(&fixtures()).await;
    let count = |path: String| {
        let app = &app;
        async move {
            let (status, body) = app.get_json(&path).await;
            assert_eq!(status, 200, "{path}: {body}");
            items(&body).len()
        }
    };
    let timeout_fp = fingerprint(
        Some("java.util.concurrent.TimeoutException"),
        Some("Timeout talking to payments after 30000 ms"),
    );
    let q = "/api/v1/dead-letters?limit=500&";
    assert_eq!(count(format!("{q}dlq_topic=orders.DLT")).await, 11);
    assert_eq!(count(format!("{q}dlq_topic=payments-dlt")).await, 1);
    assert_eq!(count(format!("{q}source_topic=orders")).await, 1);
    assert_eq!(count(format!("{q}consumer_group=ledger")).await, 1);
    assert_eq!(
        count(format!("{q}error_class=java.lang.NullPointerException")).await,
        PAGED as usize
    );
    assert_eq!(count(format!("{q}fingerprint={timeout_fp}")).await, 1);
    // `q` is a case-insensitive substring of the message; spaces arrive percent-encoded.
    assert_eq!(count(format!("{q}q=TIMEOUT%20talking")).await, 1);
    assert_eq!(count(format!("{q}q=nothing+like+this")).await, 0);
    assert_eq!(count(format!("{q}status=new")).await, 12);
    assert_eq!(count(format!("{q}status=replayed")).await, 0);
    assert_eq!(count(format!("{q}status=deleted")).await, 0);
    // Times: RFC 3339, a date, epoch ms; `from` inclusive, `to` exclusive.
    assert_eq!(count(format!("{q}to=2026-12-01T06:00:01Z")).await, 1);
    assert_eq!(count(format!("{q}from={}", T0 + 1_000)).await, 11);
    assert_eq!(
        count(format!("{q}from={}&to={}", T0 + 11_000, T0 + 13_000)).await,
        2
    );
    assert_eq!(count(format!("{q}from=2026-12-02")).await, 0);
    // Filters combine; empty values (as an HTML form sends them) mean "not set".
    assert_eq!(
        count(format!("{q}dlq_topic=orders.DLT&source_topic=orders&q=")).await,
        1
    );
}

#[tokio::test]
async fn bad_parameters_are_a_400_with_a_reason() {
    let app = Api::with(&fixtures()).await;
    let list = "/api/v1/dead-letters";
    let m = app.bad_request(&format!("{list}?colour=red")).await;
    assert!(m.contains("colour"), "{m}");
    let m = app.bad_request(&format!("{list}?limit=501")).await;
    assert!(m.contains("limit"), "{m}");
    app.bad_request(&format!("{list}?limit=0")).await;
    app.bad_request(&format!("{list}?limit=ten")).await;
    app.bad_request(&format!("{list}?limit=-1")).await;
    let m = app
        .bad_request(&format!("{list}?cursor=not-a-cursor"))
        .await;
    assert!(m.contains("cursor"), "{m}");
    app.bad_request(&format!("{list}?cursor=%21%21")).await;
    let m = app.bad_request(&format!("{list}?status=gone")).await;
    assert!(m.contains("status"), "{m}");
    app.bad_request(&format!("{list}?from=yesterday")).await;
    app.bad_request(&format!("{list}?from=2026-12-02&to=2026-12-01"))
        .await;
    app.bad_request(&format!("{list}?q=a&q=b")).await;
    app.bad_request("/api/v1/error-groups?colour=red").await;
    app.bad_request("/api/v1/error-groups?limit=501").await;
    // Error groups come as one list: any cursor is refused with why, a malformed one too.
    for cursor in ["garbage", "MTIz"] {
        let m = app
            .bad_request(&format!("/api/v1/error-groups?cursor={cursor}"))
            .await;
        assert!(m.contains("does not apply to error groups"), "{m}");
    }
    // And the maximum is accepted.
    let (status, _) = app.get_json(&format!("{list}?limit=500")).await;
    assert_eq!(status, 200);
}

// ---------------------------------------------------------------------------------------------
// One dead letter

#[tokio::test]
async fn the_full_record_has_bytes_as_base64_and_headers_in_order() {
    let app = Api::with(&fixtures()).await;
    let id = app.id_of("orders.DLT", 0).await;
    let (status, d) = app.get_json(&format!("/api/v1/dead-letters/{id}")).await;
    assert_eq!(status, 200, "{d}");
    for field in LIST_FIELDS
        .iter()
        .chain(&["stack_trace", "key", "value", "headers"])
    {
        assert!(d.get(*field).is_some(), "full record lacks `{field}`: {d}");
    }
    assert_eq!(d["id"], id);
    assert_eq!(d["dlq_topic"], "orders.DLT");
    assert_eq!(d["dlq_partition"], 0);
    assert_eq!(d["dlq_offset"], 0);
    assert_eq!(d["source_topic"], "orders");
    assert_eq!(d["source_partition"], 3);
    assert_eq!(d["source_offset"], 1000);
    assert_eq!(d["consumer_group"], "billing");
    assert_eq!(d["error_class"], "java.util.concurrent.TimeoutException");
    assert_eq!(
        d["error_message"],
        "Timeout talking to payments after 30000 ms"
    );
    assert!(d["stack_trace"]
        .as_str()
        .is_some_and(|s| s.contains("Handler.java:42")));
    assert_eq!(d["retry_count"], 3);
    assert_eq!(d["status"], "new");
    assert_eq!(d["convention"], "spring_dlt");
    assert_eq!(
        d["fingerprint"],
        fingerprint(
            Some("java.util.concurrent.TimeoutException"),
            Some("Timeout talking to payments after 30000 ms")
        )
    );
    assert_eq!(d["dead_lettered_at"], "2026-12-01T06:00:00.000Z");
    assert_eq!(d["source_timestamp"], "2026-12-01T05:59:00.000Z");
    assert_eq!(d["ingested_at"], "2026-12-01T06:00:00.005Z");
    assert_eq!(d["message_id"], "msg-0");
    assert_eq!(d["malformed"], false);

    assert_eq!(d["key"], B64.encode(b"order-7"));
    assert_eq!(d["value"], B64.encode(BINARY_VALUE));
    let headers: Vec<(String, Value)> = d["headers"]
        .as_array()
        .expect("headers array")
        .iter()
        .map(|h| {
            (
                h["name"].as_str().unwrap_or("?").to_string(),
                h["value"].clone(),
            )
        })
        .collect();
    assert_eq!(
        headers,
        vec![
            (
                "kafka_dlt-original-topic".to_string(),
                Value::from(B64.encode(b"orders"))
            ),
            ("trace".to_string(), Value::Null),
            (
                "kafka_dlt-original-topic".to_string(),
                Value::from(B64.encode(b"orders-retry"))
            ),
            ("empty".to_string(), Value::from("")),
        ]
    );

    // A tombstone with a null key: both JSON null, no headers.
    let id = app.id_of("payments-dlt", 0).await;
    let (_, t) = app.get_json(&format!("/api/v1/dead-letters/{id}")).await;
    assert!(t["key"].is_null() && t["value"].is_null(), "{t}");
    assert_eq!(t["headers"], Value::Array(vec![]));
}

#[tokio::test]
async fn a_missing_id_is_404_and_a_bad_one_400() {
    let app = Api::with(&fixtures()).await;
    let (status, body) = app.get_json("/api/v1/dead-letters/987654321").await;
    assert_eq!(status, 404, "{body}");
    assert!(error_message(&body).contains("987654321"));
    let m = app.bad_request("/api/v1/dead-letters/abc").await;
    assert!(m.contains("abc"), "{m}");
    app.bad_request("/api/v1/dead-letters/99999999999999999999999")
        .await;
    app.bad_request("/dead-letters/abc/raw/value").await;
    // An action on ids of which some are not there: 404 naming them, nothing changed.
    let id = app.id_of("orders.DLT", 0).await;
    for (ids, says) in [
        (
            vec![id, 987654321],
            "there is no dead letter 987654321".to_string(),
        ),
        (
            vec![987654322, id, 987654321],
            "there are no dead letters 987654321, 987654322 (2 of the 3 asked)".to_string(),
        ),
        (
            (0..8).map(|i| 987654321 + i).chain([id]).collect(),
            "there are no dead letters 987654321, 987654322, 987654323, 987654324, 987654325 \
             and 3 more (8 of the 9 asked)"
                .to_string(),
        ),
    ] {
        let res = app
            .app
            .post_json(
                "/api/v1/dead-letters/delete",
                Auth::Bearer(&app.token),
                crate::support::Csrf::Right,
                &serde_json::json!({ "ids": ids }),
            )
            .await;
        let status = res.status().as_u16();
        let body: Value = res.json().await.expect("JSON");
        assert_eq!((status, error_message(&body)), (404, says), "{body}");
    }
    let (_, record) = app.get_json(&format!("/api/v1/dead-letters/{id}")).await;
    assert_eq!(record["status"], "new", "{record}");
    let (status, body) = app.get_json("/api/v1/no-such-thing").await;
    assert_eq!(status, 404);
    assert_eq!(body["code"], "not_found", "{body}");
    assert!(
        error_message(&body).contains("/api/v1/dead-letters"),
        "{body}"
    );
    // A prefix of existing routes: the 404 names them (the one error shape).
    let (status, body) = app.get_json("/api/v1/automation").await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(
        (body["code"].clone(), body["status"].clone()),
        ("not_found".into(), 404.into())
    );
    let m = error_message(&body);
    assert!(
        m.contains("/api/v1/automation/rules") && m.contains("/api/docs"),
        "{m}"
    );
}

#[tokio::test]
async fn raw_downloads_are_the_exact_bytes() {
    let app = Api::with(&fixtures()).await;
    let id = app.id_of("orders.DLT", 0).await;
    for (prefix, part, bytes) in [
        ("", "value", BINARY_VALUE),
        ("", "key", b"order-7".as_slice()),
        ("/api/v1", "value", BINARY_VALUE),
    ] {
        let res = app
            .get(&format!("{prefix}/dead-letters/{id}/raw/{part}"))
            .await;
        assert_eq!(res.status(), 200);
        assert_eq!(content_type(&res), "application/octet-stream");
        let disposition = res
            .headers()
            .get(reqwest::header::CONTENT_DISPOSITION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        assert_eq!(
            disposition,
            format!("attachment; filename=\"dead-letter-{id}-{part}.bin\"")
        );
        assert_eq!(res.bytes().await.expect("body").as_ref(), bytes);
    }
    // A null body, or no such record: 404 JSON.
    let tombstone = app.id_of("payments-dlt", 0).await;
    for path in [
        format!("/dead-letters/{tombstone}/raw/value"),
        format!("/dead-letters/{tombstone}/raw/key"),
        "/dead-letters/987654321/raw/value".to_string(),
    ] {
        let (status, body) = app.get_json(&path).await;
        assert_eq!(status, 404, "{path}: {body}");
    }
}

#[tokio::test]
async fn error_groups_count_by_fingerprint() {
    let app = Api::with(&fixtures()).await;
    let (status, body) = app.get_json("/api/v1/error-groups").await;
    assert_eq!(status, 200, "{body}");
    let groups = items(&body);
    assert_eq!(groups.len(), 3, "{body}");
    assert_eq!(groups[0]["error_class"], "java.lang.NullPointerException");
    assert_eq!(groups[0]["count"], PAGED);
    for field in [
        "fingerprint",
        "error_class",
        "example_message",
        "count",
        "first_seen",
        "last_seen",
    ] {
        assert!(groups[0].get(field).is_some(), "group lacks `{field}`");
    }
    let (_, filtered) = app
        .get_json("/api/v1/error-groups?dlq_topic=payments-dlt")
        .await;
    assert_eq!(items(&filtered).len(), 1);
    assert_eq!(items(&filtered)[0]["count"], 1);
    let (_, limited) = app.get_json("/api/v1/error-groups?limit=1").await;
    assert_eq!(items(&limited).len(), 1);
    // Counted from the maintained aggregate, or by a scan of the newest matches: the body
    // says which (issue 12 item 3); a few matches are all counted either way.
    assert_eq!(body["exact"], true, "{body}");
    assert!(body["counted_among_newest"].is_null(), "{body}");
    let (_, by_class) = app
        .get_json("/api/v1/error-groups?error_class=java.lang.NullPointerException")
        .await;
    assert_eq!(by_class["exact"], true, "{by_class}");
    assert_eq!(items(&by_class)[0]["count"], PAGED, "{by_class}");
    // Each group carries its trend over the list's window: the last 24 h without a range.
    assert_eq!(body["trend"]["bucket_ms"], 3_600_000, "{body}");
    assert_eq!(body["trend"]["cut"], false, "{body}");
    assert_eq!(
        groups[0]["trend"].as_array().map(|t| t.len() as i64),
        Some(buckets(&body)),
        "{body}"
    );
    assert!(groups[0]["new_group"].is_boolean(), "{body}");
}

/// A group's `trend` counts its dead letters per hour of the window (the groups page's
/// sparkline), and `new_group` says it was first seen in the last 24 h.
#[tokio::test]
async fn error_groups_carry_their_trend_and_whether_they_are_new() {
    const HOUR: i64 = 3_600_000;
    let now = redrive_core::clock::now_ms();
    // Three two hours ago, one five hours ago; a second group first seen three days ago.
    let at = [
        (now - 2 * HOUR, "Spark"),
        (now - 2 * HOUR, "Spark"),
        (now - 2 * HOUR, "Spark"),
        (now - 5 * HOUR, "Spark"),
        (now - 3 * 24 * HOUR, "Old"),
    ];
    let records: Vec<NewDeadLetter> = at
        .iter()
        .enumerate()
        .map(|(i, (t, class))| {
            dead_letter(Spec {
                topic: "trend-dlt",
                offset: i as i64,
                at: *t,
                source_topic: None,
                group: None,
                class: Some(class),
                message: Some("boom"),
                key: None,
                value: Some(b"v".to_vec()),
                headers: vec![],
            })
        })
        .collect();
    let app = Api::with(&records).await;
    let (status, body) = app.get_json("/api/v1/error-groups").await;
    assert_eq!(status, 200, "{body}");
    let groups = items(&body);
    let spark = groups
        .iter()
        .find(|g| g["error_class"] == "Spark")
        .expect("Spark");
    let old = groups
        .iter()
        .find(|g| g["error_class"] == "Old")
        .expect("Old");
    let counts: Vec<i64> = spark["trend"]
        .as_array()
        .expect("trend")
        .iter()
        .map(|n| n.as_i64().expect("count"))
        .collect();
    // One bucket per hour of the window, which ends at the server's now: 3 in one hour, 1
    // three hours before it, none elsewhere (indices by content: the hour may turn between
    // this test's clock and the server's).
    assert_eq!(counts.len() as i64, buckets(&body), "{body}");
    let three = counts.iter().position(|n| *n == 3).expect("the busy hour");
    assert_eq!(counts[three - 3], 1, "{body}");
    assert_eq!(counts.iter().sum::<i64>(), 4, "{body}");
    assert_eq!(spark["new_group"], true, "{body}");
    assert_eq!(old["new_group"], false, "{body}");
    assert!(old["trend"]
        .as_array()
        .expect("trend")
        .iter()
        .all(|n| n == 0));

    // Under a time range the trend covers the range: from four hours ago, the three only.
    let (_, ranged) = app
        .get_json(&format!("/api/v1/error-groups?from={}", now - 4 * HOUR))
        .await;
    let spark = items(&ranged)
        .iter()
        .find(|g| g["error_class"] == "Spark")
        .cloned()
        .expect("Spark");
    let counts = spark["trend"].as_array().expect("trend");
    assert_eq!(
        ranged["trend"]["from"].as_str().map(ms),
        Some((now - 4 * HOUR).div_euclid(HOUR) * HOUR),
        "from the hour the range starts in: {ranged}"
    );
    assert_eq!(counts.len() as i64, buckets(&ranged), "{ranged}");
    assert_eq!(counts.iter().filter_map(|n| n.as_i64()).sum::<i64>(), 3);
    // Only a start, four days back: to now, as the list reads it, so both groups' dead
    // letters are in their trends (a lone `from` once drew the 24 h after it: all zeros).
    let (_, days) = app
        .get_json(&format!(
            "/api/v1/error-groups?from={}",
            now - 4 * 24 * HOUR
        ))
        .await;
    assert!(
        ms(days["trend"]["to"].as_str().expect("to")) >= now,
        "{days}"
    );
    for (class, n) in [("Spark", 4), ("Old", 1)] {
        let g = items(&days)
            .iter()
            .find(|g| g["error_class"] == class)
            .cloned()
            .expect(class);
        let trend = g["trend"].as_array().expect("trend");
        assert_eq!(trend.len() as i64, buckets(&days), "{days}");
        assert_eq!(
            trend.iter().filter_map(|n| n.as_i64()).sum::<i64>(),
            n,
            "{days}"
        );
    }
    // A start in the future: nothing to draw, no buckets.
    let (status, future) = app
        .get_json(&format!("/api/v1/error-groups?from={}", now + 24 * HOUR))
        .await;
    assert_eq!(status, 200, "{future}");
    assert_eq!(future["trend"]["from"], future["trend"]["to"], "{future}");
    // Thirty days back: cut to the 8 days kept, in buckets of 4 hours.
    let (_, month) = app
        .get_json(&format!(
            "/api/v1/error-groups?from={}&to={now}",
            now - 30 * 24 * HOUR
        ))
        .await;
    assert_eq!(month["trend"]["cut"], true, "{month}");
    assert_eq!(month["trend"]["bucket_ms"], 4 * HOUR, "{month}");
    let spark = items(&month)
        .iter()
        .find(|g| g["error_class"] == "Spark")
        .cloned()
        .expect("Spark");
    assert_eq!(
        spark["trend"].as_array().map(|t| t.len() as i64),
        Some(buckets(&month)),
        "{month}"
    );
}

/// Epoch ms of an RFC 3339 time.
fn ms(rfc3339: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .unwrap_or_else(|e| panic!("{rfc3339}: {e}"))
        .timestamp_millis()
}

/// How many buckets an error-group list's `trend` window holds: `to - from` in
/// `bucket_ms`, the last one partial.
fn buckets(list: &Value) -> i64 {
    let t = &list["trend"];
    let span = ms(t["to"].as_str().expect("to")) - ms(t["from"].as_str().expect("from"));
    let bucket = t["bucket_ms"].as_i64().expect("bucket_ms");
    (span + bucket - 1) / bucket
}

// ---------------------------------------------------------------------------------------------
// Health, metrics, HTTP behaviour

#[tokio::test]
async fn health_readiness_and_metrics() {
    let app = Api::with(&fixtures()).await;
    let res = app.get("/healthz").await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.text().await.expect("body"), "ok");

    let (status, ready) = app.get_json("/readyz").await;
    assert_eq!(status, 200, "{ready}");
    assert_eq!(ready["ready"], true);
    assert_eq!(ready["store"]["ok"], true);
    assert_eq!(ready["store"]["backend"], "sqlite");
    assert_eq!(ready["ingest"]["enabled"], false);
    // The replay relay's state (docs/replay.md, "Relay status").
    assert_eq!(ready["relay"]["published_total"], 0, "{ready}");
    assert_eq!(ready["relay"]["rejected_total"], 0, "{ready}");
    assert!(ready["relay"]["running"].is_boolean(), "{ready}");
    assert!(ready["relay"].get("stopped").is_none(), "{ready}");

    let res = app.get("/metrics").await;
    assert_eq!(res.status(), 200);
    assert!(content_type(&res).starts_with("text/plain"));
    let text = res.text().await.expect("body");
    for name in [
        "redrive_dead_letters_ingested_total",
        "redrive_ingest_batches_total",
        "redrive_store_errors_total",
        "redrive_ingest_ready",
        "redrive_dead_letters",
        "redrive_relay_published_total",
        "redrive_relay_failed_total",
        "redrive_relay_rejected_total",
        "redrive_relay_retried_total",
        "redrive_relay_released_total",
        "redrive_relay_running",
        "redrive_relay_active_jobs",
        "redrive_relay_kafka_reachable",
    ] {
        assert!(
            text.contains(&format!("# TYPE {name} ")),
            "/metrics lacks {name}:\n{text}"
        );
    }
    assert!(
        text.contains("redrive_dead_letters{status=\"new\"} 12"),
        "{text}"
    );
    assert!(text.contains("redrive_ingest_ready 0"), "{text}");
}

#[tokio::test]
async fn responses_are_gzipped_when_asked() {
    let app = Api::with(&fixtures()).await;
    let res = reqwest::Client::new()
        .get(app.url("/api/v1/dead-letters"))
        .bearer_auth(&app.token)
        .header(reqwest::header::ACCEPT_ENCODING, "gzip")
        .send()
        .await
        .expect("GET");
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.headers()
            .get(reqwest::header::CONTENT_ENCODING)
            .and_then(|v| v.to_str().ok()),
        Some("gzip")
    );
}

#[tokio::test]
async fn readyz_is_503_while_kafka_is_unreachable() {
    // Nothing listens on port 1: ingest starts, but can never reach the cluster.
    let app = Api::start(
        &[],
        Options {
            env: vec![
                ("REDRIVE_INGEST_ENABLED", "true".into()),
                ("REDRIVE_KAFKA_BROKERS", "127.0.0.1:1".into()),
                ("REDRIVE_DLQ_TOPICS", "orders.DLT".into()),
            ],
            ..Options::default()
        },
    )
    .await;
    let (status, body) = app.get_json("/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["ready"], false);
    assert_eq!(body["store"]["ok"], true);
    assert!(!error_message(&body).is_empty());
    // The process itself is fine.
    assert_eq!(app.get("/healthz").await.status(), 200);
    // SIGTERM still stops it cleanly.
    let (code, log) = app.terminate(Duration::from_secs(40)).await;
    assert_eq!(code, Some(0), "{log}");
}

#[tokio::test]
async fn sigterm_stops_cleanly() {
    let app = Api::with(&[]).await;
    assert_eq!(app.get("/healthz").await.status(), 200);
    let (code, log) = app.terminate(Duration::from_secs(30)).await;
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("stopped"), "{log}");
    // The harness read `listening on http://ADDR` from stdout: the log does not repeat it.
    assert!(!log.contains("listening on"), "{log}");
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL

#[tokio::test]
async fn the_api_on_postgresql() {
    let app = Api::start(
        &fixtures(),
        Options {
            backend: Some(Backend::Postgres),
            ..Options::default()
        },
    )
    .await;
    let (status, page) = app.get_json("/api/v1/dead-letters?limit=5").await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(items(&page).len(), 5);
    let cursor = page["next_cursor"].as_str().expect("a next page");
    let (_, next) = app
        .get_json(&format!("/api/v1/dead-letters?limit=5&cursor={cursor}"))
        .await;
    assert_eq!(items(&next).len(), 5);
    assert_ne!(items(&page)[0]["id"], items(&next)[0]["id"]);

    let id = app.id_of("orders.DLT", 0).await;
    let (_, d) = app.get_json(&format!("/api/v1/dead-letters/{id}")).await;
    assert_eq!(d["value"], B64.encode(BINARY_VALUE));
    assert_eq!(d["headers"][1]["value"], Value::Null);
    assert_eq!(d["headers"][3]["value"], "");
    let res = app.get(&format!("/dead-letters/{id}/raw/value")).await;
    assert_eq!(res.bytes().await.expect("body").as_ref(), BINARY_VALUE);
    let (status, ready) = app.get_json("/readyz").await;
    assert_eq!(status, 200, "{ready}");
    assert_eq!(ready["store"]["backend"], "postgres");
    app.bad_request("/api/v1/dead-letters?status=nope").await;
}

// ---------------------------------------------------------------------------------------------
// Kafka -> ingest -> API, through the binary

#[tokio::test]
async fn serve_ingests_a_dlq_topic_and_serves_it() {
    let topic = format!("{}.DLT", redrive_testkit::unique("api"));
    redrive_testkit::create_topic(&topic, 1, &[])
        .await
        .expect("topic");
    let mut record = TestRecord::new(
        "{\"order\":7}",
        &[
            ("kafka_dlt-original-topic", b"orders"),
            (
                "kafka_dlt-exception-fqcn",
                b"java.lang.IllegalStateException",
            ),
            ("kafka_dlt-exception-message", b"no stock for order 7"),
        ],
    );
    record.key = Some(b"order-7".to_vec());
    redrive_testkit::produce(&topic, &[record])
        .await
        .expect("produce");

    let group = redrive_testkit::unique("api_group");
    let app = Api::start(
        &[],
        Options {
            env: vec![
                ("REDRIVE_INGEST_ENABLED", "true".into()),
                ("REDRIVE_KAFKA_BROKERS", redrive_testkit::kafka_brokers()),
                ("REDRIVE_DLQ_TOPICS", topic.clone()),
                ("REDRIVE_GROUP_ID", group),
            ],
            ..Options::default()
        },
    )
    .await;

    let path = format!("/api/v1/dead-letters?dlq_topic={topic}");
    let item = redrive_testkit::wait_for(
        "the dead letter in the API",
        Duration::from_secs(60),
        || async {
            let (_, body) = app.get_json(&path).await;
            items(&body).first().cloned()
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n--- redrive log ---\n{}", app.log()));
    assert_eq!(item["source_topic"], "orders");
    assert_eq!(item["error_class"], "java.lang.IllegalStateException");
    assert_eq!(item["error_message"], "no stock for order 7");
    assert_eq!(item["convention"], "spring_dlt");

    redrive_testkit::wait_for("/readyz 200", Duration::from_secs(60), || async {
        (app.get("/readyz").await.status() == 200).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n--- redrive log ---\n{}", app.log()));
    let metrics = app.get("/metrics").await.text().await.expect("metrics");
    assert!(
        metrics.contains("redrive_dead_letters_ingested_total 1"),
        "{metrics}"
    );
    assert!(metrics.contains("redrive_ingest_ready 1"), "{metrics}");

    let (code, log) = app.terminate(Duration::from_secs(40)).await;
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("ingest stopped cleanly"), "{log}");
}

// ---------------------------------------------------------------------------------------------
// The other subcommands and start-up failures

#[tokio::test]
async fn config_prints_the_effective_configuration_without_secrets() {
    let (code, out, err) = run_redrive(
        &["config", "--listen", "0.0.0.0:4000"],
        &[
            (
                "REDRIVE_DATABASE_URL",
                "postgres://redrive:s3cret@db:5432/redrive",
            ),
            ("REDRIVE_GROUP_ID", "ops"),
            ("REDRIVE_LISTEN", "127.0.0.1:9"),
            ("REDRIVE_KAFKA__SASL_PASSWORD", "hunter2"),
            ("REDRIVE_KAFKA__SASL_MECHANISM", "PLAIN"),
        ],
        None,
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("group_id = \"ops\""), "{out}");
    assert!(out.contains("listen = \"0.0.0.0:4000\""), "{out}");
    assert!(out.contains("\"sasl.mechanism\" = \"PLAIN\""), "{out}");
    assert!(!out.contains("s3cret") && !out.contains("hunter2"), "{out}");
    assert!(out.contains("REDACTED"), "{out}");
}

#[tokio::test]
async fn migrate_creates_the_schema_and_exits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = redrive_testkit::fresh_sqlite_url(&dir);
    let (code, _, err) = run_redrive(&["migrate"], &[("REDRIVE_DATABASE_URL", &url)], None).await;
    assert_eq!(code, Some(0), "{err}");
    let store = Store::connect(&url).await.expect("connect");
    let page = store
        .list(&redrive_core::ListQuery {
            limit: 10,
            ..Default::default()
        })
        .await
        .expect("the schema exists");
    assert!(page.items.is_empty());
}

#[tokio::test]
async fn bad_configuration_exits_2_with_the_reason() {
    let (code, _, err) =
        run_redrive(&["serve"], &[("REDRIVE_INGEST_BATCH_SIZE", "lots")], None).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("ingest_batch_size"), "{err}");
}

#[tokio::test]
async fn an_unreachable_database_is_retried_then_reported() {
    // A PostgreSQL server that refuses connections (nothing listens on port 1): "unavailable",
    // like a database server that is not up yet, but failing fast.
    let (code, _, err) = run_redrive(
        &["serve"],
        &[
            (
                "REDRIVE_DATABASE_URL",
                "postgres://redrive@127.0.0.1:1/redrive",
            ),
            ("REDRIVE_DATABASE_WAIT_MS", "6000"),
            ("REDRIVE_LISTEN", "127.0.0.1:0"),
        ],
        None,
    )
    .await;
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("retrying"), "{err}");
    assert!(err.contains("still unreachable"), "{err}");
}

#[tokio::test]
async fn a_bad_topic_pattern_stops_serve_with_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = redrive_testkit::fresh_sqlite_url(&dir);
    let (code, _, err) = run_redrive(
        &["serve"],
        &[
            ("REDRIVE_DATABASE_URL", &url),
            ("REDRIVE_LISTEN", "127.0.0.1:0"),
            ("REDRIVE_KAFKA_BROKERS", "127.0.0.1:1"),
            ("REDRIVE_DLQ_TOPICS", "^orders(\\.DLT"),
        ],
        None,
    )
    .await;
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("orders("), "{err}");
}
