//! Pause, resume and cancel of a replay job (issue 9 item 2) against the real broker, on
//! SQLite and PostgreSQL: a throttled replay paused mid-way stops publishing (the topic's
//! record count stays equal across relay cycles), stays paused across a relay restart,
//! resumes where it stopped, and every dead letter is published exactly once with its own
//! idempotency key; a paused job can be cancelled. Pause and resume are audited with actor
//! and reason.

use std::collections::HashSet;
use std::time::Duration;

use redrive_core::actions::{JobStatus, ReplayRequest, Selection};
use redrive_core::model::NewDeadLetter;
use redrive_core::replay::{HEADER_DEAD_LETTER_ID, HEADER_IDEMPOTENCY_KEY};
use redrive_core::store::{Store, StoreError};
use redrive_testkit::{consume, unique, wait_for, Backend};

use crate::support::replay::{
    ann, audit_rows, fast_relay, header_text, headers_of, record_count, store_with_throttled_job,
    wait_job, RunningRelay,
};

const N: i64 = 500;
const RATE: u32 = 50;

/// Waits until `relay` has run `n` more poll cycles.
async fn cycles(relay: &RunningRelay, n: u64) {
    let start = relay.status.snapshot().cycles_total;
    wait_for(
        &format!("{n} relay cycles"),
        Duration::from_secs(30),
        || async { (relay.status.snapshot().cycles_total >= start + n).then_some(()) },
    )
    .await
    .expect("relay cycles");
}

/// Waits until the job's published count and the topic's record count no longer move:
/// equal across two reads with `n` relay cycles between them (and no worker on the job).
async fn settled(store: &Store, relay: &RunningRelay, job: &str, target: &str) -> (i64, i64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let a = (
            store.job(job).await.expect("job").expect("a job").published,
            record_count(target, 1),
        );
        cycles(relay, 5).await;
        let b = (
            store.job(job).await.expect("job").expect("a job").published,
            record_count(target, 1),
        );
        if a == b && relay.status.snapshot().active_jobs == 0 {
            return b;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the paused job still publishes: {a:?} then {b:?}"
        );
    }
}

async fn pause_resume_publishes_each_record_once(backend: Backend) {
    let (store, _dir, target, job) = store_with_throttled_job(backend, "paused", N, 50, RATE).await;
    let relay = RunningRelay::start(&store, fast_relay());
    // Mid-way: some published, far from all (500 at 50 msgs/s is 10 s).
    wait_for("the first records", Duration::from_secs(60), || async {
        let j = store.job(&job.id).await.ok().flatten()?;
        (j.published >= 20).then_some(())
    })
    .await
    .expect("published some");
    let paused = store
        .pause_job(&ann(), &job.id, Some("INC-7 downstream is struggling"))
        .await
        .expect("pause");
    assert_eq!(paused.status, JobStatus::Paused);
    assert!(matches!(
        store.pause_job(&ann(), &job.id, None).await,
        Err(StoreError::Conflict(_))
    ));
    let (published, on_topic) = settled(&store, &relay, &job.id, &target).await;
    assert_eq!(published, on_topic, "every record on the topic is recorded");
    assert!(published < N, "{backend:?}: paused at {published} of {N}");

    // A relay restart keeps it paused.
    relay.stop().await;
    let relay = RunningRelay::start(&store, fast_relay());
    cycles(&relay, 10).await;
    let j = store.job(&job.id).await.expect("job").expect("a job");
    assert_eq!((j.status, j.published), (JobStatus::Paused, published));
    assert_eq!(record_count(&target, 1), on_topic);

    let resumed = store
        .resume_job(&ann(), &job.id, Some("INC-7 fixed"))
        .await
        .expect("resume");
    assert_eq!(resumed.status, JobStatus::Running);
    let done = wait_job(
        &store,
        &job.id,
        Duration::from_secs(90),
        JobStatus::Finished,
    )
    .await;
    relay.stop().await;
    assert_eq!((done.published, done.failed), (N, 0), "{done:?}");
    assert_eq!(record_count(&target, 1), N, "no duplicates, none missing");
    let messages = consume(&target, N as usize)
        .await
        .expect("the replayed records");
    let keys: HashSet<String> = messages
        .iter()
        .map(|m| header_text(&headers_of(m), HEADER_IDEMPOTENCY_KEY))
        .collect();
    let ids: HashSet<String> = messages
        .iter()
        .map(|m| header_text(&headers_of(m), HEADER_DEAD_LETTER_ID))
        .collect();
    assert_eq!((keys.len(), ids.len()), (N as usize, N as usize));

    for (action, reason) in [
        ("pause_job", "INC-7 downstream is struggling"),
        ("resume_job", "INC-7 fixed"),
    ] {
        let rows = audit_rows(&store, action).await;
        assert_eq!(rows.len(), 1, "{action}");
        assert_eq!(rows[0].actor, "ann");
        assert_eq!(rows[0].reason.as_deref(), Some(reason));
        assert_eq!(rows[0].job_id.as_deref(), Some(job.id.as_str()));
    }

    // A paused job can be cancelled; its dead letters go back to their status.
    let again = store
        .request_replay(
            &ann(),
            &ReplayRequest {
                selection: Selection::Ids(vec![1, 2, 3]),
                target_topic: Some(target.clone()),
                rate_per_sec: None,
                reason: None,
                options: Default::default(),
            },
        )
        .await
        .expect("replay");
    store
        .pause_job(&ann(), &again.id, None)
        .await
        .expect("pause");
    let cancelled = store.cancel_job(&ann(), &again.id).await.expect("cancel");
    assert_eq!(
        (cancelled.status, cancelled.cancelled),
        (JobStatus::Cancelled, 3)
    );
    assert!(matches!(
        store.resume_job(&ann(), &again.id, None).await,
        Err(StoreError::Conflict(_))
    ));
}

