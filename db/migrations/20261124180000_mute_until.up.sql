-- A thread may be muted for a while: a mute with an end time stops
-- nothing once that time has passed. NULL mutes it for good, as every
-- mute before this column did.
ALTER TABLE muted_threads ADD COLUMN until timestamptz;
