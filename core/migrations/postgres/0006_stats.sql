-- Maintained aggregates (issue 8, overview and metrics), PostgreSQL. See docs/stats.md.
--
-- Triggers on `dead_letters` keep these tables exact in the same transaction as every write
-- that changes them (ingest inserts, status changes by any action or by the relay, row
-- deletion by retention), so no code path can forget them. They are statement-level with
-- transition tables: one multi-row INSERT or UPDATE adds one aggregated upsert per touched
-- key, and each upsert takes its keys in sorted order, so two writers lock the shared
-- counter rows in the same order. Readers (the overview page, /metrics, alert rules) read
-- only these tables plus index seeks, never scan dead_letters.
--
-- `source_topic` is '' where the dead letter names none (Kafka topic names are never empty),
-- so it can be part of a primary key. Buckets are keyed on `dead_lettered_at_ms` floored to
-- the minute / hour (integer division), the same time the list's `from`/`to` filter on.

-- Stored dead letters per (DLQ topic, source topic, status): count and key + value bytes.
CREATE TABLE dl_stats_counts (
    dlq_topic    TEXT   NOT NULL,
    source_topic TEXT   NOT NULL,
    status       TEXT   NOT NULL,
    n            BIGINT NOT NULL,
    bytes        BIGINT NOT NULL,
    PRIMARY KEY (dlq_topic, source_topic, status)
);

-- Arrivals per minute and per hour per (DLQ topic, source topic); an arrival history (a
-- later status change or purge does not take it back). Minutes kept 25 h, hours 35 days.
CREATE TABLE dl_stats_minutes (
    dlq_topic    TEXT   NOT NULL,
    source_topic TEXT   NOT NULL,
    minute_ms    BIGINT NOT NULL,
    n            BIGINT NOT NULL,
    PRIMARY KEY (dlq_topic, source_topic, minute_ms)
);
CREATE INDEX dl_stats_minutes_by_time ON dl_stats_minutes (minute_ms);

CREATE TABLE dl_stats_hours (
    dlq_topic    TEXT   NOT NULL,
    source_topic TEXT   NOT NULL,
    hour_ms      BIGINT NOT NULL,
    n            BIGINT NOT NULL,
    PRIMARY KEY (dlq_topic, source_topic, hour_ms)
);
CREATE INDEX dl_stats_hours_by_time ON dl_stats_hours (hour_ms);

-- Error groups: first/last arrival, stored rows (any status; a delete takes one off). The
-- DLQ topic, source topic and error class are those of the group's earliest dead letter.
CREATE TABLE dl_stats_fingerprints (
    fingerprint   TEXT   NOT NULL PRIMARY KEY,
    first_seen_ms BIGINT NOT NULL,
    last_seen_ms  BIGINT NOT NULL,
    n             BIGINT NOT NULL,
    dlq_topic     TEXT   NOT NULL,
    source_topic  TEXT   NOT NULL,
    error_class   TEXT
);
CREATE INDEX dl_stats_fingerprints_by_first_seen ON dl_stats_fingerprints (first_seen_ms);

-- Arrivals per hour per error group, for the groups page's trend; kept 8 days.
CREATE TABLE dl_stats_fingerprint_hours (
    fingerprint TEXT   NOT NULL,
    hour_ms     BIGINT NOT NULL,
    n           BIGINT NOT NULL,
    PRIMARY KEY (fingerprint, hour_ms)
);
CREATE INDEX dl_stats_fingerprint_hours_by_time ON dl_stats_fingerprint_hours (hour_ms);

-- The oldest dead letter per (DLQ topic, source topic, status) is one seek here.
CREATE INDEX dead_letters_by_pair_status
    ON dead_letters (dlq_topic, source_topic, status, dead_lettered_at_ms);

