-- Replay outcome tracking (issue 9, item 1), PostgreSQL. See docs/replay.md, "Outcome", and
-- the SQLite twin for why the link is a table of its own (kept the same here).

CREATE TABLE dead_letter_links (
    dead_letter_id  BIGINT  PRIMARY KEY REFERENCES dead_letters (id) ON DELETE CASCADE,
    earlier_id      BIGINT  NOT NULL,
    repeat_failures INTEGER NOT NULL,
    linked_via      TEXT    NOT NULL,
    job_id          TEXT,
    linked_at_ms    BIGINT  NOT NULL
);
CREATE INDEX dead_letter_links_by_earlier ON dead_letter_links (earlier_id, dead_letter_id);

CREATE INDEX dead_letters_replayed_by_source
    ON dead_letters (source_topic, source_partition, source_offset) WHERE replay_count > 0;

ALTER TABLE outbox ADD COLUMN refailed_by_id BIGINT;
ALTER TABLE outbox ADD COLUMN refailed_at_ms BIGINT;
CREATE INDEX outbox_by_published_position
    ON outbox (target_topic, published_partition, published_offset)
    WHERE published_offset IS NOT NULL;

ALTER TABLE replay_jobs ADD COLUMN refailed BIGINT NOT NULL DEFAULT 0;
