//! What the client commands print on standard output: the API's JSON as it came
//! (`--output json`, pretty; `--output jsonl`, one object per line), or tables and summaries
//! for people (`--output table`). Notes and progress go to standard error, so a script can
//! pipe standard output into `jq` whatever the format.

use std::io::Write as _;

use base64::Engine as _;
use serde_json::Value;

use super::http::{ClientError, Exit};
use super::Output;

/// Writes `text` to standard output; a closed pipe (`| head`) is not an error worth a
/// message, any other write error is exit code 5.
pub fn out(text: &str) -> Result<(), ClientError> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(ClientError::new(
            Exit::Server,
            format!("writing to standard output: {e}"),
        )),
    }
}

/// `value` as `json` (pretty, one document) or `jsonl` (one line); `None` for `table`.
pub fn json_text(value: &Value, format: Output) -> Option<String> {
    match format {
        Output::Json => Some(format!(
            "{}\n",
            serde_json::to_string_pretty(value).unwrap_or_default()
        )),
        Output::Jsonl => Some(format!("{value}\n")),
        Output::Table => None,
    }
}

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn n(v: &Value, key: &str) -> i64 {
    v.get(key).and_then(Value::as_i64).unwrap_or(0)
}

/// `text` cut to `max` characters (an ellipsis marks the cut), control characters shown as
/// spaces so one record stays on one line.
fn cell(text: &str, max: usize) -> String {
    let clean: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if clean.chars().count() <= max {
        clean
    } else {
        let mut cut: String = clean.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

/// Rows as aligned columns under `headers` (the last column is not padded).
fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let last = cells.len() - 1;
        let mut l = String::new();
        for (i, c) in cells.into_iter().enumerate() {
            if i == last {
                l.push_str(c);
            } else {
                l.push_str(c);
                let pad = widths[i] - c.chars().count() + 2;
                l.extend(std::iter::repeat_n(' ', pad));
            }
        }
        l.truncate(l.trim_end().len());
        l.push('\n');
        l
    };
    let mut out = line(headers.to_vec());
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out
}

/// Dead letters of the list API as a table: id, time, status, topics, error.
pub fn dead_letter_table(items: &[Value]) -> String {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|d| {
            vec![
                n(d, "id").to_string(),
                cell(s(d, "dead_lettered_at"), 24),
                s(d, "status").to_string(),
                cell(s(d, "dlq_topic"), 32),
                cell(s(d, "source_topic"), 32),
                cell(s(d, "error_class"), 40),
                cell(s(d, "error_message"), 60),
            ]
        })
        .collect();
    table(
        &[
            "ID",
            "DEAD-LETTERED",
            "STATUS",
            "DLQ TOPIC",
            "SOURCE TOPIC",
            "ERROR CLASS",
            "MESSAGE",
        ],
        &rows,
    )
}

/// Bytes given as base64 (the API's form) shown as text when they are UTF-8 without control
/// characters (but tab and newline), else as base64 with their size.
fn bytes_text(b64: Option<&str>) -> String {
    let Some(b64) = b64 else {
        return "(null)".to_string();
    };
    match base64::engine::general_purpose::STANDARD.decode(b64) {
        Ok(bytes) => match String::from_utf8(bytes.clone()) {
            Ok(text)
                if !text
                    .chars()
                    .any(|c| c.is_control() && c != '\n' && c != '\t') =>
            {
                text
            }
            _ => format!("({} bytes, base64) {b64}", bytes.len()),
        },
        Err(_) => b64.to_string(),
    }
}