CREATE FUNCTION dl_stats_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dl_stats_counts AS c (dlq_topic, source_topic, status, n, bytes)
    SELECT dlq_topic, COALESCE(source_topic, ''), status, COUNT(*),
           SUM(COALESCE(octet_length(key), 0) + COALESCE(octet_length(value), 0))
      FROM new_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (dlq_topic, source_topic, status)
    DO UPDATE SET n = c.n + EXCLUDED.n, bytes = c.bytes + EXCLUDED.bytes;

    INSERT INTO dl_stats_minutes AS m (dlq_topic, source_topic, minute_ms, n)
    SELECT dlq_topic, COALESCE(source_topic, ''), (dead_lettered_at_ms / 60000) * 60000, COUNT(*)
      FROM new_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (dlq_topic, source_topic, minute_ms) DO UPDATE SET n = m.n + EXCLUDED.n;

    INSERT INTO dl_stats_hours AS h (dlq_topic, source_topic, hour_ms, n)
    SELECT dlq_topic, COALESCE(source_topic, ''), (dead_lettered_at_ms / 3600000) * 3600000,
           COUNT(*)
      FROM new_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (dlq_topic, source_topic, hour_ms) DO UPDATE SET n = h.n + EXCLUDED.n;

    INSERT INTO dl_stats_fingerprints AS f
        (fingerprint, first_seen_ms, last_seen_ms, n, dlq_topic, source_topic, error_class)
    SELECT fingerprint, MIN(dead_lettered_at_ms), MAX(dead_lettered_at_ms), COUNT(*),
           (array_agg(dlq_topic ORDER BY dead_lettered_at_ms, id))[1],
           (array_agg(COALESCE(source_topic, '') ORDER BY dead_lettered_at_ms, id))[1],
           (array_agg(error_class ORDER BY dead_lettered_at_ms, id))[1]
      FROM new_rows GROUP BY 1 ORDER BY 1
    ON CONFLICT (fingerprint) DO UPDATE SET
        n = f.n + EXCLUDED.n,
        dlq_topic = CASE WHEN EXCLUDED.first_seen_ms < f.first_seen_ms
                         THEN EXCLUDED.dlq_topic ELSE f.dlq_topic END,
        source_topic = CASE WHEN EXCLUDED.first_seen_ms < f.first_seen_ms
                            THEN EXCLUDED.source_topic ELSE f.source_topic END,
        error_class = CASE WHEN EXCLUDED.first_seen_ms < f.first_seen_ms
                           THEN EXCLUDED.error_class ELSE f.error_class END,
        first_seen_ms = LEAST(f.first_seen_ms, EXCLUDED.first_seen_ms),
        last_seen_ms = GREATEST(f.last_seen_ms, EXCLUDED.last_seen_ms);

    INSERT INTO dl_stats_fingerprint_hours AS g (fingerprint, hour_ms, n)
    SELECT fingerprint, (dead_lettered_at_ms / 3600000) * 3600000, COUNT(*)
      FROM new_rows GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (fingerprint, hour_ms) DO UPDATE SET n = g.n + EXCLUDED.n;
    RETURN NULL;
END
$$;

CREATE FUNCTION dl_stats_after_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dl_stats_counts AS c (dlq_topic, source_topic, status, n, bytes)
    SELECT dlq_topic, source_topic, status, SUM(dn), SUM(db)
      FROM (SELECT n.dlq_topic, COALESCE(n.source_topic, '') AS source_topic, n.status,
                   1 AS dn,
                   COALESCE(octet_length(n.key), 0) + COALESCE(octet_length(n.value), 0) AS db
              FROM new_rows n JOIN old_rows o ON o.id = n.id
             WHERE o.status IS DISTINCT FROM n.status
                OR o.dlq_topic IS DISTINCT FROM n.dlq_topic
                OR o.source_topic IS DISTINCT FROM n.source_topic
            UNION ALL
            SELECT o.dlq_topic, COALESCE(o.source_topic, ''), o.status, -1,
                   -(COALESCE(octet_length(o.key), 0) + COALESCE(octet_length(o.value), 0))
              FROM old_rows o JOIN new_rows n ON n.id = o.id
             WHERE o.status IS DISTINCT FROM n.status
                OR o.dlq_topic IS DISTINCT FROM n.dlq_topic
                OR o.source_topic IS DISTINCT FROM n.source_topic) d
     GROUP BY 1, 2, 3
    HAVING SUM(dn) <> 0 OR SUM(db) <> 0
     ORDER BY 1, 2, 3
    ON CONFLICT (dlq_topic, source_topic, status)
    DO UPDATE SET n = c.n + EXCLUDED.n, bytes = c.bytes + EXCLUDED.bytes;
    RETURN NULL;
