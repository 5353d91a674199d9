//! The relay's side of a transform: run the job's script on each claimed row before it is
//! sent (`worker.rs` calls [`JobTransform::apply`] once per claim), off the async threads.
//!
//! What becomes of a row (`docs/replay.md`, "Transform on replay"):
//! - the script returned a record: that record is sent (its key, value and headers; redrive's
//!   own headers are added after the script, as for any replay);
//! - `skip()`: not sent; marked `skipped` (`store/transform_marks.rs`);
//! - the script failed (an error, the operation limit, a size limit, a wrong answer):
//!   not sent — the untransformed record is never published in its place — and the row fails
//!   at once with `transform: <the script's error>`; the dead letter is `replay_failed` with
//!   its bytes unchanged, and can be replayed again (with a fixed script);
//! - out of its time limit: counted as a failed attempt (retried after a backoff, up to
//!   `max_attempts`), since a busy machine can cause it.

use std::sync::Arc;

use crate::model::{Convention, Header};
use crate::store::{ActiveJob, ClaimedRow, Failed, ScriptMarks, Skipped};

use super::record::application_headers;
use super::transform::{Outcome, RecordIn, Transform};

/// A job's transform, compiled once per worker run.
pub(super) enum JobTransform {
    /// A plain replay.
    None,
    Ready(Arc<Transform>),
    /// The stored script no longer compiles (checked when requested, so only after an
    /// upgrade changed the language): every row fails with this.
    Broken(String),
}

/// What a claim's rows became.
#[derive(Default)]
pub(super) struct Applied {
    /// To send (transformed where the script returned a record).
    pub(super) rows: Vec<ClaimedRow>,
    /// Failed for good by the script.
    pub(super) failed: Vec<Failed>,
    /// Out of time: a failed attempt each (the caller counts it), with the error.
    pub(super) retry: Vec<(ClaimedRow, String)>,
    /// For the batch's mark.
    pub(super) marks: ScriptMarks,
}

impl JobTransform {
    /// Compiles the job's script, if it has one.
    pub(super) fn for_job(job: &ActiveJob) -> JobTransform {
        match &job.options.transform {
            None => JobTransform::None,
            Some(t) => match Transform::compile(t) {
                Ok(t) => JobTransform::Ready(Arc::new(t)),
                Err(e) => {
                    tracing::error!(target: "redrive::replay", error = %e, "the job's transform no longer compiles; its rows fail");
                    JobTransform::Broken(e.to_string())
                }
            },
        }
    }

    /// Runs the script on `rows` (on a blocking thread: a script may take up to its time
    /// limit per record). `forward_diagnostics` is the relay's setting: the script sees the
    /// headers a replay would publish.
    pub(super) async fn apply(&self, rows: Vec<ClaimedRow>, forward_diagnostics: bool) -> Applied {
        let t = match self {
            JobTransform::None => {
                return Applied {
                    rows,
                    ..Applied::default()
                }
            }
            JobTransform::Broken(e) => {
                let mut out = Applied::default();
                for row in rows {
                    out.marks.failed.push(row.outbox_id);
                    out.failed.push(Failed {
                        outbox_id: row.outbox_id,
                        dead_letter_id: row.dead_letter_id,
                        error: format!("transform: {e}"),
                    });
                }
                return out;
            }
            JobTransform::Ready(t) => t.clone(),
        };
        let ids: Vec<(i64, i64)> = rows
            .iter()
            .map(|r| (r.outbox_id, r.dead_letter_id))
            .collect();
        let ran =
            tokio::task::spawn_blocking(move || apply_all(&t, rows, forward_diagnostics)).await;
        match ran {
            Ok(applied) => applied,
            // Only a panic gets here (`apply_all` catches the script's own): fail the rows
            // rather than send them untransformed.
            Err(e) => {
                let mut out = Applied::default();
                for (outbox_id, dead_letter_id) in ids {
                    out.marks.failed.push(outbox_id);
                    out.failed.push(Failed {
                        outbox_id,
                        dead_letter_id,
                        error: format!("transform: the script engine failed: {e}"),
                    });
                }
                out
            }
        }
    }
}

fn apply_all(t: &Transform, rows: Vec<ClaimedRow>, forward_diagnostics: bool) -> Applied {
    let mut out = Applied::default();
    out.rows.reserve(rows.len());
    for mut row in rows {
        let headers: Vec<Header> =
            application_headers(&row.headers, row.convention, forward_diagnostics);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            t.apply(RecordIn {
                key: row.key.as_deref(),
                value: row.value.as_deref(),
                headers: &headers,
                topic: &row.target_topic,
            })
        }))
        .unwrap_or_else(|_| Outcome::Failed("the script engine panicked on this record".into()));
        match outcome {
            Outcome::Publish(rec) => {
                row.key = rec.key;
                row.value = rec.value;
                row.headers = rec.headers;
                // The headers are final: the diagnostics were taken out before the script,
                // and what the script returned is published as it is.
                row.convention = Convention::Unknown;
                out.marks.transformed.push(row.outbox_id);
                out.rows.push(row);
            }
            Outcome::Skip(reason) => out.marks.skipped.push(Skipped {
                outbox_id: row.outbox_id,
                reason,
            }),
            Outcome::Failed(e) => {
                out.marks.failed.push(row.outbox_id);
                out.failed.push(Failed {
                    outbox_id: row.outbox_id,
                    dead_letter_id: row.dead_letter_id,
                    error: format!("transform: {e}; nothing was published for this record"),
                });
            }
            Outcome::OutOfTime(e) => {
                out.marks.failed.push(row.outbox_id);
                out.retry.push((row, format!("transform: {e}")));
            }
        }
    }
    out
}
