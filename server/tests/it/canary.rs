//! Canary replay (issue 9 item 3; `docs/replay.md`, "Canary replay") against the real broker
//! and the demo pipeline, on SQLite and PostgreSQL. The demo agent dead-letters every request
//! while its LLM outage is on; redrive ingests them and replays them to the source topic with
//! a canary of 3:
//!
//! - **outage still on**: the agent fails on the canary's records again and dead-letters them
//!   with redrive's headers, ingest links them, and the job pauses itself with the verdict as
//!   its reason (audited, actor `(canary)`), the other 5 records not published; a
//!   `canary_failed` alert rule fires once. With the outage off, a resume publishes the rest,
//!   without a second canary, each record once.
//! - **outage off**: nothing comes back, the canary passes after its watch (the rest held
//!   back meanwhile, and a relay restart mid-watch keeps the stored deadline), and the job
//!   publishes every record exactly once.
//!
//! Plus the JSON API (422 for bad canary options, the dry run's canary, the job's `canary`)
//! and the confirmation page's no-JS canary fields, against the real binary.

use std::time::Duration;

use redrive_core::actions::{AuditQuery, JobStatus, ReplayJob, ReplayOptions};
use redrive_core::canary::{CanaryOptions, CanaryState};
use redrive_core::replay::HEADER_REPLAY_ID;
use redrive_core::store::{Store, CANARY_ACTOR};
use redrive_core::Filter;
use redrive_testkit::ingest::wait_for_count;
use redrive_testkit::{consume, wait_for, Backend};

use crate::replay_outcome::{Demo, Redrive};
use crate::support::replay::{header_text, headers_of, record_count};

/// Requests of the demo, all dead-lettered while its outage is on.
const N: u64 = 8;
/// Records in the canary.
const K: u64 = 3;

