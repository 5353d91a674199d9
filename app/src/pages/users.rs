use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_location;

use super::account::{NewTokenForm, TokenTable};
use super::LoadError;
use crate::auth_context::{use_session, CsrfField};
use crate::components::ActionError;
use crate::display::format_time;
use crate::http_status::HttpStatus;
use crate::users_api::{get_users, AccountNotice, AddUser, ChangeUser, RevokeToken, UsersView};
use crate::{query, wire};
use redrive_core::auth::User;
use redrive_core::permission::Permission;

/// `/admin/users` (the `manage_users` permission): every user with their role and state — add
/// a user, change a role, disable (their sessions and tokens end at once) or enable, reset a
/// password — and every user's API tokens, to create (shown once) and revoke.
/// Server-rendered; works without JavaScript.
#[component]
pub fn UsersPage() -> impl IntoView {
    let data = wire::resource(|| (), |_| get_users());
    let add = ServerAction::<AddUser>::new();
    let change = ServerAction::<ChangeUser>::new();
    let revoke = ServerAction::<RevokeToken>::new();
    let status = HttpStatus::current();
    let search = use_location().search;
    Effect::new(move |_| {
        let done = matches!(add.value().get(), Some(Ok(_)))
            || matches!(change.value().get(), Some(Ok(_)))
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
        add.value()
            .get()
            .and_then(Result::err)
            .or_else(|| change.value().get().and_then(Result::err))
            .or_else(|| revoke.value().get().and_then(Result::err))
    };
    view! {
        <Title text="Users · redrive" />
        <h1>"Users and API tokens"</h1>
        {move || notice().map(|n| view! { <p class="done-box" role="status">{n}</p> })}
        {move || error().map(|e| view! { <ActionError error=e /> })}
        <Transition fallback=|| view! { <p class="dim">"Loading…"</p> }>
            {move || {
                let status = status.clone();
                Suspend::new(async move {
                    match data.await {
                        Ok(v) => {
                            view! { <Users v=v add=add change=change revoke=revoke /> }.into_any()
                        }
                        Err(error) => {
                            let forbidden = matches!(
                                &error,
                                ServerFnError::ServerError(m) if m.starts_with("Not allowed")
                            );
                            status.set(if forbidden { 403 } else { 503 });
                            view! { <LoadError error=error /> }.into_any()
                        }
                    }
                })
            }}
        </Transition>
    }
}

#[component]
fn Users(
    v: UsersView,
    add: ServerAction<AddUser>,
    change: ServerAction<ChangeUser>,
    revoke: ServerAction<RevokeToken>,
) -> impl IntoView {
    let UsersView {
        users,
        tokens,
        roles,
        me,
        now_ms,
    } = v;
    let names: Vec<String> = users
        .iter()
        .filter(|u| !u.disabled)
        .map(|u| u.name.clone())
        .collect();
    let rows = users
        .into_iter()
        .map(|u| view! { <UserRow u=u roles=roles.clone() me=me.clone() change=change /> })
        .collect_view();
    let role_options = roles
        .iter()
        .map(|r| view! { <option value=r.clone() selected={r.as_str() == "viewer"}>{r.clone()}</option> })
        .collect_view();
    view! {
        <section id="users">
            <table class="data users">
                <thead>
                    <tr>
                        <th>"User"</th>
                        <th>"Role"</th>
                        <th>"State"</th>
                        <th class="col-time">"Created (UTC)"</th>
                        <th>"Reset password"</th>
                        <th></th>
                    </tr>
                </thead>
                <tbody>{rows}</tbody>
            </table>
            <ActionForm action=add attr:class="user-add">
                <CsrfField />
                <h2>"Add a user"</h2>
                <label>"Name " <input type="text" name="name" maxlength="64" required autocomplete="off" /></label>
                <label>"Role " <select name="role">{role_options}</select></label>
                <label>
                    "Password (at least 8 characters) "
                    <input type="password" name="password" minlength="8" required autocomplete="new-password" />
                </label>
                <button type="submit">"Add user"</button>
            </ActionForm>
        </section>
        <section id="tokens">
            <h2>"API tokens"</h2>
            <TokenTable tokens=tokens now_ms=now_ms show_user=true back="/admin/users" revoke=revoke />
            <NewTokenForm back="/admin/users" users=names />
        </section>
    }
}

#[component]
fn UserRow(
    u: User,
    roles: Vec<String>,
    me: String,
    change: ServerAction<ChangeUser>,
) -> impl IntoView {
    let is_me = u.name == me;
    let name = u.name.clone();
    let (role_name, password_name, toggle_name) = (name.clone(), name.clone(), name.clone());
    let label = format!("New password for {name}");
    let row_name = name.clone();
    let current = u.role.as_str().to_string();
    let options = roles
        .into_iter()
        .map(|r| {
            let selected = r == current;
            view! { <option value=r.clone() selected=selected>{r.clone()}</option> }
        })
        .collect_view();
    let state = if u.disabled { "disabled" } else { "active" };
    let (toggle_op, toggle_label) = if u.disabled {
        ("enable", "Enable")
    } else {
        ("disable", "Disable")
    };
    view! {
        <tr data-user=row_name data-state=state>
            <td class="mono">{name} {is_me.then_some(" (you)")}</td>
            <td>
                {if is_me {
                    view! { <span>{current.clone()}</span> }.into_any()
                } else {
                    view! {
                        <ActionForm action=change attr:class="user-role">
                            <CsrfField />
                            <input type="hidden" name="name" value=role_name.clone() />
                            <input type="hidden" name="op" value="set_role" />
                            <select name="role">{options}</select>
                            <button type="submit">"Set role"</button>
                        </ActionForm>
                    }
                        .into_any()
                }}
            </td>
            <td>{state}</td>
            <td class="mono nowrap">{format_time(u.created_at_ms)}</td>
            <td>
                <ActionForm action=change attr:class="user-password">
                    <CsrfField />
                    <input type="hidden" name="name" value=password_name.clone() />
                    <input type="hidden" name="op" value="reset_password" />
                    <input type="password" name="password" minlength="8" required autocomplete="new-password" aria-label=label.clone() />
                    <button type="submit">"Reset"</button>
                </ActionForm>
            </td>
            <td>
                {(!is_me)
                    .then(|| {
                        view! {
                            <ActionForm action=change attr:class="user-toggle">
                                <CsrfField />
                                <input type="hidden" name="name" value=toggle_name.clone() />
                                <input type="hidden" name="op" value=toggle_op />
                                <button type="submit">{toggle_label}</button>
                            </ActionForm>
                        }
                    })}
            </td>
        </tr>
    }
}

/// The "Users" navigation link, shown to who holds `manage_users` (the page checks anyway).
#[component]
pub fn UsersNavLink() -> impl IntoView {
    let session = use_session();
    view! {
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                session
                    .0
                    .await
                    .ok()
                    .flatten()
                    .filter(|s| s.actor.can(Permission::ManageUsers))
                    .map(|_| view! { <a href="/admin/users">"Users"</a> })
            })}
        </Suspense>
    }
}
