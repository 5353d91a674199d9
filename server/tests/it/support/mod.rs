//! The one harness of the integration tests: [`TestApp`] is the real `redrive` binary on port
//! 0 over a fresh store (SQLite or PostgreSQL, optionally seeded), with users and tokens made
//! with its own CLI, and requests that sign in the way a browser or a script does;
//! [`redrive_command`] and [`run_redrive`] run the binary's other subcommands;
//! [`broker::OwnBroker`] is a Kafka broker a test may stop and start.

pub mod broker;
mod in_process;
pub mod oidc;
pub mod receiver;
pub mod replay;
pub mod sql;

pub use in_process::{site_router_as_admin, InProcessSite};

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redrive_core::actions::{AuditEntry, AuditQuery};
use redrive_core::store::Store;
use redrive_core::NewDeadLetter;
use redrive_testkit::{fresh_database, Backend};
use reqwest::header::{COOKIE, SET_COOKIE};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

/// The real binary, serving a fresh store.
pub struct TestApp {
    pub base: String,
    pub db_url: String,
    /// The same database, for setting up data and reading the audit trail.
    pub store: Store,
    child: Child,
    stderr: Arc<Mutex<String>>,
    client: reqwest::Client,
    /// Shared by [`TestApp::another_instance`]s: the database is dropped with the last of
    /// them, not when one instance of several is killed and dropped.
    db: Arc<redrive_testkit::TestDatabase>,
    _site: tempfile::TempDir,
}

/// A signed-in browser session.
#[derive(Debug, Clone)]
pub struct Session {
    /// `redrive_session=...`, for the `Cookie` header.
    pub cookie: String,
    /// The session's CSRF token.
    pub csrf: String,
    /// The raw `Set-Cookie` header that created it.
    pub set_cookie: String,
}

/// How a request authenticates.
#[derive(Debug, Clone, Copy)]
pub enum Auth<'a> {
    None,
    Session(&'a Session),
    Bearer(&'a str),
}

/// Which CSRF token a session request carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Csrf {
    /// The session's own.
    Right,
    Missing,
    Wrong,
}

/// Sends the in-process `tracing` events of the calling test (ingest, store, relay run in the
/// test's own runtime) to the test's captured output: libtest prints them only when the test
/// fails, so a CI failure comes with the log that explains it. `RUST_LOG` overrides the
/// filter (default: `redrive_core=debug`). Idempotent; the first test to call it installs it.
pub fn log_to_test_output() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("redrive_core=debug"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

/// The `redrive` binary with no `REDRIVE_*` setting inherited from the developer's shell (the
/// `REDRIVE_TEST_*` ones stay), logging at debug: the one way every test runs it. Blocking
/// flavour, for tests that kill it (`Child::kill` is SIGKILL) or log to a file.
pub fn redrive_std_command() -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_redrive"));
    for (k, _) in std::env::vars() {
        if k.starts_with("REDRIVE_") && !k.starts_with("REDRIVE_TEST_") {
            cmd.env_remove(k);
        }
    }
    cmd.env("REDRIVE_LOG", "info,redrive=debug");
    cmd
}

/// [`redrive_std_command`] for tokio, killed when dropped.
pub fn redrive_command() -> Command {
    let mut cmd = Command::from(redrive_std_command());
    cmd.kill_on_drop(true);
    cmd
}

impl TestApp {
    /// Starts `redrive serve` (no ingest, Kafka unreachable) over a fresh SQLite store with
    /// extra `REDRIVE_*` settings.
    pub async fn start(env: &[(&str, &str)]) -> TestApp {
        TestApp::start_on(Backend::Sqlite, env).await
    }

    /// The same over a fresh store of `backend`.
    pub async fn start_on(backend: Backend, env: &[(&str, &str)]) -> TestApp {
        TestApp::with_records(backend, &[], env).await
    }

