-- Edit and replay (issue 9, item 5), PostgreSQL: an edited record is a NEW VERSION of its dead
-- letter; the original key, value and headers in dead_letters are never changed (version 0 is
-- the original). A replay publishes the latest version (`outbox.version_id` pins the version
-- the replay read, in the replay's own transaction). `docs/replay.md`, "Edit and replay".
CREATE TABLE dead_letter_versions (
    id             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dead_letter_id BIGINT  NOT NULL REFERENCES dead_letters (id),
    version        INTEGER NOT NULL,          -- 1, 2, ... (0 is the original in dead_letters)
    key            BYTEA,                     -- NULL = null key
    value          BYTEA,                     -- NULL = tombstone
    headers        TEXT    NOT NULL,          -- as dead_letters.headers: JSON, values base64
    value_bytes    BIGINT  NOT NULL,          -- length of value (0 for a tombstone)
    value_sha256   TEXT,                      -- hex SHA-256 of value; NULL for a tombstone
    created_at_ms  BIGINT  NOT NULL,
    created_by     TEXT    NOT NULL,
    reason         TEXT,
    diff           TEXT    NOT NULL,          -- JSON: bounded diff summary against version - 1
    UNIQUE (dead_letter_id, version)
);

-- The latest version of each dead letter (0 = never edited). Written in the edit's
-- transaction; the UPDATE also serialises an edit against a replay of the same dead letter.
ALTER TABLE dead_letters ADD COLUMN edit_version INTEGER NOT NULL DEFAULT 0;

-- The version a replay's outbox row publishes; NULL = the original (version 0).
ALTER TABLE outbox ADD COLUMN version_id BIGINT REFERENCES dead_letter_versions (id);
-- Deleting a version (retention purges a dead letter's versions after its outbox rows) checks
-- this reference: without the index PostgreSQL would scan the whole outbox per version.
CREATE INDEX outbox_by_version ON outbox (version_id) WHERE version_id IS NOT NULL;
