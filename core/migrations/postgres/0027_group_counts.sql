-- Error groups counted without a scan (issue 12 item 3), PostgreSQL. See docs/stats.md,
-- "Error groups per filter".
--
-- Stored dead letters per (fingerprint, DLQ topic, source topic, status, tier): every
-- dimension the groups page and "N match this filter" filter on by default (the default view
-- is "not deleted, not in the archive tier"). Statement triggers with transition tables keep
-- it exact in the same transaction as every write, as migration 0006 does for
-- `dl_stats_counts`: one multi-row INSERT / UPDATE / DELETE adds one aggregated upsert per
-- touched key, taking the keys in sorted order, so concurrent writers lock the shared counter
-- rows in the same order. Insert +1; a change of status, tier (the sorter, a tier move), DLQ
-- or source topic -1 under the old key and +1 under the new one; a row deletion
-- (retention's purge) -1.
--
-- `source_topic` and `tier` are '' where the dead letter has none (a Kafka topic name is
-- never empty, a tier never is), so they can be part of the primary key.
--
-- `last_seen_ms` is the latest `dead_lettered_at_ms` ever counted under the key: exact while
-- rows only arrive, an upper bound once some have left it (never lowered, which would need a
-- scan). Readers use it only to order groups of equal size; the first / last seen and the
-- example a page shows are read from `dead_letters` for the shown groups only (index seeks
-- on `dead_letters_by_fingerprint`). Rows may reach n = 0 (readers skip them;
-- `Store::compact_stats` deletes them).
CREATE TABLE dl_stats_groups (
    fingerprint  TEXT   NOT NULL,
    dlq_topic    TEXT   NOT NULL,
    source_topic TEXT   NOT NULL,
    status       TEXT   NOT NULL,
    tier         TEXT   NOT NULL,
    n            BIGINT NOT NULL,
    last_seen_ms BIGINT NOT NULL,
    PRIMARY KEY (fingerprint, dlq_topic, source_topic, status, tier)
);

CREATE FUNCTION dl_stats_groups_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dl_stats_groups AS g
        (fingerprint, dlq_topic, source_topic, status, tier, n, last_seen_ms)
    SELECT fingerprint, dlq_topic, COALESCE(source_topic, ''), status, COALESCE(tier, ''),
           COUNT(*), MAX(dead_lettered_at_ms)
      FROM new_rows GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5
    ON CONFLICT (fingerprint, dlq_topic, source_topic, status, tier) DO UPDATE SET
        n = g.n + EXCLUDED.n,
        last_seen_ms = GREATEST(g.last_seen_ms, EXCLUDED.last_seen_ms);
    RETURN NULL;
END
$$;

-- Rows that left a key add (-1, no time), rows that entered one (+1, their time); keys whose
-- changes cancel out are left alone.
CREATE FUNCTION dl_stats_groups_after_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dl_stats_groups AS g
        (fingerprint, dlq_topic, source_topic, status, tier, n, last_seen_ms)
    SELECT fingerprint, dlq_topic, source_topic, status, tier, SUM(dn),
           COALESCE(MAX(t), -9223372036854775808)
      FROM (SELECT n.fingerprint, n.dlq_topic, COALESCE(n.source_topic, '') AS source_topic,
                   n.status, COALESCE(n.tier, '') AS tier, 1 AS dn,
                   n.dead_lettered_at_ms AS t
              FROM new_rows n JOIN old_rows o ON o.id = n.id
             WHERE o.status IS DISTINCT FROM n.status
                OR o.tier IS DISTINCT FROM n.tier
                OR o.dlq_topic IS DISTINCT FROM n.dlq_topic
                OR o.source_topic IS DISTINCT FROM n.source_topic
                OR o.fingerprint IS DISTINCT FROM n.fingerprint
            UNION ALL
            SELECT o.fingerprint, o.dlq_topic, COALESCE(o.source_topic, ''), o.status,
                   COALESCE(o.tier, ''), -1, NULL
              FROM old_rows o JOIN new_rows n ON n.id = o.id
             WHERE o.status IS DISTINCT FROM n.status
                OR o.tier IS DISTINCT FROM n.tier
                OR o.dlq_topic IS DISTINCT FROM n.dlq_topic
                OR o.source_topic IS DISTINCT FROM n.source_topic
                OR o.fingerprint IS DISTINCT FROM n.fingerprint) d
     GROUP BY 1, 2, 3, 4, 5
    HAVING SUM(dn) <> 0
     ORDER BY 1, 2, 3, 4, 5
    ON CONFLICT (fingerprint, dlq_topic, source_topic, status, tier) DO UPDATE SET
        n = g.n + EXCLUDED.n,
        last_seen_ms = GREATEST(g.last_seen_ms, EXCLUDED.last_seen_ms);
    RETURN NULL;
END
$$;

CREATE FUNCTION dl_stats_groups_after_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dl_stats_groups AS g
        (fingerprint, dlq_topic, source_topic, status, tier, n, last_seen_ms)
    SELECT fingerprint, dlq_topic, COALESCE(source_topic, ''), status, COALESCE(tier, ''),
           -COUNT(*), -9223372036854775808
      FROM old_rows GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5
    ON CONFLICT (fingerprint, dlq_topic, source_topic, status, tier) DO UPDATE SET
        n = g.n + EXCLUDED.n;
    RETURN NULL;
END
$$;

CREATE TRIGGER dl_stats_groups_insert AFTER INSERT ON dead_letters
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dl_stats_groups_after_insert();
CREATE TRIGGER dl_stats_groups_update AFTER UPDATE ON dead_letters
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dl_stats_groups_after_update();
CREATE TRIGGER dl_stats_groups_delete AFTER DELETE ON dead_letters
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dl_stats_groups_after_delete();

-- What is already stored.
INSERT INTO dl_stats_groups (fingerprint, dlq_topic, source_topic, status, tier, n, last_seen_ms)
SELECT fingerprint, dlq_topic, COALESCE(source_topic, ''), status, COALESCE(tier, ''),
       COUNT(*), MAX(dead_lettered_at_ms)
  FROM dead_letters GROUP BY 1, 2, 3, 4, 5;
