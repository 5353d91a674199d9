-- The search index is written behind ingest (issue 12 item 4; docs/triage.md, "Search",
-- "Not yet indexed"). Ingest notes each new dead letter in `search_backlog`, in the
-- transaction that stores it: its id and how much of its stack trace and payload is searched
-- (bytes, decided in Rust, `core/src/search.rs`: a prefix of the stored stack trace ending on
-- a character boundary; the payload's when it is UTF-8 text, else NULL). The text itself is
-- not copied: `search_backlog_text` reads it from the dead letter. The search indexer
-- (`core/src/search_indexer.rs`) moves rows from there to `dead_letter_text` (and so into the
-- pg_trgm GIN index) in rounds, oldest first, each round one statement (`DELETE ...
-- RETURNING` feeding the INSERT, rows taken `FOR UPDATE SKIP LOCKED`, so several instances
-- share the work). A dead letter's text is in exactly one of the two places in any snapshot;
-- search reads both (the backlog by scanning it, bounded).
CREATE TABLE search_backlog (
    -- Deleting a dead letter (retention's purge, anything else) deletes its backlog row.
    id            BIGINT PRIMARY KEY REFERENCES dead_letters (id) ON DELETE CASCADE,
    stack_bytes   INTEGER, -- searched prefix of stack_trace, bytes; NULL: none
    payload_bytes INTEGER  -- searched prefix of value, bytes; NULL: not text
);

-- The backlog's searched text, as `dead_letter_text` would hold it. Read backlog first, each
-- dead letter looked up by its id: the LATERAL subquery with `OFFSET 0` keeps the planner
-- from joining the other way round (a hash join over all of `dead_letters`), so reading the
-- view costs what the backlog holds, never what the table holds, whatever the statistics say.
CREATE VIEW search_backlog_text AS
SELECT b.id AS id,
       d.error_message AS message,
       convert_from(substring(convert_to(d.stack_trace, 'UTF8') FROM 1 FOR b.stack_bytes),
                    'UTF8') AS stack_trace,
       convert_from(substring(d.value FROM 1 FOR b.payload_bytes), 'UTF8') AS payload
FROM search_backlog b
CROSS JOIN LATERAL (SELECT d.error_message, d.stack_trace, d.value
                    FROM dead_letters d WHERE d.id = b.id OFFSET 0) d;
