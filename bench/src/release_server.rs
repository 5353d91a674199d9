//! The release `redrive serve` the HTTP figures are measured against: started beside this
//! bench's own executable (`scripts/bench` builds both), on a free loopback port, with one
//! admin user signed in. Shared by the detail-page, overview and pages-under-load figures.

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tokio::process::{Child, Command};

const USER: &str = "bench";
const PASSWORD: &str = "bench-password-1";

/// A running release server, killed when dropped.
pub struct ReleaseServer {
    child: Child,
    /// Its process id (for `/proc/PID/status`).
    pub pid: u32,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// No redirects followed, no compression asked for.
    pub client: reqwest::Client,
    /// `redrive_session=...` of the signed-in admin.
    pub cookie: String,
    _site: tempfile::TempDir,
}

impl ReleaseServer {
    /// Starts `redrive serve` on the store at `db_url` with ingest off, then `env` on top
    /// (e.g. `REDRIVE_INGEST_ENABLED=true` and the brokers), waits for `/healthz` (at most
    /// `ready_within`) and signs in.
    ///
    /// Errors: the release binary is missing, the server does not answer in time, or the
    /// sign-in gives no session cookie.
    pub async fn start(
        db_url: &str,
        env: &[(&str, String)],
        ready_within: Duration,
    ) -> Result<ReleaseServer> {
        let bin = std::env::current_exe()?
            .parent()
            .context("no directory")?
            .join("redrive");
        if !bin.exists() {
            bail!(
                "{} is missing: `cargo build --release -p redrive` first",
                bin.display()
            );
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let site = tempfile::tempdir()?;
        let mut cmd = Command::new(&bin);
        cmd.arg("serve")
            .env("REDRIVE_DATABASE_URL", db_url)
            .env("REDRIVE_LISTEN", format!("127.0.0.1:{port}"))
            .env("REDRIVE_INGEST_ENABLED", "false")
            .env("REDRIVE_KAFKA_BROKERS", "127.0.0.1:9")
            .env("REDRIVE_SITE_ROOT", site.path())
            .env("REDRIVE_ADMIN_USER", USER)
            .env("REDRIVE_ADMIN_PASSWORD", PASSWORD)
            .env("REDRIVE_LOG", "warn");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let pid = child.id().context("no pid")?;
        let base = format!("http://127.0.0.1:{port}");
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        let deadline = Instant::now() + ready_within;
        while client.get(format!("{base}/healthz")).send().await.is_err() {
            if Instant::now() > deadline {
                bail!("redrive did not answer /healthz within {ready_within:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let res = client
            .post(format!("{base}/auth/sign-in"))
            .header("Accept", "application/json")
            .form(&[("user", USER), ("password", PASSWORD)])
            .send()
            .await?;
        let cookie = res
            .headers()
            .get("set-cookie")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .context("sign-in gave no session cookie")?
            .to_string();
        Ok(ReleaseServer {
            child,
            pid,
            base,
            client,
            cookie,
            _site: site,
        })
    }

    /// GETs `path` signed in and reads the whole body; returns (ms request to last byte, body
    /// bytes). Errors: a transport error or a non-2xx answer.
    pub async fn get(&self, path: &str) -> Result<(f64, usize)> {
        let url = format!("{}{path}", self.base);
        let t = Instant::now();
        let res = self
            .client
            .get(&url)
            .header("Cookie", &self.cookie)
            .send()
            .await?;
        if !res.status().is_success() {
            bail!("GET {url}: {}", res.status());
        }
        let n = res.bytes().await?.len();
        Ok((t.elapsed().as_secs_f64() * 1000.0, n))
    }

    /// The server's peak RSS since start or the last [`ReleaseServer::reset_peak`], KiB
    /// (`VmHWM` of `/proc/PID/status`).
    pub fn peak_rss_kib(&self) -> Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .context("no VmHWM in /proc/PID/status")
    }

    /// Resets the peak RSS (`echo 5 > /proc/PID/clear_refs`).
    pub fn reset_peak(&self) -> Result<()> {
        std::fs::write(format!("/proc/{}/clear_refs", self.pid), "5").context("reset the peak RSS")
    }

    /// Stops the server (SIGKILL: the figures are taken; the store is thrown away).
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// (p50, p99) of `v` (ms), nearest rank; `(0, 0)` when empty.
pub fn p50_p99(mut v: Vec<f64>) -> (f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0);
    }
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize];
    (at(0.5), at(0.99))
}
