//! Replay outcome tracking: ingest links a dead letter that came back after a replay to its
//! earlier self, in the insert's transaction (`docs/replay.md`, "Outcome").
//!
//! For each record of a batch the evidence is tried strongest first ([`LinkVia`]): the
//! `redrive-idempotency-key` header (one outbox row: one publish), the
//! `redrive-dead-letter-id` header (checked against the jobs that replayed that dead letter,
//! and against `redrive-replay-id` when present), the decoded source coordinates being where
//! a replay published (`outbox_by_published_position`), the same source coordinates as a
//! replayed dead letter (`dead_letters_replayed_by_source`), the same message id. Each kind is
//! ONE indexed lookup for the whole batch (a `VALUES` list joined to an index), so a batch
//! costs at most five extra statements however large it is, and statements per link only for
//! the records that did come back.
//!
//! Bad evidence is no evidence: a header that is not a number, not UTF-8, or names nothing
//! stored simply does not link; it never fails the batch.
//!
//! What a link writes: a `dead_letter_links` row for the new dead letter (`earlier_id`,
//! `linked_via`, `job_id`, `repeat_failures`: the earlier one's + 1); the outbox row's `refailed_by_id` (first
//! come-back only) and then the job's `refailed` + 1; the earlier dead letter `replayed` →
//! `re_failed` (the stats triggers move its count) with a `re_failed` history event. The
//! relay's mark calls [`came_back_before_mark`] and [`settle_re_failed`] so that a record
//! that came back before its delivery report was recorded still ends `re_failed`, not
//! `replayed`.

use sqlx::QueryBuilder;

use super::dialect::{store_error, Column, Dialect, Val};
use super::{Pool, Store, StoreError};
use crate::model::{Header, LinkVia, NewDeadLetter, Normalized, ReplayLink, Status};
use crate::outcome::{ChainLink, ReplayChain, CHAIN_LINKS_SHOWN};
use crate::replay::{HEADER_DEAD_LETTER_ID, HEADER_IDEMPOTENCY_KEY, HEADER_REPLAY_ID};

/// Longest header value taken as an id (an idempotency key or job id is a 36-char UUID).
const MAX_ID_TEXT: usize = 128;

/// Probes per lookup statement (each probe binds at most 4 values; well under both
/// databases' bind limits).
const PROBES_PER_STATEMENT: usize = 2_000;

/// The last header named `name` whose value is UTF-8 text of at most [`MAX_ID_TEXT`] bytes,
/// trimmed; `None` otherwise (absent, null, binary, empty, too long).
fn header_text<'a>(headers: &'a [Header], name: &str) -> Option<&'a str> {
    let h = headers.iter().rev().find(|h| h.name == name)?;
    let text = std::str::from_utf8(h.value.as_deref()?).ok()?.trim();
    (!text.is_empty() && text.len() <= MAX_ID_TEXT).then_some(text)
}

/// What one arriving record offers as evidence, taken from its raw headers and its
/// normalised fields as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Evidence<'a> {
    dlq: (&'a str, i32, i64),
    idempotency_key: Option<&'a str>,
    dead_letter_id: Option<i64>,
    job_id: Option<&'a str>,
    source: Option<(&'a str, i32, i64)>,
    message_id: Option<&'a str>,
}

impl<'a> Evidence<'a> {
    pub(crate) fn of(d: &'a NewDeadLetter, n: &'a Normalized) -> Evidence<'a> {
        let r = &d.record;
        let source = match (&n.source_topic, n.source_partition, n.source_offset) {
            (Some(t), Some(p), Some(o)) => Some((t.as_str(), p, o)),
            _ => None,
        };
        Evidence {
            dlq: (r.dlq_topic.as_str(), r.dlq_partition, r.dlq_offset),
            idempotency_key: header_text(&r.headers, HEADER_IDEMPOTENCY_KEY),
            dead_letter_id: header_text(&r.headers, HEADER_DEAD_LETTER_ID)
                .and_then(|t| t.parse::<i64>().ok())
                .filter(|id| *id > 0),
            job_id: header_text(&r.headers, HEADER_REPLAY_ID),
            source,
            message_id: n.message_id.as_deref().filter(|m| !m.is_empty()),
        }
    }
}

/// One row a lookup returns: the probe (index of the arriving record in the batch), the
/// earlier dead letter, and the outbox row (publish) it came back from, when known.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct Hit {
    probe: i64,
    dead_letter_id: i64,
    outbox_id: Option<i64>,
    job_id: Option<String>,
    /// That publish already came back once (as this dead letter).
    refailed_by_id: Option<i64>,
}

