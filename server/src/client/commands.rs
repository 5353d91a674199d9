//! What each client command does: which API routes it calls, what it asks, what it prints
//! and how it exits (docs/cli.md).

use std::io::{IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::filter_args::Selection;
use super::http::{Answer, Api, ClientError, Exit};
use super::output::{self, json_text, out};
use super::progress::{self, Follow};
use super::{
    ChangeArgs, Conn, DeadLettersCommand, ExportArgs, JobsCommand, ListArgs, Output, ReplayArgs,
    Request,
};

/// Most dead letters one list request asks for (the API's `limit` cap).
const PAGE: u32 = redrive_core::filter::MAX_LIMIT;

/// Runs `request`; `Ok` carries the exit code of a command that did its work (a job that
/// ended with failures is `Ok(Exit::JobFailed)`).
pub async fn run(request: Request) -> Result<Exit, ClientError> {
    match request {
        Request::DeadLetters(a) => {
            let api = api(&a.conn)?;
            match a.command {
                DeadLettersCommand::List(l) => list(&api, &a.conn, l).await,
                DeadLettersCommand::Show { id } => show(&api, &a.conn, id).await,
                DeadLettersCommand::Export(e) => export(&api, &a.conn, e).await,
            }
        }
        Request::Replay(a) => replay(*a).await,
        Request::Delete(a) => change(a, Change::Delete).await,
        Request::Restore(a) => change(a, Change::Restore).await,
        Request::Jobs(a) => {
            let api = api(&a.conn)?;
            jobs(&api, &a.conn, a.command).await
        }
    }
}

fn api(conn: &Conn) -> Result<Api, ClientError> {
    Api::new(conn.server.as_deref(), conn.token.as_deref())
}

/// A note for people on standard error, unless `--quiet`.
fn note(conn: &Conn, text: &str) {
    if !conn.quiet {
        eprintln!("{text}");
    }
}

// ---------------------------------------------------------------------------------------------
// dead-letters list | show | export

/// `GET /api/v1/dead-letters`, page after page until `--limit` rows (or all with `--all`).
/// `json` prints the API's page shape `{"items", "next_cursor"}` over every row fetched;
/// `jsonl` streams one dead letter per line.
async fn list(api: &Api, conn: &Conn, args: ListArgs) -> Result<Exit, ClientError> {
    if args.limit == 0 {
        return Err(ClientError::usage("--limit must be at least 1"));
    }
    let mut remaining: u64 = if args.all {
        u64::MAX
    } else {
        u64::from(args.limit)
    };
    let mut cursor = args.cursor.clone();
    let mut items: Vec<Value> = Vec::new();
    loop {
        let mut query = args.filter.pairs();
        query.push(("limit", remaining.min(u64::from(PAGE)).to_string()));
        if let Some(c) = &cursor {
            query.push(("cursor", c.clone()));
        }
        let page = api.get("/api/v1/dead-letters", &query).await?.body;
        let got = page
            .get("items")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        remaining = remaining.saturating_sub(got.len() as u64);
        if conn.output == Output::Jsonl {
            let mut text = String::new();
            for d in &got {
                text.push_str(&format!("{d}\n"));
            }
            out(&text)?;
        } else {
            items.extend(got);
        }
        cursor = page
            .get("next_cursor")
            .and_then(Value::as_str)
            .map(str::to_string);
        if cursor.is_none() || remaining == 0 {
            break;
        }
    }
    match conn.output {
        Output::Json => {
            let page = serde_json::json!({ "items": items, "next_cursor": cursor });
            out(&json_text(&page, Output::Json).unwrap_or_default())?;
        }
        Output::Jsonl => {}
        Output::Table => {
            out(&output::dead_letter_table(&items))?;
            let more = match &cursor {
                Some(c) => format!("; more with --cursor {c} (or --all)"),
                None => String::new(),
            };
            note(conn, &format!("{} dead letter(s){more}", items.len()));
        }
    }
    Ok(Exit::Ok)
}

/// `GET /api/v1/dead-letters/{id}`.
async fn show(api: &Api, conn: &Conn, id: i64) -> Result<Exit, ClientError> {
    let d = api
        .get(&format!("/api/v1/dead-letters/{id}"), &[])
        .await?
        .body;
    match json_text(&d, conn.output) {
        Some(text) => out(&text)?,
        None => out(&output::dead_letter_text(&d))?,
    }
    Ok(Exit::Ok)
}

/// `GET /api/v1/dead-letters/export`, streamed to standard output or to `--out` (written to
/// `FILE.partial`, renamed to FILE once the server has sent the last line; removed if the
/// transfer breaks, so FILE is never a silently short export).
async fn export(api: &Api, conn: &Conn, args: ExportArgs) -> Result<Exit, ClientError> {
    let query = args.filter.pairs();
    let mut res = api
        .get_stream("/api/v1/dead-letters/export", &query)
        .await?;
    let partial = args.out.as_deref().map(partial_path);
    let mut sink: Box<dyn std::io::Write> = match &partial {
        Some(p) => Box::new(std::io::BufWriter::new(std::fs::File::create(p).map_err(
            |e| ClientError::usage(format!("cannot write {}: {e}", p.display())),
        )?)),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut lines: u64 = 0;
    let result: Result<(), ClientError> = async {
        loop {
            let chunk = res.chunk().await.map_err(|e| {
                ClientError::new(
                    Exit::Server,
                    format!(
                        "the export was cut short after {lines} dead letters: {e} (the \
                         server's log says why; nothing complete was written)"
                    ),
                )
            })?;
            let Some(chunk) = chunk else { break };
            lines += chunk.iter().filter(|b| **b == b'\n').count() as u64;
            if let Err(e) = sink.write_all(&chunk) {
                if e.kind() == std::io::ErrorKind::BrokenPipe {
                    return Ok(());
                }
                return Err(ClientError::new(Exit::Server, format!("writing: {e}")));
            }
        }
        sink.flush()
            .map_err(|e| ClientError::new(Exit::Server, format!("writing: {e}")))
    }
    .await;
    drop(sink);
    match (result, &partial, &args.out) {
        (Ok(()), Some(p), Some(file)) => {
            std::fs::rename(p, file).map_err(|e| {
                ClientError::new(
                    Exit::Server,
                    format!("renaming {} to {}: {e}", p.display(), file.display()),
                )
            })?;
            note(
                conn,
                &format!("exported {lines} dead letter(s) to {}", file.display()),
            );
            Ok(Exit::Ok)
        }
        (Ok(()), _, _) => {
            note(conn, &format!("exported {lines} dead letter(s)"));
            Ok(Exit::Ok)
        }
        (Err(e), p, _) => {
            if let Some(p) = p {
                let _ = std::fs::remove_file(p);
            }
            Err(e)
        }
    }
}

/// `FILE.partial` beside FILE.
fn partial_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}

// ---------------------------------------------------------------------------------------------
// Confirmation

/// Asks `question` on the terminal (standard error), reading the answer from standard input:
/// true for `y` / `yes`.
fn ask(question: &str) -> bool {
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    match std::io::stdin().read_line(&mut line) {
        Ok(_) => matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes"),
        Err(_) => false,
    }
}

/// An action over a filter goes ahead with `--yes`, or when the person at the terminal says
/// yes; without a terminal and without `--yes` it is refused (exit code 2), as is a "no".
fn confirm(yes: bool, question: &str, action: &str) -> Result<(), ClientError> {
    if yes {
        return Ok(());
    }
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Err(ClientError::usage(format!(
            "refusing to {action} without --yes: there is no terminal to ask on (check the \
             reach first with --dry-run)"
        )));
    }
    if ask(question) {
        Ok(())
    } else {
        Err(ClientError::usage("not confirmed; nothing was done"))
    }
}

