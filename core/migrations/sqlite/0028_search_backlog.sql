-- The search index is written behind ingest (issue 12 item 4; docs/triage.md, "Search",
-- "Not yet indexed"). Ingest stores each new dead letter's searched text here, in the
-- transaction that stores the dead letter: a plain table, no index beyond its key, so the
-- write costs what a bare insert costs. The search indexer (`core/src/search_indexer.rs`)
-- moves rows from here to `dead_letter_text` (whose triggers fill the FTS5 index) in rounds,
-- oldest first, each round one transaction. A dead letter's text is in exactly one of the two
-- tables at any moment; search reads both (the backlog by scanning it, bounded).
CREATE TABLE search_backlog (
    id          INTEGER PRIMARY KEY, -- dead_letters.id
    message     TEXT,
    stack_trace TEXT,
    payload     TEXT
);

-- Deleting a dead letter (retention's purge, a test's raw DELETE) deletes its text wherever
-- it is: the trigger of migration 0024 is replaced by one that covers the backlog too.
DROP TRIGGER dead_letters_text_delete;
CREATE TRIGGER dead_letters_text_delete AFTER DELETE ON dead_letters BEGIN
    DELETE FROM dead_letter_text WHERE id = OLD.id;
    DELETE FROM search_backlog WHERE id = OLD.id;
END;
