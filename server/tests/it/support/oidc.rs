//! A real OpenID Provider for the single sign-on tests: `testkit/oidc/provider.mjs` (panva's
//! `oidc-provider` under Node, installed by `scripts/setup` with `npm ci`), on a loopback port,
//! and [`Browser`]: a reqwest client with a cookie jar that follows the sign-in through the
//! provider's own login and consent forms the way a browser without JavaScript would.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The provider's client of redrive (`provider.mjs`).
pub const CLIENT_ID: &str = "redrive";
pub const CLIENT_SECRET: &str = "redrive-test-secret";

/// `node testkit/oidc/provider.mjs`, killed when dropped.
pub struct OidcProvider {
    /// `http://127.0.0.1:PORT`, the issuer.
    pub issuer: String,
    _child: Child,
}

impl OidcProvider {
    /// Starts the provider on a free port, allowing redirects to `redirect_uris`; waits (30 s
    /// at most) until it serves.
    pub async fn start(redirect_uris: &[&str]) -> OidcProvider {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testkit/oidc");
        assert!(
            dir.join("node_modules/oidc-provider").is_dir(),
            "the test OpenID Provider is not installed: run `cd testkit/oidc && npm ci` \
             (scripts/setup does)"
        );
        let port = super::free_port();
        let mut child = Command::new("node")
            .arg("provider.mjs")
            .arg(port.to_string())
            .args(redirect_uris)
            .current_dir(&dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn node testkit/oidc/provider.mjs (is Node.js installed?)");
        let out = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(out).lines();
        let issuer = tokio::time::timeout(Duration::from_secs(30), async {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(issuer) = line.strip_prefix("listening on ") {
                    return Some(issuer.trim().to_string());
                }
            }
            None
        })
        .await
        .ok()
        .flatten()
        .expect("the OpenID Provider started within 30 s");
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        OidcProvider {
            issuer,
            _child: child,
        }
    }
}

/// A cookie-keeping client that never follows redirects by itself. One jar for every host
/// (the provider and redrive are both on 127.0.0.1, and cookies do not tell ports apart).
pub struct Browser {
    client: reqwest::Client,
    /// Cookie name → value.
    pub cookies: BTreeMap<String, String>,
}

/// One answer: status, `Location`, body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub location: Option<String>,
    pub body: String,
}

impl Default for Browser {
    fn default() -> Self {
        Browser::new()
    }
}

impl Browser {
    pub fn new() -> Browser {
        Browser {
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("client"),
            cookies: BTreeMap::new(),
        }
    }

    fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    async fn send(&mut self, req: reqwest::RequestBuilder) -> Answer {
        let req = if self.cookies.is_empty() {
            req
        } else {
            req.header("Cookie", self.cookie_header())
        };
        let res = req.send().await.expect("request");
        for v in res.headers().get_all("set-cookie") {
            let Ok(v) = v.to_str() else { continue };
            let pair = v.split(';').next().unwrap_or("");
            if let Some((k, val)) = pair.split_once('=') {
                let gone = val.is_empty()
                    || v.to_ascii_lowercase().contains("max-age=0")
                    || v.to_ascii_lowercase().contains("expires=thu, 01 jan 1970");
                if gone {
                    self.cookies.remove(k.trim());
                } else {
                    self.cookies
                        .insert(k.trim().to_string(), val.trim().to_string());
                }
            }
        }
        let status = res.status().as_u16();
        let location = res
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = res.text().await.unwrap_or_default();
        Answer {
            status,
            location,
            body,
        }
    }

    pub async fn get(&mut self, url: &str) -> Answer {
        let req = self.client.get(url);
        self.send(req).await
    }

    pub async fn post_form(&mut self, url: &str, form: &[(&str, &str)]) -> Answer {
        let req = self.client.post(url).form(form);
        self.send(req).await
    }

    /// Follows redirects from `url` with GETs until an answer is not a redirect or its target
    /// starts with `stop_at`; returns that answer and the URL it came from (or would go to).
    pub async fn follow(&mut self, mut url: String, stop_at: &str) -> (String, Answer) {
        for _ in 0..20 {
            let a = self.get(&url).await;
            match a.location.clone() {
                Some(next) if (300..400).contains(&a.status) => {
                    let next = absolute(&url, &next);
                    if next.starts_with(stop_at) {
                        return (next, a);
                    }
                    url = next;
                }
                _ => return (url, a),
            }
        }
        panic!("more than 20 redirects from {url}");
    }

    /// Signs in at the provider as `login` from the authorization URL `auth_url`: its login
    /// form, then its consent form when it asks. Returns the redirect to `redirect_prefix`
    /// (redrive's callback URL with `code` and `state`).
    pub async fn sign_in_at_provider(
        &mut self,
        auth_url: &str,
        login: &str,
        redirect_prefix: &str,
    ) -> String {
        let mut url = auth_url.to_string();
        for _ in 0..4 {
            let (at, page) = self.follow(url.clone(), redirect_prefix).await;
            if at.starts_with(redirect_prefix) {
                return at;
            }
            assert_eq!(page.status, 200, "provider page {at}: {}", page.body);
            let action = form_action(&page.body)
                .unwrap_or_else(|| panic!("no form on the provider's page {at}: {}", page.body));
            let action = absolute(&at, &action);
            let answer = if page.body.contains("value=\"login\"") {
                self.post_form(
                    &action,
                    &[("prompt", "login"), ("login", login), ("password", "any")],
                )
                .await
            } else {
                self.post_form(&action, &[("prompt", "consent")]).await
            };
            let next = answer
                .location
                .unwrap_or_else(|| panic!("the provider's form answered {}", answer.body));
            url = absolute(&action, &next);
            if url.starts_with(redirect_prefix) {
                return url;
            }
        }
        panic!("the provider never redirected back to {redirect_prefix}");
    }
}

/// The `action` of the first `<form>` in `html`.
fn form_action(html: &str) -> Option<String> {
    let form = &html[html.find("<form")?..];
    let start = form.find("action=\"")? + "action=\"".len();
    let end = form[start..].find('"')?;
    Some(form[start..start + end].replace("&amp;", "&"))
}

/// `location` resolved against `base` (absolute URLs pass through).
pub fn absolute(base: &str, location: &str) -> String {
    if location.starts_with("http://") || location.starts_with("https://") {
        return location.to_string();
    }
    let scheme_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    let host_end = base[scheme_end..]
        .find('/')
        .map(|i| i + scheme_end)
        .unwrap_or(base.len());
    format!("{}{}", &base[..host_end], location)
}
