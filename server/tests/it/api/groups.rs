//! `/api/v1/error-groups`: counts by fingerprint, trends and new groups (`docs/api.md`).

use super::*;

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
