//! redrive's web UI: Leptos pages rendered on the server (`ssr`) and hydrated in the browser
//! (`hydrate`, this crate compiled to wasm32 is the browser entry point).
//!
//! Every page works without JavaScript: filters are a plain GET form whose fields are the
//! `Filter` query parameters, and data routes render with `SsrMode::Async` so the HTML arrives
//! complete. Data comes from the server functions in [`api`], which call the store.
//! Everything user-supplied is rendered as text nodes or attributes (escaped by Leptos);
//! nothing is inserted as HTML.

// The hydrate (wasm) build of the job, confirmation and detail pages nests view types deeper
// than rustc's default query depth (128): "queries overflow the depth limit!".
#![recursion_limit = "256"]

pub mod actions_api;
pub mod alerts_api;
pub mod api;
pub mod approvals_api;
pub mod auth_context;
pub mod automation_api;
pub mod components;
pub mod display;
pub mod edit_api;
pub mod http_status;
pub mod job_control_api;
pub mod labels_api;
pub mod overview_api;
pub mod pages;
pub mod quarantine_api;
pub mod query;
#[cfg(feature = "ssr")]
pub mod refusal;
pub mod trend_window;
pub mod users_api;
pub mod wire;

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Stylesheet, Title};
use leptos_router::components::{Route, Router, Routes};
use leptos_router::{path, SsrMode};

use auth_context::SignOutForm;
use pages::{
    AccountPage, AlertsPage, ApprovalsPage, AuditPage, AutomationPage, ConfirmPage, DeadLetterPage,
    DeadLettersPage, EditPage, ErrorGroupPage, ErrorGroupsPage, JobPage, JobsPage, NotFound,
    OverviewPage, QuarantinePage, RuleEditorPage, RuleVersionPage, RuleVersionsPage, SignInPage,
    UsersNavLink, UsersPage,
};

/// The HTML document around the app: head (hydration scripts, meta tags) and body.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8" />
                <meta name="viewport" content="width=device-width, initial-scale=1" />
                <link rel="icon" href="/favicon.svg" type="image/svg+xml" />
                <HydrationScripts options />
                <MetaTags />
            </head>
            <body>
                <App />
            </body>
        </html>
    }
}

/// The application: navigation and routes.
#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    auth_context::provide_session();
    view! {
        <Stylesheet id="redrive-css" href="/pkg/redrive.css" />
        <Title text="redrive" />
        <Router>
            <header class="topbar">
                <a class="brand" href="/">
                    "redrive"
                </a>
                <nav>
                    <a href="/overview">"Overview"</a>
                    <a href="/">"Dead letters"</a>
                    <a href="/groups">"Error groups"</a>
                    <a href="/jobs">"Jobs"</a>
                    <a href="/approvals">"Approvals"</a>
                    <a href="/audit">"Audit"</a>
                    <a href="/quarantine">"Quarantine"</a>
                    <a href="/alerts">"Alerts"</a>
                    <a href="/automation">"Automation"</a>
                    // Served by the server, not the router (`docs/api.md`): a full navigation.
                    <a href="/api/docs" rel="external">"API"</a>
                    <UsersNavLink />
                    <SignOutForm />
                </nav>
            </header>
            <main>
                <Routes fallback=|| view! { <NotFound /> }>
                    <Route path=path!("/") view=DeadLettersPage ssr=SsrMode::Async />
                    <Route path=path!("/overview") view=OverviewPage ssr=SsrMode::Async />
                    <Route path=path!("/groups") view=ErrorGroupsPage ssr=SsrMode::Async />
                    <Route path=path!("/groups/:fingerprint") view=ErrorGroupPage ssr=SsrMode::Async />
                    <Route path=path!("/dead-letters/:id") view=DeadLetterPage ssr=SsrMode::Async />
                    <Route path=path!("/dead-letters/:id/edit") view=EditPage ssr=SsrMode::Async />
                    <Route path=path!("/confirm") view=ConfirmPage ssr=SsrMode::Async />
                    <Route path=path!("/jobs") view=JobsPage ssr=SsrMode::Async />
                    <Route path=path!("/jobs/:id") view=JobPage ssr=SsrMode::Async />
                    <Route path=path!("/audit") view=AuditPage ssr=SsrMode::Async />
                    <Route path=path!("/approvals") view=ApprovalsPage ssr=SsrMode::Async />
                    <Route path=path!("/quarantine") view=QuarantinePage ssr=SsrMode::Async />
                    <Route path=path!("/alerts") view=AlertsPage ssr=SsrMode::Async />
                    <Route path=path!("/automation") view=AutomationPage ssr=SsrMode::Async />
                    <Route path=path!("/automation/edit") view=RuleEditorPage ssr=SsrMode::Async />
                    <Route path=path!("/automation/versions") view=RuleVersionsPage ssr=SsrMode::Async />
                    <Route path=path!("/automation/versions/:n") view=RuleVersionPage ssr=SsrMode::Async />
                    <Route path=path!("/account") view=AccountPage ssr=SsrMode::Async />
                    <Route path=path!("/admin/users") view=UsersPage ssr=SsrMode::Async />
                    <Route path=path!("/sign-in") view=SignInPage />
                </Routes>
            </main>
        </Router>
    }
}

/// Browser entry point: attaches the app to the server-rendered page.
#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_body(App);
    // A marker that tests (and curious people) can wait for: the page is now interactive.
    if let Some(root) = document().document_element() {
        let _ = root.set_attribute("data-hydrated", "true");
    }
}
