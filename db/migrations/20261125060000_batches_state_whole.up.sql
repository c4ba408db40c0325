-- Open batches return to batches_state. The console lists batches by
-- state newest first (db.ListBatches), and without open ones in an index
-- by state and id a page of open batches read every newer row, or every
-- open one to sort them: weekly digests under a week of sent mail, or a
-- fan-out's 100,000 batches. That is worth one index write a batch.
DROP INDEX batches_state;
CREATE INDEX batches_state ON batches (state, id);
