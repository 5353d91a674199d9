-- The ingest diet (issue 12 item 4), PostgreSQL. See docs/bench.md, "Ingest at the store's speed".
--
-- `dead_letters.headers` is written in the compact encoding from this version on
-- (`core/src/store/codec.rs`): a JSON array of [name, value] pairs, value a JSON string (the
-- bytes are that UTF-8 text), {"b": "<base64>"} (other bytes), {"st": 1} (the value is the
-- row's `stack_trace` column, byte for byte: a Spring stack trace is stored once) or null.
-- Rows stored before keep the first encoding ([{"name": .., "value": base64|null}]), which
-- is still read: no row is rewritten here.
--
-- The message-id index served one reader only: linking a dead letter that came back to the
-- replayed one (`outcome.rs`, `d.message_id = ? AND d.replay_count > 0`). Only replayed
-- rows are in it now, as in `dead_letters_replayed_by_source` (0013), so ingest's inserts
-- (replay_count 0) no longer pay for it.
DROP INDEX dead_letters_by_message_id;
CREATE INDEX dead_letters_replayed_by_message_id
    ON dead_letters (message_id) WHERE replay_count > 0;
