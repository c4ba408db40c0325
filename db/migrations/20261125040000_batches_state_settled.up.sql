-- Open batches leave batches_state. Every open batch is already in
-- batches_due (and, but for immediate ones, batches_one_open), and the
-- queries that look for open batches by state go through those; an
-- entry here cost each batch a fan-out opens or a flood slides one more
-- index write, in the transaction a client waits for. A batch enters the
-- index when it leaves "open", which rewrites its row and its index
-- entries in any case.
DROP INDEX batches_state;
CREATE INDEX batches_state ON batches (state, id) WHERE state <> 'open';
