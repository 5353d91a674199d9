//! The authorisation matrix: every state-changing route × every kind of caller, through the
//! real binary. The callers are the built-in roles (sessions and tokens), a custom role per
//! permission holding exactly that one (`[roles.only-PERMISSION]`), and the CSRF and
//! no-credentials cases; each route names the permissions it needs. [`topic_scopes`] checks
//! that a role limited to some DLQ topics reads and acts on those only.
//!
//! For each cell the test builds fresh dead letters (one to replay, one to delete, one deleted
//! to restore, one pending in a running job to cancel) and fresh sessions, takes a snapshot of
//! what the route could change (their statuses, the job, labels and notes, the caller's
//! session) and of the audit trail, sends the request, and checks the status and that
//! - an allowed call changed what it should and wrote `ok` audit rows,
//! - a call refused for its role changed nothing and wrote exactly one `denied` row,
//! - a call without credentials or with a missing or wrong CSRF token changed nothing and
//!   wrote nothing.
//!
//! Adding a route is one line in [`routes`]. [`the_matrix_covers_every_state_changing_api_operation`]
//! holds the matrix to the OpenAPI document (`server/src/openapi/`): every `/api/v1`
//! operation other than a GET is in the matrix with the permission the document names, or in
//! [`NOT_IN_MATRIX`] with the reason and the test that covers it.

use crate::support::{location, Auth, Csrf, Session, TestApp};
use redrive_core::actions::{Actor, ReplayRequest, Role, Selection};
use redrive_core::auth::secret_hash;
use redrive_core::labels::{LabelOp, Target};
use redrive_core::permission::Permission;
use redrive_core::store::{RuleSetOrigin, SessionLimits};
use redrive_core::{Convention, NewDeadLetter, Normalized, RawRecord};
use redrive_testkit::{unique, Backend};
use serde_json::{json, Value};

/// How a route is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// JSON API by POST: 401 without credentials, 403 JSON refusals.
    Api,
    /// JSON API by PUT (a rule set, a note): as `Api`.
    Put,
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
    /// The permissions a caller must hold (all of them).
    needs: &'static [Permission],
    /// Status of an allowed call.
    ok: u16,
    effect: Effect,
}

