//! Single sign-on through the real binary: OpenID Connect against a real OpenID Provider
//! (`testkit/oidc`, panva's `oidc-provider` under Node), driven without a browser through the
//! provider's own login and consent forms; the callback's refusals (state, provider error,
//! replay, unmapped groups, a disabled user); and reverse-proxy authentication from a trusted
//! and an untrusted peer. The role mapping itself is unit-tested in `core/src/sso.rs`.

use std::path::Path;

use redrive_core::actions::Role;
use redrive_testkit::Backend;
use serde_json::{json, Value};

use crate::support::oidc::{Browser, OidcProvider, CLIENT_ID, CLIENT_SECRET};
use crate::support::{free_port, location, Auth, Csrf, TestApp};

/// `[oidc]` and `[proxy_auth]` as a `redrive.toml` in `dir`; returns its path.
fn write_config(dir: &Path, issuer: &str, redirect: &str, trusted: &str) -> String {
    let path = dir.join("redrive.toml");
    std::fs::write(
        &path,
        format!(
            r#"
trusted_proxies = ["{trusted}"]

[oidc]
issuer_url = "{issuer}"
client_id = "{CLIENT_ID}"
redirect_url = "{redirect}"
role_mapping = {{ "redrive-admins" = "admin", "oncall" = "operator" }}

[proxy_auth]
user_header = "X-Forwarded-User"
groups_header = "X-Forwarded-Groups"
"#
        ),
    )
    .expect("write redrive.toml");
    path.display().to_string()
}

/// A provider and a redrive configured for it (the client secret from the environment, as an
/// operator would give it), on `backend`; `trusted` is `trusted_proxies`.
async fn start(backend: Backend, trusted: &str) -> (OidcProvider, TestApp, tempfile::TempDir) {
    let port = free_port();
    let redirect = format!("http://127.0.0.1:{port}/auth/oidc/callback");
    let provider = OidcProvider::start(&[&redirect]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &provider.issuer, &redirect, trusted);
    let listen = format!("127.0.0.1:{port}");
    let app = TestApp::start_on(
        backend,
        &[
            ("REDRIVE_CONFIG", config.as_str()),
            ("REDRIVE_LISTEN", listen.as_str()),
            ("REDRIVE_OIDC__CLIENT_SECRET", CLIENT_SECRET),
        ],
    )
    .await;
    (provider, app, dir)
}

/// Starts a sign-in at redrive: the authorization URL it redirects to (with the flow cookie
/// now in `browser`).
async fn start_sign_in(app: &TestApp, browser: &mut Browser, next: &str) -> String {
    let a = browser
        .get(&app.url(&format!("/auth/oidc/start?next={next}")))
        .await;
    assert_eq!(a.status, 303, "{}\n{}", a.body, app.log());
    let to = a.location.expect("a redirect to the provider");
    assert!(to.contains("code_challenge="), "PKCE: {to}");
    assert!(to.contains("nonce="), "{to}");
    assert!(browser.cookies.contains_key("redrive_oidc"));
    to
}

/// The whole flow for `login`: the callback's answer.
async fn sign_in_as(app: &TestApp, login: &str) -> (Browser, crate::support::oidc::Answer) {
    let mut browser = Browser::new();
    let auth_url = start_sign_in(app, &mut browser, "%2Fgroups").await;
    let callback = browser
        .sign_in_at_provider(&auth_url, login, &app.url("/auth/oidc/callback"))
        .await;
    let answer = browser.get(&callback).await;
    (browser, answer)
}

async fn role_of(app: &TestApp, name: &str) -> Option<(Role, bool)> {
    app.store
        .users()
        .await
        .expect("users")
        .into_iter()
        .find(|u| u.name == name)
        .map(|u| (u.role, u.disabled))
}

