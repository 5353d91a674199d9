//! Requests to the server's JSON API, and what a failed one means for a script: every API
//! refusal is `{"error": "...", "code", "status"}` (`api_error.rs`); its message is printed as the
//! server gave it and its status picks the exit code ([`Exit`], docs/cli.md "Exit codes").

use std::process::ExitCode;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::Value;

/// How long to wait for a connection to the server.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one JSON request may take (an export's streamed body has no such bound).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// The exit codes of the client commands (docs/cli.md, "Exit codes").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: done; a followed job finished with no failed record.
    Ok,
    /// 1: a followed job finished with failed records, or was cancelled (not by this
    /// command).
    JobFailed,
    /// 2: usage or validation: bad flags, a refused filter or body (400, 409, 422), an
    /// action over a filter without `--yes` and no terminal to ask on.
    Usage,
    /// 3: authentication or permission: no token, 401, 403.
    Auth,
    /// 4: not found (404): no such dead letter, job or route.
    NotFound,
    /// 5: the server failed or could not be reached (5xx, connection refused, timeout, an
    /// answer that is not the API's).
    Server,
    /// 6: the action waits for a second person's approval (202 `pending_approval`).
    PendingApproval,
    /// 130: interrupted (Ctrl-C / SIGINT), after cancelling the job if asked to (128 + 2,
    /// the shells' convention for a command ended by SIGINT).
    Interrupted,
}

impl Exit {
    /// The process exit status.
    pub fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::JobFailed => 1,
            Exit::Usage => 2,
            Exit::Auth => 3,
            Exit::NotFound => 4,
            Exit::Server => 5,
            Exit::PendingApproval => 6,
            Exit::Interrupted => 130,
        }
    }

    /// The exit code of an HTTP error status.
    pub fn of_status(status: StatusCode) -> Exit {
        match status.as_u16() {
            401 | 403 => Exit::Auth,
            404 | 410 => Exit::NotFound,
            400..=499 => Exit::Usage,
            _ => Exit::Server,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e.code())
    }
}

/// Why a client command failed: the message to print and the exit code.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ClientError {
    pub exit: Exit,
    pub message: String,
}

impl ClientError {
    /// A usage error (exit code 2).
    pub fn usage(message: impl Into<String>) -> ClientError {
        ClientError {
            exit: Exit::Usage,
            message: message.into(),
        }
    }

    /// An error with its exit code.
    pub fn new(exit: Exit, message: impl Into<String>) -> ClientError {
        ClientError {
            exit,
            message: message.into(),
        }
    }

    /// The exit code.
    pub fn exit(&self) -> Exit {
        self.exit
    }
}

/// An answer the API gave with a success status: the status and the JSON body.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub body: Value,
}

/// The API client: base URL and token.
#[derive(Clone)]
pub struct Api {
    base: String,
    token: String,
    http: reqwest::Client,
}

impl std::fmt::Debug for Api {
    // The token stays out of every debug print.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api").field("base", &self.base).finish()
    }
}

impl Api {
    /// A client of the server at `server` (`http://` or `https://`, a trailing `/` ignored)
    /// with `token`. Errors: no server (2), no token (3), a URL that is not HTTP(S) (2).
    pub fn new(server: Option<&str>, token: Option<&str>) -> Result<Api, ClientError> {
        let server = server
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                ClientError::usage(
                    "which server? set REDRIVE_SERVER (or --server) to its base URL, e.g. \
                 https://redrive.internal",
                )
            })?;
        let url = url::Url::parse(server).map_err(|e| {
            ClientError::usage(format!(
                "--server / REDRIVE_SERVER `{server}` is not a URL ({e}); give the base URL, \
                 e.g. http://127.0.0.1:8080"
            ))
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ClientError::usage(format!(
                "--server / REDRIVE_SERVER must be an http:// or https:// URL, not `{server}`"
            )));
        }
        let token = token
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                ClientError::new(
                    Exit::Auth,
                    "no API token: set REDRIVE_TOKEN (or --token) to a token made on the account \
                 page or with `redrive token create`",
                )
            })?;
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("redrive-cli/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ClientError::new(Exit::Server, format!("HTTP client: {e}")))?;
        Ok(Api {
            base: server.trim_end_matches('/').to_string(),
            token: token.to_string(),
            http,
        })
    }

    fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .header(reqwest::header::ACCEPT, "application/json")
    }

    /// `GET path` with `query` pairs: the JSON answer, or the API's error.
    pub async fn get(&self, path: &str, query: &[(&str, String)]) -> Result<Answer, ClientError> {
        let req = self
            .request(Method::GET, path)
            .query(query)
            .timeout(REQUEST_TIMEOUT);
        self.json(req, path).await
    }

    /// `POST path` with a JSON `body`: the JSON answer, or the API's error.
    pub async fn post(&self, path: &str, body: &Value) -> Result<Answer, ClientError> {
        let req = self
            .request(Method::POST, path)
            .json(body)
            .timeout(REQUEST_TIMEOUT);
        self.json(req, path).await
    }

    /// `GET path?query` whose body is streamed (an export): the response once its status
    /// says success.
    pub async fn get_stream(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<reqwest::Response, ClientError> {
        let res = self
            .request(Method::GET, path)
            .query(query)
            .send()
            .await
            .map_err(|e| self.unreachable(path, e))?;
        if res.status().is_success() {
            Ok(res)
        } else {
            Err(refusal(res, &self.base).await)
        }
    }

    async fn json(&self, req: reqwest::RequestBuilder, path: &str) -> Result<Answer, ClientError> {
        let res = req.send().await.map_err(|e| self.unreachable(path, e))?;
        let status = res.status();
        if !status.is_success() {
            return Err(refusal(res, &self.base).await);
        }
        let text = res.text().await.map_err(|e| self.unreachable(path, e))?;
        let body = serde_json::from_str(&text).map_err(|_| {
            ClientError::new(
                Exit::Server,
                format!(
                    "{} answered {path} with something that is not the API's JSON ({}); is \
                     --server the redrive server's base URL?",
                    self.base,
                    excerpt(&text)
                ),
            )
        })?;
        Ok(Answer { status, body })
    }

    fn unreachable(&self, path: &str, e: reqwest::Error) -> ClientError {
        let what = if e.is_timeout() {
            "did not answer in time"
        } else if e.is_connect() {
            "cannot be reached"
        } else {
            "failed"
        };
        // reqwest's message names the URL (never the token); its source says why.
        let mut cause = e.to_string();
        let mut src = std::error::Error::source(&e);
        while let Some(s) = src {
            cause.push_str(": ");
            cause.push_str(&s.to_string());
            src = s.source();
        }
        ClientError::new(
            Exit::Server,
            format!(
                "the redrive server at {} {what} ({path}): {cause}",
                self.base
            ),
        )
    }
}

