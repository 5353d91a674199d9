//! Four-eyes approval and required reasons (`docs/replay.md`, "Four-eyes approval and
//! required reasons"), through the real binary on SQLite and PostgreSQL, with `[approval]` and
//! `[reasons]` in its `redrive.toml`: an action that needs approval answers 202 and writes
//! nothing but the request and its audit row (no outbox row, no status change); another user
//! approves it and it runs as asked (published once each on the real broker, with the
//! idempotency header, over exactly the records the requester saw) or declines it (nothing
//! written); the requester cannot approve their own request; an expired one cannot be
//! approved; a small action outside the chosen topics runs directly; a reason missing or not
//! matching the pattern is a 422 (API, edit path and UI form).

use std::time::Duration;

use redrive_core::model::{Header, NewDeadLetter};
use redrive_core::replay::{HEADER_DEAD_LETTER_ID, HEADER_IDEMPOTENCY_KEY};
use redrive_core::Status;
use redrive_testkit::{consume, create_topic, kafka_brokers, unique, wait_for, Backend};
use serde_json::{json, Value};

use crate::support::replay::{dead_letter, header_text, headers_of, record_count};
use crate::support::{location, Auth, Csrf, TestApp};
use crate::ui_actions::{Browser, ACT};

/// The reason pattern of every app here.
const PATTERN: &str = r"^[A-Z]+-\d+";

/// An app whose `[approval]` gates actions over 3 or more dead letters and any action on
/// `gated` (a DLQ topic), requests expiring after `expire_ms`; reasons required, matching
/// [`PATTERN`]. Users `alice` and `bob` (operators, each with a token); the relay publishes
/// to the real broker.
struct Setup {
    app: TestApp,
    alice: String,
    bob: String,
    _config: tempfile::TempDir,
}

async fn setup(backend: Backend, gated: &str, expire_ms: u64) -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("redrive.toml");
    std::fs::write(
        &path,
        format!(
            "[approval]\nmin_records = 3\ndlq_topics = [\"{gated}\"]\nexpire_after_ms = \
             {expire_ms}\n\n[reasons]\nrequired = true\npattern = '{PATTERN}'\n"
        ),
    )
    .expect("write config");
    let path = path.display().to_string();
    let brokers = kafka_brokers();
    let app = TestApp::start_on(
        backend,
        &[
            ("REDRIVE_CONFIG", path.as_str()),
            ("REDRIVE_KAFKA_BROKERS", brokers.as_str()),
        ],
    )
    .await;
    app.add_user("alice", "operator", "alice password").await;
    app.add_user("bob", "operator", "bob password").await;
    let alice = app.create_token("alice").await;
    let bob = app.create_token("bob").await;
    Setup {
        app,
        alice,
        bob,
        _config: dir,
    }
}

/// `n` dead letters in `dlq_topic` from offset `from`, whose source topic is `source`.
fn records(dlq_topic: &str, source: &str, from: i64, n: i64) -> Vec<NewDeadLetter> {
    (from..from + n)
        .map(|o| {
            let mut d = dead_letter(
                o,
                Some(format!("key-{o}").into_bytes()),
                Some(format!("value-{o}").into_bytes()),
                vec![
                    Header {
                        name: "kafka_dlt-original-topic".into(),
                        value: Some(source.as_bytes().to_vec()),
                    },
                    Header {
                        name: "kafka_dlt-exception-fqcn".into(),
                        value: Some(b"java.lang.IllegalStateException".to_vec()),
                    },
                ],
            );
            d.record.dlq_topic = dlq_topic.to_string();
            d
        })
        .collect()
}

/// The ids of `dlq_topic`'s dead letters (any status but deleted), oldest first.
async fn ids_in(app: &TestApp, dlq_topic: &str) -> Vec<i64> {
    let q = redrive_core::ListQuery::from_pairs([("dlq_topic", dlq_topic), ("limit", "500")])
        .expect("query");
    let mut ids: Vec<i64> = app
        .store
        .list(&q)
        .await
        .expect("list")
        .items
        .iter()
        .map(|d| d.id)
        .collect();
    ids.sort_unstable();
    ids
}

