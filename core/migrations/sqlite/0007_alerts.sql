-- Built-in alerts (issue 8, docs/alerts.md). The leader's evaluator keeps here what must
-- survive a restart or a failover: the state of every rule x scope it has seen holding, the
-- history of alert events, and one delivery row per event and notifier (an outbox: the
-- dispatcher sends, retries with backoff and records each attempt). Rules themselves live in
-- redrive.toml, so a rule removed from the file leaves rows that are pruned with the history.
CREATE TABLE alert_state (
    rule           TEXT    NOT NULL,
    scope          TEXT    NOT NULL,              -- label=value, e.g. dlq_topic=orders.DLT
    state          TEXT    NOT NULL,              -- ok | pending | firing
    value          INTEGER NOT NULL DEFAULT 0,    -- the measured value at the last change
    since_ms       INTEGER NOT NULL,              -- condition holding since (pending/firing)
    last_event_ms  INTEGER,                       -- event kinds: the latest event seen
    fired_at_ms    INTEGER,
    resolved_at_ms INTEGER,
    updated_at_ms  INTEGER NOT NULL,
    PRIMARY KEY (rule, scope)                     -- de-duplication: one alert per rule x scope
);
CREATE INDEX alert_state_by_state ON alert_state (state, rule);

CREATE TABLE alert_events (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms   INTEGER NOT NULL,
    rule    TEXT    NOT NULL,
    scope   TEXT    NOT NULL,
    kind    TEXT    NOT NULL,                     -- fired | resolved | test | notification_failed
    value   INTEGER NOT NULL DEFAULT 0,
    summary TEXT    NOT NULL,
    payload TEXT    NOT NULL                      -- the redrive.alert.v1 JSON, sent byte-exact
);
CREATE INDEX alert_events_by_rule ON alert_events (rule, id);
CREATE INDEX alert_events_by_time ON alert_events (at_ms);

CREATE TABLE alert_deliveries (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id           INTEGER NOT NULL REFERENCES alert_events (id) ON DELETE CASCADE,
    notifier           TEXT    NOT NULL,
    status             TEXT    NOT NULL DEFAULT 'pending', -- pending | delivered | failed
    attempts           INTEGER NOT NULL DEFAULT 0,
    last_error         TEXT,
    next_attempt_at_ms INTEGER NOT NULL,          -- pending: due time (also the claim's lease)
    created_at_ms      INTEGER NOT NULL,
    finished_at_ms     INTEGER
);
CREATE INDEX alert_deliveries_due ON alert_deliveries (status, next_attempt_at_ms);
CREATE INDEX alert_deliveries_by_notifier ON alert_deliveries (notifier, id);
CREATE INDEX alert_deliveries_by_event ON alert_deliveries (event_id);

-- Positions the evaluator has read up to (e.g. the last dead-letter id seen), so that a
-- restart neither re-fires for old arrivals nor misses the ones that came meanwhile.
CREATE TABLE alert_watermarks (
    name  TEXT    PRIMARY KEY,
    value INTEGER NOT NULL
);
