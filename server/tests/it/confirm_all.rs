//! The accidental "everything" refused (issue 9 item 9; `docs/replay.md`, "Acting on
//! everything"): a replay, delete, restore or bulk label change whose filter has no field set
//! needs the typed count of the dead letters that empty filter matches now — `"confirm_all"`
//! in the JSON API (the dry run tells it), a "type N to confirm" field on the confirmation
//! page without JavaScript. Missing or wrong: 422 / the page's error, nothing changed. Right:
//! the action runs and its audit row says it was an "all" action. Filters with a field set,
//! and ids, are unchanged. Through the real binary, on SQLite and PostgreSQL.

use redrive_core::store::ALL_OUTCOME;
use redrive_core::{Normalized, Status};
use redrive_testkit::fixtures::stored_dead_letter;
use redrive_testkit::{unique, Backend};
use serde_json::{json, Value};

use crate::support::{location, Auth, Csrf, TestApp};
use crate::ui_actions::{Browser, ACT_ON_FILTER, OPERATOR};

/// Dead letters stored in each test's fresh database.
const N: i64 = 7;

/// The app over a fresh `backend` store holding [`N`] dead letters from `orders` in one
/// fresh DLQ topic; returns it and the topic.
async fn start(backend: Backend) -> (TestApp, String) {
    let topic = unique("all.DLT");
    let records: Vec<_> = (0..N)
        .map(|o| {
            stored_dead_letter(
                &topic,
                o,
                Normalized {
                    source_topic: Some("orders".into()),
                    error_class: Some("com.example.Boom".into()),
                    error_message: Some("boom".into()),
                    ..Normalized::default()
                },
            )
        })
        .collect();
    (TestApp::with_records(backend, &records, &[]).await, topic)
}

