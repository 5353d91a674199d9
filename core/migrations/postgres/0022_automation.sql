-- Automatic reprocessing (issue 13; docs/automation.md), PostgreSQL.
--
-- A dead letter's tier: NULL until the leader's sorter has assigned one from the active rule
-- set version (ingest stores records unsorted and never waits for the rules). The partial
-- index finds the unsorted ones without a scan; the tier index serves the tier filter and
-- the default views (which hide the archive tier) in list order.
ALTER TABLE dead_letters ADD COLUMN tier TEXT;
CREATE INDEX dead_letters_unsorted ON dead_letters (id) WHERE tier IS NULL;
CREATE INDEX dead_letters_by_tier  ON dead_letters (tier, dead_lettered_at_ms, id, status);

-- How and why each sorted dead letter got its tier, and its automation state. One row per
-- sorted dead letter (deleted with it: ON DELETE CASCADE, as dead_letter_links).
CREATE TABLE dead_letter_tiers (
    dead_letter_id     BIGINT  PRIMARY KEY REFERENCES dead_letters (id) ON DELETE CASCADE,
    tier               TEXT    NOT NULL,           -- as dead_letters.tier
    rule_name          TEXT,                       -- NULL: default tier or poison signal
    rule_version       INTEGER,                    -- rule_set_versions.version used
    reason             TEXT    NOT NULL,           -- one line: which conditions matched
    tier_at_ms         BIGINT  NOT NULL,           -- when it entered this tier
    auto_attempts      INTEGER NOT NULL DEFAULT 0, -- automatic replays so far (carried over from its earlier self when it came back)
    next_attempt_at_ms BIGINT,                    -- transient: when the next automatic replay is due; NULL: none due
    loop_guarded       INTEGER NOT NULL DEFAULT 0, -- 1: came back loop_guard_returns times; no automation, manual replay needs approve + reason
    escalated          INTEGER NOT NULL DEFAULT 0  -- 1: moved to manual after its automatic attempts were used up
);
-- The scheduler's question: which of a rule's dead letters are due now.
CREATE INDEX dead_letter_tiers_due ON dead_letter_tiers (rule_name, next_attempt_at_ms)
    WHERE next_attempt_at_ms IS NOT NULL;
-- Age-based movement: a rule's dead letters by the time they entered their tier.
CREATE INDEX dead_letter_tiers_by_age ON dead_letter_tiers (rule_name, tier, tier_at_ms);

-- The rule set, versioned: every save (from the UI, the API, or a changed [automation] in
-- redrive.toml at start-up) is a new row; the highest version is the active one.
CREATE TABLE rule_set_versions (
    version       INTEGER PRIMARY KEY,   -- 1, 2, ...
    source        TEXT    NOT NULL,      -- the TOML text as saved
    sha256        TEXT    NOT NULL,      -- of source: a config unchanged since its last install is not installed again
    origin        TEXT    NOT NULL,      -- config | ui | api
    created_by    TEXT    NOT NULL,
    created_at_ms BIGINT  NOT NULL,
    reason        TEXT
);

-- Each rule's running state, kept by name across versions.
CREATE TABLE rule_states (
    rule_name          TEXT    PRIMARY KEY,
    paused             INTEGER NOT NULL DEFAULT 0,
    paused_reason      TEXT,
    paused_by          TEXT,
    paused_at_ms       BIGINT,
    last_round_at_ms   BIGINT,           -- the last round that ran or was skipped
    last_round_outcome TEXT,              -- ran | gate_closed | nothing_due | paused | error
    last_round_message TEXT,              -- what the gate said, or why the round did nothing
    last_job_id        TEXT,
    rounds_run         INTEGER NOT NULL DEFAULT 0,
    rounds_skipped     INTEGER NOT NULL DEFAULT 0,
    replayed_total     BIGINT  NOT NULL DEFAULT 0,
    refailed_total     BIGINT  NOT NULL DEFAULT 0
);
