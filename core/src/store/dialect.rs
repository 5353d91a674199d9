//! Every difference between SQLite and PostgreSQL that the store's SQL has to know about.
//! The SQL text itself is shared (see `sql.rs`): both databases speak `ON CONFLICT ... DO
//! NOTHING`, `WITH RECURSIVE`, `LIMIT`; `QueryBuilder` writes `?` or `$n` placeholders itself.

use sqlx::{Arguments as _, Database, Postgres, QueryBuilder, Sqlite};

use super::StoreError;

/// A value to bind, borrowed from the caller where possible (a 1 MiB value is not copied).
/// One enum instead of generic `push_bind` calls, so the query builders in `sql.rs` can be
/// generic over the database without restating sqlx's `Encode`/`Type` bounds everywhere.
#[derive(Debug, Clone)]
pub(crate) enum Val<'a> {
    I32(Option<i32>),
    I64(Option<i64>),
    Text(Option<&'a str>),
    OwnedText(Option<String>),
    Bytes(Option<&'a [u8]>),
}

/// One column of a row source built by [`Dialect::push_columns`]: every row's value, in
/// row order (all columns of one source have the same length).
#[derive(Debug, Clone)]
pub(crate) enum Column<'a> {
    I32(Vec<i32>),
    I64(Vec<i64>),
    /// BIGINT with NULLs (PostgreSQL: a `bigint[]` holding NULL elements).
    OptI64(Vec<Option<i64>>),
    Text(Vec<&'a str>),
}

impl<'a> Column<'a> {
    fn len(&self) -> usize {
        match self {
            Column::I32(v) => v.len(),
            Column::I64(v) => v.len(),
            Column::OptI64(v) => v.len(),
            Column::Text(v) => v.len(),
        }
    }

    /// Row `i`'s value as a bind value (SQLite's `VALUES` list). Panics if `i >= len`.
    fn val(&self, i: usize) -> Val<'a> {
        match self {
            Column::I32(v) => Val::I32(Some(v[i])),
            Column::I64(v) => Val::I64(Some(v[i])),
            Column::OptI64(v) => Val::I64(v[i]),
            Column::Text(v) => Val::Text(Some(v[i])),
        }
    }
}

/// What the shared SQL needs to know about one database.
pub(crate) trait Dialect: Database {
    /// `Store::backend()`'s name.
    const NAME: &'static str;
    /// Case-insensitive `LIKE`. SQLite's `LIKE` already ignores case (ASCII letters only);
    /// PostgreSQL needs `ILIKE` (all of Unicode), which a `pg_trgm` GIN index can serve.
    const ILIKE: &'static str;
    /// Most bind parameters one statement may carry (SQLite's `SQLITE_MAX_VARIABLE_NUMBER`
    /// since 3.32, PostgreSQL's protocol limit of an i16 count).
    const MAX_BINDS: usize;
    /// Prefix that turns a query into its plan, one row per plan line, text in the column
    /// [`Dialect::EXPLAIN_COLUMN`].
    const EXPLAIN: &'static str;
    const EXPLAIN_COLUMN: &'static str;
    /// One writer at a time for the whole database (SQLite): writers of this process queue at
    /// the store's write gate and begin with `BEGIN IMMEDIATE` (`gate.rs`, the only place that
    /// begins a write transaction). PostgreSQL: row locks, no gate.
    const ONE_WRITER: bool;

    /// An expression giving a fresh random UUID v4 (lowercase text) for every row it is
    /// evaluated on; used for outbox idempotency keys written by `INSERT ... SELECT`.
    const NEW_UUID: &'static str;
    /// Appended to a `SELECT` that picks rows to claim: PostgreSQL skips rows another
    /// transaction holds (so several relays share the work); SQLite has one writer at a time.
    const SKIP_LOCKED: &'static str;
    /// Appended to a `SELECT` that must see every row it names and re-check it once no other
    /// writer holds it (a purge): PostgreSQL waits for such a row's lock, then re-evaluates
    /// the `WHERE` on its committed version; SQLite has one writer at a time.
    const FOR_UPDATE: &'static str;
    /// `id` + `IDS_OF_OPEN` + a subquery selecting ids + `IDS_OF_CLOSE`: membership in the
    /// subquery's result, planned as primary-key lookups. (PostgreSQL's planner may otherwise
    /// hash-join a scan of the whole table against a small locking subquery.)
    const IDS_OF_OPEN: &'static str;
    const IDS_OF_CLOSE: &'static str;
    /// Whether a table in `FROM` may be followed by `INDEXED BY name` (SQLite), for the few
    /// reads whose planner choice is known wrong: SQLite plans `WHERE tier IS NULL ORDER BY
    /// id LIMIT n` as a rowid scan that passes every sorted row before the first unsorted
    /// one, not as the partial index over the unsorted ones (`tier_candidates.rs`). The
    /// same grammar's `NOT INDEXED` makes the relay's marks find their rows by rowid
    /// (`outbox_mark.rs`). PostgreSQL has no hints and picks the partial index itself.
    const INDEXED_BY: bool;
    /// Whether the database has `LATERAL` subqueries (PostgreSQL; SQLite has none): a
    /// statement can then make the planner probe an index once per row of a small list
    /// where its row estimates would pick a scan (`order.rs`, `hold_later`).
    const LATERAL: bool;

