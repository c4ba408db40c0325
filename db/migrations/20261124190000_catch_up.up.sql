-- Catch-up for absent recipients: a type with catch_up_days slows to a
-- weekly digest for a recipient not seen for that many days. NULL is off.
ALTER TABLE notification_types ADD COLUMN catch_up_days integer CHECK (catch_up_days BETWEEN 1 AND 365);

-- When a recipient was last seen: opened the feed (marked seen or read),
-- opened the settings page from an email, or as the host reported. No row:
-- never seen, and never slowed.
CREATE TABLE recipient_seen (
    recipient_id text PRIMARY KEY REFERENCES recipients (id) ON DELETE CASCADE,
    seen_at      timestamptz NOT NULL
);
