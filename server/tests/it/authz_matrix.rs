//! The authorisation matrix: every state-changing route × every kind of caller, through the
//! real binary. For each cell the test builds fresh dead letters (one to replay, one to delete,
//! one deleted to restore, one pending in a running job to cancel) and fresh sessions, takes a
//! snapshot of what the route could change (their statuses, the job, the caller's session)
//! and of the audit trail, sends the request, and checks the status and that
//! - an allowed call changed what it should and wrote `ok` audit rows,
//! - a call refused for its role changed nothing and wrote exactly one `denied` row,
//! - a call without credentials or with a missing or wrong CSRF token changed nothing and
//!   wrote nothing.
//!
//! Adding a route is one line in [`routes`].

use crate::support::{location, Auth, Csrf, Session, TestApp};
use redrive_core::actions::{Actor, ReplayRequest, Role, Selection};
use redrive_core::auth::secret_hash;
use redrive_core::store::SessionLimits;
use redrive_core::{Convention, NewDeadLetter, Normalized, RawRecord};
use redrive_testkit::{unique, Backend};
use serde_json::{json, Value};

/// How a route is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// JSON API: 401 without credentials, 403 JSON refusals.
    Api,
    /// HTML form POST: 303 to the sign-in page without a session.
    Form,
}

/// What a route changes when it is allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Effect {
    /// Nothing (a dry run): no state change, no audit row.
    None,
    /// The state snapshot changes and at least one `ok` audit row is written.
    Changes,
}

/// One state-changing route.
struct Route {
    name: &'static str,
    kind: Kind,
    path: fn(&Cell) -> String,
    /// JSON body (Api) or form fields as a JSON object of strings (Form).
    body: fn(&Cell) -> Value,
    /// The least role that may call it.
    needs: Role,
    /// Status of an allowed call.
    ok: u16,
    effect: Effect,
}

