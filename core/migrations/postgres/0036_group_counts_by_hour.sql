-- Error groups and "N match this filter" over a time range without a scan (issue 12 item 3),
-- PostgreSQL. See docs/stats.md, "Error groups per filter".
--
-- A filter with `from` / `to` (dead_lettered_at) was answered by counting the newest 100,000
-- matching rows: 808 ms for `/groups?from=<a day ago>` at 10M rows (docs/bench.md,
-- "2026-12-06 (11)"), and only "at least" above that. `dl_stats_group_hours` keeps the
-- stored dead letters per hour of dead-lettering and the key of `dl_stats_groups` (0035), so
-- a range's whole hours are summed from it; the partial hours at its ends are counted from
-- the rows (store/group_counts.rs, bounded). Kept exact by statement triggers with transition
-- tables in the same transaction as every write, as `dl_stats_groups` is (one aggregated
-- upsert per touched key, in sorted key order, so concurrent writers take the rows in the
-- same order). `hour_ms` is `dead_lettered_at_ms` floored to the hour (UTC epoch ms), which
-- no write of redrive's changes (the triggers follow it anyway).
--
-- Filled from `dead_letters` (one GROUP BY over every row), with writers to `dead_letters`
-- held off until this transaction commits, so no row is counted twice or missed.
LOCK TABLE dead_letters IN SHARE ROW EXCLUSIVE MODE;

CREATE TABLE dl_stats_group_hours (
    hour_ms        BIGINT NOT NULL,
    fingerprint    TEXT   NOT NULL,
    dlq_topic      TEXT   NOT NULL,
    source_topic   TEXT   NOT NULL,
    consumer_group TEXT   NOT NULL,
    error_class    TEXT   NOT NULL,
    status         TEXT   NOT NULL,
    tier           TEXT   NOT NULL,
    n              BIGINT NOT NULL,
    PRIMARY KEY (hour_ms, fingerprint, dlq_topic, source_topic, consumer_group, error_class,
                 status, tier)
);

CREATE FUNCTION dl_stats_group_hours_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dl_stats_group_hours AS g
        (hour_ms, fingerprint, dlq_topic, source_topic, consumer_group, error_class, status,
         tier, n)
    SELECT (dead_lettered_at_ms / 3600000) * 3600000, fingerprint, dlq_topic,
           COALESCE(source_topic, ''), COALESCE(consumer_group, ''), COALESCE(error_class, ''),
           status, COALESCE(tier, ''), COUNT(*)
      FROM new_rows GROUP BY 1, 2, 3, 4, 5, 6, 7, 8 ORDER BY 1, 2, 3, 4, 5, 6, 7, 8
    ON CONFLICT (hour_ms, fingerprint, dlq_topic, source_topic, consumer_group, error_class,
                 status, tier)
    DO UPDATE SET n = g.n + EXCLUDED.n;
    RETURN NULL;
END
$$;

-- Rows that left a key add -1, rows that entered one +1; keys whose changes cancel out are
-- left alone.
CREATE FUNCTION dl_stats_group_hours_after_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH moved AS MATERIALIZED (
        SELECT (o.dead_lettered_at_ms / 3600000) * 3600000 AS o_hour,
               o.fingerprint AS o_fp, o.dlq_topic AS o_dlq, COALESCE(o.source_topic, '') AS o_src,
               COALESCE(o.consumer_group, '') AS o_cg, COALESCE(o.error_class, '') AS o_class,
               o.status AS o_status, COALESCE(o.tier, '') AS o_tier,
               (n.dead_lettered_at_ms / 3600000) * 3600000 AS n_hour,
               n.fingerprint AS n_fp, n.dlq_topic AS n_dlq, COALESCE(n.source_topic, '') AS n_src,
               COALESCE(n.consumer_group, '') AS n_cg, COALESCE(n.error_class, '') AS n_class,
               n.status AS n_status, COALESCE(n.tier, '') AS n_tier
          FROM new_rows n JOIN old_rows o ON o.id = n.id
         WHERE o.status IS DISTINCT FROM n.status
            OR o.tier IS DISTINCT FROM n.tier
            OR o.dlq_topic IS DISTINCT FROM n.dlq_topic
            OR o.source_topic IS DISTINCT FROM n.source_topic
            OR o.consumer_group IS DISTINCT FROM n.consumer_group
            OR o.error_class IS DISTINCT FROM n.error_class
            OR o.fingerprint IS DISTINCT FROM n.fingerprint
            OR o.dead_lettered_at_ms / 3600000 IS DISTINCT FROM n.dead_lettered_at_ms / 3600000
    )
    INSERT INTO dl_stats_group_hours AS g
        (hour_ms, fingerprint, dlq_topic, source_topic, consumer_group, error_class, status,
         tier, n)
    SELECT hour_ms, fingerprint, dlq_topic, source_topic, consumer_group, error_class, status,
           tier, SUM(dn)
      FROM (SELECT n_hour AS hour_ms, n_fp AS fingerprint, n_dlq AS dlq_topic,
                   n_src AS source_topic, n_cg AS consumer_group, n_class AS error_class,
                   n_status AS status, n_tier AS tier, 1 AS dn FROM moved
            UNION ALL
            SELECT o_hour, o_fp, o_dlq, o_src, o_cg, o_class, o_status, o_tier, -1
              FROM moved) d
     GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
    HAVING SUM(dn) <> 0
     ORDER BY 1, 2, 3, 4, 5, 6, 7, 8
    ON CONFLICT (hour_ms, fingerprint, dlq_topic, source_topic, consumer_group, error_class,
                 status, tier)
    DO UPDATE SET n = g.n + EXCLUDED.n;
    RETURN NULL;
END
$$;

CREATE FUNCTION dl_stats_group_hours_after_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dl_stats_group_hours AS g
        (hour_ms, fingerprint, dlq_topic, source_topic, consumer_group, error_class, status,
         tier, n)
    SELECT (dead_lettered_at_ms / 3600000) * 3600000, fingerprint, dlq_topic,
           COALESCE(source_topic, ''), COALESCE(consumer_group, ''), COALESCE(error_class, ''),
           status, COALESCE(tier, ''), -COUNT(*)
      FROM old_rows GROUP BY 1, 2, 3, 4, 5, 6, 7, 8 ORDER BY 1, 2, 3, 4, 5, 6, 7, 8
    ON CONFLICT (hour_ms, fingerprint, dlq_topic, source_topic, consumer_group, error_class,
                 status, tier)
    DO UPDATE SET n = g.n + EXCLUDED.n;
    RETURN NULL;
END
$$;

CREATE TRIGGER dl_stats_group_hours_insert AFTER INSERT ON dead_letters
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dl_stats_group_hours_after_insert();
CREATE TRIGGER dl_stats_group_hours_update AFTER UPDATE ON dead_letters
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dl_stats_group_hours_after_update();
CREATE TRIGGER dl_stats_group_hours_delete AFTER DELETE ON dead_letters
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dl_stats_group_hours_after_delete();

-- What is already stored.
INSERT INTO dl_stats_group_hours
    (hour_ms, fingerprint, dlq_topic, source_topic, consumer_group, error_class, status, tier,
     n)
SELECT (dead_lettered_at_ms / 3600000) * 3600000, fingerprint, dlq_topic,
       COALESCE(source_topic, ''), COALESCE(consumer_group, ''), COALESCE(error_class, ''),
       status, COALESCE(tier, ''), COUNT(*)
  FROM dead_letters GROUP BY 1, 2, 3, 4, 5, 6, 7, 8;