/// A refused request: the API's `{"error"}` message as given, with the exit code of its
/// status. A refusal that is not the API's (no `{"error"}` object: another program at
/// `--server`'s address, a proxy's page) is exit 5 and says to check `--server`, whatever its
/// status, except 401 and 403 (exit 3: credentials, whoever asks for them).
async fn refusal(res: reqwest::Response, base: &str) -> ClientError {
    let status = res.status();
    let text = res.text().await.unwrap_or_default();
    refusal_of(status, &text, base)
}

fn refusal_of(status: StatusCode, text: &str, base: &str) -> ClientError {
    let api_message = serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v.get("error").and_then(Value::as_str).map(str::to_string));
    match api_message {
        Some(message) => ClientError::new(Exit::of_status(status), message),
        None => {
            let exit = match Exit::of_status(status) {
                Exit::Auth => Exit::Auth,
                _ => Exit::Server,
            };
            ClientError::new(
                exit,
                format!(
                    "{base} answered HTTP {status}, not as the redrive API does ({}); is \
                     --server the redrive server's base URL?",
                    excerpt(text)
                ),
            )
        }
    }
}

/// At most the first 200 characters of `text`, on one line.
fn excerpt(text: &str) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(200)
        .collect();
    if one_line.trim().is_empty() {
        "an empty body".to_string()
    } else {
        one_line.trim().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The API's refusal keeps its status's exit code; another program's answer (the demo's
    /// control port answered a CLI pointed at it 404 with its routes in text) is exit 5.
    #[test]
    fn refusals_not_from_the_api_say_to_check_the_server() {
        let base = "http://127.0.0.1:3001";
        let api = refusal_of(
            StatusCode::NOT_FOUND,
            r#"{"error": "no dead letter 9"}"#,
            base,
        );
        assert_eq!(
            (api.exit, api.message.as_str()),
            (Exit::NotFound, "no dead letter 9")
        );
        let other = refusal_of(StatusCode::NOT_FOUND, "routes: GET /status", base);
        assert_eq!(other.exit, Exit::Server);
        assert!(
            other.message.contains("check") || other.message.contains("--server"),
            "{}",
            other.message
        );
        assert!(
            other.message.contains("routes: GET /status"),
            "{}",
            other.message
        );
        let proxy = refusal_of(StatusCode::UNAUTHORIZED, "<html>sign in</html>", base);
        assert_eq!(proxy.exit, Exit::Auth);
    }

    #[test]
    fn statuses_map_to_exit_codes() {
        for (status, exit) in [
            (400, Exit::Usage),
            (409, Exit::Usage),
            (422, Exit::Usage),
            (401, Exit::Auth),
            (403, Exit::Auth),
            (404, Exit::NotFound),
            (500, Exit::Server),
            (503, Exit::Server),
        ] {
            assert_eq!(Exit::of_status(StatusCode::from_u16(status).unwrap()), exit);
        }
        assert_eq!(Exit::Interrupted.code(), 130);
        assert_eq!(Exit::PendingApproval.code(), 6);
    }

    #[test]
    fn server_and_token_are_required() {
        assert_eq!(Api::new(None, Some("t")).unwrap_err().exit, Exit::Usage);
        assert_eq!(
            Api::new(Some("ftp://x"), Some("t")).unwrap_err().exit,
            Exit::Usage
        );
        assert_eq!(
            Api::new(Some("http://127.0.0.1:1"), None).unwrap_err().exit,
            Exit::Auth
        );
        let api = Api::new(Some("http://127.0.0.1:1/"), Some("rdv_secret")).unwrap();
        let shown = format!("{api:?}");
        assert!(shown.contains("\"http://127.0.0.1:1\""), "{shown}");
        assert!(!shown.contains("rdv_secret"), "{shown}");
    }
}