/// Every state-changing route, one per line: the JSON API, and the forms of the UI (the
/// sign-out form and the actions' server functions, posted as a browser posts a form).
#[rustfmt::skip]
fn routes() -> Vec<Route> {
    use Effect::{Changes, None as NoEffect};
    use Kind::{Api, Form};
    use Role::{Operator, Viewer};
    fn r(name: &'static str, kind: Kind, path: fn(&Cell) -> String, body: fn(&Cell) -> Value, needs: Role, ok: u16, effect: Effect) -> Route {
        Route { name, kind, path, body, needs, ok, effect }
    }
    vec![
        r("replay", Api, |_| "/api/v1/replays".into(), |c| json!({"ids": [c.to_replay], "reason": "matrix"}), Operator, 202, Changes),
        r("replay by filter", Api, |_| "/api/v1/replays".into(), |c| json!({"filter": {"dlq_topic": c.topic, "status": "new"}}), Operator, 202, Changes),
        r("dry run", Api, |_| "/api/v1/replays/dry-run".into(), |c| json!({"ids": [c.to_replay]}), Viewer, 200, NoEffect),
        r("cancel job", Api, |c| format!("/api/v1/replays/{}/cancel", c.job_id), |_| json!({}), Operator, 200, Changes),
        r("delete", Api, |_| "/api/v1/dead-letters/delete".into(), |c| json!({"ids": [c.to_delete], "reason": "matrix"}), Operator, 200, Changes),
        r("restore", Api, |_| "/api/v1/dead-letters/restore".into(), |c| json!({"ids": [c.to_restore]}), Operator, 200, Changes),
        r("edit and replay", Api, |c| format!("/api/v1/dead-letters/{}/versions", c.to_replay), |_| json!({"value": {"text": "matrix edit"}, "reason": "matrix", "replay": true}), Operator, 201, Changes),
        r("retry quarantined", Api, |_| "/api/v1/quarantine/retry".into(), |c| json!({"ids": [c.quarantined]}), Operator, 200, Changes),
        r("sign out", Form, |_| "/auth/sign-out".into(), |_| json!({}), Viewer, 303, Changes),
        r("ui replay selected", Form, |_| "/api/ui/act".into(), |c| json!({"op": "replay", "ids[]": c.to_replay, "back": "/"}), Operator, 302, Changes),
        r("ui delete selected", Form, |_| "/api/ui/act".into(), |c| json!({"op": "delete", "ids[]": c.to_delete, "back": "/"}), Operator, 302, Changes),
        r("ui restore selected", Form, |_| "/api/ui/act".into(), |c| json!({"op": "restore", "ids[]": c.to_restore, "back": "/"}), Operator, 302, Changes),
        r("ui act on filter", Form, |_| "/api/ui/act-on-filter".into(), |c| json!({"op": "delete", "filter": format!("dlq_topic={}&status=new", c.topic)}), Operator, 302, Changes),
        r("ui edit", Form, |_| "/api/ui/edit".into(), |c| json!({"id": c.to_replay.to_string(), "value_as": "text", "value": "matrix form edit", "key_as": "keep", "headers_keep": "true", "op": "save"}), Operator, 302, Changes),
        r("ui cancel job", Form, |_| "/api/ui/cancel-job".into(), |c| json!({"job_id": c.job_id}), Operator, 302, Changes),
        r("pause job", Api, |c| format!("/api/v1/replays/{}/pause", c.job_id), |_| json!({"reason": "matrix"}), Operator, 200, Changes),
        r("resume job", Api, |c| format!("/api/v1/replays/{}/resume", c.paused_job_id), |_| json!({}), Operator, 200, Changes),
        r("ui pause job", Form, |_| "/api/ui/pause-job".into(), |c| json!({"job_id": c.job_id}), Operator, 302, Changes),
        r("ui resume job", Form, |_| "/api/ui/resume-job".into(), |c| json!({"job_id": c.paused_job_id}), Operator, 302, Changes),
        // Four-eyes approval: `Permission::Approve` (held by operator and admin). The cell's
        // request was made by `setup`, so every caller is "another user".
        r("approve request", Api, |c| format!("/api/v1/requests/{}/approve", c.approval_id), |_| json!({"reason": "matrix"}), Operator, 200, Changes),
        r("decline request", Api, |c| format!("/api/v1/requests/{}/decline", c.approval_id), |_| json!({"reason": "matrix"}), Operator, 200, Changes),
        r("ui approve request", Form, |_| "/api/ui/approve".into(), |c| json!({"id": c.approval_id.to_string()}), Operator, 302, Changes),
        r("ui decline request", Form, |_| "/api/ui/decline".into(), |c| json!({"id": c.approval_id.to_string(), "reason": "matrix"}), Operator, 302, Changes),
    ]
}

/// Who calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    Nobody,
    Viewer,
    Operator,
    Admin,
    /// An admin session without the CSRF token.
    MissingCsrf,
    /// An admin session with another token.
    WrongCsrf,
    ViewerToken,
    OperatorToken,
}

const EVERYONE: [Who; 8] = [
    Who::Nobody,
    Who::Viewer,
    Who::Operator,
    Who::Admin,
    Who::MissingCsrf,
    Who::WrongCsrf,
    Who::ViewerToken,
    Who::OperatorToken,
];

/// What the matrix expects of a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Allowed,
    DeniedByRole,
    Unauthenticated,
    CsrfRefused,
}

fn expect(route: &Route, who: Who) -> Expect {
    let role = match who {
        Who::Nobody => return Expect::Unauthenticated,
        Who::MissingCsrf | Who::WrongCsrf => return Expect::CsrfRefused,
        Who::Viewer | Who::ViewerToken => Role::Viewer,
        Who::Operator | Who::OperatorToken => Role::Operator,
        Who::Admin => Role::Admin,
    };
    if role.allows(route.needs) {
        Expect::Allowed
    } else {
        Expect::DeniedByRole
    }
}

