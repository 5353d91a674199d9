//! `redrive user ...` and `redrive token ...`, and the bootstrap admin of `serve`.
//!
//! These run on the server host with the store's credentials, so they need no sign-in: who can
//! run them already owns the database. They are audited all the same, with the actor `(cli)`
//! (or `(bootstrap)`), names no user can have.

use std::io::Read as _;

use anyhow::{bail, Context as _};
use clap::{Args, Subcommand};
use redrive_core::accounts;
use redrive_core::actions::NewAuditEntry;
use redrive_core::auth::{parse_role, validate_password, validate_user_name};
use redrive_core::store::{NewUser, Store, StoreError};

use super::now_ms;
use crate::api::rfc3339;
use crate::config::Config;

/// Audit actor of the command line.
const CLI_ACTOR: &str = "(cli)";
/// Audit actor of the start-up bootstrap.
const BOOTSTRAP_ACTOR: &str = "(bootstrap)";

/// `redrive user ...`
#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Create a user. The password is read from standard input (at least 8 characters;
    /// one trailing newline is dropped), so it stays out of the shell history and `ps`.
    Add(UserAdd),
    /// List the users.
    List,
    /// Disable a user: they can no longer sign in, and their sessions and API tokens end at
    /// once (enabling them again brings none back).
    Disable {
        /// The user's name.
        name: String,
    },
    /// Enable a disabled user again (they sign in anew).
    Enable {
        /// The user's name.
        name: String,
    },
    /// Change a user's role; it applies to their sessions and tokens from their next request.
    SetRole {
        /// The user's name.
        name: String,
        /// The new role.
        #[arg(value_name = "viewer|operator|admin")]
        role: String,
    },
    /// Set a new password for a user, read from standard input; ends all their sessions.
    ResetPassword {
        /// The user's name.
        name: String,
        /// Read the password from standard input (required).
        #[arg(long)]
        password_stdin: bool,
    },
}

/// `redrive user add NAME --role R --password-stdin`
#[derive(Debug, Args)]
pub struct UserAdd {
    /// User name: letters, digits, `.`, `_`, `-`, `@`; at most 64 characters.
    pub name: String,
    /// viewer (reads), operator (also replays, deletes, restores), admin (also manages users
    /// and tokens).
    #[arg(long, value_name = "viewer|operator|admin")]
    pub role: String,
    /// Read the password from standard input (required: there is no other way to give it).
    #[arg(long)]
    pub password_stdin: bool,
}

/// `redrive token ...`
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create an API token acting as a user, and print it (once: only its hash is kept).
    Create(TokenCreate),
    /// List API tokens (never the tokens themselves).
    List {
        /// Only this user's.
        #[arg(long, value_name = "NAME")]
        user: Option<String>,
    },
    /// Revoke an API token by id (see `token list`).
    Revoke {
        /// The token's id.
        id: i64,
    },
}

/// `redrive token create --user NAME [--name LABEL]`
#[derive(Debug, Args)]
pub struct TokenCreate {
    /// The user the token acts as (with that user's role).
    #[arg(long, value_name = "NAME")]
    pub user: String,
    /// A label to recognise it by, e.g. `ci-replays`.
    #[arg(long, value_name = "LABEL")]
    pub name: Option<String>,
    /// When it stops working: a lifetime (`30d`, `12h`, `90m`), a date (`2027-01-31`, UTC) or
    /// an RFC 3339 time; default: never.
    #[arg(long, value_name = "30d|DATE|never", alias = "expires-at")]
    pub expires_in: Option<String>,
    /// `role`: whatever the user's current role allows (the default); `read_only`: reads
    /// only, no permission whatsoever.
    #[arg(long, value_name = "role|read_only", default_value = "role")]
    pub scope: String,
}

