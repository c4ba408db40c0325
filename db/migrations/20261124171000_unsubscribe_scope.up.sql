-- What an email's one-click unsubscribe link stops: the type ("type"),
-- or only the thread the email was about ("thread": its batch key, such
-- as comments on one document), as GitHub's notification emails do.
ALTER TABLE notification_types ADD COLUMN unsubscribe text NOT NULL DEFAULT 'type'
    CHECK (unsubscribe IN ('type', 'thread'));

-- Threads a recipient unsubscribed from. A batch whose key is muted is
-- canceled at its flush, with the skip reason "muted thread".
CREATE TABLE muted_threads (
    recipient_id text NOT NULL REFERENCES recipients ON DELETE CASCADE,
    batch_key    text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (recipient_id, batch_key)
);
