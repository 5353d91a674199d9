-- Error groups by error class and consumer group without a scan (issue 12 item 3),
-- PostgreSQL. See docs/stats.md, "Error groups per filter".
--
-- `dl_stats_groups` (0027) counted per (fingerprint, DLQ topic, source topic, status, tier),
-- so a groups page or "N match this filter" naming an error class or a consumer group fell
-- back to counting the newest 100,000 matching rows: 1.3 s on the groups page at 10M rows
-- (docs/bench.md, "2026-12-06 (11)"). Both are added to the key:
-- * `error_class` adds no row: a fingerprint hashes its error class (`fingerprint.rs`), so
--   every dead letter of a fingerprint has the same one;
-- * `consumer_group` adds few: a DLQ topic is usually written by one consumer group.
-- Both are '' where the dead letter has none; a filter value is never empty
-- (`filter.rs`), so '' never matches one.
--
-- Rebuilt from `dead_letters` (one GROUP BY over every row), with writers to `dead_letters`
-- held off until this transaction commits, so no row is counted twice or missed. The trigger
-- functions of 0027 / 0032 are replaced over the wider key (same lock order: each upsert
-- sorted by the whole key).
LOCK TABLE dead_letters IN SHARE ROW EXCLUSIVE MODE;
DROP TABLE dl_stats_groups;

CREATE TABLE dl_stats_groups (
    fingerprint    TEXT   NOT NULL,
    dlq_topic      TEXT   NOT NULL,
    source_topic   TEXT   NOT NULL,
    consumer_group TEXT   NOT NULL,
    error_class    TEXT   NOT NULL,
    status         TEXT   NOT NULL,
    tier           TEXT   NOT NULL,
    n              BIGINT NOT NULL,
    last_seen_ms   BIGINT NOT NULL,
    PRIMARY KEY (fingerprint, dlq_topic, source_topic, consumer_group, error_class, status, tier)
);

CREATE OR REPLACE FUNCTION dl_stats_groups_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dl_stats_groups AS g
        (fingerprint, dlq_topic, source_topic, consumer_group, error_class, status, tier, n,
         last_seen_ms)
    SELECT fingerprint, dlq_topic, COALESCE(source_topic, ''), COALESCE(consumer_group, ''),
           COALESCE(error_class, ''), status, COALESCE(tier, ''),
           COUNT(*), MAX(dead_lettered_at_ms)
      FROM new_rows GROUP BY 1, 2, 3, 4, 5, 6, 7 ORDER BY 1, 2, 3, 4, 5, 6, 7
    ON CONFLICT (fingerprint, dlq_topic, source_topic, consumer_group, error_class, status, tier)
    DO UPDATE SET
        n = g.n + EXCLUDED.n,
        last_seen_ms = GREATEST(g.last_seen_ms, EXCLUDED.last_seen_ms);
    RETURN NULL;
END
$$;

-- Rows that left a key add (-1, no time), rows that entered one (+1, their time); keys whose
-- changes cancel out are left alone.
CREATE OR REPLACE FUNCTION dl_stats_groups_after_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH moved AS MATERIALIZED (
        SELECT o.fingerprint AS o_fp, o.dlq_topic AS o_dlq, COALESCE(o.source_topic, '') AS o_src,
               COALESCE(o.consumer_group, '') AS o_cg, COALESCE(o.error_class, '') AS o_class,
               o.status AS o_status, COALESCE(o.tier, '') AS o_tier,
               n.fingerprint AS n_fp, n.dlq_topic AS n_dlq, COALESCE(n.source_topic, '') AS n_src,
               COALESCE(n.consumer_group, '') AS n_cg, COALESCE(n.error_class, '') AS n_class,
               n.status AS n_status, COALESCE(n.tier, '') AS n_tier, n.dead_lettered_at_ms AS t
          FROM new_rows n JOIN old_rows o ON o.id = n.id
         WHERE o.status IS DISTINCT FROM n.status
            OR o.tier IS DISTINCT FROM n.tier
            OR o.dlq_topic IS DISTINCT FROM n.dlq_topic
            OR o.source_topic IS DISTINCT FROM n.source_topic
            OR o.consumer_group IS DISTINCT FROM n.consumer_group
            OR o.error_class IS DISTINCT FROM n.error_class
            OR o.fingerprint IS DISTINCT FROM n.fingerprint
    )
    INSERT INTO dl_stats_groups AS g
        (fingerprint, dlq_topic, source_topic, consumer_group, error_class, status, tier, n,
         last_seen_ms)
    SELECT fingerprint, dlq_topic, source_topic, consumer_group, error_class, status, tier,
           SUM(dn), COALESCE(MAX(t), -9223372036854775808)
      FROM (SELECT n_fp AS fingerprint, n_dlq AS dlq_topic, n_src AS source_topic,
                   n_cg AS consumer_group, n_class AS error_class, n_status AS status,
                   n_tier AS tier, 1 AS dn, t FROM moved
            UNION ALL
            SELECT o_fp, o_dlq, o_src, o_cg, o_class, o_status, o_tier, -1, NULL FROM moved) d
     GROUP BY 1, 2, 3, 4, 5, 6, 7
    HAVING SUM(dn) <> 0
     ORDER BY 1, 2, 3, 4, 5, 6, 7
    ON CONFLICT (fingerprint, dlq_topic, source_topic, consumer_group, error_class, status, tier)
    DO UPDATE SET
        n = g.n + EXCLUDED.n,
        last_seen_ms = GREATEST(g.last_seen_ms, EXCLUDED.last_seen_ms);
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION dl_stats_groups_after_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dl_stats_groups AS g
        (fingerprint, dlq_topic, source_topic, consumer_group, error_class, status, tier, n,
         last_seen_ms)
    SELECT fingerprint, dlq_topic, COALESCE(source_topic, ''), COALESCE(consumer_group, ''),
           COALESCE(error_class, ''), status, COALESCE(tier, ''),
           -COUNT(*), -9223372036854775808
      FROM old_rows GROUP BY 1, 2, 3, 4, 5, 6, 7 ORDER BY 1, 2, 3, 4, 5, 6, 7
    ON CONFLICT (fingerprint, dlq_topic, source_topic, consumer_group, error_class, status, tier)
    DO UPDATE SET n = g.n + EXCLUDED.n;
    RETURN NULL;
END
$$;

-- What is already stored.
INSERT INTO dl_stats_groups
    (fingerprint, dlq_topic, source_topic, consumer_group, error_class, status, tier, n,
     last_seen_ms)
SELECT fingerprint, dlq_topic, COALESCE(source_topic, ''), COALESCE(consumer_group, ''),
       COALESCE(error_class, ''), status, COALESCE(tier, ''), COUNT(*), MAX(dead_lettered_at_ms)
  FROM dead_letters GROUP BY 1, 2, 3, 4, 5, 6, 7;
