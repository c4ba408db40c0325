-- A type's texts per locale: {"de": {"name": ..., "item_text": ...}}.
-- A recipient's email takes each text from the most specific locale that
-- has it (de-AT, then de), then from the type's own columns.
ALTER TABLE notification_types ADD COLUMN texts jsonb NOT NULL DEFAULT '{}';
