-- lull_ensure_partitions_of creates the day partitions of one table (UTC
-- days, from yesterday to days_ahead days from now) and its default
-- partition. Creating a partition locks its parent exclusively until the
-- transaction ends, so each table's partitions are created in a
-- transaction of their own (db.MaintainPartitions): one that held events
-- while it waited for notifications deadlocked with a read joining
-- notifications to events, which holds notifications while it waits for
-- events.
CREATE FUNCTION lull_ensure_partitions_of(t text, days_ahead integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    d     date;
    today date := (now() AT TIME ZONE 'UTC')::date;
BEGIN
    EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF %I DEFAULT', t || '_default', t);
    FOR d IN SELECT generate_series(today - 1, today + days_ahead, interval '1 day')::date LOOP
        IF to_regclass(t || '_p' || to_char(d, 'YYYYMMDD')) IS NULL THEN
            EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                t || '_p' || to_char(d, 'YYYYMMDD'), t,
                d::timestamp AT TIME ZONE 'UTC', (d + 1)::timestamp AT TIME ZONE 'UTC');
        END IF;
    END LOOP;
END
$$;

-- Kept for a process of the version before, still running its daily
-- maintenance during a rolling deploy; this version no longer calls it.
CREATE OR REPLACE FUNCTION lull_ensure_partitions(days_ahead integer) RETURNS void
LANGUAGE sql AS $$
    SELECT lull_ensure_partitions_of('events', days_ahead);
    SELECT lull_ensure_partitions_of('notifications', days_ahead);
$$;
