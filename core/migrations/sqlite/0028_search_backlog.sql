-- The search index is written behind ingest (issue 12 item 4; docs/triage.md, "Search",
-- "Not yet indexed"). Ingest notes each new dead letter in `search_backlog`, in the
-- transaction that stores it: its id and how much of its stack trace and payload is searched
-- (bytes, decided in Rust, `core/src/search.rs`: a prefix of the stored stack trace ending on
-- a character boundary; the payload's when it is text, else NULL). The text itself is not
-- copied: `search_backlog_text` reads it from the dead letter. The search indexer
-- (`core/src/search_indexer.rs`) moves rows from there to `dead_letter_text` (whose triggers
-- fill the FTS5 index) in rounds, oldest first, each round one transaction. A dead letter's
-- text is in exactly one of the two places at any moment; search reads both (the backlog by
-- scanning it, bounded).
CREATE TABLE search_backlog (
    id            INTEGER PRIMARY KEY, -- dead_letters.id
    stack_bytes   INTEGER,             -- searched prefix of stack_trace, bytes; NULL: none
    payload_bytes INTEGER              -- searched prefix of value, bytes; NULL: not text
);

-- The backlog's searched text, as `dead_letter_text` would hold it.
CREATE VIEW search_backlog_text AS
SELECT b.id AS id,
       d.error_message AS message,
       CAST(substr(CAST(d.stack_trace AS BLOB), 1, b.stack_bytes) AS TEXT) AS stack_trace,
       CAST(substr(d.value, 1, b.payload_bytes) AS TEXT) AS payload
-- CROSS JOIN: SQLite then always reads the backlog first and looks each dead letter up by
-- its id (a plain JOIN let the planner walk `dead_letters` by id range instead: every dead
-- letter below the round's last id, indexed or not).
FROM search_backlog b CROSS JOIN dead_letters d ON d.id = b.id;

-- Deleting a dead letter (retention's purge, a test's raw DELETE) deletes its text wherever
-- it is: the trigger of migration 0024 is replaced by one that covers the backlog too.
DROP TRIGGER dead_letters_text_delete;
CREATE TRIGGER dead_letters_text_delete AFTER DELETE ON dead_letters BEGIN
    DELETE FROM dead_letter_text WHERE id = OLD.id;
    DELETE FROM search_backlog WHERE id = OLD.id;
END;
