-- Full-text search (issue 12 item 2; docs/triage.md, "Search"). `q` matches a substring of
-- the error message, the first 8 KiB of the stack trace, or the first 8 KiB of a text
-- payload (UTF-8 without control characters but tab/CR/LF; binary values are not indexed).
--
-- `dead_letter_text` holds what is searched, capped (written by ingest in the transaction
-- that stores the dead letter: whether a value is text, and where 8 KiB ends on a character
-- boundary, is decided in Rust, `core/src/search.rs`). `dead_letter_fts` is an FTS5 index
-- over it with the trigram tokenizer (any substring of 3 characters or more; case folded),
-- kept by the triggers below: it stores no text of its own (external content).
CREATE TABLE dead_letter_text (
    id          INTEGER PRIMARY KEY, -- dead_letters.id
    message     TEXT,
    stack_trace TEXT,
    payload     TEXT
);

CREATE VIRTUAL TABLE dead_letter_fts USING fts5(
    message, stack_trace, payload,
    content = 'dead_letter_text', content_rowid = 'id',
    tokenize = 'trigram case_sensitive 0'
);

CREATE TRIGGER dead_letter_text_insert AFTER INSERT ON dead_letter_text BEGIN
    INSERT INTO dead_letter_fts (rowid, message, stack_trace, payload)
    VALUES (NEW.id, NEW.message, NEW.stack_trace, NEW.payload);
END;

CREATE TRIGGER dead_letter_text_delete AFTER DELETE ON dead_letter_text BEGIN
    INSERT INTO dead_letter_fts (dead_letter_fts, rowid, message, stack_trace, payload)
    VALUES ('delete', OLD.id, OLD.message, OLD.stack_trace, OLD.payload);
END;

CREATE TRIGGER dead_letter_text_update AFTER UPDATE ON dead_letter_text BEGIN
    INSERT INTO dead_letter_fts (dead_letter_fts, rowid, message, stack_trace, payload)
    VALUES ('delete', OLD.id, OLD.message, OLD.stack_trace, OLD.payload);
    INSERT INTO dead_letter_fts (rowid, message, stack_trace, payload)
    VALUES (NEW.id, NEW.message, NEW.stack_trace, NEW.payload);
END;

-- Every path that deletes a dead letter (retention purge, a test's raw DELETE) takes its text
-- and index entries with it, in the same statement's transaction.
CREATE TRIGGER dead_letters_text_delete AFTER DELETE ON dead_letters BEGIN
    DELETE FROM dead_letter_text WHERE id = OLD.id;
END;

-- Dead letters stored before this migration: their message and stack trace (the first 8,192
-- characters). Their payloads are not indexed: only ingest decides what is text.
INSERT INTO dead_letter_text (id, message, stack_trace)
SELECT id, error_message, substr(stack_trace, 1, 8192)
FROM dead_letters
WHERE error_message IS NOT NULL OR stack_trace IS NOT NULL;