/// Every state-changing route, one per line: the JSON API, and the forms of the UI (the
/// sign-out form and the actions' server functions, posted as a browser posts a form).
#[rustfmt::skip]
fn routes() -> Vec<Route> {
    use Effect::{Changes, None as NoEffect};
    use Kind::{Api, Form, Put};
    const REPLAY: &[Permission] = &[Permission::Replay];
    const DELETE: &[Permission] = &[Permission::Delete];
    const EDIT: &[Permission] = &[Permission::Edit];
    const EDIT_REPLAY: &[Permission] = &[Permission::Edit, Permission::Replay];
    const ANNOTATE: &[Permission] = &[Permission::Annotate];
    const MANAGE_RULES: &[Permission] = &[Permission::ManageRules];
    const MANAGE_USERS: &[Permission] = &[Permission::ManageUsers];
    const APPROVE: &[Permission] = &[Permission::Approve];
    const NONE: &[Permission] = &[];
    fn r(name: &'static str, kind: Kind, path: fn(&Cell) -> String, body: fn(&Cell) -> Value, needs: &'static [Permission], ok: u16, effect: Effect) -> Route {
        Route { name, kind, path, body, needs, ok, effect }
    }
    vec![
        r("replay", Api, |_| "/api/v1/replays".into(), |c| json!({"ids": [c.to_replay], "reason": "matrix"}), REPLAY, 202, Changes),
        r("replay by filter", Api, |_| "/api/v1/replays".into(), |c| json!({"filter": {"dlq_topic": c.topic, "status": "new"}}), REPLAY, 202, Changes),
        r("dry run", Api, |_| "/api/v1/replays/dry-run".into(), |c| json!({"ids": [c.to_replay]}), NONE, 200, NoEffect),
        r("cancel job", Api, |c| format!("/api/v1/replays/{}/cancel", c.job_id), |_| json!({}), REPLAY, 200, Changes),
        r("delete", Api, |_| "/api/v1/dead-letters/delete".into(), |c| json!({"ids": [c.to_delete], "reason": "matrix"}), DELETE, 200, Changes),
        r("restore", Api, |_| "/api/v1/dead-letters/restore".into(), |c| json!({"ids": [c.to_restore]}), DELETE, 200, Changes),
        r("edit and replay", Api, |c| format!("/api/v1/dead-letters/{}/versions", c.to_replay), |_| json!({"value": {"text": "matrix edit"}, "reason": "matrix", "replay": true}), EDIT_REPLAY, 201, Changes),
        r("retry quarantined", Api, |_| "/api/v1/quarantine/retry".into(), |c| json!({"ids": [c.quarantined]}), REPLAY, 200, Changes),
        r("sign out", Form, |_| "/auth/sign-out".into(), |_| json!({}), NONE, 303, Changes),
        r("ui replay selected", Form, |_| "/api/ui/act".into(), |c| json!({"op": "replay", "ids[]": c.to_replay, "back": "/"}), REPLAY, 302, Changes),
        r("ui delete selected", Form, |_| "/api/ui/act".into(), |c| json!({"op": "delete", "ids[]": c.to_delete, "back": "/"}), DELETE, 302, Changes),
        r("ui restore selected", Form, |_| "/api/ui/act".into(), |c| json!({"op": "restore", "ids[]": c.to_restore, "back": "/"}), DELETE, 302, Changes),
        r("ui act on filter", Form, |_| "/api/ui/act-on-filter".into(), |c| json!({"op": "delete", "filter": format!("dlq_topic={}&status=new", c.topic)}), DELETE, 302, Changes),
        r("ui edit", Form, |_| "/api/ui/edit".into(), |c| json!({"id": c.to_replay.to_string(), "value_as": "text", "value": "matrix form edit", "key_as": "keep", "headers_keep": "true", "op": "save"}), EDIT, 302, Changes),
        r("ui cancel job", Form, |_| "/api/ui/cancel-job".into(), |c| json!({"job_id": c.job_id}), REPLAY, 302, Changes),
        r("pause job", Api, |c| format!("/api/v1/replays/{}/pause", c.job_id), |_| json!({"reason": "matrix"}), REPLAY, 200, Changes),
        r("resume job", Api, |c| format!("/api/v1/replays/{}/resume", c.paused_job_id), |_| json!({}), REPLAY, 200, Changes),
        r("ui pause job", Form, |_| "/api/ui/pause-job".into(), |c| json!({"job_id": c.job_id}), REPLAY, 302, Changes),
        r("ui resume job", Form, |_| "/api/ui/resume-job".into(), |c| json!({"job_id": c.paused_job_id}), REPLAY, 302, Changes),
        r("edit", Api, |c| format!("/api/v1/dead-letters/{}/versions", c.to_replay), |_| json!({"value": {"text": "matrix edit only"}, "reason": "matrix"}), EDIT, 201, Changes),
        r("label", Api, |c| format!("/api/v1/dead-letters/{}/labels", c.to_replay), |_| json!({"label": "matrix"}), ANNOTATE, 200, Changes),
        r("bulk label", Api, |_| "/api/v1/dead-letters/labels".into(), |c| json!({"ids": [c.to_delete], "add": "matrix"}), ANNOTATE, 200, Changes),
        r("ui label", Form, |_| "/api/ui/label".into(), |c| json!({"kind": "dead_letter", "target": c.to_replay.to_string(), "op": "add", "label": "matrix", "back": "/"}), ANNOTATE, 302, Changes),
        r("ui note", Form, |_| "/api/ui/note".into(), |c| json!({"kind": "dead_letter", "target": c.to_replay.to_string(), "note": "matrix note", "back": "/"}), ANNOTATE, 302, Changes),
        r("archive", Api, |_| "/api/v1/archives".into(), |c| json!({"filter": {"dlq_topic": c.topic}}), DELETE, 409, NoEffect),
        r("ui alert test", Form, |_| "/api/ui/alert-test".into(), |_| json!({"notifier": "no-such-notifier"}), MANAGE_RULES, 400, NoEffect),
        // Users and tokens (the `manage_users` permission: admins only).
        r("add user", Api, |_| "/api/v1/users".into(), |c| json!({"name": c.new_user, "role": "viewer", "password": "matrix password"}), MANAGE_USERS, 201, Changes),
        r("disable user", Api, |c| format!("/api/v1/users/{}/disable", c.target), |_| json!({}), MANAGE_USERS, 200, Changes),
        r("enable user", Api, |c| format!("/api/v1/users/{}/enable", c.disabled_target), |_| json!({}), MANAGE_USERS, 200, Changes),
        r("set role", Api, |c| format!("/api/v1/users/{}/role", c.target), |_| json!({"role": "operator"}), MANAGE_USERS, 200, Changes),
        r("reset password", Api, |c| format!("/api/v1/users/{}/password", c.target), |_| json!({"password": "matrix new password"}), MANAGE_USERS, 200, Changes),
        r("token for another user", Api, |_| "/api/v1/tokens".into(), |c| json!({"user": c.target, "expires_in": "30d"}), MANAGE_USERS, 201, Changes),
        r("revoke another's token", Api, |c| format!("/api/v1/tokens/{}/revoke", c.target_token), |_| json!({}), MANAGE_USERS, 200, Changes),
        r("ui add user", Form, |_| "/api/ui/users/add".into(), |c| json!({"name": c.new_user, "role": "viewer", "password": "matrix password"}), MANAGE_USERS, 302, Changes),
        r("ui disable user", Form, |_| "/api/ui/users/change".into(), |c| json!({"name": c.target, "op": "disable"}), MANAGE_USERS, 302, Changes),
        r("ui enable user", Form, |_| "/api/ui/users/change".into(), |c| json!({"name": c.disabled_target, "op": "enable"}), MANAGE_USERS, 302, Changes),
        r("ui set role", Form, |_| "/api/ui/users/change".into(), |c| json!({"name": c.target, "op": "set_role", "role": "operator"}), MANAGE_USERS, 302, Changes),
        r("ui reset password", Form, |_| "/api/ui/users/change".into(), |c| json!({"name": c.target, "op": "reset_password", "password": "matrix new password"}), MANAGE_USERS, 302, Changes),
        r("ui token for another user", Form, |_| "/account/tokens".into(), |c| json!({"user": c.target, "expires": "7d", "scope": "read_only", "back": "/admin/users"}), MANAGE_USERS, 200, Changes),
        r("ui revoke another's token", Form, |_| "/api/ui/tokens/revoke".into(), |c| json!({"id": c.target_token.to_string(), "back": "/admin/users"}), MANAGE_USERS, 302, Changes),
        // Four-eyes approval: `Permission::Approve` (held by operator and admin). The cell's
        // request was made by `setup`, so every caller is "another user".
        r("approve request", Api, |c| format!("/api/v1/requests/{}/approve", c.approval_id), |_| json!({"reason": "matrix"}), APPROVE, 200, Changes),
        r("decline request", Api, |c| format!("/api/v1/requests/{}/decline", c.approval_id), |_| json!({"reason": "matrix"}), APPROVE, 200, Changes),
        r("ui approve request", Form, |_| "/api/ui/approve".into(), |c| json!({"id": c.approval_id.to_string()}), APPROVE, 302, Changes),
        r("ui decline request", Form, |_| "/api/ui/decline".into(), |c| json!({"id": c.approval_id.to_string(), "reason": "matrix"}), APPROVE, 302, Changes),
        // Annotations beyond adding a label: the cell's `to_delete` and its error group carry
        // the label `matrix-old`, the group's fingerprint is the cell's own.
        r("remove label", Api, |c| format!("/api/v1/dead-letters/{}/labels/remove", c.to_delete), |_| json!({"label": "matrix-old"}), ANNOTATE, 200, Changes),
        r("note", Put, |c| format!("/api/v1/dead-letters/{}/note", c.to_replay), |_| json!({"note": "matrix note"}), ANNOTATE, 200, Changes),
        r("group label", Api, |c| format!("/api/v1/error-groups/{}/labels", c.fingerprint), |_| json!({"label": "matrix"}), ANNOTATE, 200, Changes),
        r("remove group label", Api, |c| format!("/api/v1/error-groups/{}/labels/remove", c.fingerprint), |_| json!({"label": "matrix-old"}), ANNOTATE, 200, Changes),
        r("group note", Put, |c| format!("/api/v1/error-groups/{}/note", c.fingerprint), |_| json!({"note": "matrix note"}), ANNOTATE, 200, Changes),
        // Automation rules (`manage_rules`: admins only among the built-in roles). The rule
        // set is the app's [`MATRIX_RULES`]; each cell finds `to-pause` running and
        // `to-resume` paused, and saving the same text makes a new version.
        r("save rules", Put, |_| "/api/v1/automation/rules".into(), |_| json!({"source": MATRIX_RULES, "reason": "matrix"}), MANAGE_RULES, 201, Changes),
        r("rules dry run", Api, |_| "/api/v1/automation/dry-run".into(), |_| json!({"source": MATRIX_RULES}), MANAGE_RULES, 200, NoEffect),
        r("pause rule", Api, |_| "/api/v1/automation/rules/to-pause/pause".into(), |_| json!({"reason": "matrix"}), MANAGE_RULES, 200, Changes),
        r("resume rule", Api, |_| "/api/v1/automation/rules/to-resume/resume".into(), |_| json!({}), MANAGE_RULES, 200, Changes),
    ]
}