#[tokio::test]
async fn pause_resume_publishes_each_record_once_on_sqlite() {
    pause_resume_publishes_each_record_once(Backend::Sqlite).await;
}

#[tokio::test]
async fn pause_resume_publishes_each_record_once_on_postgres() {
    pause_resume_publishes_each_record_once(Backend::Postgres).await;
}

/// The job page's pause, resume and cancel as plain forms without JavaScript, and the JSON
/// API's routes: a paused job shows `paused` with Resume and Cancel (no Pause), a second
/// pause is 409, a viewer is 403, each change is audited with actor and reason. (Kafka is
/// unreachable here, the harness default: the job is running or waiting when paused.)
#[tokio::test]
async fn the_job_page_and_the_api_pause_resume_and_cancel() {
    use crate::support::{location, Auth, Csrf, TestApp};
    use crate::ui_actions::{job_id, Browser, ACT, OPERATOR, VIEWER};
    use serde_json::json;

    let topic = unique("ctl.DLT");
    let records: Vec<NewDeadLetter> = (0..3)
        .map(|o| {
            redrive_testkit::fixtures::stored_dead_letter(
                &topic,
                o,
                redrive_core::Normalized {
                    source_topic: Some("orders".into()),
                    ..redrive_core::Normalized::default()
                },
            )
        })
        .collect();
    let app = TestApp::with_records(Backend::Sqlite, &records, &[]).await;
    app.add_user(OPERATOR.0, "operator", OPERATOR.1).await;
    app.add_user(VIEWER.0, "viewer", VIEWER.1).await;
    let b = Browser::sign_in(&app, OPERATOR).await;
    let res = b
        .submit(
            "/",
            ACT,
            &[("op", "replay"), ("ids[]", "1"), ("ids[]", "2")],
            None,
        )
        .await;
    assert_eq!(res.status(), 302, "{}", app.log());
    let job = job_id(&location(&res));
    let page = format!("/jobs/{job}");
    let (_, html) = b.page(&page).await;
    assert!(html.contains("Pause the replay"), "{html}");
    assert!(!html.contains("Resume the replay"), "{html}");

    let res = b
        .submit(
            &page,
            "/api/ui/pause-job",
            &[("job_id", &job), ("reason", "INC-9 hold on")],
            None,
        )
        .await;
    assert_eq!(res.status(), 302, "{}", app.log());
    assert_eq!(location(&res), page);
    let (_, html) = b.page(&page).await;
    assert!(html.contains("badge job-paused"), "{html}");
    assert!(html.contains("Resume the replay") && html.contains("Cancel the replay"));
    assert!(!html.contains("Pause the replay"), "{html}");
    assert!(
        !html.contains("http-equiv=\"refresh\""),
        "a paused job does not refresh"
    );

    let token = app.admin_token().await;
    let pause = format!("/api/v1/replays/{job}/pause");
    let resume = format!("/api/v1/replays/{job}/resume");
    let res = app
        .post_json(&pause, Auth::Bearer(&token), Csrf::Missing, &json!({}))
        .await;
    assert_eq!(res.status(), 409, "already paused");
    let res = app
        .post_json(
            &resume,
            Auth::Bearer(&token),
            Csrf::Missing,
            &json!({"reason": "INC-9 go"}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let body: serde_json::Value = res.json().await.expect("json");
    assert_eq!(body["status"], json!("running"), "{body}");
    let viewer = app.sign_in(VIEWER.0, VIEWER.1).await;
    let res = app
        .post_json(&pause, Auth::Session(&viewer), Csrf::Right, &json!({}))
        .await;
    assert_eq!(res.status(), 403);
    let res = app
        .post_json(
            "/api/v1/replays/no-such-job/pause",
            Auth::Bearer(&token),
            Csrf::Missing,
            &json!({}),
        )
        .await;
    assert_eq!(res.status(), 404);
    let res = app
        .post_json(&pause, Auth::Bearer(&token), Csrf::Missing, &json!({}))
        .await;
    assert_eq!(res.status(), 200);
    // Cancel the paused job from its page.
    let res = b
        .submit(&page, "/api/ui/cancel-job", &[("job_id", &job)], None)
        .await;
    assert_eq!(res.status(), 302);
    let j = app.store.job(&job).await.expect("job").expect("a job");
    assert_eq!((j.status, j.cancelled), (JobStatus::Cancelled, 2));

    let rows = app.audit_of("pause_job").await;
    let denied = rows.iter().filter(|r| r.outcome == "denied").count();
    assert_eq!(
        (rows.len(), denied),
        (3, 1),
        "two pauses and the viewer's attempt, denied"
    );
    assert!(rows.iter().any(|r| r.actor == OPERATOR.0
        && r.reason.as_deref() == Some("INC-9 hold on")
        && r.job_id.as_deref() == Some(job.as_str())));
    let rows = app.audit_of("resume_job").await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].reason.as_deref(), Some("INC-9 go"));
}
