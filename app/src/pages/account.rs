use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_location;

use super::LoadError;
use crate::auth_context::CsrfField;
use crate::components::ActionError;
use crate::display::format_time;
use crate::http_status::HttpStatus;
use crate::users_api::{
    get_account, AccountNotice, AccountView, ChangePassword, EndSession, RevokeToken,
};
use crate::{query, wire};
use redrive_core::auth::{ApiToken, SessionListing, TokenScope};

/// `/account`: the signed-in user's own account — change the password (the current one is
/// required; other sessions end), see and end their sessions ("this session" marked, "End"
/// per session, "End all other sessions"), and create, see and revoke their API tokens.
/// Server-rendered; works without JavaScript.
#[component]
pub fn AccountPage() -> impl IntoView {
    let data = wire::resource(|| (), |_| get_account());
    let password = ServerAction::<ChangePassword>::new();
    let end = ServerAction::<EndSession>::new();
    let revoke = ServerAction::<RevokeToken>::new();
    let status = HttpStatus::current();
    let search = use_location().search;
    Effect::new(move |_| {
        let done = matches!(password.value().get(), Some(Ok(_)))
            || matches!(end.value().get(), Some(Ok(_)))
            || matches!(revoke.value().get(), Some(Ok(_)));
        if done {
            data.refetch();
        }
    });
    let notice = move || {
        let pairs = query::parse(&search.get());
        AccountNotice::parse(query::value(&pairs, "done")).map(AccountNotice::sentence)
    };
    let error = move || {
        password
            .value()
            .get()
            .and_then(Result::err)
            .or_else(|| end.value().get().and_then(Result::err))
            .or_else(|| revoke.value().get().and_then(Result::err))
    };
    view! {
        <Title text="Your account · redrive" />
        <h1>"Your account"</h1>
        {move || notice().map(|n| view! { <p class="done-box" role="status">{n}</p> })}
        {move || error().map(|e| view! { <ActionError error=e /> })}
        <Transition fallback=|| view! { <p class="dim">"Loading…"</p> }>
            {move || {
                let status = status.clone();
                Suspend::new(async move {
                    match data.await {
                        Ok(v) => {
                            view! { <Account v=v password=password end=end revoke=revoke /> }
                                .into_any()
                        }
                        Err(error) => {
                            status.set(503);
                            view! { <LoadError error=error /> }.into_any()
                        }
                    }
                })
            }}
        </Transition>
    }
}

#[component]
fn Account(
    v: AccountView,
    password: ServerAction<ChangePassword>,
    end: ServerAction<EndSession>,
    revoke: ServerAction<RevokeToken>,
) -> impl IntoView {
    let AccountView {
        user,
        role,
        sessions,
        tokens,
        now_ms,
    } = v;
    let others = sessions.iter().filter(|s| !s.current).count();
    view! {
        <p>
            "Signed in as " <strong class="mono">{user}</strong> " (" {role} ")."
        </p>
        <section id="password">
            <h2>"Change your password"</h2>
            <ActionForm action=password attr:class="password-change">
                <CsrfField />
                <label>
                    "Current password "
                    <input type="password" name="current_password" autocomplete="current-password" required />
                </label>
                <label>
                    "New password (at least 8 characters) "
                    <input type="password" name="new_password" autocomplete="new-password" minlength="8" required />
                </label>
                <button type="submit">"Change password"</button>
            </ActionForm>
            <p class="dim">"Changing it ends every other session of yours; API tokens keep working."</p>
        </section>
        <section id="sessions">
            <h2>"Your sessions"</h2>
            <SessionTable sessions=sessions end=end />
            {(others > 0)
                .then(|| {
                    view! {
                        <ActionForm action=end attr:class="end-others">
                            <CsrfField />
                            <input type="hidden" name="handle" value="others" />
                            <button type="submit">{format!("End all other sessions ({others})")}</button>
                        </ActionForm>
                    }
                })}
        </section>
        <section id="tokens">
            <h2>"Your API tokens"</h2>
            <TokenTable tokens=tokens now_ms=now_ms show_user=false back="/account" revoke=revoke />
            <NewTokenForm back="/account" users=Vec::new() />
        </section>
    }
}

