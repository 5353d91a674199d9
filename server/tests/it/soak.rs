//! Soak: the real binary renders every page kind — the list, each filter, text search, error
//! groups, replay jobs (list and one job), the audit trail, a dead letter's detail — 2,000
//! times at concurrency 8. Every render must answer 200: a render that does not complete is
//! cut off by the server's request timeout and answered 503, and the client's own bound
//! (twice that timeout) turns a hang into a failure instead of a stuck suite. The slowest
//! render is printed for the record (speed itself is measured by `make bench`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redrive_core::Normalized;
use redrive_testkit::fixtures::stored_dead_letter;
use redrive_testkit::Backend;
use serde_json::{json, Value};

use crate::support::{Auth, Csrf, TestApp};

const RENDERS: usize = 2_000;
const CONCURRENCY: usize = 8;
/// The server's request timeout for this test (ms): what "never completes" is measured by.
const REQUEST_TIMEOUT_MS: u64 = 10_000;

fn records() -> Vec<redrive_core::NewDeadLetter> {
    let kinds = [
        (
            "java.net.SocketTimeoutException",
            "Read timed out after 30000 ms",
            "orders",
            "billing",
        ),
        (
            "com.example.PaymentDeclined",
            "Payment 4711 declined by provider",
            "payments",
            "pay",
        ),
        (
            "org.apache.kafka.common.errors.SerializationException",
            "Unknown magic byte!",
            "orders",
            "audit",
        ),
    ];
    (0..60)
        .map(|i| {
            let (class, message, source, group) = kinds[i as usize % kinds.len()];
            stored_dead_letter(
                "soak.DLT",
                i,
                Normalized {
                    source_topic: Some(source.into()),
                    consumer_group: Some(group.into()),
                    error_class: Some(class.into()),
                    error_message: Some(message.into()),
                    stack_trace: Some(format!(
                        "{class}: {message}\n\tat com.example.Handler.handle(Handler.java:{i})\n"
                    )),
                    retry_count: Some(3),
                    ..Normalized::default()
                },
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_page_kind_renders_2000_times_at_concurrency_8() {
    let records = records();
    let fingerprint = records[0].fingerprint.clone();
    let timeout = REQUEST_TIMEOUT_MS.to_string();
    let app = TestApp::with_records(
        Backend::Sqlite,
        &records,
        &[("REDRIVE_REQUEST_TIMEOUT_MS", &timeout)],
    )
    .await;
    let token = app.admin_token().await;

    // A replay job (with its audit row) so the jobs pages and the audit trail have content.
    let res = app
        .post_json(
            "/api/v1/replays",
            Auth::Bearer(&token),
            Csrf::Missing,
            &json!({"filter": {"source_topic": "payments"}, "reason": "soak"}),
        )
        .await;
    assert_eq!(res.status(), 202, "replay request");
    let job: Value = res.json().await.expect("JSON");
    let job_id = job["job_id"].as_str().expect("job_id").to_string();
    let res = app
        .get("/api/v1/dead-letters?limit=1", Auth::Bearer(&token))
        .await;
    let list: Value = res.json().await.expect("JSON");
    let id = list["items"][0]["id"].as_i64().expect("an id");

    let pages: Arc<Vec<String>> = Arc::new(vec![
        "/".into(),
        format!("/?fingerprint={fingerprint}"),
        "/?error_class=com.example.PaymentDeclined".into(),
        "/?source_topic=orders".into(),
        "/?dlq_topic=soak.DLT".into(),
        "/?consumer_group=billing".into(),
        "/?status=new".into(),
        "/?from=2026-11-30&to=2026-12-02".into(),
        "/?q=timed+out".into(),
        "/?limit=5".into(),
        "/groups".into(),
        "/jobs".into(),
        format!("/jobs/{job_id}"),
        "/audit".into(),
        format!("/dead-letters/{id}"),
    ]);

    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(2 * REQUEST_TIMEOUT_MS))
        .build()
        .expect("client");
    let next = Arc::new(AtomicUsize::new(0));
    let app = Arc::new(app);
    let mut workers = Vec::new();
    for _ in 0..CONCURRENCY {
        let (client, next, pages, app, token) = (
            client.clone(),
            next.clone(),
            pages.clone(),
            app.clone(),
            token.clone(),
        );
        workers.push(tokio::spawn(async move {
            let mut slowest = (Duration::ZERO, String::new());
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= RENDERS {
                    return slowest;
                }
                let page = &pages[n % pages.len()];
                let started = Instant::now();
                let res = client
                    .get(app.url(page))
                    .bearer_auth(&token)
                    .send()
                    .await
                    .unwrap_or_else(|e| panic!("render {n}: GET {page}: {e}\n{}", app.log()));
                let status = res.status();
                let body = res
                    .text()
                    .await
                    .unwrap_or_else(|e| panic!("GET {page}: body: {e}"));
                assert_eq!(status, 200, "render {n}: GET {page}: {body}");
                assert!(
                    body.contains("</html>"),
                    "render {n}: GET {page}: a whole page"
                );
                let took = started.elapsed();
                if took > slowest.0 {
                    slowest = (took, page.clone());
                }
            }
        }));
    }
    let mut slowest = (Duration::ZERO, String::new());
    for w in workers {
        let s = w.await.expect("worker");
        if s.0 > slowest.0 {
            slowest = s;
        }
    }
    eprintln!(
        "soak: {RENDERS} renders of {} page kinds at concurrency {CONCURRENCY}; slowest {} ms ({})",
        pages.len(),
        slowest.0.as_millis(),
        slowest.1
    );
}
