-- The dead letter's columns back in the order SQLite reads them (issue 12 items 6 and 7),
-- SQLite only. See docs/bench.md, "2026-12-04 (3)".
--
-- SQLite decodes a row's columns in order and keeps the tail of a large row on overflow
-- pages, a linked list it walks page by page. Migration 0001 put the list's columns first
-- and the large ones (headers, stack trace, key, value) last, so that a list page never
-- reads a large value. Columns added later by ALTER TABLE went after `value`: `tier`
-- (0022) is one of the list's columns, so every list row, error group row and tier filter
-- read the whole row, a 1 MiB value's 256 overflow pages included (a list of 50 such
-- dead letters: 13.9 ms instead of 0.05 ms, from the OS page cache). This migration
-- rebuilds `dead_letters` with every small column before `headers`, as SQLite's own
-- procedure for a change ALTER TABLE cannot make describes
-- (https://www.sqlite.org/lang_altertable.html, "Making Other Kinds Of Table Schema
-- Changes"): a new table, the rows copied in id order, the old one dropped, the new one
-- renamed, then its indexes, triggers and the view that reads it created again, exactly
-- as migrations 0001-0028 left them.
--
-- `Store::migrate` runs SQLite migrations on a connection with foreign keys off (dropping a
-- table with them on would first delete every row, and ON DELETE CASCADE would take the
-- labels, notes, links and tiers with it), and checks `PRAGMA foreign_key_check` before it
-- lets the migration count. The copy needs about as much free disk as the table, once.
-- The AUTOINCREMENT high-water mark moves with the table: ids of purged dead letters, named
-- in audit rows, are never reused.

DROP VIEW search_backlog_text;

CREATE TABLE dead_letters_new (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT, -- AUTOINCREMENT: ids named in audit rows are never reused
    dlq_topic            TEXT    NOT NULL,
    dlq_partition        INTEGER NOT NULL,
    dlq_offset           INTEGER NOT NULL,
    dead_lettered_at_ms  INTEGER NOT NULL,
    status               TEXT    NOT NULL DEFAULT 'new',
    fingerprint          TEXT    NOT NULL,
    convention           TEXT    NOT NULL,
    source_topic         TEXT,
    source_partition     INTEGER,
    source_offset        INTEGER,
    source_timestamp_ms  INTEGER,
    consumer_group       TEXT,
    error_class          TEXT,
    error_message        TEXT,
    retry_count          INTEGER,
    message_id           TEXT,
    failed_at_ms         INTEGER,
    decode_warnings      TEXT    NOT NULL DEFAULT '[]', -- JSON array of strings; non-empty = malformed
    record_timestamp_ms  INTEGER,
    ingested_at_ms       INTEGER NOT NULL,
    replay_count         INTEGER NOT NULL DEFAULT 0,
    status_before        TEXT,                          -- 0002: the status a delete replaced
    status_changed_at_ms INTEGER,                       -- 0008: kept by dead_letters_status_changed
    edit_version         INTEGER NOT NULL DEFAULT 0,    -- 0014
    tier                 TEXT,                          -- 0022: NULL = not sorted yet
    -- 0008: key + value, bytes; computed from the lengths in the record header, no value read.
    record_bytes         INTEGER GENERATED ALWAYS AS (COALESCE(length(key), 0) + COALESCE(length(value), 0)) VIRTUAL,
    -- Large columns last; every column added from now on goes before them (a rebuild like
    -- this one), never after: `store::column_order_tests` checks it.
    headers              TEXT    NOT NULL DEFAULT '[]', -- compact encoding, core/src/store/codec.rs
    stack_trace          TEXT,
    key                  BLOB,                          -- NULL = null key
    value                BLOB,                          -- NULL = tombstone
    UNIQUE (dlq_topic, dlq_partition, dlq_offset)       -- ingest idempotency: one row per DLQ offset
);

INSERT INTO dead_letters_new (
    id, dlq_topic, dlq_partition, dlq_offset, dead_lettered_at_ms, status, fingerprint,
    convention, source_topic, source_partition, source_offset, source_timestamp_ms,
    consumer_group, error_class, error_message, retry_count, message_id, failed_at_ms,
    decode_warnings, record_timestamp_ms, ingested_at_ms, replay_count, status_before,
    status_changed_at_ms, edit_version, tier, headers, stack_trace, key, value)
SELECT
    id, dlq_topic, dlq_partition, dlq_offset, dead_lettered_at_ms, status, fingerprint,
    convention, source_topic, source_partition, source_offset, source_timestamp_ms,
    consumer_group, error_class, error_message, retry_count, message_id, failed_at_ms,
    decode_warnings, record_timestamp_ms, ingested_at_ms, replay_count, status_before,
    status_changed_at_ms, edit_version, tier, headers, stack_trace, key, value
FROM dead_letters ORDER BY id;

-- The AUTOINCREMENT high-water mark, not only the highest id copied.
DELETE FROM sqlite_sequence WHERE name = 'dead_letters_new';
INSERT INTO sqlite_sequence (name, seq)
SELECT 'dead_letters_new', seq FROM sqlite_sequence WHERE name = 'dead_letters';

DROP TABLE dead_letters;
ALTER TABLE dead_letters_new RENAME TO dead_letters;

-- As migrations 0001-0028 left them.
CREATE INDEX dead_letters_by_class       ON dead_letters (error_class, dead_lettered_at_ms, id, status);

CREATE INDEX dead_letters_by_dlq         ON dead_letters (dlq_topic, dead_lettered_at_ms, id, status);

CREATE INDEX dead_letters_by_fingerprint ON dead_letters (fingerprint, dead_lettered_at_ms, id, status);

CREATE INDEX dead_letters_by_group       ON dead_letters (consumer_group, dead_lettered_at_ms, id, status);

CREATE INDEX dead_letters_by_pair_status
    ON dead_letters (dlq_topic, source_topic, status, dead_lettered_at_ms);

CREATE INDEX dead_letters_by_source      ON dead_letters (source_topic, dead_lettered_at_ms, id, status);

CREATE INDEX dead_letters_by_status      ON dead_letters (status, dead_lettered_at_ms, id);

CREATE INDEX dead_letters_by_tier  ON dead_letters (tier, dead_lettered_at_ms, id, status);

CREATE INDEX dead_letters_by_time        ON dead_letters (dead_lettered_at_ms DESC, id DESC, status);

CREATE INDEX dead_letters_replayed_by_message_id
    ON dead_letters (message_id) WHERE replay_count > 0;

CREATE INDEX dead_letters_replayed_by_source
    ON dead_letters (source_topic, source_partition, source_offset) WHERE replay_count > 0;

CREATE INDEX dead_letters_retention ON dead_letters (dlq_topic, status, status_changed_at_ms, record_bytes);

CREATE INDEX dead_letters_unsorted ON dead_letters (id) WHERE tier IS NULL;

CREATE TRIGGER dead_letters_status_changed AFTER UPDATE OF status ON dead_letters
WHEN NEW.status IS NOT OLD.status
BEGIN
    UPDATE dead_letters
       SET status_changed_at_ms = CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)
     WHERE id = NEW.id;
