//! The user and account operations: managing users (`/api/v1/users...`), one's own password
//! and sessions, and API tokens (`/api/v1/tokens...`).

use utoipa::openapi::path::HttpMethod::{Delete, Get, Post};

use super::params::{boolean_text, id_path, items_of, path, query, string, Schemas};
use super::Who::{Own, Permission};
use super::{op, Body, Op};
use crate::api_users as usr;

/// Users, sessions and tokens: user management, and one's own account.
pub(super) fn users(s: &mut Schemas) -> Vec<Op> {
    let user = || path("name", string(), "User name.");
    let user_item = s.of::<usr::UserItem>();
    let token = s.of::<usr::TokenItem>();

    vec![
        op(
            Get,
            "/api/v1/users",
            "listUsers",
            "users",
            "Users, by name",
            Permission("manage_users"),
        )
        .ok(200, Body::Json(items_of(user_item.clone()))),
        op(
            Post,
            "/api/v1/users",
            "createUser",
            "users",
            "Add a user",
            Permission("manage_users"),
        )
        .body(s.of::<usr::NewUserBody>(), true)
        .ok(201, Body::Json(user_item.clone()))
        .errors(&[400, 409, 413, 422]),
        op(
            Post,
            "/api/v1/users/{name}/disable",
            "disableUser",
            "users",
            "Disable a user (ends their sessions and tokens)",
            Permission("manage_users"),
        )
        .params([user()])
        .ok(200, Body::Json(user_item.clone()))
        .errors(&[400, 404, 409, 422]),
        op(
            Post,
            "/api/v1/users/{name}/enable",
            "enableUser",
            "users",
            "Enable a user",
            Permission("manage_users"),
        )
        .params([user()])
        .ok(200, Body::Json(user_item.clone()))
        .errors(&[400, 404, 409, 422]),
        op(
            Post,
            "/api/v1/users/{name}/role",
            "setUserRole",
            "users",
            "Change a user's role",
            Permission("manage_users"),
        )
        .params([user()])
        .body(s.of::<usr::RoleBody>(), true)
        .ok(200, Body::Json(user_item))
        .errors(&[400, 404, 409, 413, 422]),
        op(
            Post,
            "/api/v1/users/{name}/password",
            "resetPassword",
            "users",
            "Reset a user's password (ends their sessions)",
            Permission("manage_users"),
        )
        .params([user()])
        .body(s.of::<usr::PasswordBody>(), true)
        .ok(200, Body::Json(s.of::<usr::PasswordSet>()))
        .errors(&[400, 404, 409, 413, 422]),
        op(
            Post,
            "/api/v1/account/password",
            "changeOwnPassword",
            "account",
            "Change one's own password (ends one's other sessions)",
            Own,
        )
        .body(s.of::<usr::ChangePasswordBody>(), true)
        .ok(200, Body::Json(s.of::<usr::PasswordSet>()))
        .errors(&[400, 409, 413, 422]),
        op(
            Get,
            "/api/v1/sessions",
            "listSessions",
            "account",
            "One's own sessions",
            Own,
        )
        .ok(200, Body::Json(items_of(s.of::<usr::SessionItem>()))),
        op(
            Post,
            "/api/v1/sessions/{handle}/end",
            "endSession",
            "account",
            "End one of one's own sessions",
            Own,
        )
        .params([path("handle", string(), "Session handle (from the list).")])
        .ok(200, Body::Json(s.of::<usr::Ended>()))
        .errors(&[400, 404, 422]),
        op(
            Post,
            "/api/v1/sessions/end-others",
            "endOtherSessions",
            "account",
            "End every other session of one's own",
            Own,
        )
        .ok(200, Body::Json(s.of::<usr::Ended>()))
        .errors(&[400]),
        op(
            Get,
            "/api/v1/tokens",
            "listTokens",
            "account",
            "API tokens: one's own; `user` or `all=true` needs `manage_users`",
            Own,
        )
        .params([
            query("user", string(), "Another user's tokens."),
            query("all", boolean_text(), "Every user's tokens."),
        ])
        .ok(200, Body::Json(items_of(token.clone())))
        .errors(&[400, 404]),
        op(
            Post,
            "/api/v1/tokens",
            "createToken",
            "account",
            "Create an API token (shown once in `token`)",
            Own,
        )
        .body(s.of::<usr::NewTokenBody>(), false)
        .ok(201, Body::Json(token.clone()))
        .errors(&[400, 404, 409, 413, 422]),
        op(
            Post,
            "/api/v1/tokens/{id}/revoke",
            "revokeToken",
            "account",
            "Revoke an API token",
            Own,
        )
        .params([id_path("id", "Token id.")])
        .ok(200, Body::Json(token.clone()))
        .errors(&[400, 404, 409]),
        op(
            Delete,
            "/api/v1/tokens/{id}",
            "deleteToken",
            "account",
            "Revoke an API token (the same as `POST .../revoke`)",
            Own,
        )
        .params([id_path("id", "Token id.")])
        .ok(200, Body::Json(token))
        .errors(&[400, 404, 409]),
    ]
}
