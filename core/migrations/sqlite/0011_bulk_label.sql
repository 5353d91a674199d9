-- A label added to or removed from the dead letters of a filter is a bulk action like a
-- delete or a replay (`core/src/store/bulk.rs`, `docs/triage.md`, "Bulk"): recorded in
-- `bulk_actions` with kind `label_add` / `label_remove` and the label here, so a process that
-- dies mid-way leaves it `running` with its cursor and it is resumed and finished once, with
-- ONE audit row. NULL for the other kinds.
ALTER TABLE bulk_actions ADD COLUMN label TEXT;
