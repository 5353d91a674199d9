//! The store's SQL, written once for both databases: generic over [`Dialect`], which supplies
//! the few differences. [`push_filter`] is the one definition of "dead letters matching this
//! filter" in SQL; every query that takes a [`Filter`] goes through it.

use sqlx::QueryBuilder;

use super::dialect::{Dialect, Val};
use super::outcome::LINK_COLUMNS;
use super::tiers::TIERING_COLUMNS;
use crate::filter::{Cursor, Filter};
use crate::model::Status;

/// Columns of a list row ([`super::rows::SummaryRow`]), cheap ones only.
pub(crate) const SUMMARY_COLUMNS: &str = "id, dlq_topic, dlq_partition, dlq_offset, \
     source_topic, source_partition, source_offset, consumer_group, error_class, error_message, \
     retry_count, status, convention, fingerprint, dead_lettered_at_ms, decode_warnings, \
     COALESCE((SELECT l.repeat_failures FROM dead_letter_links l \
     WHERE l.dead_letter_id = dead_letters.id), 0) AS repeat_failures, tier";

/// Columns of a whole dead letter ([`super::rows::FullRow`]). `tier` is qualified: [`get`]
/// joins `dead_letter_tiers`, which has one too.
pub(crate) const FULL_COLUMNS: &str = "id, dlq_topic, dlq_partition, dlq_offset, \
     source_topic, source_partition, source_offset, consumer_group, error_class, error_message, \
     retry_count, status, convention, fingerprint, dead_lettered_at_ms, decode_warnings, \
     COALESCE((SELECT l.repeat_failures FROM dead_letter_links l \
     WHERE l.dead_letter_id = dead_letters.id), 0) AS repeat_failures, dead_letters.tier, \
     source_timestamp_ms, stack_trace, message_id, failed_at_ms, record_timestamp_ms, \
     ingested_at_ms, replay_count, headers, key, value";

/// Appends ` WHERE ...` selecting the dead letters that match `f`. `status: None` means every
/// status but `deleted`. `q` is a case-insensitive substring of the searched text (the error
/// message, the stack trace's and a text payload's first 8 KiB: `search.rs`), with `%`, `_`
/// and `!` in the user's text matched literally. `from_ms` is inclusive, `to_ms` exclusive.
pub(crate) fn push_filter<'a, DB: Dialect>(qb: &mut QueryBuilder<'a, DB>, f: &'a Filter) {
    let (op, status) = match f.status {
        Some(s) => (" = ", s),
        None => (" <> ", Status::Deleted),
    };
    qb.push(" WHERE status").push(op);
    DB::bind(qb, Val::Text(Some(status.as_str())));

    let exact = [
        ("fingerprint", &f.fingerprint),
        ("error_class", &f.error_class),
        ("source_topic", &f.source_topic),
        ("dlq_topic", &f.dlq_topic),
        ("consumer_group", &f.consumer_group),
    ];
    for (column, value) in exact {
        if let Some(v) = value {
            qb.push(" AND ").push(column).push(" = ");
            DB::bind(qb, Val::Text(Some(v.as_str())));
        }
    }
    // The acting user's DLQ-topic scope (`Store::limit_to_scope`): the one place every
    // filtered read and action is held to it.
    push_topic_in(qb, f.dlq_topic_in.as_deref());
    if let Some(q) = &f.q {
        // Migration 0024: the message, stack trace and text payload (`search.rs`).
        qb.push(" AND id IN ");
        super::search_sql::push_matching_ids(qb, q);
    }
    if let Some(from) = f.from_ms {
        qb.push(" AND dead_lettered_at_ms >= ");
        DB::bind(qb, Val::I64(Some(from)));
    }
    if let Some(to) = f.to_ms {
        qb.push(" AND dead_lettered_at_ms < ");
        DB::bind(qb, Val::I64(Some(to)));
    }
    // Labels (migration 0009): the dead letter's own, or its error group's. Uncorrelated
    // IN-subqueries over the label indexes, so the plan does not depend on how the outer
    // statement (SELECT, UPDATE, a subquery of the error groups) names its table.
    if let Some(label) = &f.label {
        qb.push(" AND (id IN (SELECT dead_letter_id FROM dead_letter_labels WHERE label = ");
        DB::bind(qb, Val::Text(Some(label.as_str())));
        qb.push(") OR fingerprint IN (SELECT fingerprint FROM group_labels WHERE label = ");
        DB::bind(qb, Val::Text(Some(label.as_str())));
        qb.push("))");
    }
    // Migration 0013: the linked ones, from `dead_letter_links`' primary key (as labels).
    if f.came_back {
        qb.push(" AND id IN (SELECT dead_letter_id FROM dead_letter_links)");
    }
    // A replay job's rows (`outbox_claimable`, migration 0016, is a range by `job_id`): the
    // dead letters it took, and the ones that came back from what it published.
    if let Some(job) = &f.replay_job {
        qb.push(" AND id IN (SELECT dead_letter_id FROM outbox WHERE job_id = ");
        DB::bind(qb, Val::Text(Some(job.as_str())));
        qb.push(")");
    }
    if let Some(job) = &f.came_back_from_job {
        qb.push(" AND id IN (SELECT refailed_by_id FROM outbox WHERE job_id = ");
        DB::bind(qb, Val::Text(Some(job.as_str())));
        qb.push(" AND refailed_by_id IS NOT NULL)");
    }
    if f.unlabelled {
        qb.push(
            " AND id NOT IN (SELECT dead_letter_id FROM dead_letter_labels) \
             AND fingerprint NOT IN (SELECT fingerprint FROM group_labels)",
        );
    }
    // Migration 0022: the automation tier. A given tier is an equality the
    // `dead_letters_by_tier` index serves in list order; no tier hides the archive tier (a
    // residual check on the rows the list's own index yields, as `status <> 'deleted'`).
    match f.tier.map(|t| t.tier()) {
        Some(Some(t)) => {
            qb.push(" AND tier = ");
            DB::bind(qb, Val::Text(Some(t.as_str())));
        }
        Some(None) => {
            qb.push(" AND tier IS NULL");
        }
        None => {
            qb.push(" AND (tier IS NULL OR tier <> 'archive')");
        }
    }
}

