//! Who is signed in, for pages and server functions.
//!
//! The server's authentication middleware (server/src/auth) resolves every request's session
//! cookie or API token before the app runs, and leaves in the request's extensions:
//! [`Actor`] (always, once authenticated) and [`SessionInfo`] (browser sessions only: the
//! actor plus the session's CSRF token). This module reads them.
//!
//! **Pages** (components):
//! - call [`provide_session`] once (the `App` does), then
//! - `<CsrfField/>` inside every state-changing `<form method="post">` / `ActionForm`: a
//!   hidden `csrf` input holding the session's token. Without it the server answers 403.
//! - [`use_session`] gives the session resource (user, role, CSRF token) for rendering, e.g.
//!   to hide buttons a viewer may not use (the server checks the role anyway).
//! - `<SignOutForm/>`: the "Sign out" button (a POST to `/auth/sign-out` with the token).
//!
//! **Server functions** (ssr):
//! - [`require`]`(Role::Operator)?` first thing in a server function that changes something:
//!   the current [`Actor`] (with client IP and user agent, for the store's audit row), or a
//!   `ServerFnError` when the role may not. [`authorize`] does the same and writes an audit
//!   row with outcome `denied` on refusal: use it for dead-letter actions.
//! - A server function called by a hydrated `ActionForm` serialises only its own arguments,
//!   so a state-changing server function must take a `csrf: String` argument (unused in its
//!   body): the middleware checks that form field before the function runs, and the
//!   `<CsrfField/>` in the form fills it.
//! - Requests authenticated with a Bearer token carry no session and need no CSRF token.

use leptos::prelude::*;
pub use redrive_core::actions::{Actor, Role};
pub use redrive_core::auth::{SessionInfo, CSRF_FIELD, CSRF_HEADER};
pub use redrive_core::sso::SignInOptions;

/// The current browser session, or `None` when the request is not signed in with a session
/// (anonymous on the sign-in page, or an API token). Served at the fixed URL
/// `/api/auth/session`, which the middleware leaves open so that it can answer `None`.
#[server(endpoint = "auth/session")]
pub async fn get_session() -> Result<Option<SessionInfo>, ServerFnError> {
    Ok(session())
}

/// How this redrive can be signed in to (single sign-on, password). Served at the fixed URL
/// `/api/auth/sign-in-options`, which the middleware leaves open.
#[server(endpoint = "auth/sign-in-options")]
pub async fn get_sign_in_options() -> Result<SignInOptions, ServerFnError> {
    Ok(
        use_context::<leptos::server_fn::http_export::request::Parts>()
            .and_then(|p| p.extensions.get::<SignInOptions>().copied())
            .unwrap_or_default(),
    )
}

/// The session resource [`provide_session`] put in context.
#[derive(Clone, Copy)]
pub struct SessionResource(pub Resource<Result<Option<SessionInfo>, ServerFnError>>);

/// Loads the current session once per page and provides it to every component below (call it
/// near the top of the app). During server rendering it reads the request directly; the
/// value travels to the browser with the page, so hydration sees the same token.
pub fn provide_session() -> SessionResource {
    let r = SessionResource(Resource::new(|| (), |_| get_session()));
    provide_context(r);
    r
}

/// The session resource from [`provide_session`] (a fresh one if none was provided).
pub fn use_session() -> SessionResource {
    use_context::<SessionResource>().unwrap_or_else(provide_session)
}

/// A hidden `<input name="csrf">` holding the session's CSRF token; put it inside every form
/// that changes state. Renders nothing outside a session.
#[component]
pub fn CsrfField() -> impl IntoView {
    let session = use_session();
    view! {
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                session
                    .0
                    .await
                    .ok()
                    .flatten()
                    .map(|s| view! { <input type="hidden" name=CSRF_FIELD value=s.csrf_token /> })
            })}
        </Suspense>
    }
}

