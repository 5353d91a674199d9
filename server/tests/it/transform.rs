//! Transform on replay (issue 9, `docs/replay.md`), through the real binary on the real
//! broker, on SQLite and PostgreSQL: a script over 10,000 dead letters that changes most,
//! skips some, throws on some and runs out of its operation limit on others — checked on the
//! target topic with a real consumer, in the job's counters, the dead letters' statuses and
//! histories and the audit row's script hash; a script out of its time limit; a script that
//! does not compile (422 with its line); and the dry run's preview and per-target sample.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use rdkafka::message::Message;
use redrive_core::model::{NewDeadLetter, Status};
use redrive_core::replay::HEADER_DEAD_LETTER_ID;
use redrive_testkit::{consume, create_topic, kafka_brokers, unique, Backend};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::support::replay::{dead_letter, header_text, headers_of, record_count};
use crate::support::{eventually, Auth, Csrf, TestApp};

/// The 10,000-record script: n % 100 == 7 throws, n % 100 == 13 is skipped, n % 1000 == 999
/// loops until the operation limit, every other record gets `v: 2`, `fixed: true` and a header.
const FIX_SCRIPT: &str = r#"
let n = record.json.n;
if n % 100 == 7 { throw "cannot fix record " + n; }
if n % 100 == 13 {
    skip("obsolete")
} else if n % 1000 == 999 {
    loop { }
} else {
    record.json.v = 2;
    record.json.fixed = true;
    record.headers.push(#{ name: "x-transformed", value: "v2" });
    record
}
"#;

const FINGERPRINT: &str = "00000000000c0ffe";

fn records(n: i64) -> Vec<NewDeadLetter> {
    (0..n)
        .map(|i| {
            let mut d = dead_letter(
                i,
                Some(format!("key-{i}").into_bytes()),
                Some(format!("{{\"n\": {i}, \"v\": 1}}").into_bytes()),
                vec![],
            );
            d.fingerprint = FINGERPRINT.to_string();
            d
        })
        .collect()
}

/// The binary with its relay on the real broker, quick to poll and to retry, 2 attempts.
async fn app(backend: Backend, n: i64) -> TestApp {
    let brokers = kafka_brokers();
    TestApp::with_records(
        backend,
        &records(n),
        &[
            ("REDRIVE_KAFKA_BROKERS", brokers.as_str()),
            ("REDRIVE_RELAY_POLL_INTERVAL_MS", "50"),
            ("REDRIVE_RELAY_BACKOFF_BASE_MS", "50"),
            ("REDRIVE_RELAY_BACKOFF_MAX_MS", "200"),
            ("REDRIVE_RELAY_MAX_ATTEMPTS", "2"),
        ],
    )
    .await
}

async fn json_of(res: reqwest::Response) -> (u16, Value) {
    let status = res.status().as_u16();
    let body = res.json::<Value>().await.unwrap_or(Value::Null);
    (status, body)
}

/// Waits until job `id` is finished; returns it (`GET /api/v1/replays/{id}`).
async fn finished_job(app: &TestApp, token: &str, id: &str, deadline: Duration) -> Value {
    let path = format!("/api/v1/replays/{id}");
    eventually(&format!("job {id} finished"), deadline, || async {
        let (_, j) = json_of(app.get(&path, Auth::Bearer(token)).await).await;
        j["status"] == "finished"
    })
    .await;
    json_of(app.get(&path, Auth::Bearer(token)).await).await.1
}

/// Dead letters of the test's fingerprint in `status`.
async fn count(app: &TestApp, status: Status) -> i64 {
    let filter = redrive_core::Filter {
        fingerprint: Some(FINGERPRINT.into()),
        status: Some(status),
        ..Default::default()
    };
    app.store.count(&filter).await.expect("count")
}

fn value_json(m: &rdkafka::message::OwnedMessage) -> Value {
    serde_json::from_slice(m.payload().expect("a value")).expect("JSON value")
}

#[tokio::test]
async fn a_transform_over_ten_thousand_publishes_what_the_script_returns() {
    const N: i64 = 10_000;
    for backend in Backend::ALL {
        let app = app(backend, N).await;
        let token = app.admin_token().await;
        let target = unique("transform_10k");
        create_topic(&target, 3, &[]).await.expect("topic");
        let transform = json!({
            "script": FIX_SCRIPT,
            // The looping records meet the operation limit, never the clock.
            "time_limit_ms": 10_000,
            "max_operations": 20_000,
        });
        let body = json!({
            "filter": {"fingerprint": FINGERPRINT},
            "target_topic": target,
            "options": {"transform": transform},
        });
        // The dry run's sample: without a transform, the records as they would be sent ...
        let plain = json!({"filter": {"fingerprint": FINGERPRINT}, "target_topic": target});
        let dry_run = "/api/v1/replays/dry-run";
        let (status, dry) = json_of(
            app.post_json(dry_run, Auth::Bearer(&token), Csrf::Missing, &plain)
                .await,
        )
        .await;
        assert_eq!(status, 200, "{dry}");
        assert_eq!(dry["queued"], N);
        let targets = dry["sample"]["targets"].as_array().expect("targets");
        assert_eq!(targets.len(), 1, "{dry}");
        assert_eq!(targets[0]["topic"], target);
        let records = targets[0]["records"].as_array().expect("records");
        assert_eq!(records.len(), 3, "three per target by default");
        assert_eq!(records[0]["before"]["value"]["text"], r#"{"n": 0, "v": 1}"#);
        assert_eq!(records[0]["after"]["outcome"], "as_is");
        // ... and with the transform, the preview: before and after, errors per record.
        let preview = json!({
            "filter": {"fingerprint": FINGERPRINT},
            "target_topic": target,
            "options": {"transform": transform},
            "sample_per_target": 20,
        });
        let (status, dry) = json_of(
            app.post_json(dry_run, Auth::Bearer(&token), Csrf::Missing, &preview)
                .await,
        )
        .await;
        assert_eq!(status, 200, "{dry}");
        let records = dry["sample"]["targets"][0]["records"]
            .as_array()
            .expect("records");
        assert_eq!(records.len(), 20);
        for (n, r) in records.iter().enumerate() {
            let after = &r["after"];
            match n {
                7 => {
                    assert_eq!(after["outcome"], "error", "{r}");
                    assert_eq!(
                        after["error"],
                        "the script threw: cannot fix record 7 (line 3)"
                    );
                }
                13 => assert_eq!(after, &json!({"outcome": "skip", "reason": "obsolete"})),
                _ => {
                    assert_eq!(after["outcome"], "publish", "{r}");
                    let v = format!(r#"{{"fixed":true,"n":{n},"v":2}}"#);
                    assert_eq!(after["record"]["value"]["text"], v);
                    assert_eq!(after["record"]["headers"][0][0], "x-transformed");
                    assert_eq!(
                        r["before"]["value"]["text"],
                        format!(r#"{{"n": {n}, "v": 1}}"#)
                    );
                }
            }
        }
        assert!(
            app.audit_of("replay").await.is_empty(),
            "a dry run does nothing"
        );

        let (status, accepted) = json_of(
            app.post_json(
                "/api/v1/replays",
                Auth::Bearer(&token),
                Csrf::Missing,
                &body,
            )
            .await,
        )
        .await;
        assert_eq!(status, 202, "{accepted}\n{}", app.log());
        assert_eq!(accepted["total"], N);
        let id = accepted["job_id"].as_str().expect("job id").to_string();
        let job = finished_job(&app, &token, &id, Duration::from_secs(600)).await;

        let (thrown, skipped, looped) = (N / 100, N / 100, N / 1000);
        let published = N - thrown - skipped - looped;
        assert_eq!(job["published"], published, "{backend:?}: {job}");
        assert_eq!(job["failed"], thrown + looped, "{job}");
        let t = &job["transform"];
        assert_eq!(
            (&t["transformed"], &t["skipped"], &t["failed"]),
            (&json!(published), &json!(skipped), &json!(thrown + looped)),
            "{job}"
        );
        let sha = format!("{:x}", Sha256::digest(FIX_SCRIPT.as_bytes()));
        assert_eq!(t["sha256"], sha);
        assert_eq!(job["options"]["transform"]["script"], FIX_SCRIPT);

        // The topic holds exactly what the script returned: nothing for the records it
        // skipped or failed on (no untransformed record slipped through).
        assert_eq!(record_count(&target, 3), published, "{backend:?}");
        let messages = consume(&target, published as usize)
            .await
            .expect("the replayed records");
        let mut seen: HashSet<i64> = HashSet::new();
        let dl_ids: HashMap<i64, String> = messages
            .iter()
            .map(|m| {
                let v = value_json(m);
                let n = v["n"].as_i64().expect("n");
                assert_eq!(v, json!({"n": n, "v": 2, "fixed": true}));
                assert_eq!(m.key(), Some(format!("key-{n}").as_bytes()));
                let headers = headers_of(m);
                assert_eq!(header_text(&headers, "x-transformed"), "v2");
                assert!(seen.insert(n), "record {n} published twice");
                (n, header_text(&headers, HEADER_DEAD_LETTER_ID))
            })
            .collect();
        assert!(seen
            .iter()
            .all(|n| n % 100 != 7 && n % 100 != 13 && n % 1000 != 999));
        assert_eq!(dl_ids.len() as i64, published);

        // Statuses and histories: failed ones keep their bytes and say why; skipped ones are
        // back to `new` and say so.
        assert_eq!(count(&app, Status::Replayed).await, published);
        assert_eq!(count(&app, Status::ReplayFailed).await, thrown + looped);
        assert_eq!(count(&app, Status::New).await, skipped);
        let history = |dl: i64| {
            let app = &app;
            let token = token.clone();
            async move {
                let path = format!("/api/v1/dead-letters/{dl}/history");
                json_of(app.get(&path, Auth::Bearer(&token)).await).await.1["items"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            }
        };
        // A fresh store numbers dead letters from 1 in insertion order.
        let id_of = |n: i64| n + 1;
        let stored = app
            .store
            .get(id_of(7))
            .await
            .expect("get")
            .expect("dead letter");
        assert_eq!(
            stored.record.value.as_deref(),
            Some(&br#"{"n": 7, "v": 1}"#[..]),
            "a failed transform leaves the stored bytes alone"
        );
        let h = history(id_of(7)).await;
        let failed = h
            .iter()
            .find(|e| e["kind"] == "replay_failed")
            .expect("failed event");
        assert!(
            failed["detail"]
                .as_str()
                .unwrap_or("")
                .contains("the script threw: cannot fix record 7"),
            "{failed}"
        );
        let h = history(id_of(999)).await;
        let failed = h
            .iter()
            .find(|e| e["kind"] == "replay_failed")
            .expect("failed event");
        assert!(
            failed["detail"]
                .as_str()
                .unwrap_or("")
                .contains("20000 operations"),
            "{failed}"
        );
        let h = history(id_of(13)).await;
        let skipped_event = h
            .iter()
            .find(|e| e["kind"] == "replay_skipped")
            .expect("skipped");
        assert_eq!(
            skipped_event["detail"],
            "skipped by the transform script: obsolete"
        );
        assert!(h.iter().all(|e| e["kind"] != "published"));

        // The audit row names the script by its hash.
        let audit = app.audit_of("replay").await;
        let row = audit
            .iter()
            .find(|a| a.job_id.as_deref() == Some(&id))
            .expect("audit");
        let detail: Value = serde_json::from_str(row.detail.as_deref().expect("detail")).unwrap();
        assert_eq!(detail["transform"]["sha256"], sha, "{detail}");
        assert_eq!(detail["transform"]["bytes"], FIX_SCRIPT.len());
        app.terminate(Duration::from_secs(30)).await;
    }
}

/// A record the script spends more than its time limit on fails with that reason (after its
/// attempts), is not published, and the other records of the job publish; a dead letter an
/// earlier transform failed on is replayable again, with its stored bytes.
#[tokio::test]
async fn a_script_out_of_its_time_limit_fails_that_record_only() {
    for backend in Backend::ALL {
        let app = app(backend, 10).await;
        let token = app.admin_token().await;
        let target = unique("transform_slow");
        create_topic(&target, 1, &[]).await.expect("topic");
        let body = json!({
            "filter": {"fingerprint": FINGERPRINT},
            "target_topic": target,
            "options": {"transform": {
                "script": "if record.json.n < 3 { let x = 0; loop { x += 1; } } record",
                "time_limit_ms": 200,
                "max_operations": 1_000_000_000u64,
            }},
        });
        let (status, accepted) = json_of(
            app.post_json(
                "/api/v1/replays",
                Auth::Bearer(&token),
                Csrf::Missing,
                &body,
            )
            .await,
        )
        .await;
        assert_eq!(status, 202, "{accepted}");
        let id = accepted["job_id"].as_str().expect("job id").to_string();
        let job = finished_job(&app, &token, &id, Duration::from_secs(120)).await;
        assert_eq!(job["published"], 7, "{backend:?}: {job}");
        assert_eq!(job["failed"], 3, "{job}");
        assert_eq!(job["transform"]["failed"], 3, "{job}");
        assert!(
            job["last_error"]
                .as_str()
                .unwrap_or("")
                .contains("time limit of 200 ms"),
            "{job}"
        );
        let messages = consume(&target, 7).await.expect("the replayed records");
        let mut ns: Vec<i64> = messages
            .iter()
            .map(|m| value_json(m)["n"].as_i64().expect("n"))
            .collect();
        ns.sort_unstable();
        assert_eq!(ns, (3..10).collect::<Vec<_>>());
        // Returned unchanged: the value's bytes as stored (spacing included).
        assert_eq!(messages[0].payload().map(|p| p.contains(&b' ')), Some(true));
        app.terminate(Duration::from_secs(30)).await;
    }
}

/// A script that does not compile is refused before anything is queued: 422 with the
/// parser's message and line, from the replay and from its dry run.
#[tokio::test]
async fn a_script_that_does_not_compile_is_a_422_with_its_line() {
    let app = app(Backend::Sqlite, 3).await;
    let token = app.admin_token().await;
    for path in ["/api/v1/replays", "/api/v1/replays/dry-run"] {
        let body = json!({
            "filter": {"fingerprint": FINGERPRINT},
            "target_topic": "anywhere",
            "options": {"transform": {"script": "record.json.v = 2;\nlet x = ;\nrecord"}},
        });
        let (status, e) = json_of(
            app.post_json(path, Auth::Bearer(&token), Csrf::Missing, &body)
                .await,
        )
        .await;
        assert_eq!(status, 422, "{path}: {e}");
        let msg = e["error"].as_str().unwrap_or("");
        assert!(
            msg.contains("does not compile") && msg.contains("line 2"),
            "{msg}"
        );
        let body = json!({
            "ids": [1],
            "options": {"transform": {"script": "record", "time_limit_ms": 0}},
        });
        let (status, e) = json_of(
            app.post_json(path, Auth::Bearer(&token), Csrf::Missing, &body)
                .await,
        )
        .await;
        assert_eq!(status, 422, "{path}: {e}");
        assert!(
            e["error"].as_str().unwrap_or("").contains("time_limit_ms"),
            "{e}"
        );
    }
    assert!(app.audit_of("replay").await.is_empty(), "nothing was done");
    let jobs = app.store.jobs(10).await.expect("jobs");
    assert!(jobs.is_empty());
    app.terminate(Duration::from_secs(30)).await;
}

/// The confirmation page without JavaScript: the script typed into its GET form ("Count again
/// and preview") shows the sample before and after, with the error per record; a script that
/// does not compile says so and offers no Confirm; Confirm starts a job that carries the
/// script, and the job page names it by its SHA-256.
#[tokio::test]
async fn the_confirmation_page_previews_a_transform_without_javascript() {
    use crate::ui_actions::{Browser, ACT_ON_FILTER, OPERATOR};
    let app = app(Backend::Sqlite, 12).await;
    app.add_user(OPERATOR.0, "operator", OPERATOR.1).await;
    let b = Browser::sign_in(&app, OPERATOR).await;
    let target = unique("transform_page");
    create_topic(&target, 1, &[]).await.expect("topic");
    let script = "if record.json.n == 7 { throw \"no seven\" }\nrecord.json.v = 2;\nrecord";
    let q = |script: &str| {
        format!(
            "/confirm?op=replay&fingerprint={FINGERPRINT}&target_topic={target}&transform={}",
            urlencode(script)
        )
    };
    let (status, html) = b
        .page(&format!(
            "/confirm?op=replay&fingerprint={FINGERPRINT}&target_topic={target}"
        ))
        .await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("Sample of what will be sent"), "{html}");
    assert!(html.contains("name=\"transform\""), "{html}");
    assert!(html.contains("Count again and preview"), "{html}");

    let (status, html) = b.page(&q(script)).await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("After the transform"), "{html}");
    assert!(
        html.contains("{&quot;n&quot;:0,&quot;v&quot;:2}") || html.contains(r#"{"n":0,"v":2}"#),
        "{html}"
    );
    // The default sample is the first 3: n = 0, 1, 2 (7 is not in it).
    assert!(!html.contains("sample-error"), "{html}");

    let (_, broken) = b.page(&q("record.json.v = ;")).await;
    assert!(broken.contains("does not compile"), "{broken}");
    assert!(
        !broken.contains("Confirm: replay"),
        "no confirm with a broken script: {broken}"
    );

    let fields = [
        ("op", "replay"),
        ("filter", &format!("fingerprint={FINGERPRINT}")[..]),
        ("target_topic", &target[..]),
        ("transform", script),
    ];
    let res = b.submit(&q(script), ACT_ON_FILTER, &fields, None).await;
    assert_eq!(res.status(), 302, "{}", app.log());
    let job_path = crate::support::location(&res);
    let job_path = job_path
        .strip_prefix(&app.base)
        .unwrap_or(&job_path)
        .to_string();
    assert!(job_path.starts_with("/jobs/"), "{job_path}");
    let id = job_path.trim_start_matches("/jobs/").to_string();
    let token = app.admin_token().await;
    let job = finished_job(&app, &token, &id, Duration::from_secs(120)).await;
    assert_eq!(
        (&job["published"], &job["failed"]),
        (&json!(11), &json!(1)),
        "{job}"
    );
    let sha = format!("{:x}", Sha256::digest(script.as_bytes()));
    let (_, page) = b.page(&job_path).await;
    assert!(page.contains(&sha), "the job page names the script: {page}");
    assert!(page.contains("11 transformed and published"), "{page}");
    app.terminate(Duration::from_secs(30)).await;
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