/// An arriving record, after the lookups, with the row id it was stored under.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct Stored {
    probe: i64,
    id: i64,
    earlier_id: Option<i64>,
}

/// A link found for one arriving record.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    via: LinkVia,
    earlier_id: i64,
    outbox_id: Option<i64>,
    job_id: Option<String>,
}

/// The links of one batch, found step by step: [`Linker::next_lookup`] gives the next
/// lookup statement (only for the records still unlinked), [`Linker::take`] reads its hits.
pub(crate) struct Linker<'a> {
    evidence: Vec<Evidence<'a>>,
    found: Vec<Option<Found>>,
    /// Index into [`LinkVia::ALL`] of the next lookup.
    step: usize,
}

impl<'a> Linker<'a> {
    pub(crate) fn new(evidence: Vec<Evidence<'a>>) -> Linker<'a> {
        let found = vec![None; evidence.len()];
        Linker {
            evidence,
            found,
            step: 0,
        }
    }

    /// Whether record `i` of the batch was found to have come back after a replay (it will
    /// be linked to its earlier dead letter).
    pub(crate) fn found(&self, i: usize) -> bool {
        self.found.get(i).is_some_and(Option::is_some)
    }

    /// True when some record was linked.
    pub(crate) fn any(&self) -> bool {
        self.found.iter().any(Option::is_some)
    }

    /// The next lookups (one statement per [`PROBES_PER_STATEMENT`] probes) and the kind
    /// they look for, or `None` when every kind has been tried. Kinds with no probe left
    /// are skipped without a statement.
    pub(crate) fn next_lookup<DB: Dialect>(
        &mut self,
    ) -> Option<(LinkVia, Vec<QueryBuilder<'a, DB>>)> {
        while self.step < LinkVia::ALL.len() {
            let via = LinkVia::ALL[self.step];
            self.step += 1;
            let probes: Vec<usize> = (0..self.evidence.len())
                .filter(|&i| self.found[i].is_none() && self.has(i, via))
                .collect();
            if probes.is_empty() {
                continue;
            }
            let statements = probes
                .chunks(PROBES_PER_STATEMENT)
                .map(|chunk| self.lookup::<DB>(via, chunk))
                .collect();
            return Some((via, statements));
        }
        None
    }

    fn has(&self, i: usize, via: LinkVia) -> bool {
        let e = &self.evidence[i];
        match via {
            LinkVia::IdempotencyKey => e.idempotency_key.is_some(),
            LinkVia::DeadLetterId => e.dead_letter_id.is_some(),
            LinkVia::PublishedPosition | LinkVia::SourcePosition => e.source.is_some(),
            LinkVia::MessageId => e.message_id.is_some(),
        }
    }

    fn lookup<DB: Dialect>(&self, via: LinkVia, probes: &[usize]) -> QueryBuilder<'a, DB> {
        let mut qb = QueryBuilder::new("SELECT p.column1 AS probe, ");
        qb.push(match via {
            LinkVia::IdempotencyKey | LinkVia::DeadLetterId | LinkVia::PublishedPosition => {
                "o.dead_letter_id, o.id AS outbox_id, o.job_id, o.refailed_by_id FROM "
            }
            LinkVia::SourcePosition | LinkVia::MessageId => {
                "d.id AS dead_letter_id, o.id AS outbox_id, o.job_id, o.refailed_by_id FROM "
            }
        });
        // The probes as a row source `p` (column1 = the probe's index in the batch), one
        // column a value: a prepared statement on PostgreSQL (`Dialect::push_columns`).
        let evidence = || probes.iter().map(|&i| &self.evidence[i]);
        let mut columns = vec![Column::I64(probes.iter().map(|&i| i as i64).collect())];
        let text = |f: fn(&Evidence<'a>) -> Option<&'a str>| {
            Column::Text(evidence().map(|e| f(e).unwrap_or("")).collect())
        };
        match via {
            LinkVia::IdempotencyKey => columns.push(text(|e| e.idempotency_key)),
            LinkVia::DeadLetterId => {
                columns.push(Column::I64(
                    evidence().map(|e| e.dead_letter_id.unwrap_or(0)).collect(),
                ));
                columns.push(text(|e| e.job_id));
            }
            LinkVia::PublishedPosition | LinkVia::SourcePosition => {
                let source = || evidence().map(|e| e.source.unwrap_or(("", 0, 0)));
                columns.push(Column::Text(source().map(|s| s.0).collect()));
                columns.push(Column::I32(source().map(|s| s.1).collect()));
                columns.push(Column::I64(source().map(|s| s.2).collect()));
            }
            LinkVia::MessageId => columns.push(text(|e| e.message_id)),
        }
        DB::push_columns(&mut qb, columns);
        qb.push(" AS p ");
        // The latest publish of a replayed dead letter `d`.
        const LATEST_PUBLISH: &str = " JOIN outbox o ON o.id = (SELECT MAX(l.id) FROM outbox l \
             WHERE l.dead_letter_id = d.id AND l.status = 'published')";
        qb.push(match via {
            // Any status: the key proves the record was sent (a row whose delivery report was
            // lost, or not recorded yet, is still the publish that came back).
            LinkVia::IdempotencyKey => "JOIN outbox o ON o.idempotency_key = p.column2",
            // A header naming a dead letter of another redrive's store would name a row that
            // this store never replayed (or not in that job): no outbox row, no link.
            LinkVia::DeadLetterId => {
                "JOIN outbox o ON o.dead_letter_id = p.column2 \
                 AND o.status IN ('published', 'claimed') \
                 AND (p.column3 = '' OR o.job_id = p.column3)"
            }
            LinkVia::PublishedPosition => {
                "JOIN outbox o ON o.target_topic = p.column2 \
                 AND o.published_partition = p.column3 AND o.published_offset = p.column4 \
                 AND o.published_offset IS NOT NULL"
            }
            LinkVia::SourcePosition => {
                "JOIN dead_letters d ON d.source_topic = p.column2 \
                 AND d.source_partition = p.column3 AND d.source_offset = p.column4 \
                 AND d.replay_count > 0"
            }
            LinkVia::MessageId => {
                "JOIN dead_letters d ON d.message_id = p.column2 AND d.replay_count > 0"
            }
        });
        if matches!(via, LinkVia::SourcePosition | LinkVia::MessageId) {
            qb.push(LATEST_PUBLISH);
        }
        qb
    }

    /// Takes the hits of a lookup of kind `via`. Per record the latest publish wins. The
    /// weak kinds (the same source coordinates or message id, which many unrelated records
    /// may share) take only a publish that has not come back yet: a replay comes back once.
    pub(crate) fn take(&mut self, via: LinkVia, hits: Vec<Hit>) {
        let strong = matches!(via, LinkVia::IdempotencyKey | LinkVia::DeadLetterId);
        let mut best: Vec<Option<Hit>> = vec![None; self.evidence.len()];
        for h in hits {
            let Some(i) = usize::try_from(h.probe).ok().filter(|&i| i < best.len()) else {
                continue;
            };
            if !strong && h.refailed_by_id.is_some() {
                continue;
            }
            let newer = match &best[i] {
                Some(b) => h.outbox_id > b.outbox_id,
                None => true,
            };
            if newer {
                best[i] = Some(h);
            }
        }
        for (i, hit) in best.into_iter().enumerate() {
            if let (Some(h), None) = (hit, &self.found[i]) {
                self.found[i] = Some(Found {
                    via,
                    earlier_id: h.dead_letter_id,
                    outbox_id: h.outbox_id,
                    job_id: h.job_id,
                });
            }
        }
    }

    /// After the insert: the ids the linked records were stored under (a redelivered one
    /// keeps its earlier row).
    pub(crate) fn stored_query<DB: Dialect>(&self) -> Option<QueryBuilder<'a, DB>> {
        let linked: Vec<usize> = (0..self.found.len())
            .filter(|&i| self.found[i].is_some())
            .collect();
        if linked.is_empty() {
            return None;
        }
        let mut qb = QueryBuilder::new(
            "SELECT p.column1 AS probe, d.id, (SELECT l.earlier_id FROM dead_letter_links l \
                 WHERE l.dead_letter_id = d.id) AS earlier_id FROM (VALUES ",
        );
        for (n, &i) in linked.iter().enumerate() {
            let (t, p, o) = self.evidence[i].dlq;
            if n > 0 {
                qb.push(", ");
            }
            qb.push("(");
            DB::bind(&mut qb, Val::I64(Some(i as i64)));
            qb.push(", ");
            DB::bind(&mut qb, Val::Text(Some(t)));
            qb.push(", ");
            DB::bind(&mut qb, Val::I32(Some(p)));
            qb.push(", ");
            DB::bind(&mut qb, Val::I64(Some(o)));
            qb.push(")");
        }
        qb.push(
            ") AS p JOIN dead_letters d ON d.dlq_topic = p.column2 \
             AND d.dlq_partition = p.column3 AND d.dlq_offset = p.column4",
        );
        Some(qb)
    }

