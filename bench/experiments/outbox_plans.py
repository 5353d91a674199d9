#!/usr/bin/env python3
"""The plans of the outbox's statements before and after a migration (issue 12 item 5).

Builds a scratch store per database from the migration files (`core/migrations/<db>/*.sql`
before `CANDIDATE`, 0034 unless set, then the candidate on top), fills its outbox as a store that has replayed for a while
looks (`OLD_JOBS` finished jobs of `OLD_ROWS` published rows each, then one new job of
`NEW_ROWS` pending rows with 1 % claimed and 1 % held, written after the statistics were
taken, as a new job is), and prints each statement's plan and its time (median of 5) with
the indexes before the candidate and after it. Edit the candidate to try another set of
indexes: the drafts that dropped `outbox_due` were tried this way (docs/bench.md,
"2026-12-06 (7)"). From 0034 on, SQLite's marks say `NOT INDEXED` (`outbox_mark.rs`), so
the candidate's marks are written so and the base's are not.

The statements mirror what the server sends (`core/src/store/outbox.rs` `claim` and
`jobs_with_expired_claims`, `outbox_mark.rs` `finish_if_done` and the marks,
`job_control.rs` cancel, `order.rs` `any_held`, `hold_later`, `release_next`, `canary.rs`,
`lag.rs`, `rounds.rs` `refail_tally`), with literals in place of binds. A plan that scans the outbox
(SQLite `SCAN outbox`, PostgreSQL `Seq Scan on outbox`) is flagged.

- SQLite: `pysqlite3` (PyPI's `pysqlite3-binary`, a recent SQLite) when installed, else
  Python's stdlib `sqlite3`; the version is printed, and plans differ between versions (the
  binary bundles its own, `libsqlite3-sys`). No ANALYZE, as the server runs none; with
  `ANALYZE_EMPTY=1`, one of the empty store first (the bench's bulk load ends with ANALYZE).
- PostgreSQL: through `psql`, when `PG_URL` names a server where databases may be created;
  `ANALYZE` after the old jobs, none after the new one (autovacuum off on the scratch tables),
  then a third run with the candidate once `ANALYZE outbox` has seen the new job.

Usage: `PG_URL=postgres://postgres@127.0.0.1:55433/postgres python3 outbox_plans.py`.
Figures and conclusions: `docs/bench.md`, "2026-12-06 (7)" (0033), "2026-12-06 (8)" (0034)
and "2026-12-06 (9)" (the automation tally from the jobs' counters).
"""
import glob
import os
import re
try:  # a recent SQLite (PyPI's `pysqlite3-binary`): the stdlib's can plan differently
    import pysqlite3 as sqlite3
except ImportError:
    import sqlite3
import statistics
import subprocess
import tempfile
import time

OLD_JOBS = int(os.environ.get("OLD_JOBS", "20"))
OLD_ROWS = int(os.environ.get("OLD_ROWS", "20000"))
NEW_ROWS = int(os.environ.get("NEW_ROWS", "50000"))
CANDIDATE = int(os.environ.get("CANDIDATE", "34"))
HERE = os.path.dirname(os.path.abspath(__file__))
MIGRATIONS = os.path.join(HERE, "..", "..", "core", "migrations")
NOW = 1_800_000_000_000
NEW = "job-new"
# The automation tally's `now - replay_outcome_window_ms` (1 h, the default).
JUDGED_BEFORE = NOW - 3_600_000
# SQLite: ANALYZE the empty store first, as the bench's bulk-loaded store is (its statistics
# then say the outbox is empty, and the planner takes a small partial index readily).
ANALYZE_EMPTY = os.environ.get("ANALYZE_EMPTY") == "1"


def migration_files(db):
    files = sorted(glob.glob(os.path.join(MIGRATIONS, db, "*.sql")))
    before = [f for f in files if int(os.path.basename(f)[:4]) < CANDIDATE]
    diet = [f for f in files if int(os.path.basename(f)[:4]) == CANDIDATE]
    return before, diet