    /// The same over a fresh store of `backend` that already holds `records`.
    pub async fn with_records(
        backend: Backend,
        records: &[NewDeadLetter],
        env: &[(&str, &str)],
    ) -> TestApp {
        let (db_url, dir) = fresh_database(backend).await.expect("a fresh database");
        let store = Store::connect(&db_url).await.expect("connect");
        store.migrate().await.expect("migrate");
        if !records.is_empty() {
            let n = store.insert_batch(records).await.expect("insert_batch");
            assert_eq!(n, records.len() as u64);
        }
        TestApp::serve(db_url, store, dir, env).await
    }

    /// Starts `redrive serve` over an existing database. The site root is an empty directory
    /// (pages render without hydration) unless `env` sets `REDRIVE_SITE_ROOT`. `db` is kept
    /// alive as long as this app (and removes the database when the last holder is dropped).
    pub async fn serve(
        db_url: String,
        store: Store,
        db: impl Into<Arc<redrive_testkit::TestDatabase>>,
        env: &[(&str, &str)],
    ) -> TestApp {
        let site = tempfile::tempdir().expect("tempdir");
        let mut cmd = redrive_command();
        cmd.arg("serve")
            .env("REDRIVE_DATABASE_URL", &db_url)
            .env("REDRIVE_LISTEN", "127.0.0.1:0")
            .env("REDRIVE_INGEST_ENABLED", "false")
            .env("REDRIVE_KAFKA_BROKERS", "127.0.0.1:9")
            .env("REDRIVE_SITE_ROOT", site.path());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let (child, base, stderr) = spawn_and_wait_for_address(cmd).await;
        TestApp {
            base,
            db_url,
            store,
            child,
            stderr,
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("client"),
            db: db.into(),
            _site: site,
        }
    }

    /// An admin user made directly in the store, and an API token of theirs (for tests that
    /// are about something other than authentication).
    pub async fn admin_token(&self) -> String {
        use redrive_core::auth::{hash_password, new_api_token, secret_hash};
        let phc = hash_password("api-test-password").expect("hash");
        let user = self
            .store
            .create_user(&redrive_core::store::NewUser {
                name: "api-test",
                role: redrive_core::actions::Role::Admin,
                password_hash: &phc,
                created_at_ms: 0,
            })
            .await
            .expect("create user")
            .expect("a new user");
        let token = new_api_token().expect("token");
        self.store
            .create_api_token(user, Some("api tests"), &secret_hash(&token), 0)
            .await
            .expect("create token");
        token
    }

    /// Sends SIGTERM and returns the exit code (within `deadline`) and the whole log.
    pub async fn terminate(mut self, deadline: Duration) -> (Option<i32>, String) {
        let pid = self.child.id().expect("running child").to_string();
        let ok = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill -TERM {pid} failed");
        let status = tokio::time::timeout(deadline, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("redrive did not stop on SIGTERM\n{}", self.log()))
            .expect("wait");
        // Let the stderr reader drain the last lines.
        tokio::time::sleep(Duration::from_millis(100)).await;
        (status.code(), self.log())
    }

    /// SIGKILL: the process dies at once, without its shutdown (no lock released, no batch
    /// finished), as in a crash; waits until it is gone.
    pub async fn kill(&mut self) {
        self.child.kill().await.expect("SIGKILL redrive");
    }

