//! Sorting dead letters into automation tiers through the real binary (issue 13;
//! `docs/automation.md`), on SQLite and PostgreSQL: records of several shapes produced to a
//! DLQ topic through the real broker and ingested by `redrive serve` are sorted by the
//! leader's sorter into the right tier with the right reason (a `retryable=false` one →
//! poison, with the `poison_arrived` alert; a transient rule's match → transient with its
//! next attempt due; no match → the default tier); the `tier` filter and the default view
//! that hides the archive tier; a record replayed by hand that comes back (produced again to
//! the DLQ with its replay's `redrive-idempotency-key`, as a consumer's dead-lettering
//! does) carries its automatic attempts, escalates to manual with the `escalated` alert, and
//! after `loop_guard_returns` come-backs is loop-guarded: a manual replay of it without the
//! approve permission or without a reason is refused with 422 and a message, with both it
//! is accepted; a rule's `move_after` moves its dead letters to archive with an audit row.

use std::time::Duration;

use redrive_core::actions::Actor;
use redrive_core::alerts::EventKind;
use redrive_core::store::RuleSetOrigin;
use redrive_testkit::{create_topic, kafka_brokers, produce, unique, Backend, TestRecord};
use serde_json::{json, Value};

use crate::alerts::{kinds, wait_kinds, write_config};
use crate::support::{eventually, Auth, Csrf, TestApp};

const DEADLINE: Duration = Duration::from_secs(90);

fn rules() -> &'static str {
    r#"
default_tier = "manual"
loop_guard_returns = 2

[[rule]]
name = "timeouts"
tier = "transient"
match.error_classes = ["*TimeoutError"]
schedule = { every = "1h", max_attempts = 1, backoff = "1h", backoff_max = "2h" }

[[rule]]
name = "legacy"
tier = "archive"
match.error_classes = ["LegacyError"]

[[rule]]
name = "business"
tier = "manual"
match.error_classes = ["BusinessError"]
move_after = { after = "2s", to = "archive" }
"#
}

/// A record in the seed convention (`docs/conventions.md`) from `source`, failing with
/// `class`, plus `extra` headers.
fn seed(source: &str, n: u32, class: &str, extra: &[(&str, &str)]) -> TestRecord {
    let id = format!("msg-{n}-{}", unique("m"));
    let mut h: Vec<(String, Option<Vec<u8>>)> = vec![
        ("original_topic".into(), Some(source.as_bytes().to_vec())),
        ("original_partition".into(), Some(b"0".to_vec())),
        ("original_offset".into(), Some(n.to_string().into_bytes())),
        ("retry_count".into(), Some(b"0".to_vec())),
        (
            "error".into(),
            Some(format!("{class}: failed #{n}").into_bytes()),
        ),
        ("error_class".into(), Some(class.as_bytes().to_vec())),
        ("message_id".into(), Some(id.into_bytes())),
    ];
    for (k, v) in extra {
        h.push((k.to_string(), Some(v.as_bytes().to_vec())));
    }
    TestRecord {
        key: Some(format!("k{n}").into_bytes()),
        value: Some(format!("{{\"n\":{n}}}").into_bytes()),
        headers: h,
        ..TestRecord::default()
    }
}

async fn json_get(app: &TestApp, token: &str, path: &str) -> Value {
    let res = app.get(path, Auth::Bearer(token)).await;
    assert_eq!(res.status(), 200, "{path}");
    res.json().await.unwrap()
}

/// Ids of the list `query` (newest first).
async fn ids(app: &TestApp, token: &str, query: &str) -> Vec<i64> {
    let v = json_get(app, token, &format!("/api/v1/dead-letters?{query}")).await;
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_i64().unwrap())
        .collect()
}

/// Polls `check` every 100 ms until it gives `Some`, failing after [`DEADLINE`].
async fn poll<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let end = std::time::Instant::now() + DEADLINE;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            std::time::Instant::now() < end,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The dead letter of `topic` whose error message ends `failed #n` (the newest).
async fn id_of(app: &TestApp, token: &str, topic: &str, n: u32) -> i64 {
    let want = format!("failed #{n}");
    poll(&format!("dead letter #{n} stored"), || async {
        let mut hit = None;
        // The default view hides archive: look there too.
        for tier in ["", "archive"] {
            let v = json_get(
                app,
                token,
                &format!("/api/v1/dead-letters?dlq_topic={topic}&tier={tier}&limit=500"),
            )
            .await;
            for i in v["items"].as_array().unwrap() {
                if i["error_message"]
                    .as_str()
                    .is_some_and(|m| m.ends_with(&want))
                {
                    hit = hit.max(i["id"].as_i64());
                }
            }
        }
        hit
    })
    .await
}

