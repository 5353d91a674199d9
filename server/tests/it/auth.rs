//! Identity through the real binary: sign-in and its cookie, redirects and 401s, sign-out,
//! idle and absolute session expiry, login throttling, API tokens made with the CLI, the
//! bootstrap admin, public routes. Every test starts `redrive serve` on port 0 over a fresh
//! SQLite store (`support`); the authorisation matrix is in `authz_matrix.rs`.

use std::time::{Duration, Instant};

use crate::support::{location, set_cookie, Auth, Csrf, TestApp};
use redrive_testkit::Backend;
use serde_json::{json, Value};

const ADMIN: &str = "admin";
const ADMIN_PW: &str = "correct horse battery";

fn bootstrap() -> [(&'static str, &'static str); 2] {
    [
        ("REDRIVE_ADMIN_USER", ADMIN),
        ("REDRIVE_ADMIN_PASSWORD", ADMIN_PW),
    ]
}

#[tokio::test]
async fn pages_redirect_to_sign_in_and_the_api_answers_401() {
    let app = TestApp::start(&bootstrap()).await;

    let res = app.get("/groups?status=new", Auth::None).await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/sign-in?next=%2Fgroups%3Fstatus%3Dnew");
    let res = app.get("/", Auth::None).await;
    assert_eq!(location(&res), "/sign-in");
    let res = app.get("/dead-letters/1/raw/value", Auth::None).await;
    assert_eq!(res.status(), 303);

    for path in [
        "/api/v1/dead-letters",
        "/api/v1/audit",
        "/api/v1/replays",
        "/metrics",
    ] {
        let res = app.get(path, Auth::None).await;
        assert_eq!(res.status(), 401, "{path}");
        let challenge = res
            .headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        assert!(challenge.starts_with("Bearer"), "{path}: {challenge}");
        let body: Value = res.json().await.expect("JSON");
        assert!(
            body["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{body}"
        );
    }
    let res = app
        .post_json(
            "/api/v1/replays",
            Auth::None,
            Csrf::Missing,
            &json!({"ids": [1]}),
        )
        .await;
    assert_eq!(res.status(), 401);
    let res = app
        .get("/api/v1/dead-letters", Auth::Bearer("rdv_not-a-real-token"))
        .await;
    assert_eq!(res.status(), 401);

    // A browser (asking for HTML) posting a plain form to a server function is sent to sign
    // in rather than shown JSON.
    let res = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
        .post(app.url("/api/ui/act"))
        .header("Accept", "text/html,application/xhtml+xml")
        .form(&[("op", "delete")])
        .send()
        .await
        .expect("post");
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/sign-in");

    // Open to anyone.
    assert_eq!(app.get("/healthz", Auth::None).await.status(), 200);
    assert_ne!(app.get("/readyz", Auth::None).await.status(), 401);
    let res = app.get("/sign-in", Auth::None).await;
    assert_eq!(res.status(), 200);
    let html = res.text().await.expect("body");
    assert!(html.contains("action=\"/auth/sign-in\""), "{html}");
    assert!(html.contains("name=\"password\""), "{html}");
    let res = app.get("/pkg/redrive.js", Auth::None).await;
    assert_ne!(
        res.status(),
        303,
        "static assets are not behind the sign-in"
    );
    assert_ne!(res.status(), 401);
}

#[tokio::test]
async fn sign_in_sets_a_hardened_cookie_and_goes_to_next() {
    let app = TestApp::start(&bootstrap()).await;

    // Wrong password: back to the form, with the error code and `next` kept.
    let res = app.sign_in_form(ADMIN, "wrong password", "/groups").await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/sign-in?error=invalid&next=%2Fgroups");
    assert!(set_cookie(&res).is_none());
    let page = app
        .get("/sign-in?error=invalid&next=%2Fgroups", Auth::None)
        .await
        .text()
        .await
        .expect("body");
    assert!(page.contains("Wrong user name or password."), "{page}");
    assert!(page.contains("value=\"/groups\""), "{page}");
    // Unknown user: the same answer.
    let res = app.sign_in_form("nobody", "whatever", "/").await;
    assert_eq!(location(&res), "/sign-in?error=invalid");

    // Right password: to `next`, with the cookie.
    let res = app.sign_in_form(ADMIN, ADMIN_PW, "/groups").await;
    assert_eq!(res.status(), 303, "{}", app.log());
    assert_eq!(location(&res), "/groups");
    let cookie = set_cookie(&res).expect("a session cookie");
    let flags: Vec<&str> = cookie.split(';').map(str::trim).collect();
    for flag in ["HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(flags.contains(&flag), "{cookie}");
    }
    assert!(!flags.contains(&"Secure"), "{cookie}");
    let value = flags[0].trim_start_matches("redrive_session=");
    assert!(value.starts_with("rdvs_") && value.len() > 40, "{cookie}");
    // Only the token's hash is stored.
    let sessions: Vec<String> = sqlx_strings(&app, "SELECT id_hash FROM sessions").await;
    assert!(sessions.iter().all(|h| h.len() == 64 && !h.contains(value)));

    let session = crate::support::Session {
        cookie: flags[0].to_string(),
        csrf: String::new(),
        set_cookie: cookie.clone(),
    };
    let res = app.get("/groups", Auth::Session(&session)).await;
    assert_eq!(res.status(), 200);
    let res = app
        .get("/api/v1/dead-letters", Auth::Session(&session))
        .await;
    assert_eq!(res.status(), 200);

    // `next` never leaves the site.
    for evil in [
        "https://evil.example/",
        "//evil.example/x",
        "/\\evil.example",
    ] {
        let res = app.sign_in_form(ADMIN, ADMIN_PW, evil).await;
        assert_eq!(location(&res), "/overview", "next={evil}");
    }
    // A form posted from another site is refused (login CSRF).
    let res = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
        .post(app.url("/auth/sign-in"))
        .header("Origin", "https://evil.example")
        .form(&[("user", ADMIN), ("password", ADMIN_PW)])
        .send()
        .await
        .expect("post");
    assert_eq!(location(&res), "/sign-in?error=cross_site");
    assert!(set_cookie(&res).is_none());

    let failed = app.audit_of("sign_in_failed").await;
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert_eq!(failed[0].actor, ADMIN);
    assert_eq!(failed[1].actor, "nobody");
    assert_eq!(failed[0].client_ip.as_deref(), Some("127.0.0.1"));
    let ok = app.audit_of("sign_in").await;
    assert_eq!(ok.len(), 4);
    assert!(ok.iter().all(|a| a.actor == ADMIN && a.outcome == "ok"));
    // The bootstrap admin was created and audited.
    let added = app.audit_of("user_add").await;
    assert_eq!(added.len(), 1);
    assert_eq!(added[0].actor, "(bootstrap)");
}

async fn sqlx_strings(app: &TestApp, sql: &str) -> Vec<String> {
    use sqlx::Connection;
    let mut conn = sqlx::SqliteConnection::connect(&app.db_url)
        .await
        .expect("connect");
    sqlx::query_scalar::<_, String>(sql)
        .fetch_all(&mut conn)
        .await
        .expect("query")
}

#[tokio::test]
async fn cookie_secure_marks_the_cookie_secure() {
    let mut env = bootstrap().to_vec();
    env.push(("REDRIVE_COOKIE_SECURE", "true"));
    let app = TestApp::start(&env).await;
    let s = app.sign_in(ADMIN, ADMIN_PW).await;
    assert!(
        s.set_cookie.split(';').any(|f| f.trim() == "Secure"),
        "{}",
        s.set_cookie
    );
}

#[tokio::test]
async fn sign_out_needs_the_csrf_token_and_ends_the_session() {
    let app = TestApp::start(&bootstrap()).await;
    let s = app.sign_in(ADMIN, ADMIN_PW).await;

    let res = app
        .post_form("/auth/sign-out", Auth::Session(&s), Csrf::Missing, &[])
        .await;
    assert_eq!(res.status(), 403);
    let res = app
        .post_form("/auth/sign-out", Auth::Session(&s), Csrf::Wrong, &[])
        .await;
    assert_eq!(res.status(), 403);
    assert_eq!(app.get("/", Auth::Session(&s)).await.status(), 200);
    assert!(app.audit_of("sign_out").await.is_empty());

    let res = app
        .post_form("/auth/sign-out", Auth::Session(&s), Csrf::Right, &[])
        .await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/sign-in");
    let cleared = set_cookie(&res).expect("the cookie is cleared");
    assert!(cleared.contains("Max-Age=0"), "{cleared}");

    // The old cookie is worthless now, even if the browser kept it.
    let res = app.get("/groups", Auth::Session(&s)).await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/sign-in?error=expired&next=%2Fgroups");
    assert_eq!(
        app.get("/api/v1/dead-letters", Auth::Session(&s))
            .await
            .status(),
        401
    );
    let out = app.audit_of("sign_out").await;
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].actor, ADMIN);
}