    /// The process id of the running binary.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("running child")
    }

    /// Sends `signal` (a name `kill -s` takes: `STOP`, `CONT`, ...) to the binary. SIGSTOP
    /// freezes it where it is, so a test can read the state it would leave behind if it died
    /// at that instant, then SIGKILL it (or SIGCONT it to go on).
    pub fn signal(&self, signal: &str) {
        let pid = self.pid().to_string();
        let ok = std::process::Command::new("kill")
            .args(["-s", signal, &pid])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill -s {signal} {pid} failed");
    }

    /// A second `redrive serve` over this app's database, with its own `env` (for tests of
    /// several instances sharing one PostgreSQL).
    pub async fn another_instance(&self, env: &[(&str, &str)]) -> TestApp {
        TestApp::serve(
            self.db_url.clone(),
            self.store.clone(),
            self.db.clone(),
            env,
        )
        .await
    }

    /// Stops the binary (SIGTERM) and starts it again over the same database with `env`.
    pub async fn restart(mut self, env: &[(&str, &str)]) -> TestApp {
        let pid = self.child.id().expect("running child").to_string();
        let ok = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill -TERM {pid} failed");
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("redrive did not stop on SIGTERM\n{}", self.log()))
            .expect("wait");
        let TestApp {
            db_url, store, db, ..
        } = self;
        TestApp::serve(db_url, store, db, env).await
    }

    /// Whether `/readyz` says retention backpressure holds a DLQ topic (`paused_topics`).
    /// `token` authenticates (the details are for signed-in callers only).
    pub async fn retention_paused(&self, token: &str) -> bool {
        let Ok(res) = self
            .client
            .get(self.url("/readyz"))
            .bearer_auth(token)
            .send()
            .await
        else {
            return false;
        };
        let body: serde_json::Value = res.json().await.unwrap_or_default();
        body["retention"]["paused_topics"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn log(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Runs `redrive ARGS` against this app's database, with `stdin`; returns (exit code,
    /// stdout, stderr).
    pub async fn cli(&self, args: &[&str], stdin: Option<&str>) -> (Option<i32>, String, String) {
        run_redrive(args, &[("REDRIVE_DATABASE_URL", &self.db_url)], stdin).await
    }

    /// `redrive user add NAME --role ROLE --password-stdin`, which must succeed.
    pub async fn add_user(&self, name: &str, role: &str, password: &str) {
        let (code, out, err) = self
            .cli(
                &["user", "add", name, "--role", role, "--password-stdin"],
                Some(&format!("{password}\n")),
            )
            .await;
        assert_eq!(code, Some(0), "user add {name}: {out}{err}");
    }

    /// A user whose role is `role` by name, made directly in the store: for roles that only
    /// the server's `[roles]` configuration defines (a custom role, or one since removed), which
    /// `redrive user add` without that configuration refuses.
    pub async fn add_user_in_store(&self, name: &str, role: &str, password: &str) {
        use redrive_core::auth::hash_password;
        let phc = hash_password(password).expect("hash");
        self.store
            .create_user(&redrive_core::store::NewUser {
                name,
                role: redrive_core::actions::Role::named(role),
                password_hash: &phc,
                created_at_ms: 0,
            })
            .await
            .expect("create user")
            .expect("a new user");
    }

    /// `redrive token create --user NAME`: the token it printed.
    pub async fn create_token(&self, user: &str) -> String {
        let (code, out, err) = self
            .cli(
                &["token", "create", "--user", user, "--name", "tests"],
                None,
            )
            .await;
        assert_eq!(code, Some(0), "token create: {out}{err}");
        let token = out.trim().to_string();
        assert!(token.starts_with("rdv_"), "token create printed {out:?}");
        token
    }

    /// Submits the sign-in form as a browser does (no redirect followed).
    pub async fn sign_in_form(&self, user: &str, password: &str, next: &str) -> reqwest::Response {
        self.client
            .post(self.url("/auth/sign-in"))
            .header("Origin", &self.base)
            .form(&[("user", user), ("password", password), ("next", next)])
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST /auth/sign-in: {e}\n{}", self.log()))
    }

    /// Signs in (JSON answer); panics unless it works.
    pub async fn sign_in(&self, user: &str, password: &str) -> Session {
        let res = self
            .client
            .post(self.url("/auth/sign-in"))
            .header("Accept", "application/json")
            .form(&[("user", user), ("password", password)])
            .send()
            .await
            .expect("sign in");
        assert_eq!(res.status(), 200, "sign in as {user}\n{}", self.log());
        let set_cookie = set_cookie(&res).expect("a session cookie");
        let body: Value = res.json().await.expect("JSON");
        Session {
            cookie: set_cookie.split(';').next().unwrap_or("").to_string(),
            csrf: body["csrf_token"].as_str().expect("csrf_token").to_string(),
            set_cookie,
        }
    }

    fn with_auth(&self, req: reqwest::RequestBuilder, auth: Auth<'_>) -> reqwest::RequestBuilder {
        match auth {
            Auth::None => req,
            Auth::Session(s) => req.header(COOKIE, &s.cookie),
            Auth::Bearer(t) => req.bearer_auth(t),
        }
    }

    pub async fn get(&self, path: &str, auth: Auth<'_>) -> reqwest::Response {
        self.with_auth(self.client.get(self.url(path)), auth)
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}\n{}", self.log()))
    }

    /// POSTs JSON; a session request carries the CSRF header as `csrf` says.
    pub async fn post_json(
        &self,
        path: &str,
        auth: Auth<'_>,
        csrf: Csrf,
        body: &Value,
    ) -> reqwest::Response {
        self.send_json(reqwest::Method::POST, path, auth, csrf, body)
            .await
    }

    /// Sends JSON by `method` (POST, PUT, ...); a session request carries the CSRF header as
    /// `csrf` says.
    pub async fn send_json(
        &self,
        method: reqwest::Method,
        path: &str,
        auth: Auth<'_>,
        csrf: Csrf,
        body: &Value,
    ) -> reqwest::Response {
        let mut req = self
            .with_auth(self.client.request(method.clone(), self.url(path)), auth)
            .json(body);
        if let Auth::Session(s) = auth {
            match csrf {
                Csrf::Right => req = req.header("X-CSRF-Token", &s.csrf),
                Csrf::Wrong => req = req.header("X-CSRF-Token", "not-the-token"),
                Csrf::Missing => {}
            }
        }
        req.send()
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: {e}\n{}", self.log()))
    }

    /// DELETEs `path`; a session request carries its CSRF header.
    pub async fn delete(&self, path: &str, auth: Auth<'_>) -> reqwest::Response {
        let mut req = self.with_auth(self.client.delete(self.url(path)), auth);
        if let Auth::Session(s) = auth {
            req = req.header("X-CSRF-Token", &s.csrf);
        }
        req.send()
            .await
            .unwrap_or_else(|e| panic!("DELETE {path}: {e}\n{}", self.log()))
    }

    /// PUTs JSON with a Bearer token (the note routes).
    pub async fn put_json(&self, path: &str, token: &str, body: &Value) -> reqwest::Response {
        self.client
            .put(self.url(path))
            .bearer_auth(token)
            .json(body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("PUT {path}: {e}\n{}", self.log()))
    }

    /// POSTs a form; a session request carries the `csrf` field as `csrf` says.
    pub async fn post_form(
        &self,
        path: &str,
        auth: Auth<'_>,
        csrf: Csrf,
        fields: &[(&str, &str)],
    ) -> reqwest::Response {
        let mut fields: Vec<(String, String)> = fields
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        if let Auth::Session(s) = auth {
            match csrf {
                Csrf::Right => fields.push(("csrf".into(), s.csrf.clone())),
                Csrf::Wrong => fields.push(("csrf".into(), "not-the-token".into())),
                Csrf::Missing => {}
            }
        }
        // As a browser submits a form: it asks for HTML.
        self.with_auth(self.client.post(self.url(path)), auth)
            .header("Accept", "text/html,application/xhtml+xml")
            .form(&fields)
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {path}: {e}\n{}", self.log()))
    }

    /// The whole audit trail, oldest first.
    pub async fn audit(&self) -> Vec<AuditEntry> {
        let mut all = Vec::new();
        let mut q = AuditQuery {
            limit: 1000,
            ..AuditQuery::default()
        };
        loop {
            let page = self.store.audit(&q).await.expect("audit");
            all.extend(page.items);
            match page.next_cursor.and_then(|c| c.parse().ok()) {
                Some(before) => q.before_id = Some(before),
                None => break,
            }
        }
        all.reverse();
        all
    }

    /// Audit rows of `action`.
    pub async fn audit_of(&self, action: &str) -> Vec<AuditEntry> {
        self.audit()
            .await
            .into_iter()
            .filter(|a| a.action == action)
            .collect()
    }
}

/// The response's `Set-Cookie` for the session cookie, if any.
pub fn set_cookie(res: &reqwest::Response) -> Option<String> {
    res.headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("redrive_session="))
        .map(str::to_string)
}