/// One dead letter of `GET /api/v1/dead-letters/{id}` for people: fields, error, headers,
/// key and value (as text when they are text).
pub fn dead_letter_text(d: &Value) -> String {
    let mut o = String::new();
    let field = |o: &mut String, name: &str, value: String| {
        if !value.is_empty() {
            o.push_str(&format!("{name:<16}{value}\n"));
        }
    };
    field(&mut o, "id", n(d, "id").to_string());
    field(&mut o, "status", s(d, "status").to_string());
    field(
        &mut o,
        "dlq",
        format!(
            "{} [{}] @ {}",
            s(d, "dlq_topic"),
            n(d, "dlq_partition"),
            n(d, "dlq_offset")
        ),
    );
    if !s(d, "source_topic").is_empty() {
        let mut src = s(d, "source_topic").to_string();
        if let Some(p) = d.get("source_partition").and_then(Value::as_i64) {
            src.push_str(&format!(" [{p}]"));
        }
        if let Some(off) = d.get("source_offset").and_then(Value::as_i64) {
            src.push_str(&format!(" @ {off}"));
        }
        field(&mut o, "source", src);
    }
    field(&mut o, "consumer group", s(d, "consumer_group").to_string());
    field(
        &mut o,
        "dead-lettered",
        s(d, "dead_lettered_at").to_string(),
    );
    field(&mut o, "convention", s(d, "convention").to_string());
    field(&mut o, "fingerprint", s(d, "fingerprint").to_string());
    field(&mut o, "error class", s(d, "error_class").to_string());
    field(&mut o, "error", s(d, "error_message").to_string());
    field(&mut o, "replays", n(d, "replay_count").to_string());
    if let Some(t) = d.get("tiering").filter(|t| t.is_object()) {
        let mut tier = s(t, "tier").to_string();
        if !s(t, "rule").is_empty() {
            tier.push_str(&format!(" (rule `{}`)", s(t, "rule")));
        }
        if !s(t, "reason").is_empty() {
            tier.push_str(&format!(": {}", s(t, "reason")));
        }
        field(&mut o, "tier", tier);
    }
    let labels: Vec<&str> = d
        .get("labels")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    field(&mut o, "labels", labels.join(", "));
    if let Some(w) = d.get("decode_warnings").and_then(Value::as_array) {
        for x in w.iter().filter_map(Value::as_str) {
            field(&mut o, "warning", x.to_string());
        }
    }
    if let Some(hs) = d.get("headers").and_then(Value::as_array) {
        if !hs.is_empty() {
            o.push_str("headers\n");
            for h in hs {
                // A multi-line value (a Python traceback, a stack trace) keeps its lines
                // under the header's, indented past its name.
                let value = bytes_text(h.get("value").and_then(Value::as_str));
                let mut lines = value.lines();
                o.push_str(&format!(
                    "  {}: {}\n",
                    s(h, "name"),
                    lines.next().unwrap_or("")
                ));
                for l in lines {
                    o.push_str(&format!("      {l}\n"));
                }
            }
        }
    }
    o.push_str(&format!(
        "key\n  {}\n",
        bytes_text(d.get("key").and_then(Value::as_str))
    ));
    o.push_str("value\n");
    for l in bytes_text(d.get("value").and_then(Value::as_str)).lines() {
        o.push_str(&format!("  {l}\n"));
    }
    if !s(d, "stack_trace").is_empty() {
        o.push_str("stack trace\n");
        for l in s(d, "stack_trace").lines() {
            o.push_str(&format!("  {l}\n"));
        }
    }
    o
}

/// A job's counts in a line: `job J finished: 10 of 10 published, 0 failed, 0 cancelled,
/// 0 came back` (came back: its published records that came back as dead letters, the jobs
/// table's "CAME BACK"), and whether its rows are still being queued.
pub fn job_line(job: &Value) -> String {
    let mut l = format!(
        "job {} {}: {} of {} published, {} failed, {} cancelled, {} came back",
        s(job, "id"),
        s(job, "status"),
        n(job, "published"),
        n(job, "total"),
        n(job, "failed"),
        n(job, "cancelled"),
        n(job, "refailed"),
    );
    let skipped = n(job, "skipped");
    if skipped > 0 {
        l.push_str(&format!(", {skipped} skipped"));
    }
    if is_queueing(job) {
        l.push_str(" (still queueing: the total grows)");
    }
    if !s(job, "last_error").is_empty() {
        l.push_str(&format!(" (last error: {})", s(job, "last_error")));
    }
    l.push('\n');
    l
}

/// Whether a job of `GET /api/v1/replays` still has rows being queued (`"queueing"` is not
/// null): its `total` grows until they are (`docs/replay.md`, "Bulk actions").
pub fn is_queueing(job: &Value) -> bool {
    job.get("queueing").is_some_and(|q| !q.is_null())
}

