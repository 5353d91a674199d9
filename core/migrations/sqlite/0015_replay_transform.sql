-- Transform on replay (issue 9, `docs/replay.md`): what a job's script did, per job.
-- `transformed`: published as the script returned them; `skipped_by_script`: the script
-- skipped them (their outbox rows end 'skipped', the dead letters go back to their status
-- before the replay); `failed_by_script`: of `failed`, those whose error is the script's.
-- A finished job has total = published + failed + cancelled + skipped_by_script.
ALTER TABLE replay_jobs ADD COLUMN transformed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE replay_jobs ADD COLUMN skipped_by_script INTEGER NOT NULL DEFAULT 0;
ALTER TABLE replay_jobs ADD COLUMN failed_by_script INTEGER NOT NULL DEFAULT 0;
