-- Triage labels and notes (issue 8, item 6), SQLite: free-form labels and one free-text note
-- on a dead letter and on an error group (a fingerprint). Rules (characters, lengths, how
-- many per record) are in docs/limits.md, "Labels and notes"; they are checked in
-- core/src/labels.rs before anything is written.
--
-- A dead letter's labels and note go with it: ON DELETE CASCADE, so a purge of dead letters
-- (retention) needs no extra step for them. A group's labels and note are keyed by the
-- fingerprint alone and outlive its dead letters (a group seen again keeps its triage).

CREATE TABLE dead_letter_labels (
    dead_letter_id INTEGER NOT NULL REFERENCES dead_letters (id) ON DELETE CASCADE,
    label          TEXT    NOT NULL,
    added_at_ms    INTEGER NOT NULL,
    added_by       TEXT    NOT NULL,
    PRIMARY KEY (dead_letter_id, label)
);
-- "has label X": the ids carrying X, then the list's own indexes.
CREATE INDEX dead_letter_labels_by_label ON dead_letter_labels (label, dead_letter_id);

CREATE TABLE group_labels (
    fingerprint TEXT    NOT NULL,
    label       TEXT    NOT NULL,
    added_at_ms INTEGER NOT NULL,
    added_by    TEXT    NOT NULL,
    PRIMARY KEY (fingerprint, label)
);
CREATE INDEX group_labels_by_label ON group_labels (label, fingerprint);

CREATE TABLE dead_letter_notes (
    dead_letter_id INTEGER PRIMARY KEY REFERENCES dead_letters (id) ON DELETE CASCADE,
    note           TEXT    NOT NULL,
    updated_at_ms  INTEGER NOT NULL,
    updated_by     TEXT    NOT NULL
);

CREATE TABLE group_notes (
    fingerprint   TEXT    PRIMARY KEY,
    note          TEXT    NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    updated_by    TEXT    NOT NULL
);

-- A group's own history (label added/removed, note set/cleared); each dead letter's history
-- page shows its group's events beside its own (dead_letter_events).
CREATE TABLE group_events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    fingerprint TEXT    NOT NULL,
    at_ms       INTEGER NOT NULL,
    kind        TEXT    NOT NULL, -- label_added | label_removed | note_set | note_cleared
    actor       TEXT,
    detail      TEXT
);
CREATE INDEX group_events_by_fingerprint ON group_events (fingerprint, id);

-- What an audited change was, beyond its selection: JSON, e.g. a note's text before and
-- after, or the label added and the labels before/after. NULL for other actions.
ALTER TABLE audit_log ADD COLUMN detail TEXT;