    /// Appends a placeholder for `v` and binds it.
    fn bind<'a>(qb: &mut QueryBuilder<'a, Self>, v: Val<'a>);

    /// A builder starting with `sql` whose arguments have room for `binds` values of about
    /// `bytes` bytes in all (PostgreSQL's encoded buffer; SQLite keeps only the values), so a
    /// large multi-row statement does not grow and copy its buffer value by value.
    fn builder_with_capacity<'a>(sql: String, binds: usize, bytes: usize)
        -> QueryBuilder<'a, Self>;

    /// Appends a parenthesised subquery yielding the ids of the JSON array `json` (e.g.
    /// `[3,1,2]`), for `id IN ...`: one bind parameter however many ids there are.
    fn push_json_ids<'a>(qb: &mut QueryBuilder<'a, Self>, json: String);

    /// Appends a parenthesised row source with columns `column1` (BIGINT), `column2`
    /// (INTEGER), `column3` (BIGINT) holding `rows`, for a bulk `UPDATE ... FROM`
    /// ([`Dialect::push_columns`]; on PostgreSQL the planner drives `unnest` with primary-key
    /// lookups, where a VALUES list of the same size can make it scan the whole table).
    fn push_triples<'a>(qb: &mut QueryBuilder<'a, Self>, rows: &[(i64, i32, i64)]) {
        Self::push_columns(
            qb,
            vec![
                Column::I64(rows.iter().map(|r| r.0).collect()),
                Column::I32(rows.iter().map(|r| r.1).collect()),
                Column::I64(rows.iter().map(|r| r.2).collect()),
            ],
        );
    }

    /// Appends a parenthesised row source (the caller names it: `... AS p`) with columns
    /// `column1`, `column2`, ... holding `columns` (at least one row). SQLite: a `VALUES` list
    /// (one bind a value, so the statement's text depends on the row count). PostgreSQL:
    /// `unnest` of one array parameter a column, so the text is the same for every row count
    /// and [`Dialect::ROW_SOURCE_IS_FIXED`] says the statement is worth keeping prepared.
    fn push_columns<'a>(qb: &mut QueryBuilder<'a, Self>, columns: Vec<Column<'a>>);

    /// Whether [`Dialect::push_columns`] writes the same statement text for any row count.
    const ROW_SOURCE_IS_FIXED: bool;
}

impl Dialect for Sqlite {
    const ONE_WRITER: bool = true;
    const INDEXED_BY: bool = true;
    const LATERAL: bool = false;
    const NAME: &'static str = "sqlite";
    const ILIKE: &'static str = "LIKE";
    const MAX_BINDS: usize = 32_766;
    // randomblob draws from SQLite's CSPRNG; the fixed `4` and the 8/9/a/b nibble make it a
    // well-formed version-4, variant-1 UUID (122 random bits).
    const NEW_UUID: &'static str = "lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) \
         || '-4' || substr(hex(randomblob(2)), 2) || '-' \
         || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2) \
         || '-' || hex(randomblob(6)))";
    const SKIP_LOCKED: &'static str = "";
    const FOR_UPDATE: &'static str = "";
    const IDS_OF_OPEN: &'static str = " IN (";
    const IDS_OF_CLOSE: &'static str = ")";
    const EXPLAIN: &'static str = "EXPLAIN QUERY PLAN ";
    const EXPLAIN_COLUMN: &'static str = "detail";