/// Appends ` AND dlq_topic IN (...)` for a DLQ-topic scope ([`Filter::dlq_topic_in`]; also
/// the maintained aggregates' reads): nothing for `None`, a condition no row meets for an
/// empty list.
pub(crate) fn push_topic_in<'a, DB: Dialect>(
    qb: &mut QueryBuilder<'a, DB>,
    topics: Option<&'a [String]>,
) {
    let Some(topics) = topics else {
        return;
    };
    // `NULL` first: `IN (NULL)` holds for no row, and every topic follows a comma.
    qb.push(" AND dlq_topic IN (NULL");
    for t in topics {
        qb.push(", ");
        DB::bind(qb, Val::Text(Some(t.as_str())));
    }
    qb.push(")");
}

/// The escape character of [`like_pattern`]. Not `\`: a PostgreSQL server with
/// `standard_conforming_strings = off` would read `'\'` as an unterminated string.
pub(crate) const LIKE_ESCAPE: char = '!';

/// `%text%` with LIKE's wildcards (`%`, `_`) and the escape character in `text` escaped, for
/// `LIKE ... ESCAPE '!'`.
pub(crate) fn like_pattern(text: &str) -> String {
    let mut p = String::with_capacity(text.len() + 2);
    p.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | LIKE_ESCAPE) {
            p.push(LIKE_ESCAPE);
        }
        p.push(c);
    }
    p.push('%');
    p
}

/// A list page: rows strictly after `cursor` in (dead_lettered_at_ms DESC, id DESC) order,
/// at most `fetch` of them. `prefix` goes before the `SELECT` (`""`, or `EXPLAIN ...`).
pub(crate) fn list<'a, DB: Dialect>(
    prefix: &str,
    filter: &'a Filter,
    cursor: Option<Cursor>,
    fetch: i64,
) -> QueryBuilder<'a, DB> {
    page(prefix, SUMMARY_COLUMNS, filter, cursor, fetch)
}

/// [`list`] with the columns chosen (the export reads [`FULL_COLUMNS`] in the same order).
pub(crate) fn page<'a, DB: Dialect>(
    prefix: &str,
    columns: &str,
    filter: &'a Filter,
    cursor: Option<Cursor>,
    fetch: i64,
) -> QueryBuilder<'a, DB> {
    page_with(
        prefix,
        columns,
        |qb| {
            qb.push("dead_letters");
        },
        filter,
        cursor,
        |_| {},
        fetch,
    )
}

