-- Single sign-on (issue 10, item 5), PostgreSQL: OpenID Connect sign-ins in progress. A row lives
-- from `GET /auth/oidc/start` until its callback takes it (once) or it expires (10 minutes).
-- The browser holds the `state` (in the provider's redirect and in a short-lived cookie); this
-- table holds only its SHA-256, with the PKCE verifier and the nonce that the callback needs.
-- On the database, not in memory, so that several `redrive serve` instances behind one load
-- balancer can start and finish the same sign-in.

CREATE TABLE oidc_flows (
    state_hash    TEXT    PRIMARY KEY,                 -- SHA-256 hex of the `state` parameter
    pkce_verifier TEXT    NOT NULL,
    nonce         TEXT    NOT NULL,
    next_path     TEXT    NOT NULL,                    -- where to go once signed in
    created_at_ms BIGINT  NOT NULL
);
CREATE INDEX oidc_flows_by_created ON oidc_flows (created_at_ms);
