-- A status change writes its dead letter once, not twice (issue 12 item 5), SQLite only.
-- See docs/bench.md, "2026-12-05 (5)".
--
-- `dead_letters_status_changed` (0008, recreated by 0029) keeps `status_changed_at_ms` with an
-- UPDATE of the row after every status change: SQLite cannot assign to NEW, so each status
-- change wrote its row (a whole record, a dead letter's headers and value with it) and its
-- retention index entry a second time. The statements that change many statuses at once (a
-- replay's request and its marks) now set `status_changed_at_ms` themselves; the trigger
-- fills it only when the statement left it as it was, so every other status change is kept
-- exactly as before. (PostgreSQL's trigger is a BEFORE trigger that assigns NEW, one write.)
--
-- The time is now rounded to the millisecond, not truncated: `julianday` is a double, and
-- converted back it came out one millisecond early for about half of all instants.
DROP TRIGGER dead_letters_status_changed;

CREATE TRIGGER dead_letters_status_changed AFTER UPDATE OF status ON dead_letters
WHEN NEW.status IS NOT OLD.status
 AND NEW.status_changed_at_ms IS OLD.status_changed_at_ms
BEGIN
    UPDATE dead_letters
       SET status_changed_at_ms = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)
     WHERE id = NEW.id;
END;
