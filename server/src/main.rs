//! `redrive`: a self-hosted dead letter queue manager for Apache Kafka.
//!
//! Subcommands: `serve` (UI + JSON API + ingest), `migrate` (apply database migrations and
//! exit), `config` (print the effective configuration, secrets redacted), `quarantine`
//! (records the store refused: list, retry), `demo` (the seed
//! design's agent pipeline producing real dead letters; see the `redrive-demo` crate), and
//! the client commands `dead-letters`, `replay`, `delete`, `restore`, `jobs`, which talk to
//! a running server's API (`client/`, docs/cli.md).

/// jemalloc instead of glibc's malloc: bounded resident memory under many threads (see the
/// `tikv-jemallocator` entry in Cargo.toml and docs/configuration.md, "Memory bounds").
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read when it starts (`MALLOC_CONF` in the environment still overrides
/// them; the symbol is jemalloc's unprefixed `malloc_conf` because Cargo.toml enables
/// `unprefixed_malloc_on_supported_platforms`). `dirty_decay_ms:1000`: freed pages go back to
/// the OS after about 1 s instead of jemalloc's 10 s. Ingesting a 1M-record backlog on
/// SQLite the server peaked at 182-183 MiB with it and 198-239 MiB without, at the same
/// rate (docs/bench.md, "2026-12-06 (6)"); the peak is the first seconds' churn over
/// jemalloc's 8 arenas, not the store.
/// A thin pointer to a NUL-terminated string, as jemalloc's `const char *malloc_conf`.
#[export_name = "malloc_conf"]
pub static MALLOC_CONF: &[u8; 20] = b"dirty_decay_ms:1000\0";

mod alerts_metrics;
mod api;
mod api_actions;
mod api_approvals;
mod api_archive;
mod api_automation;
mod api_error;
mod api_labels;
mod api_outcome;
mod api_quarantine;
mod api_users;
mod api_versions;
mod archive_cli;
mod audit_csv;
mod auth;
mod automation_rounds;
mod client;
mod config;
mod export;
mod form_errors;
mod http_server;
mod json_body;
mod notify;
mod openapi;
mod openapi_page;
use redrive_core::password_work;
mod quarantine_cli;
mod raw;
mod router;
mod security_headers;
mod serve;
mod site;
mod store_open;
mod telemetry;
mod telemetry_retention;
mod telemetry_search;
mod telemetry_tiers;
mod telemetry_write_gate;
mod token_form;

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};

use crate::config::{Config, Loaded, Overrides};

/// A self-hosted dead letter queue manager for Apache Kafka.
///
/// Settings come from flags, `REDRIVE_*` environment variables and `redrive.toml` (flags win
/// over variables, variables over the file); `redrive config` prints the result. The client
/// commands (`dead-letters`, `replay`, `delete`, `restore`, `jobs`) take none of them: they
/// talk to a running server (`--server`, `--token`; docs/cli.md).
#[derive(Debug, Parser)]
#[command(name = "redrive", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// What the commands that read the configuration take (the server, the store commands and
/// the demo); `global`, so each may also follow a store command's own subcommand.
#[derive(Debug, Args)]
struct ConfigArgs {
    /// Configuration file (TOML). Default: `redrive.toml` in the working directory, if it
    /// exists.
    #[arg(long, global = true, value_name = "PATH", env = "REDRIVE_CONFIG")]
    config: Option<PathBuf>,

    #[command(flatten)]
    settings: SettingFlags,
}

/// A store command (`user`, `token`, `quarantine`, `archive`): the configuration, `--create`
/// and the command's own subcommand `C`.
#[derive(Debug, Args)]
struct StoreCommand<C: Subcommand> {
    #[command(flatten)]
    config: ConfigArgs,

    /// Create an empty SQLite store when its file does not exist. Without it the store
    /// commands refuse, so that a wrong --database-url or working directory cannot make a
    /// new, empty `redrive.db`.
    #[arg(long, global = true)]
    create: bool,

    #[command(subcommand)]
    command: C,
}

/// `redrive demo`: the configuration (the demo connects with redrive's Kafka settings) and
/// the demo's own options.
#[derive(Debug, Args)]
struct DemoCommand {
    #[command(flatten)]
    config: ConfigArgs,

