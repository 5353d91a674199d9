-- Actions on dead letters (issue 3), PostgreSQL: replay jobs, the transactional outbox the
-- relay publishes from, the append-only audit log, and each dead letter's own history.
-- Timestamps are epoch ms (BIGINT), as in 0001. Users, sessions and tokens come in 0003.

-- The status a dead letter goes back to when a delete is restored or a pending replay is
-- cancelled (`new`, `replayed`, `replay_failed`); NULL when there is nothing to go back to.
ALTER TABLE dead_letters ADD COLUMN status_before TEXT;

-- One row per bulk replay action. `total` counts the outbox rows created; the counters add up
-- to it once the job is done: total = published + failed + cancelled.
CREATE TABLE replay_jobs (
    id                     TEXT    PRIMARY KEY,            -- UUID v4
    status                 TEXT    NOT NULL,               -- running | waiting | finished | cancelled
    created_by             TEXT    NOT NULL,
    created_at_ms          BIGINT  NOT NULL,
    started_at_ms          BIGINT,                         -- first claim by the relay
    finished_at_ms         BIGINT,
    target_topic           TEXT,                           -- NULL = each record's source topic
    rate_per_sec           INTEGER,                        -- msgs/s; NULL = unthrottled
    reason                 TEXT,
    total                  BIGINT  NOT NULL DEFAULT 0,
    skipped                BIGINT  NOT NULL DEFAULT 0,     -- selected but not queued (any reason)
    skipped_without_target BIGINT  NOT NULL DEFAULT 0,     -- ... of which had no target topic
    published              BIGINT  NOT NULL DEFAULT 0,
    failed                 BIGINT  NOT NULL DEFAULT 0,
    cancelled              BIGINT  NOT NULL DEFAULT 0,
    last_error             TEXT,
    selection              TEXT    NOT NULL                -- JSON {"ids":[..]} or {"filter":{..}}
);
CREATE INDEX replay_jobs_by_created ON replay_jobs (created_at_ms DESC, id DESC);
CREATE INDEX replay_jobs_by_status  ON replay_jobs (status);

-- The transactional outbox: one row per dead letter to publish. Written in the same
-- transaction as the replay request; the relay claims (FOR UPDATE SKIP LOCKED, so several
-- relays can share the work), publishes and marks it.
CREATE TABLE outbox (
    id                  BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id              TEXT    NOT NULL REFERENCES replay_jobs (id),
    dead_letter_id      BIGINT  NOT NULL REFERENCES dead_letters (id),
    idempotency_key     TEXT    NOT NULL UNIQUE,           -- UUID v4, sent as redrive-idempotency-key
    target_topic        TEXT    NOT NULL,
    status              TEXT    NOT NULL DEFAULT 'pending', -- pending | claimed | published | failed | cancelled
    attempts            INTEGER NOT NULL DEFAULT 0,        -- failed publish attempts so far
    next_attempt_at_ms  BIGINT  NOT NULL,
    lease_until_ms      BIGINT,                            -- while claimed: reclaimable after this
    claim_token         TEXT,                              -- the claim holding the row (UUID)
    published_partition INTEGER,
    published_offset    BIGINT,
    published_at_ms     BIGINT,
    last_error          TEXT,
    created_at_ms       BIGINT  NOT NULL
);
CREATE INDEX outbox_due            ON outbox (status, next_attempt_at_ms);
CREATE INDEX outbox_by_job         ON outbox (job_id, status, id);
CREATE INDEX outbox_by_dead_letter ON outbox (dead_letter_id);

-- Append-only: who did what, when, to what, why, from where, and what came of it.
CREATE TABLE audit_log (
    id         BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at_ms      BIGINT  NOT NULL,
    actor      TEXT    NOT NULL,
    action     TEXT    NOT NULL,
    count      BIGINT  NOT NULL DEFAULT 0,
    ids        TEXT,                                       -- JSON array, when given as ids
    filter     TEXT,                                       -- JSON object, when given as a filter
    reason     TEXT,
    client_ip  TEXT,
    user_agent TEXT,
    outcome    TEXT    NOT NULL,
    job_id     TEXT,
    via_token  BIGINT                                      -- API token id, when acting by token
);
CREATE INDEX audit_log_by_at     ON audit_log (at_ms, id);
CREATE INDEX audit_log_by_actor  ON audit_log (actor, id);
CREATE INDEX audit_log_by_action ON audit_log (action, id);

-- Append-only for real: UPDATE, DELETE and TRUNCATE raise. (A superuser can still drop the
-- trigger; this guards against mistakes and ordinary credentials, not against the DBA.)
CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only: % is not allowed', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER audit_log_no_change BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();

-- Each dead letter's history after ingest (ingest itself is derived from ingested_at_ms).
CREATE TABLE dead_letter_events (
    id             BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dead_letter_id BIGINT  NOT NULL REFERENCES dead_letters (id),
    at_ms          BIGINT  NOT NULL,
    kind           TEXT    NOT NULL, -- replay_requested | published | replay_failed | replay_cancelled | deleted | restored
    actor          TEXT,
    detail         TEXT,
    job_id         TEXT
);
CREATE INDEX dead_letter_events_by_dead_letter ON dead_letter_events (dead_letter_id, id);
