use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::auth_context::get_sign_in_options;
use crate::query::encode;

/// `/sign-in`: a plain POST form to `/auth/sign-in` (works without JavaScript). The server
/// answers with a redirect: to `next` when signed in, or back here with `?error=CODE`, which
/// is shown as a sentence (the code, never free text from the URL, so the page cannot be made
/// to say anything else).
#[component]
pub fn SignInPage() -> impl IntoView {
    let query = use_query_map();
    let error = move || query.read().get("error").map(|c| message(&c));
    let next = move || query.read().get("next").unwrap_or_else(|| "/".to_string());
    let options = Resource::new(|| (), |_| get_sign_in_options());
    let sso_href = move || format!("/auth/oidc/start?next={}", encode(&next()));
    view! {
        <Title text="Sign in · redrive" />
        <section class="sign-in">
            <h1>"Sign in"</h1>
            {move || error().map(|m| view! { <p class="error-box" role="alert">{m}</p> })}
            <form method="post" action="/auth/sign-in">
                <input type="hidden" name="next" value=next />
                <p>
                    <label for="sign-in-user">"User"</label>
                    <input
                        id="sign-in-user"
                        name="user"
                        autocomplete="username"
                        autocapitalize="none"
                        spellcheck="false"
                        required
                        autofocus
                    />
                </p>
                <p>
                    <label for="sign-in-password">"Password"</label>
                    <input
                        id="sign-in-password"
                        type="password"
                        name="password"
                        autocomplete="current-password"
                        required
                    />
                </p>
                <button type="submit">"Sign in"</button>
            </form>
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    let o = options.await.unwrap_or_default();
                    o.sso
                        .then(|| {
                            view! {
                                <p class="sso">
                                    <a class="button" id="sign-in-sso" href=sso_href>
                                        "Sign in with SSO"
                                    </a>
                                </p>
                            }
                        })
                })}
            </Suspense>
        </section>
    }
}

/// The sentence for a sign-in error code (see server/src/auth/handlers.rs).
fn message(code: &str) -> &'static str {
    match code {
        "invalid" => "Wrong user name or password.",
        "throttled" => "Too many sign-in attempts. Wait a minute, then try again.",
        "expired" => "Your session has expired. Sign in again.",
        "too_long" => "That password is longer than any redrive accepts (1024 bytes).",
        "unavailable" => "redrive could not reach its database. Try again in a moment.",
        "sso_only" => "Password sign-in is off here: use “Sign in with SSO”.",
        "cross_site" => {
            "The sign-in form was sent from another site. Open redrive directly and sign in here."
        }
        _ => "Signing in did not work. Try again.",
    }
}
