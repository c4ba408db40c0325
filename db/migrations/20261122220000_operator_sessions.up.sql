-- Operator sessions live on the server, so logging out (or a new password)
-- ends a session for good: a copy of the cookie taken before stops working.
-- The cookie holds a random token; only its SHA-256 is stored.
CREATE TABLE operator_sessions (
    token_hash  bytea PRIMARY KEY,
    operator_id bigint NOT NULL REFERENCES operators ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);
CREATE INDEX operator_sessions_operator ON operator_sessions (operator_id);
