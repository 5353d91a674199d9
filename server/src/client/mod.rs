//! The command-line client (docs/cli.md): `redrive dead-letters list|show|export`,
//! `redrive replay`, `delete`, `restore` and `redrive jobs ...` against a running server's
//! JSON API (`/api/v1/...`), for runbooks, CI pipelines and incident bots.
//!
//! Unlike the store commands (`user`, `token`, ...), these never touch the database: they
//! authenticate with an API token (`REDRIVE_TOKEN`) like any script, so the server's roles,
//! topic scopes, approvals and audit apply. Filters are the API's own parameters, passed
//! through by name ([`filter_args::FilterArgs`]): the server parses them, so the CLI cannot
//! disagree with the list page or the API about which dead letters a filter selects.
//!
//! Modules: [`http`] (requests, API errors, exit codes), [`commands`] (what each command
//! does and prints), [`progress`] (following a replay job: progress bar, Ctrl-C),
//! [`filter_args`] (the selection flags), [`output`] (tables, JSON, JSON Lines).

pub mod commands;
pub mod filter_args;
pub mod http;
pub mod output;
pub mod progress;

use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};

pub use self::filter_args::{FilterArgs, SelectionArgs};
use self::http::{ClientError, Exit};

/// How to reach the server; on every client command (`global`: before or after the
/// subcommand's own arguments).
#[derive(Debug, Clone, Args)]
pub struct Conn {
    /// The redrive server's base URL, e.g. `https://redrive.internal`.
    #[arg(long, global = true, env = "REDRIVE_SERVER", value_name = "URL")]
    pub server: Option<String>,
    /// API token (`rdv_...`) acting as its user. Prefer the variable REDRIVE_TOKEN: a
    /// flag's value shows in `ps` and the shell history. Never printed.
    #[arg(
        long,
        global = true,
        env = "REDRIVE_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
    /// What to print on standard output: a human-readable `table` (the default), the API's
    /// `json`, or `jsonl` (one JSON object per line).
    #[arg(long, global = true, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// No progress and no notes on standard error (errors are still printed).
    #[arg(long, global = true)]
    pub quiet: bool,
}

/// The output format of `--output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Table,
    Json,
    Jsonl,
}

/// `redrive dead-letters ...`
#[derive(Debug, Args)]
pub struct DeadLettersArgs {
    #[command(flatten)]
    pub conn: Conn,
    #[command(subcommand)]
    pub command: DeadLettersCommand,
}

/// The dead-letter subcommands.
#[derive(Debug, Subcommand)]
pub enum DeadLettersCommand {
    /// List dead letters matching the filter, newest first (`GET /api/v1/dead-letters`).
    List(ListArgs),
    /// Show one dead letter: its fields, headers, key and value (`GET
    /// /api/v1/dead-letters/{id}`).
    Show {
        /// The dead letter's id.
        id: i64,
    },
    /// Export every dead letter matching the filter as JSON Lines (`redrive.dead_letter.v1`,
    /// docs/export.md), streamed to standard output or `--out FILE`.
    Export(ExportArgs),
}

/// `redrive dead-letters list`
#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Most dead letters to print (pages of up to 500 are fetched as needed).
    #[arg(long, default_value_t = 50, value_name = "N")]
    pub limit: u32,
    /// Every dead letter matching the filter, however many (instead of `--limit`).
    #[arg(long, conflicts_with = "limit")]
    pub all: bool,
    /// Start after this position: the `next_cursor` a previous listing reported.
    #[arg(long, value_name = "CURSOR")]
    pub cursor: Option<String>,
}

/// `redrive dead-letters export`
#[derive(Debug, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Write to FILE (made complete or not at all: written aside, renamed at the end)
    /// instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub out: Option<std::path::PathBuf>,
}

/// `redrive replay`
#[derive(Debug, Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub conn: Conn,
    #[command(flatten)]
    pub selection: SelectionArgs,
    /// Publish every record to this topic instead of its own source topic.
    #[arg(long, value_name = "TOPIC")]
    pub target_topic: Option<String>,
    /// Throttle, messages per second (default: as fast as the relay goes).
    #[arg(long, value_name = "MSGS_PER_SEC")]
    pub rate: Option<u32>,
    /// Why (kept in the audit trail; required when the server sets `[reasons]`).
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
    /// Only say what a replay would do (`POST /api/v1/replays/dry-run`): how many dead
    /// letters, to which topics, which skipped. Nothing is published.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask before acting on a filter (required without a terminal).
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Print the job's id and return at once instead of following it to the end.
    #[arg(long)]
    pub no_follow: bool,
    /// Without a terminal to ask on (or with `--yes`): cancel the job on Ctrl-C / SIGINT
    /// instead of leaving it running.
    #[arg(long)]
    pub cancel_on_interrupt: bool,
}

/// `redrive delete` and `redrive restore`
#[derive(Debug, Args)]
pub struct ChangeArgs {
    #[command(flatten)]
    pub conn: Conn,
    #[command(flatten)]
    pub selection: SelectionArgs,
    /// Why (kept in the audit trail; required when the server sets `[reasons]`).
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
    /// Only count the dead letters the selection names; nothing changes.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask before acting on a filter (required without a terminal).
    #[arg(long, short = 'y')]
    pub yes: bool,
}

/// `redrive jobs ...`
#[derive(Debug, Args)]
pub struct JobsArgs {
    #[command(flatten)]
    pub conn: Conn,
    #[command(subcommand)]
    pub command: JobsCommand,
}

/// The replay-job subcommands.
#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// Recent replay jobs, newest first.
    List {
        /// Most jobs to list (1 to 500).
        #[arg(long, default_value_t = 20, value_name = "N")]
        limit: u32,
    },
    /// One job's state and counts.
    Show {
        /// The job's id.
        id: String,
    },
    /// Follow a job to its end with a progress bar (exit code as for `redrive replay`).
    Watch {
        /// The job's id.
        id: String,
        /// Without a terminal to ask on: cancel the job on Ctrl-C / SIGINT.
        #[arg(long)]
        cancel_on_interrupt: bool,
        /// Do not ask on Ctrl-C (as without a terminal).
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Cancel a job (running, waiting or paused); its unsent records go back to their
    /// status.
    Cancel {
        /// The job's id.
        id: String,
    },
}

/// A client command, as `main` hands it over.
#[derive(Debug)]
pub enum Request {
    DeadLetters(DeadLettersArgs),
    Replay(Box<ReplayArgs>),
    Delete(ChangeArgs),
    Restore(ChangeArgs),
    Jobs(JobsArgs),
}

/// Runs a client command to completion and returns its exit code (docs/cli.md, "Exit
/// codes"); every error is printed to standard error first, the server's message as given.
pub fn run(request: Request) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("redrive: starting the async runtime: {e}");
            return Exit::Server.into();
        }
    };
    let result = rt.block_on(commands::run(request));
    // Nothing may keep the process alive (a stdin reader left blocked by a Ctrl-C prompt).
    rt.shutdown_background();
    match result {
        Ok(exit) => exit.into(),
        Err(e) => {
            report(&e);
            e.exit().into()
        }
    }
}

/// Prints `e` to standard error: `redrive: MESSAGE`.
fn report(e: &ClientError) {
    eprintln!("redrive: {e}");
}
