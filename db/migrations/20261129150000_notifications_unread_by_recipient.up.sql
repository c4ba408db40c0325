-- notifications_unread is keyed by recipient_id alone again, no longer by
-- (recipient_id, id). A fan-out's notifications land in it one page per
-- recipient among every unread notification of the site, and it cost a
-- fan-out to followers scattered among a million recipients more than
-- anything else it writes. With every entry's key unique (the id in it),
-- each was a whole entry of 56 bytes; by recipient alone, PostgreSQL
-- keeps one key per recipient and a list of the rows that have it
-- (deduplication), and the index is 108 MB instead of 278 MB for
-- 3,200,000 unread notifications of 1,000,000 recipients. Inserting
-- 100,000 of them in recipient order took 0.47–0.52 s instead of
-- 0.66–0.69 s, and wrote 135 MB of WAL instead of 235 MB (measured in SQL
-- on this machine; no such index at all: 0.24 s).
--
-- What it gives up is the order: a page of a recipient's unread
-- notifications, newest first, now reads all of them and keeps the
-- newest, as counting them (the bell, every feed answer) already did.
-- notifications_read keeps (recipient_id, id), since a recipient's read
-- history is long and read a page at a time.
--
-- As in the split before it, the new index is built first under a name of
-- its own (holding the table's writes, not its reads), then the old one
-- dropped and the new renamed; the migration runs again whole if the
-- process stops before it is marked applied.
DROP INDEX IF EXISTS notifications_unread_by_recipient;
CREATE INDEX notifications_unread_by_recipient ON notifications (recipient_id)
    WHERE read_at IS NULL AND retracted_at IS NULL;
DROP INDEX IF EXISTS notifications_unread;
ALTER INDEX notifications_unread_by_recipient RENAME TO notifications_unread;
