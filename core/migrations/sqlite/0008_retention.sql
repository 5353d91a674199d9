-- Retention and archive (issue 8), SQLite. See docs/retention.md.

-- When the dead letter's status last changed (epoch ms), kept by the trigger below, so that
-- "deleted for longer than `deleted_max_age_ms`" is measured from the delete, not from the
-- dead-lettering. NULL while the status has never changed (a `new` one). Rows that changed
-- before this migration take the time of their last history event.
ALTER TABLE dead_letters ADD COLUMN status_changed_at_ms INTEGER;
UPDATE dead_letters
   SET status_changed_at_ms = COALESCE(
        (SELECT MAX(e.at_ms) FROM dead_letter_events e WHERE e.dead_letter_id = dead_letters.id),
        ingested_at_ms)
 WHERE status <> 'new';
CREATE TRIGGER dead_letters_status_changed AFTER UPDATE OF status ON dead_letters
WHEN NEW.status IS NOT OLD.status
BEGIN
    UPDATE dead_letters
       SET status_changed_at_ms = CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)
     WHERE id = NEW.id;
END;

-- The size of a dead letter, bytes: key + value (as `dl_stats_counts.bytes` of 0006 counts it).
-- Computed, never written by the application; what a `max_bytes` purge adds up.
ALTER TABLE dead_letters ADD COLUMN record_bytes INTEGER
    GENERATED ALWAYS AS (COALESCE(length(key), 0) + COALESCE(length(value), 0)) VIRTUAL;

-- "Deleted / replayed longer ago than N" is an index range. (Usage per DLQ topic and status
-- comes from the maintained `dl_stats_counts`, never a scan.)
CREATE INDEX dead_letters_retention ON dead_letters (dlq_topic, status, status_changed_at_ms, record_bytes);

-- One row per retention purge or archive run: progress moves in the same transaction as each
-- chunk it deletes, so a run whose process died is visible (and audited as interrupted by the
-- next run). Its audit row is written when it ends.
CREATE TABLE retention_runs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    kind             TEXT    NOT NULL,              -- purge | archive
    status           TEXT    NOT NULL,              -- running | done | failed | interrupted
    actor            TEXT    NOT NULL,              -- (retention), or the user of an on-demand archive
    started_at_ms    INTEGER NOT NULL,
    updated_at_ms    INTEGER NOT NULL,
    finished_at_ms   INTEGER,
    purged           INTEGER NOT NULL DEFAULT 0,    -- dead letters deleted for good
    archived         INTEGER NOT NULL DEFAULT 0,    -- dead letters written to the archive
    chunks           INTEGER NOT NULL DEFAULT 0,    -- delete transactions committed
    archive_location TEXT,                          -- the run's manifest, when archived
    detail           TEXT    NOT NULL DEFAULT '[]', -- JSON: per DLQ topic and reason, count and ranges
    error            TEXT
);
CREATE INDEX retention_runs_by_status ON retention_runs (status, id);
