//! Users and tokens, managed (issue 10), through the real binary on SQLite and PostgreSQL:
//! disabling a user ends their sessions and tokens on the next request and enabling them
//! brings none back; a role change applies to the next request of a live session and token;
//! expired and read-only tokens; one's own password and sessions; the pages; the CLI's new
//! subcommands. Who may call which route is in `authz_matrix.rs`.

use crate::support::{Auth, Csrf, Session, TestApp};
use redrive_core::auth::{new_api_token, secret_hash, TokenScope};
use redrive_core::store::NewApiToken;
use redrive_testkit::Backend;
use serde_json::{json, Value};

const ADMIN: &str = "admin";
const ADMIN_PW: &str = "correct horse battery";

async fn start(backend: Backend) -> TestApp {
    TestApp::start_on(
        backend,
        &[
            ("REDRIVE_ADMIN_USER", ADMIN),
            ("REDRIVE_ADMIN_PASSWORD", ADMIN_PW),
            ("REDRIVE_SIGN_IN_PER_USER_PER_MIN", "0"),
            ("REDRIVE_SIGN_IN_PER_IP_PER_MIN", "0"),
        ],
    )
    .await
}

/// The status of `GET /api/v1/dead-letters` with `auth`.
async fn read(app: &TestApp, auth: Auth<'_>) -> u16 {
    app.get("/api/v1/dead-letters", auth)
        .await
        .status()
        .as_u16()
}

/// The status of a delete over a filter that matches nothing (an operator's action that
/// changes nothing; a delete of an id that is not there answers 404).
async fn act(app: &TestApp, auth: Auth<'_>) -> u16 {
    app.post_json(
        "/api/v1/dead-letters/delete",
        auth,
        Csrf::Right,
        &json!({"filter": {"dlq_topic": "users-test.none"}, "reason": "users test"}),
    )
    .await
    .status()
    .as_u16()
}

