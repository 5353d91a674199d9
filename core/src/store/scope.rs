//! DLQ-topic scopes (`crate::permission`, `docs/access.md`): a role may be limited to some DLQ
//! topics, and its users then see and act on only those dead letters.
//!
//! A scope is a list of patterns (names, globs, `^` regular expressions) that SQL cannot
//! evaluate the same way on both databases, so it is resolved here against the stored DLQ
//! topic names into a plain list, which [`crate::Filter::dlq_topic_in`] carries into the one
//! SQL definition of "matching dead letters" (`sql::push_filter`). Reads limit their filter
//! with [`Store::limit_to_scope`]; every action entry point of the store (which all take the
//! actor) limits its selection with [`Store::scope_selection`]; reads and actions by id check
//! the ids with [`Store::check_ids_in_scope`]. A dead letter outside the scope is answered as
//! absent (`NotFound`): a scoped user learns nothing about other teams' records.

use sqlx::QueryBuilder;

use super::dialect::{store_error, Dialect, Val};
use super::sql::{self, FacetColumn};
use super::{Pool, Store, StoreError};
use crate::actions::{Actor, Selection};
use crate::filter::Filter;

/// Most stored DLQ topic names a scope is resolved against.
pub const MAX_SCOPE_TOPICS: i64 = 100_000;

/// Ids per `IN (...)` when checking ids against a scope.
const IDS_PER_QUERY: usize = 500;

/// Most missing ids one `NotFound` message names; it counts them all.
const MISSING_IDS_NAMED: usize = 5;

/// How a `NotFound` message naming several dead letters starts (see [`there_is_no`]).
const SEVERAL_DEAD_LETTERS: &str = "dead letters ";

/// The `NotFound` message of the ids picked for an action that are not there (or outside the
/// actor's scope, which reads the same): `dead letter 7` for one; for more, the lowest
/// [`MISSING_IDS_NAMED`] and how many of the distinct ids `asked` are missing in all:
/// `dead letters 7, 9, 12 (3 of the 40 asked)`, `dead letters 1, 2, 3, 4, 5 and 3 more (8 of
/// the 40 asked)`. `named` holds the lowest missing ids (sorted), `missing` counts them all.
fn missing_ids_message(named: &[i64], missing: usize, asked: usize) -> String {
    match named {
        [id] if missing == 1 => format!("dead letter {id}"),
        _ => {
            let mut list = named
                .iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            if missing > named.len() {
                list.push_str(&format!(" and {} more", missing - named.len()));
            }
            format!("{SEVERAL_DEAD_LETTERS}{list} ({missing} of the {asked} asked)")
        }
    }
}

/// A `NotFound` message of the store (it names what is missing: `dead letter 7`, `replay job
/// J`, `dead letters 7, 9 (2 of the 40 asked)`) as the sentence a client reads: `there is no
/// dead letter 7`, `there are no dead letters 7, 9 (2 of the 40 asked)`.
pub fn there_is_no(what: &str) -> String {
    if what.starts_with(SEVERAL_DEAD_LETTERS) {
        format!("there are no {what}")
    } else {
        format!("there is no {what}")
    }
}

impl Store {
    /// The stored DLQ topics `actor` may see; `None` when its role is not limited to some
    /// topics. Errors: `Unavailable`, `Database`.
    pub async fn topics_in_scope(&self, actor: &Actor) -> Result<Option<Vec<String>>, StoreError> {
        let Some(scope) = actor.topic_scope() else {
            return Ok(None);
        };
        let known = on_pool!(self, |pool, DB| {
            let mut qb = sql::facet::<DB>(FacetColumn::DlqTopic, MAX_SCOPE_TOPICS);
            qb.build_query_scalar::<String>().fetch_all(pool).await
        })
        .map_err(store_error)?;
        Ok(Some(scope.select(&known)))
    }

    /// Limits `filter` to `actor`'s DLQ-topic scope (sets [`Filter::dlq_topic_in`], replacing
    /// whatever the request carried there). Call it on every filter a read uses.
    /// Errors: `Unavailable`, `Database`.
    pub async fn limit_to_scope(
        &self,
        actor: &Actor,
        filter: &mut Filter,
    ) -> Result<(), StoreError> {
        filter.dlq_topic_in = self.topics_in_scope(actor).await?;
        Ok(())
    }

