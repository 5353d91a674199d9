//! One module per route.

mod account;
mod alerts;
mod approvals;
mod audit;
mod automation;
mod automation_edit;
mod automation_versions;
mod confirm;
mod confirm_sample;
mod dead_letter;
mod dead_letters;
mod edit;
mod error_group;
mod error_groups;
mod job;
mod jobs;
mod not_found;
mod overview;
mod quarantine;
mod sign_in;
mod users;
mod versions;

pub use account::AccountPage;
pub use alerts::AlertsPage;
pub use approvals::ApprovalsPage;
pub use audit::AuditPage;
pub use automation::AutomationPage;
pub use automation_edit::RuleEditorPage;
pub use automation_versions::{RuleVersionPage, RuleVersionsPage};
pub use confirm::ConfirmPage;
pub use dead_letter::DeadLetterPage;
pub use dead_letters::DeadLettersPage;
pub use edit::EditPage;
pub use error_group::ErrorGroupPage;
pub use error_groups::ErrorGroupsPage;
pub use job::JobPage;
pub use jobs::JobsPage;
pub use not_found::NotFound;
pub use overview::OverviewPage;
pub use quarantine::QuarantinePage;
pub use sign_in::SignInPage;
pub use users::{UsersNavLink, UsersPage};

use leptos::prelude::*;

/// A failure to load data, said plainly (the detail is in the server log).
#[component]
fn LoadError(error: ServerFnError) -> impl IntoView {
    let text = match error {
        ServerFnError::ServerError(msg) => msg,
        other => format!("Could not reach the redrive server: {other}. Reload to try again."),
    };
    view! { <p class="error-box" role="alert">{text}</p> }
}

/// A refused filter: what was wrong with it, and the way back.
#[component]
fn BadQuery(message: String, reset: &'static str) -> impl IntoView {
    view! {
        <div class="error-box" role="alert">
            <p>
                <strong>"This filter cannot be used: "</strong>
                {message}
            </p>
            <p>
                <a href=reset>"Clear the filter"</a>
            </p>
        </div>
    }
}
