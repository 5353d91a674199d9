-- Identity (issue 3), PostgreSQL: users, browser sessions and API tokens. Timestamps are epoch
-- ms (BIGINT). Secrets are never stored: passwords as argon2id PHC strings, session and API
-- tokens as the SHA-256 (hex) of the token. `disabled` is 0/1 (an INTEGER on both databases,
-- so the shared SQL compares it the same way).

CREATE TABLE users (
    id            BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name          TEXT    NOT NULL UNIQUE,
    role          TEXT    NOT NULL,                    -- viewer | operator | admin
    password_hash TEXT    NOT NULL,                    -- argon2id PHC string
    created_at_ms BIGINT  NOT NULL,
    disabled      INTEGER NOT NULL DEFAULT 0
);

-- Server-side sessions: the cookie holds a random token, this table its hash.
CREATE TABLE sessions (
    id_hash       TEXT    PRIMARY KEY,                 -- SHA-256 hex of the cookie value
    user_id       BIGINT  NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    csrf_token    TEXT    NOT NULL,                    -- synchronizer token of this session
    created_at_ms BIGINT  NOT NULL,                    -- absolute expiry counts from here
    last_seen_ms  BIGINT  NOT NULL,                    -- idle expiry counts from here
    ip            TEXT,
    user_agent    TEXT
);
CREATE INDEX sessions_by_user ON sessions (user_id);
CREATE INDEX sessions_by_last_seen ON sessions (last_seen_ms);

CREATE TABLE api_tokens (
    id            BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id       BIGINT  NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name          TEXT,                                -- free label
    token_hash    TEXT    NOT NULL UNIQUE,             -- SHA-256 hex of the token
    created_at_ms BIGINT  NOT NULL,
    last_used_ms  BIGINT,
    revoked_at_ms BIGINT                               -- NULL while valid
);
CREATE INDEX api_tokens_by_user ON api_tokens (user_id, id);