/// The app's rule set: two transient rules for a DLQ topic nothing is ever written to, so
/// their rounds find nothing to replay and only the matrix changes their state.
const MATRIX_RULES: &str = r#"default_tier = "manual"

[[rule]]
name = "to-pause"
tier = "transient"
match.dlq_topics = ["matrix-automation-nothing.DLT"]

[[rule]]
name = "to-resume"
tier = "transient"
match.dlq_topics = ["matrix-automation-nothing.DLT"]
"#;

/// Who calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    /// A session of a user whose custom role (`only-NAME`) holds exactly this permission.
    Only(Permission),
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

fn everyone() -> Vec<Who> {
    let mut all = vec![
        Who::Nobody,
        Who::Viewer,
        Who::Operator,
        Who::Admin,
        Who::MissingCsrf,
        Who::WrongCsrf,
        Who::ViewerToken,
        Who::OperatorToken,
    ];
    all.extend(Permission::ALL.map(Who::Only));
    all
}

/// The custom role holding only `p`, and its user.
fn only(p: Permission) -> String {
    format!("only-{}", p.as_str().replace('_', "-"))
}

/// `[roles.only-PERMISSION]` for every permission.
fn custom_roles_toml() -> String {
    Permission::ALL
        .iter()
        .map(|p| format!("[roles.{}]\npermissions = [\"{}\"]\n", only(*p), p.as_str()))
        .collect()
}

