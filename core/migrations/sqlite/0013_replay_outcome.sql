-- Replay outcome tracking (issue 9, item 1), SQLite. See docs/replay.md, "Outcome".
--
-- A dead letter that arrives from an earlier replay (its headers carry redrive's replay
-- headers back, or its source coordinates are where the relay published, or it names the
-- same source record or message id as a replayed dead letter) is linked to that earlier dead
-- letter by ingest, in the insert's transaction. The earlier one becomes `re_failed`.
--
-- The link is a table of its own, not columns of `dead_letters`: SQLite 3.46 (the one sqlx
-- bundles) reads wrong values (`length(value)` as NULL) through the index on the VIRTUAL
-- generated column `record_bytes` (0008) once columns are added after it — the maintained
-- stats then disagreed with `dead_letters` (`server/tests/it/stats.rs`). Do not ALTER TABLE
-- dead_letters ADD COLUMN on SQLite.

-- One row per dead letter that came back: the earlier dead letter it came back from (no
-- foreign key: retention may purge the earlier one, and the link then names an id that is
-- gone), its repeat-failure count (the earlier one's + 1), how the link was found
-- (idempotency_key | dead_letter_id | published_position | source_position | message_id)
-- and the replay job whose publish came back (when known).
CREATE TABLE dead_letter_links (
    dead_letter_id  INTEGER PRIMARY KEY REFERENCES dead_letters (id) ON DELETE CASCADE,
    earlier_id      INTEGER NOT NULL,
    repeat_failures INTEGER NOT NULL,
    linked_via      TEXT    NOT NULL,
    job_id          TEXT,
    linked_at_ms    INTEGER NOT NULL
);
-- The later dead letters of one earlier one (the chain on the detail page).
CREATE INDEX dead_letter_links_by_earlier ON dead_letter_links (earlier_id, dead_letter_id);

-- Fallback link: a new dead letter naming the same source record as a replayed one. Only
-- replayed rows are in it, so ingest's inserts (replay_count 0) do not pay for it.
CREATE INDEX dead_letters_replayed_by_source
    ON dead_letters (source_topic, source_partition, source_offset) WHERE replay_count > 0;

-- The dead letter that came back from this publish (NULL: none seen), and when it was
-- ingested. A publish comes back at most once as far as the job's count goes.
ALTER TABLE outbox ADD COLUMN refailed_by_id INTEGER;
ALTER TABLE outbox ADD COLUMN refailed_at_ms INTEGER;
-- Fallback link: a new dead letter whose source coordinates are where a replay published.
CREATE INDEX outbox_by_published_position
    ON outbox (target_topic, published_partition, published_offset)
    WHERE published_offset IS NOT NULL;

-- Published records of the job that came back as dead letters (distinct outbox rows).
ALTER TABLE replay_jobs ADD COLUMN refailed INTEGER NOT NULL DEFAULT 0;