async fn admin_post(app: &TestApp, admin: &Session, path: &str, body: Value) -> (u16, Value) {
    let res = app
        .post_json(path, Auth::Session(admin), Csrf::Right, &body)
        .await;
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// Signs in, returning the JSON answer's status (200 or 401).
async fn try_sign_in(app: &TestApp, user: &str, password: &str) -> u16 {
    reqwest::Client::new()
        .post(app.url("/auth/sign-in"))
        .header("Accept", "application/json")
        .form(&[("user", user), ("password", password)])
        .send()
        .await
        .expect("sign in")
        .status()
        .as_u16()
}

async fn disable_enable_and_role_change(backend: Backend) {
    let app = start(backend).await;
    let admin = app.sign_in(ADMIN, ADMIN_PW).await;
    app.add_user("bob", "operator", "bob password").await;
    let bob = app.sign_in("bob", "bob password").await;
    let token = app.create_token("bob").await;
    assert_eq!(read(&app, Auth::Session(&bob)).await, 200);
    assert_eq!(act(&app, Auth::Session(&bob)).await, 200);
    assert_eq!(act(&app, Auth::Bearer(&token)).await, 200);

    // A role change applies to the next request of the live session and token.
    let (status, body) = admin_post(
        &app,
        &admin,
        "/api/v1/users/bob/role",
        json!({"role": "viewer"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["role"], "viewer");
    assert_eq!(act(&app, Auth::Session(&bob)).await, 403);
    assert_eq!(act(&app, Auth::Bearer(&token)).await, 403);
    let (status, _) = admin_post(
        &app,
        &admin,
        "/api/v1/users/bob/role",
        json!({"role": "operator"}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(act(&app, Auth::Session(&bob)).await, 200);
    let set = app.audit_of("user_role_set").await;
    assert_eq!(set.len(), 2, "{set:?}");
    assert_eq!(set[0].actor, ADMIN);
    let detail: Value = serde_json::from_str(set[0].detail.as_deref().expect("detail")).unwrap();
    assert_eq!(
        detail["role"],
        json!({"before": "operator", "after": "viewer"})
    );
    // A role that does not exist is refused, naming the choices.
    let (status, body) = admin_post(
        &app,
        &admin,
        "/api/v1/users/bob/role",
        json!({"role": "root"}),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("not a role"),
        "{body}"
    );

    // Disabling ends the session and the token at once: both refused on the next request.
    let (status, body) = admin_post(&app, &admin, "/api/v1/users/bob/disable", json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["disabled"], true);
    assert_eq!(read(&app, Auth::Session(&bob)).await, 401);
    assert_eq!(read(&app, Auth::Bearer(&token)).await, 401);
    assert_eq!(try_sign_in(&app, "bob", "bob password").await, 401);
    let tokens = app.store.api_tokens(Some("bob")).await.expect("tokens");
    assert!(tokens[0].revoked_at_ms.is_some(), "{tokens:?}");

    // Enabled again: they sign in anew; the old session and token stay ended.
    let (status, body) = admin_post(&app, &admin, "/api/v1/users/bob/enable", json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["disabled"], false);
    assert_eq!(read(&app, Auth::Session(&bob)).await, 401);
    assert_eq!(read(&app, Auth::Bearer(&token)).await, 401);
    let again = app.sign_in("bob", "bob password").await;
    assert_eq!(read(&app, Auth::Session(&again)).await, 200);

    // Nobody disables themselves or changes their own role; an unknown user is 404.
    let (status, _) = admin_post(&app, &admin, "/api/v1/users/admin/disable", json!({})).await;
    assert_eq!(status, 409);
    let (status, _) = admin_post(
        &app,
        &admin,
        "/api/v1/users/admin/role",
        json!({"role": "viewer"}),
    )
    .await;
    assert_eq!(status, 409);
    let (status, _) = admin_post(&app, &admin, "/api/v1/users/ghost/disable", json!({})).await;
    assert_eq!(status, 404);

    // Creating: the name is checked, a taken one is 409, the list shows it.
    let (status, body) = admin_post(
        &app,
        &admin,
        "/api/v1/users",
        json!({"name": "carol", "role": "viewer", "password": "carol password"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, _) = admin_post(
        &app,
        &admin,
        "/api/v1/users",
        json!({"name": "carol", "role": "viewer", "password": "carol password"}),
    )
    .await;
    assert_eq!(status, 409);
    let (status, _) = admin_post(
        &app,
        &admin,
        "/api/v1/users",
        json!({"name": "<x>", "role": "viewer", "password": "carol password"}),
    )
    .await;
    assert_eq!(status, 422);
    let res = app.get("/api/v1/users", Auth::Session(&admin)).await;
    let list: Value = res.json().await.expect("JSON");
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["admin", "bob", "carol"]);
    app.sign_in("carol", "carol password").await;

    // Not for an operator: 403, audited `denied`.
    let res = app.get("/api/v1/users", Auth::Session(&again)).await;
    assert_eq!(res.status(), 403);
    let res = app
        .post_json(
            "/api/v1/users/carol/disable",
            Auth::Session(&again),
            Csrf::Right,
            &json!({}),
        )
        .await;
    assert_eq!(res.status(), 403);
    let denied = app.audit_of("user_disable").await;
    assert_eq!(
        denied
            .iter()
            .map(|a| (a.actor.as_str(), a.outcome.as_str()))
            .collect::<Vec<_>>(),
        [
            (
                ADMIN,
                "ok: bob disabled, their sessions ended and tokens revoked"
            ),
            ("bob", "denied")
        ]
    );
    // Audit rows never carry a password or a token.
    for a in app.audit().await {
        let row = format!("{a:?}");
        assert!(
            !row.contains("bob password") && !row.contains("carol password"),
            "{row}"
        );
        assert!(!row.contains(&token), "{row}");
    }

    // The pages: the admin page for an admin, 403 for an operator; the account page for all.
    let res = app.get("/admin/users", Auth::Session(&admin)).await;
    assert_eq!(res.status(), 200);
    let html = res.text().await.expect("page");
    assert!(html.contains("data-user=\"carol\""), "{html}");
    let res = app.get("/admin/users", Auth::Session(&again)).await;
    assert_eq!(res.status(), 403);
    let res = app.get("/account", Auth::Session(&again)).await;
    assert_eq!(res.status(), 200);
    let html = res.text().await.expect("page");
    assert!(html.contains("this session"), "{html}");
}

#[tokio::test]
async fn disable_enable_and_role_change_on_sqlite() {
    disable_enable_and_role_change(Backend::Sqlite).await;
}

#[tokio::test]
async fn disable_enable_and_role_change_on_postgres() {
    disable_enable_and_role_change(Backend::Postgres).await;
}

async fn expired_and_read_only_tokens(backend: Backend) {
    let app = start(backend).await;
    let admin = app.sign_in(ADMIN, ADMIN_PW).await;

    // A token past its expiry: 401 saying so.
    let user = app.store.user(ADMIN).await.expect("user").expect("admin");
    let expired = new_api_token().expect("token");
    let now = chrono::Utc::now().timestamp_millis();
    app.store
        .create_scoped_api_token(
            &NewApiToken {
                user_id: user.id,
                name: Some("expired"),
                token_hash: &secret_hash(&expired),
                created_at_ms: now - 60_000,
                expires_at_ms: Some(now - 1_000),
                scope: TokenScope::Role,
            },
            None,
        )
        .await
        .expect("create");
    let res = app
        .get("/api/v1/dead-letters", Auth::Bearer(&expired))
        .await;
    assert_eq!(res.status(), 401);
    let body: Value = res.json().await.expect("JSON");
    let msg = body["error"].as_str().unwrap_or_default();
    assert!(msg.contains("expired at"), "{msg}");

    // One with an expiry ahead works, and lists it.
    let (status, body) = admin_post(
        &app,
        &admin,
        "/api/v1/tokens",
        json!({"name": "month", "expires_in": "30d"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let month = body["token"].as_str().expect("token").to_string();
    assert!(body["expires_at_ms"].as_i64().unwrap() > now + 29 * 86_400_000);
    assert_eq!(read(&app, Auth::Bearer(&month)).await, 200);
    let (status, _) = admin_post(
        &app,
        &admin,
        "/api/v1/tokens",
        json!({"expires_in": "yesterday"}),
    )
    .await;
    assert_eq!(status, 422);

    // A read-only token of an admin reads, and is refused every action (403, audited
    // `denied`), its own account's included.
    let (status, body) = admin_post(
        &app,
        &admin,
        "/api/v1/tokens",
        json!({"name": "dashboards", "scope": "read_only"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["scope"], "read_only");
    let ro = body["token"].as_str().expect("token").to_string();
    let ro_id = body["id"].as_i64().unwrap();
    assert_eq!(read(&app, Auth::Bearer(&ro)).await, 200);
    assert_eq!(
        app.get("/api/v1/audit", Auth::Bearer(&ro)).await.status(),
        200
    );
    let actions = [
        ("/api/v1/replays", json!({"ids": [1]})),
        ("/api/v1/dead-letters/delete", json!({"ids": [1]})),
        ("/api/v1/dead-letters/restore", json!({"ids": [1]})),
        ("/api/v1/quarantine/retry", json!({"ids": [1]})),
        ("/api/v1/dead-letters/1/labels", json!({"label": "x"})),
        (
            "/api/v1/users",
            json!({"name": "eve", "role": "admin", "password": "eve password"}),
        ),
        (
            "/api/v1/users/admin/password",
            json!({"password": "x password"}),
        ),
        ("/api/v1/tokens", json!({})),
        (&format!("/api/v1/tokens/{ro_id}/revoke"), json!({})),
        (
            "/api/v1/account/password",
            json!({"current_password": ADMIN_PW, "new_password": "new password"}),
        ),
        ("/api/v1/sessions/end-others", json!({})),
    ];
    for (path, body) in actions {
        let before = app.audit().await.len();
        let res = app
            .post_json(path, Auth::Bearer(&ro), Csrf::Missing, &body)
            .await;
        assert_eq!(res.status(), 403, "{path}: {}", res.text().await.unwrap());
        let rows = app.audit().await;
        let new: Vec<_> = rows[before..]
            .iter()
            .map(|a| (a.outcome.as_str(), a.via_token))
            .collect();
        assert_eq!(new, [("denied", Some(ro_id))], "{path}");
    }
    // The admin's session still acts.
    assert_eq!(act(&app, Auth::Session(&admin)).await, 200);

    // Listed with scope, expiry and last use; revoked, then refused.
    let res = app.get("/api/v1/tokens", Auth::Session(&admin)).await;
    let list: Value = res.json().await.expect("JSON");
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    assert!(items.iter().all(|t| t.get("token").is_none()));
    assert_eq!(items[2]["expired"], true);
    let res = app
        .delete(&format!("/api/v1/tokens/{ro_id}"), Auth::Session(&admin))
        .await;
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.expect("JSON");
    assert!(body["revoked_at_ms"].is_i64(), "{body}");
    assert_eq!(read(&app, Auth::Bearer(&ro)).await, 401);
    let created: Vec<String> = app
        .audit_of("token_create")
        .await
        .into_iter()
        .map(|a| a.outcome)
        .filter(|o| o.starts_with("ok"))
        .collect();
    assert_eq!(created.len(), 2, "{created:?}");
    assert!(
        created[1].contains("scope read_only, never expires"),
        "{created:?}"
    );
}

#[tokio::test]
async fn expired_and_read_only_tokens_on_sqlite() {
    expired_and_read_only_tokens(Backend::Sqlite).await;
}

#[tokio::test]
async fn expired_and_read_only_tokens_on_postgres() {
    expired_and_read_only_tokens(Backend::Postgres).await;
}

async fn own_password_and_sessions(backend: Backend) {
    let app = start(backend).await;
    app.add_user("dan", "viewer", "dan password").await;
    let s1 = app.sign_in("dan", "dan password").await;
    let s2 = app.sign_in("dan", "dan password").await;
    let s3 = app.sign_in("dan", "dan password").await;

    let res = app.get("/api/v1/sessions", Auth::Session(&s1)).await;
    let list: Value = res.json().await.expect("JSON");
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 3, "{list}");
    let current: Vec<&Value> = items.iter().filter(|s| s["current"] == true).collect();
    assert_eq!(current.len(), 1, "{list}");
    assert_eq!(items[0]["ip"], "127.0.0.1");

    // Which handle is s2's: the one s2 sees as current.
    let res = app.get("/api/v1/sessions", Auth::Session(&s2)).await;
    let list: Value = res.json().await.expect("JSON");
    let s2_handle = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["current"] == true)
        .expect("current")["handle"]
        .as_str()
        .unwrap()
        .to_string();

    // End one (by the UI's form, as a browser posts it).
    let res = app
        .post_form(
            "/api/ui/account/end-session",
            Auth::Session(&s1),
            Csrf::Right,
            &[("handle", &s2_handle)],
        )
        .await;
    assert_eq!(res.status(), 302);
    assert_eq!(read(&app, Auth::Session(&s2)).await, 401);
    assert_eq!(read(&app, Auth::Session(&s1)).await, 200);
    assert_eq!(read(&app, Auth::Session(&s3)).await, 200);
    // Ending it again: 404.
    let res = app
        .post_json(
            &format!("/api/v1/sessions/{s2_handle}/end"),
            Auth::Session(&s1),
            Csrf::Right,
            &json!({}),
        )
        .await;
    assert_eq!(res.status(), 404);
    // Another user's session is not one's own to end: 404 as well.
    app.add_user("erin", "viewer", "erin password").await;
    let erin = app.sign_in("erin", "erin password").await;
    let res = app.get("/api/v1/sessions", Auth::Session(&erin)).await;
    let list: Value = res.json().await.expect("JSON");
    let erin_handle = list["items"][0]["handle"].as_str().unwrap().to_string();
    let res = app
        .post_json(
            &format!("/api/v1/sessions/{erin_handle}/end"),
            Auth::Session(&s1),
            Csrf::Right,
            &json!({}),
        )
        .await;
    assert_eq!(res.status(), 404);
    assert_eq!(read(&app, Auth::Session(&erin)).await, 200);

    // End all others.
    let res = app
        .post_json(
            "/api/v1/sessions/end-others",
            Auth::Session(&s1),
            Csrf::Right,
            &json!({}),
        )
        .await;
    let body: Value = res.json().await.expect("JSON");
    assert_eq!(body["ended"], 1, "{body}");
    assert_eq!(read(&app, Auth::Session(&s3)).await, 401);
    assert_eq!(read(&app, Auth::Session(&s1)).await, 200);

    // A wrong current password is refused (and audited), nothing changes.
    let s4 = app.sign_in("dan", "dan password").await;
    let res = app
        .post_json(
            "/api/v1/account/password",
            Auth::Session(&s1),
            Csrf::Right,
            &json!({"current_password": "not it", "new_password": "dan new password"}),
        )
        .await;
    assert_eq!(res.status(), 403);
    assert_eq!(read(&app, Auth::Session(&s4)).await, 200);
    // By the UI's server function, as the hydrated page calls it: the same refusal, 403.
    let res = reqwest::Client::new()
        .post(app.url("/api/ui/account/password"))
        .header("Cookie", &s1.cookie)
        .form(&[
            ("csrf", s1.csrf.as_str()),
            ("current_password", "not it"),
            ("new_password", "dan new password"),
        ])
        .send()
        .await
        .expect("post");
    assert_eq!(res.status(), 403);
    let text = res.text().await.unwrap_or_default();
    assert!(text.contains("current password is wrong"), "{text}");
    assert_eq!(try_sign_in(&app, "dan", "dan new password").await, 401);
    // A too short new password: 422.
    let res = app
        .post_json(
            "/api/v1/account/password",
            Auth::Session(&s1),
            Csrf::Right,
            &json!({"current_password": "dan password", "new_password": "short"}),
        )
        .await;
    assert_eq!(res.status(), 422);

    // The right one: the other sessions end, this one stays, the new password signs in.
    let res = app
        .post_json(
            "/api/v1/account/password",
            Auth::Session(&s1),
            Csrf::Right,
            &json!({"current_password": "dan password", "new_password": "dan new password"}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.expect("JSON");
    assert_eq!(body["sessions_ended"], 1, "{body}");
    assert_eq!(read(&app, Auth::Session(&s4)).await, 401);
    assert_eq!(read(&app, Auth::Session(&s1)).await, 200);
    assert_eq!(try_sign_in(&app, "dan", "dan password").await, 401);
    app.sign_in("dan", "dan new password").await;

    let changes: Vec<String> = app
        .audit_of("password_change")
        .await
        .into_iter()
        .map(|a| a.outcome)
        .collect();
    assert_eq!(
        changes,
        [
            "failed: the current password is wrong",
            "failed: the current password is wrong",
            "ok: 1 other sessions ended",
        ],
        "{changes:?}"
    );
    let ends = app.audit_of("session_end").await;
    assert_eq!(ends.len(), 2, "{ends:?}");
    assert!(ends.iter().all(|a| a.actor == "dan"));
}

#[tokio::test]
async fn own_password_and_sessions_on_sqlite() {
    own_password_and_sessions(Backend::Sqlite).await;
}

#[tokio::test]
async fn own_password_and_sessions_on_postgres() {
    own_password_and_sessions(Backend::Postgres).await;
}

async fn cli_manages_users_and_tokens(backend: Backend) {
    let app = start(backend).await;
    app.add_user("fay", "viewer", "fay password").await;
    let fay = app.sign_in("fay", "fay password").await;

    let (code, _, err) = app.cli(&["user", "set-role", "fay", "root"], None).await;
    assert_ne!(code, Some(0));
    assert!(err.contains("not a role"), "{err}");
    let (code, _, err) = app
        .cli(&["user", "set-role", "fay", "operator"], None)
        .await;
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("was viewer"), "{err}");
    assert_eq!(act(&app, Auth::Session(&fay)).await, 200);

    let token = app.create_token("fay").await;
    let (code, _, err) = app.cli(&["user", "disable", "fay"], None).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(read(&app, Auth::Session(&fay)).await, 401);
    assert_eq!(read(&app, Auth::Bearer(&token)).await, 401);
    let (_, out, _) = app.cli(&["user", "list"], None).await;
    let line = out
        .lines()
        .find(|l| l.starts_with("fay"))
        .expect("fay listed");
    assert!(line.contains("disabled"), "{out}");
    let (code, _, err) = app.cli(&["user", "disable", "ghost"], None).await;
    assert_ne!(code, Some(0));
    assert!(err.contains("no user"), "{err}");
    let (code, _, err) = app.cli(&["user", "enable", "fay"], None).await;
    assert_eq!(code, Some(0), "{err}");

    let (code, _, err) = app
        .cli(
            &["user", "reset-password", "fay"],
            Some("fay new password\n"),
        )
        .await;
    assert_ne!(code, Some(0));
    assert!(err.contains("--password-stdin"), "{err}");
    let (code, _, err) = app
        .cli(
            &["user", "reset-password", "fay", "--password-stdin"],
            Some("fay new password\n"),
        )
        .await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(try_sign_in(&app, "fay", "fay password").await, 401);
    assert_eq!(try_sign_in(&app, "fay", "fay new password").await, 200);

    // Tokens with an expiry and a scope.
    let (code, out, err) = app
        .cli(
            &[
                "token",
                "create",
                "--user",
                "fay",
                "--expires-in",
                "30d",
                "--scope",
                "read_only",
            ],
            None,
        )
        .await;
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("scope read_only, expires "), "{err}");
    let ro = out.trim().to_string();
    assert_eq!(read(&app, Auth::Bearer(&ro)).await, 200);
    assert_eq!(act(&app, Auth::Bearer(&ro)).await, 403);
    let (code, _, err) = app
        .cli(
            &["token", "create", "--user", "fay", "--expires-in", "soon"],
            None,
        )
        .await;
    assert_ne!(code, Some(0));
    assert!(err.contains("not a token expiry"), "{err}");
    let (code, _, err) = app
        .cli(
            &["token", "create", "--user", "fay", "--scope", "admin"],
            None,
        )
        .await;
    assert_ne!(code, Some(0));
    assert!(err.contains("not a token scope"), "{err}");
    let (_, out, _) = app.cli(&["token", "list", "--user", "fay"], None).await;
    assert!(out.contains("read_only"), "{out}");

    let actions: Vec<(String, String)> = app
        .audit()
        .await
        .into_iter()
        .filter(|a| a.actor == "(cli)")
        .map(|a| (a.action, a.outcome))
        .collect();
    let names: Vec<&str> = actions.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(
        names,
        [
            "user_add",
            "user_role_set",
            "token_create",
            "user_disable",
            "user_enable",
            "user_password_reset",
            "token_create",
        ],
        "{actions:?}"
    );
}

#[tokio::test]
async fn cli_manages_users_and_tokens_on_sqlite() {
    cli_manages_users_and_tokens(Backend::Sqlite).await;
}

#[tokio::test]
async fn cli_manages_users_and_tokens_on_postgres() {
    cli_manages_users_and_tokens(Backend::Postgres).await;
}
