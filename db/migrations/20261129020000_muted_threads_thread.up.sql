-- A fan-out reads the live mutes of its thread (db.MutedFor) instead of
-- probing each of its recipients: this index finds them by the thread's
-- batch key.
CREATE INDEX muted_threads_thread ON muted_threads (batch_key);
