-- A replay job's counters as the relay's marks add them (issue 12 item 5; docs/replay.md,
-- "Job counters"). A mark used to add its counts to the job's row, and so took the row's lock
-- first and held it to its commit: two marks of one job never overlapped, and the relay's rate
-- on PostgreSQL was one mark per 1,000 rows (about 6,000 msgs/s). Now each mark inserts one
-- row here; a job's counter is its `replay_jobs` column plus the sum of its rows here, and the
-- rows are folded into the job's row (deleted, their sums added, in one statement) when the job
-- finishes. Nothing is lost by the fold: what a row said is in the job's row.
-- On SQLite marks are one writer's transactions anyway; the table keeps one way of counting
-- for both stores.
CREATE TABLE replay_job_tallies (
    id                  INTEGER PRIMARY KEY,
    job_id              TEXT    NOT NULL REFERENCES replay_jobs (id),
    published           BIGINT  NOT NULL DEFAULT 0,
    failed              BIGINT  NOT NULL DEFAULT 0,
    -- Negative: records of a cancelled job whose publish was in flight, counted published.
    cancelled           BIGINT  NOT NULL DEFAULT 0,
    transformed         BIGINT  NOT NULL DEFAULT 0,
    skipped_by_script   BIGINT  NOT NULL DEFAULT 0,
    failed_by_script    BIGINT  NOT NULL DEFAULT 0
);
CREATE INDEX replay_job_tallies_by_job ON replay_job_tallies (job_id);
