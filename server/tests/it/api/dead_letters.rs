//! `/api/v1/dead-letters`, one record and its raw downloads (`docs/api.md`).

use super::*;

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
