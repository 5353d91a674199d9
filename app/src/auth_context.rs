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
//!   to hide buttons the role does not permit ([`may`]; the server checks anyway).
//! - `<SignOutForm/>`: the "Sign out" button (a POST to `/auth/sign-out` with the token).
//!
//! **Server functions** (ssr):
//! - [`authorize_permission`]`(Permission::Replay, "replay").await?` first thing in a server
//!   function that changes something: the current [`Actor`] (with client IP and user agent,
//!   for the store's audit row), or a `ServerFnError` when the role does not grant the
//!   permission, with an audit row of outcome `denied`. [`signed_in`] for reads.
//! - A server function called by a hydrated `ActionForm` serialises only its own arguments,
//!   so a state-changing server function must take a `csrf: String` argument (unused in its
//!   body): the middleware checks that form field before the function runs, and the
//!   `<CsrfField/>` in the form fills it.
//! - Requests authenticated with a Bearer token carry no session and need no CSRF token.

use leptos::prelude::*;
pub use redrive_core::actions::{Actor, Role};
pub use redrive_core::auth::{SessionInfo, CSRF_FIELD, CSRF_HEADER};
pub use redrive_core::permission::Permission;
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

/// Whether the signed-in session's role grants `p`: for showing the buttons of an action
/// (the server checks again). `false` outside a session.
pub fn may(session: &Result<Option<SessionInfo>, ServerFnError>, p: Permission) -> bool {
    matches!(session, Ok(Some(s)) if s.actor.can(p))
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
                                <a class="whoami" href="/account" title="Your account: password, sessions, API tokens">
                                    {s.actor.user.clone()} " (" {s.actor.role.as_str().to_string()} ")"
                                </a>
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
    use redrive_core::actions::{Actor, NewAuditEntry};
    use redrive_core::auth::SessionInfo;
    use redrive_core::permission::Permission;
    use redrive_core::store::Store;

    /// The current request's actor (session or API token), if authenticated.
    pub fn actor() -> Option<Actor> {
        use_context::<Parts>().and_then(|p| p.extensions.get::<Actor>().cloned())
    }

    /// Limits `filter` to the current actor's DLQ-topic scope (`Store::limit_to_scope`):
    /// every server function that reads dead letters through a filter calls it. Without an
    /// actor (only behind a misconfigured router) the filter matches nothing.
    ///
    /// Errors: the store's (`Unavailable`, `Database`).
    pub async fn limit_to_scope(
        store: &Store,
        filter: &mut redrive_core::Filter,
    ) -> Result<(), redrive_core::store::StoreError> {
        match actor() {
            Some(a) => store.limit_to_scope(&a, filter).await,
            None => {
                filter.dlq_topic_in = Some(Vec::new());
                Ok(())
            }
        }
    }

    /// Whether the current actor sees dead letters of DLQ topic `topic` (its role's scope);
    /// `false` without an actor.
    pub fn sees_topic(topic: &str) -> bool {
        topic_check()(topic)
    }

    /// [`sees_topic`] for many topics: the scope is compiled once.
    pub fn topic_check() -> impl Fn(&str) -> bool {
        let scope = actor().map(|a| a.topic_scope());
        move |t| match &scope {
            None => false,
            Some(None) => true,
            Some(Some(s)) => s.matches(t),
        }
    }

    /// The current request's browser session, if it has one.
    pub fn session() -> Option<SessionInfo> {
        use_context::<Parts>().and_then(|p| p.extensions.get::<SessionInfo>().cloned())
    }

    /// The current actor (any signed-in user: reading needs no permission). Errors (a
    /// `ServerFnError` whose message is meant for the user): not signed in.
    pub fn signed_in() -> Result<Actor, ServerFnError> {
        actor().ok_or_else(|| {
            ServerFnError::new("You are not signed in (or your session expired). Sign in again.")
        })
    }

    /// The current actor if its role grants permission `needed` (`Actor::can`). Errors: not
    /// signed in, or the role does not grant it — then an audit row (`action`, outcome
    /// `denied`) is appended through the [`Store`] in context, so the audit trail shows
    /// refusals. First thing in every server function that changes something.
    pub async fn authorize_permission(
        needed: Permission,
        action: &str,
    ) -> Result<Actor, ServerFnError> {
        let actor = signed_in()?;
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
}
