-- The daily email budget: at most N emails a recipient's local day.
-- NULL follows the next default (the type's, then LULL_DAILY_EMAIL_BUDGET);
-- 0 is no limit.
ALTER TABLE recipients ADD COLUMN daily_budget integer CHECK (daily_budget BETWEEN 0 AND 1000);
ALTER TABLE notification_types ADD COLUMN daily_budget integer CHECK (daily_budget BETWEEN 0 AND 1000);

-- budget_day is the recipient's local day an email counts against (NULL:
-- not counted: no budget, or a required type); folded_into is the held
-- batch an over-budget batch's notifications were moved to.
ALTER TABLE batches ADD COLUMN budget_day date, ADD COLUMN folded_into bigint;
CREATE INDEX batches_budget ON batches (recipient_id, budget_day) WHERE budget_day IS NOT NULL;
-- The batch browser lists what was folded into a held digest.
CREATE INDEX batches_folded ON batches (folded_into) WHERE folded_into IS NOT NULL;