END;

CREATE TRIGGER dead_letters_text_delete AFTER DELETE ON dead_letters BEGIN
    DELETE FROM dead_letter_text WHERE id = OLD.id;
    DELETE FROM search_backlog WHERE id = OLD.id;
END;

CREATE TRIGGER dl_stats_delete AFTER DELETE ON dead_letters
BEGIN
    UPDATE dl_stats_counts
       SET n = n - 1,
           bytes = bytes - (COALESCE(length(OLD.key), 0) + COALESCE(length(OLD.value), 0))
     WHERE dlq_topic = OLD.dlq_topic AND source_topic = COALESCE(OLD.source_topic, '')
       AND status = OLD.status;

    UPDATE dl_stats_fingerprints SET n = n - 1 WHERE fingerprint = OLD.fingerprint;
END;

CREATE TRIGGER dl_stats_groups_delete AFTER DELETE ON dead_letters
BEGIN
    UPDATE dl_stats_groups SET n = n - 1
     WHERE fingerprint = OLD.fingerprint AND dlq_topic = OLD.dlq_topic
       AND source_topic = COALESCE(OLD.source_topic, '') AND status = OLD.status
       AND tier = COALESCE(OLD.tier, '');
END;

CREATE TRIGGER dl_stats_groups_insert AFTER INSERT ON dead_letters
BEGIN
    INSERT INTO dl_stats_groups
        (fingerprint, dlq_topic, source_topic, status, tier, n, last_seen_ms)
    VALUES (NEW.fingerprint, NEW.dlq_topic, COALESCE(NEW.source_topic, ''), NEW.status,
            COALESCE(NEW.tier, ''), 1, NEW.dead_lettered_at_ms)
    ON CONFLICT (fingerprint, dlq_topic, source_topic, status, tier) DO UPDATE SET
        n = n + 1,
        last_seen_ms = max(last_seen_ms, excluded.last_seen_ms);
