-- Live arrivals per minute (issue #11), SQLite. See docs/stats.md.
--
-- The overview's "new in the last hour / 24 h" link to the list `/?from=<window start>`,
-- which shows live dead letters only (every status but `deleted`); a figure counted from the
-- arrival history (`n`, which a delete or a purge does not take back) showed more than its
-- list. `live_n` is, per (DLQ topic, source topic, minute of `dead_lettered_at_ms`), the dead
-- letters stored now with a status other than `deleted`: exactly what that list counts. It
-- moves with every insert, status change into or out of `deleted`, and row deletion (purge),
-- in the same transaction, as the other aggregates of 0006. `n` stays the arrival history
-- (the rate chart, the alert rules). A status change of a dead letter whose minute bucket was
-- already compacted (older than 25 h) may leave a bucket with `n = 0`; compaction drops it.
ALTER TABLE dl_stats_minutes ADD COLUMN live_n INTEGER NOT NULL DEFAULT 0;

-- The insert trigger of 0006, with `live_n` in the same upsert (one statement per bucket).
DROP TRIGGER dl_stats_insert;
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

-- Into or out of `deleted` (or a move to another topic pair or minute): -1 where it was
-- live, +1 where it is live now.
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

CREATE TRIGGER dl_stats_live_minutes_delete AFTER DELETE ON dead_letters
WHEN OLD.status <> 'deleted'
BEGIN
    UPDATE dl_stats_minutes SET live_n = live_n - 1
     WHERE dlq_topic = OLD.dlq_topic AND source_topic = COALESCE(OLD.source_topic, '')
       AND minute_ms = (OLD.dead_lettered_at_ms / 60000) * 60000;
END;

-- What is already stored: every kept bucket's live dead letters (the buckets hold the last
-- 25 h, so this reads the dead letters of those 25 h, a range of `dead_letters_by_dlq` each).
UPDATE dl_stats_minutes
   SET live_n = (SELECT COUNT(*) FROM dead_letters d
                  WHERE d.dlq_topic = dl_stats_minutes.dlq_topic
                    AND COALESCE(d.source_topic, '') = dl_stats_minutes.source_topic
                    AND d.status <> 'deleted'
                    AND d.dead_lettered_at_ms >= dl_stats_minutes.minute_ms
                    AND d.dead_lettered_at_ms < dl_stats_minutes.minute_ms + 60000);
