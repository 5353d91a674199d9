-- No index on the outbox leads with `status` any more (issue 12 item 5; docs/bench.md,
-- "2026-12-06 (8)").
--
-- `outbox_due (status, next_attempt_at_ms)` (0002) was read by one statement that needs it,
-- the sweep for claims whose lease ran out (`Store::jobs_with_expired_claims`: every job's
-- claimed rows), and it was a trap for the others. Claimed rows are few (the relay's
-- in-flight claims); pending rows can be millions. Before ANALYZE has seen a new job's rows,
-- PostgreSQL estimates `status = 'pending'` at one row and read a job's claim, `hold_later`
-- and `release_next` (per-key order, once per mark) through `outbox_due` — every pending row
-- of every job — instead of the job's own `outbox_claimable` or `outbox_by_order_key`:
-- `release_next` took 4.7 s instead of 18-31 ms on an outbox of 450,000 rows.
--
-- The sweep reads this partial index of the claimed rows instead. The relay's marks find
-- their rows by primary key whatever the statistics (`outbox_mark.rs`: `NOT INDEXED` on
-- SQLite, which under an empty outbox's statistics would otherwise scan this index once per
-- marked row).
DROP INDEX outbox_due;
CREATE INDEX outbox_leases ON outbox (lease_until_ms) WHERE status = 'claimed';