/// Jobs of `GET /api/v1/replays` as a table (a job still queueing rows: "STATUS" says so;
/// "CAME BACK": its published records that came back as dead letters).
pub fn job_table(items: &[Value]) -> String {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|j| {
            vec![
                s(j, "id").to_string(),
                match is_queueing(j) {
                    true => format!("{}, queueing", s(j, "status")),
                    false => s(j, "status").to_string(),
                },
                format!("{}/{}", n(j, "published"), n(j, "total")),
                n(j, "failed").to_string(),
                n(j, "refailed").to_string(),
                s(j, "created_by").to_string(),
                s(j, "created_at").to_string(),
                cell(s(j, "reason"), 40),
            ]
        })
        .collect();
    table(
        &[
            "JOB",
            "STATUS",
            "PUBLISHED",
            "FAILED",
            "CAME BACK",
            "BY",
            "CREATED",
            "REASON",
        ],
        &rows,
    )
}

/// A replay dry run (`POST /api/v1/replays/dry-run`) for people.
pub fn dry_run_text(d: &Value) -> String {
    let mut o = format!(
        "dry run: {} selected, {} would be replayed",
        n(d, "total"),
        n(d, "queued")
    );
    let skipped = n(d, "skipped");
    let without = n(d, "without_target");
    if skipped > 0 {
        o.push_str(&format!(", {skipped} skipped (deleted or already pending)"));
    }
    if without > 0 {
        o.push_str(&format!(
            ", {without} without a source topic (give --target-topic)"
        ));
    }
    o.push('\n');
    if let Some(targets) = d.get("per_target").and_then(Value::as_array) {
        for t in targets {
            o.push_str(&format!("  {:>8}  → {}\n", n(t, "count"), s(t, "topic")));
        }
    }
    // By status; when new ones and ones replayed before are mixed, how to leave the latter out.
    if let Some(statuses) = d
        .get("per_status")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
    {
        let parts: Vec<String> = statuses
            .iter()
            .map(|x| format!("{} {}", n(x, "count"), s(x, "status")))
            .collect();
        o.push_str(&format!("by status: {}\n", parts.join(", ")));
        // The one definition of "replayed before" (`Status::was_replayed`).
        let count_of = |wanted: fn(redrive_core::Status) -> bool| -> i64 {
            statuses
                .iter()
                .filter(|x| redrive_core::Status::parse(s(x, "status")).is_some_and(wanted))
                .map(|x| n(x, "count"))
                .sum()
        };
        let again = count_of(redrive_core::Status::was_replayed);
        if again > 0 && count_of(|s| s == redrive_core::Status::New) > 0 {
            o.push_str(&format!(
                "{again} of them were replayed before: add --status new to replay only the new ones\n"
            ));
        }
    }
    if let Some(c) = d.get("canary").filter(|c| !c.is_null()) {
        o.push_str(&format!("canary: {}\n", s(c, "plan")));
    }
    o.push_str("nothing was published\n");
    o
}

