//! Identity: users, browser sessions, API tokens and the secrets behind them.
//!
//! - **Passwords** are stored as argon2id PHC strings (`$argon2id$v=19$m=19456,t=2,p=1$...`,
//!   RustCrypto's `argon2` with its defaults, the OWASP recommendation). Verification re-reads
//!   the parameters from the stored string, so raising them later keeps old hashes valid.
//! - **Session and API tokens** are 32 random bytes from the OS, URL-safe base64 without
//!   padding, behind a prefix that says what they are ([`API_TOKEN_PREFIX`],
//!   [`SESSION_TOKEN_PREFIX`]): a leaked token is recognisable in logs and by secret scanners.
//!   The store keeps only their SHA-256 (lowercase hex, [`secret_hash`]), so a copy of the
//!   database cannot be replayed as credentials.
//! - **CSRF** tokens are per session (synchronizer token pattern), random like the rest, and
//!   compared in constant time ([`constant_time_eq`]).
//!
//! The plain types here ([`SessionInfo`], [`User`], [`ApiToken`]) compile without the `server`
//! feature, so the hydrated UI shares them; hashing and randomness are server-only.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::actions::{Actor, Role};

/// Name of the session cookie. Its value is a session token; only its hash is stored.
pub const SESSION_COOKIE: &str = "redrive_session";
/// Form field carrying the CSRF token in an HTML form or a server-function POST.
pub const CSRF_FIELD: &str = "csrf";
/// Header carrying the CSRF token in a `fetch`/XHR request (lower case, as `http` spells it).
pub const CSRF_HEADER: &str = "x-csrf-token";
/// Prefix of API tokens (`rdv_` + 43 base64url characters).
pub const API_TOKEN_PREFIX: &str = "rdv_";
/// Prefix of session tokens (the cookie value).
pub const SESSION_TOKEN_PREFIX: &str = "rdvs_";
/// Shortest accepted password, in characters.
pub const MIN_PASSWORD_CHARS: usize = 8;
/// Longest accepted password, in bytes: argon2 accepts more, but a multi-megabyte "password"
/// is only a way to make the server work.
pub const MAX_PASSWORD_BYTES: usize = 1024;
/// Longest user name, in characters.
pub const MAX_USER_NAME_CHARS: usize = 64;
/// Longest API token label, in characters.
pub const MAX_TOKEN_NAME_CHARS: usize = 100;
/// Random bytes in every token.
pub const TOKEN_BYTES: usize = 32;

/// The signed-in browser session as the UI sees it: who, and the CSRF token that every
/// state-changing form of this session must carry (field [`CSRF_FIELD`] or header
/// [`CSRF_HEADER`]). The server puts it into each request's extensions; it never contains the
/// session token itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfo {
    pub actor: Actor,
    pub csrf_token: String,
}

/// The key of the current request's browser session (the SHA-256 hex of its cookie), which
/// the server puts into a session request's extensions: server functions use it to keep or
/// mark "this session". Never sent to the browser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionKey(pub String);

/// A user account as listed (never with its password hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub id: i64,
    pub name: String,
    pub role: Role,
    /// Epoch ms.
    pub created_at_ms: i64,
    /// A disabled user cannot sign in, and its sessions and tokens stop working.
    pub disabled: bool,
}

/// An API token as listed (never with the token or its hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiToken {
    pub id: i64,
    /// The user it acts as.
    pub user: String,
    /// Free label given at creation (`token create --name`), e.g. `ci-replays`.
    pub name: Option<String>,
    /// Epoch ms.
    pub created_at_ms: i64,
    /// Last request made with it, epoch ms.
    pub last_used_ms: Option<i64>,
    /// When it was revoked, epoch ms; a revoked token authenticates nothing.
    pub revoked_at_ms: Option<i64>,
    /// When it stops working, epoch ms; `None` = never. A token past it is refused with 401.
    #[serde(default)]
    pub expires_at_ms: Option<i64>,
    /// What it may do: its user's current role, or nothing but read.
    #[serde(default)]
    pub scope: TokenScope,
}