fn canary(wait_ms: u64, max_refailed: u64) -> ReplayOptions {
    ReplayOptions {
        canary: Some(CanaryOptions {
            records: Some(K),
            wait_ms: Some(wait_ms),
            max_refailed,
            ..CanaryOptions::default()
        }),
        ..ReplayOptions::default()
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

async fn job(store: &Store, id: &str) -> ReplayJob {
    store.job(id).await.expect("job").expect("a job")
}

/// The demo with its outage on until all `N` requests are dead letters in redrive.
async fn dead_lettered(backend: Backend) -> (Demo, Redrive, Vec<i64>) {
    let demo = Demo::start(N, 0.0, true);
    let redrive = Redrive::start(backend, &demo.config.dlq_topic).await;
    wait_for_count(
        &redrive.store,
        &demo.config.dlq_topic,
        N as i64,
        Duration::from_secs(90),
    )
    .await
    .expect("every request dead-lettered during the outage");
    let ids = redrive.ids(Filter::default()).await;
    assert_eq!(ids.len() as u64, N);
    (demo, redrive, ids)
}

/// The replayed records of `job` on the demo's source topic: (dead letter id header) each.
async fn replayed_on_source(demo: &Demo, job: &str) -> Vec<String> {
    let topic = &demo.config.source_topic;
    let all = record_count(topic, 1) as usize;
    let mut ids: Vec<String> = consume(topic, all)
        .await
        .expect("the replayed records")
        .iter()
        .map(headers_of)
        .filter(|h| {
            h.iter()
                .any(|x| x.name == HEADER_REPLAY_ID && x.value.as_deref() == Some(job.as_bytes()))
        })
        .map(|h| header_text(&h, redrive_core::replay::HEADER_DEAD_LETTER_ID))
        .collect();
    ids.sort();
    ids
}

async fn a_canary_that_comes_back_pauses_the_job(backend: Backend) {
    let (demo, redrive, ids) = dead_lettered(backend).await;
    // The `canary_failed` rule: its first evaluation starts from the present (history never
    // fires), so it runs once before the replay.
    let rules: redrive_core::alerts::AlertsConfig = serde_json::from_value(serde_json::json!({
        "rules": [{"name": "canary", "kind": "canary_failed", "window_ms": 600000}]
    }))
    .expect("alerts config");
    let inputs = redrive_core::alerts::evaluate::EvaluatorInputs {
        ingest: None,
        group_id: "g".into(),
    };
    redrive_core::alerts::evaluate::evaluate_once(&rules, &redrive.store, &inputs, now_ms())
        .await
        .expect("evaluate");
    // A long watch: the verdict comes as soon as more than 1 came back, not after it.
    let started = redrive.replay(ids.clone(), canary(120_000, 1)).await;

    let paused = wait_for(
        "the canary to fail and pause the job",
        Duration::from_secs(90),
        || async {
            let j = job(&redrive.store, &started.id).await;
            (j.status == JobStatus::Paused).then_some(j)
        },
    )
    .await
    .expect("the job paused itself");
    let c = paused.canary.clone().expect("a canary");
    assert_eq!(c.state, CanaryState::Failed, "{c:?}");
    assert_eq!(c.size, Some(K as i64));
    assert!(c.refailed > 1, "{c:?}");
    let reason = c.reason.clone().expect("a reason");
    assert!(
        reason.contains("came back as dead letters") && reason.contains("more than the 1 allowed"),
        "{reason}"
    );
    // Every canary record comes back (the outage is still on); nothing else was published.
    let settled = wait_for(
        "all canary records to come back",
        Duration::from_secs(60),
        || async {
            let j = job(&redrive.store, &started.id).await;
            (j.refailed == K as i64).then_some(j)
        },
    )
    .await
    .expect("the canary records came back");
    assert_eq!(settled.status, JobStatus::Paused);
    assert_eq!(settled.published, K as i64, "the rest is not published");
    assert_eq!(replayed_on_source(&demo, &started.id).await.len() as u64, K);

    // Audited, with the canary as the actor and the verdict as the reason.
    let audit = redrive
        .store
        .audit(&AuditQuery {
            action: Some("pause_job".into()),
            ..AuditQuery::default()
        })
        .await
        .expect("audit")
        .items;
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0].actor, CANARY_ACTOR);
    assert_eq!(audit[0].job_id.as_deref(), Some(started.id.as_str()));
    assert_eq!(audit[0].reason.as_deref(), Some(reason.as_str()));

    // The `canary_failed` rule fires once for the job, however often it is evaluated.
    for _ in 0..3 {
        let now = now_ms();
        redrive_core::alerts::evaluate::evaluate_once(&rules, &redrive.store, &inputs, now)
            .await
            .expect("evaluate");
    }
    let events = redrive
        .store
        .recent_alert_events(Some("canary"), 100)
        .await
        .expect("events");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].scope, format!("job={}", started.id));
    assert_eq!(events[0].kind, redrive_core::alerts::EventKind::Fired);
    assert!(events[0].summary.contains("canary"), "{events:?}");

    // The job page, as a browser without JavaScript gets it.
    let site = crate::support::InProcessSite::over(redrive.store.clone());
    let (status, page) = site.get(&format!("/jobs/{}", started.id)).await;
    assert_eq!(status, 200);
    assert!(page.contains("canary: failed"), "{page}");
    assert!(page.contains("more than the 1 allowed"), "{page}");
    assert!(page.contains("without a second canary"), "{page}");
    let (_, list) = site.get("/jobs").await;
    assert!(list.contains("canary failed"), "{list}");

    // Fixed: the outage ends, a resume publishes the rest (no second canary), each once.
    demo.set_outage(false);
    redrive
        .store
        .resume_job(
            &redrive_core::actions::Actor::operator("oncall"),
            &started.id,
            Some("LLM back"),
        )
        .await
        .expect("resume");
    let done = wait_for(
        "the resumed job to finish",
        Duration::from_secs(60),
        || async {
            let j = job(&redrive.store, &started.id).await;
            (j.status == JobStatus::Finished).then_some(j)
        },
    )
    .await
    .expect("finished");
    assert_eq!(done.published, N as i64);
    assert_eq!(done.canary.expect("canary").state, CanaryState::Failed);
    let mut want: Vec<String> = ids.iter().map(i64::to_string).collect();
    want.sort();
    assert_eq!(replayed_on_source(&demo, &started.id).await, want);

    redrive.stop().await;
    demo.stop().await;
}

