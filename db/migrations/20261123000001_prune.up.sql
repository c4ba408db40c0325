-- Retention deletes idempotency keys older than LULL_RETENTION; this index
-- finds them without reading the whole table every hour.
CREATE INDEX event_keys_created ON event_keys (created_at);
