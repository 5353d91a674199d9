//! The demo's live state (outage switch, circuit breaker, counters) and its tiny control
//! endpoint, a raw HTTP/1.1 listener on tokio (no web framework for five routes):
//!
//! - `GET /status` — JSON: outage mode and whether the LLM is down now, breaker state, counters;
//! - `GET /health` — whether the agent can take work now ([`Control::health`]): `200 OK`
//!   `{"llm":"up"}`, or `503 Service Unavailable` with why not: `{"llm":"down"}` during an
//!   outage (scheduled or switched on), `{"llm":"breaker_open"}` while the circuit breaker is
//!   not closed, `{"llm":"outage_soon"}` in the [`OUTAGE_NOTICE`] before a scheduled outage.
//!   The natural target of an automatic-replay rule's health gate (`gate.http`,
//!   `docs/automation.md`): a replay let through just before an outage would be retried into
//!   it and come back;
//! - `POST /outage/on` — the LLM goes down until switched back;
//! - `POST /outage/off` — the LLM is up, scheduled outages suspended (use this before a replay);
//! - `POST /outage/auto` — back to the schedule (`--outage-up-ms` / `--outage-down-ms`).
//!
//! e.g. `curl -X POST http://127.0.0.1:3001/outage/off`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::breaker::{BreakerState, CircuitBreaker};
use crate::config::DemoConfig;

/// Who decides whether the LLM is down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OutageMode {
    /// The schedule does (`outage_up_ms` up, then `outage_down_ms` down, repeating).
    Auto,
    /// Down until switched.
    On,
    /// Up until switched.
    Off,
}

/// How long before a scheduled outage `/health` already answers 503 (`outage_soon`), like a
/// maintenance notice: about the 1 + 2 + 4 s of the default retries plus the time to publish
/// a round of replays, so that a health-gated replay does not meet the outage.
pub const OUTAGE_NOTICE: Duration = Duration::from_secs(10);

/// What `/health` says ([`Control::health`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    /// The LLM answers and the breaker is closed.
    Up,
    /// An outage is on.
    Down,
    /// The LLM is up but the circuit breaker is open or half-open (calls are rejected until
    /// a probe succeeds).
    BreakerOpen,
    /// A scheduled outage starts within [`OUTAGE_NOTICE`].
    OutageSoon,
}

/// Counters shown by `/status` and the periodic log line.
#[derive(Debug, Default)]
pub struct Stats {
    /// Requests produced (valid + poison).
    pub produced: AtomicU64,
    /// Of which poison.
    pub produced_poison: AtomicU64,
    /// Requests processed successfully.
    pub processed: AtomicU64,
    /// Records sent to a retry topic.
    pub retried: AtomicU64,
    /// Dead-lettered after the last retry.
    pub dead_lettered_transient: AtomicU64,
    /// Dead-lettered at once as poison.
    pub dead_lettered_poison: AtomicU64,
    /// Duplicate deliveries dropped (already processed, or a replay key seen before).
    pub duplicates: AtomicU64,
    /// LLM calls made (the breaker's rejections are not calls).
    pub llm_calls: AtomicU64,
    /// LLM calls that failed.
    pub llm_failures: AtomicU64,
}

/// A copy of [`Stats`] (same field names and meanings) plus the switches, as `/status`
/// serves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatusSnapshot {
    /// Who decides whether the LLM is down.
    pub outage_mode: OutageMode,
    /// Whether it is down right now.
    pub outage_active: bool,
    /// The circuit breaker's state.
    pub breaker: BreakerState,
    /// How many times the breaker has opened since start.
    pub breaker_opened: u64,
    pub produced: u64,
    pub produced_poison: u64,
    pub processed: u64,
    pub retried: u64,
    pub dead_lettered_transient: u64,
    pub dead_lettered_poison: u64,
    pub duplicates: u64,
    pub llm_calls: u64,
    pub llm_failures: u64,
}

#[derive(Debug)]
struct Inner {
    started: Instant,
    mode: Mutex<OutageMode>,
    up: Duration,
    down: Duration,
    breaker: CircuitBreaker,
    stats: Stats,
}

/// Handle on the demo's live state; cheap to clone. Create it with [`Control::new`] and pass
/// it to [`crate::run_with`] to switch the outage from code (tests do).
#[derive(Debug, Clone)]
pub struct Control {
    inner: Arc<Inner>,
}

