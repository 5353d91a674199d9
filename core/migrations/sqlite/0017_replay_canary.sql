-- Canary replay (issue 9, item 3; docs/replay.md, "Canary replay"), SQLite.
-- A job with `ReplayOptions::canary` publishes its first records (the canary) alone, waits,
-- counts how many of them came back as dead letters (`outbox.refailed_by_id`, migration
-- 0013), and pauses itself over the threshold or goes on. Its state is here, not in a relay's
-- memory, so a relay restart or another instance continues it. All NULL for a job without a
-- canary.

-- 'starting' (the size is not known yet: nothing is claimed), 'publishing' (claims capped at
-- the canary's size), 'watching' (every canary row is published or failed; nothing is
-- claimed until canary_watch_until_ms), 'passed', 'failed' (the job paused itself).
ALTER TABLE replay_jobs ADD COLUMN canary_state TEXT;
-- Rows in the canary: the option's `records`, or ceil(percent of the job's total), at most
-- the total; fixed when the job first runs (for a bulk replay, once every row is queued).
ALTER TABLE replay_jobs ADD COLUMN canary_size INTEGER;
-- End of the watch, epoch ms: the last canary row became final + `wait_ms`.
ALTER TABLE replay_jobs ADD COLUMN canary_watch_until_ms INTEGER;
-- At the verdict: canary rows published, and of them the ones that came back.
ALTER TABLE replay_jobs ADD COLUMN canary_published INTEGER;
ALTER TABLE replay_jobs ADD COLUMN canary_refailed INTEGER;
-- When the verdict was given, epoch ms, and why (the job's pause reason when it failed).
ALTER TABLE replay_jobs ADD COLUMN canary_decided_at_ms INTEGER;
ALTER TABLE replay_jobs ADD COLUMN canary_reason TEXT;
-- The `canary_failed` alert rule reads the failed canaries by verdict time.
CREATE INDEX replay_jobs_canary_failed ON replay_jobs (canary_decided_at_ms)
    WHERE canary_state = 'failed';

-- 1 for the outbox rows the canary claimed (set by the claim that took them, so held rows of
-- per-key order join the canary only when they are released and claimed); retries of a canary
-- row stay in it.
ALTER TABLE outbox ADD COLUMN canary INTEGER NOT NULL DEFAULT 0;
-- The canary's rows of a job: counted on every relay poll while the canary runs.
CREATE INDEX outbox_canary ON outbox (job_id, status) WHERE canary = 1;
