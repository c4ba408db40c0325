-- A fan-out reads the recipients with a feed stream open (db.WatchedAmong)
-- rather than sending its whole audience to NotifyFeed: this index gives
-- it the live watches without reading the expired ones, which stay until
-- the hourly prune removes them (a process that died left its own).
CREATE INDEX feed_watchers_live ON feed_watchers (expires_at) INCLUDE (recipient_id);
