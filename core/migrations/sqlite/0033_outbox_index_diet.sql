-- One index fewer on the outbox, one more on replay jobs (issue 12 item 5; docs/bench.md,
-- "2026-12-06 (7)").
--
-- `outbox_by_job (job_id, status, id)` is `outbox_claimable (job_id, status, held, id)`
-- (0016) without `held`: every statement that read it is one range of `outbox_claimable` (a
-- claim's expired leases now say `held = 0`, which a claimed row always is: only pending
-- rows are ever held), and each row's every status change rewrote both.
--
-- `outbox_due (status, next_attempt_at_ms)` stays: the relay's marks find a claim's rows
-- through it on PostgreSQL before the outbox is analyzed (without it, a sequential scan of
-- the outbox per mark), and its sweep for expired leases reads it.
DROP INDEX outbox_by_job;

-- An automation round counts what its rule's replays published (`Store::refail_tally`: the
-- rule's jobs, by `created_by`, joined to their published outbox rows). SQLite read every
-- published outbox row of every job to find the rule's, holding the write connection, once
-- per round; the statement now starts from the jobs (a `CROSS JOIN`), which this index
-- finds by creator, and each job's rows are a range of `outbox_claimable`.
CREATE INDEX replay_jobs_by_creator ON replay_jobs (created_by, created_at_ms);