/// Fresh data for one cell.
struct Cell {
    topic: String,
    to_replay: i64,
    to_delete: i64,
    to_restore: i64,
    pending: i64,
    job_id: String,
    /// A job paused by the setup (its one row pending), to resume.
    paused_job_id: String,
    /// A quarantine row (with its payload, so a retry can store it).
    quarantined: i64,
    /// A pending approval request of `setup`'s (a delete of a sixth dead letter).
    approval_id: i64,
}

/// What a route may change: the cell's dead letters' statuses, its job, whether its record is
/// still in quarantine, the caller's session.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Snapshot {
    statuses: Vec<(i64, String)>,
    job: String,
    paused_job: String,
    in_quarantine: bool,
    session_alive: Option<bool>,
    /// The latest edited version of `to_replay` (an edit saves a new one).
    edit_version: Option<i32>,
    /// The approval request's status.
    approval: String,
}

fn record(topic: &str, offset: i64) -> NewDeadLetter {
    NewDeadLetter {
        record: RawRecord {
            dlq_topic: topic.into(),
            dlq_partition: 0,
            dlq_offset: offset,
            timestamp_ms: Some(1_796_104_800_000),
            key: Some(b"k".to_vec()),
            value: Some(b"v".to_vec()),
            headers: vec![],
        },
        convention: Convention::Unknown,
        normalized: Normalized {
            source_topic: Some("orders".into()),
            ..Normalized::default()
        },
        fingerprint: "0123456789abcdef".into(),
        dead_lettered_at_ms: 1_796_104_800_000 + offset,
        ingested_at_ms: 1_796_104_800_000 + offset,
    }
}

async fn new_cell(app: &TestApp) -> Cell {
    let topic = unique("matrix.DLT");
    let batch: Vec<NewDeadLetter> = (0..6).map(|o| record(&topic, o)).collect();
    app.store.insert_batch(&batch).await.expect("insert");
    let q = redrive_core::ListQuery::from_pairs([("dlq_topic", topic.as_str()), ("limit", "10")])
        .expect("query");
    let mut page = app.store.list(&q).await.expect("list").items;
    page.sort_by_key(|d| d.dlq_offset);
    let ids: Vec<i64> = page.iter().map(|d| d.id).collect();
    let setup = Actor {
        user: "setup".into(),
        role: Role::Admin,
        via_token: None,
        client_ip: None,
        user_agent: None,
    };
    app.store
        .delete(&setup, &Selection::Ids(vec![ids[2]]), None)
        .await
        .expect("delete");
    let job = app
        .store
        .request_replay(
            &setup,
            &ReplayRequest {
                selection: Selection::Ids(vec![ids[3]]),
                target_topic: None,
                rate_per_sec: None,
                reason: None,
                options: Default::default(),
            },
        )
        .await
        .expect("replay");
    let paused = app
        .store
        .request_replay(
            &setup,
            &ReplayRequest {
                selection: Selection::Ids(vec![ids[4]]),
                target_topic: None,
                rate_per_sec: None,
                reason: None,
                options: Default::default(),
            },
        )
        .await
        .expect("replay");
    app.store
        .pause_job(&setup, &paused.id, Some("matrix setup"))
        .await
        .expect("pause");
    let mut held = record(&topic, 100).record;
    held.dlq_partition = 1;
    app.store
        .quarantine_record(&held, "matrix: refused once", true, 1_796_104_800_000)
        .await
        .expect("quarantine");
    let quarantined = app
        .store
        .list_quarantine(500, None)
        .await
        .expect("list quarantine")
        .into_iter()
        .find(|q| q.dlq_topic == topic)
        .expect("the quarantined record")
        .id;
    // Approval on for this one request (the app itself runs without `[approval]`).
    let policy = redrive_core::approval::ApprovalPolicy::new(
        &redrive_core::approval::ApprovalConfig {
            min_records: 1,
            ..Default::default()
        },
        &Default::default(),
    )
    .expect("policy");
    let approval_id = app
        .store
        .submit_for_approval(
            &policy,
            &setup,
            redrive_core::approval::ActionKind::Delete,
            &ReplayRequest {
                selection: Selection::Ids(vec![ids[5]]),
                target_topic: None,
                rate_per_sec: None,
                reason: Some("matrix".into()),
                options: Default::default(),
            },
        )
        .await
        .expect("submit")
        .expect("a pending request")
        .id;
    Cell {
        approval_id,
        quarantined,
        topic,
        to_replay: ids[0],
        to_delete: ids[1],
        to_restore: ids[2],
        pending: ids[3],
        job_id: job.id,
        paused_job_id: paused.id,
    }
}

