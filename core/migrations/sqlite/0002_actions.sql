-- Actions on dead letters (issue 3), SQLite: replay jobs, the transactional outbox the relay
-- publishes from, the append-only audit log, and each dead letter's own history.
-- Timestamps are epoch ms, as in 0001. Users, sessions and tokens come in 0003.

-- The status a dead letter goes back to when a delete is restored or a pending replay is
-- cancelled (`new`, `replayed`, `replay_failed`); NULL when there is nothing to go back to.
ALTER TABLE dead_letters ADD COLUMN status_before TEXT;

-- One row per bulk replay action. `total` counts the outbox rows created; the counters add up
-- to it once the job is done: total = published + failed + cancelled.
CREATE TABLE replay_jobs (
    id                     TEXT    PRIMARY KEY,            -- UUID v4
    status                 TEXT    NOT NULL,               -- running | waiting | finished | cancelled
    created_by             TEXT    NOT NULL,
    created_at_ms          INTEGER NOT NULL,
    started_at_ms          INTEGER,                        -- first claim by the relay
    finished_at_ms         INTEGER,
    target_topic           TEXT,                           -- NULL = each record's source topic
    rate_per_sec           INTEGER,                        -- msgs/s; NULL = unthrottled
    reason                 TEXT,
    total                  INTEGER NOT NULL DEFAULT 0,
    skipped                INTEGER NOT NULL DEFAULT 0,     -- selected but not queued (any reason)
    skipped_without_target INTEGER NOT NULL DEFAULT 0,     -- ... of which had no target topic
    published              INTEGER NOT NULL DEFAULT 0,
    failed                 INTEGER NOT NULL DEFAULT 0,
    cancelled              INTEGER NOT NULL DEFAULT 0,
    last_error             TEXT,
    selection              TEXT    NOT NULL                -- JSON {"ids":[..]} or {"filter":{..}}
);
CREATE INDEX replay_jobs_by_created ON replay_jobs (created_at_ms DESC, id DESC);
CREATE INDEX replay_jobs_by_status  ON replay_jobs (status);

-- The transactional outbox: one row per dead letter to publish. Written in the same
-- transaction as the replay request; the relay claims, publishes and marks it.
CREATE TABLE outbox (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id              TEXT    NOT NULL REFERENCES replay_jobs (id),
    dead_letter_id      INTEGER NOT NULL REFERENCES dead_letters (id),
    idempotency_key     TEXT    NOT NULL UNIQUE,           -- UUID v4, sent as redrive-idempotency-key
    target_topic        TEXT    NOT NULL,
    status              TEXT    NOT NULL DEFAULT 'pending', -- pending | claimed | published | failed | cancelled
    attempts            INTEGER NOT NULL DEFAULT 0,        -- failed publish attempts so far
    next_attempt_at_ms  INTEGER NOT NULL,
    lease_until_ms      INTEGER,                           -- while claimed: reclaimable after this
    claim_token         TEXT,                              -- the claim holding the row (UUID)
    published_partition INTEGER,
    published_offset    INTEGER,
    published_at_ms     INTEGER,
    last_error          TEXT,
    created_at_ms       INTEGER NOT NULL
);
CREATE INDEX outbox_due            ON outbox (status, next_attempt_at_ms);
CREATE INDEX outbox_by_job         ON outbox (job_id, status, id);
CREATE INDEX outbox_by_dead_letter ON outbox (dead_letter_id);

-- Append-only: who did what, when, to what, why, from where, and what came of it.
CREATE TABLE audit_log (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms      INTEGER NOT NULL,
    actor      TEXT    NOT NULL,
    action     TEXT    NOT NULL,
    count      INTEGER NOT NULL DEFAULT 0,
    ids        TEXT,                                       -- JSON array, when given as ids
    filter     TEXT,                                       -- JSON object, when given as a filter
    reason     TEXT,
    client_ip  TEXT,
    user_agent TEXT,
    outcome    TEXT    NOT NULL,
    job_id     TEXT,
    via_token  INTEGER                                     -- API token id, when acting by token
);
CREATE INDEX audit_log_by_at     ON audit_log (at_ms, id);
CREATE INDEX audit_log_by_actor  ON audit_log (actor, id);
CREATE INDEX audit_log_by_action ON audit_log (action, id);

CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only: UPDATE is not allowed');
END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only: DELETE is not allowed');
END;

-- Each dead letter's history after ingest (ingest itself is derived from ingested_at_ms).
CREATE TABLE dead_letter_events (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    dead_letter_id INTEGER NOT NULL REFERENCES dead_letters (id),
    at_ms          INTEGER NOT NULL,
    kind           TEXT    NOT NULL, -- replay_requested | published | replay_failed | replay_cancelled | deleted | restored
    actor          TEXT,
    detail         TEXT,
    job_id         TEXT
);
CREATE INDEX dead_letter_events_by_dead_letter ON dead_letter_events (dead_letter_id, id);
