-- An open batch is found when due by its wake time, not its close time.
-- A cool-down's close slides with every event that joins it, and with
-- closes_at indexed each join wrote a new version of the row and a new
-- entry in every index of batches: the same audience notified again
-- while its batches were open cost half as much again as the first time.
-- wake_at is never after closes_at and moves only when the close moves
-- earlier, or when the sweep finds it behind (db.CatchUpWakes); a join
-- that slides the close leaves every indexed column alone, and
-- PostgreSQL updates the row in place (HOT).
--
-- No CHECK says wake_at <= closes_at: the previous release, running
-- beside this one during a rolling upgrade, moves close times earlier
-- without knowing of wake_at, and must not have its events refused. The
-- test databases add the check (db/dbtest). A row the previous release
-- inserts gets the default and is looked at by the next sweep, which
-- moves its wake time up to its close.
ALTER TABLE batches ADD COLUMN wake_at timestamptz NOT NULL DEFAULT '-infinity';
UPDATE batches SET wake_at = closes_at WHERE state = 'open';
DROP INDEX batches_due;
CREATE INDEX batches_due ON batches (wake_at) WHERE state = 'open';
-- An in-place update needs room on the row's page. Batches of one
-- fan-out fill their pages together and are joined together by the next
-- event, in one statement whose old versions cannot be pruned before it
-- commits: half of each page is left free for them.
ALTER TABLE batches SET (fillfactor = 50);
-- The console's page of open batches, newest first, reads its own index.
-- With pages half full the planner costs reading the open batches through
-- batches_state at twice what it did, and walks the primary key instead,
-- testing each row's state: every newer batch of any state is read before
-- the page (open weekly digests under a week of sent mail). An index of
-- open batches by id costs each batch no more writes than before, as open
-- batches leave batches_state.
DROP INDEX batches_state;
CREATE INDEX batches_state ON batches (state, id) WHERE state <> 'open';
CREATE INDEX batches_open ON batches (id) WHERE state = 'open';