/// The 202 `pending_approval` answer for people (to standard error: the action is not done).
pub fn pending_text(p: &Value) -> String {
    format!(
        "{} of {} dead letters needs approval: request {} is pending ({}); it is approved at \
         {} and expires at {}",
        s(p, "kind"),
        n(p, "count"),
        n(p, "request_id"),
        s(p, "why"),
        s(p, "url"),
        s(p, "expires_at"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tables_align_and_cut() {
        let t = dead_letter_table(&[json!({
            "id": 7, "status": "new", "dlq_topic": "orders.DLT", "source_topic": "orders",
            "error_class": "E", "error_message": "line one\nline two", "dead_lettered_at": "t"
        })]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with("ID  DEAD-LETTERED"), "{t}");
        assert!(lines[1].starts_with("7   t"), "{t}");
        assert!(lines[1].ends_with("line one line two"), "{t}");
        assert_eq!(cell("abcdef", 4), "abc…");
    }

    /// `show` names the tier and why, and a multi-line header value keeps its lines
    /// indented under the header (a fresh user's traceback ran to column 0).
    #[test]
    fn a_dead_letter_shows_its_tier_and_multi_line_headers() {
        use base64::Engine as _;
        let b64 = |t: &str| base64::engine::general_purpose::STANDARD.encode(t);
        let d = json!({
            "id": 3, "status": "new", "dlq_topic": "d", "dlq_partition": 0, "dlq_offset": 1,
            "tiering": {"tier": "poison", "rule": "bad-json", "reason": "error class matched"},
            "headers": [{"name": "traceback", "value": b64("Traceback:\n  File x\nValueError")}],
            "key": null, "value": b64("{}"),
        });
        let text = dead_letter_text(&d);
        assert!(
            text.contains("tier            poison (rule `bad-json`): error class matched\n"),
            "{text}"
        );
        assert!(
            text.contains("  traceback: Traceback:\n        File x\n      ValueError\n"),
            "{text}"
        );
        let untiered = dead_letter_text(&json!({"id": 4, "tiering": null}));
        assert!(!untiered.contains("tier"), "{untiered}");
    }

    #[test]
    fn bytes_show_as_text_when_they_are() {
        assert_eq!(bytes_text(Some("aGk=")), "hi");
        assert_eq!(bytes_text(None), "(null)");
        assert_eq!(bytes_text(Some("AP8=")), "(2 bytes, base64) AP8=");
    }

    #[test]
    fn a_job_line_says_how_many_came_back() {
        let job = json!({"id": "j", "status": "finished", "total": 4, "published": 4,
            "failed": 0, "cancelled": 0, "refailed": 3, "queueing": null});
        assert_eq!(
            job_line(&job),
            "job j finished: 4 of 4 published, 0 failed, 0 cancelled, 3 came back\n"
        );
    }

    #[test]
    fn a_job_line_says_when_its_rows_are_still_queued() {
        let job = json!({"id": "j", "status": "running", "total": 500, "published": 200,
            "failed": 0, "cancelled": 0, "queueing": {"chunks": 1}});
        assert_eq!(
            job_line(&job),
            "job j running: 200 of 500 published, 0 failed, 0 cancelled, 0 came back \
             (still queueing: the total grows)\n"
        );
        let done = json!({"id": "j", "status": "finished", "total": 1037, "published": 1037,
            "failed": 0, "cancelled": 0, "queueing": null});
        assert!(!job_line(&done).contains("queueing"), "{}", job_line(&done));
        let t = job_table(&[job, done]);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[1].contains("running, queueing"), "{t}");
        assert!(!lines[2].contains("queueing"), "{t}");
    }

    #[test]
    fn the_job_table_counts_what_came_back() {
        let job = json!({"id": "j", "status": "finished", "total": 10, "published": 10,
            "failed": 1, "refailed": 3, "created_by": "ana", "created_at": "t"});
        let t = job_table(&[job]);
        let lines: Vec<&str> = t.lines().collect();
        let columns: Vec<&str> = lines[0].split("  ").filter(|c| !c.is_empty()).collect();
        let cells: Vec<&str> = lines[1].split_whitespace().collect();
        let at = columns
            .iter()
            .position(|c| c.trim() == "CAME BACK")
            .expect(&t);
        assert_eq!(columns[at - 1].trim(), "FAILED", "{t}");
        assert_eq!((cells[at - 1], cells[at]), ("1", "3"), "{t}");
    }
    #[test]
    fn a_dry_run_says_what_it_takes_by_status() {
        let d = serde_json::json!({
            "total": 69, "queued": 69, "skipped": 0, "without_target": 0,
            "per_target": [{"topic": "requests", "count": 69}],
            "per_status": [
                {"status": "new", "count": 17},
                {"status": "replayed", "count": 51},
                {"status": "re_failed", "count": 1}
            ],
            "canary": null
        });
        let text = dry_run_text(&d);
        assert!(
            text.contains("by status: 17 new, 51 replayed, 1 re_failed\n"),
            "{text}"
        );
        assert!(
            text.contains("52 of them were replayed before: add --status new"),
            "{text}"
        );
        let only_new = serde_json::json!({
            "total": 17, "queued": 17,
            "per_status": [{"status": "new", "count": 17}]
        });
        let text = dry_run_text(&only_new);
        assert!(
            text.contains("by status: 17 new\n") && !text.contains("--status new"),
            "{text}"
        );
    }
}
