-- A type's view_url: a type text naming the page that lists what a group
-- of its notifications is about, where an email's "View all" button
-- leads. Empty: the object's own URL when a group is about one object.
ALTER TABLE notification_types ADD COLUMN IF NOT EXISTS view_url text NOT NULL DEFAULT '';