#[component]
fn SessionTable(sessions: Vec<SessionListing>, end: ServerAction<EndSession>) -> impl IntoView {
    let rows = sessions
        .into_iter()
        .map(|s| {
            let current = s.current;
            let handle = s.handle.clone();
            let row_handle = handle.clone();
            view! {
                <tr data-session=row_handle class:current=current>
                    <td class="mono nowrap">{format_time(s.created_at_ms)}</td>
                    <td class="mono nowrap">{format_time(s.last_seen_ms)}</td>
                    <td class="mono">{s.ip.unwrap_or_else(|| "-".into())}</td>
                    <td class="ua">{s.user_agent.unwrap_or_else(|| "-".into())}</td>
                    <td>
                        {current.then(|| view! { <strong class="this-session">"this session"</strong> })}
                    </td>
                    <td>
                        <ActionForm action=end attr:class="end-session">
                            <CsrfField />
                            <input type="hidden" name="handle" value=handle />
                            <button type="submit">{if current { "End (sign out)" } else { "End" }}</button>
                        </ActionForm>
                    </td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="data sessions">
            <thead>
                <tr>
                    <th class="col-time">"Signed in (UTC)"</th>
                    <th class="col-time">"Last seen (UTC)"</th>
                    <th>"IP"</th>
                    <th>"User agent"</th>
                    <th></th>
                    <th></th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
}

/// A table of API tokens with their scope, creation, last use, expiry and state, and a
/// "Revoke" button on each live one (posting back to `back`).
#[component]
pub fn TokenTable(
    tokens: Vec<ApiToken>,
    now_ms: i64,
    show_user: bool,
    back: &'static str,
    revoke: ServerAction<RevokeToken>,
) -> impl IntoView {
    if tokens.is_empty() {
        return view! { <p class="empty-state">"No API token yet."</p> }.into_any();
    }
    let rows = tokens
        .into_iter()
        .map(|t| {
            let state = if t.revoked_at_ms.is_some() {
                "revoked"
            } else if t.expires_at_ms.is_some_and(|at| at <= now_ms) {
                "expired"
            } else {
                "active"
            };
            let live = state == "active";
            let id = t.id.to_string();
            let row_id = id.clone();
            view! {
                <tr data-token=row_id data-state=state>
                    <td class="num mono">{t.id}</td>
                    {show_user.then(|| view! { <td class="mono">{t.user.clone()}</td> })}
                    <td>{t.name.clone().unwrap_or_else(|| "-".into())}</td>
                    <td>
                        {match t.scope {
                            TokenScope::ReadOnly => "read-only",
                            TokenScope::Role => "role",
                        }}
                    </td>
                    <td class="mono nowrap">{format_time(t.created_at_ms)}</td>
                    <td class="mono nowrap">
                        {t.last_used_ms.map_or_else(|| "never".to_string(), format_time)}
                    </td>
                    <td class="mono nowrap">
                        {t.expires_at_ms.map_or_else(|| "never".to_string(), format_time)}
                    </td>
                    <td class="token-state">
                        {match t.revoked_at_ms {
                            Some(at) => format!("revoked {}", format_time(at)),
                            None => state.to_string(),
                        }}
                    </td>
                    <td>
                        {live
                            .then(|| {
                                view! {
                                    <ActionForm action=revoke attr:class="revoke-token">
                                        <CsrfField />
                                        <input type="hidden" name="id" value=id.clone() />
                                        <input type="hidden" name="back" value=back />
                                        <button type="submit">"Revoke"</button>
                                    </ActionForm>
                                }
                            })}
                    </td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="data tokens">
            <thead>
                <tr>
                    <th class="num">"Id"</th>
                    {show_user.then(|| view! { <th>"User"</th> })}
                    <th>"Label"</th>
                    <th>"Scope"</th>
                    <th class="col-time">"Created (UTC)"</th>
                    <th class="col-time">"Last used (UTC)"</th>
                    <th class="col-time">"Expires (UTC)"</th>
                    <th>"State"</th>
                    <th></th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}

/// The "New API token" form: a plain POST to `/account/tokens`, which answers a page showing
/// the token once. `users` non-empty adds a user select (the admin page); empty = one's own.
#[component]
pub fn NewTokenForm(back: &'static str, users: Vec<String>) -> impl IntoView {
    let user_select = (!users.is_empty()).then(|| {
        let options = users
            .into_iter()
            .map(|u| view! { <option value=u.clone()>{u.clone()}</option> })
            .collect_view();
        view! {
            <label>"User " <select name="user">{options}</select></label>
        }
    });
    view! {
        <form method="post" action="/account/tokens" class="token-new">
            <CsrfField />
            <input type="hidden" name="back" value=back />
            <h3>"New API token"</h3>
            {user_select}
            <label>"Label " <input type="text" name="name" maxlength="100" placeholder="ci-replays" /></label>
            <label>
                "Expires "
                <select name="expires">
                    <option value="7d">"in 7 days"</option>
                    <option value="30d" selected>"in 30 days"</option>
                    <option value="90d">"in 90 days"</option>
                    <option value="never">"never"</option>
                </select>
            </label>
            <label>
                "Scope "
                <select name="scope">
                    <option value="role" selected>"the user's role"</option>
                    <option value="read_only">"read-only"</option>
                </select>
            </label>
            <button type="submit">"Create token"</button>
        </form>
    }
}
