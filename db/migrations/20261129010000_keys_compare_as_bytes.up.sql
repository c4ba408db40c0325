-- Recipient ids, type keys and batch keys compare as bytes (collation "C")
-- whatever the database's default collation is. They are identifiers, not
-- words: lull sorts and locks them in byte order already (Go's order), and
-- nobody reads them in dictionary order. A database created with a
-- language's collation (initdb's default on most systems, en_US.UTF-8 or
-- an ICU locale) compared every one of them through that collation: each
-- entry a fan-out adds to the indexes on recipient ids (recipients,
-- batches, notifications) cost a collation lookup, and a fan-out to
-- 100,000 recipients took 15–25% longer in an ICU en-US database than in
-- a "C" one (docs/performance.md, "Keys compared as bytes").
--
-- Changing a column's collation keeps its rows as they are but rebuilds
-- the indexes on it, holding each table meanwhile: about a second for
-- 300,000 notifications, a minute or more for tens of millions
-- (docs/operations.md, "Upgrading"). A database whose default collation
-- is already "C" compares them as bytes already and is left as it is, so
-- it pays no rebuild. pg_database is read as JSON since PostgreSQL 14 has
-- no datlocprovider (ICU databases came with 15).
DO $$
BEGIN
	IF EXISTS (SELECT FROM pg_database d WHERE datname = current_database()
	           AND coalesce(to_jsonb(d) ->> 'datlocprovider', 'c') = 'c' AND datcollate IN ('C', 'POSIX')) THEN
		RETURN;
	END IF;
	ALTER TABLE recipients ALTER COLUMN id TYPE text COLLATE "C";
	ALTER TABLE notification_types ALTER COLUMN key TYPE text COLLATE "C";
	ALTER TABLE type_preferences
	    ALTER COLUMN recipient_id TYPE text COLLATE "C",
	    ALTER COLUMN type_key TYPE text COLLATE "C";
	ALTER TABLE batches
	    ALTER COLUMN recipient_id TYPE text COLLATE "C",
	    ALTER COLUMN batch_key TYPE text COLLATE "C",
	    ALTER COLUMN type_key TYPE text COLLATE "C";
	ALTER TABLE notifications
	    ALTER COLUMN recipient_id TYPE text COLLATE "C",
	    ALTER COLUMN type_key TYPE text COLLATE "C";
	ALTER TABLE events
	    ALTER COLUMN key TYPE text COLLATE "C",
	    ALTER COLUMN type_key TYPE text COLLATE "C",
	    ALTER COLUMN batch_key TYPE text COLLATE "C";
	ALTER TABLE event_keys ALTER COLUMN key TYPE text COLLATE "C";
	ALTER TABLE muted_threads
	    ALTER COLUMN recipient_id TYPE text COLLATE "C",
	    ALTER COLUMN batch_key TYPE text COLLATE "C";
	ALTER TABLE feed_watchers ALTER COLUMN recipient_id TYPE text COLLATE "C";
	ALTER TABLE recipient_seen ALTER COLUMN recipient_id TYPE text COLLATE "C";
	ALTER TABLE skips
	    ALTER COLUMN recipient_id TYPE text COLLATE "C",
	    ALTER COLUMN type_key TYPE text COLLATE "C";
END
$$;
