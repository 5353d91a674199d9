use leptos::prelude::*;
use leptos_meta::Title;

use crate::http_status::HttpStatus;

/// The page for any path (or dead-letter id) that does not exist; answers 404.
#[component]
pub fn NotFound(
    /// What was not found, e.g. "dead letter 42"; a generic message when absent.
    #[prop(optional, into)]
    what: Option<String>,
) -> impl IntoView {
    HttpStatus::current().set(404);
    let text = match what {
        Some(w) => format!("There is no {w}."),
        None => "There is no page at this address.".to_string(),
    };
    view! {
        <Title text="Not found · redrive" />
        <h1>"Not found"</h1>
        <p>{text}</p>
        <p>
            <a href="/">"Back to the dead letters"</a>
        </p>
    }
}
