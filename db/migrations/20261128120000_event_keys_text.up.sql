-- A key's first answer is kept as the text lull sent, not parsed into
-- jsonb: nothing queries inside it, and the answer of a fan-out to
-- 100,000 recipients (11 MB) cost PostgreSQL 0.24–0.31 s to parse and
-- store as jsonb against about 0.1 s as text, in the event's transaction.
-- A replay now gives back the very bytes of the first answer.
ALTER TABLE event_keys ALTER COLUMN response TYPE text USING response::text;