/// The `Location` header.
pub fn location(res: &reqwest::Response) -> String {
    res.headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// Runs `redrive ARGS` to completion (60 s at most) with `env` and `stdin`; returns (exit code,
/// stdout, stderr).
pub async fn run_redrive(
    args: &[&str],
    env: &[(&str, &str)],
    stdin: Option<&str>,
) -> (Option<i32>, String, String) {
    let mut cmd = redrive_command();
    cmd.args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn redrive");
    let mut input = child.stdin.take().expect("stdin");
    if let Some(s) = stdin {
        input.write_all(s.as_bytes()).await.expect("write stdin");
    }
    drop(input);
    let mut out = String::new();
    let mut err = String::new();
    let mut so = child.stdout.take().expect("stdout");
    let mut se = child.stderr.take().expect("stderr");
    let status = tokio::time::timeout(Duration::from_secs(60), async {
        let _ = tokio::join!(so.read_to_string(&mut out), se.read_to_string(&mut err));
        child.wait().await
    })
    .await
    .expect("redrive finished within 60 s")
    .expect("wait");
    (status.code(), out, err)
}

/// Spawns `cmd`, keeps its stderr, waits (30 s at most) for `listening on http://ADDR`.
async fn spawn_and_wait_for_address(mut cmd: Command) -> (Child, String, Arc<Mutex<String>>) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn redrive");
    let stderr = Arc::new(Mutex::new(String::new()));
    if let Some(err) = child.stderr.take() {
        let buf = stderr.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(err).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(mut b) = buf.lock() {
                    b.push_str(&line);
                    b.push('\n');
                }
            }
        });
    }
    let out = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(out).lines();
    let found = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(addr) = line.strip_prefix("listening on ") {
                return Some(addr.trim().to_string());
            }
        }
        None
    })
    .await
    .ok()
    .flatten();
    // Keep draining stdout so the child never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    match found {
        Some(base) => (child, base, stderr),
        None => {
            let log = stderr.lock().map(|s| s.clone()).unwrap_or_default();
            panic!("redrive did not report its address within 30 s\n{log}");
        }
    }
}

/// Polls `check` every 100 ms until it returns true, at most `deadline`.
pub async fn eventually<F, Fut>(what: &str, deadline: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = std::time::Instant::now();
    loop {
        if check().await {
            return;
        }
        assert!(start.elapsed() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A loopback port free a moment ago, for a server a test starts (and may stop and start
/// again) or for an address nothing listens on. Taken BELOW the kernel's ephemeral range
/// (`net.ipv4.ip_local_port_range`, 32768–60999 by default, read from /proc): a port in that
/// range, while nothing listens on it, can be handed to any outgoing connection on the machine
/// as its source port — a restarted broker then cannot bind it, and a client retrying a
/// refused port can even connect to itself (TCP simultaneous open). Ports 20000..start of
/// the range are tried in random order.
pub fn free_port() -> u16 {
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768)
        .clamp(20001, 32768);
    let span = u32::from(low - 20000);
    // RandomState is seeded randomly per process: a random start without a dependency.
    let start = {
        use std::hash::{BuildHasher, Hasher};
        std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish() as u32
            % span
    };
    (0..span)
        .map(|i| 20000 + ((start + i) % span) as u16)
        .find(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
        .expect("a free loopback port below the ephemeral range")
}
