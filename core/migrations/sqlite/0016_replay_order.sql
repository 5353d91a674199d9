-- Replay order and placement (issue 9, item 7), SQLite.
-- Per-key order (docs/replay.md, "Per-key order"): the records of one job with the same
-- target topic and key are published one at a time, in source order. Each outbox row knows
-- its key group and its place in it; only the group's head (its earliest row not yet
-- published) is claimable, the others are `held` until the one before them is published.

-- The key group: the first 8 bytes of SHA-256(target topic, 0x00, key) as a signed integer
-- (`core/src/replay/order.rs`). NULL = no order constraint (a null key, or a job with
-- `unordered`); every row written before this migration.
ALTER TABLE outbox ADD COLUMN order_key INTEGER;
-- The row's place in its group: the source offset the convention decoded, or, without one,
-- 2^62 + the dead letter's id (ingest order, after every row with a source offset).
-- Ties go by outbox id.
ALTER TABLE outbox ADD COLUMN order_pos INTEGER;
-- 1 while an earlier row of the same group is not yet published (pending, retrying, claimed,
-- in flight); such a row is never claimed. 0 for the group's head and for unordered rows.
ALTER TABLE outbox ADD COLUMN held INTEGER NOT NULL DEFAULT 0;

-- The claim: a job's due pending rows that are not held, in id order, an index range.
CREATE INDEX outbox_claimable ON outbox (job_id, status, held, id);
-- The next row of a group once its head is published, and a group's head when a bulk
-- replay adds a chunk: one index probe per group, only over ordered rows.
CREATE INDEX outbox_by_order_key ON outbox (job_id, order_key, held, order_pos, id)
    WHERE order_key IS NOT NULL;

-- Lag-aware replay (issue 9, item 4; docs/replay.md, "Lag-aware replay"): what the relay last
-- read of the job's consumer group (`ReplayOptions::lag_gate`), for the job page and JSON.
-- All NULL for a job without a lag gate, and until the first read.
ALTER TABLE replay_jobs ADD COLUMN lag_records INTEGER;        -- the group's lag on the job's target topics, records
ALTER TABLE replay_jobs ADD COLUMN lag_read_at_ms INTEGER;     -- when it was read (or failed to be read)
ALTER TABLE replay_jobs ADD COLUMN lag_held_since_ms INTEGER;  -- held back by lag (or an unreadable lag) since; NULL = publishing
ALTER TABLE replay_jobs ADD COLUMN lag_error TEXT;        -- why the lag cannot be read; NULL = it was read