/// What an API token may do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenScope {
    /// Whatever its user's role allows, as that role is now (a role change applies to the
    /// token at once).
    #[default]
    Role,
    /// Reads only: the token holds no permission whatsoever, whatever its user's role.
    ReadOnly,
}

impl TokenScope {
    /// Every scope.
    pub const ALL: [TokenScope; 2] = [TokenScope::Role, TokenScope::ReadOnly];

    /// `role` or `read_only`, as stored and as the API and CLI spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenScope::Role => "role",
            TokenScope::ReadOnly => "read_only",
        }
    }

    /// Parses [`Self::as_str`]'s spelling.
    ///
    /// Errors: `BadScope` for anything else.
    pub fn parse(s: &str) -> Result<TokenScope, AuthError> {
        TokenScope::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| AuthError::BadScope(s.to_string()))
    }
}

/// A browser session as listed on the account and admin pages (never its token or CSRF
/// token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionListing {
    /// A short public handle of the session ([`session_handle`]), used to end it.
    pub handle: String,
    pub user: String,
    /// Sign-in, epoch ms.
    pub created_at_ms: i64,
    /// Last request, epoch ms (recorded at most once a minute).
    pub last_seen_ms: i64,
    pub ip: Option<String>,
    pub user_agent: Option<String>,
    /// True for the session of the request that lists it ("this session").
    #[serde(default)]
    pub current: bool,
}

/// Characters of a session's public handle.
pub const SESSION_HANDLE_CHARS: usize = 16;

/// The public handle of a session whose key (the SHA-256 hex of its cookie) is `id_hash`:
/// its first [`SESSION_HANDLE_CHARS`] hex characters. It names the session in lists and "end
/// session" forms; it is not a credential (neither is the whole hash: the cookie cannot be
/// derived from it).
pub fn session_handle(id_hash: &str) -> String {
    id_hash.chars().take(SESSION_HANDLE_CHARS).collect()
}

/// True if `s` has the shape of a session handle (16 lowercase hex characters).
pub fn looks_like_session_handle(s: &str) -> bool {
    s.len() == SESSION_HANDLE_CHARS
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Longest token lifetime accepted, in days (about ten years).
pub const MAX_TOKEN_DAYS: i64 = 3660;

/// When a token created at `now_ms` with `spec` expires, epoch ms; `Ok(None)` = never.
/// `spec` is a lifetime (`30d`, `12h`, `90m`; a bare number is days), `never`, or a date or
/// time (`2027-01-31`, the start of that day UTC, or RFC 3339 `2027-01-31T12:00:00Z`), which
/// must be in the future.
///
/// Errors: `BadExpiry` with what to type instead.
pub fn parse_token_expiry(spec: &str, now_ms: i64) -> Result<Option<i64>, AuthError> {
    let s = spec.trim();
    let bad = || AuthError::BadExpiry(spec.chars().take(64).collect());
    if s.is_empty() || s.eq_ignore_ascii_case("never") {
        return Ok(None);
    }
    let (digits, unit_ms) = match s.as_bytes()[s.len() - 1] {
        b'd' => (&s[..s.len() - 1], 86_400_000_i64),
        b'h' => (&s[..s.len() - 1], 3_600_000),
        b'm' => (&s[..s.len() - 1], 60_000),
        b'0'..=b'9' if !s.contains(['-', ':', 'T']) => (s, 86_400_000),
        _ => ("", 0),
    };
    if unit_ms > 0 {
        let n: i64 = digits.parse().map_err(|_| bad())?;
        if n <= 0 || n.saturating_mul(unit_ms) > MAX_TOKEN_DAYS * 86_400_000 {
            return Err(bad());
        }
        return Ok(Some(now_ms.saturating_add(n * unit_ms)));
    }
    let at = if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        t.timestamp_millis()
    } else if let Ok(d) = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        d.and_hms_opt(0, 0, 0)
            .map(|t| t.and_utc().timestamp_millis())
            .ok_or_else(bad)?
    } else {
        return Err(bad());
    };
    if at <= now_ms || at - now_ms > MAX_TOKEN_DAYS * 86_400_000 {
        return Err(bad());
    }
    Ok(Some(at))
}

