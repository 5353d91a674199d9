-- Error groups and "N match this filter" over a time range without a scan (issue 12 item 3),
-- SQLite. See docs/stats.md, "Error groups per filter".
--
-- A filter with `from` / `to` (dead_lettered_at) was answered by counting the newest 100,000
-- matching rows: 808 ms for `/groups?from=<a day ago>` at 10M rows (docs/bench.md,
-- "2026-12-06 (11)"), and only "at least" above that. `dl_stats_group_hours` keeps the
-- stored dead letters per hour of dead-lettering and the key of `dl_stats_groups` (0035), so
-- a range's whole hours are summed from it; the partial hours at its ends are counted from
-- the rows (store/group_counts.rs, bounded). Kept exact by row triggers in the same
-- transaction as every write, as `dl_stats_groups` is; `hour_ms` is `dead_lettered_at_ms`
-- floored to the hour (UTC epoch ms), which no write of redrive's changes (the triggers
-- follow it anyway).
--
-- Filled from `dead_letters` (one GROUP BY over every row: tens of seconds at 10M rows).
CREATE TABLE dl_stats_group_hours (
    hour_ms        INTEGER NOT NULL,
    fingerprint    TEXT    NOT NULL,
    dlq_topic      TEXT    NOT NULL,
    source_topic   TEXT    NOT NULL,
    consumer_group TEXT    NOT NULL,
    error_class    TEXT    NOT NULL,
    status         TEXT    NOT NULL,
    tier           TEXT    NOT NULL,
    n              INTEGER NOT NULL,
    PRIMARY KEY (hour_ms, fingerprint, dlq_topic, source_topic, consumer_group, error_class,
                 status, tier)
) WITHOUT ROWID;

CREATE TRIGGER dl_stats_group_hours_insert AFTER INSERT ON dead_letters
BEGIN
    INSERT INTO dl_stats_group_hours
        (hour_ms, fingerprint, dlq_topic, source_topic, consumer_group, error_class, status,
         tier, n)
    VALUES ((NEW.dead_lettered_at_ms / 3600000) * 3600000, NEW.fingerprint, NEW.dlq_topic,
            COALESCE(NEW.source_topic, ''), COALESCE(NEW.consumer_group, ''),
            COALESCE(NEW.error_class, ''), NEW.status, COALESCE(NEW.tier, ''), 1)
    ON CONFLICT (hour_ms, fingerprint, dlq_topic, source_topic, consumer_group, error_class,
                 status, tier)
    DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER dl_stats_group_hours_update
AFTER UPDATE OF status, tier, dlq_topic, source_topic, consumer_group, error_class, fingerprint,
                dead_lettered_at_ms
ON dead_letters
WHEN OLD.status IS NOT NEW.status
  OR OLD.tier IS NOT NEW.tier
  OR OLD.dlq_topic IS NOT NEW.dlq_topic
  OR OLD.source_topic IS NOT NEW.source_topic
  OR OLD.consumer_group IS NOT NEW.consumer_group
  OR OLD.error_class IS NOT NEW.error_class
  OR OLD.fingerprint IS NOT NEW.fingerprint
  OR OLD.dead_lettered_at_ms / 3600000 IS NOT NEW.dead_lettered_at_ms / 3600000
BEGIN
    UPDATE dl_stats_group_hours SET n = n - 1
     WHERE hour_ms = (OLD.dead_lettered_at_ms / 3600000) * 3600000
       AND fingerprint = OLD.fingerprint AND dlq_topic = OLD.dlq_topic
       AND source_topic = COALESCE(OLD.source_topic, '')
       AND consumer_group = COALESCE(OLD.consumer_group, '')
       AND error_class = COALESCE(OLD.error_class, '')
       AND status = OLD.status AND tier = COALESCE(OLD.tier, '');

    INSERT INTO dl_stats_group_hours
        (hour_ms, fingerprint, dlq_topic, source_topic, consumer_group, error_class, status,
         tier, n)
    VALUES ((NEW.dead_lettered_at_ms / 3600000) * 3600000, NEW.fingerprint, NEW.dlq_topic,
            COALESCE(NEW.source_topic, ''), COALESCE(NEW.consumer_group, ''),
            COALESCE(NEW.error_class, ''), NEW.status, COALESCE(NEW.tier, ''), 1)
    ON CONFLICT (hour_ms, fingerprint, dlq_topic, source_topic, consumer_group, error_class,
                 status, tier)
    DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER dl_stats_group_hours_delete AFTER DELETE ON dead_letters
BEGIN
    UPDATE dl_stats_group_hours SET n = n - 1
     WHERE hour_ms = (OLD.dead_lettered_at_ms / 3600000) * 3600000
       AND fingerprint = OLD.fingerprint AND dlq_topic = OLD.dlq_topic
       AND source_topic = COALESCE(OLD.source_topic, '')
       AND consumer_group = COALESCE(OLD.consumer_group, '')
       AND error_class = COALESCE(OLD.error_class, '')
       AND status = OLD.status AND tier = COALESCE(OLD.tier, '');
END;

-- What is already stored.
INSERT INTO dl_stats_group_hours
    (hour_ms, fingerprint, dlq_topic, source_topic, consumer_group, error_class, status, tier,
     n)
SELECT (dead_lettered_at_ms / 3600000) * 3600000, fingerprint, dlq_topic,
       COALESCE(source_topic, ''), COALESCE(consumer_group, ''), COALESCE(error_class, ''),
       status, COALESCE(tier, ''), COUNT(*)
  FROM dead_letters GROUP BY 1, 2, 3, 4, 5, 6, 7, 8;