END;

CREATE TRIGGER dl_stats_groups_update
AFTER UPDATE OF status, tier, dlq_topic, source_topic, fingerprint ON dead_letters
WHEN OLD.status IS NOT NEW.status
  OR OLD.tier IS NOT NEW.tier
  OR OLD.dlq_topic IS NOT NEW.dlq_topic
  OR OLD.source_topic IS NOT NEW.source_topic
  OR OLD.fingerprint IS NOT NEW.fingerprint
BEGIN
    UPDATE dl_stats_groups SET n = n - 1
     WHERE fingerprint = OLD.fingerprint AND dlq_topic = OLD.dlq_topic
       AND source_topic = COALESCE(OLD.source_topic, '') AND status = OLD.status
       AND tier = COALESCE(OLD.tier, '');

    INSERT INTO dl_stats_groups
        (fingerprint, dlq_topic, source_topic, status, tier, n, last_seen_ms)
    VALUES (NEW.fingerprint, NEW.dlq_topic, COALESCE(NEW.source_topic, ''), NEW.status,
            COALESCE(NEW.tier, ''), 1, NEW.dead_lettered_at_ms)
    ON CONFLICT (fingerprint, dlq_topic, source_topic, status, tier) DO UPDATE SET
        n = n + 1,
        last_seen_ms = max(last_seen_ms, excluded.last_seen_ms);
END;

CREATE TRIGGER dl_stats_insert AFTER INSERT ON dead_letters
BEGIN
    INSERT INTO dl_stats_counts (dlq_topic, source_topic, status, n, bytes)
    VALUES (NEW.dlq_topic, COALESCE(NEW.source_topic, ''), NEW.status, 1,
            COALESCE(length(NEW.key), 0) + COALESCE(length(NEW.value), 0))
    ON CONFLICT (dlq_topic, source_topic, status)
    DO UPDATE SET n = n + 1, bytes = bytes + excluded.bytes;

    INSERT INTO dl_stats_minutes (dlq_topic, source_topic, minute_ms, n, live_n)
    VALUES (NEW.dlq_topic, COALESCE(NEW.source_topic, ''),
            (NEW.dead_lettered_at_ms / 60000) * 60000, 1,
            CASE WHEN NEW.status <> 'deleted' THEN 1 ELSE 0 END)
    ON CONFLICT (dlq_topic, source_topic, minute_ms)
    DO UPDATE SET n = n + 1, live_n = live_n + excluded.live_n;

    INSERT INTO dl_stats_hours (dlq_topic, source_topic, hour_ms, n)
    VALUES (NEW.dlq_topic, COALESCE(NEW.source_topic, ''),
            (NEW.dead_lettered_at_ms / 3600000) * 3600000, 1)
    ON CONFLICT (dlq_topic, source_topic, hour_ms) DO UPDATE SET n = n + 1;

    INSERT INTO dl_stats_fingerprints
        (fingerprint, first_seen_ms, last_seen_ms, n, dlq_topic, source_topic, error_class)
    VALUES (NEW.fingerprint, NEW.dead_lettered_at_ms, NEW.dead_lettered_at_ms, 1,
            NEW.dlq_topic, COALESCE(NEW.source_topic, ''), NEW.error_class)
    ON CONFLICT (fingerprint) DO UPDATE SET
        n = n + 1,
        dlq_topic = CASE WHEN excluded.first_seen_ms < first_seen_ms
                         THEN excluded.dlq_topic ELSE dlq_topic END,
        source_topic = CASE WHEN excluded.first_seen_ms < first_seen_ms
                            THEN excluded.source_topic ELSE source_topic END,
        error_class = CASE WHEN excluded.first_seen_ms < first_seen_ms
                           THEN excluded.error_class ELSE error_class END,
        first_seen_ms = min(first_seen_ms, excluded.first_seen_ms),
        last_seen_ms = max(last_seen_ms, excluded.last_seen_ms);

    INSERT INTO dl_stats_fingerprint_hours (fingerprint, hour_ms, n)
    VALUES (NEW.fingerprint, (NEW.dead_lettered_at_ms / 3600000) * 3600000, 1)
    ON CONFLICT (fingerprint, hour_ms) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER dl_stats_live_minutes_delete AFTER DELETE ON dead_letters