END
$$;

CREATE FUNCTION dl_stats_after_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dl_stats_counts AS c (dlq_topic, source_topic, status, n, bytes)
    SELECT dlq_topic, COALESCE(source_topic, ''), status, -COUNT(*),
           -SUM(COALESCE(octet_length(key), 0) + COALESCE(octet_length(value), 0))
      FROM old_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (dlq_topic, source_topic, status)
    DO UPDATE SET n = c.n + EXCLUDED.n, bytes = c.bytes + EXCLUDED.bytes;

    UPDATE dl_stats_fingerprints f SET n = f.n - d.n
      FROM (SELECT fingerprint, COUNT(*) AS n FROM old_rows GROUP BY 1 ORDER BY 1) d
     WHERE f.fingerprint = d.fingerprint;
    RETURN NULL;
END
$$;

CREATE TRIGGER dl_stats_insert AFTER INSERT ON dead_letters
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dl_stats_after_insert();
CREATE TRIGGER dl_stats_update AFTER UPDATE ON dead_letters
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dl_stats_after_update();
CREATE TRIGGER dl_stats_delete AFTER DELETE ON dead_letters
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dl_stats_after_delete();

-- What is already stored. Buckets only for the windows they are kept for.
INSERT INTO dl_stats_counts (dlq_topic, source_topic, status, n, bytes)
SELECT dlq_topic, COALESCE(source_topic, ''), status, COUNT(*),
       SUM(COALESCE(octet_length(key), 0) + COALESCE(octet_length(value), 0))
  FROM dead_letters GROUP BY 1, 2, 3;

INSERT INTO dl_stats_minutes (dlq_topic, source_topic, minute_ms, n)
SELECT dlq_topic, COALESCE(source_topic, ''), (dead_lettered_at_ms / 60000) * 60000, COUNT(*)
  FROM dead_letters
 WHERE dead_lettered_at_ms >= (EXTRACT(EPOCH FROM now()) * 1000)::BIGINT - 90000000
 GROUP BY 1, 2, 3;

INSERT INTO dl_stats_hours (dlq_topic, source_topic, hour_ms, n)
SELECT dlq_topic, COALESCE(source_topic, ''), (dead_lettered_at_ms / 3600000) * 3600000, COUNT(*)
  FROM dead_letters
 WHERE dead_lettered_at_ms >= (EXTRACT(EPOCH FROM now()) * 1000)::BIGINT - 3024000000
 GROUP BY 1, 2, 3;

INSERT INTO dl_stats_fingerprints
    (fingerprint, first_seen_ms, last_seen_ms, n, dlq_topic, source_topic, error_class)
SELECT fingerprint, MIN(dead_lettered_at_ms), MAX(dead_lettered_at_ms), COUNT(*),
       (array_agg(dlq_topic ORDER BY dead_lettered_at_ms, id))[1],
       (array_agg(COALESCE(source_topic, '') ORDER BY dead_lettered_at_ms, id))[1],
       (array_agg(error_class ORDER BY dead_lettered_at_ms, id))[1]
  FROM dead_letters GROUP BY 1;

INSERT INTO dl_stats_fingerprint_hours (fingerprint, hour_ms, n)
SELECT fingerprint, (dead_lettered_at_ms / 3600000) * 3600000, COUNT(*)
  FROM dead_letters
 WHERE dead_lettered_at_ms >= (EXTRACT(EPOCH FROM now()) * 1000)::BIGINT - 691200000
 GROUP BY 1, 2;
