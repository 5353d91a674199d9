-- Dead letters, PostgreSQL. Timestamps are epoch ms (BIGINT) as in SQLite, so keyset
-- pagination compares the same values on both. Later features (audit, outbox, users) come
-- as further numbered migrations.
CREATE TABLE dead_letters (
    id                  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dlq_topic           TEXT    NOT NULL,
    dlq_partition       INTEGER NOT NULL,
    dlq_offset          BIGINT  NOT NULL,
    dead_lettered_at_ms BIGINT  NOT NULL,
    status              TEXT    NOT NULL DEFAULT 'new',
    fingerprint         TEXT    NOT NULL,
    convention          TEXT    NOT NULL,
    source_topic        TEXT,
    source_partition    INTEGER,
    source_offset       BIGINT,
    source_timestamp_ms BIGINT,
    consumer_group      TEXT,
    error_class         TEXT,
    error_message       TEXT,
    retry_count         INTEGER,
    message_id          TEXT,
    failed_at_ms        BIGINT,
    decode_warnings     TEXT    NOT NULL DEFAULT '[]', -- JSON array of strings; non-empty = malformed
    record_timestamp_ms BIGINT,
    ingested_at_ms      BIGINT  NOT NULL,
    replay_count        INTEGER NOT NULL DEFAULT 0,
    headers             TEXT    NOT NULL DEFAULT '[]', -- JSON [{"name":..,"value":base64|null}], in record order
    stack_trace         TEXT,
    key                 BYTEA,                         -- NULL = null key
    value               BYTEA,                         -- NULL = tombstone
    CONSTRAINT dead_letters_dlq_position UNIQUE (dlq_topic, dlq_partition, dlq_offset)
);

-- The list is ordered by (dead_lettered_at_ms DESC, id DESC); each filter's index ends with
-- that key so a filtered page is an index range read backwards, never a sort. `status` is
-- INCLUDEd: every query checks it (the default hides `deleted`), and with it in the index a
-- count or an error-group aggregate can be an index-only scan.
CREATE INDEX dead_letters_by_time        ON dead_letters (dead_lettered_at_ms DESC, id DESC) INCLUDE (status);
CREATE INDEX dead_letters_by_fingerprint ON dead_letters (fingerprint, dead_lettered_at_ms, id) INCLUDE (status);
CREATE INDEX dead_letters_by_source      ON dead_letters (source_topic, dead_lettered_at_ms, id) INCLUDE (status);
CREATE INDEX dead_letters_by_dlq         ON dead_letters (dlq_topic, dead_lettered_at_ms, id) INCLUDE (status);
CREATE INDEX dead_letters_by_group       ON dead_letters (consumer_group, dead_lettered_at_ms, id) INCLUDE (status);
CREATE INDEX dead_letters_by_status      ON dead_letters (status, dead_lettered_at_ms, id);
CREATE INDEX dead_letters_by_class       ON dead_letters (error_class, dead_lettered_at_ms, id) INCLUDE (status);
CREATE INDEX dead_letters_by_message_id  ON dead_letters (message_id);

-- Free-text search (`q`, ILIKE '%...%') can use a trigram index. pg_trgm is contrib: a server
-- without it, or a user who may not create it, still gets a working (scanning) search, so
-- neither step may fail the migration.
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'pg_trgm is not available (%); free-text search will scan', SQLERRM;
END
$$;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        EXECUTE 'CREATE INDEX dead_letters_error_message_trgm ON dead_letters '
             || 'USING gin (error_message gin_trgm_ops)';
    END IF;
EXCEPTION WHEN OTHERS THEN
    -- e.g. the extension lives in a schema outside search_path: search still works, unindexed.
    RAISE NOTICE 'no trigram index on error_message (%); free-text search will scan', SQLERRM;
END
$$;
