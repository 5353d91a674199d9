//! The detail page of a pathological dead letter, through the real binary on SQLite and
//! PostgreSQL: it renders within the documented page cap (`docs/limits.md`, "Display caps"),
//! every cut is announced with a link to the raw download, hidden characters are shown as
//! markers, and the raw downloads still give the exact bytes.
//!
//! The value is 100k-deep JSON nesting: the record that used to make this page allocate tens
//! of GB (its re-indented text grew as 2·depth² bytes before being cut).

use redrive_app::display::caps;
use redrive_core::{Convention, Header, NewDeadLetter, Normalized, RawRecord};
use redrive_testkit::{unique, Backend};

use crate::support::{Auth, TestApp};

const VIEWER: (&str, &str) = ("reader", "viewer-password-1");
const RLO: char = '\u{202E}';

fn pathological(topic: &str) -> NewDeadLetter {
    let depth = 100_000;
    let mut value = vec![b'['; depth];
    value.extend(vec![b']'; depth]);
    let long_name = format!("x-{RLO}{}", "n".repeat(64 * 1024));
    let mut headers: Vec<Header> = (0..10_000)
        .map(|i| Header {
            name: format!("h{i}"),
            value: Some(format!("v{i}").into_bytes()),
        })
        .collect();
    headers.insert(
        0,
        Header {
            name: long_name,
            value: Some(vec![b'v'; 256 * 1024]),
        },
    );
    headers.insert(
        1,
        Header {
            name: "x-user".into(),
            value: Some(format!("admin{RLO}\u{2066}\u{200B}").into_bytes()),
        },
    );
    // Names below PostgreSQL's btree limit (they are indexed), above the display cap.
    let name = |s: &str| format!("{s}{}", "z".repeat(1000));
    let stack: String = (0..20_000)
        .map(|i| format!("\tat com.example.Frame{i}.call(Frame.java:{i})\n"))
        .collect();
    let class = name("com.example.Pathological");
    let message = format!("boom {RLO} {}", "m".repeat(100_000));
    NewDeadLetter {
        record: RawRecord {
            dlq_topic: topic.into(),
            dlq_partition: 0,
            dlq_offset: 0,
            timestamp_ms: Some(1_796_104_800_000),
            key: Some(vec![b'k'; 1 << 20]),
            value: Some(value),
            headers,
        },
        convention: Convention::Unknown,
        fingerprint: redrive_core::fingerprint::fingerprint(Some(&class), Some(&message)),
        normalized: Normalized {
            source_topic: Some(name("orders")),
            consumer_group: Some(name("group")),
            error_class: Some(class),
            error_message: Some(message),
            stack_trace: Some(stack),
            message_id: Some(name("id")),
            decode_warnings: (0..1000).map(|i| format!("warning {i}")).collect(),
            ..Normalized::default()
        },
        dead_lettered_at_ms: 1_796_104_800_000,
        ingested_at_ms: 1_796_104_800_000,
    }
}

async fn detail_page_stays_within_the_caps(backend: Backend) {
    let app = TestApp::start_on(backend, &[]).await;
    app.add_user(VIEWER.0, "viewer", VIEWER.1).await;
    let topic = unique("caps.DLT");
    let record = pathological(&topic);
    app.store
        .insert_batch(std::slice::from_ref(&record))
        .await
        .expect("insert");
    let q = redrive_core::ListQuery::from_pairs([("dlq_topic", topic.as_str())]).expect("query");
    let id = app.store.list(&q).await.expect("list").items[0].id;
    let s = app.sign_in(VIEWER.0, VIEWER.1).await;

    let res = app
        .get(&format!("/dead-letters/{id}"), Auth::Session(&s))
        .await;
    assert_eq!(res.status(), 200, "{}", app.log());
    let html = res.text().await.expect("body");
    eprintln!(
        "detail page of the pathological record: {} bytes",
        html.len()
    );
    assert!(
        html.len() <= caps::DETAIL_PAGE_BYTES,
        "{} bytes > the documented {}",
        html.len(),
        caps::DETAIL_PAGE_BYTES
    );
    // Every cut says so and links to its raw download.
    for (what, link) in [
        ("value", format!("/dead-letters/{id}/raw/value")),
        ("key", format!("/dead-letters/{id}/raw/key")),
        ("headers", format!("/dead-letters/{id}/raw/headers")),
        ("stack trace", format!("/api/v1/dead-letters/{id}")),
    ] {
        assert!(
            html.contains(&format!("href=\"{link}\" download")),
            "{what}: no link {link}"
        );
    }
    assert!(html.matches("data-cut").count() >= 5, "cut notices");
    assert!(html.contains("Showing the first 200 of 10002 headers."));
    assert!(html.contains("Only the beginning of the stack trace is shown."));
    // The store keeps at most 100 of the 1000 warnings (stored field caps); 20 are listed.
    assert!(
        html.contains("<li class=\"dim\">… and "),
        "warnings counted"
    );
    // Hidden characters are markers, never themselves.
    assert!(!html.contains(RLO) && !html.contains('\u{2066}') && !html.contains('\u{200B}'));
    assert!(html.contains("admin⟨U+202E⟩⟨U+2066⟩⟨U+200B⟩"));
    assert!(html.contains("x-⟨U+202E⟩nnn"));

    // The downloads are the stored bytes, exactly.
    let raw = app
        .get(&format!("/dead-letters/{id}/raw/value"), Auth::Session(&s))
        .await;
    assert_eq!(raw.status(), 200);
    assert_eq!(
        raw.bytes().await.expect("bytes"),
        record.record.value.as_deref().unwrap_or_default()
    );
    let raw = app
        .get(
            &format!("/dead-letters/{id}/raw/headers"),
            Auth::Session(&s),
        )
        .await;
    assert_eq!(raw.status(), 200);
    assert_eq!(
        raw.headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/json")
    );
    let got: Vec<serde_json::Value> = raw.json().await.expect("headers JSON");
    assert_eq!(got.len(), record.record.headers.len());
    use base64::Engine as _;
    for (g, h) in got.iter().zip(&record.record.headers) {
        assert_eq!(g["name"].as_str(), Some(h.name.as_str()));
        let value = g["value"].as_str().map(|v| {
            base64::engine::general_purpose::STANDARD
                .decode(v)
                .expect("base64")
        });
        assert_eq!(value, h.value);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn pathological_detail_page_on_sqlite() {
    detail_page_stays_within_the_caps(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn pathological_detail_page_on_postgres() {
    detail_page_stays_within_the_caps(Backend::Postgres).await;
}