#[tokio::test]
async fn sessions_expire_when_idle() {
    let mut env = bootstrap().to_vec();
    env.push(("REDRIVE_SESSION_IDLE_TIMEOUT_MS", "1500"));
    let app = TestApp::start(&env).await;
    let s = app.sign_in(ADMIN, ADMIN_PW).await;
    // Activity keeps it alive well past the idle timeout...
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(3000) {
        let res = app.get("/api/v1/dead-letters", Auth::Session(&s)).await;
        assert_eq!(res.status(), 200, "after {:?}", start.elapsed());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // ...and a pause longer than it ends it.
    tokio::time::sleep(Duration::from_millis(1700)).await;
    let res = app.get("/", Auth::Session(&s)).await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/sign-in?error=expired");
}

#[tokio::test]
async fn sessions_expire_absolutely_however_busy() {
    let mut env = bootstrap().to_vec();
    env.push(("REDRIVE_SESSION_ABSOLUTE_TIMEOUT_MS", "2500"));
    let app = TestApp::start(&env).await;
    let signed_in = Instant::now();
    let s = app.sign_in(ADMIN, ADMIN_PW).await;
    loop {
        let status = app
            .get("/api/v1/dead-letters", Auth::Session(&s))
            .await
            .status();
        let t = signed_in.elapsed();
        if status == 401 {
            assert!(t >= Duration::from_millis(2400), "ended early, after {t:?}");
            break;
        }
        assert_eq!(status, 200);
        assert!(t < Duration::from_millis(6000), "still valid after {t:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Signing in again gives a new session.
    let s2 = app.sign_in(ADMIN, ADMIN_PW).await;
    assert_eq!(
        app.get("/api/v1/dead-letters", Auth::Session(&s2))
            .await
            .status(),
        200
    );
}

#[tokio::test]
async fn sign_in_is_throttled_per_user_and_per_client() {
    let mut env = bootstrap().to_vec();
    env.push(("REDRIVE_SIGN_IN_PER_USER_PER_MIN", "3"));
    env.push(("REDRIVE_SIGN_IN_PER_IP_PER_MIN", "6"));
    let app = TestApp::start(&env).await;

    for _ in 0..3 {
        let res = app.sign_in_form(ADMIN, "wrong password", "/").await;
        assert_eq!(location(&res), "/sign-in?error=invalid");
    }
    // The fourth attempt is refused, even with the right password.
    let res = app.sign_in_form(ADMIN, ADMIN_PW, "/").await;
    assert_eq!(location(&res), "/sign-in?error=throttled");
    assert!(set_cookie(&res).is_none());
    let page = app
        .get("/sign-in?error=throttled", Auth::None)
        .await
        .text()
        .await
        .expect("body");
    assert!(page.contains("Too many sign-in attempts"), "{page}");
    // A script asking for JSON gets 429 with Retry-After.
    let res = reqwest::Client::new()
        .post(app.url("/auth/sign-in"))
        .header("Accept", "application/json")
        .form(&[("user", ADMIN), ("password", ADMIN_PW)])
        .send()
        .await
        .expect("post");
    assert_eq!(res.status(), 429);
    let retry: u64 = res
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("Retry-After");
    assert!((1..=60).contains(&retry), "{retry}");

    // Another name from the same client: allowed until the client's own limit (6).
    let res = app.sign_in_form("someone", "wrong password", "/").await;
    assert_eq!(location(&res), "/sign-in?error=invalid");
    let res = app
        .sign_in_form("someone-else", "wrong password", "/")
        .await;
    assert_eq!(location(&res), "/sign-in?error=throttled");

    // Audited once per limit and key, not once per attempt.
    let throttled = app.audit_of("sign_in_throttled").await;
    assert_eq!(throttled.len(), 2, "{throttled:?}");
    assert_eq!(throttled[0].actor, ADMIN);
    assert!(throttled[0].outcome.contains("user"), "{throttled:?}");
    assert_eq!(throttled[1].actor, "someone-else");
    assert!(throttled[1].outcome.contains("client"), "{throttled:?}");
}

#[tokio::test]
async fn api_tokens_from_the_cli() {
    let app = TestApp::start(&bootstrap()).await;

    // user add: the password comes from stdin, and must be long enough.
    let (code, _, err) = app
        .cli(
            &[
                "user",
                "add",
                "ops",
                "--role",
                "operator",
                "--password-stdin",
            ],
            Some("short\n"),
        )
        .await;
    assert_ne!(code, Some(0));
    assert!(err.contains("at least 8"), "{err}");
    let (code, _, err) = app
        .cli(
            &[
                "user",
                "add",
                "ops",
                "--role",
                "operator",
                "--password-stdin",
            ],
            Some(""),
        )
        .await;
    assert_ne!(code, Some(0));
    assert!(err.contains("empty"), "{err}");
    let (code, _, err) = app
        .cli(&["user", "add", "ops", "--role", "operator"], None)
        .await;
    assert_ne!(code, Some(0));
    assert!(err.contains("--password-stdin"), "{err}");
    let (code, _, err) = app
        .cli(
            &["user", "add", "ops", "--role", "root", "--password-stdin"],
            Some("long enough\n"),
        )
        .await;
    assert_ne!(code, Some(0));
    assert!(err.contains("not a role"), "{err}");
    app.add_user("ops", "operator", "ops password").await;
    let (code, _, err) = app
        .cli(
            &["user", "add", "ops", "--role", "viewer", "--password-stdin"],
            Some("ops password\n"),
        )
        .await;
    assert_ne!(code, Some(0));
    assert!(err.contains("already exists"), "{err}");
    let (_, out, _) = app.cli(&["user", "list"], None).await;
    assert!(out.contains("ops") && out.contains("operator"), "{out}");
    // The trailing newline of stdin is not part of the password.
    app.sign_in("ops", "ops password").await;
    let added = app.audit_of("user_add").await;
    assert_eq!(added.len(), 2, "bootstrap + ops: {added:?}");

    let (code, _, err) = app.cli(&["token", "create", "--user", "ghost"], None).await;
    assert_ne!(code, Some(0));
    assert!(err.contains("no user"), "{err}");
    let token = app.create_token("ops").await;

    // The token authenticates API calls as its user, without CSRF.
    let res = app.get("/api/v1/dead-letters", Auth::Bearer(&token)).await;
    assert_eq!(res.status(), 200, "{}", app.log());
    let res = app
        .post_json(
            "/api/v1/dead-letters/delete",
            Auth::Bearer(&token),
            Csrf::Missing,
            &json!({"filter": {"dlq_topic": "auth-test.none"}, "reason": "token test"}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.expect("JSON");
    assert_eq!(body["affected"], 0);
    let deletes = app.audit_of("delete").await;
    assert_eq!(deletes.len(), 1);
    assert_eq!(deletes[0].actor, "ops");
    assert!(deletes[0].via_token.is_some());
    assert_eq!(deletes[0].client_ip.as_deref(), Some("127.0.0.1"));

    // Listed with its last use; only its hash is stored.
    let (_, out, _) = app.cli(&["token", "list"], None).await;
    let line = out
        .lines()
        .find(|l| l.contains("ops"))
        .unwrap_or_else(|| panic!("{out}"));
    let id = line.split_whitespace().next().expect("id").to_string();
    assert!(!out.contains(&token));
    // Recorded off the request path: shortly after.
    redrive_testkit::wait_for("the token's last use", Duration::from_secs(10), || async {
        let tokens = app.store.api_tokens(Some("ops")).await.ok()?;
        tokens[0].last_used_ms
    })
    .await
    .expect("last use recorded");
    assert_eq!(app.audit_of("token_create").await.len(), 1);

    // Revoked: 401 from then on.
    let (code, _, err) = app.cli(&["token", "revoke", &id], None).await;
    assert_eq!(code, Some(0), "{err}");
    let res = app.get("/api/v1/dead-letters", Auth::Bearer(&token)).await;
    assert_eq!(res.status(), 401);
    let (code, _, _) = app.cli(&["token", "revoke", &id], None).await;
    assert_ne!(code, Some(0), "revoking twice is an error");
    assert_eq!(app.audit_of("token_revoke").await.len(), 1);
}

#[tokio::test]
async fn the_bootstrap_admin_is_made_only_for_an_empty_store() {
    // A store with a user already: the admin variables are ignored.
    let (url, dir) = redrive_testkit::fresh_database(Backend::Sqlite)
        .await
        .expect("db");
    let store = redrive_core::store::Store::connect(&url)
        .await
        .expect("connect");
    store.migrate().await.expect("migrate");
    let phc = redrive_core::auth::hash_password("someone's password").expect("hash");
    store
        .create_user(&redrive_core::store::NewUser {
            name: "first",
            role: redrive_core::actions::Role::Viewer,
            password_hash: &phc,
            created_at_ms: 0,
        })
        .await
        .expect("create")
        .expect("new");
    let app = TestApp::serve(url, store, dir, &bootstrap()).await;
    let res = app.sign_in_form(ADMIN, ADMIN_PW, "/").await;
    assert_eq!(location(&res), "/sign-in?error=invalid");
    assert!(app.audit_of("user_add").await.is_empty());

    // A password too short stops `serve` with a message naming the setting.
    let (db, _dir) = redrive_testkit::fresh_database(Backend::Sqlite)
        .await
        .expect("db");
    let out = crate::support::redrive_command()
        .arg("serve")
        .env("REDRIVE_DATABASE_URL", &db)
        .env("REDRIVE_LISTEN", "127.0.0.1:0")
        .env("REDRIVE_INGEST_ENABLED", "false")
        .env("REDRIVE_ADMIN_USER", ADMIN)
        .env("REDRIVE_ADMIN_PASSWORD", "short")
        .output()
        .await
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("admin_password"), "{err}");
}

#[tokio::test]
async fn metrics_can_be_made_public() {
    let mut env = bootstrap().to_vec();
    env.push(("REDRIVE_METRICS_PUBLIC", "true"));
    let app = TestApp::start(&env).await;
    assert_eq!(app.get("/metrics", Auth::None).await.status(), 200);
    assert_eq!(
        app.get("/api/v1/dead-letters", Auth::None).await.status(),
        401
    );
}

#[tokio::test]
async fn sign_in_and_tokens_on_postgres() {
    let app = TestApp::start_on(Backend::Postgres, &bootstrap()).await;
    let s = app.sign_in(ADMIN, ADMIN_PW).await;
    assert_eq!(
        app.get("/api/v1/dead-letters", Auth::Session(&s))
            .await
            .status(),
        200
    );
    let token = app.create_token(ADMIN).await;
    assert_eq!(
        app.get("/api/v1/audit", Auth::Bearer(&token))
            .await
            .status(),
        200
    );
    let res = app
        .post_form("/auth/sign-out", Auth::Session(&s), Csrf::Right, &[])
        .await;
    assert_eq!(res.status(), 303);
    assert_eq!(
        app.get("/api/v1/dead-letters", Auth::Session(&s))
            .await
            .status(),
        401
    );
    let actions: Vec<String> = app.audit().await.into_iter().map(|a| a.action).collect();
    assert_eq!(
        actions,
        ["user_add", "sign_in", "token_create", "sign_out"],
        "{actions:?}"
    );
}
