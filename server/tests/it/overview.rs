//! The overview page and the store-derived `/metrics` series after a known ingest through the
//! real binary (real broker, two DLQ topics, two source topics), on SQLite and PostgreSQL:
//! every number is checked against the store's truth counted with plain SQL, then again
//! after a delete by filter, a replay by filter published by the relay, and a restore.

use std::time::Duration;

use redrive_testkit::{create_topic, kafka_brokers, produce, unique, Backend, TestRecord};
use serde_json::json;

use crate::stats::truth_counts;
use crate::support::{eventually, Auth, Csrf, TestApp};

/// A Spring-style dead letter from `source` failing with `class`.
fn record(source: &str, class: &str, i: usize) -> TestRecord {
    let mut r = TestRecord::new(
        &format!("{{\"n\":{i}}}"),
        &[
            ("kafka_dlt-original-topic", source.as_bytes()),
            ("kafka_dlt-original-partition", &0i32.to_be_bytes()),
            ("kafka_dlt-original-offset", &(i as i64).to_be_bytes()),
            ("kafka_dlt-exception-fqcn", class.as_bytes()),
            ("kafka_dlt-exception-message", b"failed"),
        ],
    );
    r.key = Some(format!("k{i}").into_bytes());
    r
}

/// `name{labels} value` from an exposition, if present.
fn sample(text: &str, series: &str) -> Option<i64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

fn live(truth: &crate::stats::Truth, dlq: &str, source: Option<&str>) -> i64 {
    truth
        .iter()
        .filter(|((d, s, st), _)| d == dlq && source.is_none_or(|x| x == s) && st != "deleted")
        .map(|(_, (n, _))| n)
        .sum()
}

fn status_count(truth: &crate::stats::Truth, dlq: &str, status: &str) -> i64 {
    truth
        .iter()
        .filter(|((d, _, st), _)| d == dlq && st == status)
        .map(|(_, (n, _))| n)
        .sum()
}

/// The overview's numbers for `dlq` match the truth: the live count and each status count
/// are links into the list filtered to exactly that.
async fn assert_overview(app: &TestApp, token: &str, backend: Backend, dlq: &str, step: &str) {
    let truth = truth_counts(backend, &app.db_url).await;
    let html = app
        .get("/overview", Auth::Bearer(token))
        .await
        .text()
        .await
        .expect("overview");
    let live_n = live(&truth, dlq, None);
    let want = format!("href=\"/?dlq_topic={dlq}\" class=\"num\">{live_n}</a>");
    assert!(
        html.contains(&want),
        "{backend:?} {step}: overview lacks {want}:\n{html}"
    );
    for status in ["replayed", "deleted", "replay_failed"] {
        let n = status_count(&truth, dlq, status);
        if n > 0 {
            let want =
                format!("href=\"/?dlq_topic={dlq}&amp;status={status}\" class=\"num\">{n}</a>");
            assert!(
                html.contains(&want),
                "{backend:?} {step}: lacks {want}:\n{html}"
            );
        }
    }
    // The list behind the link agrees.
    let listed: serde_json::Value = app
        .get(
            &format!("/api/v1/dead-letters?dlq_topic={dlq}&limit=500"),
            Auth::Bearer(token),
        )
        .await
        .json()
        .await
        .expect("list");
    assert_eq!(
        listed["items"].as_array().map(|a| a.len() as i64),
        Some(live_n),
        "{backend:?} {step}"
    );
}

/// The store series of /metrics match the truth (within the 10 s cache: polled).
async fn assert_metrics(app: &TestApp, token: &str, backend: Backend, dlqs: &[&str], step: &str) {
    let truth = truth_counts(backend, &app.db_url).await;
    let want: Vec<(String, i64)> = dlqs
        .iter()
        .flat_map(|d| {
            [
                "new",
                "replay_pending",
                "replayed",
                "replay_failed",
                "deleted",
            ]
            .map(|s| {
                (
                    format!("redrive_dead_letters_by_topic{{dlq_topic=\"{d}\",status=\"{s}\"}}"),
                    status_count(&truth, d, s),
                )
            })
        })
        .collect();
    eventually(
        &format!("{backend:?} {step}: /metrics matches the store"),
        Duration::from_secs(40),
        || async {
            let text = app
                .get("/metrics", Auth::Bearer(token))
                .await
                .text()
                .await
                .unwrap_or_default();
            want.iter()
                .all(|(series, n)| sample(&text, series) == Some(*n))
        },
    )
    .await;
}

