-- Shared delivery: a type may send recipients due at the same moment
-- with identical content one email with each of them as an envelope
-- recipient. Every batch keeps its own delivery row; the rows of one
-- shared email carry its Message-ID and the batch whose job sent it.
ALTER TABLE notification_types ADD COLUMN shared_delivery boolean NOT NULL DEFAULT false;
ALTER TABLE deliveries ADD COLUMN shared_by bigint;
CREATE INDEX deliveries_shared_by ON deliveries (shared_by) WHERE shared_by IS NOT NULL;
