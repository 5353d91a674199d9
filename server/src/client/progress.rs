//! Following a replay job to its end (`redrive replay`, `redrive jobs watch`): the job's
//! state is read from `GET /api/v1/replays/{id}` every [`POLL`] (as the job page does), shown
//! as a progress bar (indicatif) on a terminal, or as one line per state change on standard
//! error otherwise; Ctrl-C asks whether to cancel the job.
//!
//! Ctrl-C (SIGINT) while following: with a terminal on standard input and without `--yes`,
//! the question `Cancel job ID? [y/N]`; `y` cancels it through the API
//! (`POST /api/v1/replays/{id}/cancel`), anything else goes back to following it (a second
//! Ctrl-C at the question leaves it running). Without a terminal, or with `--yes`, the job is
//! cancelled only with `--cancel-on-interrupt`, and otherwise left running. Either way the
//! command then exits 130 (docs/cli.md).

use std::io::IsTerminal as _;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::Value;
use tokio::signal::unix::{signal, Signal, SignalKind};

use super::http::{Api, ClientError, Exit};
use super::output::{is_queueing, job_line, json_text, out};
use super::Output;

/// How often the job's state is read.
pub const POLL: Duration = Duration::from_millis(500);

/// How a job is followed.
#[derive(Debug, Clone, Copy)]
pub struct Follow {
    /// No bar and no state lines (`--quiet`).
    pub quiet: bool,
    /// Ask on Ctrl-C whether to cancel (a terminal on standard input, no `--yes`).
    pub ask: bool,
    /// Without asking: cancel on Ctrl-C (`--cancel-on-interrupt`).
    pub cancel_on_interrupt: bool,
    /// The final job's format on standard output.
    pub output: Output,
}

impl Follow {
    /// The defaults of a command with `yes` and `cancel_on_interrupt` given.
    pub fn new(quiet: bool, yes: bool, cancel_on_interrupt: bool, output: Output) -> Follow {
        Follow {
            quiet,
            ask: !yes && std::io::stdin().is_terminal() && std::io::stderr().is_terminal(),
            cancel_on_interrupt,
            output,
        }
    }
}

/// A job's status is final: `finished` or `cancelled`.
fn is_final(status: &str) -> bool {
    matches!(status, "finished" | "cancelled")
}

/// The exit code of a job that ended: 0 when it finished with no failed record, else 1.
pub fn exit_of(job: &Value) -> Exit {
    let failed = job.get("failed").and_then(Value::as_i64).unwrap_or(0);
    if job.get("status").and_then(Value::as_str) == Some("finished") && failed == 0 {
        Exit::Ok
    } else {
        Exit::JobFailed
    }
}

/// Follows job `id` until it ends (exit code of [`exit_of`]) or Ctrl-C (130), printing the
/// final job on standard output. Errors: the job cannot be read (its API error).
pub async fn follow(api: &Api, id: &str, how: Follow) -> Result<Exit, ClientError> {
    let mut sigint = signal(SignalKind::interrupt()).map_err(|e| {
        ClientError::new(Exit::Server, format!("cannot catch Ctrl-C (SIGINT): {e}"))
    })?;
    let mut view = View::new(how.quiet);
    let path = format!("/api/v1/replays/{id}");
    let mut tick = tokio::time::interval(POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let job = api.get(&path, &[]).await?.body;
                view.show(&job);
                let status = job.get("status").and_then(Value::as_str).unwrap_or("");
                if is_final(status) {
                    view.end();
                    print_job(&job, how.output)?;
                    return Ok(exit_of(&job));
                }
            }
            _ = sigint.recv() => {
                view.pause();
                if let Some(exit) = interrupted(api, id, how, &mut sigint).await? {
                    return Ok(exit);
                }
            }
        }
    }
}

/// The job on standard output: its line (`table`) or its JSON.
pub fn print_job(job: &Value, format: Output) -> Result<(), ClientError> {
    match json_text(job, format) {
        Some(text) => out(&text),
        None => out(&job_line(job)),
    }
}

