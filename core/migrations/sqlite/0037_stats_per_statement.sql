-- Aggregates kept per statement for ingest's inserts and a replay's status changes (SQLite).
--
-- SQLite's triggers run once per row: an insert ran 7 aggregate upserts per dead letter and a
-- status change 6 to 8 statements per row. ingest's batch insert, a bulk replay's chunk
-- (`replay_pending`) and the relay's mark (`replayed`) now apply the same changes themselves,
-- grouped, one statement per aggregate for all the statement's rows
-- (`core/src/store/stats/grouped.rs`). Such a write turns `stats_switch.grouped` on just
-- before its statement and off just after, inside its write transaction (SQLite has one
-- writer at a time, so no other write runs meanwhile), and these triggers skip the rows it
-- writes. Every other write is counted by the triggers, row by row, as before.
--
-- A switch, not a column of `dead_letters`: a column added with ALTER TABLE made SQLite
-- 3.46.0 read a wrong sum for the expression of the virtual column `record_bytes` through
-- `dead_letters_retention` (the key's bytes alone), and a rebuild like migration 0029's
-- would copy every row.

CREATE TABLE stats_switch (
    one     INTEGER PRIMARY KEY CHECK (one = 1),
    grouped INTEGER NOT NULL
);
INSERT INTO stats_switch (one, grouped) VALUES (1, 0);

DROP TRIGGER dl_stats_insert;
CREATE TRIGGER dl_stats_insert AFTER INSERT ON dead_letters
WHEN (SELECT grouped FROM stats_switch) = 0
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

DROP TRIGGER dl_stats_groups_insert;
CREATE TRIGGER dl_stats_groups_insert AFTER INSERT ON dead_letters
WHEN (SELECT grouped FROM stats_switch) = 0
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

DROP TRIGGER dl_stats_group_hours_insert;
CREATE TRIGGER dl_stats_group_hours_insert AFTER INSERT ON dead_letters
WHEN (SELECT grouped FROM stats_switch) = 0
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

DROP TRIGGER dl_stats_update;
CREATE TRIGGER dl_stats_update AFTER UPDATE OF status, dlq_topic, source_topic ON dead_letters
WHEN (SELECT grouped FROM stats_switch) = 0
 AND (OLD.status IS NOT NEW.status
       OR OLD.dlq_topic IS NOT NEW.dlq_topic
       OR OLD.source_topic IS NOT NEW.source_topic)
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

DROP TRIGGER dl_stats_live_minutes_update;
CREATE TRIGGER dl_stats_live_minutes_update
AFTER UPDATE OF status, dlq_topic, source_topic, dead_lettered_at_ms ON dead_letters
WHEN (SELECT grouped FROM stats_switch) = 0
 AND ((OLD.status = 'deleted') IS NOT (NEW.status = 'deleted')
       OR OLD.dlq_topic IS NOT NEW.dlq_topic
       OR OLD.source_topic IS NOT NEW.source_topic
       OR OLD.dead_lettered_at_ms IS NOT NEW.dead_lettered_at_ms)
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

DROP TRIGGER dl_stats_groups_update;
CREATE TRIGGER dl_stats_groups_update
AFTER UPDATE OF status, tier, dlq_topic, source_topic, consumer_group, error_class, fingerprint
ON dead_letters
WHEN (SELECT grouped FROM stats_switch) = 0
 AND (OLD.status IS NOT NEW.status
       OR OLD.tier IS NOT NEW.tier
       OR OLD.dlq_topic IS NOT NEW.dlq_topic
       OR OLD.source_topic IS NOT NEW.source_topic
       OR OLD.consumer_group IS NOT NEW.consumer_group
       OR OLD.error_class IS NOT NEW.error_class
       OR OLD.fingerprint IS NOT NEW.fingerprint)
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

DROP TRIGGER dl_stats_group_hours_update;
CREATE TRIGGER dl_stats_group_hours_update
AFTER UPDATE OF status, tier, dlq_topic, source_topic, consumer_group, error_class, fingerprint,
                dead_lettered_at_ms
ON dead_letters
WHEN (SELECT grouped FROM stats_switch) = 0
 AND (OLD.status IS NOT NEW.status
       OR OLD.tier IS NOT NEW.tier
       OR OLD.dlq_topic IS NOT NEW.dlq_topic
       OR OLD.source_topic IS NOT NEW.source_topic
       OR OLD.consumer_group IS NOT NEW.consumer_group
       OR OLD.error_class IS NOT NEW.error_class
       OR OLD.fingerprint IS NOT NEW.fingerprint
       OR OLD.dead_lettered_at_ms / 3600000 IS NOT NEW.dead_lettered_at_ms / 3600000)
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
