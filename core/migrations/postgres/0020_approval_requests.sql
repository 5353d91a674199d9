-- Four-eyes approval (issue 10, item 4; docs/replay.md, "Four-eyes approval and required
-- reasons"), PostgreSQL. A replay, delete or restore that needs approval is stored here whole,
-- and nothing else is written until another user approves it (then the action runs and its
-- claim of this row commits with the action's first transaction) or declines it.
CREATE TABLE approval_requests (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind            TEXT    NOT NULL,            -- replay | delete | restore
    selection       TEXT    NOT NULL,            -- JSON of Selection: {"ids": [...]} or {"filter": {...}}
    max_id          BIGINT,                     -- filter: acts on dead letters with id <= this
    target_topic    TEXT,
    rate_per_sec    INTEGER,
    options         TEXT    NOT NULL DEFAULT '{}', -- JSON of ReplayOptions
    reason          TEXT,
    requested_by    TEXT    NOT NULL,            -- user name (for lists)
    actor_json      TEXT    NOT NULL,            -- the whole Actor, for the action's audit row
    record_count    BIGINT  NOT NULL,            -- dead letters it would change, at request time
    per_topic       TEXT    NOT NULL,            -- JSON [[dlq_topic, n], ...] at request time
    why             TEXT    NOT NULL,            -- why it needs approval
    created_at_ms   BIGINT  NOT NULL,
    expires_at_ms   BIGINT  NOT NULL,
    status          TEXT    NOT NULL,            -- pending | approved | declined | expired | cancelled
    decided_by      TEXT,
    decided_at_ms   BIGINT ,
    decision_reason TEXT,
    job_id          TEXT                         -- an approved replay's job
);
CREATE INDEX approval_requests_by_status ON approval_requests (status, id);