async fn groups_map_to_roles(backend: Backend) {
    let (_provider, app, _dir) = start(backend, "10.255.255.1").await;

    // The sign-in page offers SSO.
    let page = app.get("/sign-in", Auth::None).await.text().await.unwrap();
    assert!(page.contains("Sign in with SSO"), "{page}");

    // alice is in redrive-admins and oncall: the most powerful, admin.
    let (browser, answer) = sign_in_as(&app, "alice").await;
    assert_eq!(answer.status, 303, "{}\n{}", answer.body, app.log());
    assert_eq!(answer.location.as_deref(), Some("/groups"));
    let cookie = browser
        .cookies
        .get("redrive_session")
        .expect("a redrive session cookie");
    assert!(
        !browser.cookies.contains_key("redrive_oidc"),
        "flow cookie cleared"
    );
    assert_eq!(role_of(&app, "alice").await, Some((Role::Admin, false)));
    let res = reqwest::Client::new()
        .get(app.url("/api/v1/audit"))
        .header("Cookie", format!("redrive_session={cookie}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "the session works like a password one");
    // A password never signs in an SSO user.
    let res = app.sign_in_form("alice", "!sso", "/").await;
    assert_eq!(location(&res), "/sign-in?error=invalid");

    // bob: oncall → operator.
    let (_, answer) = sign_in_as(&app, "bob").await;
    assert_eq!(answer.status, 303, "{}", answer.body);
    assert_eq!(role_of(&app, "bob").await, Some((Role::Operator, false)));

    let rows = app.audit_of("sign_in").await;
    let details: Vec<Value> = rows
        .iter()
        .map(|r| serde_json::from_str(r.detail.as_deref().unwrap_or("{}")).unwrap())
        .collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0].actor, "alice");
    assert_eq!(details[0]["method"], "oidc");
    assert_eq!(details[0]["role"], "admin");
    assert_eq!(details[0]["created"], true);
    assert_eq!(details[1]["role"], "operator");

    // carol's only group maps to nothing: refused with a page that says so, audited.
    let (browser, answer) = sign_in_as(&app, "carol").await;
    assert_eq!(answer.status, 403, "{}", answer.body);
    assert!(
        answer.body.contains("none of your groups"),
        "{}",
        answer.body
    );
    assert!(answer.body.contains("contractors"), "{}", answer.body);
    assert!(!browser.cookies.contains_key("redrive_session"));
    assert_eq!(
        role_of(&app, "carol").await,
        None,
        "no user for a refused sign-in"
    );
    let failed: Vec<_> = app
        .audit_of("sign_in_failed")
        .await
        .into_iter()
        .filter(|r| r.detail.as_deref() == Some(r#"{"method":"oidc"}"#))
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].actor, "carol");
    assert!(
        failed[0].outcome.contains("none of your groups"),
        "{failed:?}"
    );

    // A user disabled locally stays refused, whatever the provider says.
    assert!(redrive_core::accounts::set_disabled(
        &app.store,
        &redrive_core::actions::NewAuditEntry::default(),
        None,
        "bob",
        true,
        0
    )
    .await
    .unwrap());
    let (_, answer) = sign_in_as(&app, "bob").await;
    assert_eq!(answer.status, 403, "{}", answer.body);
    assert!(answer.body.contains("disabled"), "{}", answer.body);
}

#[tokio::test]
async fn oidc_groups_map_to_roles_sqlite() {
    groups_map_to_roles(Backend::Sqlite).await;
}

#[tokio::test]
async fn oidc_groups_map_to_roles_postgres() {
    groups_map_to_roles(Backend::Postgres).await;
}