#[tokio::test]
async fn overview_and_metrics_match_the_store_after_a_real_ingest() {
    for backend in Backend::ALL {
        let a = unique("ov_a_dlt");
        let b = unique("ov_b_dlt");
        let orders = unique("ov_orders");
        let payments = unique("ov_payments");
        let target = unique("ov_replayed");
        for t in [&a, &b, &target] {
            create_topic(t, 2, &[]).await.expect("topic");
        }
        let mut in_a = Vec::new();
        for i in 0..30 {
            in_a.push(record(&orders, "com.example.OutOfStock", i));
        }
        for i in 30..50 {
            in_a.push(record(&payments, "com.example.Declined", i));
        }
        let in_b: Vec<TestRecord> = (0..15)
            .map(|i| record(&orders, "com.example.Timeout", i))
            .collect();
        produce(&a, &in_a).await.expect("produce a");
        produce(&b, &in_b).await.expect("produce b");

        let topics = format!("{a},{b}");
        let group = unique("ov_group");
        let brokers = kafka_brokers();
        let app = TestApp::start_on(
            backend,
            &[
                ("REDRIVE_INGEST_ENABLED", "true"),
                ("REDRIVE_KAFKA_BROKERS", brokers.as_str()),
                ("REDRIVE_DLQ_TOPICS", topics.as_str()),
                ("REDRIVE_GROUP_ID", group.as_str()),
            ],
        )
        .await;
        let token = app.admin_token().await;
        eventually(
            "65 dead letters stored",
            Duration::from_secs(90),
            || async {
                let t = truth_counts(backend, &app.db_url).await;
                t.values().map(|(n, _)| n).sum::<i64>() == 65
            },
        )
        .await;

        let truth = truth_counts(backend, &app.db_url).await;
        assert_eq!(live(&truth, &a, Some(&orders)), 30);
        assert_eq!(live(&truth, &a, Some(&payments)), 20);
        assert_eq!(live(&truth, &b, Some(&orders)), 15);
        assert_overview(&app, &token, backend, &a, "ingest").await;
        assert_overview(&app, &token, backend, &b, "ingest").await;
        // New in the last hour and 24 h, per source topic, and the new error groups.
        let html = app
            .get("/overview", Auth::Bearer(&token))
            .await
            .text()
            .await
            .unwrap();
        assert!(
            html.contains(&format!(
                "href=\"/?source_topic={orders}\" class=\"num\">45</a>"
            )),
            "{html}"
        );
        assert!(html.contains("<svg"), "a chart: {html}");
        assert!(html.contains("65 dead letters"), "chart caption: {html}");
        assert!(
            html.contains("com.example.OutOfStock"),
            "new groups: {html}"
        );
        assert!(html.contains("class=\"badge new\""), "{html}");

        // The list says how many match: from the aggregates, or a bounded count.
        for (path, want) in [
            (format!("/?dlq_topic={a}"), "50 dead letters match"),
            (
                "/?error_class=com.example.OutOfStock".to_string(),
                "30 dead letters match",
            ),
        ] {
            let html = app
                .get(&path, Auth::Bearer(&token))
                .await
                .text()
                .await
                .unwrap();
            assert!(
                html.contains(want),
                "{backend:?} {path}: lacks {want}:\n{html}"
            );
        }
        // The groups page: a trend sparkline and a "new" badge per group.
        let html = app
            .get("/groups", Auth::Bearer(&token))
            .await
            .text()
            .await
            .unwrap();
        assert_eq!(html.matches("class=\"sparkline\"").count(), 3, "{html}");
        assert_eq!(html.matches("class=\"badge new\"").count(), 3, "{html}");
        assert!(html.contains(": 30</title>"), "an hour bar of 30: {html}");
        assert_metrics(&app, &token, backend, &[&a, &b], "ingest").await;
        let text = app
            .get("/metrics", Auth::Bearer(&token))
            .await
            .text()
            .await
            .unwrap();
        for (series, n) in [
            (
                format!(
                    "redrive_dead_letters_ingested_by_topic_total{{dlq_topic=\"{a}\",source_topic=\"{orders}\"}}"
                ),
                30,
            ),
            (
                format!(
                    "redrive_dead_letters_ingested_by_topic_total{{dlq_topic=\"{a}\",source_topic=\"{payments}\"}}"
                ),
                20,
            ),
            ("redrive_error_groups".to_string(), 3),
            ("redrive_error_groups_new".to_string(), 3),
        ] {
            assert_eq!(sample(&text, &series), Some(n), "{series}:\n{text}");
        }
        let age = sample(
            &text,
            &format!("redrive_oldest_new_dead_letter_age_seconds{{dlq_topic=\"{a}\"}}"),
        )
        .expect("an age");
        assert!((0..600).contains(&age), "age {age}");
        // The consumer lag reaches 0 on every partition once the offsets are committed.
        eventually("consumer lag 0", Duration::from_secs(60), || async {
            let text = app
                .get("/metrics", Auth::Bearer(&token))
                .await
                .text()
                .await
                .unwrap_or_default();
            [&a, &b].iter().all(|t| {
                (0..2).all(|p| {
                    sample(
                        &text,
                        &format!(
                            "redrive_ingest_consumer_lag{{dlq_topic=\"{t}\",partition=\"{p}\"}}"
                        ),
                    ) == Some(0)
                })
            })
        })
        .await;

        // Delete by filter, replay by filter (published by the relay), restore.
        let res = app
            .post_json(
                "/api/v1/dead-letters/delete",
                Auth::Bearer(&token),
                Csrf::Missing,
                &json!({"filter": {"dlq_topic": a, "source_topic": payments}}),
            )
            .await;
        assert_eq!(
            res.status(),
            200,
            "{}",
            res.text().await.unwrap_or_default()
        );
        assert_overview(&app, &token, backend, &a, "delete").await;
        assert_metrics(&app, &token, backend, &[&a, &b], "delete").await;

        let res = app
            .post_json(
                "/api/v1/replays",
                Auth::Bearer(&token),
                Csrf::Missing,
                &json!({"filter": {"dlq_topic": b}, "target_topic": target}),
            )
            .await;
        assert_eq!(
            res.status(),
            202,
            "{}",
            res.text().await.unwrap_or_default()
        );
        eventually("15 replayed", Duration::from_secs(60), || async {
            let t = truth_counts(backend, &app.db_url).await;
            status_count(&t, &b, "replayed") == 15
        })
        .await;
        assert_overview(&app, &token, backend, &b, "replay").await;
        assert_metrics(&app, &token, backend, &[&a, &b], "replay").await;
        let text = app
            .get("/metrics", Auth::Bearer(&token))
            .await
            .text()
            .await
            .unwrap();
        assert_eq!(
            sample(&text, "redrive_replay_records_total{outcome=\"published\"}"),
            Some(15),
            "{text}"
        );

        let res = app
            .post_json(
                "/api/v1/dead-letters/restore",
                Auth::Bearer(&token),
                Csrf::Missing,
                &json!({"filter": {"dlq_topic": a, "status": "deleted"}}),
            )
            .await;
        assert_eq!(res.status(), 200);
        assert_overview(&app, &token, backend, &a, "restore").await;
        assert_metrics(&app, &token, backend, &[&a, &b], "restore").await;
        let (code, log) = app.terminate(Duration::from_secs(40)).await;
        assert_eq!(code, Some(0), "{log}");
    }
}