    /// The links to write, given where the records were stored: (new id, link), skipping a
    /// row that is already linked (a redelivery) and a "link" to itself or to a later row.
    pub(crate) fn links(&self, stored: &[Stored]) -> Vec<(i64, Found)> {
        stored
            .iter()
            .filter(|s| s.earlier_id.is_none())
            .filter_map(|s| {
                let f = self.found.get(usize::try_from(s.probe).ok()?)?.as_ref()?;
                (f.earlier_id < s.id).then(|| (s.id, f.clone()))
            })
            .collect()
    }
}

/// The statements that write one link, in the order they must run (see the module doc).
pub(crate) struct Writes<'a, DB: Dialect> {
    /// The link row of the new dead letter: earlier id, kind, job, repeat count. 0 rows:
    /// already linked.
    pub(crate) link: QueryBuilder<'a, DB>,
    /// The outbox row's first come-back. 1 row: count it for the job (`job`).
    pub(crate) outbox: Option<QueryBuilder<'a, DB>>,
    pub(crate) job: Option<QueryBuilder<'a, DB>>,
    /// The earlier dead letter `replayed` → `re_failed`; 1 row: add its history `event`.
    pub(crate) earlier: QueryBuilder<'a, DB>,
    pub(crate) event: QueryBuilder<'a, DB>,
}