/// [`page`] with more: `from` appends the row source after `FROM` (`dead_letters`, or a
/// driving row source joined to it, as `search.rs` does), and `extra` appends ` AND ...`
/// conditions after the filter's.
pub(crate) fn page_with<'a, DB: Dialect>(
    prefix: &str,
    columns: &str,
    from: impl FnOnce(&mut QueryBuilder<'a, DB>),
    filter: &'a Filter,
    cursor: Option<Cursor>,
    extra: impl FnOnce(&mut QueryBuilder<'a, DB>),
    fetch: i64,
) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new(format!("{prefix}SELECT {columns} FROM "));
    from(&mut qb);
    push_filter(&mut qb, filter);
    extra(&mut qb);
    if let Some(c) = cursor {
        // (t, id) < (c.t, c.id), spelled so that both databases use `t <= c.t` as the index
        // range and check the tie-break on the few rows sharing c.t.
        qb.push(" AND dead_lettered_at_ms <= ");
        DB::bind(&mut qb, Val::I64(Some(c.dead_lettered_at_ms)));
        qb.push(" AND (dead_lettered_at_ms < ");
        DB::bind(&mut qb, Val::I64(Some(c.dead_lettered_at_ms)));
        qb.push(" OR id < ");
        DB::bind(&mut qb, Val::I64(Some(c.id)));
        qb.push(")");
    }
    qb.push(" ORDER BY dead_lettered_at_ms DESC, id DESC LIMIT ");
    DB::bind(&mut qb, Val::I64(Some(fetch)));
    qb
}

/// `SELECT COUNT(*)` of the rows matching `filter`.
pub(crate) fn count<DB: Dialect>(filter: &Filter) -> QueryBuilder<'_, DB> {
    let mut qb = QueryBuilder::new("SELECT COUNT(*) FROM dead_letters");
    push_filter(&mut qb, filter);
    qb
}

/// One whole dead letter by id, with its tiering and its replay link
/// ([`super::rows::GetRow`]): one statement, so one snapshot of the three.
pub(crate) fn get<'a, DB: Dialect>(id: i64) -> QueryBuilder<'a, DB> {
    let mut qb = QueryBuilder::new(format!(
        "SELECT {FULL_COLUMNS}, {TIERING_COLUMNS}, {LINK_COLUMNS} FROM dead_letters \
         LEFT JOIN dead_letter_tiers t ON t.dead_letter_id = dead_letters.id \
         LEFT JOIN dead_letter_links k ON k.dead_letter_id = dead_letters.id \
         WHERE dead_letters.id = "
    ));
    DB::bind(&mut qb, Val::I64(Some(id)));
    qb
}

/// The columns [`facet`] may be asked about (never user text: it is spliced into the SQL).
#[derive(Debug, Clone, Copy)]
pub(crate) enum FacetColumn {
    SourceTopic,
    DlqTopic,
    ConsumerGroup,
}

impl FacetColumn {
    fn name(self) -> &'static str {
        match self {
            FacetColumn::SourceTopic => "source_topic",
            FacetColumn::DlqTopic => "dlq_topic",
            FacetColumn::ConsumerGroup => "consumer_group",
        }
    }
}

/// Distinct non-null values of `column`, ascending, at most `cap`. A "loose index scan": each
/// step asks the column's index for the next larger value, so the cost is one index probe per
/// distinct value instead of a scan of every row (neither database skips on its own).
pub(crate) fn facet<'a, DB: Dialect>(column: FacetColumn, cap: i64) -> QueryBuilder<'a, DB> {
    let c = column.name();
    let mut qb = QueryBuilder::new(format!(
        "WITH RECURSIVE t(v, n) AS ( \
           SELECT (SELECT {c} FROM dead_letters WHERE {c} IS NOT NULL ORDER BY {c} LIMIT 1), 1 \
           UNION ALL \
           SELECT (SELECT {c} FROM dead_letters WHERE {c} > t.v ORDER BY {c} LIMIT 1), t.n + 1 \
           FROM t WHERE t.v IS NOT NULL AND t.n < "
    ));
    DB::bind(&mut qb, Val::I64(Some(cap)));
    qb.push(") SELECT v FROM t WHERE v IS NOT NULL ORDER BY v");
    qb
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_pattern_escapes_wildcards() {
        assert_eq!(like_pattern("100%_a!b\\c"), "%100!%!_a!!b\\c%");
    }
}