async fn post(app: &TestApp, token: &str, path: &str, body: Value) -> (u16, Value) {
    let res = app
        .post_json(path, Auth::Bearer(token), Csrf::Missing, &body)
        .await;
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

async fn statuses(app: &TestApp) -> Vec<Status> {
    let q = redrive_core::ListQuery::from_pairs([("limit", "100")]).expect("query");
    let mut all: Vec<Status> = app
        .store
        .list(&q)
        .await
        .expect("list")
        .items
        .iter()
        .map(|d| d.status)
        .collect();
    let deleted = redrive_core::ListQuery::from_pairs([("limit", "100"), ("status", "deleted")])
        .expect("query");
    all.extend(
        app.store
            .list(&deleted)
            .await
            .expect("list")
            .items
            .iter()
            .map(|d| d.status),
    );
    all
}

async fn api_refuses_an_unconfirmed_all_and_audits_a_confirmed_one(backend: Backend) {
    let (app, topic) = start(backend).await;
    let token = app.admin_token().await;

    // The dry run says a confirmation is needed, and the number.
    let (status, dry) = post(
        &app,
        &token,
        "/api/v1/replays/dry-run",
        json!({"filter": {}}),
    )
    .await;
    assert_eq!(status, 200, "{dry}");
    assert_eq!(dry["requires_confirm_all"], json!(true), "{dry}");
    assert_eq!(dry["confirm_all"], json!(N), "{dry}");
    assert_eq!(dry["total"], json!(N), "{dry}");
    let narrowed = json!({"filter": {"dlq_topic": topic}});
    let (_, dry) = post(&app, &token, "/api/v1/replays/dry-run", narrowed.clone()).await;
    assert_eq!(dry["requires_confirm_all"], json!(false), "{dry}");
    assert_eq!(dry["confirm_all"], Value::Null, "{dry}");

    // Empty in every spelling (no field, nulls, the default status): refused without the
    // count, with a wrong count, and with a count that is not a number. An empty string is
    // refused before that, as a value that sets nothing (`core::request::filter_json`).
    let empties = [
        json!({}),
        json!({"q": null}),
        json!({"source_topic": null, "unlabelled": "false"}),
    ];
    let routes = [
        ("/api/v1/replays", json!({})),
        ("/api/v1/dead-letters/delete", json!({})),
        ("/api/v1/dead-letters/restore", json!({})),
        ("/api/v1/dead-letters/labels", json!({"add": "needs-fix"})),
    ];
    for (path, extra) in &routes {
        for filter in &empties {
            for confirm in [None, Some(json!(N + 1)), Some(json!(0)), Some(json!(N - 1))] {
                let mut body = extra.clone();
                body["filter"] = filter.clone();
                if let Some(c) = &confirm {
                    body["confirm_all"] = c.clone();
                }
                let (status, answer) = post(&app, &token, path, body.clone()).await;
                assert_eq!(status, 422, "{path} {body}: {answer}");
                let msg = answer["error"].as_str().unwrap_or_default();
                assert!(
                    msg.contains(&format!("\"confirm_all\": {N}")) && msg.contains(&N.to_string()),
                    "{path} {body}: {msg}"
                );
                assert!(msg.contains("Nothing was changed") || msg.contains("nothing was changed"));
            }
        }
        let mut body = extra.clone();
        body["filter"] = json!({"status": "", "q": null});
        body["confirm_all"] = json!(N);
        let (status, answer) = post(&app, &token, path, body.clone()).await;
        assert_eq!(status, 422, "{path} {body}: {answer}");
        let msg = answer["error"].as_str().unwrap_or_default();
        assert!(msg.contains("`status` is empty"), "{path} {body}: {msg}");
        let mut body = extra.clone();
        body["filter"] = json!({});
        body["confirm_all"] = json!("seven");
        let (status, _) = post(&app, &token, path, body).await;
        assert_eq!(status, 422, "{path}: a count that is not a number");
    }
    assert!(app.store.jobs(10).await.expect("jobs").is_empty());
    assert!(statuses(&app).await.iter().all(|s| *s == Status::New));
    for action in ["replay", "delete", "restore", "label_add"] {
        assert!(app.audit_of(action).await.is_empty(), "{action}");
    }

    // Confirmed: the label change and the delete act on everything, audited as "all".
    let (status, answer) = post(
        &app,
        &token,
        "/api/v1/dead-letters/labels",
        json!({"filter": {}, "add": "needs-fix", "confirm_all": N}),
    )
    .await;
    assert_eq!(
        (status, answer["changed"].clone()),
        (200, json!(N)),
        "{answer}"
    );
    let (status, answer) = post(
        &app,
        &token,
        "/api/v1/dead-letters/delete",
        json!({"filter": {}, "confirm_all": N, "reason": "wipe the test data"}),
    )
    .await;
    assert_eq!((status, answer), (200, json!({"affected": N})));
    assert!(statuses(&app).await.iter().all(|s| *s == Status::Deleted));
    for action in ["label_add", "delete"] {
        let rows = app.audit_of(action).await;
        assert_eq!(rows.len(), 1, "{action}");
        assert_eq!(rows[0].count, N, "{action}");
        assert!(rows[0].outcome.ends_with(ALL_OUTCOME), "{:?}", rows[0]);
        let detail: Value = serde_json::from_str(rows[0].detail.as_deref().unwrap_or("{}"))
            .expect("detail is JSON");
        assert_eq!(detail["all"], json!(true), "{action}: {detail}");
    }

    // Now the empty filter matches nothing: 0 is the count to confirm (a restore over the
    // empty filter restores nothing, the deleted ones being outside it).
    let (status, answer) = post(
        &app,
        &token,
        "/api/v1/dead-letters/restore",
        json!({"filter": {}, "confirm_all": N}),
    )
    .await;
    assert_eq!(status, 422, "{answer}");
    assert!(answer["error"]
        .as_str()
        .unwrap_or_default()
        .contains("\"confirm_all\": 0"));

    // A filter with a field set needs nothing more, as before.
    let (status, answer) = post(
        &app,
        &token,
        "/api/v1/dead-letters/restore",
        json!({"filter": {"status": "deleted"}}),
    )
    .await;
    assert_eq!((status, answer), (200, json!({"affected": N})));
    let restore = app.audit_of("restore").await;
    assert_eq!(restore.len(), 1);
    assert!(
        !restore[0].outcome.contains(ALL_OUTCOME),
        "{:?}",
        restore[0]
    );
    assert_eq!(restore[0].detail, None);

    // The confirmed replay: a job over all of them, its audit row an "all" one.
    let (status, answer) = post(
        &app,
        &token,
        "/api/v1/replays",
        json!({"filter": {}, "confirm_all": N}),
    )
    .await;
    assert_eq!(status, 202, "{answer}");
    assert_eq!(answer["total"], json!(N), "{answer}");
    let replay = app.audit_of("replay").await;
    assert_eq!(replay.len(), 1);
    assert!(replay[0].outcome.ends_with(ALL_OUTCOME), "{:?}", replay[0]);
    // Ids, and a narrowed filter, need no confirmation (everything is pending now, so they
    // queue nothing, but they are accepted).
    let (status, answer) = post(&app, &token, "/api/v1/replays", narrowed).await;
    assert_eq!(status, 202, "{answer}");
    let (status, answer) = post(&app, &token, "/api/v1/replays", json!({"ids": [1]})).await;
    assert_eq!(status, 202, "{answer}");
}

#[tokio::test]
async fn api_refuses_an_unconfirmed_all_and_audits_a_confirmed_one_on_sqlite() {
    api_refuses_an_unconfirmed_all_and_audits_a_confirmed_one(Backend::Sqlite).await;
}

#[tokio::test]
async fn api_refuses_an_unconfirmed_all_and_audits_a_confirmed_one_on_postgres() {
    api_refuses_an_unconfirmed_all_and_audits_a_confirmed_one(Backend::Postgres).await;
}

/// The confirmation page without JavaScript: the warning and the "type N" field for an empty
/// filter (and not for a narrowed one); a missing or wrong number comes back to the page as
/// its error with nothing changed; the right one deletes everything.
#[tokio::test]
async fn the_confirmation_page_asks_for_the_typed_count_without_javascript() {
    let (app, topic) = start(Backend::Sqlite).await;
    app.add_user(OPERATOR.0, "operator", OPERATOR.1).await;
    let b = Browser::sign_in(&app, OPERATOR).await;

    let (status, html) = b.page("/confirm?op=delete").await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("This acts on everything."), "{html}");
    assert!(html.contains(&format!("Type {N} to confirm")), "{html}");
    assert!(html.contains("name=\"confirm_all\""), "{html}");
    let (_, narrowed) = b
        .page(&format!("/confirm?op=delete&dlq_topic={topic}"))
        .await;
    assert!(!narrowed.contains("name=\"confirm_all\""), "{narrowed}");
    assert!(!narrowed.contains("This acts on everything."), "{narrowed}");

    for (typed, says) in [
        (None, format!("Type {N} to confirm")),
        (
            Some("3"),
            format!("you typed 3, but there are {N} dead letters"),
        ),
        (Some("seven"), "is not a number".to_string()),
    ] {
        let mut fields = vec![("op", "delete"), ("filter", "")];
        if let Some(t) = typed {
            fields.push(("confirm_all", t));
        }
        let res = b
            .submit("/confirm?op=delete", ACT_ON_FILTER, &fields, None)
            .await;
        assert_eq!(res.status(), 302, "{typed:?}: {}", app.log());
        let back = location(&res);
        assert!(back.contains("__err="), "{typed:?}: {back}");
        let path = back.strip_prefix(&app.base).unwrap_or(&back).to_string();
        let (status, html) = b.page(&path).await;
        assert_eq!(status, 200, "{html}");
        assert!(html.contains("Nothing was changed"), "{typed:?}: {html}");
        assert!(html.contains(&says), "{typed:?} should say {says}: {html}");
    }
    assert!(statuses(&app).await.iter().all(|s| *s == Status::New));
    assert!(app.audit_of("delete").await.is_empty());

    let n = N.to_string();
    let res = b
        .submit(
            "/confirm?op=delete",
            ACT_ON_FILTER,
            &[("op", "delete"), ("filter", ""), ("confirm_all", &n)],
            None,
        )
        .await;
    assert_eq!(res.status(), 302, "{}", app.log());
    assert_eq!(location(&res), format!("/?done=deleted-{N}"));
    assert!(statuses(&app).await.iter().all(|s| *s == Status::Deleted));
    let audit = app.audit_of("delete").await;
    assert_eq!(audit.len(), 1);
    assert!(audit[0].outcome.ends_with(ALL_OUTCOME), "{:?}", audit[0]);
}
