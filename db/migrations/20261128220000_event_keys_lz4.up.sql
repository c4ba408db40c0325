-- A key's first answer is compressed with lz4 where the server has it: the
-- answer of a fan-out to 100,000 recipients (11 MB of JSON) took pglz,
-- PostgreSQL's default, 30–65 ms to compress in the event's transaction,
-- and lz4 a few. Only new answers are written with lz4; a server built
-- without lz4 (it is optional since PostgreSQL 14) keeps pglz.
DO $$
BEGIN
	ALTER TABLE event_keys ALTER COLUMN response SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
	NULL;
END
$$;