/// What the matrix expects of a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Allowed,
    DeniedByRole,
    Unauthenticated,
    CsrfRefused,
}

fn expect(route: &Route, who: Who) -> Expect {
    let may = |p: Permission| match who {
        Who::Viewer | Who::ViewerToken => Role::Viewer.grants(p),
        Who::Operator | Who::OperatorToken => Role::Operator.grants(p),
        Who::Admin => Role::Admin.grants(p),
        Who::Only(q) => p == q,
        Who::Nobody | Who::MissingCsrf | Who::WrongCsrf => false,
    };
    match who {
        Who::Nobody => return Expect::Unauthenticated,
        Who::MissingCsrf | Who::WrongCsrf => return Expect::CsrfRefused,
        _ => {}
    }
    if route.needs.iter().all(|p| may(*p)) {
        Expect::Allowed
    } else {
        Expect::DeniedByRole
    }
}

/// Fresh data for one cell.
struct Cell {
    topic: String,
    /// The error group of the cell's dead letters (its own, 16 hex characters).
    fingerprint: String,
    to_replay: i64,
    to_delete: i64,
    to_restore: i64,
    pending: i64,
    job_id: String,
    /// A job paused by the setup (its one row pending), to resume.
    paused_job_id: String,
    /// A quarantine row (with its payload, so a retry can store it).
    quarantined: i64,
    /// A viewer (with a token), to disable, re-role, reset, give a token.
    target: String,
    target_token: i64,
    /// A disabled viewer, to enable.
    disabled_target: String,
    /// A name no user has yet, to add.
    new_user: String,
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
    /// Labels and note of `to_replay` and `to_delete`.
    annotations: Vec<(Vec<String>, Option<String>)>,
    /// The cell's users and tokens: the target's role, state, password hash and tokens, the
    /// disabled target's state, whether the new user exists.
    accounts: String,
    /// The approval request's status.
    approval: String,
    /// Labels and note of the cell's error group.
    group_annotations: (Vec<String>, Option<String>),
    /// The active rule set version and whether `to-pause` and `to-resume` are paused.
    rules: (Option<i64>, Vec<(String, bool)>),
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
    // 16 lowercase hex characters, as an error group fingerprint is.
    let fingerprint = format!("0000{}", &unique("f")[2..]);
    let batch: Vec<NewDeadLetter> = (0..6)
        .map(|o| NewDeadLetter {
            fingerprint: fingerprint.clone(),
            ..record(&topic, o)
        })
        .collect();
    app.store.insert_batch(&batch).await.expect("insert");
    let q = redrive_core::ListQuery::from_pairs([("dlq_topic", topic.as_str()), ("limit", "10")])
        .expect("query");
    let mut page = app.store.list(&q).await.expect("list").items;
    page.sort_by_key(|d| d.dlq_offset);
    let ids: Vec<i64> = page.iter().map(|d| d.id).collect();
    let setup = Actor::admin("setup");
    app.store
        .delete(&setup, &Selection::Ids(vec![ids[2]]), None)
        .await
        .expect("delete");
    for target in [
        Target::DeadLetter(ids[1]),
        Target::Group(fingerprint.clone()),
    ] {
        app.store
            .change_label(&setup, &target, "matrix-old", LabelOp::Add)
            .await
            .expect("label");
    }
    for (rule, paused) in [("to-pause", false), ("to-resume", true)] {
        app.store
            .set_rule_paused(&setup, rule, paused, None)
            .await
            .expect("rule state");
    }
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
    let phc = {
        static PHC: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        PHC.get_or_init(|| redrive_core::auth::hash_password("matrix password").expect("hash"))
    };
    let target = unique("target");
    let disabled_target = unique("disabled");
    let mut target_id = 0;
    for name in [&target, &disabled_target] {
        let id = app
            .store
            .create_user(&redrive_core::store::NewUser {
                name,
                role: Role::Viewer,
                password_hash: phc,
                created_at_ms: 0,
            })
            .await
            .expect("create user")
            .expect("a new user");
        if *name == target {
            target_id = id;
        }
    }
    let by = redrive_core::actions::NewAuditEntry::default();
    redrive_core::accounts::set_disabled(&app.store, &by, None, &disabled_target, true, 0)
        .await
        .expect("disable");
    let target_token = app
        .store
        .create_api_token(
            target_id,
            Some("matrix"),
            &secret_hash(&redrive_core::auth::new_api_token().expect("token")),
            0,
        )
        .await
        .expect("token");
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
        target,
        target_token,
        disabled_target,
        new_user: unique("new"),
        approval_id,
        quarantined,
        topic,
        fingerprint,
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
    let mut annotations = Vec::new();
    for target in [
        Target::DeadLetter(cell.to_replay),
        Target::DeadLetter(cell.to_delete),
        Target::Group(cell.fingerprint.clone()),
    ] {
        let a = app.store.annotations(&target).await.expect("annotations");
        annotations.push((
            a.labels.into_iter().map(|l| l.label).collect(),
            a.note.map(|n| n.text),
        ));
    }
    let group_annotations = annotations.pop().expect("the group's");
    let overview = app
        .store
        .automation_overview()
        .await
        .expect("automation overview");
    let rules = (
        overview.active.map(|v| v.version),
        overview
            .rules
            .into_iter()
            .map(|r| (r.name, r.state.is_some_and(|s| s.paused)))
            .collect(),
    );
    let target = app.store.user(&cell.target).await.expect("user");
    let hash = app
        .store
        .user_credentials(&cell.target)
        .await
        .expect("credentials")
        .map(|c| c.password_hash);
    let tokens: Vec<(i64, bool)> = app
        .store
        .api_tokens(Some(&cell.target))
        .await
        .expect("tokens")
        .into_iter()
        .map(|t| (t.id, t.revoked_at_ms.is_some()))
        .collect();
    let disabled = app
        .store
        .user(&cell.disabled_target)
        .await
        .expect("user")
        .map(|u| u.disabled);
    let new_user = app
        .store
        .user(&cell.new_user)
        .await
        .expect("user")
        .is_some();
    let accounts = format!("{target:?} {hash:?} {tokens:?} {disabled:?} {new_user}");
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
        group_annotations,
        rules,
        statuses,
        job,
        paused_job,
        in_quarantine,
        session_alive,
        edit_version,
        annotations,
        accounts,
    }
}