async fn callback_refusals(backend: Backend) {
    let (_provider, app, _dir) = start(backend, "10.255.255.1").await;
    let callback = app.url("/auth/oidc/callback");

    // No flow cookie at all.
    let mut stranger = Browser::new();
    let a = stranger
        .get(&format!("{callback}?code=abc&state=forged"))
        .await;
    assert_eq!(a.status, 400, "{}", a.body);
    assert!(a.body.contains("did not start this sign-in"), "{}", a.body);

    // The state does not match this browser's.
    let mut browser = Browser::new();
    let auth_url = start_sign_in(&app, &mut browser, "%2F").await;
    let a = browser
        .get(&format!("{callback}?code=abc&state=not-the-one"))
        .await;
    assert_eq!(a.status, 400, "{}", a.body);
    assert!(a.body.contains("state mismatch"), "{}", a.body);

    // The provider's own refusal (the user declined).
    let mut browser = Browser::new();
    start_sign_in(&app, &mut browser, "%2F").await;
    let a = browser
        .get(&format!(
            "{callback}?error=access_denied&error_description=End-User+aborted+interaction&state=x"
        ))
        .await;
    assert_eq!(a.status, 403, "{}", a.body);
    assert!(a.body.contains("access_denied"), "{}", a.body);
    assert!(
        a.body.contains("End-User aborted interaction"),
        "{}",
        a.body
    );
    assert!(a.body.contains("href=\"/sign-in\""), "{}", a.body);

    // A good answer works once; the same callback again (replayed) is refused.
    let mut browser = Browser::new();
    let auth_url2 = start_sign_in(&app, &mut browser, "%2F").await;
    let back = browser
        .sign_in_at_provider(&auth_url2, "bob", &callback)
        .await;
    let saved = browser
        .cookies
        .get("redrive_oidc")
        .cloned()
        .expect("flow cookie");
    let a = browser.get(&back).await;
    assert_eq!(a.status, 303, "{}", a.body);
    assert_eq!(a.location.as_deref(), Some("/overview"));
    browser.cookies.insert("redrive_oidc".into(), saved);
    let a = browser.get(&back).await;
    assert_eq!(a.status, 400, "{}", a.body);
    assert!(a.body.contains("expired or was already used"), "{}", a.body);

    // A code from another sign-in (this browser's state, someone else's code) is refused by
    // the provider at the token exchange (PKCE): 401, never 500.
    let mut other = Browser::new();
    let other_url = start_sign_in(&app, &mut other, "%2F").await;
    let other_back = other
        .sign_in_at_provider(&other_url, "alice", &callback)
        .await;
    let code = other_back
        .split(['?', '&'])
        .find_map(|kv| kv.strip_prefix("code="))
        .expect("code")
        .to_string();
    let mut mine = Browser::new();
    let mine_url = start_sign_in(&app, &mut mine, "%2F").await;
    let state = mine_url
        .split(['?', '&'])
        .find_map(|kv| kv.strip_prefix("state="))
        .expect("state")
        .to_string();
    let a = mine
        .get(&format!("{callback}?code={code}&state={state}"))
        .await;
    assert_eq!(a.status, 401, "{}", a.body);
    assert!(
        a.body.contains("did not accept the authorization code"),
        "{}",
        a.body
    );
    drop(auth_url);

    let failed = app.audit_of("sign_in_failed").await;
    assert_eq!(failed.len(), 5, "{failed:?}");
    assert!(failed
        .iter()
        .all(|r| r.detail.as_deref() == Some(r#"{"method":"oidc"}"#)));
}

#[tokio::test]
async fn oidc_callback_refusals_sqlite() {
    callback_refusals(Backend::Sqlite).await;
}

#[tokio::test]
async fn oidc_callback_refusals_postgres() {
    callback_refusals(Backend::Postgres).await;
}

#[tokio::test]
async fn oidc_off_answers_404_and_password_only_mode() {
    let app = TestApp::start(&[]).await;
    let res = app.get("/auth/oidc/start", Auth::None).await;
    assert_eq!(res.status(), 404);
    let page = app.get("/sign-in", Auth::None).await.text().await.unwrap();
    assert!(!page.contains("Sign in with SSO"));

    // `disable_password_sign_in`: the form is refused, with its own message code.
    let (_provider, app, dir) = {
        let port = free_port();
        let redirect = format!("http://127.0.0.1:{port}/auth/oidc/callback");
        let provider = OidcProvider::start(&[&redirect]).await;
        let dir = tempfile::tempdir().unwrap();
        let config = write_config(dir.path(), &provider.issuer, &redirect, "10.255.255.1");
        let mut text = std::fs::read_to_string(&config).unwrap();
        text = text.replace("[oidc]\n", "[oidc]\ndisable_password_sign_in = true\n");
        std::fs::write(&config, text).unwrap();
        let listen = format!("127.0.0.1:{port}");
        let app = TestApp::start(&[
            ("REDRIVE_CONFIG", config.as_str()),
            ("REDRIVE_LISTEN", listen.as_str()),
            ("REDRIVE_ADMIN_USER", "admin"),
            ("REDRIVE_ADMIN_PASSWORD", "correct horse battery"),
        ])
        .await;
        (provider, app, dir)
    };
    let res = app
        .sign_in_form("admin", "correct horse battery", "/")
        .await;
    assert_eq!(location(&res), "/sign-in?error=sso_only");
    drop(dir);
}

async fn proxy_headers(backend: Backend) {
    // Trusted: the test's own address.
    let (_provider, app, _dir) = start(backend, "127.0.0.1").await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let as_proxy = |path: &str, user: &str, groups: &str| {
        client
            .get(app.url(path))
            .header("X-Forwarded-User", user)
            .header("X-Forwarded-Groups", groups)
    };
    let res = as_proxy("/api/v1/audit", "dora", "staff, oncall")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "{}", app.log());
    assert_eq!(role_of(&app, "dora").await, Some((Role::Operator, false)));
    // A page too, without any session.
    let res = as_proxy("/groups", "dora", "oncall").send().await.unwrap();
    assert_eq!(res.status(), 200);
    // Groups changed at the IdP: the role follows.
    let res = as_proxy("/api/v1/audit", "dora", "redrive-admins")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(role_of(&app, "dora").await, Some((Role::Admin, false)));
    let rows = app.audit_of("sign_in").await;
    assert_eq!(rows.len(), 2, "first sight and the role change: {rows:?}");
    let d: Value = serde_json::from_str(rows[1].detail.as_deref().unwrap()).unwrap();
    assert_eq!(d["method"], "proxy");
    assert_eq!(d["previous_role"], "operator");
    // No mapped group: 403, not a sign-in.
    let res = as_proxy("/api/v1/audit", "erin", "contractors")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    assert_eq!(role_of(&app, "erin").await, None);
    // Disabled locally: refused.
    assert!(redrive_core::accounts::set_disabled(
        &app.store,
        &redrive_core::actions::NewAuditEntry::default(),
        None,
        "dora",
        true,
        0
    )
    .await
    .unwrap());
    let res = as_proxy("/api/v1/audit", "dora", "oncall")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);

    // State changes from a browser must come from this site. (A delete over a filter that
    // matches nothing: an action that changes nothing; a missing id would answer 404.)
    let nothing = json!({"filter": {"dlq_topic": "sso-test.none"}});
    let fred = |site: &str| {
        client
            .post(app.url("/api/v1/dead-letters/delete"))
            .header("X-Forwarded-User", "fred")
            .header("X-Forwarded-Groups", "oncall")
            .header("Sec-Fetch-Site", site)
            .json(&nothing)
    };
    let res = fred("cross-site").send().await.unwrap();
    assert_eq!(res.status(), 403);
    let res = fred("same-origin").send().await.unwrap();
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    // A script (no browser metadata) needs no token either.
    let res = client
        .post(app.url("/api/v1/dead-letters/delete"))
        .header("X-Forwarded-User", "fred")
        .header("X-Forwarded-Groups", "oncall")
        .json(&nothing)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
}

#[tokio::test]
async fn proxy_headers_from_a_trusted_peer_sqlite() {
    proxy_headers(Backend::Sqlite).await;
}

#[tokio::test]
async fn proxy_headers_from_a_trusted_peer_postgres() {
    proxy_headers(Backend::Postgres).await;
}

#[tokio::test]
async fn proxy_headers_from_an_untrusted_peer_are_ignored() {
    // The proxy is elsewhere: the test's requests are not from it.
    let (_provider, app, _dir) = start(Backend::Sqlite, "10.255.255.1").await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let res = client
        .get(app.url("/api/v1/audit"))
        .header("X-Forwarded-User", "mallory")
        .header("X-Forwarded-Groups", "redrive-admins")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    let res = client
        .get(app.url("/groups"))
        .header("X-Forwarded-User", "mallory")
        .header("X-Forwarded-Groups", "redrive-admins")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/sign-in?next=%2Fgroups");
    assert_eq!(role_of(&app, "mallory").await, None);
    assert!(
        app.log().contains("ignored proxy authentication headers"),
        "{}",
        app.log()
    );
    // A session still works beside it (and the headers do not change who it is).
    app.add_user("amy", "viewer", "a long passphrase").await;
    let s = app.sign_in("amy", "a long passphrase").await;
    let res = app
        .post_json(
            "/api/v1/dead-letters/delete",
            Auth::Session(&s),
            Csrf::Right,
            &json!({"ids": [1]}),
        )
        .await;
    assert_eq!(res.status(), 403, "amy is a viewer");
}