/// The statements of one link (new dead letter `new_id`, link `f`) at `now` (epoch ms).
pub(crate) fn writes<'a, DB: Dialect>(new_id: i64, f: &'a Found, now: i64) -> Writes<'a, DB> {
    let mut link = QueryBuilder::new(
        "INSERT INTO dead_letter_links \
         (dead_letter_id, earlier_id, repeat_failures, linked_via, job_id, linked_at_ms) \
         SELECT ",
    );
    DB::bind(&mut link, Val::I64(Some(new_id)));
    link.push(", ");
    DB::bind(&mut link, Val::I64(Some(f.earlier_id)));
    link.push(
        ", 1 + COALESCE((SELECT e.repeat_failures FROM dead_letter_links e \
         WHERE e.dead_letter_id = ",
    );
    DB::bind(&mut link, Val::I64(Some(f.earlier_id)));
    link.push("), 0), ");
    DB::bind(&mut link, Val::Text(Some(f.via.as_str())));
    link.push(", ");
    DB::bind(&mut link, Val::Text(f.job_id.as_deref()));
    link.push(", ");
    DB::bind(&mut link, Val::I64(Some(now)));
    link.push(" ON CONFLICT (dead_letter_id) DO NOTHING");

    let (outbox, job) = match (f.outbox_id, f.job_id.as_deref()) {
        (Some(outbox_id), Some(job_id)) => {
            let mut o = QueryBuilder::new("UPDATE outbox SET refailed_by_id = ");
            DB::bind(&mut o, Val::I64(Some(new_id)));
            o.push(", refailed_at_ms = ");
            DB::bind(&mut o, Val::I64(Some(now)));
            o.push(" WHERE id = ");
            DB::bind(&mut o, Val::I64(Some(outbox_id)));
            o.push(" AND refailed_by_id IS NULL");
            let mut j =
                QueryBuilder::new("UPDATE replay_jobs SET refailed = refailed + 1 WHERE id = ");
            DB::bind(&mut j, Val::Text(Some(job_id)));
            (Some(o), Some(j))
        }
        _ => (None, None),
    };

    let mut earlier = QueryBuilder::new(
        "UPDATE dead_letters SET status = 're_failed', status_before = NULL \
         WHERE status = 'replayed' AND id = ",
    );
    DB::bind(&mut earlier, Val::I64(Some(f.earlier_id)));

    let mut event = QueryBuilder::new(
        "INSERT INTO dead_letter_events (dead_letter_id, at_ms, kind, actor, detail, job_id) \
         VALUES (",
    );
    DB::bind(&mut event, Val::I64(Some(f.earlier_id)));
    event.push(", ");
    DB::bind(&mut event, Val::I64(Some(now)));
    event.push(", 're_failed', 'ingest', ");
    DB::bind(
        &mut event,
        Val::OwnedText(Some(format!(
            "came back as dead letter #{new_id} (linked by {})",
            f.via.describe()
        ))),
    );
    event.push(", ");
    DB::bind(&mut event, Val::Text(f.job_id.as_deref()));
    event.push(")");
    Writes {
        link,
        outbox,
        job,
        earlier,
        event,
    }
}

