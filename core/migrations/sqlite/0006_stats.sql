-- Maintained aggregates (issue 8, overview and metrics), SQLite. See docs/stats.md.
--
-- Triggers on `dead_letters` keep these tables exact in the same transaction as every write
-- that changes them (ingest inserts, status changes by any action or by the relay, row
-- deletion by retention), so no code path can forget them. Readers (the overview page,
-- /metrics, alert rules) read only these tables plus index seeks, never scan dead_letters.
--
-- `source_topic` is '' where the dead letter names none (Kafka topic names are never empty),
-- so it can be part of a primary key. Buckets are keyed on `dead_lettered_at_ms` floored to
-- the minute / hour (integer division), the same time the list's `from`/`to` filter on.

-- Stored dead letters per (DLQ topic, source topic, status): count and key + value bytes.
-- Rows may reach n = 0 (readers skip them). Insert: +1; status change: -1 old, +1 new;
-- delete: -1.
CREATE TABLE dl_stats_counts (
    dlq_topic    TEXT    NOT NULL,
    source_topic TEXT    NOT NULL,
    status       TEXT    NOT NULL,
    n            INTEGER NOT NULL,
    bytes        INTEGER NOT NULL,
    PRIMARY KEY (dlq_topic, source_topic, status)
) WITHOUT ROWID;

-- Arrivals per minute and per hour per (DLQ topic, source topic). An arrival history: a
-- later status change or a purge does not take it back. Minutes are kept 25 h, hours
-- 35 days (`Store::compact_stats`).
CREATE TABLE dl_stats_minutes (
    dlq_topic    TEXT    NOT NULL,
    source_topic TEXT    NOT NULL,
    minute_ms    INTEGER NOT NULL,
    n            INTEGER NOT NULL,
    PRIMARY KEY (dlq_topic, source_topic, minute_ms)
) WITHOUT ROWID;
CREATE INDEX dl_stats_minutes_by_time ON dl_stats_minutes (minute_ms);

CREATE TABLE dl_stats_hours (
    dlq_topic    TEXT    NOT NULL,
    source_topic TEXT    NOT NULL,
    hour_ms      INTEGER NOT NULL,
    n            INTEGER NOT NULL,
    PRIMARY KEY (dlq_topic, source_topic, hour_ms)
) WITHOUT ROWID;
CREATE INDEX dl_stats_hours_by_time ON dl_stats_hours (hour_ms);

-- Error groups: first and last arrival (dead_lettered_at_ms) and stored rows (any status;
-- a delete takes one off, first/last stay). The DLQ topic, source topic and error class
-- are those of the group's earliest dead letter.
CREATE TABLE dl_stats_fingerprints (
    fingerprint   TEXT    NOT NULL PRIMARY KEY,
    first_seen_ms INTEGER NOT NULL,
    last_seen_ms  INTEGER NOT NULL,
    n             INTEGER NOT NULL,
    dlq_topic     TEXT    NOT NULL,
    source_topic  TEXT    NOT NULL,
    error_class   TEXT
) WITHOUT ROWID;
CREATE INDEX dl_stats_fingerprints_by_first_seen ON dl_stats_fingerprints (first_seen_ms);

-- Arrivals per hour per error group, for the groups page's trend; kept 8 days.
CREATE TABLE dl_stats_fingerprint_hours (
    fingerprint TEXT    NOT NULL,
    hour_ms     INTEGER NOT NULL,
    n           INTEGER NOT NULL,
    PRIMARY KEY (fingerprint, hour_ms)
) WITHOUT ROWID;
CREATE INDEX dl_stats_fingerprint_hours_by_time ON dl_stats_fingerprint_hours (hour_ms);

-- The oldest dead letter per (DLQ topic, source topic, status) is one seek here.
CREATE INDEX dead_letters_by_pair_status
    ON dead_letters (dlq_topic, source_topic, status, dead_lettered_at_ms);

