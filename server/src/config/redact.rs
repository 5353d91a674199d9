//! Secrets hidden for logs, messages and `redrive config`.

pub(super) const REDACTED: &str = "REDACTED";

/// True for librdkafka properties that hold secrets (`sasl.password`,
/// `sasl.oauthbearer.client.secret`, `ssl.key.password`, `ssl.key.pem`, `sasl.jaas.config`, ...).
pub(super) fn is_secret_property(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "password",
        "secret",
        "jaas",
        "token",
        "key.pem",
        "oauthbearer.config",
    ]
    .iter()
    .any(|s| n.contains(s))
}

/// Hides the password of `scheme://user:password@host/...` and a `password=` query parameter,
/// for logs, messages and `redrive config`.
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_string();
    if let Some(scheme_end) = out.find("://") {
        let rest_start = scheme_end + 3;
        let authority_end = out[rest_start..]
            .find(['/', '?'])
            .map_or(out.len(), |i| rest_start + i);
        if let Some(at) = out[rest_start..authority_end].rfind('@') {
            let userinfo = &out[rest_start..rest_start + at];
            if let Some(colon) = userinfo.find(':') {
                let from = rest_start + colon + 1;
                let to = rest_start + at;
                out.replace_range(from..to, REDACTED);
            }
        }
    }
    if let Some(q) = out.find('?') {
        let (base, query) = out.split_at(q + 1);
        let query = query
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}={REDACTED}"),
                _ => kv.to_string(),
            })
            .collect::<Vec<_>>()
            .join("&");
        out = format!("{base}{query}");
    }
    out
}