WHEN OLD.status <> 'deleted'
BEGIN
    UPDATE dl_stats_minutes SET live_n = live_n - 1
     WHERE dlq_topic = OLD.dlq_topic AND source_topic = COALESCE(OLD.source_topic, '')
       AND minute_ms = (OLD.dead_lettered_at_ms / 60000) * 60000;
END;

CREATE TRIGGER dl_stats_live_minutes_update
AFTER UPDATE OF status, dlq_topic, source_topic, dead_lettered_at_ms ON dead_letters
WHEN (OLD.status = 'deleted') IS NOT (NEW.status = 'deleted')
  OR OLD.dlq_topic IS NOT NEW.dlq_topic
  OR OLD.source_topic IS NOT NEW.source_topic
  OR OLD.dead_lettered_at_ms IS NOT NEW.dead_lettered_at_ms
BEGIN
    UPDATE dl_stats_minutes SET live_n = live_n - 1
     WHERE OLD.status <> 'deleted'
       AND dlq_topic = OLD.dlq_topic AND source_topic = COALESCE(OLD.source_topic, '')
       AND minute_ms = (OLD.dead_lettered_at_ms / 60000) * 60000;

    INSERT INTO dl_stats_minutes (dlq_topic, source_topic, minute_ms, n, live_n)
    SELECT NEW.dlq_topic, COALESCE(NEW.source_topic, ''),
           (NEW.dead_lettered_at_ms / 60000) * 60000, 0, 1
     WHERE NEW.status <> 'deleted'
    ON CONFLICT (dlq_topic, source_topic, minute_ms) DO UPDATE SET live_n = live_n + 1;
END;

CREATE TRIGGER dl_stats_update AFTER UPDATE OF status, dlq_topic, source_topic ON dead_letters
WHEN OLD.status IS NOT NEW.status
  OR OLD.dlq_topic IS NOT NEW.dlq_topic
  OR OLD.source_topic IS NOT NEW.source_topic
BEGIN
    UPDATE dl_stats_counts
       SET n = n - 1,
           bytes = bytes - (COALESCE(length(OLD.key), 0) + COALESCE(length(OLD.value), 0))
     WHERE dlq_topic = OLD.dlq_topic AND source_topic = COALESCE(OLD.source_topic, '')
       AND status = OLD.status;

    INSERT INTO dl_stats_counts (dlq_topic, source_topic, status, n, bytes)
    VALUES (NEW.dlq_topic, COALESCE(NEW.source_topic, ''), NEW.status, 1,
            COALESCE(length(NEW.key), 0) + COALESCE(length(NEW.value), 0))
    ON CONFLICT (dlq_topic, source_topic, status)
    DO UPDATE SET n = n + 1, bytes = bytes + excluded.bytes;
END;

CREATE VIEW search_backlog_text AS
SELECT b.id AS id,
       d.error_message AS message,
       CAST(substr(CAST(d.stack_trace AS BLOB), 1, b.stack_bytes) AS TEXT) AS stack_trace,
       CAST(substr(d.value, 1, b.payload_bytes) AS TEXT) AS payload
-- CROSS JOIN: SQLite then always reads the backlog first and looks each dead letter up by
-- its id (a plain JOIN let the planner walk `dead_letters` by id range instead: every dead
-- letter below the round's last id, indexed or not).
FROM search_backlog b CROSS JOIN dead_letters d ON d.id = b.id;
