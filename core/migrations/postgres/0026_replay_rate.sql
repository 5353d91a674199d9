-- A replay job's rate limit, shared by every relay instance (issue 12 item 8;
-- docs/replay.md, "Rate limit"). One row per throttled job that has published: the job's
-- token bucket as a GCRA ("generic cell rate algorithm") state. A relay takes a slot of k
-- records with one UPSERT: start = max(tat_us, now - tolerance), tat_us = start + k * 10^6 /
-- rate; it sends record i of the slot at start + i * 10^6 / rate. Slots never overlap, so
-- every instance together publishes at most rate msgs/s plus the tolerance's burst.
CREATE TABLE replay_rate (
    job_id          TEXT    PRIMARY KEY REFERENCES replay_jobs (id),
    -- Theoretical arrival time: the end of the last slot granted, µs since the epoch
    -- (the store's clock on PostgreSQL, the relay's on SQLite).
    tat_us          BIGINT  NOT NULL,
    -- Records granted so far (slots taken, whether or not every record was sent).
    granted         BIGINT  NOT NULL,
    -- Slots granted so far.
    slots           BIGINT  NOT NULL,
    -- The first slot's start, µs since the epoch (same clock as tat_us).
    first_us        BIGINT  NOT NULL
);
