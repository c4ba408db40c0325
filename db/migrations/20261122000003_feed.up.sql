-- In-app feed: a type may let notifications read in the app leave the
-- email (the default), and the feed reads a recipient's newest unread ones.
ALTER TABLE notification_types ADD COLUMN skip_read boolean NOT NULL DEFAULT true;
CREATE INDEX notifications_unread ON notifications (recipient_id) WHERE read_at IS NULL AND retracted_at IS NULL;
