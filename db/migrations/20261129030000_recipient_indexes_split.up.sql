-- A fan-out writes each of its batches and notifications into every index
-- of their tables, and an index keyed by recipient costs it the most: a
-- follower's entry lands on a page of its own among a million other
-- recipients'. Each table had two such indexes whose rows overlapped: an
-- open batch an event may join was in batches_one_open and in
-- batches_recipient, an unread notification in notifications_unread and
-- in notifications_recipient. Each pair now splits its rows instead, so a
-- new batch or notification goes into one index keyed by recipient, not
-- two. A recipient's whole list is read from both, which PostgreSQL
-- combines (db.anyBatch, db.anyNotification). The second index of each
-- pair takes the first's condition "IS NOT TRUE" (the same as NOT, for a
-- condition never null) so that it stays one condition: written as NOT,
-- PostgreSQL spreads it into an OR of three, and a query asking for both
-- halves read the second index once for each. A flush, a mark-read or a
-- retraction already wrote every index anew for the row it changed (the
-- state or read_at it sets is in the indexes' conditions), so moving the
-- row from one index of a pair to the other costs them nothing more.
--
-- Each table is done in a transaction of its own (bun runs the parts
-- between "--bun:split" one by one), so that the upgrade holds one table
-- at a time. The new indexes are built first, under names of their own,
-- which holds the table's writes but not its reads; only then are the old
-- ones dropped, which holds the table whole for the moment left before
-- the commit. Each part runs again whole if the process stops before the
-- migration is marked applied.
DROP INDEX IF EXISTS batches_recipient_split;
CREATE INDEX batches_recipient_split ON batches (recipient_id, id)
    WHERE (state = 'open' AND mode <> 'immediate' AND NOT sealed) IS NOT TRUE;
DROP INDEX IF EXISTS batches_recipient;
ALTER INDEX batches_recipient_split RENAME TO batches_recipient;

--bun:split
DROP INDEX IF EXISTS notifications_unread_split;
CREATE INDEX notifications_unread_split ON notifications (recipient_id, id)
    WHERE read_at IS NULL AND retracted_at IS NULL;
CREATE INDEX IF NOT EXISTS notifications_read ON notifications (recipient_id, id)
    WHERE (read_at IS NULL AND retracted_at IS NULL) IS NOT TRUE;
DROP INDEX IF EXISTS notifications_unread;
DROP INDEX IF EXISTS notifications_recipient;
ALTER INDEX notifications_unread_split RENAME TO notifications_unread;