/// Runs the link writes of one batch on `tx` (inside the insert's transaction), returning how
/// many records were linked. A macro rather than a generic fn: the executor and row types are
/// concrete inside `on_pool!`.
macro_rules! write_links {
    ($linker:expr, $tx:expr, $DB:ty, $now:expr) => {{
        let mut linked = 0u64;
        if let Some(mut qb) = $linker.stored_query::<$DB>() {
            let stored: Vec<$crate::store::outcome::Stored> = qb
                .build_query_as()
                .persistent(false)
                .fetch_all(&mut *$tx)
                .await
                .map_err(store_error)?;
            for (new_id, found) in $linker.links(&stored) {
                let mut w = $crate::store::outcome::writes::<$DB>(new_id, &found, $now);
                let done = w
                    .link
                    .build()
                    .execute(&mut *$tx)
                    .await
                    .map_err(store_error)?;
                if done.rows_affected() == 0 {
                    continue;
                }
                linked += 1;
                if let (Some(mut o), Some(mut j)) = (w.outbox.take(), w.job.take()) {
                    let first = o.build().execute(&mut *$tx).await.map_err(store_error)?;
                    if first.rows_affected() > 0 {
                        j.build().execute(&mut *$tx).await.map_err(store_error)?;
                    }
                }
                let moved = w
                    .earlier
                    .build()
                    .execute(&mut *$tx)
                    .await
                    .map_err(store_error)?;
                if moved.rows_affected() > 0 {
                    w.event
                        .build()
                        .execute(&mut *$tx)
                        .await
                        .map_err(store_error)?;
                }
            }
        }
        linked
    }};
}
pub(crate) use write_links;

/// Runs every lookup of `linker` on `tx`. A macro for the same reason as [`write_links`].
macro_rules! find_links {
    ($linker:expr, $tx:expr, $DB:ty) => {{
        while let Some((via, statements)) = $linker.next_lookup::<$DB>() {
            let mut hits = Vec::new();
            for mut qb in statements {
                let rows: Vec<$crate::store::outcome::Hit> = qb
                    .build_query_as()
                    .persistent(<$DB as $crate::store::dialect::Dialect>::ROW_SOURCE_IS_FIXED)
                    .fetch_all(&mut *$tx)
                    .await
                    .map_err(store_error)?;
                hits.extend(rows);
            }
            $linker.take(via, hits);
        }
    }};
}
pub(crate) use find_links;

/// For the relay's mark, after it set `outbox_ids` published and their dead letters
/// `replayed`: the dead letters whose record already came back (ingest linked it while the
/// delivery report was on its way), which [`settle_re_failed`] then makes `re_failed`.
/// Usually none. Read first, by outbox primary key, so the mark never runs an `UPDATE` over
/// `status = 'replayed'`: PostgreSQL drove that one from `dead_letters_by_status`, reading
/// every replayed dead letter of the store once per mark (31–39 s per mark in a 20,000-record
/// replay, `docs/bench.md`).
pub(crate) fn came_back_before_mark<DB: Dialect>(
    outbox_ids_json: String,
) -> QueryBuilder<'static, DB> {
    let mut qb = QueryBuilder::new(
        "SELECT dead_letter_id FROM outbox WHERE refailed_by_id IS NOT NULL AND id IN ",
    );
    DB::push_json_ids(&mut qb, outbox_ids_json);
    qb
}

/// `replayed` → `re_failed` for `dead_letter_ids` (from [`came_back_before_mark`]).
pub(crate) fn settle_re_failed<DB: Dialect>(
    dead_letter_ids_json: String,
) -> QueryBuilder<'static, DB> {
    let mut qb = QueryBuilder::new(
        "UPDATE dead_letters SET status = 're_failed' WHERE status = 'replayed' AND id IN ",
    );
    DB::push_json_ids(&mut qb, dead_letter_ids_json);
    qb
}