    fn builder_with_capacity<'a>(
        sql: String,
        binds: usize,
        bytes: usize,
    ) -> QueryBuilder<'a, Self> {
        let mut args = sqlx::sqlite::SqliteArguments::default();
        args.reserve(binds, bytes);
        QueryBuilder::with_arguments(sql, args)
    }

    fn bind<'a>(qb: &mut QueryBuilder<'a, Self>, v: Val<'a>) {
        match v {
            Val::I32(x) => qb.push_bind(x),
            Val::I64(x) => qb.push_bind(x),
            Val::Text(x) => qb.push_bind(x),
            Val::OwnedText(x) => qb.push_bind(x),
            Val::Bytes(x) => qb.push_bind(x),
        };
    }

    fn push_json_ids<'a>(qb: &mut QueryBuilder<'a, Self>, json: String) {
        qb.push("(SELECT value FROM json_each(");
        qb.push_bind(json);
        qb.push("))");
    }

    const ROW_SOURCE_IS_FIXED: bool = false;

    fn push_columns<'a>(qb: &mut QueryBuilder<'a, Self>, columns: Vec<Column<'a>>) {
        let rows = columns.first().map_or(0, Column::len);
        qb.push("(VALUES ");
        for i in 0..rows {
            qb.push(if i > 0 { ", (" } else { "(" });
            for (j, column) in columns.iter().enumerate() {
                if j > 0 {
                    qb.push(", ");
                }
                Self::bind(qb, column.val(i));
            }
            qb.push(")");
        }
        qb.push(")");
    }
}

impl Dialect for Postgres {
    const ONE_WRITER: bool = false;
    const INDEXED_BY: bool = false;
    const LATERAL: bool = true;
    const NAME: &'static str = "postgres";
    const ILIKE: &'static str = "ILIKE";
    const MAX_BINDS: usize = 65_535;
    // Built in since PostgreSQL 13.
    const NEW_UUID: &'static str = "gen_random_uuid()::text";
    const SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
    const FOR_UPDATE: &'static str = " FOR UPDATE";
    const IDS_OF_OPEN: &'static str = " = ANY(ARRAY(";
    const IDS_OF_CLOSE: &'static str = "))";
    const EXPLAIN: &'static str = "EXPLAIN ";
    const EXPLAIN_COLUMN: &'static str = "QUERY PLAN";

    fn builder_with_capacity<'a>(
        sql: String,
        binds: usize,
        bytes: usize,
    ) -> QueryBuilder<'a, Self> {
        let mut args = sqlx::postgres::PgArguments::default();
        args.reserve(binds, bytes);
        QueryBuilder::with_arguments(sql, args)
    }

    fn bind<'a>(qb: &mut QueryBuilder<'a, Self>, v: Val<'a>) {
        match v {
            Val::I32(x) => qb.push_bind(x),
            Val::I64(x) => qb.push_bind(x),
            Val::Text(x) => qb.push_bind(x),
            Val::OwnedText(x) => qb.push_bind(x),
            Val::Bytes(x) => qb.push_bind(x),
        };
    }

    fn push_json_ids<'a>(qb: &mut QueryBuilder<'a, Self>, json: String) {
        qb.push("(SELECT CAST(v AS BIGINT) FROM jsonb_array_elements_text(CAST(");
        qb.push_bind(json);
        qb.push(" AS jsonb)) AS t(v))");
    }

    const ROW_SOURCE_IS_FIXED: bool = true;

    fn push_columns<'a>(qb: &mut QueryBuilder<'a, Self>, columns: Vec<Column<'a>>) {
        let names: Vec<String> = (1..=columns.len()).map(|i| format!("column{i}")).collect();
        qb.push("(SELECT * FROM unnest(");
        for (j, column) in columns.into_iter().enumerate() {
            if j > 0 {
                qb.push(", ");
            }
            match column {
                Column::I32(v) => qb.push_bind(v).push("::integer[]"),
                Column::I64(v) => qb.push_bind(v).push("::bigint[]"),
                Column::OptI64(v) => qb.push_bind(v).push("::bigint[]"),
                Column::Text(v) => qb.push_bind(v).push("::text[]"),
            };
        }
        qb.push(format!(") AS u({}))", names.join(", ")));
    }
}

