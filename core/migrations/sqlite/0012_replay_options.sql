-- Replay power tools (issue 9): a replay job's publishing options, JSON of
-- `redrive_core::actions::ReplayOptions` (canary, transform, order, placement, lag gate).
-- '{}' is a plain replay, which is what every job written before this migration was.
ALTER TABLE replay_jobs ADD COLUMN options TEXT NOT NULL DEFAULT '{}';
