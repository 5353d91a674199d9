-- Error groups counted without a scan (issue 12 item 3), SQLite. See docs/stats.md,
-- "Error groups per filter".
--
-- Stored dead letters per (fingerprint, DLQ topic, source topic, status, tier): every
-- dimension the groups page and "N match this filter" filter on by default (the default view
-- is "not deleted, not in the archive tier"). Row triggers keep it exact in the same
-- transaction as every write, as migration 0006 does for `dl_stats_counts`: insert +1; a
-- change of status, tier (the sorter, a tier move), DLQ or source topic -1 under the old key
-- and +1 under the new one; a row deletion (retention's purge) -1.
--
-- `source_topic` and `tier` are '' where the dead letter has none (a Kafka topic name is
-- never empty, a tier never is), so they can be part of the primary key.
--
-- `last_seen_ms` is the latest `dead_lettered_at_ms` ever counted under the key: exact while
-- rows only arrive, an upper bound once some have left it (it is never lowered, which would
-- need a scan). Readers use it only to order groups of equal size; the first / last seen and
-- the example a page shows are read from `dead_letters` for the shown groups only (index
-- seeks on `dead_letters_by_fingerprint`). Rows may reach n = 0 (readers skip them;
-- `Store::compact_stats` deletes them).
CREATE TABLE dl_stats_groups (
    fingerprint  TEXT    NOT NULL,
    dlq_topic    TEXT    NOT NULL,
    source_topic TEXT    NOT NULL,
    status       TEXT    NOT NULL,
    tier         TEXT    NOT NULL,
    n            INTEGER NOT NULL,
    last_seen_ms INTEGER NOT NULL,
    PRIMARY KEY (fingerprint, dlq_topic, source_topic, status, tier)
) WITHOUT ROWID;

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

CREATE TRIGGER dl_stats_groups_delete AFTER DELETE ON dead_letters
BEGIN
    UPDATE dl_stats_groups SET n = n - 1
     WHERE fingerprint = OLD.fingerprint AND dlq_topic = OLD.dlq_topic
       AND source_topic = COALESCE(OLD.source_topic, '') AND status = OLD.status
       AND tier = COALESCE(OLD.tier, '');
END;

-- What is already stored.
INSERT INTO dl_stats_groups (fingerprint, dlq_topic, source_topic, status, tier, n, last_seen_ms)
SELECT fingerprint, dlq_topic, COALESCE(source_topic, ''), status, COALESCE(tier, ''),
       COUNT(*), MAX(dead_lettered_at_ms)
  FROM dead_letters GROUP BY 1, 2, 3, 4, 5;