/// Why an identity input was refused or a secret could not be made. Messages are for the
/// person who typed the input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error(
        "user names are 1 to {MAX_USER_NAME_CHARS} characters of letters, digits, `.`, `_`, \
         `-` and `@`"
    )]
    BadUserName,
    #[error("the password is empty; give one on standard input")]
    EmptyPassword,
    #[error("the password is too short: use at least {MIN_PASSWORD_CHARS} characters")]
    ShortPassword,
    #[error("the password is too long: at most {MAX_PASSWORD_BYTES} bytes")]
    LongPassword,
    #[error(
        "token labels are at most {MAX_TOKEN_NAME_CHARS} characters, without control characters"
    )]
    BadTokenName,
    /// A role name that is neither built in nor configured in `[roles]`.
    #[error("`{0}` is not a role: use one of {known}", known = crate::permission::role_names())]
    BadRole(String),
    #[error("`{0}` is not a token scope: use `role` (the user's role) or `read_only`")]
    BadScope(String),
    #[error(
        "`{0}` is not a token expiry: give a lifetime such as `30d`, `12h` or `90m` (at most \
         {MAX_TOKEN_DAYS} days), a future date `2027-01-31` or time `2027-01-31T12:00:00Z`, or \
         `never`"
    )]
    BadExpiry(String),
    /// The OS random source or the hash function failed (should not happen on a sane host).
    #[error("could not create a secret: {0}")]
    Crypto(String),
}

/// Checks a user name: 1 to [`MAX_USER_NAME_CHARS`] of ASCII letters, digits, `.`, `_`, `-`,
/// `@` (so it is safe in logs, CSV and URLs, and `-` alone — the audit log's "nobody" — is
/// refused).
pub fn validate_user_name(name: &str) -> Result<(), AuthError> {
    let ok = !name.is_empty()
        && name.chars().count() <= MAX_USER_NAME_CHARS
        && name != "-"
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'@'));
    if ok {
        Ok(())
    } else {
        Err(AuthError::BadUserName)
    }
}

/// Checks a new password: not empty, at least [`MIN_PASSWORD_CHARS`] characters, at most
/// [`MAX_PASSWORD_BYTES`] bytes. (No composition rules: length is what matters, NIST SP
/// 800-63B.)
pub fn validate_password(password: &str) -> Result<(), AuthError> {
    if password.is_empty() {
        Err(AuthError::EmptyPassword)
    } else if password.chars().count() < MIN_PASSWORD_CHARS {
        Err(AuthError::ShortPassword)
    } else if password.len() > MAX_PASSWORD_BYTES {
        Err(AuthError::LongPassword)
    } else {
        Ok(())
    }
}

/// Checks an API token label: at most [`MAX_TOKEN_NAME_CHARS`], no control characters.
pub fn validate_token_name(name: &str) -> Result<(), AuthError> {
    if name.chars().count() <= MAX_TOKEN_NAME_CHARS && !name.chars().any(char::is_control) {
        Ok(())
    } else {
        Err(AuthError::BadTokenName)
    }
}

/// Parses a role name: a built-in one (`viewer`, `operator`, `admin`) or one configured in
/// `[roles]` of `redrive.toml` (the installed roles, `crate::permission::install_roles`), into
/// the role with its permissions and DLQ-topic scope.
///
/// Errors: `BadRole`, whose message lists the roles there are.
pub fn parse_role(s: &str) -> Result<Role, AuthError> {
    Role::parse(s).ok_or_else(|| AuthError::BadRole(s.to_string()))
}