    #[command(flatten)]
    demo: redrive_demo::DemoArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the UI, the JSON API, health and metrics, and ingest the DLQ topics, until SIGINT
    /// or SIGTERM.
    Serve(ConfigArgs),
    /// Apply the database migrations and exit (`serve` also applies them at start-up).
    Migrate(ConfigArgs),
    /// Print the effective configuration as TOML (passwords and secrets redacted).
    Config(ConfigArgs),
    /// Manage users: `user add NAME --role viewer|operator|admin --password-stdin`, `user list`.
    User(StoreCommand<auth::cli::UserCommand>),
    /// Manage API tokens: `token create --user NAME [--name LABEL]` (printed once),
    /// `token list`, `token revoke ID`.
    Token(StoreCommand<auth::cli::TokenCommand>),
    /// Records the store refused even in reduced form: `quarantine list [--limit N]`,
    /// `quarantine retry ID... | --all` (store them again, e.g. after an upgrade).
    Quarantine(StoreCommand<quarantine_cli::QuarantineCommand>),
    /// The archive (docs/retention.md): `archive create [--filter QUERY] [--location L]`
    /// writes matching dead letters out; `archive restore LOCATION` stores an archived run
    /// again (idempotent, checksums verified, audited).
    Archive(StoreCommand<archive_cli::ArchiveCommand>),
    /// Run the demo pipeline (the seed design's agent: producer, flaky LLM, retry topics,
    /// DLQ) on the configured Kafka until SIGINT or SIGTERM.
    // Boxed: its many options would make every `Command` value large.
    Demo(Box<DemoCommand>),
    /// Client of a running server (docs/cli.md): `dead-letters list|show|export`, with the
    /// API's filters. Needs REDRIVE_SERVER and REDRIVE_TOKEN (or --server, --token).
    DeadLetters(client::DeadLettersArgs),
    /// Client: replay dead letters (--id, filter flags or --all) and follow the job with a
    /// progress bar; --dry-run says what it would do. Exit codes in docs/cli.md.
    Replay(Box<client::ReplayArgs>),
    /// Client: delete dead letters (kept, hidden, restorable; audited).
    Delete(client::ChangeArgs),
    /// Client: restore deleted dead letters to their previous status.
    Restore(client::ChangeArgs),
    /// Client: replay jobs: `jobs list|show|watch|cancel`.
    Jobs(client::JobsArgs),
}

/// What a command that reads the configuration runs ([`run`]), without the arguments
/// [`main`] has taken out of it (the configuration file, the setting flags, `--create`).
#[derive(Debug)]
enum StoreRun {
    Serve,
    Migrate,
    Config,
    User(auth::cli::UserCommand),
    Token(auth::cli::TokenCommand),
    Quarantine(quarantine_cli::QuarantineCommand),
    Archive(archive_cli::ArchiveCommand),
    Demo(Box<redrive_demo::DemoArgs>),
}

/// Settings that can also be given as flags (each overrides its `REDRIVE_*` variable and the
/// file). See docs/configuration.md for every setting.
#[derive(Debug, Args)]
struct SettingFlags {
    /// Database URL: `sqlite:PATH` or `postgres://...` [REDRIVE_DATABASE_URL].
    #[arg(long, global = true, value_name = "URL")]
    database_url: Option<String>,
    /// Kafka bootstrap servers [REDRIVE_KAFKA_BROKERS].
    #[arg(long, global = true, value_name = "HOST:PORT,...")]
    kafka_brokers: Option<String>,
    /// DLQ topics, comma-separated; `^` starts a regex [REDRIVE_DLQ_TOPICS].
    #[arg(long, global = true, value_name = "TOPICS")]
    dlq_topics: Option<String>,
    /// Kafka consumer group [REDRIVE_GROUP_ID].
    #[arg(long, global = true, value_name = "GROUP")]
    group_id: Option<String>,
    /// Listen address, `IP:PORT` (port 0 = any free port) [REDRIVE_LISTEN].
    #[arg(long, global = true, value_name = "ADDR")]
    listen: Option<String>,
    /// Directory of the UI's built assets [REDRIVE_SITE_ROOT].
    #[arg(long, global = true, value_name = "DIR")]
    site_root: Option<String>,
    /// Log filter, RUST_LOG syntax [REDRIVE_LOG].
    #[arg(long, global = true, value_name = "FILTER")]
    log: Option<String>,
    /// Do not run Kafka ingest; serve the store only [REDRIVE_INGEST_ENABLED=false].
    #[arg(long, global = true)]
    no_ingest: bool,
}

