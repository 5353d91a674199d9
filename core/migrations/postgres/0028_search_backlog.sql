-- The search index is written behind ingest (issue 12 item 4; docs/triage.md, "Search",
-- "Not yet indexed"). Ingest stores each new dead letter's searched text here, in the
-- transaction that stores the dead letter: a plain table, no index beyond its key, so the
-- write does not update the pg_trgm GIN index. The search indexer
-- (`core/src/search_indexer.rs`) moves rows from here to `dead_letter_text` in rounds, oldest
-- first, each round one statement (`DELETE ... RETURNING` feeding the INSERT, rows taken with
-- `FOR UPDATE SKIP LOCKED`, so several instances share the work). A dead letter's text is in
-- exactly one of the two tables in any snapshot; search reads both (the backlog by scanning
-- it, bounded).
CREATE TABLE search_backlog (
    -- Deleting a dead letter (retention's purge, anything else) deletes its text.
    id          BIGINT PRIMARY KEY REFERENCES dead_letters (id) ON DELETE CASCADE,
    message     TEXT,
    stack_trace TEXT,
    payload     TEXT
);