async fn tiering(app: &TestApp, token: &str, id: i64) -> Value {
    poll(&format!("dead letter {id} sorted"), || async {
        let v = json_get(app, token, &format!("/api/v1/dead-letters/{id}")).await;
        (!v["tiering"].is_null()).then_some(v)
    })
    .await
}

/// The idempotency key of the outbox row that replayed `dead_letter` (plain SQL, as the
/// consumer would read it from the record's header).
async fn key_of(app: &TestApp, backend: Backend, dead_letter: i64) -> String {
    let sql = format!(
        "SELECT idempotency_key FROM outbox WHERE dead_letter_id = {dead_letter} \
         ORDER BY id DESC LIMIT 1"
    );
    match backend {
        Backend::Sqlite => {
            let pool = sqlx::SqlitePool::connect(&app.db_url).await.unwrap();
            let v: String = sqlx::query_scalar(&sql).fetch_one(&pool).await.unwrap();
            pool.close().await;
            v
        }
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(&app.db_url).await.unwrap();
            let v: String = sqlx::query_scalar(&sql).fetch_one(&pool).await.unwrap();
            pool.close().await;
            v
        }
    }
}

/// Replays `id` by hand as `token`, waits for the relay to publish it, and makes it come
/// back: the same record produced again to the DLQ with the replay's idempotency key.
#[allow(clippy::too_many_arguments)]
async fn replay_and_come_back(
    app: &TestApp,
    backend: Backend,
    token: &str,
    dlq: &str,
    source: &str,
    id: i64,
    n: u32,
    reason: Option<&str>,
) {
    let mut body = json!({"ids": [id]});
    if let Some(r) = reason {
        body["reason"] = json!(r);
    }
    let res = app
        .post_json("/api/v1/replays", Auth::Bearer(token), Csrf::Right, &body)
        .await;
    assert_eq!(res.status(), 202, "{}", res.text().await.unwrap());
    let job: Value = res.json().await.unwrap();
    let job_id = job["job_id"].as_str().unwrap().to_string();
    eventually("the replay is published", DEADLINE, || async {
        let j = json_get(app, token, &format!("/api/v1/replays/{job_id}")).await;
        j["published"].as_i64() == Some(1)
    })
    .await;
    let key = key_of(app, backend, id).await;
    produce(
        dlq,
        &[seed(
            source,
            n,
            "LlmTimeoutError",
            &[("redrive-idempotency-key", key.as_str())],
        )],
    )
    .await
    .unwrap();
}