impl Control {
    /// State for `config`: outage on if `config.outage`, else on the schedule.
    pub fn new(config: &DemoConfig) -> Control {
        Control {
            inner: Arc::new(Inner {
                started: Instant::now(),
                mode: Mutex::new(if config.outage {
                    OutageMode::On
                } else {
                    OutageMode::Auto
                }),
                up: Duration::from_millis(config.outage_up_ms),
                down: Duration::from_millis(config.outage_down_ms),
                breaker: CircuitBreaker::new(config.breaker_failures, config.breaker_cooldown_ms),
                stats: Stats::default(),
            }),
        }
    }

    /// Switches the outage.
    pub fn set_outage(&self, mode: OutageMode) {
        *self.inner.mode.lock().unwrap_or_else(|p| p.into_inner()) = mode;
        tracing::info!(?mode, "demo: LLM outage switched");
    }

    /// The current outage mode.
    pub fn outage_mode(&self) -> OutageMode {
        *self.inner.mode.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Is the LLM down at `now`?
    pub fn outage_active(&self, now: Instant) -> bool {
        match self.outage_mode() {
            OutageMode::On => true,
            OutageMode::Off => false,
            OutageMode::Auto => {
                let (up, down) = (self.inner.up.as_millis(), self.inner.down.as_millis());
                if down == 0 {
                    return false;
                }
                let t = now
                    .saturating_duration_since(self.inner.started)
                    .as_millis();
                t % (up + down) >= up
            }
        }
    }

    /// Can the agent take work at `now`? Down during an outage, then while the breaker is not
    /// closed, then within [`OUTAGE_NOTICE`] of a scheduled outage (`Auto` mode only).
    pub fn health(&self, now: Instant) -> Health {
        if self.outage_active(now) {
            Health::Down
        } else if self.inner.breaker.state() != BreakerState::Closed {
            Health::BreakerOpen
        } else if self.outage_mode() == OutageMode::Auto && self.outage_active(now + OUTAGE_NOTICE)
        {
            Health::OutageSoon
        } else {
            Health::Up
        }
    }

    /// The circuit breaker around the LLM.
    pub fn breaker(&self) -> &CircuitBreaker {
        &self.inner.breaker
    }

    /// The live counters.
    pub fn stats(&self) -> &Stats {
        &self.inner.stats
    }

    /// A consistent-enough copy of everything `/status` shows.
    pub fn snapshot(&self) -> StatusSnapshot {
        let s = &self.inner.stats;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        StatusSnapshot {
            outage_mode: self.outage_mode(),
            outage_active: self.outage_active(Instant::now()),
            breaker: self.inner.breaker.state(),
            breaker_opened: self.inner.breaker.times_opened(),
            produced: g(&s.produced),
            produced_poison: g(&s.produced_poison),
            processed: g(&s.processed),
            retried: g(&s.retried),
            dead_lettered_transient: g(&s.dead_lettered_transient),
            dead_lettered_poison: g(&s.dead_lettered_poison),
            duplicates: g(&s.duplicates),
            llm_calls: g(&s.llm_calls),
            llm_failures: g(&s.llm_failures),
        }
    }
}

/// Adds one to a counter.
pub(crate) fn bump(a: &AtomicU64) {
    a.fetch_add(1, Ordering::Relaxed);
}

/// Serves the control endpoint on `listener` until `shutdown`.
pub async fn serve(listener: TcpListener, control: Control, shutdown: CancellationToken) {
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => return,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((stream, _)) => {
                let control = control.clone();
                tokio::spawn(async move {
                    if let Err(e) = handle(stream, &control).await {
                        tracing::debug!(error = %e, "demo control: connection failed");
                    }
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "demo control: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn handle(mut stream: TcpStream, control: &Control) -> std::io::Result<()> {
    // Read the request head only (bodies are ignored); 8 KiB and 5 s bound a slow or hostile
    // client.
    let mut buf = Vec::with_capacity(1024);
    let read = async {
        let mut chunk = [0u8; 1024];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 8192 {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        Ok::<_, std::io::Error>(())
    };
    tokio::time::timeout(Duration::from_secs(5), read)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "request head"))??;
    let head = String::from_utf8_lossy(&buf);
    let mut parts = head.lines().next().unwrap_or("").split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or(path);
    let (status, body) = route(method, path, control);
    let reply = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(reply.as_bytes()).await?;
    stream.shutdown().await
}

fn route(method: &str, path: &str, control: &Control) -> (&'static str, String) {
    let set = |mode| {
        control.set_outage(mode);
        status_json(control)
    };
    match (method, path) {
        ("GET", "/status") => ("200 OK", status_json(control)),
        ("GET", "/health") => {
            let health = control.health(Instant::now());
            let body = serde_json::json!({ "llm": health }).to_string();
            if health == Health::Up {
                ("200 OK", body)
            } else {
                ("503 Service Unavailable", body)
            }
        }
        ("POST", "/outage/on") => ("200 OK", set(OutageMode::On)),
        ("POST", "/outage/off") => ("200 OK", set(OutageMode::Off)),
        ("POST", "/outage/auto") => ("200 OK", set(OutageMode::Auto)),
        (_, "/status" | "/health" | "/outage/on" | "/outage/off" | "/outage/auto") => (
            "405 Method Not Allowed",
            r#"{"error":"use GET /status, GET /health or POST /outage/on|off|auto"}"#.into(),
        ),
        _ => (
            "404 Not Found",
            r#"{"error":"routes: GET /status, GET /health, POST /outage/on, /outage/off, /outage/auto"}"#
                .into(),
        ),
    }
}

fn status_json(control: &Control) -> String {
    serde_json::to_string(&control.snapshot()).unwrap_or_else(|_| "{}".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn call(addr: std::net::SocketAddr, req: &str) -> String {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(req.as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn switches_the_outage_over_http() {
        let cfg = DemoConfig {
            outage_down_ms: 0,
            ..DemoConfig::default()
        };
        let control = Control::new(&cfg);
        assert!(!control.outage_active(Instant::now()));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        let task = tokio::spawn(serve(listener, control.clone(), stop.clone()));

        let r = call(addr, "POST /outage/on HTTP/1.1\r\nhost: x\r\n\r\n").await;
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
        assert!(r.contains(r#""outage_active":true"#), "{r}");
        assert!(control.outage_active(Instant::now()));
        let r = call(addr, "GET /health HTTP/1.1\r\n\r\n").await;
        assert!(r.starts_with("HTTP/1.1 503"), "{r}");

        call(addr, "POST /outage/off HTTP/1.1\r\n\r\n").await;
        let r = call(addr, "GET /health HTTP/1.1\r\n\r\n").await;
        assert!(
            r.starts_with("HTTP/1.1 200") && r.contains(r#""llm":"up""#),
            "{r}"
        );
        assert_eq!(control.outage_mode(), OutageMode::Off);
        let r = call(addr, "GET /status HTTP/1.1\r\n\r\n").await;
        assert!(r.contains(r#""outage_mode":"off""#), "{r}");
        assert!(call(addr, "GET /outage/on HTTP/1.1\r\n\r\n")
            .await
            .starts_with("HTTP/1.1 405"));
        assert!(call(addr, "GET /nope HTTP/1.1\r\n\r\n")
            .await
            .starts_with("HTTP/1.1 404"));
        stop.cancel();
        task.await.unwrap();
    }

    #[test]
    fn the_schedule_alternates_up_and_down() {
        let cfg = DemoConfig {
            outage_up_ms: 100,
            outage_down_ms: 50,
            ..DemoConfig::default()
        };
        let c = Control::new(&cfg);
        let t0 = c.inner.started;
        let at = |ms| c.outage_active(t0 + Duration::from_millis(ms));
        assert!(!at(0) && !at(99) && at(100) && at(149) && !at(150) && at(260));
        c.set_outage(OutageMode::Off);
        assert!(!at(120));
        c.set_outage(OutageMode::On);
        assert!(at(10));
    }

    #[test]
    fn health_is_down_in_an_outage_while_the_breaker_is_open_and_just_before_an_outage() {
        let cfg = DemoConfig {
            outage_up_ms: 60_000,
            outage_down_ms: 20_000,
            breaker_failures: 1,
            breaker_cooldown_ms: 1_000,
            ..DemoConfig::default()
        };
        let c = Control::new(&cfg);
        let t0 = c.inner.started;
        let at = |ms| t0 + Duration::from_millis(ms);
        assert_eq!(c.health(at(0)), Health::Up);
        // The notice before the scheduled outage at 60 s, then the outage.
        assert_eq!(c.health(at(49_999)), Health::Up);
        assert_eq!(c.health(at(50_000)), Health::OutageSoon);
        assert_eq!(c.health(at(60_000)), Health::Down);
        // Switched off: no schedule, so no notice either.
        c.set_outage(OutageMode::Off);
        assert_eq!(c.health(at(55_000)), Health::Up);
        // A failed call opens the breaker (threshold 1): not healthy until a probe succeeds.
        let permit = c.breaker().acquire(at(1_000)).unwrap();
        c.breaker().record(permit, false, at(1_000));
        assert_eq!(c.health(at(1_500)), Health::BreakerOpen);
        let probe = c.breaker().acquire(at(2_500)).unwrap();
        assert_eq!(c.health(at(2_500)), Health::BreakerOpen);
        c.breaker().record(probe, true, at(2_600));
        assert_eq!(c.health(at(2_600)), Health::Up);
    }
}
