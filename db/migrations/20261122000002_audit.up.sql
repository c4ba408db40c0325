-- Every operator action (flush, cancel, retry, type edits) is recorded:
-- who, what, on which object, when.
CREATE TABLE audit_log (
    id          bigserial PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    operator    text NOT NULL,
    action      text NOT NULL,
    object_type text NOT NULL,
    object_id   text NOT NULL,
    detail      text NOT NULL DEFAULT ''
);
CREATE INDEX audit_log_object ON audit_log (object_type, object_id, id);
-- Dashboard figures read recent deliveries by time.
CREATE INDEX deliveries_sent_at ON deliveries (sent_at) WHERE sent_at IS NOT NULL;
CREATE INDEX deliveries_failed_at ON deliveries (failed_at) WHERE failed_at IS NOT NULL;