async fn sorting_routing_escalation_and_loop_guard(backend: Backend) {
    let dlq = unique("tiers_dlq");
    let source = unique("tiers_src");
    create_topic(&dlq, 1, &[]).await.unwrap();
    create_topic(&source, 1, &[]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        &format!(
            r#"
[alerts]
interval_ms = 200

[[alerts.rules]]
name = "poison"
kind = "poison_arrived"
window_ms = 600000
dlq_topic = "{dlq}"

[[alerts.rules]]
name = "escalations"
kind = "escalated"
window_ms = 600000

[roles.replayer]
permissions = ["replay"]
"#
        ),
    );
    let brokers = kafka_brokers();
    let group = unique("tiers_group");
    let env = [
        ("REDRIVE_CONFIG", config.as_str()),
        ("REDRIVE_INGEST_ENABLED", "true"),
        ("REDRIVE_KAFKA_BROKERS", brokers.as_str()),
        ("REDRIVE_DLQ_TOPICS", dlq.as_str()),
        ("REDRIVE_GROUP_ID", group.as_str()),
    ];
    let app = TestApp::start_on(backend, &env).await;
    let token = app.admin_token().await;
    let rules_admin = Actor::admin("rules-admin");
    let v = app
        .store
        .save_rule_set(
            &rules_admin,
            RuleSetOrigin::Api,
            rules(),
            Some("tiers test"),
        )
        .await
        .expect("the rule set saves");
    assert_eq!(v.version, 1);

    produce(
        &dlq,
        &[
            seed(&source, 1, "ValidationError", &[("retryable", "false")]),
            seed(&source, 2, "LlmTimeoutError", &[]),
            seed(&source, 3, "ValidationError", &[]),
            seed(&source, 4, "LegacyError", &[]),
            seed(&source, 5, "BusinessError", &[]),
        ],
    )
    .await
    .unwrap();
    let poison = id_of(&app, &token, &dlq, 1).await;
    let transient = id_of(&app, &token, &dlq, 2).await;
    let plain = id_of(&app, &token, &dlq, 3).await;
    let legacy = id_of(&app, &token, &dlq, 4).await;
    let business = id_of(&app, &token, &dlq, 5).await;

    // Sorted, with the rule, the version and why.
    let p = tiering(&app, &token, poison).await;
    assert_eq!(p["tier"], "poison");
    assert_eq!(p["tiering"]["tier"], "poison");
    assert!(p["tiering"]["rule"].is_null());
    assert_eq!(p["tiering"]["rule_version"], 1);
    // The signal alone: the tier is beside it (and the history reads "poison: header ...").
    assert_eq!(p["tiering"]["reason"], "header retryable=false", "{p}");
    let t = tiering(&app, &token, transient).await;
    assert_eq!(t["tiering"]["tier"], "transient", "{t}");
    assert_eq!(t["tiering"]["rule"], "timeouts");
    assert_eq!(t["tiering"]["auto_attempts"], 0);
    assert_eq!(t["tiering"]["max_attempts"], 1);
    assert!(t["tiering"]["next_attempt_at"].is_string(), "{t}");
    assert!(
        t["tiering"]["reason"]
            .as_str()
            .unwrap()
            .starts_with("rule `timeouts` (#1): error class LlmTimeoutError"),
        "{t}"
    );
    let m = tiering(&app, &token, plain).await;
    assert_eq!(m["tiering"]["tier"], "manual");
    assert_eq!(m["tiering"]["reason"], "no rule matched: the default tier");
    assert!(m["tiering"]["next_attempt_at"].is_null());
    let a = tiering(&app, &token, legacy).await;
    assert_eq!(a["tiering"]["tier"], "archive");
    assert_eq!(a["tiering"]["rule"], "legacy");
    wait_kinds(&app, "poison", &[EventKind::Fired]).await;

    // The tier filter, and the default view without the archive tier.
    let all_live = ids(&app, &token, &format!("dlq_topic={dlq}&limit=500")).await;
    assert!(
        !all_live.contains(&legacy),
        "archive is out of the default view"
    );
    assert!(all_live.contains(&poison) && all_live.contains(&plain));
    assert_eq!(
        ids(&app, &token, &format!("dlq_topic={dlq}&tier=poison")).await,
        [poison]
    );
    assert_eq!(
        ids(&app, &token, &format!("dlq_topic={dlq}&tier=transient")).await,
        [transient]
    );
    assert!(ids(&app, &token, &format!("dlq_topic={dlq}&tier=archive"))
        .await
        .contains(&legacy));
    // The list page's "… all matching" links keep the tier: replaying all of `tier=manual`
    // must not offer the poison ones too.
    let admin = app.sign_in("api-test", "api-test-password").await;
    let page = app
        .get(
            &format!("/?dlq_topic={dlq}&tier=manual"),
            Auth::Session(&admin),
        )
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(&format!(
            "/confirm?op=replay&amp;dlq_topic={dlq}&amp;tier=manual"
        )),
        "{page}"
    );
    let res = app
        .get("/api/v1/dead-letters?tier=limbo", Auth::Bearer(&token))
        .await;
    assert_eq!(res.status(), 400);
    assert!(res.text().await.unwrap().contains("`tier` must be one of"));
    let count: Value = json_get(
        &app,
        &token,
        &format!("/api/v1/dead-letters?dlq_topic={dlq}&tier=poison"),
    )
    .await;
    assert_eq!(count["items"][0]["tier"], "poison");

    // Age-based movement: `business` → archive after 2 s, audited once by `(rules)`.
    eventually(
        "the business dead letter moves to archive",
        DEADLINE,
        || async {
            ids(&app, &token, &format!("dlq_topic={dlq}&tier=archive"))
                .await
                .contains(&business)
        },
    )
    .await;
    let b = tiering(&app, &token, business).await;
    assert_eq!(b["tiering"]["tier"], "archive");
    assert!(
        b["tiering"]["reason"]
            .as_str()
            .unwrap()
            .starts_with("moved by rule `business` (#3): 2s in manual"),
        "{b}"
    );
    let moves = app.audit_of("tier_move").await;
    assert_eq!(moves.len(), 1, "{moves:?}");
    assert_eq!(moves[0].actor, "(rules)");
    assert_eq!(moves[0].count, 1);
    assert_eq!(
        moves[0].ids.as_deref(),
        Some(format!("[{business}]").as_str())
    );
    let history = json_get(
        &app,
        &token,
        &format!("/api/v1/dead-letters/{business}/history"),
    )
    .await;
    let kinds_of: Vec<&str> = history["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds_of.contains(&"tier_assigned") && kinds_of.contains(&"tier_moved"),
        "{kinds_of:?}"
    );

    // One automatic attempt used (the scheduler's round would count it so), then a manual
    // replay that comes back: its automatic attempts are carried over and it escalates.
    assert_eq!(
        app.store
            .note_automatic_attempts(&[transient])
            .await
            .unwrap(),
        1
    );
    replay_and_come_back(&app, backend, &token, &dlq, &source, transient, 6, None).await;
    let back1 = id_of(&app, &token, &dlq, 6).await;
    let e = tiering(&app, &token, back1).await;
    assert_eq!(e["tiering"]["tier"], "manual", "{e}");
    assert_eq!(e["tiering"]["escalated"], true);
    assert_eq!(e["tiering"]["loop_guarded"], false);
    assert_eq!(e["tiering"]["auto_attempts"], 1);
    assert!(e["tiering"]["reason"]
        .as_str()
        .unwrap()
        .starts_with("escalated: came back after 1 automatic attempts"));
    wait_kinds(&app, "escalations", &[EventKind::Fired]).await;
    assert_eq!(kinds(&app, "poison").await, [EventKind::Fired]);

    // Back a second time: loop-guarded (loop_guard_returns = 2).
    replay_and_come_back(&app, backend, &token, &dlq, &source, back1, 7, None).await;
    let back2 = id_of(&app, &token, &dlq, 7).await;
    let g = tiering(&app, &token, back2).await;
    assert_eq!(g["tiering"]["loop_guarded"], true, "{g}");
    assert_eq!(g["tiering"]["tier"], "manual");
    assert!(g["tiering"]["reason"]
        .as_str()
        .unwrap()
        .starts_with("loop guard"));

    // Replaying it by hand: the dry run says so; no approve permission, or no reason: 422.
    let dry: Value = app
        .post_json(
            "/api/v1/replays/dry-run",
            Auth::Bearer(&token),
            Csrf::Right,
            &json!({"ids": [back2, plain]}),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(dry["loop_guarded"], 1, "{dry}");
    app.add_user_in_store("rita", "replayer", "a long passphrase")
        .await;
    let rita = app.create_token("rita").await;
    for (who, reason, missing) in [
        (
            rita.as_str(),
            None,
            "needs the approve permission and a reason",
        ),
        (
            rita.as_str(),
            Some("INC-9 fixed"),
            "needs the approve permission",
        ),
        (token.as_str(), None, "needs a reason"),
        (token.as_str(), Some("   "), "needs a reason"),
    ] {
        let mut body = json!({"ids": [back2]});
        if let Some(r) = reason {
            body["reason"] = json!(r);
        }
        let res = app
            .post_json("/api/v1/replays", Auth::Bearer(who), Csrf::Right, &body)
            .await;
        assert_eq!(res.status(), 422);
        let text = res.text().await.unwrap();
        assert!(
            text.contains("1 of the selected dead letters are loop-guarded")
                && text.contains(missing),
            "{text}"
        );
    }
    // Over a filter too (the same check, one place).
    let res = app
        .post_json(
            "/api/v1/replays",
            Auth::Bearer(&rita),
            Csrf::Right,
            &json!({"filter": {"dlq_topic": dlq, "tier": "manual"}}),
        )
        .await;
    assert_eq!(res.status(), 422, "{}", res.text().await.unwrap());
    // Approve permission and a reason: accepted.
    let res = app
        .post_json(
            "/api/v1/replays",
            Auth::Bearer(&token),
            Csrf::Right,
            &json!({"ids": [back2], "reason": "INC-9: the fix is deployed"}),
        )
        .await;
    assert_eq!(res.status(), 202, "{}", res.text().await.unwrap());

    // The pages show it: a tier badge per row, the tier section on the detail page.
    let session = app.sign_in("api-test", "api-test-password").await;
    let page = app
        .get(&format!("/dead-letters/{back2}"), Auth::Session(&session))
        .await
        .text()
        .await
        .unwrap();
    assert!(page.contains("Loop-guarded"), "the detail page says so");
    assert!(page.contains("loop guard: came back 2 times"));
    let list = app
        .get(
            &format!("/?dlq_topic={dlq}&tier=poison"),
            Auth::Session(&session),
        )
        .await
        .text()
        .await
        .unwrap();
    assert!(list.contains("tier-poison"), "a tier badge per row");

    // The sorter's metrics.
    let metrics = app
        .get("/metrics", Auth::Bearer(&token))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("redrive_tier_sorted_total{tier=\"poison\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn sorting_routing_escalation_and_loop_guard_sqlite() {
    sorting_routing_escalation_and_loop_guard(Backend::Sqlite).await;
}

#[tokio::test]
async fn sorting_routing_escalation_and_loop_guard_postgres() {
    sorting_routing_escalation_and_loop_guard(Backend::Postgres).await;
}

/// The sorter's rate over a backlog (`docs/automation.md`, "Sorting rate"): 100,000 unsorted
/// dead letters (as stored before migration 0022, or under a rule set on labels), sorted 500
/// per transaction with a rule set of three rules. A measurement, not an assertion on time:
/// run it by name with `--ignored --nocapture`.
async fn sorting_rate(backend: Backend) {
    use redrive_core::automation::RuleSet;
    use redrive_core::model::{Convention, Header, NewDeadLetter, Normalized, RawRecord};
    let (url, _dir) = redrive_testkit::fresh_database(backend).await.unwrap();
    let store = redrive_core::store::Store::connect(&url).await.unwrap();
    store.migrate().await.unwrap();
    // Ingest sorts what it stores unless the active rule set matches on labels: under such a
    // set the backlog is stored unsorted, as before migration 0022.
    redrive_testkit::leave_ingest_unsorted(&store, &Actor::operator("bench"))
        .await
        .unwrap();
    const N: i64 = 100_000;
    let classes = [
        "LlmTimeoutError",
        "ValidationError",
        "BusinessError",
        "LegacyError",
    ];
    for chunk in 0..(N / 1_000) {
        let batch: Vec<NewDeadLetter> = (0..1_000)
            .map(|i| {
                let n = chunk * 1_000 + i;
                let class = classes[(n % 4) as usize];
                NewDeadLetter {
                    record: RawRecord {
                        dlq_topic: "bench.dlq".into(),
                        dlq_partition: 0,
                        dlq_offset: n,
                        timestamp_ms: Some(1_000 + n),
                        key: Some(format!("k{n}").into_bytes()),
                        value: Some(b"{}".to_vec()),
                        headers: vec![Header {
                            name: "retryable".into(),
                            value: Some(if n % 10 == 0 {
                                b"false".to_vec()
                            } else {
                                b"true".to_vec()
                            }),
                        }],
                    },
                    convention: Convention::Seed,
                    normalized: Normalized {
                        source_topic: Some("bench".into()),
                        error_class: Some(class.into()),
                        error_message: Some(format!("{class}: #{n}")),
                        ..Normalized::default()
                    },
                    fingerprint: format!("{:016x}", n % 4),
                    dead_lettered_at_ms: 1_000 + n,
                    ingested_at_ms: 1_000 + n,
                }
            })
            .collect();
        store.insert_batch(&batch).await.unwrap();
    }
    let set = RuleSet::parse_toml(rules()).unwrap();
    let start = std::time::Instant::now();
    let mut sorted = 0u64;
    let mut batches = 0u64;
    loop {
        let r = store.sort_unsorted(&set, None, 500).await.unwrap();
        if r.read == 0 {
            break;
        }
        sorted += r.sorted;
        batches += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(sorted, N as u64);
    println!(
        "{backend:?}: sorted {sorted} dead letters in {batches} transactions in {secs:.1} s: \
         {:.0} dead letters/s",
        sorted as f64 / secs
    );
}

#[tokio::test]
#[ignore = "a measurement (docs/automation.md, \"Sorting rate\"); run by name with --ignored"]
async fn sorting_rate_sqlite() {
    sorting_rate(Backend::Sqlite).await;
}

#[tokio::test]
#[ignore = "a measurement (docs/automation.md, \"Sorting rate\"); run by name with --ignored"]
async fn sorting_rate_postgres() {
    sorting_rate(Backend::Postgres).await;
}