/// The stored form of a session or API token: SHA-256 of its UTF-8 bytes, lowercase hex
/// (64 characters). A plain fast hash is right here (unlike passwords): the tokens carry 256
/// random bits, so there is nothing to brute-force.
pub fn secret_hash(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        out.push(char::from(b"0123456789abcdef"[usize::from(b & 0x0f)]));
    }
    out
}

/// True if `a` and `b` are equal, taking the same time wherever they differ (for CSRF tokens
/// and other secrets a client sends). Different lengths compare unequal at once: the length of
/// our tokens is public.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

/// True if `token` looks like an API token (prefix and length), before any store lookup.
pub fn looks_like_api_token(token: &str) -> bool {
    token.len() == API_TOKEN_PREFIX.len() + 43 && token.starts_with(API_TOKEN_PREFIX)
}

#[cfg(feature = "server")]
pub use self::secrets::*;

#[cfg(feature = "server")]
mod secrets {
    use argon2::password_hash::phc::PasswordHash;
    use argon2::password_hash::{PasswordHasher, PasswordVerifier};
    use argon2::Argon2;
    use base64::Engine as _;

    use super::{AuthError, API_TOKEN_PREFIX, SESSION_TOKEN_PREFIX, TOKEN_BYTES};

    /// `prefix` + [`TOKEN_BYTES`] bytes from the OS random source, URL-safe base64 without
    /// padding (43 characters).
    ///
    /// Errors: `Crypto` if the OS random source fails.
    pub fn random_token(prefix: &str) -> Result<String, AuthError> {
        let mut bytes = [0u8; TOKEN_BYTES];
        getrandom::fill(&mut bytes).map_err(|e| AuthError::Crypto(e.to_string()))?;
        let body = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        Ok(format!("{prefix}{body}"))
    }

    /// A fresh API token (`rdv_...`): shown once, stored as [`super::secret_hash`].
    pub fn new_api_token() -> Result<String, AuthError> {
        random_token(API_TOKEN_PREFIX)
    }

    /// A fresh session token (`rdvs_...`): the cookie value, stored as its hash.
    pub fn new_session_token() -> Result<String, AuthError> {
        random_token(SESSION_TOKEN_PREFIX)
    }

    /// A fresh CSRF token (no prefix: it travels in forms, and is not a credential alone).
    pub fn new_csrf_token() -> Result<String, AuthError> {
        random_token("")
    }

    /// The argon2id PHC string of `password`, with a fresh random salt. CPU-heavy (tens of
    /// ms optimised, by design): call it off the async executor (`spawn_blocking`).
    ///
    /// Errors: `Crypto` if the salt cannot be drawn or hashing fails. Does not validate the
    /// password's length: see [`super::validate_password`].
    pub fn hash_password(password: &str) -> Result<String, AuthError> {
        Argon2::default()
            .hash_password(password.as_bytes())
            .map(|h| h.to_string())
            .map_err(|e| AuthError::Crypto(e.to_string()))
    }

    /// True if `password` matches the PHC string `phc`. A malformed `phc` is simply `false`.
    /// The comparison inside is constant-time. CPU-heavy like [`hash_password`].
    pub fn verify_password(password: &str, phc: &str) -> bool {
        match PasswordHash::new(phc) {
            Ok(parsed) => Argon2::default()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok(),
            Err(_) => false,
        }
    }

