-- Retention and archive (issue 8), PostgreSQL. See docs/retention.md.

-- When the dead letter's status last changed (epoch ms), kept by the trigger below, so that
-- "deleted for longer than `deleted_max_age_ms`" is measured from the delete, not from the
-- dead-lettering. NULL while the status has never changed (a `new` one). Rows that changed
-- before this migration take the time of their last history event.
ALTER TABLE dead_letters ADD COLUMN status_changed_at_ms BIGINT;
UPDATE dead_letters d
   SET status_changed_at_ms = COALESCE(
        (SELECT MAX(e.at_ms) FROM dead_letter_events e WHERE e.dead_letter_id = d.id),
        d.ingested_at_ms)
 WHERE d.status <> 'new';
CREATE FUNCTION dead_letters_status_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status IS DISTINCT FROM OLD.status THEN
        NEW.status_changed_at_ms := (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER dead_letters_status_changed BEFORE UPDATE OF status ON dead_letters
    FOR EACH ROW EXECUTE FUNCTION dead_letters_status_changed();

-- The size of a dead letter, bytes: key + value (as `dl_stats_counts.bytes` of 0006 counts it).
-- Computed, never written by the application; what a `max_bytes` purge adds up.
ALTER TABLE dead_letters ADD COLUMN record_bytes BIGINT
    GENERATED ALWAYS AS (COALESCE(octet_length(key), 0) + COALESCE(octet_length(value), 0)) STORED;

-- "Deleted / replayed longer ago than N" is an index range. (Usage per DLQ topic and status
-- comes from the maintained `dl_stats_counts`, never a scan.)
CREATE INDEX dead_letters_retention ON dead_letters (dlq_topic, status, status_changed_at_ms) INCLUDE (record_bytes);

-- One row per retention purge or archive run: progress moves in the same transaction as each
-- chunk it deletes, so a run whose process died is visible (and audited as interrupted by the
-- next run). Its audit row is written when it ends.
CREATE TABLE retention_runs (
    id               BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind             TEXT    NOT NULL,              -- purge | archive
    status           TEXT    NOT NULL,              -- running | done | failed | interrupted
    actor            TEXT    NOT NULL,              -- (retention), or the user of an on-demand archive
    started_at_ms    BIGINT  NOT NULL,
    updated_at_ms    BIGINT  NOT NULL,
    finished_at_ms   BIGINT,
    purged           BIGINT  NOT NULL DEFAULT 0,    -- dead letters deleted for good
    archived         BIGINT  NOT NULL DEFAULT 0,    -- dead letters written to the archive
    chunks           BIGINT  NOT NULL DEFAULT 0,    -- delete transactions committed
    archive_location TEXT,                          -- the run's manifest, when archived
    detail           TEXT    NOT NULL DEFAULT '[]', -- JSON: per DLQ topic and reason, count and ranges
    error            TEXT
);
CREATE INDEX retention_runs_by_status ON retention_runs (status, id);
