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
-- Building the new indexes reads the two tables once, each in a
-- transaction of its own (bun runs the parts between "--bun:split" one by
-- one), so that the upgrade holds one table at a time, never one while it
-- waits for the other; on a large database it holds that table's writes
-- while its index is built. Each part runs again whole if the process
-- stops before the migration is marked applied.
DROP INDEX IF EXISTS batches_recipient;
CREATE INDEX batches_recipient ON batches (recipient_id, id)
    WHERE (state = 'open' AND mode <> 'immediate' AND NOT sealed) IS NOT TRUE;

--bun:split
DROP INDEX IF EXISTS notifications_read;
DROP INDEX IF EXISTS notifications_unread;
DROP INDEX IF EXISTS notifications_recipient;
CREATE INDEX notifications_unread ON notifications (recipient_id, id)
    WHERE read_at IS NULL AND retracted_at IS NULL;
CREATE INDEX notifications_read ON notifications (recipient_id, id)
    WHERE (read_at IS NULL AND retracted_at IS NULL) IS NOT TRUE;