/// "Signed in as NAME (role)" and a Sign out button (a plain POST form, works without
/// JavaScript). Renders nothing outside a session.
#[component]
pub fn SignOutForm() -> impl IntoView {
    let session = use_session();
    view! {
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                session
                    .0
                    .await
                    .ok()
                    .flatten()
                    .map(|s| {
                        view! {
                            <form class="sign-out" method="post" action="/auth/sign-out">
                                <span class="whoami">
                                    {s.actor.user.clone()} " (" {s.actor.role.as_str()} ")"
                                </span>
                                <input type="hidden" name=CSRF_FIELD value=s.csrf_token />
                                <button type="submit">"Sign out"</button>
                            </form>
                        }
                    })
            })}
        </Suspense>
    }
}

#[cfg(feature = "ssr")]
pub use self::ssr::*;

#[cfg(feature = "ssr")]
mod ssr {
    use leptos::prelude::*;
    use leptos::server_fn::http_export::request::Parts;
    use redrive_core::actions::{Actor, NewAuditEntry, Role};
    use redrive_core::auth::SessionInfo;
    use redrive_core::permission::Permission;
    use redrive_core::store::Store;

    /// The current request's actor (session or API token), if authenticated.
    pub fn actor() -> Option<Actor> {
        use_context::<Parts>().and_then(|p| p.extensions.get::<Actor>().cloned())
    }

    /// The current request's browser session, if it has one.
    pub fn session() -> Option<SessionInfo> {
        use_context::<Parts>().and_then(|p| p.extensions.get::<SessionInfo>().cloned())
    }

    /// The current actor if its role allows `needed`. Errors (a `ServerFnError` whose message
    /// is meant for the user): not signed in, or the role may not.
    pub fn require(needed: Role) -> Result<Actor, ServerFnError> {
        let actor = actor().ok_or_else(|| {
            ServerFnError::new("You are not signed in (or your session expired). Sign in again.")
        })?;
        if actor.role.allows(needed) {
            Ok(actor)
        } else {
            Err(denied(&actor, needed))
        }
    }

    /// Like [`require`], and on refusal also appends an audit row (`action`, outcome
    /// `denied`) through the [`Store`] in context: use it for dead-letter actions, whose
    /// refusals the audit trail must show.
    pub async fn authorize(needed: Role, action: &str) -> Result<Actor, ServerFnError> {
        let actor = require(Role::Viewer)?;
        if actor.role.allows(needed) {
            return Ok(actor);
        }
        if let Some(store) = use_context::<Store>() {
            if let Err(e) = store
                .record_audit(&NewAuditEntry::by(&actor, action, "denied"))
                .await
            {
                tracing::error!(error = %e, action, "could not write the audit row");
            }
        }
        Err(denied(&actor, needed))
    }

    /// The current actor if it holds permission `needed`; on refusal appends an audit row
    /// (`action`, outcome `denied`) like [`authorize`]. New checks ask for a permission, never
    /// for a role.
    pub async fn authorize_permission(
        needed: Permission,
        action: &str,
    ) -> Result<Actor, ServerFnError> {
        let actor = require(Role::Viewer)?;
        if actor.can(needed) {
            return Ok(actor);
        }
        if let Some(store) = use_context::<Store>() {
            if let Err(e) = store
                .record_audit(&NewAuditEntry::by(&actor, action, "denied"))
                .await
            {
                tracing::error!(error = %e, action, "could not write the audit row");
            }
        }
        Err(ServerFnError::new(format!(
            "Not allowed: this needs the `{needed}` permission, which {} ({}) does not have. \
             Ask an admin.",
            actor.user,
            actor.role.as_str()
        )))
    }

    fn denied(actor: &Actor, needed: Role) -> ServerFnError {
        ServerFnError::new(format!(
            "Not allowed: this needs the {} role, and {} is {}. Ask an admin.",
            needed.as_str(),
            actor.user,
            actor.role.as_str()
        ))
    }
}