/// Runs a `user` command to completion.
/// `create`: make the SQLite store if its file is missing (`--create`; `store_open.rs`).
pub fn run_user(cmd: UserCommand, config: &Config, create: bool) -> anyhow::Result<()> {
    runtime()?.block_on(async {
        let store = crate::store_open::open_existing(config, create).await?;
        let out = match cmd {
            UserCommand::Add(add) => user_add(&store, add).await,
            UserCommand::List => user_list(&store).await,
            UserCommand::Disable { name } => user_set_disabled(&store, &name, true).await,
            UserCommand::Enable { name } => user_set_disabled(&store, &name, false).await,
            UserCommand::SetRole { name, role } => user_set_role(&store, &name, &role).await,
            UserCommand::ResetPassword {
                name,
                password_stdin,
            } => user_reset_password(&store, &name, password_stdin).await,
        };
        store.close().await;
        out
    })
}

/// Runs a `token` command to completion.
/// `create`: make the SQLite store if its file is missing (`--create`; `store_open.rs`).
pub fn run_token(cmd: TokenCommand, config: &Config, create: bool) -> anyhow::Result<()> {
    runtime()?.block_on(async {
        let store = crate::store_open::open_existing(config, create).await?;
        let out = match cmd {
            TokenCommand::Create(c) => token_create(&store, c).await,
            TokenCommand::List { user } => token_list(&store, user.as_deref()).await,
            TokenCommand::Revoke { id } => token_revoke(&store, id).await,
        };
        store.close().await;
        out
    })
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// The audit row's actor fields of a command (the operation sets action and outcome).
fn cli_by() -> NewAuditEntry {
    NewAuditEntry {
        actor: CLI_ACTOR.into(),
        user_agent: Some(format!("redrive-cli/{}", env!("CARGO_PKG_VERSION"))),
        ..NewAuditEntry::default()
    }
}

/// The password on standard input, without one trailing newline.
fn read_password() -> anyhow::Result<String> {
    let mut raw = String::new();
    std::io::stdin()
        .read_to_string(&mut raw)
        .context("reading the password from standard input (it must be UTF-8)")?;
    let pw = raw
        .strip_suffix("\r\n")
        .or_else(|| raw.strip_suffix('\n'))
        .unwrap_or(&raw);
    Ok(pw.to_string())
}

async fn user_add(store: &Store, add: UserAdd) -> anyhow::Result<()> {
    if !add.password_stdin {
        bail!("give the password on standard input with --password-stdin");
    }
    validate_user_name(&add.name)?;
    parse_role(&add.role)?;
    let password = read_password()?;
    let user =
        accounts::create_user(store, &cli_by(), &add.name, &add.role, &password, now_ms()).await?;
    eprintln!("added user {} ({})", user.name, user.role.as_str());
    Ok(())
}

async fn user_set_disabled(store: &Store, name: &str, disabled: bool) -> anyhow::Result<()> {
    let by = cli_by();
    let changed = accounts::set_disabled(store, &by, None, name, disabled, now_ms()).await?;
    let state = if disabled { "disabled" } else { "enabled" };
    if changed {
        eprintln!("{name} is {state}");
    } else {
        eprintln!("{name} already was {state}; nothing changed");
    }
    Ok(())
}

async fn user_set_role(store: &Store, name: &str, role: &str) -> anyhow::Result<()> {
    let by = cli_by();
    let was = accounts::set_role(store, &by, None, name, role, now_ms()).await?;
    eprintln!("{name} is {} (was {})", role.trim(), was.as_str());
    Ok(())
}

async fn user_reset_password(
    store: &Store,
    name: &str,
    password_stdin: bool,
) -> anyhow::Result<()> {
    if !password_stdin {
        bail!("give the new password on standard input with --password-stdin");
    }
    let password = read_password()?;
    let by = cli_by();
    let ended = accounts::reset_password(store, &by, name, &password, None, now_ms()).await?;
    eprintln!("new password set for {name}; {ended} sessions of theirs ended");
    Ok(())
}

async fn user_list(store: &Store) -> anyhow::Result<()> {
    println!("{:<32} {:<9} {:<9} created", "name", "role", "state");
    for u in store.users().await? {
        println!(
            "{:<32} {:<9} {:<9} {}",
            u.name,
            u.role.as_str(),
            if u.disabled { "disabled" } else { "active" },
            rfc3339(u.created_at_ms).unwrap_or_default()
        );
    }
    Ok(())
}

async fn token_create(store: &Store, c: TokenCreate) -> anyhow::Result<()> {
    let created = accounts::create_token(
        store,
        &cli_by(),
        &c.user,
        c.name.as_deref(),
        c.expires_in.as_deref().unwrap_or(""),
        &c.scope,
        now_ms(),
    )
    .await
    .map_err(|e| match e {
        accounts::AccountError::NotFound(m) => {
            anyhow::anyhow!("{m} (see `redrive user list`)")
        }
        other => other.into(),
    })?;
    let t = &created.listing;
    let expiry = match t.expires_at_ms.and_then(rfc3339) {
        Some(at) => format!("expires {at}"),
        None => "never expires".into(),
    };
    eprintln!(
        "created API token {} for {} (scope {}, {expiry}); it is shown once, keep it now:",
        t.id,
        t.user,
        t.scope.as_str()
    );
    println!("{}", created.token);
    Ok(())
}

async fn token_list(store: &Store, user: Option<&str>) -> anyhow::Result<()> {
    println!(
        "{:<6} {:<24} {:<24} {:<9} {:<26} {:<26} {:<26} revoked",
        "id", "user", "name", "scope", "created", "last used", "expires"
    );
    for t in store.api_tokens(user).await? {
        let time = |ms: Option<i64>| ms.and_then(rfc3339).unwrap_or_else(|| "-".into());
        println!(
            "{:<6} {:<24} {:<24} {:<9} {:<26} {:<26} {:<26} {}",
            t.id,
            t.user,
            t.name.as_deref().unwrap_or("-"),
            t.scope.as_str(),
            time(Some(t.created_at_ms)),
            time(t.last_used_ms),
            t.expires_at_ms
                .and_then(rfc3339)
                .unwrap_or_else(|| "never".into()),
            time(t.revoked_at_ms)
        );
    }
    Ok(())
}

async fn token_revoke(store: &Store, id: i64) -> anyhow::Result<()> {
    accounts::revoke_token(store, &cli_by(), id, None, now_ms())
        .await
        .map_err(|e| match e {
            accounts::AccountError::NotFound(m) => {
                anyhow::anyhow!("{m} (see `redrive token list`)")
            }
            other => other.into(),
        })?;
    eprintln!("revoked API token {id}");
    Ok(())
}

/// Why the bootstrap admin could not be created.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error("admin_user / REDRIVE_ADMIN_USER: {0}")]
    Name(redrive_core::auth::AuthError),
    #[error("admin_password / REDRIVE_ADMIN_PASSWORD: {0}")]
    Password(redrive_core::auth::AuthError),
    #[error("creating the first admin: {0}")]
    Store(#[from] StoreError),
    #[error("creating the first admin: {0}")]
    Hash(String),
}

/// `serve` at start-up: when `admin_user`/`admin_password` are set and the store has no user
/// at all, creates that admin (audited `user_add` by `(bootstrap)`). Returns whether it did.
pub async fn bootstrap_admin(store: &Store, config: &Config) -> Result<bool, BootstrapError> {
    if config.admin_user.is_empty() {
        return Ok(false);
    }
    if store.count_users().await? > 0 {
        tracing::debug!("users exist; admin_user is ignored");
        return Ok(false);
    }
    validate_user_name(&config.admin_user).map_err(BootstrapError::Name)?;
    validate_password(&config.admin_password).map_err(BootstrapError::Password)?;
    let password = config.admin_password.clone();
    let phc = crate::password_work::PasswordWork::global()
        .hash(password)
        .await
        .map_err(|e| BootstrapError::Hash(e.to_string()))?;
    let created = store
        .create_user(&NewUser {
            name: &config.admin_user,
            role: redrive_core::actions::Role::Admin,
            password_hash: &phc,
            created_at_ms: now_ms(),
        })
        .await?;
    // Another instance starting at the same moment may have won the race: fine.
    if created.is_none() {
        return Ok(false);
    }
    store
        .record_audit(&NewAuditEntry {
            actor: BOOTSTRAP_ACTOR.into(),
            action: "user_add".into(),
            outcome: format!("ok: added {} (admin) from admin_user", config.admin_user),
            ..NewAuditEntry::default()
        })
        .await?;
    tracing::info!(user = %config.admin_user, "created the first admin (admin_user)");
    Ok(true)
}
