-- Relay and bulk actions (issue 7), SQLite.

-- When the job's current outage began (its first batch that met Kafka unreachable since it
-- last published anything); NULL while it publishes. The relay counts attempts once the job
-- has waited `relay_outage_max_ms`, so no job waits forever.
ALTER TABLE replay_jobs ADD COLUMN waiting_since_ms INTEGER;

-- A delete, restore or replay over a filter, carried out in chunks of short transactions so
-- that no write transaction holds SQLite's lock for long. The row is written with the first
-- chunk and moves forward with each; the action's audit row is written with the last one,
-- carrying the final count. An action whose process died mid-way stays `running` here (and
-- visible) and is resumed from `cursor_id` at the next start-up.
CREATE TABLE bulk_actions (
    id                     INTEGER PRIMARY KEY AUTOINCREMENT,
    kind                   TEXT    NOT NULL,            -- replay | delete | restore
    status                 TEXT    NOT NULL,            -- running | done
    actor                  TEXT    NOT NULL,            -- user name (for lists)
    actor_json             TEXT    NOT NULL,            -- the whole Actor, for the audit row
    filter                 TEXT    NOT NULL,            -- JSON, the filter as given
    reason                 TEXT,
    job_id                 TEXT,                        -- replay: the job being filled
    max_id                 INTEGER NOT NULL,            -- covers dead letters with id <= this
    cursor_id              INTEGER NOT NULL DEFAULT 0,  -- dead letters with id <= this are done
    done                   INTEGER NOT NULL DEFAULT 0,  -- dead letters changed so far
    skipped                INTEGER NOT NULL DEFAULT 0,  -- matched, not changed (replay: any reason)
    skipped_without_target INTEGER NOT NULL DEFAULT 0,  -- replay: ... of which had no target
    chunks                 INTEGER NOT NULL DEFAULT 0,  -- transactions committed
    resumed                INTEGER NOT NULL DEFAULT 0,  -- times resumed after an interruption
    created_at_ms          INTEGER NOT NULL,
    updated_at_ms          INTEGER NOT NULL,
    finished_at_ms         INTEGER
);
CREATE INDEX bulk_actions_by_status ON bulk_actions (status, id);