def claimed_values(db):
    """The (id, partition, offset) rows of a mark: the new job's claimed rows, 500."""
    ids = [OLD_JOBS * OLD_ROWS + 100 * i for i in range(1, NEW_ROWS // 100 + 1)][:500]
    if db == "postgres":
        return ("(SELECT * FROM unnest(ARRAY[" + ",".join(map(str, ids)) + "]::bigint[], ARRAY[" +
                ",".join("0" for _ in ids) + "]::int[], ARRAY[" + ",".join(map(str, ids)) +
                "]::bigint[]) AS t(column1, column2, column3))")
    return "(VALUES " + ", ".join(f"({i}, 0, {i})" for i in ids) + ")"


def statements(db, candidate):
    """(name, SQL) of every statement that reads the outbox by job or by status."""
    # The marks' hint (`outbox_mark.rs`), from 0034 on.
    mark = "UPDATE outbox NOT INDEXED SET" if db == "sqlite" and candidate and CANDIDATE >= 34 \
        else "UPDATE outbox SET"
    lock = " FOR UPDATE SKIP LOCKED" if db == "postgres" else ""
    ids_open, ids_close = (" = ANY(ARRAY(", "))") if db == "postgres" else (" IN (", ")")
    running = ("AND EXISTS (SELECT 1 FROM replay_jobs j WHERE j.id = outbox.job_id "
               "AND j.status IN ('running', 'waiting'))")
    claim = ("UPDATE outbox SET status = 'claimed', lease_until_ms = {lease}, claim_token = 't' "
             "WHERE id" + ids_open + "SELECT id FROM outbox WHERE job_id = '" + NEW + "' "
             "AND status = '{st}' AND {col} {op} {now} AND held = 0 {after}" + running +
             " ORDER BY id LIMIT 1000" + lock + ids_close + " RETURNING id")
    groups = "(VALUES (11), (12), (13))" if db == "postgres" else "(11, 12, 13)"
    if db == "postgres":
        hold = ("UPDATE outbox SET held = 1 WHERE id IN (SELECT o.id FROM " + groups +
                " AS g(column1) CROSS JOIN LATERAL (SELECT l.id FROM outbox l WHERE l.job_id = '"
                + NEW + "' AND l.order_key = g.column1 AND l.held = 0 AND l.status = 'pending' "
                "ORDER BY l.order_pos, l.id OFFSET 1) AS o)")
    else:
        hold = ("UPDATE outbox SET held = 1 WHERE job_id = '" + NEW + "' AND status = 'pending' "
                "AND held = 0 AND order_key IN " + groups + " AND EXISTS (SELECT 1 FROM outbox e "
                "WHERE e.job_id = outbox.job_id AND e.order_key = outbox.order_key AND e.held = 0 "
                "AND e.status = 'pending' AND (e.order_pos, e.id) < (outbox.order_pos, outbox.id))")
    return [
        ("claim: pending pass", claim.format(lease=NOW + 30000, st="pending",
                                             col="next_attempt_at_ms", op="<=", now=NOW,
                                             after="AND id > 0 ")),
        ("claim: expired leases", claim.format(lease=NOW + 30000, st="claimed",
                                               col="lease_until_ms", op="<", now=NOW + 10**9,
                                               after="")),
        ("jobs_with_expired_claims",
         "SELECT id FROM replay_jobs WHERE id IN (SELECT job_id FROM outbox "
         f"WHERE status = 'claimed' AND lease_until_ms < {NOW}) ORDER BY created_at_ms, id"),
        ("finish_if_done",
         "UPDATE replay_jobs SET status = 'finished' WHERE id = '" + NEW + "' AND status IN "
         "('running', 'waiting') AND NOT EXISTS (SELECT 1 FROM outbox WHERE outbox.job_id = "
         "replay_jobs.id AND outbox.status IN ('pending', 'claimed'))"),
        ("finish_if_done: all published (job-old-1)",
         "UPDATE replay_jobs SET status = 'finished' WHERE id = 'job-old-1' AND status IN "
         "('running', 'waiting') AND NOT EXISTS (SELECT 1 FROM outbox WHERE outbox.job_id = "
         "replay_jobs.id AND outbox.status IN ('pending', 'claimed'))"),
        ("cancel", "UPDATE outbox SET status = 'cancelled', lease_until_ms = NULL WHERE job_id = '"
         + NEW + "' AND status IN ('pending', 'claimed') RETURNING dead_letter_id"),
        ("any_held", "SELECT 1 FROM outbox WHERE job_id = '" + NEW +
         "' AND status = 'pending' AND held = 1 LIMIT 1"),
        ("pending_outside_canary", "SELECT id FROM outbox WHERE job_id = '" + NEW +
         "' AND status = 'pending' AND canary = 0 LIMIT 1"),
        ("hold_later", hold),
        ("release_next",
         "UPDATE outbox SET held = 0 WHERE id IN (SELECT (SELECT n.id FROM outbox n "
         "WHERE n.job_id = p.job_id AND n.order_key = p.order_key AND n.held = 1 "
         "AND n.status = 'pending' ORDER BY n.order_pos, n.id LIMIT 1) "
         "FROM outbox p WHERE p.order_key IS NOT NULL AND p.id IN (SELECT id FROM outbox WHERE "
         "job_id = '" + NEW + "' ORDER BY id LIMIT 500))"),
        ("mark published (500 rows)",
         mark + " status = 'published', published_partition = v.column2, "
         "published_offset = v.column3, published_at_ms = 1, lease_until_ms = NULL, "
         "last_error = NULL FROM " + claimed_values(db) + " AS v WHERE outbox.id = v.column1 "
         "AND outbox.claim_token = 't' AND outbox.status = 'claimed' RETURNING id, dead_letter_id"),
        ("mark retry / failed (held rows of a claim)",
         mark + " status = 'pending', attempts = attempts + 1 WHERE id IN (" +
         ", ".join(str(OLD_JOBS * OLD_ROWS + 100 * i) for i in range(1, 51)) +
         ") AND claim_token = 't' AND status = 'claimed'"),
        ("lag: job_target_topics", "SELECT DISTINCT target_topic FROM outbox WHERE job_id = '" +
         NEW + "' ORDER BY target_topic LIMIT 33"),
        ("rounds: refail_tally, every published row (before 2026-12-06 (9))",
         "SELECT COUNT(*), SUM(CASE WHEN o.refailed_by_id IS NOT NULL THEN 1 ELSE 0 END) "
         "FROM replay_jobs j CROSS JOIN outbox o WHERE o.job_id = j.id AND j.created_by = 'rule:r' "
         "AND o.status = 'published'"),
        # `rounds.rs` since 2026-12-06 (9): the jobs' counters, then the rows of the jobs that
        # finished within the outcome window (1 h) or still run.
        ("rounds: refail_tally, the jobs' counters",
         "SELECT CAST(SUM(CASE WHEN created_at_ms > 0 THEN (replay_jobs.published + (SELECT "
         "CAST(COALESCE(SUM(t.published), 0) AS BIGINT) FROM replay_job_tallies t WHERE t.job_id "
         "= replay_jobs.id)) ELSE 0 END) AS BIGINT), CAST(SUM(refailed) AS BIGINT) "
         "FROM replay_jobs WHERE created_by = 'rule:r'"),
        ("rounds: refail_tally, rows of the jobs within the window",
         f"SELECT CAST(SUM(CASE WHEN o.refailed_by_id IS NOT NULL OR o.published_at_ms <= {JUDGED_BEFORE} "
         "THEN 1 ELSE 0 END) AS BIGINT) FROM replay_jobs j CROSS JOIN outbox o WHERE o.job_id = j.id "
         f"AND j.created_by = 'rule:r' AND j.created_at_ms > 0 AND (j.finished_at_ms IS NULL OR "
         f"j.finished_at_ms > {JUDGED_BEFORE}) AND o.status = 'published'"),
    ]


FILL = [
    # replay_jobs: the old jobs finished (the first one still running, with everything published), a quarter of them by rule `r`, a day or more ago; the new one running.
    "INSERT INTO replay_jobs (id, created_by, created_at_ms, finished_at_ms, status, total, published, failed, selection) "
    "SELECT 'job-old-' || g, CASE WHEN g % 4 = 0 THEN 'rule:r' ELSE 'alice' END, {now} - 100000000 + g * 1000, "
    "CASE WHEN g = 1 THEN NULL ELSE {now} - 100000000 + g * 1000 + 500 END, "
    "CASE WHEN g = 1 THEN 'running' ELSE 'finished' END, {old_rows}, {old_rows}, 0, '{{}}' "
    "FROM {series_jobs}",
    # the old jobs' rows, all published.
    "INSERT INTO outbox (job_id, dead_letter_id, idempotency_key, target_topic, status, "
    "attempts, next_attempt_at_ms, created_at_ms, published_partition, published_offset, "
    "published_at_ms, order_key, order_pos) "
    "SELECT 'job-old-' || (1 + (g - 1) / {old_rows}), g, 'k-' || g, 'orders', 'published', 0, "
    "{now}, {now}, g % 6, g, {now}, g % 100003, g FROM {series_old}",
]
FILL_NEW = [
    "INSERT INTO replay_jobs (id, created_by, created_at_ms, status, total, published, failed, selection) "
    "VALUES ('" + NEW + "', 'alice', {now}, 'running', {new_rows}, 0, 0, '{{}}')",
    "INSERT INTO outbox (job_id, dead_letter_id, idempotency_key, target_topic, status, "
    "attempts, next_attempt_at_ms, created_at_ms, lease_until_ms, held, claim_token, order_key, "
    "order_pos) "
    "SELECT '" + NEW + "', g, 'n-' || g, 'orders', "
    "CASE WHEN g % 100 = 0 THEN 'claimed' ELSE 'pending' END, 0, {now}, {now}, "
    "CASE WHEN g % 100 = 0 THEN {now} + 30000 END, CASE WHEN g % 100 = 1 THEN 1 ELSE 0 END, "
    "CASE WHEN g % 100 = 0 THEN 't' END, "
    "g % 100003, g FROM {series_new}",
]


def series(db, n, start=1):
    if db == "postgres":
        return f"generate_series({start}, {start + n - 1}) AS t(g)"
    return (f"(WITH RECURSIVE s(g) AS (SELECT {start} UNION ALL SELECT g + 1 FROM s "
            f"WHERE g < {start + n - 1}) SELECT g FROM s)")


def fill_sql(db):
    args = dict(now=NOW, old_rows=OLD_ROWS, new_rows=NEW_ROWS,
                series_jobs=series(db, OLD_JOBS), series_old=series(db, OLD_JOBS * OLD_ROWS),
                series_new=series(db, NEW_ROWS, OLD_JOBS * OLD_ROWS + 1))
    return [s.format(**args) for s in FILL], [s.format(**args) for s in FILL_NEW]


def flag(plan):
    scan = re.search(r"^SCAN (outbox|o|p|l|n|e)\b|Seq Scan on outbox", plan, re.M)
    return "  <-- scans the outbox" if scan else ""


def sqlite_run():
    before, diet = migration_files("sqlite")
    path = os.path.join(tempfile.mkdtemp(), "plans.db")
    con = sqlite3.connect(path, isolation_level=None)
    for f in before:
        con.executescript(open(f).read())
    if ANALYZE_EMPTY:
        con.execute("ANALYZE")
    old, new = fill_sql("sqlite")
    con.execute("BEGIN")
    for s in old + new:
        con.execute(s)
    con.execute("COMMIT")
    out = {}
    for label, extra in (("before", []), (f"{CANDIDATE:04d}", diet)):
        for f in extra:
            con.executescript(open(f).read())
        for name, sql in statements("sqlite", bool(extra)):
            plan = "\n".join(r[3] for r in con.execute("EXPLAIN QUERY PLAN " + sql))
            times = []
            for _ in range(5):
                con.execute("BEGIN")
                t = time.perf_counter()
                con.execute(sql).fetchall()
                times.append((time.perf_counter() - t) * 1000)
                con.execute("ROLLBACK")
            out.setdefault(name, {})[label] = (plan, statistics.median(times))
    return out


def psql(url, sql, db=None):
    if db:
        url = url.rsplit("/", 1)[0] + "/" + db
    r = subprocess.run(["psql", url, "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql],
                       capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"psql: {r.stderr}\n{sql[:300]}")
    return r.stdout


def postgres_run(url):
    before, diet = migration_files("postgres")
    db = "outbox_plans"
    psql(url, f"DROP DATABASE IF EXISTS {db}")
    psql(url, f"CREATE DATABASE {db}")
    for f in before:
        psql(url, open(f).read(), db)
    psql(url, "ALTER TABLE outbox SET (autovacuum_enabled = off); "
              "ALTER TABLE replay_jobs SET (autovacuum_enabled = off)", db)
    old, new = fill_sql("postgres")
    # No foreign keys to fill: the rows reference dead letters and versions never written.
    psql(url, "SET session_replication_role = replica; " + "; ".join(old), db)
    psql(url, "ANALYZE", db)
    psql(url, "SET session_replication_role = replica; " + "; ".join(new), db)
    out = {}
    # The third column: the candidate's indexes once `ANALYZE` has seen the new job's rows
    # (autovacuum's work, a minute or more after a job is queued).
    for label, extra in (("before", []), (f"{CANDIDATE:04d}", diet),
                         (f"{CANDIDATE:04d}, analyzed", None)):
        if extra is None:
            psql(url, "ANALYZE outbox", db)
            extra = []
        for f in extra:
            psql(url, open(f).read(), db)
        for name, sql in statements("postgres", label != "before"):
            plan = psql(url, "EXPLAIN " + sql, db).strip()
            times = []
            for _ in range(5):
                r = psql(url, "BEGIN; EXPLAIN (ANALYZE, TIMING OFF, SUMMARY ON) " + sql +
                         "; ROLLBACK", db)
                m = re.search(r"Execution Time: ([0-9.]+) ms", r)
                times.append(float(m.group(1)))
            out.setdefault(name, {})[label] = (plan, statistics.median(times))
    psql(url, f"DROP DATABASE {db}")
    return out


def report(db, out):
    print(f"\n## {db}: {OLD_JOBS} old jobs x {OLD_ROWS} published rows, a new job of {NEW_ROWS}")
    for name, by in out.items():
        print(f"\n### {name}")
        for label, (plan, ms) in by.items():
            print(f"- {label}: {ms:.2f} ms{flag(plan)}")
            for line in plan.splitlines():
                print(f"    {line}")


if __name__ == "__main__":
    report(f"SQLite {sqlite3.sqlite_version}", sqlite_run())
    if os.environ.get("PG_URL"):
        report("PostgreSQL", postgres_run(os.environ["PG_URL"]))
