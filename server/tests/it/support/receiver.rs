//! A real HTTP receiver for notification tests: an axum server on a loopback port that records
//! every request (path, headers, exact body) and answers as told — 200 `ok` (Slack's answer),
//! 202 with PagerDuty's JSON under `/pd`, or a forced status for failure tests.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;

/// One request as received.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Received {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{} sent a body that is not JSON: {e}", self.path))
    }

    pub fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    }
}

#[derive(Clone, Default)]
struct Shared {
    requests: Arc<Mutex<Vec<Received>>>,
    /// Forced answer for every path, when set.
    forced: Arc<Mutex<Option<u16>>>,
    /// How long every answer waits after the request is recorded (none when unset).
    delay: Arc<Mutex<Option<std::time::Duration>>>,
}

/// The receiver; stops when dropped (its task is aborted).
pub struct Receiver {
    pub base: String,
    shared: Shared,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn record(State(s): State<Shared>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let path = uri.path().to_string();
    s.requests.lock().unwrap().push(Received {
        path: path.clone(),
        headers,
        body,
    });
    let delay = *s.delay.lock().unwrap();
    if let Some(d) = delay {
        tokio::time::sleep(d).await;
    }
    if let Some(code) = *s.forced.lock().unwrap() {
        return (StatusCode::from_u16(code).unwrap(), "forced failure").into_response();
    }
    if path.starts_with("/pd") {
        (
            StatusCode::ACCEPTED,
            r#"{"status":"success","message":"Event processed"}"#,
        )
            .into_response()
    } else {
        (StatusCode::OK, "ok").into_response()
    }
}

impl Receiver {
    /// Listens on 127.0.0.1 (a free port).
    pub async fn start() -> Receiver {
        let shared = Shared::default();
        let app = Router::new().fallback(record).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver { base, shared, task }
    }

    /// From now on every request is answered `code`.
    pub fn answer_with(&self, code: u16) {
        *self.shared.forced.lock().unwrap() = Some(code);
    }

    /// From now on every answer comes `delay` after its request was recorded: a send that
    /// is still in flight while the test does something else.
    pub fn answer_after(&self, delay: std::time::Duration) {
        *self.shared.delay.lock().unwrap() = Some(delay);
    }

    /// Requests to `path` so far, in arrival order.
    pub fn requests(&self, path: &str) -> Vec<Received> {
        self.shared
            .requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.path == path)
            .cloned()
            .collect()
    }
}

/// A loopback URL nothing listens on (connection refused): a port that was just free, below
/// the ephemeral range ([`super::free_port`]).
pub fn refused_url() -> String {
    let port = super::free_port();
    format!("http://127.0.0.1:{port}/hook")
}

/// A receiver that accepts every TCP connection and never answers (reads nothing, writes
/// nothing, keeps the socket open): a webhook endpoint that hangs until the sender's timeout.
pub struct Hanging {
    pub url: String,
    accepted: Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Hanging {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Hanging {
    /// Listens on 127.0.0.1 (a free port); `url` is `http://127.0.0.1:PORT/hang`.
    pub async fn start() -> Hanging {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hang", listener.local_addr().unwrap());
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        let task = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                open.push(stream);
            }
        });
        Hanging {
            url,
            accepted,
            task,
        }
    }

    /// Connections accepted so far (each one an HTTP request that never got an answer).
    pub fn accepted(&self) -> usize {
        self.accepted.load(std::sync::atomic::Ordering::SeqCst)
    }
}
