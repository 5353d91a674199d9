//! The overview page and the store-derived `/metrics` series after a known ingest through the
//! real binary (real broker, two DLQ topics, two source topics), on SQLite and PostgreSQL:
//! every number is checked against the store's truth counted with plain SQL, then again
//! after a delete by filter, a replay by filter published by the relay, and a restore.

use std::time::Duration;

use redrive_core::{NewDeadLetter, Normalized};
use redrive_testkit::fixtures::stored_dead_letter;
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

/// A stored dead letter of `dlq` from `source`, dead-lettered at `at_ms`.
fn stored(dlq: &str, offset: i64, source: Option<&str>, at_ms: i64) -> NewDeadLetter {
    let mut d = stored_dead_letter(
        dlq,
        offset,
        Normalized {
            source_topic: source.map(str::to_string),
            error_class: Some(format!("com.example.Links{}", offset % 2)),
            error_message: Some("failed".into()),
            ..Normalized::default()
        },
    );
    d.dead_lettered_at_ms = at_ms;
    d.ingested_at_ms = at_ms;
    d.record.timestamp_ms = Some(at_ms);
    d
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
}

/// Every number of `html` that links into the list (`<a class="num" href="/?...">N</a>`), as
/// (the link's query, unescaped, N).
fn number_links(html: &str) -> Vec<(String, i64)> {
    let a = regex::Regex::new(r#"<a ([^>]*)>(\d+)</a>"#).expect("regex");
    let href = regex::Regex::new(r#"href="/(?:\?([^"]*))?""#).expect("regex");
    a.captures_iter(html)
        .filter(|c| c[1].contains("class=\"num\""))
        .filter_map(|c| {
            let h = href.captures(&c[1])?;
            let q = h.get(1).map_or("", |m| m.as_str()).replace("&amp;", "&");
            Some((q, c[2].parse().ok()?))
        })
        .collect()
}

/// How many dead letters the list opened by `/?query` holds (the API takes the same query).
async fn listed(app: &TestApp, token: &str, query: &str) -> i64 {
    let res = app
        .get(
            &format!("/api/v1/dead-letters?{query}&limit=500"),
            Auth::Bearer(token),
        )
        .await;
    assert_eq!(res.status(), 200, "/?{query}");
    let body: serde_json::Value = res.json().await.expect("list");
    assert!(body["next_cursor"].is_null(), "/?{query}: more than 500");
    body["items"].as_array().map_or(0, |a| a.len() as i64)
}

/// Every linked number of the overview equals the length of the list its link opens.
async fn assert_numbers_match_their_lists(app: &TestApp, token: &str, what: &str) -> String {
    let html = app
        .get("/overview", Auth::Bearer(token))
        .await
        .text()
        .await
        .expect("overview");
    let links = number_links(&html);
    assert!(links.len() > 10, "{what}: linked numbers in {html}");
    for (query, n) in &links {
        assert_eq!(
            listed(app, token, query).await,
            *n,
            "{what}: the overview shows {n} linking to /?{query}"
        );
    }
    html
}

/// Issue #11: the tiles and table cells "new in 1 h / 24 h" count what their links list, after
/// deletes (soft) and a restore: live dead letters dead-lettered since the window start.
#[tokio::test]
async fn new_in_the_last_hour_and_24_h_equal_the_lists_they_link_to() {
    let tile = regex::Regex::new(r#"(?s)New in the last hour</span>.*?<a [^>]*>(\d+)</a>"#)
        .expect("regex");
    for backend in Backend::ALL {
        let dlq = unique("ovl_dlt");
        let (a, b) = (unique("ovl_a"), unique("ovl_b"));
        let now = now_ms();
        let mut records = Vec::new();
        for i in 0..30 {
            records.push(stored(&dlq, i, Some(&a), now - i * 60_000));
        }
        for i in 30..50 {
            records.push(stored(&dlq, i, Some(&b), now - 2 * 3_600_000 - i * 60_000));
        }
        for i in 50..55 {
            records.push(stored(&dlq, i, Some(&b), now - 30 * 3_600_000));
        }
        let app = TestApp::with_records(backend, &records, &[]).await;
        let token = app.admin_token().await;
        let ids = |items: &serde_json::Value| -> Vec<i64> {
            items["items"]
                .as_array()
                .expect("items")
                .iter()
                .filter_map(|d| d["id"].as_i64())
                .collect()
        };
        let in_a: serde_json::Value = app
            .get(
                &format!("/api/v1/dead-letters?source_topic={a}&limit=500"),
                Auth::Bearer(&token),
            )
            .await
            .json()
            .await
            .expect("list");
        let in_b: serde_json::Value = app
            .get(
                &format!("/api/v1/dead-letters?source_topic={b}&limit=500"),
                Auth::Bearer(&token),
            )
            .await
            .json()
            .await
            .expect("list");
        // 7 of the last hour's, 4 of the older ones.
        let mut doomed: Vec<i64> = ids(&in_a).into_iter().step_by(4).collect();
        doomed.extend(ids(&in_b).into_iter().step_by(6));
        assert_eq!(doomed.len(), 8 + 5, "{backend:?}");
        let res = app
            .post_json(
                "/api/v1/dead-letters/delete",
                Auth::Bearer(&token),
                Csrf::Missing,
                &json!({"ids": doomed}),
            )
            .await;
        assert_eq!(
            res.status(),
            200,
            "{}",
            res.text().await.unwrap_or_default()
        );

        let html =
            assert_numbers_match_their_lists(&app, &token, &format!("{backend:?} delete")).await;
        // The tile: 30 arrived in the last hour, 8 of them deleted.
        let shown = tile.captures(&html).map(|c| c[1].to_string());
        assert_eq!(shown.as_deref(), Some("22"), "{backend:?}: {html}");

        // A restore brings them back into the figures.
        let res = app
            .post_json(
                "/api/v1/dead-letters/restore",
                Auth::Bearer(&token),
                Csrf::Missing,
                &json!({"filter": {"dlq_topic": dlq, "status": "deleted"}}),
            )
            .await;
        assert_eq!(res.status(), 200);
        let html =
            assert_numbers_match_their_lists(&app, &token, &format!("{backend:?} restore")).await;
        let shown = tile.captures(&html).map(|c| c[1].to_string());
        assert_eq!(shown.as_deref(), Some("30"), "{backend:?}: {html}");
        let (code, log) = app.terminate(Duration::from_secs(40)).await;
        assert_eq!(code, Some(0), "{log}");
    }
}

/// Issue #12: source topics carrying control characters, a line break, a trailing newline or
/// a leading space (a header can carry anything): the overview, the groups page and the
/// detail page show them escaped, and their links carry the exact stored value, so the list
/// they open holds exactly what was counted.
#[tokio::test]
async fn links_to_odd_source_topics_carry_the_exact_stored_value() {
    let link = regex::Regex::new(r#"<a ([^>]*error-class[^>]*)>"#).expect("regex");
    let href = regex::Regex::new(r#"href="/\?([^"]*)""#).expect("regex");
    for backend in Backend::ALL {
        let dlq = unique("ovx_dlt");
        let odd = [
            format!("bell\u{7}{}", unique("x")),
            format!("two\nlines{}", unique("x")),
            format!("{}\n", unique("trail")),
            format!(" {}", unique("lead")),
            format!("rtl\u{202E}{}", unique("x")),
        ];
        let now = now_ms();
        let mut records = Vec::new();
        for (k, topic) in odd.iter().enumerate() {
            for j in 0..(k as i64 + 2) {
                let offset = (k as i64) * 10 + j;
                records.push(stored(&dlq, offset, Some(topic), now - offset * 1000));
            }
        }
        let app = TestApp::with_records(backend, &records, &[]).await;
        let token = app.admin_token().await;

        let html = assert_numbers_match_their_lists(&app, &token, &format!("{backend:?}")).await;
        assert!(
            html.contains("bell⟨U+0007⟩"),
            "{backend:?}: shown escaped: {html}"
        );
        assert!(
            !html.contains('\u{7}'),
            "{backend:?}: no raw control character"
        );
        for (k, topic) in odd.iter().enumerate() {
            let want = format!("source_topic={}", redrive_app::query::encode(topic));
            let n = k as i64 + 2;
            assert!(
                number_links(&html)
                    .iter()
                    .any(|(q, shown)| *q == want && *shown == n),
                "{backend:?}: the live count {n} of {topic:?} links to /?{want}: {html}"
            );
            // The groups page under that filter: each group's link keeps the exact topic.
            let res = app
                .get(&format!("/groups?{want}"), Auth::Bearer(&token))
                .await;
            assert_eq!(res.status(), 200);
            let groups = res.text().await.expect("groups");
            let mut total = 0;
            for c in link.captures_iter(&groups) {
                let q = href.captures(&c[1]).expect("a list link")[1].replace("&amp;", "&");
                assert!(q.contains(&want), "{backend:?}: {q} keeps {want}");
                total += listed(&app, &token, &q).await;
            }
            assert_eq!(total, n, "{backend:?}: the groups of {topic:?}: {groups}");
        }
        // The detail page links to its topics' lists with the exact values.
        let one: serde_json::Value = app
            .get("/api/v1/dead-letters?limit=1", Auth::Bearer(&token))
            .await
            .json()
            .await
            .expect("list");
        let id = one["items"][0]["id"].as_i64().expect("id");
        let source = one["items"][0]["source_topic"]
            .as_str()
            .expect("source")
            .to_string();
        let page = app
            .get(&format!("/dead-letters/{id}"), Auth::Bearer(&token))
            .await
            .text()
            .await
            .expect("detail");
        let want = format!(
            "href=\"/?source_topic={}\"",
            redrive_app::query::encode(&source)
        );
        assert!(
            page.contains(&want),
            "{backend:?}: detail lacks {want}: {page}"
        );
        let q = format!("source_topic={}", redrive_app::query::encode(&source));
        let in_list: serde_json::Value = app
            .get(
                &format!("/api/v1/dead-letters?{q}&limit=500"),
                Auth::Bearer(&token),
            )
            .await
            .json()
            .await
            .expect("list");
        assert!(
            in_list["items"]
                .as_array()
                .expect("items")
                .iter()
                .any(|d| d["id"].as_i64() == Some(id)),
            "{backend:?}: the detail page's source topic link lists it"
        );
        let (code, log) = app.terminate(Duration::from_secs(40)).await;
        assert_eq!(code, Some(0), "{log}");
    }
}

/// The empty chart says so (no "at most 1 in one"); an unknown `range` is refused with a 400 page.
#[tokio::test]
async fn empty_chart_and_bad_range() {
    for backend in Backend::ALL {
        let app = TestApp::start_on(backend, &[]).await;
        let token = app.admin_token().await;
        let html = app
            .get("/overview", Auth::Bearer(&token))
            .await
            .text()
            .await
            .expect("overview");
        assert!(
            html.contains("no dead letters in this range"),
            "{backend:?}: {html}"
        );
        assert!(!html.contains("at most 1 in one"), "{backend:?}: {html}");
        let res = app.get("/overview?range=bogus", Auth::Bearer(&token)).await;
        assert_eq!(res.status(), 400, "{backend:?}");
        let html = res.text().await.expect("page");
        assert!(
            html.contains("the chart range `bogus` is unknown"),
            "{html}"
        );
        assert!(html.contains("range=7d"), "{html}");
        // A parameter the overview does not take: refused with what it takes.
        let res = app
            .get("/overview?from=1796104800000", Auth::Bearer(&token))
            .await;
        assert_eq!(res.status(), 400, "{backend:?}");
        let html = res.text().await.expect("page");
        assert!(html.contains("unknown parameter `from`"), "{html}");
        assert!(html.contains("takes `range`"), "{html}");
        for ok in [
            "/overview?range=7d&dlq_topic=orders.DLT",
            "/overview?range=7d",
            "/overview?range=6h",
            "/overview?range=",
        ] {
            let res = app.get(ok, Auth::Bearer(&token)).await;
            assert_eq!(res.status(), 200, "{backend:?} {ok}");
        }
        let (code, log) = app.terminate(Duration::from_secs(40)).await;
        assert_eq!(code, Some(0), "{log}");
    }
}