/// One row of the chain queries.
#[derive(Debug, sqlx::FromRow)]
struct ChainRow {
    /// The id named by the chain (the row may be gone: then the rest is NULL).
    named_id: i64,
    status: Option<String>,
    dead_lettered_at_ms: Option<i64>,
    linked_via: Option<String>,
    came_back_from_job: Option<String>,
    repeat_failures: Option<i32>,
    earlier_id: Option<i64>,
}

#[derive(Debug, sqlx::FromRow)]
struct LinkRow {
    earlier_id: i64,
    linked_via: String,
    job_id: Option<String>,
}

impl LinkRow {
    fn into_link(self) -> ReplayLink {
        // A link whose kind this version does not know is still a link.
        ReplayLink {
            earlier_id: self.earlier_id,
            via: LinkVia::parse(&self.linked_via).unwrap_or(LinkVia::DeadLetterId),
            job_id: self.job_id,
        }
    }
}

/// The `dead_letter_links` columns [`Store::get`] reads beside the row (the table joined as
/// `k`), each named `link_...`: all NULL for a dead letter that did not come back from a
/// replay ([`LinkColumns`]).
pub(crate) const LINK_COLUMNS: &str = "k.earlier_id AS link_earlier_id, \
     k.linked_via AS link_linked_via, k.job_id AS link_job_id";

/// [`LINK_COLUMNS`] as read.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct LinkColumns {
    link_earlier_id: Option<i64>,
    link_linked_via: Option<String>,
    link_job_id: Option<String>,
}

impl LinkColumns {
    /// The link, `None` when there is none.
    pub(crate) fn into_link(self) -> Option<ReplayLink> {
        Some(
            LinkRow {
                earlier_id: self.link_earlier_id?,
                linked_via: self.link_linked_via?,
                job_id: self.link_job_id,
            }
            .into_link(),
        )
    }
}

#[derive(Debug, sqlx::FromRow)]
struct PublishRow {
    published_at_ms: Option<i64>,
    job_id: String,
}

impl ChainRow {
    fn into_link(self) -> Option<ChainLink> {
        Some(ChainLink {
            id: self.named_id,
            status: Status::parse(self.status.as_deref()?)?,
            dead_lettered_at_ms: self.dead_lettered_at_ms?,
            via: self.linked_via.as_deref().and_then(LinkVia::parse),
            job_id: self.came_back_from_job,
            repeat_failures: self.repeat_failures.unwrap_or(0),
        })
    }
}

/// A chain row: the dead letter `d` with its link `l` (if any).
const CHAIN_COLUMNS: &str = "d.id AS named_id, d.status, d.dead_lettered_at_ms, l.linked_via, \
     l.job_id AS came_back_from_job, l.repeat_failures, l.earlier_id";

