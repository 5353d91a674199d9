-- Error groups by error class and consumer group without a scan (issue 12 item 3), SQLite.
-- See docs/stats.md, "Error groups per filter".
--
-- `dl_stats_groups` (0027) counted per (fingerprint, DLQ topic, source topic, status, tier),
-- so a groups page or "N match this filter" naming an error class or a consumer group fell
-- back to counting the newest 100,000 matching rows: 1.2 s on the groups page at 10M rows
-- (docs/bench.md, "2026-12-06 (11)"). Both are added to the key:
-- * `error_class` adds no row: a fingerprint hashes its error class (`fingerprint.rs`), so
--   every dead letter of a fingerprint has the same one;
-- * `consumer_group` adds few: a DLQ topic is usually written by one consumer group.
-- Both are '' where the dead letter has none; a filter value is never empty
-- (`filter.rs`), so '' never matches one.
--
-- Rebuilt from `dead_letters` (one GROUP BY over every row: tens of seconds at 10M rows),
-- with the triggers of 0027 / 0029 recreated over the wider key.
DROP TRIGGER dl_stats_groups_insert;
DROP TRIGGER dl_stats_groups_update;
DROP TRIGGER dl_stats_groups_delete;
DROP TABLE dl_stats_groups;

CREATE TABLE dl_stats_groups (
    fingerprint    TEXT    NOT NULL,
    dlq_topic      TEXT    NOT NULL,
    source_topic   TEXT    NOT NULL,
    consumer_group TEXT    NOT NULL,
    error_class    TEXT    NOT NULL,
    status         TEXT    NOT NULL,
    tier           TEXT    NOT NULL,
    n              INTEGER NOT NULL,
    last_seen_ms   INTEGER NOT NULL,
    PRIMARY KEY (fingerprint, dlq_topic, source_topic, consumer_group, error_class, status, tier)
) WITHOUT ROWID;

CREATE TRIGGER dl_stats_groups_insert AFTER INSERT ON dead_letters
BEGIN
    INSERT INTO dl_stats_groups
        (fingerprint, dlq_topic, source_topic, consumer_group, error_class, status, tier, n,
         last_seen_ms)
    VALUES (NEW.fingerprint, NEW.dlq_topic, COALESCE(NEW.source_topic, ''),
            COALESCE(NEW.consumer_group, ''), COALESCE(NEW.error_class, ''), NEW.status,
            COALESCE(NEW.tier, ''), 1, NEW.dead_lettered_at_ms)
    ON CONFLICT (fingerprint, dlq_topic, source_topic, consumer_group, error_class, status, tier)
    DO UPDATE SET
        n = n + 1,
        last_seen_ms = max(last_seen_ms, excluded.last_seen_ms);
END;

CREATE TRIGGER dl_stats_groups_update
AFTER UPDATE OF status, tier, dlq_topic, source_topic, consumer_group, error_class, fingerprint
ON dead_letters
WHEN OLD.status IS NOT NEW.status
  OR OLD.tier IS NOT NEW.tier
  OR OLD.dlq_topic IS NOT NEW.dlq_topic
  OR OLD.source_topic IS NOT NEW.source_topic
  OR OLD.consumer_group IS NOT NEW.consumer_group
  OR OLD.error_class IS NOT NEW.error_class
  OR OLD.fingerprint IS NOT NEW.fingerprint
BEGIN
    UPDATE dl_stats_groups SET n = n - 1
     WHERE fingerprint = OLD.fingerprint AND dlq_topic = OLD.dlq_topic
       AND source_topic = COALESCE(OLD.source_topic, '')
       AND consumer_group = COALESCE(OLD.consumer_group, '')
       AND error_class = COALESCE(OLD.error_class, '')
       AND status = OLD.status AND tier = COALESCE(OLD.tier, '');

    INSERT INTO dl_stats_groups
        (fingerprint, dlq_topic, source_topic, consumer_group, error_class, status, tier, n,
         last_seen_ms)
    VALUES (NEW.fingerprint, NEW.dlq_topic, COALESCE(NEW.source_topic, ''),
            COALESCE(NEW.consumer_group, ''), COALESCE(NEW.error_class, ''), NEW.status,
            COALESCE(NEW.tier, ''), 1, NEW.dead_lettered_at_ms)
    ON CONFLICT (fingerprint, dlq_topic, source_topic, consumer_group, error_class, status, tier)
    DO UPDATE SET
        n = n + 1,
        last_seen_ms = max(last_seen_ms, excluded.last_seen_ms);
END;

CREATE TRIGGER dl_stats_groups_delete AFTER DELETE ON dead_letters
BEGIN
    UPDATE dl_stats_groups SET n = n - 1
     WHERE fingerprint = OLD.fingerprint AND dlq_topic = OLD.dlq_topic
       AND source_topic = COALESCE(OLD.source_topic, '')
       AND consumer_group = COALESCE(OLD.consumer_group, '')
       AND error_class = COALESCE(OLD.error_class, '')
       AND status = OLD.status AND tier = COALESCE(OLD.tier, '');
END;

-- What is already stored.
INSERT INTO dl_stats_groups
    (fingerprint, dlq_topic, source_topic, consumer_group, error_class, status, tier, n,
     last_seen_ms)
SELECT fingerprint, dlq_topic, COALESCE(source_topic, ''), COALESCE(consumer_group, ''),
       COALESCE(error_class, ''), status, COALESCE(tier, ''), COUNT(*), MAX(dead_lettered_at_ms)
  FROM dead_letters GROUP BY 1, 2, 3, 4, 5, 6, 7;