/// `POST /api/v1/replays/dry-run` with `body`: what a replay would select and queue, and the
/// `confirm_all` count of an empty filter.
async fn dry_run(api: &Api, body: &Map<String, Value>) -> Result<Value, ClientError> {
    Ok(api
        .post("/api/v1/replays/dry-run", &Value::Object(body.clone()))
        .await?
        .body)
}

/// The `confirm_all` an empty filter needs, from a dry run.
fn confirm_all_of(d: &Value) -> Option<i64> {
    d.get("confirm_all").and_then(Value::as_i64)
}

/// A 202 `pending_approval` answer: printed (to standard error, and as JSON on standard
/// output with `--output json|jsonl`), exit code 6. `None` for any other answer.
fn pending(conn: &Conn, a: &Answer) -> Result<Option<Exit>, ClientError> {
    if a.status != reqwest::StatusCode::ACCEPTED
        || a.body.get("status").and_then(Value::as_str) != Some("pending_approval")
    {
        return Ok(None);
    }
    eprintln!("redrive: {}", output::pending_text(&a.body));
    if let Some(text) = json_text(&a.body, conn.output) {
        out(&text)?;
    }
    Ok(Some(Exit::PendingApproval))
}

// ---------------------------------------------------------------------------------------------
// replay

/// `redrive replay`: dry run, or confirm (a filter), `POST /api/v1/replays`, then follow the
/// job unless `--no-follow`.
async fn replay(args: ReplayArgs) -> Result<Exit, ClientError> {
    let sel = args.selection.selection()?;
    let conn = &args.conn;
    let api = api(conn)?;
    let mut body = sel.body();
    if let Some(t) = &args.target_topic {
        body.insert("target_topic".into(), Value::from(t.clone()));
    }
    if let Some(r) = args.rate {
        body.insert("rate_per_sec".into(), Value::from(r));
    }
    if let Some(r) = &args.reason {
        body.insert("reason".into(), Value::from(r.clone()));
    }
    if args.dry_run {
        let d = dry_run(&api, &body).await?;
        match json_text(&d, conn.output) {
            Some(text) => out(&text)?,
            None => out(&output::dry_run_text(&d))?,
        }
        return Ok(Exit::Ok);
    }
    if sel.needs_confirmation() {
        let d = dry_run(&api, &body).await?;
        if sel == Selection::All {
            if let Some(n) = confirm_all_of(&d) {
                body.insert("confirm_all".into(), Value::from(n));
            }
        }
        let queued = d.get("queued").and_then(Value::as_i64).unwrap_or(0);
        let to = args
            .target_topic
            .as_deref()
            .map(|t| format!(" to {t}"))
            .unwrap_or_else(|| " to their source topics".to_string());
        confirm(
            args.yes,
            &format!("Replay {queued} of {}{to}?", sel.describe()),
            &format!("replay {}", sel.describe()),
        )?;
    }
    let accepted = api.post("/api/v1/replays", &Value::Object(body)).await?;
    if let Some(exit) = pending(conn, &accepted)? {
        return Ok(exit);
    }
    let job = accepted
        .body
        .get("job_id")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            ClientError::new(
                Exit::Server,
                format!(
                    "the server accepted the replay without a job id: {}",
                    accepted.body
                ),
            )
        })?
        .to_string();
    if args.no_follow {
        match json_text(&accepted.body, conn.output) {
            Some(text) => out(&text)?,
            None => out(&format!("{job}\n"))?,
        }
        return Ok(Exit::Ok);
    }
    note(
        conn,
        &format!(
            "replay job {job}: {} queued, {} skipped",
            accepted
                .body
                .get("total")
                .and_then(Value::as_i64)
                .unwrap_or(0),
            accepted
                .body
                .get("skipped")
                .and_then(Value::as_i64)
                .unwrap_or(0)
        ),
    );
    let how = Follow::new(conn.quiet, args.yes, args.cancel_on_interrupt, conn.output);
    progress::follow(&api, &job, how).await
}