    /// `Ok` if every existing dead letter among `ids` is of a DLQ topic in `actor`'s scope
    /// (ids that do not exist are left to the caller, which reports them as it always has).
    /// Errors: `NotFound` naming the ones outside the scope (worded as
    /// [`Store::check_ids_exist_in_scope`] does) — as if they did not exist; `Unavailable`,
    /// `Database`.
    pub async fn check_ids_in_scope(&self, actor: &Actor, ids: &[i64]) -> Result<(), StoreError> {
        if actor.topic_scope().is_none() {
            return Ok(());
        }
        self.check_ids(actor, ids, false).await
    }

    /// `Ok` if every one of `ids` exists (in any status, `deleted` included) and is of a DLQ
    /// topic in `actor`'s scope: what an action on dead letters picked by id needs, so that
    /// an id that is not there is answered 404 rather than acted on as nothing.
    /// Errors: `NotFound` naming the ids missing or outside the scope — the two read the same,
    /// so a scoped user learns nothing about other teams' records: `dead letter N` for one,
    /// else the lowest few and how many in all (`dead letters 7, 9, 12 (3 of the 40 asked)`;
    /// [`there_is_no`] makes it a sentence); `Unavailable`, `Database`.
    pub async fn check_ids_exist_in_scope(
        &self,
        actor: &Actor,
        ids: &[i64],
    ) -> Result<(), StoreError> {
        self.check_ids(actor, ids, true).await
    }

    /// The two checks above: the ids' DLQ topics against `actor`'s scope (when it has one),
    /// and, with `must_exist`, that each id was found. Every chunk is read, so that the
    /// refusal counts all the absent ids.
    async fn check_ids(
        &self,
        actor: &Actor,
        ids: &[i64],
        must_exist: bool,
    ) -> Result<(), StoreError> {
        let scope = actor.topic_scope();
        let mut wanted = ids.to_vec();
        wanted.sort_unstable();
        wanted.dedup();
        let (mut missing, mut named) = (0usize, Vec::with_capacity(MISSING_IDS_NAMED));
        for chunk in wanted.chunks(IDS_PER_QUERY) {
            let rows: Vec<(i64, String)> = on_pool!(self, |pool, DB| {
                let mut qb: QueryBuilder<DB> =
                    QueryBuilder::new("SELECT id, dlq_topic FROM dead_letters WHERE id IN (");
                for (i, id) in chunk.iter().enumerate() {
                    if i > 0 {
                        qb.push(", ");
                    }
                    DB::bind(&mut qb, Val::I64(Some(*id)));
                }
                qb.push(") ORDER BY id");
                qb.build_query_as::<(i64, String)>().fetch_all(pool).await
            })
            .map_err(store_error)?;
            // Both lists are sorted: the ids of `chunk` without a row, or whose row is outside
            // the scope, are absent; the lowest few are named.
            let mut found = rows.iter().peekable();
            for id in chunk {
                let row = found.next_if(|(r, _)| r == id);
                let absent = match row {
                    None => must_exist,
                    Some((_, topic)) => scope.as_ref().is_some_and(|s| !s.matches(topic)),
                };
                if absent {
                    missing += 1;
                    if named.len() < MISSING_IDS_NAMED {
                        named.push(*id);
                    }
                }
            }
        }
        if missing == 0 {
            return Ok(());
        }
        Err(StoreError::NotFound(missing_ids_message(
            &named,
            missing,
            wanted.len(),
        )))
    }

    /// `selection` held to `actor`'s scope: a filter limited ([`Store::limit_to_scope`]),
    /// ids checked ([`Store::check_ids_exist_in_scope`]: each must exist). Every action entry
    /// point calls it first. Errors: as those two.
    pub async fn scope_selection(
        &self,
        actor: &Actor,
        selection: &Selection,
    ) -> Result<Selection, StoreError> {
        match selection {
            Selection::Ids(ids) => {
                self.check_ids_exist_in_scope(actor, ids).await?;
                Ok(selection.clone())
            }
            Selection::Filter(f) => {
                let mut f = f.clone();
                self.limit_to_scope(actor, &mut f).await?;
                Ok(Selection::Filter(f))
            }
        }
    }
}