async fn matrix(backend: Backend) {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("redrive.toml");
    std::fs::write(&config, custom_roles_toml()).expect("write the config");
    let config = config.to_string_lossy().to_string();
    let app = TestApp::start_on(
        backend,
        &[
            ("REDRIVE_CONFIG", config.as_str()),
            ("REDRIVE_ADMIN_USER", "admin"),
            ("REDRIVE_ADMIN_PASSWORD", "admin password"),
            // The matrix signs in a few dozen times a minute.
            ("REDRIVE_SIGN_IN_PER_USER_PER_MIN", "0"),
            ("REDRIVE_SIGN_IN_PER_IP_PER_MIN", "0"),
        ],
    )
    .await;
    // The requester of the cells' approval requests (`new_cell`): approval acts with the
    // requester's role as it is when approved, so the requester must exist.
    app.add_user("setup", "admin", "setup password").await;
    app.add_user("viewer", "viewer", "viewer password").await;
    app.add_user("operator", "operator", "operator password")
        .await;
    for p in Permission::ALL {
        app.add_user_in_store(&only(p), &only(p), "only password")
            .await;
    }
    let viewer_token = app.create_token("viewer").await;
    let operator_token = app.create_token("operator").await;
    app.store
        .save_rule_set(
            &Actor::admin("setup"),
            RuleSetOrigin::Api,
            MATRIX_RULES,
            Some("the matrix's rules"),
        )
        .await
        .expect("the matrix's rule set");

    let mut failures = Vec::new();
    for route in routes() {
        for who in everyone() {
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
                Who::Only(p) => Some(app.sign_in(&only(p), "only password").await),
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
                Kind::Put => {
                    app.send_json(reqwest::Method::PUT, &path, auth, csrf, &body)
                        .await
                }
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
                (Expect::Unauthenticated, Kind::Api | Kind::Put) => 401,
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

/// The `/api/v1` operations other than GET that the matrix leaves out, with why and where
/// they are tested: (method as the OpenAPI document spells it, path template, reason). Each
/// acts on the caller's own account, which every signed-in caller may do, so there is no
/// permission to hold a role to.
const NOT_IN_MATRIX: &[(&str, &str, &str)] = &[
    (
        "post",
        "/api/v1/requests/{id}/cancel",
        "the requester cancels their own request: approvals.rs",
    ),
    (
        "post",
        "/api/v1/account/password",
        "the caller's own password: users.rs",
    ),
    (
        "post",
        "/api/v1/sessions/{handle}/end",
        "the caller's own session: users.rs",
    ),
    (
        "post",
        "/api/v1/sessions/end-others",
        "the caller's own sessions: users.rs",
    ),
    (
        "delete",
        "/api/v1/tokens/{id}",
        "the same as POST /api/v1/tokens/{id}/revoke (in the matrix): users.rs",
    ),
];

/// Whether `path` is an instance of the OpenAPI path `template` (`{name}` is one segment).
fn path_matches(template: &str, path: &str) -> bool {
    let (t, p): (Vec<&str>, Vec<&str>) = (template.split('/').collect(), path.split('/').collect());
    t.len() == p.len()
        && t.iter()
            .zip(&p)
            .all(|(t, p)| t == p || (t.starts_with('{') && t.ends_with('}') && !p.is_empty()))
}

/// A cell with made-up values, enough to compute the matrix's paths.
fn placeholder_cell() -> Cell {
    Cell {
        topic: "t.DLT".into(),
        fingerprint: "0123456789abcdef".into(),
        to_replay: 1,
        to_delete: 2,
        to_restore: 3,
        pending: 4,
        job_id: "job".into(),
        paused_job_id: "paused-job".into(),
        quarantined: 5,
        target: "target".into(),
        target_token: 6,
        disabled_target: "disabled".into(),
        new_user: "new".into(),
        approval_id: 7,
    }
}

/// Every `/api/v1` operation other than a GET that the OpenAPI document lists is in the
/// matrix, needing the permission the document names (`Needs the `P` permission`), or in
/// [`NOT_IN_MATRIX`]: a route added to the API without its line in [`routes`] fails here.
#[tokio::test]
async fn the_matrix_covers_every_state_changing_api_operation() {
    let app = TestApp::start(&[]).await;
    let token = app.admin_token().await;
    let doc: Value = app
        .get("/api/v1/openapi.json", Auth::Bearer(&token))
        .await
        .json()
        .await
        .expect("the OpenAPI document is JSON");
    let cell = placeholder_cell();
    let matrix: Vec<(&str, String, &'static [Permission])> = routes()
        .into_iter()
        .filter_map(|r| {
            let method = match r.kind {
                Kind::Api => "post",
                Kind::Put => "put",
                Kind::Form => return None,
            };
            Some((method, (r.path)(&cell), r.needs))
        })
        .collect();
    let needs = regex::Regex::new(r"Needs the `([a-z_]+)` permission").expect("regex");
    let mut problems = Vec::new();
    let mut checked = 0;
    for (template, ops) in doc["paths"].as_object().expect("paths") {
        for (method, op) in ops.as_object().expect("operations") {
            if !["post", "put", "patch", "delete"].contains(&method.as_str()) {
                continue;
            }
            checked += 1;
            let exempt = NOT_IN_MATRIX
                .iter()
                .any(|(m, t, _)| m == method && t == template);
            let rows: Vec<&&'static [Permission]> = matrix
                .iter()
                .filter(|(m, p, _)| m == method && path_matches(template, p))
                .map(|(_, _, n)| n)
                .collect();
            match (rows.is_empty(), exempt) {
                (true, false) => problems.push(format!(
                    "{} {template} is in no row of `routes()` (nor in NOT_IN_MATRIX)",
                    method.to_uppercase()
                )),
                (false, true) => problems.push(format!(
                    "{} {template} is in the matrix and in NOT_IN_MATRIX",
                    method.to_uppercase()
                )),
                _ => {}
            }
            let description = op["description"].as_str().unwrap_or_default();
            if let Some(c) = needs.captures(description) {
                let p = Permission::parse(&c[1]).expect("a permission the document names");
                for row in &rows {
                    if !row.contains(&p) {
                        problems.push(format!(
                            "{} {template} needs `{}` by the document; its matrix row needs {row:?}",
                            method.to_uppercase(),
                            &c[1]
                        ));
                    }
                }
            }
        }
    }
    for (m, t, _) in NOT_IN_MATRIX {
        if doc["paths"][*t][*m].is_null() {
            problems.push(format!(
                "NOT_IN_MATRIX names {m} {t}, which the document does not list"
            ));
        }
    }
    assert!(
        checked > 30,
        "only {checked} state-changing operations in the document"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// GET `path`: the status and the JSON body (`null` if it is not JSON).
async fn get_json(app: &TestApp, auth: Auth<'_>, path: String) -> (u16, Value) {
    let res = app.get(&path, auth).await;
    let status = res.status().as_u16();
    (status, res.json::<Value>().await.unwrap_or(Value::Null))
}

/// Dead letters of `topic` with error group `fingerprint`, returned by offset.
async fn records_of(app: &TestApp, topic: &str, fingerprint: &str, n: i64) -> Vec<i64> {
    let batch: Vec<NewDeadLetter> = (0..n)
        .map(|o| NewDeadLetter {
            fingerprint: fingerprint.into(),
            ..record(topic, o)
        })
        .collect();
    app.store.insert_batch(&batch).await.expect("insert");
    let q = redrive_core::ListQuery::from_pairs([("dlq_topic", topic), ("limit", "10")])
        .expect("query");
    let mut page = app.store.list(&q).await.expect("list").items;
    page.sort_by_key(|d| d.dlq_offset);
    page.iter().map(|d| d.id).collect()
}

async fn status_of(app: &TestApp, id: i64) -> String {
    let d = app.store.get(id).await.expect("get").expect("exists");
    d.summary.status.as_str().to_string()
}

/// A role limited to some DLQ topics (`[roles.NAME] dlq_topics`) reads only their dead letters
/// — list, detail, raw, history, export, error groups, overview, counts — and acts only on
/// them: an id of another topic is absent (404) and unchanged, a filter action touches only
/// its topics. A user whose role is no longer configured is refused everything, with a
/// message.
async fn topic_scopes(backend: Backend) {
    let mine = unique("teama.DLT");
    let theirs = unique("teamb.DLT");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("redrive.toml");
    // A glob for the team's topics: `mine` and anything it prefixes.
    std::fs::write(
        &config,
        format!(
            "[roles.team-a]\npermissions = [\"replay\", \"delete\", \"edit\", \"annotate\"]\n\
             dlq_topics = [\"{mine}*\"]\n"
        ),
    )
    .expect("write the config");
    let config = config.to_string_lossy().to_string();
    let app = TestApp::start_on(
        backend,
        &[
            ("REDRIVE_CONFIG", config.as_str()),
            ("REDRIVE_SIGN_IN_PER_USER_PER_MIN", "0"),
            ("REDRIVE_SIGN_IN_PER_IP_PER_MIN", "0"),
        ],
    )
    .await;
    let a = records_of(&app, &mine, "aaaaaaaaaaaaaaaa", 3).await;
    let b = records_of(&app, &theirs, "bbbbbbbbbbbbbbbb", 3).await;
    app.add_user_in_store("alice", "team-a", "alice password")
        .await;
    app.add_user_in_store("ghost", "vanished-team", "ghost password")
        .await;
    let s = app.sign_in("alice", "alice password").await;
    let me = Auth::Session(&s);

    // Reads: only team A's dead letters.
    let (code, list) = get_json(&app, me, "/api/v1/dead-letters?limit=500".into()).await;
    assert_eq!(code, 200, "{list}");
    let mut listed: Vec<i64> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|d| d["id"].as_i64().expect("id"))
        .collect();
    listed.sort();
    assert_eq!(listed, a, "the list shows team A's dead letters only");
    let (code, _) = get_json(&app, me, format!("/api/v1/dead-letters?dlq_topic={theirs}")).await;
    assert_eq!(code, 200);
    let (_, other) = get_json(&app, me, format!("/api/v1/dead-letters?dlq_topic={theirs}")).await;
    assert_eq!(other["items"].as_array().map(Vec::len), Some(0), "{other}");
    assert_eq!(
        get_json(&app, me, format!("/api/v1/dead-letters/{}", a[0]))
            .await
            .0,
        200
    );
    for path in [
        format!("/api/v1/dead-letters/{}", b[0]),
        format!("/api/v1/dead-letters/{}/raw/value", b[0]),
        format!("/dead-letters/{}/raw/key", b[0]),
        format!("/api/v1/dead-letters/{}/history", b[0]),
        format!("/api/v1/dead-letters/{}/versions", b[0]),
        format!("/api/v1/dead-letters/{}/labels", b[0]),
    ] {
        let (code, body) = get_json(&app, me, path.clone()).await;
        assert_eq!(code, 404, "{path}: {body}");
    }
    let (code, groups) = get_json(&app, me, "/api/v1/error-groups".into()).await;
    assert_eq!(code, 200);
    let fps: Vec<&str> = groups["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|g| g["fingerprint"].as_str().expect("fingerprint"))
        .collect();
    assert_eq!(fps, ["aaaaaaaaaaaaaaaa"], "{groups}");
    let export = app.get("/api/v1/dead-letters/export", me).await;
    assert_eq!(export.status(), 200);
    let export = export.text().await.expect("export");
    assert_eq!(export.lines().count(), a.len(), "{export}");
    assert!(export.contains(&mine) && !export.contains(&theirs));
    for page in ["/overview", "/", "/groups"] {
        let res = app.get(page, me).await;
        assert_eq!(res.status(), 200, "{page}");
        let html = res.text().await.expect("page");
        assert!(
            !html.contains(&theirs),
            "{page} shows the other team's topic"
        );
    }
    let overview = app.get("/overview", me).await.text().await.expect("page");
    assert!(
        overview.contains(&mine),
        "the overview shows the team's topic"
    );
    let detail = app.get(&format!("/dead-letters/{}", b[0]), me).await;
    assert_eq!(detail.status(), 404);

    // Actions on the other team's dead letters: absent, and nothing changes.
    let audit_before = app.audit().await.len();
    for (path, body) in [
        ("/api/v1/replays".to_string(), json!({"ids": [b[0]]})),
        (
            "/api/v1/dead-letters/delete".to_string(),
            json!({"ids": [b[0]]}),
        ),
        (
            "/api/v1/dead-letters/labels".to_string(),
            json!({"ids": [b[0]], "add": "x"}),
        ),
        (
            format!("/api/v1/dead-letters/{}/labels", b[0]),
            json!({"label": "x"}),
        ),
        (
            format!("/api/v1/dead-letters/{}/versions", b[0]),
            json!({"value": {"text": "x"}}),
        ),
        (
            "/api/v1/replays/dry-run".to_string(),
            json!({"ids": [b[0]]}),
        ),
    ] {
        let res = app.post_json(&path, me, Csrf::Right, &body).await;
        let code = res.status().as_u16();
        assert_eq!(
            code,
            404,
            "{path}: {}",
            res.text().await.unwrap_or_default()
        );
    }
    let res = app
        .post_form(
            "/api/ui/act",
            me,
            Csrf::Right,
            &[
                ("op", "delete"),
                ("ids[]", &b[1].to_string()),
                ("back", "/"),
            ],
        )
        .await;
    // A form reports a refusal on the page it goes back to (302 with the error) or as an
    // error page (404); either way nothing changes (checked below).
    assert!(
        matches!(res.status().as_u16(), 302 | 404),
        "a form action on another team's id: {}",
        res.status()
    );
    for id in &b {
        assert_eq!(status_of(&app, *id).await, "new");
    }
    assert!(app
        .store
        .annotations(&Target::DeadLetter(b[0]))
        .await
        .expect("annotations")
        .labels
        .is_empty());
    assert_eq!(
        app.store.latest_version(b[0]).await.expect("version"),
        Some(0)
    );
    let ok_rows: Vec<_> = app.audit().await[audit_before..]
        .iter()
        .filter(|r| r.outcome.starts_with("ok"))
        .map(|r| r.action.clone())
        .collect();
    assert!(ok_rows.is_empty(), "nothing done: {ok_rows:?}");

    // A filter action covers the scope only, whatever the filter names.
    let res = app
        .post_json(
            "/api/v1/dead-letters/delete",
            me,
            Csrf::Right,
            &json!({"filter": {"dlq_topic": theirs}}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let res = app
        .post_json(
            "/api/v1/dead-letters/delete",
            me,
            Csrf::Right,
            &json!({"filter": {"status": "new"}, "reason": "team A only"}),
        )
        .await;
    let body: Value = res.json().await.expect("JSON");
    assert_eq!(body["affected"].as_i64(), Some(a.len() as i64), "{body}");
    for id in &a {
        assert_eq!(status_of(&app, *id).await, "deleted");
    }
    for id in &b {
        assert_eq!(status_of(&app, *id).await, "new", "team B's are untouched");
    }

    // A role no longer configured: refused everything, with the reason.
    let ghost = app.sign_in("ghost", "ghost password").await;
    let res = app.get("/api/v1/dead-letters", Auth::Session(&ghost)).await;
    assert_eq!(res.status(), 403);
    let text = res.text().await.unwrap_or_default();
    assert!(
        text.contains("vanished-team") && text.contains("does not define"),
        "{text}"
    );
    let page = app.get("/", Auth::Session(&ghost)).await;
    assert_eq!(page.status(), 403);
    let out = app
        .post_form("/auth/sign-out", Auth::Session(&ghost), Csrf::Right, &[])
        .await;
    assert_eq!(
        out.status(),
        303,
        "a user without a role can still sign out"
    );
}

#[tokio::test]
async fn topic_scopes_on_sqlite() {
    topic_scopes(Backend::Sqlite).await;
}

#[tokio::test]
async fn topic_scopes_on_postgres() {
    topic_scopes(Backend::Postgres).await;
}