async fn snapshot(app: &TestApp, cell: &Cell, session: Option<&Session>) -> Snapshot {
    let mut statuses = Vec::new();
    for id in [
        cell.to_replay,
        cell.to_delete,
        cell.to_restore,
        cell.pending,
    ] {
        let d = app.store.get(id).await.expect("get").expect("exists");
        statuses.push((id, d.summary.status.as_str().to_string()));
    }
    let mut jobs = Vec::new();
    for id in [&cell.job_id, &cell.paused_job_id] {
        let j = app.store.job(id).await.expect("job").expect("exists");
        jobs.push(j.status.as_str().to_string());
    }
    let [job, paused_job]: [String; 2] = jobs.try_into().expect("two jobs");
    let session_alive = match session {
        Some(s) => {
            let token = s.cookie.trim_start_matches("redrive_session=");
            let limits = SessionLimits {
                idle_ms: i64::MAX / 4,
                absolute_ms: i64::MAX / 4,
            };
            let now = chrono::Utc::now().timestamp_millis();
            Some(
                app.store
                    .session(&secret_hash(token), now, limits)
                    .await
                    .expect("session")
                    .is_some(),
            )
        }
        None => None,
    };
    let in_quarantine = app
        .store
        .quarantined(cell.quarantined)
        .await
        .expect("quarantined")
        .is_some();
    let edit_version = app
        .store
        .latest_version(cell.to_replay)
        .await
        .expect("latest version");
    let approval = app
        .store
        .approval_request(cell.approval_id)
        .await
        .expect("approval request")
        .expect("exists")
        .status
        .as_str()
        .to_string();
    Snapshot {
        approval,
        statuses,
        job,
        paused_job,
        in_quarantine,
        session_alive,
        edit_version,
    }
}

