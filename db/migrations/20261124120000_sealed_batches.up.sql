-- A batch that is due or full takes no more notifications, even while its
-- flush is late (its process died mid-flush): the next event for its key
-- seals it and opens a new batch. A sealed batch stays open until its
-- flush takes it; only one unsealed open batch per key may exist.
ALTER TABLE batches ADD COLUMN sealed boolean NOT NULL DEFAULT false;
DROP INDEX batches_one_open;
CREATE UNIQUE INDEX batches_one_open ON batches (recipient_id, batch_key)
    WHERE state = 'open' AND mode <> 'immediate' AND NOT sealed;
