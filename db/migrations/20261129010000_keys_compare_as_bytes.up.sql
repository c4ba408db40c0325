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
-- the indexes on it, holding the table meanwhile: about a second for
-- 300,000 notifications, a minute or more for tens of millions
-- (docs/operations.md, "Upgrading"). So each table is changed in a
-- transaction of its own (bun runs the parts between "--bun:split" one
-- by one, outside a transaction), holding that table, its partitions and
-- the tables whose foreign keys point at it (recipients' ALTER rebuilds
-- those), not every table changed before: in one transaction, an event
-- ingested meanwhile deadlocked with it. A table whose locks are not all
-- granted within 2 s, or a deadlock with an event, is tried again a
-- moment later, up to 30 times; each try may hold events up for those
-- 2 s. A column already in "C" is left alone, so a migration stopped
-- half-way (lull marks a migration applied only once it succeeded, see
-- db/migrate.go) resumes where it stopped.
--
-- A database whose default collation compares as bytes already (libc's
-- "C" or "POSIX", or PostgreSQL 17's builtin provider) is left as it is
-- and pays no rebuild. pg_database is read as JSON since PostgreSQL 14
-- has no datlocprovider.
CREATE OR REPLACE FUNCTION lull_keys_as_bytes(tbl regclass, cols text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	alters text;
	tries int := 0;
BEGIN
	IF EXISTS (SELECT FROM pg_database d WHERE datname = current_database()
	           AND (to_jsonb(d) ->> 'datlocprovider' = 'b'
	                OR coalesce(to_jsonb(d) ->> 'datlocprovider', 'c') = 'c' AND datcollate IN ('C', 'POSIX'))) THEN
		RETURN;
	END IF;
	SELECT string_agg(format('ALTER COLUMN %I TYPE text COLLATE "C"', a.attname), ', ')
	INTO alters
	FROM pg_attribute a
	WHERE a.attrelid = tbl AND a.attname = ANY (cols) AND a.attcollation <> 'pg_catalog."C"'::regcollation;
	IF alters IS NULL THEN
		RETURN;
	END IF;
	LOOP
		BEGIN
			PERFORM set_config('lock_timeout', '2s', true);
			EXECUTE format('ALTER TABLE %s %s', tbl, alters);
			RETURN;
		EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
			tries := tries + 1;
			IF tries >= 30 THEN
				RAISE;
			END IF;
			PERFORM pg_sleep(0.5 + random());
		END;
	END LOOP;
END
$$;
--bun:split
SELECT lull_keys_as_bytes('recipients', '{id}');
--bun:split
SELECT lull_keys_as_bytes('notification_types', '{key}');
--bun:split
SELECT lull_keys_as_bytes('type_preferences', '{recipient_id,type_key}');
--bun:split
SELECT lull_keys_as_bytes('batches', '{recipient_id,batch_key,type_key}');
--bun:split
SELECT lull_keys_as_bytes('notifications', '{recipient_id,type_key}');
--bun:split
SELECT lull_keys_as_bytes('events', '{key,type_key,batch_key}');
--bun:split
SELECT lull_keys_as_bytes('event_keys', '{key}');
--bun:split
SELECT lull_keys_as_bytes('muted_threads', '{recipient_id,batch_key}');
--bun:split
SELECT lull_keys_as_bytes('feed_watchers', '{recipient_id}');
--bun:split
SELECT lull_keys_as_bytes('recipient_seen', '{recipient_id}');
--bun:split
SELECT lull_keys_as_bytes('skips', '{recipient_id,type_key}');
--bun:split
DROP FUNCTION lull_keys_as_bytes(regclass, text[]);
