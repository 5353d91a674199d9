//! The API contract (`docs/api.md`): the OpenAPI 3.1 document the real binary serves at
//! `/api/v1/openapi.json`, checked by schemathesis (PyPI, installed by
//! `scripts/setup-schemathesis`) against the same binary over seeded dead letters with an
//! admin's API token — read and action endpoints; any 5xx, undocumented status, content
//! type, header or body that does not fit its schema fails the test — and every refusal the
//! API gives (400, 401, 403, 404, 405, 409, 413, 422, 503) in the one error shape.
//!
//! Kafka is unreachable for these binaries (`127.0.0.1:9`): a replay schemathesis asks for is
//! recorded and waits (the relay never reaches a broker), so no request waits on Kafka.

use std::process::Stdio;
use std::time::Duration;

use redrive_core::{Convention, Header, NewDeadLetter, Normalized, RawRecord};
use redrive_testkit::Backend;
use serde_json::{json, Value};

use crate::support::{Auth, Csrf, TestApp};

const T0: i64 = 1_796_104_800_000;

/// Seeded dead letters: two DLQ topics, with and without a source topic, a tombstone, binary
/// bytes, headers (a null one), two error groups.
fn seeded() -> Vec<NewDeadLetter> {
    (0..12)
        .map(|i| {
            let topic = if i % 2 == 0 {
                "orders.DLT"
            } else {
                "payments-dlt"
            };
            let class = if i % 3 == 0 {
                "java.net.SocketTimeoutException"
            } else {
                "java.lang.IllegalStateException"
            };
            NewDeadLetter {
                record: RawRecord {
                    dlq_topic: topic.into(),
                    dlq_partition: 0,
                    dlq_offset: i,
                    timestamp_ms: Some(T0 + i),
                    key: (i != 5).then(|| format!("key-{i}").into_bytes()),
                    value: (i != 7).then(|| vec![0x00, 0x9f, i as u8, 0xff]),
                    headers: vec![
                        Header {
                            name: "trace".into(),
                            value: Some(b"abc".to_vec()),
                        },
                        Header {
                            name: "empty".into(),
                            value: None,
                        },
                    ],
                },
                convention: Convention::Unknown,
                normalized: Normalized {
                    source_topic: (i != 4).then(|| "orders".to_string()),
                    error_class: Some(class.into()),
                    error_message: Some(format!("boom {i}")),
                    consumer_group: Some("billing".into()),
                    retry_count: Some(3),
                    ..Normalized::default()
                },
                fingerprint: redrive_core::fingerprint::fingerprint(Some(class), None),
                dead_lettered_at_ms: T0 + i * 1_000,
                ingested_at_ms: T0 + i * 1_000 + 5,
            }
        })
        .collect()
}

/// `scripts/setup-schemathesis`: the path of `st`.
fn schemathesis() -> String {
    let out =
        std::process::Command::new(redrive_testkit::repo_root().join("scripts/setup-schemathesis"))
            .stderr(Stdio::inherit())
            .output()
            .expect("scripts/setup-schemathesis");
    assert!(out.status.success(), "scripts/setup-schemathesis failed");
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_string()
}

/// Operations that can end the run's own credential (revoke its token, disable or demote its
/// user, change its password, end sessions): run last, on their own.
const SELF_ENDING: &str = r"^/api/v1/(tokens/\{id\}(/revoke)?|users/\{name\}/(disable|role|password)|account/password|sessions/end-others)$";

/// Runs schemathesis against `app` with `token`, on the operations `filter` picks; panics
/// with its report on any failure.
async fn run_schemathesis(app: &TestApp, token: &str, filter: &[&str], what: &str) {
    let st = schemathesis();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cmd = tokio::process::Command::new(&st);
    cmd.arg("run")
        .arg(app.url("/api/v1/openapi.json"))
        .args(["--url", &app.base])
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .args([
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,\
             response_headers_conformance,response_schema_conformance",
        ])
        .args(["--phases", "examples,fuzzing"])
        .args(["--max-examples", "15"])
        .args(["--seed", "20261202"])
        .args(["--workers", "2"])
        .args(["--request-timeout", "20"])
        .args(["--generation-database", "none"])
        .args(["--suppress-health-check", "all"])
        .args(["--no-color", "--continue-on-failure"])
        .args(filter)
        .current_dir(dir.path())
        .env("HYPOTHESIS_STORAGE_DIRECTORY", dir.path())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(600), cmd.output())
        .await
        .unwrap_or_else(|_| panic!("schemathesis ({what}) did not finish in 10 minutes"))
        .expect("run schemathesis");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "schemathesis ({what}) found problems:\n{stdout}\n{stderr}\n--- redrive's log (tail):\n{}",
        tail(&app.log(), 80)
    );
    eprintln!("schemathesis ({what}):\n{}", tail(&stdout, 25));
}