async fn a_canary_that_stays_away_lets_the_job_go_on(backend: Backend) {
    let (demo, mut redrive, ids) = dead_lettered(backend).await;
    demo.set_outage(false);
    let started = redrive.replay(ids.clone(), canary(3_000, 0)).await;

    // While the canary is watched, only its records are out.
    let watched = wait_for("the canary's watch", Duration::from_secs(60), || async {
        let j = job(&redrive.store, &started.id).await;
        let c = j.canary.clone()?;
        (c.state == CanaryState::Watching).then_some(j)
    })
    .await
    .expect("watching");
    assert_eq!(watched.published, K as i64, "{watched:?}");
    let until = watched
        .canary
        .unwrap()
        .watch_until_ms
        .expect("the watch's end");
    // A relay restart mid-watch: the new relay continues from the store (the same deadline,
    // no second canary).
    redrive.restart_relay().await;

    let done = wait_for("the job to finish", Duration::from_secs(60), || async {
        let j = job(&redrive.store, &started.id).await;
        (j.status == JobStatus::Finished).then_some(j)
    })
    .await
    .expect("finished");
    let c = done.canary.clone().expect("canary");
    assert_eq!(c.state, CanaryState::Passed, "{c:?}");
    assert_eq!((c.published, c.refailed), (K as i64, 0));
    assert_eq!(
        c.watch_until_ms,
        Some(until),
        "the stored deadline, not a new timer"
    );
    assert!(c.decided_at_ms.expect("decided") >= until);
    assert_eq!(
        (done.published, done.failed, done.refailed),
        (N as i64, 0, 0)
    );
    let mut want: Vec<String> = ids.iter().map(i64::to_string).collect();
    want.sort();
    assert_eq!(
        replayed_on_source(&demo, &started.id).await,
        want,
        "every record published exactly once"
    );
    let audit = redrive
        .store
        .audit(&AuditQuery {
            action: Some("pause_job".into()),
            ..AuditQuery::default()
        })
        .await
        .expect("audit")
        .items;
    assert!(audit.is_empty(), "no pause: {audit:?}");
    let site = crate::support::InProcessSite::over(redrive.store.clone());
    let (_, page) = site.get(&format!("/jobs/{}", started.id)).await;
    assert!(page.contains("canary: passed"), "{page}");

    redrive.stop().await;
    demo.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_that_comes_back_pauses_the_job_sqlite() {
    a_canary_that_comes_back_pauses_the_job(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_that_comes_back_pauses_the_job_postgres() {
    a_canary_that_comes_back_pauses_the_job(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_that_stays_away_lets_the_job_go_on_sqlite() {
    a_canary_that_stays_away_lets_the_job_go_on(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_that_stays_away_lets_the_job_go_on_postgres() {
    a_canary_that_stays_away_lets_the_job_go_on(Backend::Postgres).await;
}

/// The API refuses bad canary options with a 422 naming the field (nothing queued), the dry
/// run shows the canary's size and plan, the job's JSON carries the canary, and the
/// confirmation page's plain form starts a replay with one.
#[tokio::test]
async fn the_api_and_the_confirmation_form_take_a_canary() {
    use crate::support::{location, Auth, Csrf, TestApp};
    use crate::ui_actions::{job_id, Browser, ACT_ON_FILTER, OPERATOR};
    use serde_json::json;

    let topic = redrive_testkit::unique("canary.DLT");
    let records: Vec<redrive_core::model::NewDeadLetter> = (0..20)
        .map(|o| {
            redrive_testkit::fixtures::stored_dead_letter(
                &topic,
                o,
                redrive_core::Normalized {
                    source_topic: Some(redrive_testkit::unique("canary_orders")),
                    ..redrive_core::Normalized::default()
                },
            )
        })
        .collect();
    let app = TestApp::with_records(Backend::Sqlite, &records, &[]).await;
    let token = app.admin_token().await;
    let post = |path: &'static str, body: serde_json::Value| {
        let app = &app;
        let token = token.clone();
        async move {
            app.post_json(path, Auth::Bearer(&token), Csrf::Missing, &body)
                .await
        }
    };
    let bad = [
        (json!({}), "`records` (a count) or `percent`"),
        (json!({"records": 2, "percent": 5}), "not both"),
        (json!({"percent": 0}), "`percent` must be more than 0"),
        (
            json!({"records": 5, "wait_ms": 10}),
            "`wait_ms` must be from 1000",
        ),
        (
            json!({"records": 2, "max_refailed": 2}),
            "below its `records`",
        ),
        (json!({"records": 2, "threshold": 1}), "threshold"),
    ];
    for (c, want) in bad {
        for path in ["/api/v1/replays", "/api/v1/replays/dry-run"] {
            let res = post(
                path,
                json!({"ids": [1, 2, 3], "options": {"canary": c.clone()}}),
            )
            .await;
            assert_eq!(res.status(), 422, "{path} {c}");
            let body = res.text().await.expect("body");
            assert!(body.contains(want), "{path} {c}: {body}");
        }
    }
    assert!(app.store.jobs(10).await.expect("jobs").is_empty());

    let res = post(
        "/api/v1/replays/dry-run",
        json!({"ids": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], "options": {"canary": {"percent": 25, "wait_ms": 30000}}}),
    )
    .await;
    assert_eq!(res.status(), 200);
    let body: serde_json::Value = res.json().await.expect("json");
    assert_eq!(body["canary"]["size"], json!(3), "{body}");
    assert_eq!(
        body["canary"]["plan"],
        json!("the first 25 % of the records (rounded up), then watch 30 s for re-failures; pause the job if more than 0 come back")
    );

    let res = post(
        "/api/v1/replays",
        json!({"ids": [1, 2, 3], "options": {"canary": {"records": 2, "wait_ms": 5000}}}),
    )
    .await;
    assert!(res.status().is_success(), "{}", res.status());
    let body: serde_json::Value = res.json().await.expect("json");
    let id = body["job_id"].as_str().expect("job_id").to_string();
    let res = app
        .get(&format!("/api/v1/replays/{id}"), Auth::Bearer(&token))
        .await;
    let body: serde_json::Value = res.json().await.expect("json");
    assert_eq!(
        body["options"]["canary"],
        json!({"records": 2, "wait_ms": 5000, "max_refailed": 0})
    );
    let state = body["canary"]["state"].as_str().expect("a canary state");
    assert!(
        ["starting", "publishing", "watching", "failed"].contains(&state),
        "{body}"
    );

    // The confirmation page's plain form (no JavaScript).
    app.add_user(OPERATOR.0, "operator", OPERATOR.1).await;
    let b = Browser::sign_in(&app, OPERATOR).await;
    let confirm = format!("/confirm?op=replay&dlq_topic={topic}");
    let (_, html) = b.page(&confirm).await;
    assert!(html.contains("name=\"canary_size\""), "{html}");
    let filter = format!("dlq_topic={topic}");
    let res = b
        .submit(
            &confirm,
            ACT_ON_FILTER,
            &[
                ("op", "replay"),
                ("filter", &filter),
                ("canary_size", "10 %"),
                ("canary_wait_s", "2"),
                ("canary_max_refailed", "0"),
            ],
            None,
        )
        .await;
    assert_eq!(res.status(), 302, "{}", app.log());
    let id = job_id(&location(&res));
    let j = app.store.job(&id).await.expect("job").expect("a job");
    let c = j.options.canary.expect("a canary");
    assert_eq!(
        (c.percent.map(|p| p.0), c.wait_ms, c.max_refailed),
        (Some(10.0), Some(2000), 0)
    );
    let (_, html) = b.page(&format!("/jobs/{id}")).await;
    assert!(
        html.contains("Plan: the first 10 % of the records"),
        "{html}"
    );

    // A bad size comes back as a message, and starts nothing.
    let before = app.store.jobs(10).await.expect("jobs").len();
    let res = b
        .submit(
            &confirm,
            ACT_ON_FILTER,
            &[
                ("op", "replay"),
                ("filter", &filter),
                ("canary_size", "ten"),
            ],
            None,
        )
        .await;
    assert!(
        res.status().is_redirection() || res.status().is_client_error(),
        "{}",
        res.status()
    );
    assert_eq!(app.store.jobs(10).await.expect("jobs").len(), before);
}
