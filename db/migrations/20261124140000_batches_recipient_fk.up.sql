-- Batches no longer carry a foreign key to recipients. Checking it took a
-- FOR KEY SHARE lookup in recipients for every batch a fan-out opens (a
-- third of a second of the one transaction that writes 100,000 of
-- them), and it guarded nothing lull does: lull never deletes a recipient
-- (no API, console page or retention step does; an inactive or
-- unsubscribed recipient stays, and its batches are canceled at flush),
-- and every ingest reads the recipient in its own transaction before it
-- opens a batch for it. A recipient deleted by hand leaves its batches
-- behind; a flush finds no recipient and cancels them as inactive.
ALTER TABLE batches DROP CONSTRAINT IF EXISTS batches_recipient_id_fkey;
