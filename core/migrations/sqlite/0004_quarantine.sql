-- Quarantine (issue 7): records the store refused even in reduced form. Ingest moves past
-- them (their offsets are committed) only once they are here, with their coordinates and the
-- error, so nothing is silently lost; `redrive quarantine retry` stores them again after an
-- upgrade and deletes the row on success. See docs/limits.md.
CREATE TABLE quarantine (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    dlq_topic           TEXT    NOT NULL,
    dlq_partition       INTEGER NOT NULL,
    dlq_offset          INTEGER NOT NULL,
    record_timestamp_ms INTEGER,
    quarantined_at_ms   INTEGER NOT NULL,
    error               TEXT    NOT NULL, -- why the store refused it (printable ASCII)
    record_bytes        INTEGER NOT NULL, -- key + value + header names and values, bytes
    attempts            INTEGER NOT NULL DEFAULT 1,
    last_attempt_at_ms  INTEGER NOT NULL,
    record              BLOB,             -- the raw record (ASCII JSON, base64 bytes); NULL = not kept
    UNIQUE (dlq_topic, dlq_partition, dlq_offset)
);
CREATE INDEX quarantine_by_time ON quarantine (quarantined_at_ms DESC, id DESC);
