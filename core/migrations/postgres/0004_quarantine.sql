-- Quarantine (issue 7): records the store refused even in reduced form. Ingest moves past
-- them (their offsets are committed) only once they are here, with their coordinates and the
-- error, so nothing is silently lost; `redrive quarantine retry` stores them again after an
-- upgrade and deletes the row on success. See docs/limits.md.
CREATE TABLE quarantine (
    id                  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dlq_topic           TEXT    NOT NULL,
    dlq_partition       INTEGER NOT NULL,
    dlq_offset          BIGINT  NOT NULL,
    record_timestamp_ms BIGINT,
    quarantined_at_ms   BIGINT  NOT NULL,
    error               TEXT    NOT NULL, -- why the store refused it (printable ASCII)
    record_bytes        BIGINT  NOT NULL, -- key + value + header names and values, bytes
    record              BYTEA,            -- the raw record (ASCII JSON, base64 bytes); NULL = not kept
    attempts            INTEGER NOT NULL DEFAULT 1,
    last_attempt_at_ms  BIGINT  NOT NULL,
    CONSTRAINT quarantine_dlq_position UNIQUE (dlq_topic, dlq_partition, dlq_offset)
);
CREATE INDEX quarantine_by_time ON quarantine (quarantined_at_ms DESC, id DESC);