CREATE TRIGGER dl_stats_insert AFTER INSERT ON dead_letters
BEGIN
    INSERT INTO dl_stats_counts (dlq_topic, source_topic, status, n, bytes)
    VALUES (NEW.dlq_topic, COALESCE(NEW.source_topic, ''), NEW.status, 1,
            COALESCE(length(NEW.key), 0) + COALESCE(length(NEW.value), 0))
    ON CONFLICT (dlq_topic, source_topic, status)
    DO UPDATE SET n = n + 1, bytes = bytes + excluded.bytes;

    INSERT INTO dl_stats_minutes (dlq_topic, source_topic, minute_ms, n)
    VALUES (NEW.dlq_topic, COALESCE(NEW.source_topic, ''),
            (NEW.dead_lettered_at_ms / 60000) * 60000, 1)
    ON CONFLICT (dlq_topic, source_topic, minute_ms) DO UPDATE SET n = n + 1;

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

CREATE TRIGGER dl_stats_delete AFTER DELETE ON dead_letters
BEGIN
    UPDATE dl_stats_counts
       SET n = n - 1,
           bytes = bytes - (COALESCE(length(OLD.key), 0) + COALESCE(length(OLD.value), 0))
     WHERE dlq_topic = OLD.dlq_topic AND source_topic = COALESCE(OLD.source_topic, '')
       AND status = OLD.status;

    UPDATE dl_stats_fingerprints SET n = n - 1 WHERE fingerprint = OLD.fingerprint;
END;

-- What is already stored. Buckets only for the windows they are kept for.
INSERT INTO dl_stats_counts (dlq_topic, source_topic, status, n, bytes)
SELECT dlq_topic, COALESCE(source_topic, ''), status, COUNT(*),
       SUM(COALESCE(length(key), 0) + COALESCE(length(value), 0))
  FROM dead_letters GROUP BY 1, 2, 3;

INSERT INTO dl_stats_minutes (dlq_topic, source_topic, minute_ms, n)
SELECT dlq_topic, COALESCE(source_topic, ''), (dead_lettered_at_ms / 60000) * 60000, COUNT(*)
  FROM dead_letters
 WHERE dead_lettered_at_ms >= CAST(strftime('%s', 'now') AS INTEGER) * 1000 - 90000000
 GROUP BY 1, 2, 3;

INSERT INTO dl_stats_hours (dlq_topic, source_topic, hour_ms, n)
SELECT dlq_topic, COALESCE(source_topic, ''), (dead_lettered_at_ms / 3600000) * 3600000, COUNT(*)
  FROM dead_letters
 WHERE dead_lettered_at_ms >= CAST(strftime('%s', 'now') AS INTEGER) * 1000 - 3024000000
 GROUP BY 1, 2, 3;

INSERT INTO dl_stats_fingerprints
    (fingerprint, first_seen_ms, last_seen_ms, n, dlq_topic, source_topic, error_class)
SELECT d.fingerprint, g.first_ms, g.last_ms, g.n, d.dlq_topic, COALESCE(d.source_topic, ''),
       d.error_class
  FROM (SELECT fingerprint, MIN(dead_lettered_at_ms) AS first_ms,
               MAX(dead_lettered_at_ms) AS last_ms, COUNT(*) AS n
          FROM dead_letters GROUP BY fingerprint) g
  JOIN dead_letters d ON d.id = (SELECT e.id FROM dead_letters e
                                  WHERE e.fingerprint = g.fingerprint
                                    AND e.dead_lettered_at_ms = g.first_ms
                                  ORDER BY e.id LIMIT 1);

INSERT INTO dl_stats_fingerprint_hours (fingerprint, hour_ms, n)
SELECT fingerprint, (dead_lettered_at_ms / 3600000) * 3600000, COUNT(*)
  FROM dead_letters
 WHERE dead_lettered_at_ms >= CAST(strftime('%s', 'now') AS INTEGER) * 1000 - 691200000
 GROUP BY 1, 2;
