-- Full-text search (issue 12 item 2; docs/triage.md, "Search"). `q` matches a substring of
-- the error message, the first 8 KiB of the stack trace, or the first 8 KiB of a text
-- payload (UTF-8 without control characters but tab/CR/LF; binary values are not indexed).
--
-- `dead_letter_text` holds what is searched, capped (written by ingest in the transaction
-- that stores the dead letter: whether a value is text, and where 8 KiB ends on a character
-- boundary, is decided in Rust, `core/src/search.rs`). A pg_trgm GIN index over its three
-- columns serves `ILIKE '%...%'`; it replaces the trigram index on `dead_letters.error_message`
-- of migration 0001, which `q` no longer reads.
CREATE TABLE dead_letter_text (
    -- Deleting a dead letter (retention purge, anything else) deletes its text.
    id          BIGINT PRIMARY KEY REFERENCES dead_letters (id) ON DELETE CASCADE,
    message     TEXT,
    stack_trace TEXT,
    payload     TEXT
);

-- Dead letters stored before this migration: their message and stack trace (the first 8,192
-- characters). Their payloads are not indexed: only ingest decides what is text.
INSERT INTO dead_letter_text (id, message, stack_trace)
SELECT id, error_message, left(stack_trace, 8192)
FROM dead_letters
WHERE error_message IS NOT NULL OR stack_trace IS NOT NULL;

DROP INDEX IF EXISTS dead_letters_error_message_trgm;

-- pg_trgm is contrib (migration 0001 tried to create it): without it, or when it lives in a
-- schema outside search_path, search still works by reading `dead_letter_text`, unindexed.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        EXECUTE 'CREATE INDEX dead_letter_text_trgm ON dead_letter_text USING gin '
             || '(message gin_trgm_ops, stack_trace gin_trgm_ops, payload gin_trgm_ops)';
    END IF;
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'no trigram index on dead_letter_text (%); search will scan', SQLERRM;
END
$$;