impl SettingFlags {
    fn overrides(&self) -> Overrides {
        Overrides {
            database_url: self.database_url.clone(),
            kafka_brokers: self.kafka_brokers.clone(),
            dlq_topics: self.dlq_topics.clone(),
            group_id: self.group_id.clone(),
            listen: self.listen.clone(),
            site_root: self.site_root.clone(),
            log: self.log.clone(),
            ingest_enabled: self.no_ingest.then_some(false),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The client commands talk to a server's API: no store, no configuration file.
    let (config_args, create, command) = match cli.command {
        Command::DeadLetters(a) => return client::run(client::Request::DeadLetters(a)),
        Command::Replay(a) => return client::run(client::Request::Replay(a)),
        Command::Delete(a) => return client::run(client::Request::Delete(a)),
        Command::Restore(a) => return client::run(client::Request::Restore(a)),
        Command::Jobs(a) => return client::run(client::Request::Jobs(a)),
        Command::Serve(c) => (c, false, StoreRun::Serve),
        Command::Migrate(c) => (c, false, StoreRun::Migrate),
        Command::Config(c) => (c, false, StoreRun::Config),
        Command::User(c) => (c.config, c.create, StoreRun::User(c.command)),
        Command::Token(c) => (c.config, c.create, StoreRun::Token(c.command)),
        Command::Quarantine(c) => (c.config, c.create, StoreRun::Quarantine(c.command)),
        Command::Archive(c) => (c.config, c.create, StoreRun::Archive(c.command)),
        Command::Demo(d) => (d.config, false, StoreRun::Demo(Box::new(d.demo))),
    };
    let loaded = match Config::load(
        config_args.config.as_deref(),
        std::env::vars(),
        &config_args.settings.overrides(),
    ) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("redrive: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = init_logging(&loaded.config.log) {
        eprintln!("redrive: {e:#}");
        return ExitCode::from(2);
    }
    report_sources(&loaded);
    // The roles every user name resolves against (`parse_role`, sign-in, sessions, tokens).
    match loaded.config.roles() {
        Ok(roles) => redrive_core::permission::install_roles(roles),
        Err(e) => {
            eprintln!("redrive: {e}");
            return ExitCode::from(2);
        }
    }
    match run(command, loaded.config, create) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs a command that works on the store or the configuration; `create` is `--create`
/// (`store_open.rs`).
fn run(command: StoreRun, config: Config, create: bool) -> anyhow::Result<()> {
    match command {
        StoreRun::Config => print!("{}", config.to_redacted_toml()?),
        StoreRun::User(cmd) => auth::cli::run_user(cmd, &config, create)?,
        StoreRun::Token(cmd) => auth::cli::run_token(cmd, &config, create)?,
        StoreRun::Quarantine(cmd) => quarantine_cli::run(cmd, &config, create)?,
        StoreRun::Archive(cmd) => archive_cli::run(cmd, &config, create)?,
        StoreRun::Serve => block_on(serve::serve(config))??,
        StoreRun::Migrate => block_on(serve::migrate(&config))??,
        StoreRun::Demo(args) => {
            // The demo connects with redrive's own Kafka settings (brokers, REDRIVE_KAFKA__*).
            let demo = args.into_config(config.kafka_brokers, config.kafka.into_iter().collect());
            block_on(redrive_demo::run_until_signal(demo))??
        }
    }
    Ok(())
}

/// Runs `fut` on a fresh multi-threaded runtime. Tasks still running when it returns (an
/// ingest abandoned by the shutdown timeout) get [`RUNTIME_SHUTDOWN`], then the process exits.
fn block_on<F: std::future::Future>(fut: F) -> anyhow::Result<F::Output> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let out = rt.block_on(fut);
    rt.shutdown_timeout(RUNTIME_SHUTDOWN);
    Ok(out)
}

/// How long leftover tasks may run once a command has finished.
const RUNTIME_SHUTDOWN: std::time::Duration = std::time::Duration::from_secs(5);

/// Logs to stderr (stdout is kept for command output), with colours only on a terminal.
fn init_logging(filter: &str) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_new(filter).with_context(|| {
        format!("invalid log filter `{filter}` (log / REDRIVE_LOG; e.g. `info` or `redrive=debug`)")
    })?;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init()
        .map_err(|e| anyhow::anyhow!("initialising logging: {e}"))
}

fn report_sources(loaded: &Loaded) {
    match &loaded.file {
        Some(path) => tracing::debug!(file = %path.display(), "configuration file read"),
        None => tracing::debug!("no configuration file; using flags, REDRIVE_* and defaults"),
    }
    for var in &loaded.ignored_env {
        tracing::warn!("ignoring environment variable {var}: it is not a redrive setting");
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::{Cli, Command};

    /// The command line is well formed (clap's own checks: no two arguments with one name,
    /// and the like).
    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// The client commands talk to a server: the server's settings are neither offered in
    /// their help nor accepted; the server and store commands take them before or after
    /// their own subcommand.
    #[test]
    fn only_the_commands_that_read_the_configuration_take_its_flags() {
        let mut cli = Cli::command();
        cli.build();
        for client in ["replay", "delete", "restore", "jobs", "dead-letters"] {
            let help = cli
                .find_subcommand_mut(client)
                .expect(client)
                .render_long_help()
                .to_string();
            for server_flag in ["--database-url", "--kafka-brokers", "--config", "--create"] {
                assert!(
                    !help.contains(server_flag),
                    "{client}: {server_flag}\n{help}"
                );
            }
        }
        assert!(
            Cli::try_parse_from(["redrive", "replay", "--database-url", "x", "--all"]).is_err()
        );
        let serve = Cli::try_parse_from(["redrive", "serve", "--database-url", "sqlite:x.db"])
            .expect("serve");
        let Command::Serve(c) = serve.command else {
            panic!("serve")
        };
        assert_eq!(c.settings.database_url.as_deref(), Some("sqlite:x.db"));
        let user = Cli::try_parse_from([
            "redrive",
            "user",
            "list",
            "--create",
            "--database-url",
            "sqlite:y.db",
        ])
        .expect("user list");
        let Command::User(c) = user.command else {
            panic!("user")
        };
        assert!(c.create);
        assert_eq!(
            c.config.settings.database_url.as_deref(),
            Some("sqlite:y.db")
        );
        let help = cli
            .find_subcommand_mut("serve")
            .expect("serve")
            .render_long_help()
            .to_string();
        assert!(
            help.contains("--database-url") && !help.contains("--create"),
            "{help}"
        );
    }
}