impl Store {
    /// The chain around dead letter `id` ([`ReplayChain`]): up to [`CHAIN_LINKS_SHOWN`]
    /// earlier dead letters (each one primary-key read, following `earlier_id`), up to as
    /// many later ones (`dead_letters_by_earlier`), and its latest publish. Empty for an id
    /// that is not stored.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn replay_chain(&self, id: i64) -> Result<ReplayChain, StoreError> {
        let earlier = self.replay_link(id).await?.map(|l| l.earlier_id);
        self.replay_chain_from(id, earlier).await
    }

    /// [`Store::replay_chain`] of a dead letter whose link is known (`earlier`: its
    /// [`crate::model::DeadLetter::link`]'s `earlier_id`, as [`Store::get`] read it): the
    /// earlier dead letters, the later ones and the latest publish are read at once, on
    /// three connections, so a detail page waits for the longest of them, not their sum.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub async fn replay_chain_from(
        &self,
        id: i64,
        earlier: Option<i64>,
    ) -> Result<ReplayChain, StoreError> {
        let (mut chain, (later, later_more), publish) = tokio::try_join!(
            self.chain_earlier(earlier),
            self.chain_later(id),
            self.last_publish(id)
        )?;
        chain.later = later;
        chain.later_more = later_more;
        if let Some(p) = publish {
            chain.last_published_at_ms = p.published_at_ms;
            chain.last_published_job = Some(p.job_id);
        }
        Ok(chain)
    }

    /// The earlier part of a chain, walking `earlier_id` one row at a time from `next` (ids
    /// only go down, so no cycle).
    async fn chain_earlier(&self, mut next: Option<i64>) -> Result<ReplayChain, StoreError> {
        let mut chain = ReplayChain::default();
        while let Some(named) = next {
            if chain.earlier.len() >= CHAIN_LINKS_SHOWN {
                chain.earlier_more = true;
                break;
            }
            let row: Option<ChainRow> = on_pool!(self, |pool, DB| {
                let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new("SELECT ");
                qb.push(CHAIN_COLUMNS).push(
                    " FROM dead_letters d LEFT JOIN dead_letter_links l \
                     ON l.dead_letter_id = d.id WHERE d.id = ",
                );
                DB::bind(&mut qb, Val::I64(Some(named)));
                qb.build_query_as().fetch_optional(pool).await
            })
            .map_err(store_error)?;
            match row {
                None => {
                    chain.earlier_purged = Some(named);
                    break;
                }
                Some(r) => {
                    next = r.earlier_id;
                    if let Some(link) = r.into_link() {
                        chain.earlier.push(link);
                    }
                }
            }
        }
        Ok(chain)
    }

    /// Up to [`CHAIN_LINKS_SHOWN`] dead letters that came back from `id`, and whether there
    /// are more.
    async fn chain_later(&self, id: i64) -> Result<(Vec<ChainLink>, bool), StoreError> {
        let cap = CHAIN_LINKS_SHOWN as i64;
        let later: Vec<ChainRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new("SELECT ");
            qb.push(CHAIN_COLUMNS).push(
                " FROM dead_letter_links l JOIN dead_letters d ON d.id = l.dead_letter_id \
                 WHERE l.earlier_id = ",
            );
            DB::bind(&mut qb, Val::I64(Some(id)));
            qb.push(" ORDER BY l.dead_letter_id LIMIT ");
            DB::bind(&mut qb, Val::I64(Some(cap + 1)));
            qb.build_query_as().fetch_all(pool).await
        })
        .map_err(store_error)?;
        let more = later.len() as i64 > cap;
        let shown = later
            .into_iter()
            .take(CHAIN_LINKS_SHOWN)
            .filter_map(ChainRow::into_link)
            .collect();
        Ok((shown, more))
    }

    /// The latest publish of dead letter `id`, if any.
    async fn last_publish(&self, id: i64) -> Result<Option<PublishRow>, StoreError> {
        on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT published_at_ms, job_id FROM outbox WHERE dead_letter_id = ",
            );
            DB::bind(&mut qb, Val::I64(Some(id)));
            qb.push(" AND status = 'published' ORDER BY id DESC LIMIT 1");
            qb.build_query_as().fetch_optional(pool).await
        })
        .map_err(store_error)
    }

    /// The link of dead letter `id` to the earlier one it came back from, if any.
    ///
    /// Errors: `Unavailable`, `Database`.
    pub(crate) async fn replay_link(&self, id: i64) -> Result<Option<ReplayLink>, StoreError> {
        let row: Option<LinkRow> = on_pool!(self, |pool, DB| {
            let mut qb: QueryBuilder<'_, DB> = QueryBuilder::new(
                "SELECT earlier_id, linked_via, job_id FROM dead_letter_links \
                 WHERE dead_letter_id = ",
            );
            DB::bind(&mut qb, Val::I64(Some(id)));
            qb.build_query_as().fetch_optional(pool).await
        })
        .map_err(store_error)?;
        Ok(row.map(LinkRow::into_link))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(name: &str, value: Option<&[u8]>) -> Header {
        Header {
            name: name.into(),
            value: value.map(<[u8]>::to_vec),
        }
    }

    #[test]
    fn header_evidence_takes_only_sane_text() {
        let headers = vec![
            h(HEADER_DEAD_LETTER_ID, Some(b"12")),
            h(HEADER_DEAD_LETTER_ID, Some(b" 42 ")),
            h(HEADER_IDEMPOTENCY_KEY, Some(&[0xff, 0xfe])),
            h(HEADER_REPLAY_ID, None),
        ];
        assert_eq!(header_text(&headers, HEADER_DEAD_LETTER_ID), Some("42"));
        assert_eq!(header_text(&headers, HEADER_IDEMPOTENCY_KEY), None);
        assert_eq!(header_text(&headers, HEADER_REPLAY_ID), None);
        let long = "x".repeat(MAX_ID_TEXT + 1);
        let headers = vec![h(HEADER_REPLAY_ID, Some(long.as_bytes()))];
        assert_eq!(header_text(&headers, HEADER_REPLAY_ID), None);
    }
}
