-- An open batch is found when due by its wake time, not its close time.
-- A cool-down's close slides with every event that joins it, and with
-- closes_at indexed each join wrote a new version of the row and a new
-- entry in every index of batches: the same audience notified again
-- while its batches were open cost half as much again as the first time.
-- wake_at is never after closes_at (the check below) and moves only when
-- the close moves earlier, or when the sweep finds it behind
-- (db.CatchUpWakes); a join that slides the close leaves every indexed
-- column alone, and PostgreSQL updates the row in place (HOT).
--
-- A row inserted without a wake time is looked at by the next sweep,
-- which moves its wake time up to its close: late, never lost.
ALTER TABLE batches ADD COLUMN wake_at timestamptz NOT NULL DEFAULT '-infinity';
UPDATE batches SET wake_at = closes_at WHERE state = 'open';
ALTER TABLE batches ADD CONSTRAINT batches_wake_by_close CHECK (state <> 'open' OR wake_at <= closes_at);
DROP INDEX batches_due;
CREATE INDEX batches_due ON batches (wake_at) WHERE state = 'open';
-- An in-place update needs room on the row's page. Batches of one
-- fan-out fill their pages together and are joined together by the next
-- event, in one statement whose old versions cannot be pruned before it
-- commits: half of each page is left free for them.
ALTER TABLE batches SET (fillfactor = 50);
