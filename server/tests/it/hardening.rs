//! Hardening (`docs/security.md`), through the real binary: the security headers on every kind
//! of response (the CSP nonce matching the page's scripts, HSTS only with `cookie_secure`),
//! the header read timeout closing a stalled connection, only `/pkg/*` and the favicon served
//! from the site root, crafted `__err` links not shown, `/readyz` details for signed-in callers
//! only, the audit CSV streamed page by page, over-long passwords refused without a hash, and
//! the sign-in throttle keyed so that one client cannot lock a user out from another.

use std::time::Duration;

use base64::Engine as _;
use redrive_core::actions::NewAuditEntry;
use redrive_testkit::Backend;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{location, Auth, Session, TestApp};
use crate::ui_actions::{Browser, ACT};

const ADMIN: &str = "admin";
const ADMIN_PW: &str = "hardening admin password";

fn admin_env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("REDRIVE_ADMIN_USER", ADMIN),
        ("REDRIVE_ADMIN_PASSWORD", ADMIN_PW),
    ]
}

/// A site root like `scripts/build-site` makes (`pkg/` and the favicon), plus files that must
/// not be served: one beside them and one in a subdirectory.
fn site_root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let pkg = dir.path().join("pkg");
    std::fs::create_dir_all(&pkg).expect("pkg");
    std::fs::write(pkg.join("redrive.js"), "export default function () {}\n").expect("js");
    std::fs::write(pkg.join("redrive.css"), "body { margin: 0 }\n").expect("css");
    std::fs::write(dir.path().join("favicon.svg"), "<svg/>").expect("favicon");
    std::fs::write(dir.path().join("secret.txt"), "not for the web").expect("secret");
    std::fs::create_dir_all(dir.path().join("sub")).expect("sub");
    std::fs::write(dir.path().join("sub").join("notes.txt"), "nor this").expect("notes");
    dir
}

fn header<'a>(res: &'a reqwest::Response, name: &str) -> &'a str {
    res.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// The nonce of a `Content-Security-Policy` (`'nonce-N'`).
fn csp_nonce(csp: &str) -> Option<String> {
    let start = csp.find("'nonce-")? + "'nonce-".len();
    let len = csp[start..].find('\'')?;
    Some(csp[start..start + len].to_string())
}

/// Asserts the security headers of `res` (`what` names it in messages). Static assets keep
/// their own caching; everything else is `no-store`.
fn assert_security_headers(res: &reqwest::Response, what: &str, hsts: bool, static_asset: bool) {
    let csp = header(res, "content-security-policy");
    assert!(
        csp.contains("frame-ancestors 'none'"),
        "{what}: CSP {csp:?}"
    );
    assert!(csp.contains("form-action 'self'"), "{what}: CSP {csp:?}");
    assert!(
        csp.contains("script-src 'self' 'nonce-"),
        "{what}: CSP {csp:?}"
    );
    assert!(!csp.contains("unsafe-inline"), "{what}: CSP {csp:?}");
    assert!(
        csp_nonce(csp).is_some_and(|n| n.len() >= 16),
        "{what}: {csp:?}"
    );
    assert_eq!(header(res, "x-content-type-options"), "nosniff", "{what}");
    assert_eq!(header(res, "referrer-policy"), "same-origin", "{what}");
    assert_eq!(header(res, "x-frame-options"), "DENY", "{what}");
    let sts = header(res, "strict-transport-security");
    if hsts {
        assert!(sts.starts_with("max-age="), "{what}: HSTS {sts:?}");
    } else {
        assert_eq!(sts, "", "{what}: HSTS without cookie_secure");
    }
    let cache = header(res, "cache-control");
    if static_asset {
        assert_ne!(cache, "no-store", "{what}: static assets may be cached");
    } else {
        assert_eq!(cache, "no-store", "{what}");
    }
}

async fn get_with(app: &TestApp, path: &str, session: Option<&Session>) -> reqwest::Response {
    match session {
        Some(s) => app.get(path, Auth::Session(s)).await,
        None => app.get(path, Auth::None).await,
    }
}