fn tail(s: &str, lines: usize) -> String {
    let v: Vec<&str> = s.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

async fn schemathesis_is_clean_on(backend: Backend) {
    let app = TestApp::with_records(backend, &seeded(), &[]).await;
    let token = app.admin_token().await;
    // Something for every kind of read to find: a replay job (it waits: Kafka is unreachable),
    // a deleted dead letter, labels and a note.
    for (path, body) in [
        (
            "/api/v1/replays",
            json!({"ids": [1, 2], "reason": "contract test"}),
        ),
        ("/api/v1/dead-letters/delete", json!({"ids": [3]})),
        ("/api/v1/dead-letters/1/labels", json!({"label": "flaky"})),
    ] {
        let res = app
            .post_json(path, Auth::Bearer(&token), Csrf::Right, &body)
            .await;
        assert!(res.status().is_success(), "{path}: {}", res.status());
    }
    let doc: Value = app
        .get("/api/v1/openapi.json", Auth::Bearer(&token))
        .await
        .json()
        .await
        .expect("the document is JSON");
    assert_eq!(doc["openapi"], "3.1.0");
    assert!(doc["paths"].as_object().is_some_and(|p| p.len() > 50));

    run_schemathesis(
        &app,
        &token,
        &["--exclude-path-regex", SELF_ENDING],
        "read and action endpoints",
    )
    .await;
    run_schemathesis(
        &app,
        &token,
        &["--include-path-regex", SELF_ENDING],
        "account endpoints",
    )
    .await;
    assert!(
        !app.log().contains("panicked"),
        "redrive panicked:\n{}",
        app.log()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn schemathesis_finds_nothing_on_sqlite() {
    schemathesis_is_clean_on(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn schemathesis_finds_nothing_on_postgresql() {
    schemathesis_is_clean_on(Backend::Postgres).await;
}

/// The one error shape: `{"error": sentence, "code": name, "status": n}` as JSON, the status
/// matching, `Retry-After` on 503 and 429, `WWW-Authenticate` on 401.
async fn assert_error_shape(res: reqwest::Response, status: u16, what: &str) -> Value {
    assert_eq!(res.status().as_u16(), status, "{what}");
    let ct = res
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let retry = res.headers().get("retry-after").is_some();
    let www = res.headers().get("www-authenticate").is_some();
    let text = res.text().await.expect("body");
    assert!(
        ct.starts_with("application/json"),
        "{what}: content-type `{ct}`, body {text}"
    );
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{what}: {e}: {text}"));
    assert!(
        v["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{what}: {v}"
    );
    assert!(
        v["code"].as_str().is_some_and(|c| !c.is_empty()),
        "{what}: {v}"
    );
    assert_eq!(v["status"], status, "{what}: {v}");
    assert_eq!(retry, matches!(status, 429 | 503), "{what}: Retry-After");
    if matches!(status, 429 | 503) {
        assert!(
            v["retry_after_s"].as_u64().is_some_and(|s| s >= 1),
            "{what}: {v}"
        );
    }
    if status == 401 {
        assert!(www, "{what}: WWW-Authenticate");
    }
    v
}

#[tokio::test(flavor = "multi_thread")]
async fn every_api_refusal_has_the_one_error_shape() {
    // A 1 ms request timeout makes any request that waits on the store time out (503).
    let app = TestApp::with_records(Backend::Sqlite, &seeded(), &[]).await;
    let token = app.admin_token().await;
    let bearer = Auth::Bearer(&token);
    let client = reqwest::Client::new();

    // 400: a bad query parameter, a body that is not JSON.
    assert_error_shape(
        app.get("/api/v1/dead-letters?limit=0", bearer).await,
        400,
        "bad limit",
    )
    .await;
    let res = client
        .post(app.url("/api/v1/replays"))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .expect("send");
    assert_error_shape(res, 400, "not JSON").await;
    // 415: a body not declared JSON (`curl -d` sends a form's type) is refused before it is
    // read, never parsed as JSON anyway and acted on; the replay is not queued.
    for ct in ["application/x-www-form-urlencoded", "text/plain"] {
        let res = client
            .post(app.url("/api/v1/replays"))
            .bearer_auth(&token)
            .header("content-type", ct)
            .body(r#"{"ids": [1]}"#)
            .send()
            .await
            .expect("send");
        let v = assert_error_shape(res, 415, ct).await;
        assert_eq!(v["code"], "unsupported_media_type");
        assert!(v["error"].as_str().unwrap().contains(ct), "{v}");
    }
    let res = client
        .post(app.url("/api/v1/replays"))
        .bearer_auth(&token)
        .body(r#"{"ids": [1]}"#)
        .send()
        .await
        .expect("send");
    assert_error_shape(res, 415, "no content type").await;
    let jobs: Value = app
        .get("/api/v1/replays", bearer)
        .await
        .json()
        .await
        .expect("jobs");
    assert_eq!(jobs["items"], json!([]), "no replay was queued: {jobs}");
    // 401: no credentials, a wrong token.
    assert_error_shape(
        app.get("/api/v1/dead-letters", Auth::None).await,
        401,
        "none",
    )
    .await;
    assert_error_shape(
        app.get("/api/v1/dead-letters", Auth::Bearer("rdv_wrong"))
            .await,
        401,
        "wrong token",
    )
    .await;
    // 403: a read-only viewer acting.
    app.add_user("viewer-v", "viewer", "viewer-password").await;
    let viewer = app.create_token("viewer-v").await;
    let res = app
        .post_json(
            "/api/v1/dead-letters/delete",
            Auth::Bearer(&viewer),
            Csrf::Right,
            &json!({"ids": [1]}),
        )
        .await;
    assert_error_shape(res, 403, "viewer deletes").await;
    // 404: no such dead letter, no such route.
    assert_error_shape(
        app.get("/api/v1/dead-letters/999999", bearer).await,
        404,
        "id",
    )
    .await;
    assert_error_shape(app.get("/api/v1/no-such-thing", bearer).await, 404, "route").await;
    // An action on ids that are not all there changes nothing and names the missing one.
    let audited = app.audit().await.len();
    for path in [
        "/api/v1/replays",
        "/api/v1/dead-letters/delete",
        "/api/v1/dead-letters/restore",
    ] {
        let res = app
            .post_json(path, bearer, Csrf::Right, &json!({"ids": [1, 999999]}))
            .await;
        let v = assert_error_shape(res, 404, path).await;
        assert_eq!(v["code"], "not_found", "{path}");
        assert!(
            v["error"]
                .as_str()
                .unwrap_or("")
                .contains("dead letter 999999"),
            "{path}: {v}"
        );
    }
    assert_eq!(app.audit().await.len(), audited, "nothing audited");
    // 405: a method the route does not take (axum's own answer, normalised).
    let res = client
        .patch(app.url("/api/v1/dead-letters"))
        .bearer_auth(&token)
        .send()
        .await
        .expect("send");
    let v = assert_error_shape(res, 405, "PATCH").await;
    assert_eq!(v["code"], "method_not_allowed");
    // 409: cancelling a job twice.
    let res = app
        .post_json("/api/v1/replays", bearer, Csrf::Right, &json!({"ids": [1]}))
        .await;
    assert_eq!(res.status(), 202);
    let job: Value = res.json().await.expect("json");
    let cancel = format!("/api/v1/replays/{}/cancel", job["job_id"].as_str().unwrap());
    let res = app
        .post_json(&cancel, bearer, Csrf::Right, &json!({}))
        .await;
    assert_eq!(res.status(), 200);
    assert_error_shape(
        app.post_json(&cancel, bearer, Csrf::Right, &json!({}))
            .await,
        409,
        "cancel twice",
    )
    .await;
    // 413: a body over the limit (axum's own answer, normalised).
    let res = client
        .post(app.url("/api/v1/replays"))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(vec![b' '; 3 * 1024 * 1024])
        .send()
        .await
        .expect("send");
    let v = assert_error_shape(res, 413, "large body").await;
    assert_eq!(v["code"], "payload_too_large");
    // 422: JSON that asks for something impossible (the domain's limits, `core::request`).
    for (body, what) in [
        (json!({"ids": []}), "no ids"),
        (json!({"ids": [1], "rate_per_sec": 0}), "rate 0"),
        (
            json!({"ids": [1], "target_topic": "not a topic"}),
            "bad topic",
        ),
        (
            json!({"ids": [1], "reason": "x".repeat(2001)}),
            "long reason",
        ),
        (json!({"ids": [1], "filter": {}}), "both"),
    ] {
        let res = app
            .post_json("/api/v1/replays", bearer, Csrf::Right, &body)
            .await;
        let v = assert_error_shape(res, 422, what).await;
        assert_eq!(v["code"], "unprocessable", "{what}");
    }
    // The error body is documented once in the contract.
    let doc: Value = app
        .get("/api/v1/openapi.json", bearer)
        .await
        .json()
        .await
        .expect("json");
    assert!(doc["components"]["schemas"]["ErrorBody"]["properties"]["error"].is_object());
    drop(app);

    // 503: the request timeout, on /api/v1 (tower-http's answer, normalised), with
    // Retry-After. The export streams the whole store page by page; with a 1 ms timeout the
    // first page is late.
    let app = TestApp::with_records(
        Backend::Sqlite,
        &seeded(),
        &[("REDRIVE_REQUEST_TIMEOUT_MS", "1")],
    )
    .await;
    let token = app.admin_token().await;
    let mut seen = false;
    for _ in 0..50 {
        let res = app.get("/api/v1/error-groups", Auth::Bearer(&token)).await;
        if res.status() == 503 {
            let v = assert_error_shape(res, 503, "timeout").await;
            assert_eq!(v["code"], "timeout");
            seen = true;
            break;
        }
    }
    assert!(seen, "no request timed out at 1 ms:\n{}", app.log());
}