/// Ctrl-C while following: `Some(130)` once the job is cancelled or left running, `None` to
/// follow it again.
async fn interrupted(
    api: &Api,
    id: &str,
    how: Follow,
    sigint: &mut Signal,
) -> Result<Option<Exit>, ClientError> {
    let cancel = if how.ask {
        eprint!("\nCancel job {id}? [y/N] ");
        let answer = tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).map(|_| line)
        });
        tokio::select! {
            a = answer => {
                let yes = matches!(
                    a.ok().and_then(Result::ok).as_deref().map(|l| l.trim().to_ascii_lowercase()).as_deref(),
                    Some("y" | "yes")
                );
                if !yes {
                    eprintln!("following job {id} again (Ctrl-C to stop)");
                    return Ok(None);
                }
                true
            }
            _ = sigint.recv() => {
                eprintln!();
                false
            }
        }
    } else {
        how.cancel_on_interrupt
    };
    if cancel {
        match api
            .post(&format!("/api/v1/replays/{id}/cancel"), &Value::Null)
            .await
        {
            Ok(a) => {
                eprintln!("cancelled job {id}");
                print_job(&a.body, how.output)?;
            }
            // Already over, or not allowed: say so; the command was interrupted all the same.
            Err(e) => eprintln!("redrive: could not cancel job {id}: {e}"),
        }
    } else {
        eprintln!(
            "interrupted; job {id} keeps running: follow it with `redrive jobs watch {id}`, \
             cancel it with `redrive jobs cancel {id}`"
        );
    }
    Ok(Some(Exit::Interrupted))
}

/// What the user sees while following: the bar on a terminal (standard error), else a line
/// per state change, or nothing.
struct View {
    quiet: bool,
    terminal: bool,
    bar: Option<ProgressBar>,
    /// The last status reported as a line.
    last: String,
}

impl View {
    fn new(quiet: bool) -> View {
        View {
            quiet,
            terminal: std::io::stderr().is_terminal(),
            bar: None,
            last: String::new(),
        }
    }

    fn show(&mut self, job: &Value) {
        if self.quiet {
            return;
        }
        let n = |k: &str| job.get(k).and_then(Value::as_i64).unwrap_or(0).max(0) as u64;
        let status = job.get("status").and_then(Value::as_str).unwrap_or("");
        if !self.terminal {
            if status != self.last {
                self.last = status.to_string();
                eprint!("{}", job_line(job));
            }
            return;
        }
        let bar = self.bar.get_or_insert_with(|| {
            // The job's id is in the line above the bar ("replay job ..."); the bar keeps to
            // ~80 columns: done/total, status and counts, rate (records/s), time left.
            let b = ProgressBar::with_draw_target(Some(n("total")), ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template("[{bar:20}] {pos}/{len} {msg} {per_sec} eta {eta}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            b
        });
        bar.set_length(n("total"));
        bar.set_position(n("published") + n("failed") + n("cancelled"));
        // While its rows are still queued, `total` grows (`docs/replay.md`, "Bulk actions").
        let queueing = if is_queueing(job) { ", queueing" } else { "" };
        bar.set_message(format!(
            "{status}{queueing}: {} published, {} failed",
            n("published"),
            n("failed")
        ));
    }

    /// Takes the bar off the screen (for a question); the next [`View::show`] draws it anew.
    fn pause(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }

    fn end(&mut self) {
        self.pause();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_job_exits_0_only_when_it_finished_without_failures() {
        assert_eq!(
            exit_of(&json!({"status": "finished", "failed": 0})),
            Exit::Ok
        );
        assert_eq!(
            exit_of(&json!({"status": "finished", "failed": 2})),
            Exit::JobFailed
        );
        assert_eq!(
            exit_of(&json!({"status": "cancelled", "failed": 0})),
            Exit::JobFailed
        );
        assert!(is_final("finished") && is_final("cancelled"));
        assert!(!is_final("paused") && !is_final("waiting") && !is_final("running"));
    }
}