async fn matrix(backend: Backend) {
    let app = TestApp::start_on(
        backend,
        &[
            ("REDRIVE_ADMIN_USER", "admin"),
            ("REDRIVE_ADMIN_PASSWORD", "admin password"),
            // The matrix signs in a few dozen times a minute.
            ("REDRIVE_SIGN_IN_PER_USER_PER_MIN", "0"),
            ("REDRIVE_SIGN_IN_PER_IP_PER_MIN", "0"),
        ],
    )
    .await;
    app.add_user("viewer", "viewer", "viewer password").await;
    app.add_user("operator", "operator", "operator password")
        .await;
    let viewer_token = app.create_token("viewer").await;
    let operator_token = app.create_token("operator").await;

    let mut failures = Vec::new();
    for route in routes() {
        for who in EVERYONE {
            if route.kind == Kind::Form && matches!(who, Who::ViewerToken | Who::OperatorToken) {
                continue; // forms are a browser's, and a token has no session to act on
            }
            let cell = new_cell(&app).await;
            let session = match who {
                Who::Viewer => Some(app.sign_in("viewer", "viewer password").await),
                Who::Operator => Some(app.sign_in("operator", "operator password").await),
                Who::Admin | Who::MissingCsrf | Who::WrongCsrf => {
                    Some(app.sign_in("admin", "admin password").await)
                }
                _ => None,
            };
            let (auth, csrf) = match (who, &session) {
                (Who::ViewerToken, _) => (Auth::Bearer(&viewer_token), Csrf::Missing),
                (Who::OperatorToken, _) => (Auth::Bearer(&operator_token), Csrf::Missing),
                (Who::MissingCsrf, Some(s)) => (Auth::Session(s), Csrf::Missing),
                (Who::WrongCsrf, Some(s)) => (Auth::Session(s), Csrf::Wrong),
                (_, Some(s)) => (Auth::Session(s), Csrf::Right),
                (_, None) => (Auth::None, Csrf::Missing),
            };
            let audit_before = app.audit().await.len();
            let before = snapshot(&app, &cell, session.as_ref()).await;

            let path = (route.path)(&cell);
            let body = (route.body)(&cell);
            let res = match route.kind {
                Kind::Api => app.post_json(&path, auth, csrf, &body).await,
                Kind::Form => {
                    let fields: Vec<(String, String)> = body
                        .as_object()
                        .map(|o| {
                            o.iter()
                                .map(|(k, v)| {
                                    let v = match v {
                                        Value::String(s) => s.clone(),
                                        other => other.to_string(),
                                    };
                                    (k.clone(), v)
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    let fields: Vec<(&str, &str)> = fields
                        .iter()
                        .map(|(k, v)| (k.as_str(), v.as_str()))
                        .collect();
                    app.post_form(&path, auth, csrf, &fields).await
                }
            };
            let status = res.status().as_u16();
            let loc = location(&res);
            let text = res.text().await.unwrap_or_default();
            let after = snapshot(&app, &cell, session.as_ref()).await;
            let new_rows: Vec<(String, String)> = app.audit().await[audit_before..]
                .iter()
                .map(|a| (a.action.clone(), a.outcome.clone()))
                .collect();

            let expected = expect(&route, who);
            let want_status = match (expected, route.kind) {
                (Expect::Allowed, _) => route.ok,
                (Expect::Unauthenticated, Kind::Api) => 401,
                (Expect::Unauthenticated, Kind::Form) => 303,
                (Expect::DeniedByRole | Expect::CsrfRefused, _) => 403,
            };
            let mut problems = Vec::new();
            if status != want_status {
                problems.push(format!("status {status}, expected {want_status}: {text}"));
            }
            if expected == Expect::Unauthenticated
                && route.kind == Kind::Form
                && !loc.starts_with("/sign-in")
            {
                problems.push(format!("redirected to `{loc}`, expected the sign-in page"));
            }
            let changed = before != after;
            match (expected, route.effect) {
                (Expect::Allowed, Effect::Changes) => {
                    if !changed {
                        problems.push(format!("allowed but nothing changed: {after:?}"));
                    }
                    if new_rows.is_empty() || !new_rows.iter().all(|(_, o)| o.starts_with("ok")) {
                        problems.push(format!("audit rows {new_rows:?}, expected `ok` ones"));
                    }
                }
                (Expect::Allowed, Effect::None)
                | (Expect::Unauthenticated, _)
                | (Expect::CsrfRefused, _) => {
                    if changed {
                        problems.push(format!("state changed: {before:?} -> {after:?}"));
                    }
                    if !new_rows.is_empty() {
                        problems.push(format!("audit rows written: {new_rows:?}"));
                    }
                }
                (Expect::DeniedByRole, _) => {
                    if changed {
                        problems.push(format!("state changed: {before:?} -> {after:?}"));
                    }
                    if new_rows.len() != 1 || new_rows[0].1 != "denied" {
                        problems.push(format!("audit rows {new_rows:?}, expected one `denied`"));
                    }
                }
            }
            if !problems.is_empty() {
                failures.push(format!("{} × {who:?}: {}", route.name, problems.join("; ")));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} cells wrong:\n{}\n--- log ---\n{}",
        failures.len(),
        failures.join("\n"),
        app.log()
    );
}

#[tokio::test]
async fn every_state_changing_route_by_every_caller_on_sqlite() {
    matrix(Backend::Sqlite).await;
}

#[tokio::test]
async fn every_state_changing_route_by_every_caller_on_postgres() {
    matrix(Backend::Postgres).await;
}
