//! Which replay rows `make bench` measures, their sizes (the `BENCH_REPLAY*` variables) and
//! their lines in the table; each row is one job run by [`crate::replay::replay_rate`] on
//! SQLite and on PostgreSQL.
//!
//! | variable | default | row |
//! |---|---|---|
//! | `BENCH_REPLAY` | 100,000 | plain: default options (per-key order on), distinct keys |
//! | `BENCH_THROTTLED` | 10,000 | plain, throttled at 1,000 msgs/s |
//! | `BENCH_REPLAY_UNORDERED` | `BENCH_REPLAY` | `unordered: true`, distinct keys |
//! | `BENCH_REPLAY_KEYED` | `BENCH_REPLAY` | per-key order over `BENCH_REPLAY_KEYS` (1,000) keys |
//! | `BENCH_REPLAY_ONE_KEY` | 2,000 | per-key order, every record with the same key |
//! | `BENCH_REPLAY_TRANSFORM` | `BENCH_REPLAY` | a Rhai transform adding one header, order on |
//!
//! `0` skips a row; `BENCH_REPLAY=0` skips every row whose variable is not set.
//! `BENCH_REPLAY_HISTORY` (default 0) first gives every row's store that many published
//! outbox rows of 20 finished jobs, then `ANALYZE`: a store that has replayed before.

use anyhow::Result;
use redrive_testkit::Backend;

use crate::env_usize;
use crate::replay::{replay_rate, Case, Rates};

/// How a row's figure relates to the plain row's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compare {
    /// It is the plain row.
    IsPlain,
    /// Shown as a multiple of the plain row's rate (when of the same size).
    WithPlain,
    /// Not compared (a different shape: one key, throttled).
    Alone,
}

/// One measured row: its label and rates on SQLite and PostgreSQL.
pub struct Row {
    label: String,
    /// The plain row (the others' reference).
    plain: bool,
    /// Compared with the plain row (same size, same store) in the table.
    vs_plain: bool,
    /// The job's rate limit, msgs/s (the throttled row).
    limit: Option<u32>,
    sqlite: Rates,
    postgres: Rates,
}

/// Runs every replay row not skipped, plain first.
pub async fn measure() -> Result<Vec<Row>> {
    let plain_n = env_usize("BENCH_REPLAY", 100_000);
    let or_skip = |n: usize| if plain_n == 0 { 0 } else { n };
    let keys = env_usize("BENCH_REPLAY_KEYS", 1_000).max(1);
    let throttled_n = env_usize("BENCH_THROTTLED", or_skip(10_000));
    let unordered_n = env_usize("BENCH_REPLAY_UNORDERED", plain_n);
    let keyed_n = env_usize("BENCH_REPLAY_KEYED", plain_n);
    let one_key_n = env_usize("BENCH_REPLAY_ONE_KEY", or_skip(2_000));
    let transform_n = env_usize("BENCH_REPLAY_TRANSFORM", plain_n);

    let mut throttled = Case::plain(throttled_n);
    throttled.rate_per_sec = Some(1_000);
    let rows: Vec<(String, Case, Compare)> = vec![
        (
            format!("replay, {plain_n} dead letters, each its own key (per-key order on, the default, but no record waits), unthrottled (idempotent, acks=all)"),
            Case::plain(plain_n),
            Compare::IsPlain,
        ),
        (
            format!("replay, {unordered_n} dead letters, each its own key, `unordered: true` (no order constraint)"),
            Case::unordered(unordered_n),
            Compare::WithPlain,
        ),
        (
            format!(
                "replay, per-key order, {keyed_n} dead letters over {keys} keys ({} per key: each waits for the one before it)",
                keyed_n / keys
            ),
            Case::keyed(keyed_n, keys),
            Compare::WithPlain,
        ),
        (
            format!("replay, per-key order, {one_key_n} dead letters all with one key (one record per claim round trip)"),
            Case::keyed(one_key_n, 1),
            Compare::Alone,
        ),
        (
            format!("replay, {transform_n} dead letters, each its own key, transform (Rhai script adding one header), per-key order on"),
            Case::transform(transform_n),
            Compare::WithPlain,
        ),
        (
            format!("replay, {throttled_n} dead letters, throttled at 1000 msgs/s (measured)"),
            throttled,
            Compare::Alone,
        ),
    ];
    let mut out = Vec::new();
    for (label, case, compare) in rows {
        if case.n == 0 {
            continue;
        }
        let sqlite = replay_rate(Backend::Sqlite, &case).await?;
        let postgres = replay_rate(Backend::Postgres, &case).await?;
        out.push(Row {
            label,
            plain: compare == Compare::IsPlain,
            vs_plain: compare == Compare::WithPlain && case.n == plain_n,
            limit: case.rate_per_sec,
            sqlite,
            postgres,
        });
    }
    Ok(out)
}

/// Prints one table line per row (the table's header is the caller's): the relay's rate
/// (outbox written to `finished`) and, in brackets, request to `finished` (a row published
/// while queueing: request to `finished` and the relay's first claim); a row of the
/// plain row's size says its relay rate as a multiple of plain replay's; the throttled row
/// its achieved rate at the broker and how far that is from its limit.
pub fn print(rows: &[Row]) {
    let plain = rows.iter().find(|r| r.plain);
    for r in rows {
        let cell = |rates: &Rates, base: Option<&Rates>| {
            if let (Some(limit), Some(b)) = (r.limit, rates.broker) {
                let off = (b / f64::from(limit) - 1.0) * 100.0;
                return format!(
                    "{b:.0} msgs/s at the broker ({off:+.1} %); {:.0} request to finished",
                    rates.end_to_end
                );
            }
            if rates.streamed {
                // Published while queueing: the relay finished with the request, so only
                // request → finished says anything (compared with plain's).
                let vs = match base {
                    Some(b) if r.vs_plain && b.end_to_end > 0.0 => {
                        format!(", {:.2}x plain's", rates.end_to_end / b.end_to_end)
                    }
                    _ => String::new(),
                };
                return format!(
                    "{:.0} msgs/s request to finished{vs}, published while queueing (first \
                     claim {:.2} s after the request began)",
                    rates.end_to_end,
                    rates.first_claim_s.unwrap_or(f64::NAN)
                );
            }
            let vs = match base {
                Some(b) if r.vs_plain && b.relay > 0.0 => {
                    format!(", {:.2}x plain", rates.relay / b.relay)
                }
                _ => String::new(),
            };
            format!(
                "{:.0} msgs/s relay ({:.0} request to finished{vs})",
                rates.relay, rates.end_to_end
            )
        };
        println!(
            "| {} | {} | {} |",
            r.label,
            cell(&r.sqlite, plain.map(|p| &p.sqlite)),
            cell(&r.postgres, plain.map(|p| &p.postgres)),
        );
    }
}