// ---------------------------------------------------------------------------------------------
// delete | restore

/// Which change.
#[derive(Debug, Clone, Copy)]
enum Change {
    Delete,
    Restore,
}

impl Change {
    fn verb(self) -> &'static str {
        match self {
            Change::Delete => "delete",
            Change::Restore => "restore",
        }
    }
}

/// `redrive delete` / `redrive restore`: count (dry run, or a filter's confirmation), then
/// `POST /api/v1/dead-letters/{delete,restore}`: `{"affected": n}`.
async fn change(args: ChangeArgs, what: Change) -> Result<Exit, ClientError> {
    let sel = args.selection.selection()?;
    // A filter leaves deleted dead letters out unless it says `--status deleted`: any other
    // restore by filter (or --all) restores nothing (the API refuses it too).
    let deleted_only = args.selection.filter.status.as_deref() == Some("deleted");
    if matches!(what, Change::Restore) && !matches!(sel, Selection::Ids(_)) && !deleted_only {
        return Err(ClientError::usage(
            "restore brings back deleted dead letters, and a filter leaves them out unless \
             it says --status deleted: add it (or name them with --id)",
        ));
    }
    let conn = &args.conn;
    let api = api(conn)?;
    let mut body = sel.body();
    if args.dry_run || sel.needs_confirmation() {
        // The replay dry run counts a selection without changing anything; its `total` is
        // the dead letters the selection names (a filter's default excludes deleted ones).
        let d = dry_run(&api, &body).await?;
        let selected = d.get("total").and_then(Value::as_i64).unwrap_or(0);
        if args.dry_run {
            let v = serde_json::json!({ "dry_run": true, "selected": selected });
            match json_text(&v, conn.output) {
                Some(text) => out(&text)?,
                None => out(&format!(
                    "dry run: {selected} dead letter(s) selected; nothing was changed\n"
                ))?,
            }
            return Ok(Exit::Ok);
        }
        if sel == Selection::All {
            if let Some(n) = confirm_all_of(&d) {
                body.insert("confirm_all".into(), Value::from(n));
            }
        }
        let verb = what.verb();
        let mut question = format!("{verb} {selected} {}?", sel.describe());
        question[..1].make_ascii_uppercase();
        confirm(args.yes, &question, &format!("{verb} {}", sel.describe()))?;
    }
    if let Some(r) = &args.reason {
        body.insert("reason".into(), Value::from(r.clone()));
    }
    let a = api
        .post(
            &format!("/api/v1/dead-letters/{}", what.verb()),
            &Value::Object(body),
        )
        .await?;
    if let Some(exit) = pending(conn, &a)? {
        return Ok(exit);
    }
    match json_text(&a.body, conn.output) {
        Some(text) => out(&text)?,
        None => {
            let n = a.body.get("affected").and_then(Value::as_i64).unwrap_or(0);
            let done = match what {
                Change::Delete => "deleted",
                Change::Restore => "restored",
            };
            out(&format!("{done} {n} dead letter(s)\n"))?
        }
    }
    Ok(Exit::Ok)
}