#[tokio::test]
async fn security_headers_on_every_kind_of_response() {
    let site = site_root();
    let site_path = site.path().display().to_string();
    let mut env = admin_env();
    env.push(("REDRIVE_SITE_ROOT", &site_path));
    let app = TestApp::start(&env).await;
    let s = app.sign_in(ADMIN, ADMIN_PW).await;

    // (what, path, signed in, expected status, static asset)
    let cases: [(&str, &str, bool, u16, bool); 9] = [
        ("signed-in page", "/", true, 200, false),
        ("sign-in page", "/sign-in", false, 200, false),
        ("API JSON", "/api/v1/dead-letters", true, 200, false),
        ("static JS", "/pkg/redrive.js", false, 200, true),
        ("favicon", "/favicon.svg", false, 200, true),
        ("404 page", "/no-such-page", true, 404, false),
        ("401 refusal", "/api/v1/dead-letters", false, 401, false),
        ("303 to sign in", "/overview", false, 303, false),
        ("liveness", "/healthz", false, 200, false),
    ];
    for (what, path, signed_in, status, static_asset) in cases {
        let res = get_with(&app, path, signed_in.then_some(&s)).await;
        assert_eq!(res.status().as_u16(), status, "{what}: GET {path}");
        assert_security_headers(&res, what, false, static_asset);
    }

    // A server function's answer (the session query the sign-in page makes).
    let res = reqwest::Client::new()
        .post(app.url("/api/auth/session"))
        .header("Cookie", &s.cookie)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("")
        .send()
        .await
        .expect("server function");
    assert_eq!(res.status(), 200, "server function");
    assert_security_headers(&res, "server function", false, false);

    // The page's scripts carry the nonce its CSP names, a fresh one per response.
    let res = get_with(&app, "/", Some(&s)).await;
    let nonce = csp_nonce(header(&res, "content-security-policy")).expect("nonce");
    let html = res.text().await.expect("body");
    let re = regex::Regex::new(r#"<script[^>]*\bnonce="([^"]*)""#).expect("regex");
    let script_nonces: Vec<String> = re.captures_iter(&html).map(|c| c[1].to_string()).collect();
    assert!(!script_nonces.is_empty(), "no script with a nonce: {html}");
    assert!(
        script_nonces.iter().all(|n| *n == nonce),
        "CSP nonce {nonce}, scripts {script_nonces:?}"
    );
    let scripts = html.matches("<script").count();
    assert_eq!(
        scripts,
        script_nonces.len(),
        "a script without the nonce: {html}"
    );
    let again = get_with(&app, "/", Some(&s)).await;
    assert_ne!(
        csp_nonce(header(&again, "content-security-policy")),
        Some(nonce),
        "a nonce is never reused"
    );

    // With cookie_secure, HSTS too.
    let secure = TestApp::start(&[("REDRIVE_COOKIE_SECURE", "true")]).await;
    for path in ["/healthz", "/sign-in", "/api/v1/dead-letters"] {
        let res = secure.get(path, Auth::None).await;
        assert_security_headers(&res, path, true, false);
    }
}

#[tokio::test]
async fn only_pkg_and_the_favicon_are_served_from_the_site_root() {
    let site = site_root();
    let site_path = site.path().display().to_string();
    let mut env = admin_env();
    env.push(("REDRIVE_SITE_ROOT", &site_path));
    let app = TestApp::start(&env).await;
    let s = app.sign_in(ADMIN, ADMIN_PW).await;
    for path in ["/pkg/redrive.js", "/pkg/redrive.css", "/favicon.svg"] {
        let res = app.get(path, Auth::None).await;
        assert_eq!(res.status(), 200, "GET {path}");
    }
    for path in [
        "/secret.txt",
        "/sub/notes.txt",
        "/sub/",
        "/pkg/../secret.txt",
        "/pkg/%2e%2e/secret.txt",
    ] {
        let res = app.get(path, Auth::Session(&s)).await;
        assert_eq!(res.status(), 404, "GET {path}");
        let body = res.text().await.expect("body");
        assert!(
            !body.contains("not for the web") && !body.contains("nor this"),
            "{path}"
        );
    }
    // The 404 is the app's own page.
    let body = app
        .get("/secret.txt", Auth::Session(&s))
        .await
        .text()
        .await
        .expect("body");
    assert!(body.contains("There is no page at this address"), "{body}");
}

/// Reads from `stream` until the server closes it (EOF or reset); returns what it sent. The
/// outer bound only keeps a broken server from hanging the test.
async fn read_until_closed(stream: &mut tokio::net::TcpStream) -> String {
    let mut got = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(60), async {
        let mut buf = [0u8; 1024];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(
        closed.is_ok(),
        "the server kept the stalled connection open"
    );
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test]
async fn a_connection_stalling_in_its_headers_is_closed() {
    let app = TestApp::start(&[("REDRIVE_HTTP_HEADER_READ_TIMEOUT_MS", "500")]).await;
    let addr = app.base.trim_start_matches("http://").to_string();

    // Half a request, then nothing.
    let mut slow = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        .await
        .expect("write");
    let answer = read_until_closed(&mut slow).await;
    assert!(
        !answer.contains(" 200 "),
        "a half request was served: {answer}"
    );

    // A connection that sends nothing at all.
    let mut silent = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let answer = read_until_closed(&mut silent).await;
    assert!(!answer.contains(" 200 "), "{answer}");

    // A complete request on a fresh connection is served as usual.
    let res = app.get("/healthz", Auth::None).await;
    assert_eq!(res.status(), 200);
}

#[tokio::test]
async fn a_crafted_form_error_link_does_not_put_text_into_the_page() {
    let app = TestApp::start(&[]).await;
    app.add_user("oncall", "operator", "operator-password-1")
        .await;
    let b = Browser::sign_in(&app, ("oncall", "operator-password-1")).await;
    let err = base64::engine::general_purpose::URL_SAFE
        .encode("ServerError|Your session is compromised: call +1 555 0100");
    let crafted = format!("/?status=new&__path={}&__err={err}", urlencode(ACT));
    for link in [
        crafted.clone(),
        format!("{crafted}&__sig=00000000000000000000000000000000"),
    ] {
        let res = b.get(&link).await;
        assert_eq!(res.status(), 303, "{link}");
        assert_eq!(location(&res), "/?status=new", "{link}");
        let (status, html) = b.page(&link).await;
        assert_eq!(status, 303);
        assert!(!html.contains("compromised"), "{html}");
    }
    let (_, html) = b.page("/?status=new").await;
    assert!(!html.contains("compromised"));

    // The session's own failed POST comes back signed, and its page shows the error.
    let res = b
        .submit("/", ACT, &[("op", "replay"), ("back", "/")], None)
        .await;
    assert_eq!(res.status(), 302);
    let back = location(&res);
    assert!(back.contains("__err=") && back.contains("__sig="), "{back}");
    let path = back.strip_prefix(&app.base).unwrap_or(&back).to_string();
    let (status, html) = b.page(&path).await;
    assert_eq!(status, 200, "{path}");
    assert!(html.contains("Nothing selected"), "{html}");

    // The same signed link is not valid in another session.
    let other = Browser::sign_in(&app, ("oncall", "operator-password-1")).await;
    let res = other.get(&path).await;
    assert_eq!(res.status(), 303, "{path}");
    let (_, html) = other.page(&location(&res)).await;
    assert!(!html.contains("Nothing selected"));
}

fn urlencode(s: &str) -> String {
    serde_urlencoded::to_string([("x", s)])
        .expect("encode")
        .trim_start_matches("x=")
        .to_string()
}

#[tokio::test]
async fn readyz_details_only_for_signed_in_callers() {
    let app = TestApp::start(&[]).await;
    let token = app.admin_token().await;
    let res = app.get("/readyz", Auth::None).await;
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.expect("JSON");
    assert_eq!(body, serde_json::json!({ "ready": true }));
    // A wrong token is anonymous here (the route is open), not a 401.
    let res = app.get("/readyz", Auth::Bearer("rdv_not-a-token")).await;
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.json::<Value>().await.expect("JSON"),
        serde_json::json!({ "ready": true })
    );
    let res = app.get("/readyz", Auth::Bearer(&token)).await;
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.expect("JSON");
    assert_eq!(body["ready"], true);
    assert_eq!(body["store"]["backend"], "sqlite", "{body}");
    assert!(body.get("relay").is_some(), "{body}");
}

async fn audit_csv_is_streamed_page_by_page(backend: Backend) {
    let app = TestApp::start_on(backend, &[]).await;
    let token = app.admin_token().await;
    // More rows than one page of the store's cursor (1000).
    const ROWS: usize = 1_234;
    let mut tasks = Vec::new();
    for chunk in 0..4 {
        let store = app.store.clone();
        tasks.push(tokio::spawn(async move {
            for i in (chunk..ROWS).step_by(4) {
                let mut e = NewAuditEntry {
                    actor: "csv-test".into(),
                    action: "note".into(),
                    outcome: "ok".into(),
                    ..NewAuditEntry::default()
                };
                e.reason = Some(format!("row {i}"));
                store.record_audit(&e).await.expect("audit row");
            }
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    let res = app
        .get("/api/v1/audit.csv?actor=csv-test", Auth::Bearer(&token))
        .await;
    assert_eq!(res.status(), 200);
    assert!(
        res.headers().get("content-length").is_none(),
        "a streamed body has no length up front: {:?}",
        res.headers()
    );
    assert!(header(&res, "content-type").starts_with("text/csv"));
    let text = res.text().await.expect("body");
    let mut rows = csv::Reader::from_reader(text.as_bytes());
    let ids: Vec<i64> = rows
        .records()
        .map(|r| r.expect("CSV row")[0].parse().expect("id"))
        .collect();
    assert_eq!(ids.len(), ROWS, "every row once");
    assert!(
        ids.windows(2).all(|w| w[0] > w[1]),
        "newest first, no repeats"
    );
}

#[tokio::test]
async fn audit_csv_is_streamed_page_by_page_sqlite() {
    audit_csv_is_streamed_page_by_page(Backend::Sqlite).await;
}

#[tokio::test]
async fn audit_csv_is_streamed_page_by_page_postgres() {
    audit_csv_is_streamed_page_by_page(Backend::Postgres).await;
}

#[tokio::test]
async fn an_over_long_password_is_refused_without_a_hash() {
    let mut env = admin_env();
    // One attempt per user per client: any attempt that counted would throttle the next.
    env.push(("REDRIVE_SIGN_IN_PER_USER_PER_MIN", "1"));
    let app = TestApp::start(&env).await;
    let long = "x".repeat(redrive_core::auth::MAX_PASSWORD_BYTES + 1);
    let res = reqwest::Client::new()
        .post(app.url("/auth/sign-in"))
        .header("Accept", "application/json")
        .form(&[("user", ADMIN), ("password", long.as_str())])
        .send()
        .await
        .expect("post");
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.expect("JSON");
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|e| e.contains("too long")),
        "{body}"
    );
    let res = app.sign_in_form(ADMIN, &long, "/").await;
    assert_eq!(location(&res), "/sign-in?error=too_long");
    // Neither was checked against the stored hash (no failed sign-in) nor counted.
    assert!(app.audit_of("sign_in_failed").await.is_empty());
    let s = app.sign_in(ADMIN, ADMIN_PW).await;
    assert!(!s.csrf.is_empty());
}

/// A sign-in attempt for `user` from client `ip` (via a trusted proxy): the status.
async fn attempt_from(app: &TestApp, ip: &str, user: &str, password: &str) -> u16 {
    reqwest::Client::new()
        .post(app.url("/auth/sign-in"))
        .header("Accept", "application/json")
        .header("X-Forwarded-For", ip)
        .form(&[("user", user), ("password", password)])
        .send()
        .await
        .expect("post")
        .status()
        .as_u16()
}

#[tokio::test]
async fn failed_sign_ins_from_one_client_do_not_lock_the_user_out_of_another() {
    let mut env = admin_env();
    env.push(("REDRIVE_SIGN_IN_PER_USER_PER_MIN", "3"));
    env.push(("REDRIVE_SIGN_IN_PER_IP_PER_MIN", "100"));
    env.push(("REDRIVE_TRUSTED_PROXIES", "127.0.0.1"));
    let app = TestApp::start(&env).await;
    const ATTACKER: &str = "203.0.113.9";
    const USER: &str = "198.51.100.7";
    for _ in 0..3 {
        assert_eq!(attempt_from(&app, ATTACKER, ADMIN, "guess").await, 401);
    }
    // The attacker's client is throttled for that user, even with the right password ...
    assert_eq!(attempt_from(&app, ATTACKER, ADMIN, ADMIN_PW).await, 429);
    // ... and the user, from their own machine, is not.
    assert_eq!(attempt_from(&app, USER, ADMIN, ADMIN_PW).await, 200);
    let throttled = app.audit_of("sign_in_throttled").await;
    assert_eq!(throttled.len(), 1, "{throttled:?}");
    assert_eq!(throttled[0].client_ip.as_deref(), Some(ATTACKER));

    // Many clients together reach the per-user limit of all clients.
    let mut env = admin_env();
    env.push(("REDRIVE_SIGN_IN_PER_USER_GLOBAL_PER_MIN", "4"));
    env.push(("REDRIVE_TRUSTED_PROXIES", "127.0.0.1"));
    let app = TestApp::start(&env).await;
    for i in 0..4 {
        let ip = format!("203.0.113.{i}");
        assert_eq!(attempt_from(&app, &ip, ADMIN, "guess").await, 401);
    }
    assert_eq!(attempt_from(&app, USER, ADMIN, ADMIN_PW).await, 429);
}