    /// A valid hash of no one's password, to verify against when the user does not exist, so
    /// that a failed sign-in takes as long for an unknown name as for a wrong password (no
    /// user enumeration by timing). Computed once per process.
    pub fn dummy_password_hash() -> &'static str {
        static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        DUMMY.get_or_init(|| {
            let pw = random_token("").unwrap_or_else(|_| "redrive-dummy-password".to_string());
            // Falls back to a fixed, valid PHC string with the default parameters.
            hash_password(&pw).unwrap_or_else(|_| {
                "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$\
                 Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmE"
                    .to_string()
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_passwords() {
        assert!(validate_user_name("alice").is_ok());
        assert!(validate_user_name("ops.bot-1@corp").is_ok());
        for bad in ["", "-", "a b", "<script>", "é", &"x".repeat(65)] {
            assert_eq!(
                validate_user_name(bad),
                Err(AuthError::BadUserName),
                "{bad}"
            );
        }
        assert_eq!(validate_password(""), Err(AuthError::EmptyPassword));
        assert_eq!(validate_password("1234567"), Err(AuthError::ShortPassword));
        assert!(validate_password("12345678").is_ok());
        assert_eq!(
            validate_password(&"x".repeat(1025)),
            Err(AuthError::LongPassword)
        );
        assert!(validate_token_name("ci").is_ok());
        assert!(validate_token_name("a\nb").is_err());
        assert_eq!(parse_role("admin"), Ok(Role::Admin));
        assert!(parse_role("root").is_err());
    }

    #[test]
    fn token_expiries_and_scopes() {
        let now = 1_800_000_000_000;
        let day = 86_400_000;
        assert_eq!(parse_token_expiry("never", now), Ok(None));
        assert_eq!(parse_token_expiry("", now), Ok(None));
        assert_eq!(parse_token_expiry("30d", now), Ok(Some(now + 30 * day)));
        assert_eq!(parse_token_expiry("7", now), Ok(Some(now + 7 * day)));
        assert_eq!(
            parse_token_expiry("12h", now),
            Ok(Some(now + 12 * 3_600_000))
        );
        assert_eq!(parse_token_expiry("90m", now), Ok(Some(now + 90 * 60_000)));
        // 2027-01-31 is after `now` (2027-01-15).
        let at = chrono::DateTime::parse_from_rfc3339("2027-01-31T00:00:00Z")
            .unwrap()
            .timestamp_millis();
        assert_eq!(parse_token_expiry("2027-01-31", now), Ok(Some(at)));
        assert_eq!(
            parse_token_expiry("2027-01-31T00:00:00Z", now),
            Ok(Some(at))
        );
        for bad in [
            "0d",
            "-3d",
            "30x",
            "d",
            "2020-01-01",
            "99999d",
            "soon",
            "3.5d",
        ] {
            assert!(
                matches!(parse_token_expiry(bad, now), Err(AuthError::BadExpiry(_))),
                "{bad}"
            );
        }
        for s in TokenScope::ALL {
            assert_eq!(TokenScope::parse(s.as_str()), Ok(s));
        }
        assert!(TokenScope::parse("admin").is_err());
        let h = session_handle(&secret_hash("rdvs_x"));
        assert!(looks_like_session_handle(&h), "{h}");
        assert!(!looks_like_session_handle("ABCDEF0123456789"));
        assert!(!looks_like_session_handle("%%%%%%%%%%%%%%%%"));
    }

    #[test]
    fn hashes_and_comparisons() {
        let h = secret_hash("rdv_abc");
        assert_eq!(h.len(), 64);
        assert!(h
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        assert_eq!(
            secret_hash(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }

    #[cfg(feature = "server")]
    #[test]
    fn tokens_and_passwords() {
        let t = new_api_token().unwrap();
        assert!(looks_like_api_token(&t), "{t}");
        assert_ne!(t, new_api_token().unwrap());
        assert!(new_session_token()
            .unwrap()
            .starts_with(SESSION_TOKEN_PREFIX));
        let phc = hash_password("correct horse").unwrap();
        assert!(phc.starts_with("$argon2id$"), "{phc}");
        assert!(verify_password("correct horse", &phc));
        assert!(!verify_password("wrong horse", &phc));
        assert!(!verify_password("correct horse", "not a hash"));
        assert!(!verify_password("x", dummy_password_hash()));
    }
}