async fn status_of(app: &TestApp, id: i64) -> Status {
    app.store
        .get(id)
        .await
        .expect("get")
        .expect("dead letter")
        .summary
        .status
}

async fn json_of(res: reqwest::Response) -> (u16, Value) {
    let status = res.status().as_u16();
    let text = res.text().await.expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

async fn post(app: &TestApp, token: &str, path: &str, body: Value) -> (u16, Value) {
    json_of(
        app.post_json(path, Auth::Bearer(token), Csrf::Missing, &body)
            .await,
    )
    .await
}

/// Nothing was written for a pending, declined or refused action: no outbox row, no job.
async fn assert_nothing_queued(app: &TestApp, what: &str) {
    assert_eq!(app.store.outbox_rows().await.expect("outbox"), 0, "{what}");
    assert!(
        app.store.jobs(10).await.expect("jobs").is_empty(),
        "{what}: no job"
    );
}

/// A request (replay over a filter, gated by its size) approved by another user is
/// published once per record, with the idempotency header, over exactly the records that
/// matched when it was asked for; the audit shows the request, the approval, and the replay
/// as alice's with bob as approver.
#[tokio::test]
async fn a_request_approved_by_another_user_is_published_once_each() {
    for backend in Backend::ALL {
        let dlq = unique("fe-orders.DLT");
        let source = unique("fe-orders");
        create_topic(&source, 1, &[]).await.expect("topic");
        let s = setup(backend, &unique("fe-other.DLT"), 86_400_000).await;
        let app = &s.app;
        app.store
            .insert_batch(&records(&dlq, &source, 0, 3))
            .await
            .expect("insert");
        let asked = ids_in(app, &dlq).await;

        let (code, pending) = post(
            app,
            &s.alice,
            "/api/v1/replays",
            json!({"filter": {"dlq_topic": dlq}, "reason": "OPS-7 fixed the consumer"}),
        )
        .await;
        assert_eq!(code, 202, "{backend:?}: {pending}\n{}", app.log());
        assert_eq!(pending["status"], "pending_approval", "{pending}");
        assert_eq!(pending["count"], 3, "{pending}");
        let id = pending["request_id"].as_i64().expect("request_id");
        assert_nothing_queued(app, "pending").await;
        for i in &asked {
            assert_eq!(status_of(app, *i).await, Status::New);
        }
        let requested = app.audit_of("approval_request").await;
        assert_eq!(requested.len(), 1, "{requested:?}");
        assert_eq!(requested[0].actor, "alice");
        assert!(app.audit_of("replay").await.is_empty());

        // A record arriving after the request is not swept in.
        app.store
            .insert_batch(&records(&dlq, &source, 3, 1))
            .await
            .expect("insert");
        let late = *ids_in(app, &dlq).await.last().expect("late id");
        let (code, r) = json_of(
            app.get(&format!("/api/v1/requests/{id}"), Auth::Bearer(&s.bob))
                .await,
        )
        .await;
        assert_eq!(code, 200, "{r}");
        assert_eq!(
            (r["count"].as_i64(), r["count_now"].as_i64()),
            (Some(3), Some(3)),
            "{r}"
        );
        assert_eq!(r["status"], "pending");

        let (code, done) = post(
            app,
            &s.bob,
            &format!("/api/v1/requests/{id}/approve"),
            json!({"reason": "looks right"}),
        )
        .await;
        assert_eq!(code, 200, "{backend:?}: {done}\n{}", app.log());
        assert_eq!(done["affected"], 3, "{done}");
        assert_eq!(done["request"]["status"], "approved");
        assert_eq!(done["request"]["decided_by"], "bob");
        let job = done["job_id"].as_str().expect("job").to_string();
        wait_for("job finished", Duration::from_secs(60), || async {
            let j = app.store.job(&job).await.ok().flatten()?;
            (j.status == redrive_core::actions::JobStatus::Finished).then_some(())
        })
        .await
        .expect("the job finishes");

        let got = consume(&source, 3).await.expect("the replayed records");
        assert_eq!(record_count(&source, 1), 3, "{backend:?}: each once");
        let mut published: Vec<i64> = got
            .iter()
            .map(|m| {
                let hs = headers_of(m);
                assert_eq!(header_text(&hs, HEADER_IDEMPOTENCY_KEY).len(), 36);
                header_text(&hs, HEADER_DEAD_LETTER_ID)
                    .parse()
                    .expect("an id")
            })
            .collect();
        published.sort_unstable();
        assert_eq!(published, asked, "{backend:?}: exactly what alice saw");
        assert_eq!(status_of(app, late).await, Status::New, "the late one");

        let replay = app.audit_of("replay").await;
        assert_eq!(replay.len(), 1, "{replay:?}");
        assert_eq!(replay[0].actor, "alice");
        assert_eq!(replay[0].count, 3);
        let detail: Value =
            serde_json::from_str(replay[0].detail.as_deref().expect("detail")).expect("JSON");
        assert_eq!(detail["approval"]["approved_by"], "bob", "{detail}");
        assert_eq!(detail["approval"]["request_id"], id, "{detail}");
        let approved = app.audit_of("approval_approve").await;
        assert_eq!(approved.len(), 1, "{approved:?}");
        assert_eq!(approved[0].actor, "bob");
        assert_eq!(approved[0].job_id.as_deref(), Some(job.as_str()));

        // Decided: it cannot be approved again.
        let (code, again) = post(
            app,
            &s.bob,
            &format!("/api/v1/requests/{id}/approve"),
            json!({}),
        )
        .await;
        assert_eq!(code, 409, "{again}");
    }
}

/// The requester cannot approve (or decline) their own request: 403 with a clear message,
/// audited `denied`, nothing written. Only they may cancel it.
/// Approval acts with the requester's power as it is when approved: a requester whose role
/// was changed to one without the action's permission (or who was disabled) leaves a request
/// that cannot be approved (409 with the reason), only declined; nothing is written.
#[tokio::test]
async fn a_request_whose_requester_lost_the_permission_cannot_be_approved() {
    for backend in Backend::ALL {
        let gated = unique("fe-payments.DLT");
        let s = setup(backend, &gated, 86_400_000).await;
        let app = &s.app;
        app.store
            .insert_batch(&records(&gated, "payments", 0, 1))
            .await
            .expect("insert");
        let ids = ids_in(app, &gated).await;
        let (code, pending) = post(
            app,
            &s.alice,
            "/api/v1/replays",
            json!({"ids": ids, "reason": "OPS-9 after fix"}),
        )
        .await;
        assert_eq!(code, 202, "{backend:?}: {pending}");
        let id = pending["request_id"].as_i64().expect("request_id");
        let demoted = app
            .store
            .set_user_role_audited(
                "alice",
                redrive_core::actions::Role::Viewer,
                1,
                &redrive_core::actions::NewAuditEntry {
                    actor: "admin".into(),
                    action: "user_set_role".into(),
                    outcome: "ok".into(),
                    ..Default::default()
                },
            )
            .await
            .expect("set role");
        assert!(demoted.is_some());
        let (code, refused) = post(
            app,
            &s.bob,
            &format!("/api/v1/requests/{id}/approve"),
            json!({"reason": "OPS-9 ok"}),
        )
        .await;
        assert_eq!(code, 409, "{backend:?}: {refused}");
        let msg = refused["error"].as_str().expect("error");
        assert!(msg.contains("`alice`") && msg.contains("`replay`"), "{msg}");
        assert_eq!(status_of(app, ids[0]).await, Status::New);
        assert_nothing_queued(app, "approval of a demoted requester").await;
        // It can still be declined.
        let (code, declined) = post(
            app,
            &s.bob,
            &format!("/api/v1/requests/{id}/decline"),
            json!({"reason": "OPS-9 alice is no longer on call"}),
        )
        .await;
        assert_eq!(code, 200, "{backend:?}: {declined}");
    }
}

#[tokio::test]
async fn the_requester_cannot_approve_their_own_request() {
    for backend in Backend::ALL {
        let gated = unique("fe-payments.DLT");
        let s = setup(backend, &gated, 86_400_000).await;
        let app = &s.app;
        app.store
            .insert_batch(&records(&gated, "payments", 0, 1))
            .await
            .expect("insert");
        let ids = ids_in(app, &gated).await;
        let (code, pending) = post(
            app,
            &s.alice,
            "/api/v1/dead-letters/delete",
            json!({"ids": ids, "reason": "OPS-8 duplicate"}),
        )
        .await;
        assert_eq!(code, 202, "{backend:?}: {pending}");
        let id = pending["request_id"].as_i64().expect("request_id");
        assert!(
            pending["why"].as_str().expect("why").contains(&gated),
            "{pending}"
        );

        for verb in ["approve", "decline"] {
            let (code, refused) = post(
                app,
                &s.alice,
                &format!("/api/v1/requests/{id}/{verb}"),
                json!({"reason": "OPS-8 me"}),
            )
            .await;
            assert_eq!(code, 403, "{backend:?} {verb}: {refused}");
            let msg = refused["error"].as_str().expect("error");
            assert!(msg.contains("yourself"), "{msg}");
        }
        assert_eq!(status_of(app, ids[0]).await, Status::New);
        assert_nothing_queued(app, "own approval refused").await;
        let denied: Vec<_> = app
            .audit()
            .await
            .into_iter()
            .filter(|a| a.outcome == "denied")
            .collect();
        assert_eq!(denied.len(), 2, "{denied:?}");
        assert!(app.audit_of("delete").await.is_empty());

        // bob may not cancel alice's request; alice may.
        let (code, _) = post(
            app,
            &s.bob,
            &format!("/api/v1/requests/{id}/cancel"),
            json!({}),
        )
        .await;
        assert_eq!(code, 403);
        let (code, cancelled) = post(
            app,
            &s.alice,
            &format!("/api/v1/requests/{id}/cancel"),
            json!({}),
        )
        .await;
        assert_eq!(code, 200, "{cancelled}");
        assert_eq!(cancelled["status"], "cancelled");
        let (code, _) = post(
            app,
            &s.bob,
            &format!("/api/v1/requests/{id}/approve"),
            json!({}),
        )
        .await;
        assert_eq!(code, 409, "a cancelled request cannot be approved");
        assert_eq!(status_of(app, ids[0]).await, Status::New);
    }
}

/// A declined request writes nothing to the outbox and changes no dead letter; the decline
/// needs a reason and is audited.
#[tokio::test]
async fn a_declined_request_writes_nothing() {
    for backend in Backend::ALL {
        let gated = unique("fe-payments.DLT");
        let s = setup(backend, &gated, 86_400_000).await;
        let app = &s.app;
        app.store
            .insert_batch(&records(&gated, "payments", 0, 2))
            .await
            .expect("insert");
        let ids = ids_in(app, &gated).await;
        let (code, pending) = post(
            app,
            &s.alice,
            "/api/v1/replays",
            json!({"ids": ids, "reason": "OPS-9 retry", "target_topic": "payments-retry"}),
        )
        .await;
        assert_eq!(code, 202, "{backend:?}: {pending}");
        let id = pending["request_id"].as_i64().expect("request_id");

        let (code, r) = post(
            app,
            &s.bob,
            &format!("/api/v1/requests/{id}/decline"),
            json!({}),
        )
        .await;
        assert_eq!(code, 422, "a decline needs a reason: {r}");
        let (code, r) = post(
            app,
            &s.bob,
            &format!("/api/v1/requests/{id}/decline"),
            json!({"reason": "not before the fix is deployed"}),
        )
        .await;
        assert_eq!(code, 200, "{r}");
        assert_eq!(
            (r["status"].as_str(), r["decided_by"].as_str()),
            (Some("declined"), Some("bob"))
        );
        assert_nothing_queued(app, "declined").await;
        for i in &ids {
            assert_eq!(status_of(app, *i).await, Status::New);
        }
        let declined = app.audit_of("approval_decline").await;
        assert_eq!(declined.len(), 1, "{declined:?}");
        assert_eq!(declined[0].actor, "bob");
        assert!(app.audit_of("replay").await.is_empty());
        let (code, _) = post(
            app,
            &s.bob,
            &format!("/api/v1/requests/{id}/approve"),
            json!({}),
        )
        .await;
        assert_eq!(code, 409);
        assert_nothing_queued(app, "approve after decline").await;
    }
}

/// An expired request cannot be approved (409) and writes nothing; it is listed `expired`,
/// with an audit row.
#[tokio::test]
async fn an_expired_request_cannot_be_approved() {
    for backend in Backend::ALL {
        let gated = unique("fe-payments.DLT");
        let s = setup(backend, &gated, 1_000).await;
        let app = &s.app;
        app.store
            .insert_batch(&records(&gated, "payments", 0, 1))
            .await
            .expect("insert");
        let ids = ids_in(app, &gated).await;
        let (code, pending) = post(
            app,
            &s.alice,
            "/api/v1/replays",
            json!({"ids": ids, "reason": "OPS-10 retry"}),
        )
        .await;
        assert_eq!(code, 202, "{backend:?}: {pending}");
        let id = pending["request_id"].as_i64().expect("request_id");
        // Past its expiry (1 s after it was made).
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        let (code, r) = post(
            app,
            &s.bob,
            &format!("/api/v1/requests/{id}/approve"),
            json!({}),
        )
        .await;
        assert_eq!(code, 409, "{backend:?}: {r}");
        assert!(
            r["error"].as_str().expect("error").contains("expired"),
            "{r}"
        );
        assert_nothing_queued(app, "expired").await;
        assert_eq!(status_of(app, ids[0]).await, Status::New);
        let (_, list) = json_of(
            app.get("/api/v1/requests?status=expired", Auth::Bearer(&s.bob))
                .await,
        )
        .await;
        assert_eq!(list["items"].as_array().map(Vec::len), Some(1), "{list}");
        assert_eq!(app.audit_of("approval_expire").await.len(), 1);
    }
}

/// A small action (below `min_records`) outside the chosen topics runs directly, as without
/// approval; a reason missing or not matching the pattern is a 422 naming it, everywhere.
#[tokio::test]
async fn small_actions_run_directly_and_reasons_are_checked() {
    for backend in Backend::ALL {
        let plain = unique("fe-plain.DLT");
        let s = setup(backend, &unique("fe-payments.DLT"), 86_400_000).await;
        let app = &s.app;
        app.store
            .insert_batch(&records(&plain, "plain", 0, 2))
            .await
            .expect("insert");
        let ids = ids_in(app, &plain).await;

        for body in [
            json!({"ids": [ids[0]]}),
            json!({"ids": [ids[0]], "reason": "   "}),
            json!({"ids": [ids[0]], "reason": "because"}),
        ] {
            for path in ["/api/v1/dead-letters/delete", "/api/v1/replays"] {
                let (code, r) = post(app, &s.alice, path, body.clone()).await;
                assert_eq!(code, 422, "{backend:?} {path} {body}: {r}");
                let msg = r["error"].as_str().expect("error");
                assert!(msg.contains(PATTERN), "{msg}");
            }
        }
        // The edit-and-replay path too.
        let (code, r) = post(
            app,
            &s.alice,
            &format!("/api/v1/dead-letters/{}/versions", ids[1]),
            json!({"value": {"text": "fixed"}, "reason": "fixed it", "replay": true}),
        )
        .await;
        assert_eq!(code, 422, "{r}");
        assert!(r["error"].as_str().expect("error").contains(PATTERN), "{r}");
        assert_nothing_queued(app, "refused reasons").await;
        assert_eq!(status_of(app, ids[0]).await, Status::New);

        // A matching reason on a small action outside the gated topics: carried out now.
        let (code, r) = post(
            app,
            &s.alice,
            "/api/v1/dead-letters/delete",
            json!({"ids": [ids[0]], "reason": "OPS-11 duplicate"}),
        )
        .await;
        assert_eq!((code, r["affected"].as_i64()), (200, Some(1)), "{r}");
        assert_eq!(status_of(app, ids[0]).await, Status::Deleted);
        let (code, r) = post(
            app,
            &s.alice,
            "/api/v1/replays",
            json!({"ids": [ids[1]], "reason": "OPS-12 retry"}),
        )
        .await;
        assert_eq!(code, 202, "{r}");
        assert!(
            r["job_id"].is_string() && r.get("request_id").is_none(),
            "{r}"
        );
        assert!(app.audit_of("approval_request").await.is_empty());
    }
}

/// The UI: an action form that needs approval lands on `/approvals` with a notice, writes
/// nothing; the page lists it; another user's Approve form (CSRF, no JavaScript) runs it. A
/// form without a valid reason comes back with the message naming the pattern.
#[tokio::test]
async fn the_ui_asks_for_approval_and_approves_with_plain_forms() {
    let gated = unique("fe-payments.DLT");
    let s = setup(Backend::Sqlite, &gated, 86_400_000).await;
    let app = &s.app;
    app.store
        .insert_batch(&records(&gated, "payments", 0, 1))
        .await
        .expect("insert");
    let ids = ids_in(app, &gated).await;
    let id_text = ids[0].to_string();
    let alice = Browser::sign_in(app, ("alice", "alice password")).await;
    let bob = Browser::sign_in(app, ("bob", "bob password")).await;
    let list = format!("/?dlq_topic={gated}");

    let res = alice
        .submit(
            &list,
            ACT,
            &[
                ("op", "delete"),
                ("ids[]", &id_text),
                ("reason", "no ticket"),
                ("back", &list),
            ],
            None,
        )
        .await;
    assert_eq!(res.status().as_u16(), 302);
    let back = location(&res);
    assert!(back.contains("__err="), "refused reason: {back}");
    let (_, html) = alice
        .page(back.strip_prefix(&app.base).unwrap_or(&back))
        .await;
    assert!(
        html.contains("does not match the required pattern"),
        "{html}"
    );
    assert_eq!(status_of(app, ids[0]).await, Status::New);

    let res = alice
        .submit(
            &list,
            ACT,
            &[
                ("op", "delete"),
                ("ids[]", &id_text),
                ("reason", "OPS-13 dup"),
                ("back", &list),
            ],
            None,
        )
        .await;
    assert_eq!(res.status().as_u16(), 302);
    let loc = location(&res);
    assert!(loc.starts_with("/approvals?requested="), "{loc}");
    assert_eq!(
        status_of(app, ids[0]).await,
        Status::New,
        "nothing done yet"
    );
    let (code, notice) = alice.page(&loc).await;
    assert_eq!(code, 200);
    assert!(notice.contains("needs approval"), "{notice}");
    let request = app
        .store
        .approval_requests(None, 10)
        .await
        .expect("requests")
        .pop()
        .expect("one request");

    let (_, page) = bob.page("/approvals").await;
    assert!(page.contains(&format!("request-{}", request.id)), "{page}");
    assert!(page.contains("Approve and run"), "bob may approve");
    let (_, mine) = alice.page("/approvals").await;
    assert!(
        !mine.contains("Approve and run"),
        "alice may not approve her own"
    );
    assert!(mine.contains("Cancel my request"));

    let rid = request.id.to_string();
    let res = alice
        .submit("/approvals", "/api/ui/approve", &[("id", &rid)], None)
        .await;
    assert_eq!(res.status().as_u16(), 403);
    assert_eq!(status_of(app, ids[0]).await, Status::New);
    let res = bob
        .submit("/approvals", "/api/ui/approve", &[("id", &rid)], None)
        .await;
    assert_eq!(res.status().as_u16(), 302, "{}", app.log());
    assert!(location(&res).starts_with("/approvals?decided="));
    assert_eq!(status_of(app, ids[0]).await, Status::Deleted);
}
