-- Live arrivals per minute (issue #11), PostgreSQL. See docs/stats.md.
--
-- The overview's "new in the last hour / 24 h" link to the list `/?from=<window start>`,
-- which shows live dead letters only (every status but `deleted`); a figure counted from the
-- arrival history (`n`, which a delete or a purge does not take back) showed more than its
-- list. `live_n` is, per (DLQ topic, source topic, minute of `dead_lettered_at_ms`), the dead
-- letters stored now with a status other than `deleted`: exactly what that list counts. It
-- moves with every insert, status change into or out of `deleted`, and row deletion (purge),
-- in the same statement triggers as the other aggregates of 0006 (redefined here), after the
-- counts and in sorted key order, so writers still lock the shared rows in one order:
-- dl_stats_counts, then dl_stats_minutes, then the rest. `n` stays the arrival history (the
-- rate chart, the alert rules). A status change of a dead letter whose minute bucket was
-- already compacted (older than 25 h) may leave a bucket with `n = 0`; compaction drops it.
ALTER TABLE dl_stats_minutes ADD COLUMN live_n BIGINT NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION dl_stats_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dl_stats_counts AS c (dlq_topic, source_topic, status, n, bytes)
    SELECT dlq_topic, COALESCE(source_topic, ''), status, COUNT(*),
           SUM(COALESCE(octet_length(key), 0) + COALESCE(octet_length(value), 0))
      FROM new_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (dlq_topic, source_topic, status)
    DO UPDATE SET n = c.n + EXCLUDED.n, bytes = c.bytes + EXCLUDED.bytes;

    INSERT INTO dl_stats_minutes AS m (dlq_topic, source_topic, minute_ms, n, live_n)
    SELECT dlq_topic, COALESCE(source_topic, ''), (dead_lettered_at_ms / 60000) * 60000, COUNT(*),
           COUNT(*) FILTER (WHERE status <> 'deleted')
      FROM new_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (dlq_topic, source_topic, minute_ms)
    DO UPDATE SET n = m.n + EXCLUDED.n, live_n = m.live_n + EXCLUDED.live_n;

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

CREATE OR REPLACE FUNCTION dl_stats_after_update() RETURNS trigger LANGUAGE plpgsql AS $$
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

    -- Live arrivals: -1 where a row was live, +1 where it is live now, for rows moving into
    -- or out of `deleted` (or to another topic pair or minute).
    INSERT INTO dl_stats_minutes AS m (dlq_topic, source_topic, minute_ms, n, live_n)
    SELECT dlq_topic, source_topic, minute_ms, 0, SUM(dn)
      FROM (SELECT n.dlq_topic, COALESCE(n.source_topic, '') AS source_topic,
                   (n.dead_lettered_at_ms / 60000) * 60000 AS minute_ms,
                   CASE WHEN n.status <> 'deleted' THEN 1 ELSE 0 END
                 - CASE WHEN o.status <> 'deleted' THEN 1 ELSE 0 END AS dn
              FROM new_rows n JOIN old_rows o ON o.id = n.id
             WHERE o.dlq_topic IS NOT DISTINCT FROM n.dlq_topic
               AND o.source_topic IS NOT DISTINCT FROM n.source_topic
               AND o.dead_lettered_at_ms = n.dead_lettered_at_ms
               AND (o.status = 'deleted') <> (n.status = 'deleted')
            UNION ALL
            SELECT n.dlq_topic, COALESCE(n.source_topic, ''), (n.dead_lettered_at_ms / 60000) * 60000, 1
              FROM new_rows n JOIN old_rows o ON o.id = n.id
             WHERE n.status <> 'deleted'
               AND (o.dlq_topic IS DISTINCT FROM n.dlq_topic
                    OR o.source_topic IS DISTINCT FROM n.source_topic
                    OR o.dead_lettered_at_ms <> n.dead_lettered_at_ms)
            UNION ALL
            SELECT o.dlq_topic, COALESCE(o.source_topic, ''), (o.dead_lettered_at_ms / 60000) * 60000, -1
              FROM old_rows o JOIN new_rows n ON n.id = o.id
             WHERE o.status <> 'deleted'
               AND (o.dlq_topic IS DISTINCT FROM n.dlq_topic
                    OR o.source_topic IS DISTINCT FROM n.source_topic
                    OR o.dead_lettered_at_ms <> n.dead_lettered_at_ms)) d
     GROUP BY 1, 2, 3
    HAVING SUM(dn) <> 0
     ORDER BY 1, 2, 3
    ON CONFLICT (dlq_topic, source_topic, minute_ms)
    DO UPDATE SET live_n = m.live_n + EXCLUDED.live_n;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION dl_stats_after_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dl_stats_counts AS c (dlq_topic, source_topic, status, n, bytes)
    SELECT dlq_topic, COALESCE(source_topic, ''), status, -COUNT(*),
           -SUM(COALESCE(octet_length(key), 0) + COALESCE(octet_length(value), 0))
      FROM old_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (dlq_topic, source_topic, status)
    DO UPDATE SET n = c.n + EXCLUDED.n, bytes = c.bytes + EXCLUDED.bytes;

    UPDATE dl_stats_minutes m SET live_n = m.live_n - d.n
      FROM (SELECT dlq_topic, COALESCE(source_topic, '') AS source_topic,
                   (dead_lettered_at_ms / 60000) * 60000 AS minute_ms, COUNT(*) AS n
              FROM old_rows WHERE status <> 'deleted' GROUP BY 1, 2, 3 ORDER BY 1, 2, 3) d
     WHERE m.dlq_topic = d.dlq_topic AND m.source_topic = d.source_topic
       AND m.minute_ms = d.minute_ms;

    UPDATE dl_stats_fingerprints f SET n = f.n - d.n
      FROM (SELECT fingerprint, COUNT(*) AS n FROM old_rows GROUP BY 1 ORDER BY 1) d
     WHERE f.fingerprint = d.fingerprint;
    RETURN NULL;
END
$$;

-- What is already stored: every kept bucket's live dead letters (the buckets hold the last
-- 25 h, so this reads only the dead letters of those 25 h).
UPDATE dl_stats_minutes m SET live_n = d.n
  FROM (SELECT dlq_topic, COALESCE(source_topic, '') AS source_topic,
               (dead_lettered_at_ms / 60000) * 60000 AS minute_ms, COUNT(*) AS n
          FROM dead_letters
         WHERE status <> 'deleted'
           AND dead_lettered_at_ms >= (SELECT MIN(minute_ms) FROM dl_stats_minutes)
         GROUP BY 1, 2, 3) d
 WHERE m.dlq_topic = d.dlq_topic AND m.source_topic = d.source_topic
   AND m.minute_ms = d.minute_ms;
