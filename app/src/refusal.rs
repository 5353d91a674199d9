//! The HTTP status of a refused server-function call (`/api/ui/...`): a request the user can
//! fix or that the current state does not allow answers 4xx with its message, not 500.
//!
//! - Called by a script (a hydrated `ActionForm`: `Accept` is the server function's own
//!   encoding), the answer gets the status: 422 for input that cannot be used
//!   (`StoreError::Invalid`, a bad form field), 409 for a conflict with the current state
//!   (`Conflict`: a finished job, an edit of an edited version), 404 for something that is
//!   not there (`NotFound`), 503 when the database is unavailable, 500 only for the rest (a
//!   bug or a database failure, logged). The browser's server-function client reads the
//!   message from any 4xx/5xx body, so the page shows it the same way.
//! - Posted by a plain HTML form (`Accept: text/html`, no JavaScript) nothing is set: the
//!   server-function layer answers 302 back to the page (its `Referer`) with the error in
//!   `__err`, which the page shows; a status set here would replace that redirect. Without a
//!   `Referer` there is no page to go back to: the status is set, and the server answers an
//!   HTML page with the message at that status.
//! - 403 for a role that may not act is set where roles are checked (`actions_api::operator`).

use leptos::prelude::*;
use redrive_core::store::StoreError;

/// Input that cannot be used: the message says what to change.
pub const INVALID: u16 = 422;
/// The current state does not allow it (a finished job, a newer version).
pub const CONFLICT: u16 = 409;
/// The thing acted on is not there.
pub const NOT_FOUND: u16 = 404;

/// True when the current request is a plain HTML form post (`Accept` names `text/html`) that
/// the server-function layer will redirect back to its page: leptos_axum 0.8's
/// `handle_server_fns` answers such a post with 302 to its `Referer`, when it has one.
fn plain_form_going_back() -> bool {
    use leptos::server_fn::http_export::{
        header::{ACCEPT, REFERER},
        request::Parts,
    };
    use_context::<Parts>().is_some_and(|p| {
        p.headers
            .get(ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.contains("text/html"))
            && p.headers.contains_key(REFERER)
    })
}

/// Sets `code` as the status of the current server function's answer, unless a plain form
/// posted it and goes back to its page (see the module docs). A plain form without a
/// `Referer` gets the status, which the server's form error page keeps (`server/src/site.rs`,
/// `form_error_page`). Outside a request: nothing.
pub fn set_status(code: u16) {
    if !plain_form_going_back() {
        crate::http_status::HttpStatus::current().set(code);
    }
}

/// A refused request: `message` (shown to the user as it is) answered with `code`.
pub fn refused(code: u16, message: impl Into<String>) -> ServerFnError {
    set_status(code);
    ServerFnError::new(message.into())
}

/// The status a store failure answers with: 422 `Invalid`, 409 `Conflict`, 404 `NotFound`,
/// 503 `Unavailable`, 500 for the rest.
pub fn store_status(e: &StoreError) -> u16 {
    match e {
        StoreError::Invalid(_) => INVALID,
        StoreError::Conflict(_) => CONFLICT,
        StoreError::NotFound(_) => NOT_FOUND,
        StoreError::Unavailable(_) => 503,
        _ => 500,
    }
}