/// Maps a sqlx error to a [`StoreError`]: `Unavailable` for what is worth retrying (the
/// connection, the pool, a busy/locked SQLite file, a full disk, a PostgreSQL server shutting
/// down, refusing the session (any FATAL) or out of resources, a timeout, a serialization
/// failure), `Rejected` for data the database refuses (see [`is_rejected`]), `Corrupt` for a
/// stored value we cannot decode, `Database` for everything else (a bug or a schema problem:
/// retrying will not help).
pub(crate) fn store_error(e: sqlx::Error) -> StoreError {
    use sqlx::Error as E;
    match &e {
        E::Io(_)
        | E::Tls(_)
        | E::Protocol(_)
        | E::PoolTimedOut
        | E::PoolClosed
        | E::WorkerCrashed => StoreError::Unavailable(e.to_string()),
        E::Decode(_) | E::ColumnDecode { .. } | E::ColumnNotFound(_) | E::TypeNotFound { .. } => {
            StoreError::Corrupt(e.to_string())
        }
        // A value sqlx could not encode for the wire (e.g. over the protocol's size limits).
        E::Encode(_) => StoreError::Rejected(e.to_string()),
        E::Database(db) if is_transient(db.as_ref()) => StoreError::Unavailable(e.to_string()),
        E::Database(db) if is_rejected(db.as_ref()) => StoreError::Rejected(e.to_string()),
        _ => StoreError::Database(e.to_string()),
    }
}

/// SQLite's primary result code (the low byte of the extended code), if `db` is SQLite's.
fn sqlite_primary(db: &dyn sqlx::error::DatabaseError) -> Option<i32> {
    db.try_downcast_ref::<sqlx::sqlite::SqliteError>()?;
    db.code()
        .and_then(|c| c.parse::<i32>().ok())
        .map(|c| c & 0xff)
}

/// Whether `e` is SQLite's `SQLITE_BUSY` (5, extended codes included).
pub(crate) fn is_sqlite_busy(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if sqlite_primary(db.as_ref()) == Some(5))
}

fn is_transient(db: &dyn sqlx::error::DatabaseError) -> bool {
    if let Some(primary) = sqlite_primary(db) {
        // 5 BUSY, 6 LOCKED ("database is locked"), 10 IOERR, 13 FULL, 14 CANTOPEN: none of
        // them is about the data, and all may pass (another writer, a full disk freed).
        return matches!(primary, 5 | 6 | 10 | 13 | 14);
    }
    if let Some(e) = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
        // FATAL and PANIC end the session (or the server): whatever the code, the database
        // is not there for us, and the record is not at fault. This is how a database that
        // refuses connections answers (`ALTER DATABASE … ALLOW_CONNECTIONS false`: 55000
        // "not currently accepting connections"), as do a failed login (28P01) and a
        // dropped database (3D000) — an operator fixes those, and ingest waits for them.
        if matches!(
            e.severity(),
            sqlx::postgres::PgSeverity::Fatal | sqlx::postgres::PgSeverity::Panic
        ) {
            return true;
        }
        let code = e.code();
        // 08 connection exception, 53 insufficient resources (disk full, too many
        // connections), 57P01-57P05 shutdown / cannot connect now / idle timeouts,
        // 57014 statement timeout (query_canceled), 55P03 lock not available, 25P03 idle in
        // transaction timeout, 40001 serialization failure, 40P01 deadlock.
        return code.starts_with("08")
            || code.starts_with("53")
            || code.starts_with("57P")
            || code == "57014"
            || code == "55P03"
            || code == "25P03"
            || code == "40001"
            || code == "40P01";
    }
    false
}

/// The database refuses this data, and would refuse it again: it is about the record, not
/// the database's state.
///
/// - SQLite: 18 TOOBIG (string or blob over `SQLITE_MAX_LENGTH`), 19 CONSTRAINT (a CHECK,
///   NOT NULL, UNIQUE or trigger `RAISE(ABORT)`), 20 MISMATCH (datatype mismatch).
/// - PostgreSQL SQLSTATE classes 22 (data exception: invalid encoding `22021`, a character
///   the database encoding lacks `22P05`, a value out of range, a string too long), 23
///   (integrity constraint violation) and 54 (program limit exceeded: `54000` "index row size
///   exceeds btree maximum 2704", too many columns, statement too complex).
fn is_rejected(db: &dyn sqlx::error::DatabaseError) -> bool {
    if let Some(primary) = sqlite_primary(db) {
        return matches!(primary, 18..=20);
    }
    if let Some(e) = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
        let code = e.code();
        return code.starts_with("22") || code.starts_with("23") || code.starts_with("54");
    }
    false
}