// ---------------------------------------------------------------------------------------------
// jobs

async fn jobs(api: &Api, conn: &Conn, cmd: JobsCommand) -> Result<Exit, ClientError> {
    match cmd {
        JobsCommand::List { limit } => {
            let page = api
                .get("/api/v1/replays", &[("limit", limit.to_string())])
                .await?
                .body;
            match conn.output {
                Output::Table => {
                    let items = page
                        .get("items")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default();
                    out(&output::job_table(&items))?
                }
                Output::Json => out(&json_text(&page, Output::Json).unwrap_or_default())?,
                Output::Jsonl => {
                    let mut text = String::new();
                    for j in page
                        .get("items")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        text.push_str(&format!("{j}\n"));
                    }
                    out(&text)?
                }
            }
            Ok(Exit::Ok)
        }
        JobsCommand::Show { id } => {
            let job = api.get(&format!("/api/v1/replays/{id}"), &[]).await?.body;
            progress::print_job(&job, conn.output)?;
            Ok(Exit::Ok)
        }
        JobsCommand::Watch {
            id,
            cancel_on_interrupt,
            yes,
        } => {
            let how = Follow::new(conn.quiet, yes, cancel_on_interrupt, conn.output);
            progress::follow(api, &id, how).await
        }
        JobsCommand::Cancel { id } => {
            let job = api
                .post(&format!("/api/v1/replays/{id}/cancel"), &Value::Null)
                .await?
                .body;
            progress::print_job(&job, conn.output)?;
            Ok(Exit::Ok)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_files_sit_beside_the_file() {
        assert_eq!(
            partial_path(Path::new("/tmp/x/export.jsonl")),
            PathBuf::from("/tmp/x/export.jsonl.partial")
        );
    }
}
