-- Automatic reprocessing, the sorting side (issue 13; docs/automation.md), helper `tiers`.
--
-- The manual-replay check of the loop guard counts the loop-guarded dead letters of a
-- selection (few); the alerts `poison_arrived` and `escalated` read the dead letters that
-- entered the poison tier, or were escalated, in a time window.
CREATE INDEX dead_letter_tiers_loop_guarded ON dead_letter_tiers (dead_letter_id)
    WHERE loop_guarded = 1;
CREATE INDEX dead_letter_tiers_by_tier_time ON dead_letter_tiers (tier, tier_at_ms);
CREATE INDEX dead_letter_tiers_escalated ON dead_letter_tiers (tier_at_ms)
    WHERE escalated = 1;
