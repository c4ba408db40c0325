-- More cadences: a digest every few hours, a weekly digest on several
-- days (a bit per weekday, Sunday = 1; 0 means weekly_on alone), and a
-- monthly digest (a day past the month's end is its last day).
ALTER TABLE recipients
    ADD COLUMN weekly_days smallint NOT NULL DEFAULT 0 CHECK (weekly_days BETWEEN 0 AND 127),
    ADD COLUMN every_hours smallint NOT NULL DEFAULT 4 CHECK (every_hours IN (1, 2, 4, 6, 12)),
    ADD COLUMN monthly_day smallint NOT NULL DEFAULT 1 CHECK (monthly_day BETWEEN 1 AND 31),
    ADD COLUMN monthly_at smallint NOT NULL DEFAULT 480 CHECK (monthly_at BETWEEN 0 AND 1439);

ALTER TABLE notification_types DROP CONSTRAINT notification_types_default_mode_check,
    ADD CONSTRAINT notification_types_default_mode_check
        CHECK (default_mode IN ('never', 'immediate', 'cooldown', 'hourly', 'daily', 'weekly', 'monthly'));
ALTER TABLE type_preferences DROP CONSTRAINT type_preferences_mode_check,
    ADD CONSTRAINT type_preferences_mode_check
        CHECK (mode IN ('never', 'immediate', 'cooldown', 'hourly', 'daily', 'weekly', 'monthly'));
