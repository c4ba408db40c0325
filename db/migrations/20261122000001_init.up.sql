-- lull's schema. Events and notifications, the high-volume tables, are
-- partitioned by day on created_at (the time lull accepted them, never a
-- client-supplied time), so retention drops whole partitions instead of
-- running large DELETEs.

CREATE TABLE settings (
    key   text PRIMARY KEY,
    value text NOT NULL
);

CREATE TABLE api_keys (
    id         bigserial PRIMARY KEY,
    name       text NOT NULL DEFAULT '',
    -- SHA-256 of the key: keys are 32 random bytes, so a fast hash is safe.
    hash       bytea NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);

CREATE TABLE operators (
    id            bigserial PRIMARY KEY,
    email         text NOT NULL UNIQUE,
    password_hash text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE notification_types (
    key           text PRIMARY KEY,
    name          text NOT NULL,
    description   text NOT NULL DEFAULT '',
    category      text NOT NULL DEFAULT '',
    required      boolean NOT NULL DEFAULT false,
    default_mode  text NOT NULL DEFAULT 'immediate'
                  CHECK (default_mode IN ('never', 'immediate', 'cooldown', 'daily', 'weekly')),
    window_ms     bigint NOT NULL DEFAULT 300000,
    max_wait_ms   bigint NOT NULL DEFAULT 3600000,
    lead          boolean NOT NULL DEFAULT false,
    max_items     integer NOT NULL DEFAULT 0,
    display_limit integer NOT NULL DEFAULT 10,
    item_order    text NOT NULL DEFAULT 'latest' CHECK (item_order IN ('first', 'latest')),
    item_text     text NOT NULL,
    group_text    text NOT NULL,
    -- Burst guard: more than burst_limit immediate emails of this type to one
    -- recipient within a minute turn into a short cooldown batch.
    burst_limit   integer NOT NULL DEFAULT 5,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- Times of day are minutes after local midnight; weekdays follow Go's
-- time.Weekday (0 = Sunday).
CREATE TABLE recipients (
    id            text PRIMARY KEY,
    email         text NOT NULL DEFAULT '',
    name          text NOT NULL DEFAULT '',
    timezone      text NOT NULL DEFAULT 'UTC',
    locale        text NOT NULL DEFAULT '',
    active        boolean NOT NULL DEFAULT true,
    daily_at      smallint NOT NULL DEFAULT 480,
    weekly_on     smallint NOT NULL DEFAULT 1,
    weekly_at     smallint NOT NULL DEFAULT 480,
    quiet_start   smallint,
    quiet_end     smallint,
    unsubscribed  boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- A recipient's choice for one type; a type without a row follows the
-- type's defaults. NULL parameters also fall back to the type's.
CREATE TABLE type_preferences (
    recipient_id text NOT NULL REFERENCES recipients ON DELETE CASCADE,
    type_key     text NOT NULL REFERENCES notification_types ON DELETE CASCADE,
    mode         text NOT NULL CHECK (mode IN ('never', 'immediate', 'cooldown', 'daily', 'weekly')),
    window_ms    bigint,
    max_wait_ms  bigint,
    lead         boolean,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (recipient_id, type_key)
);

CREATE SEQUENCE events_id_seq;
CREATE TABLE events (
    id              bigint NOT NULL DEFAULT nextval('events_id_seq'),
    created_at      timestamptz NOT NULL DEFAULT now(),
    api_key_id      bigint,
    key             text,
    type_key        text NOT NULL,
    actor           jsonb NOT NULL DEFAULT '{}',
    object          jsonb NOT NULL DEFAULT '{}',
    data            jsonb NOT NULL DEFAULT '{}',
    batch_key       text NOT NULL DEFAULT '',
    occurred_at     timestamptz NOT NULL,
    recipient_count integer NOT NULL DEFAULT 0,
    retracted_at    timestamptz,
    PRIMARY KEY (id, created_at)
) PARTITION BY RANGE (created_at);
CREATE INDEX events_key ON events (api_key_id, key);

-- Idempotency keys need uniqueness across all days, which a partitioned
-- table cannot enforce, so they live in a table of their own with the
-- first answer kept for replays.
CREATE TABLE event_keys (
    api_key_id bigint NOT NULL,
    key        text NOT NULL,
    event_id   bigint NOT NULL,
    response   jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (api_key_id, key)
);

CREATE TABLE batches (
    id            bigserial PRIMARY KEY,
    recipient_id  text NOT NULL REFERENCES recipients ON DELETE CASCADE,
    batch_key     text NOT NULL,
    type_key      text,
    mode          text NOT NULL,
    state         text NOT NULL DEFAULT 'open'
                  CHECK (state IN ('open', 'flushing', 'sent', 'canceled', 'failed')),
    opened_at     timestamptz NOT NULL,
    last_event_at timestamptz NOT NULL,
    closes_at     timestamptz NOT NULL,
    window_ms     bigint NOT NULL DEFAULT 0,
    max_wait_ms   bigint NOT NULL DEFAULT 0,
    item_count    integer NOT NULL DEFAULT 0,
    flushing_at   timestamptz,
    processed_at  timestamptz,
    flush_job_id  bigint,
    reason        text NOT NULL DEFAULT ''
);
-- At most one open batch per recipient and key: the database, not a lock
-- in memory, makes concurrent ingests share one batch. Immediate batches
-- hold one notification each and are exempt.
CREATE UNIQUE INDEX batches_one_open ON batches (recipient_id, batch_key)
    WHERE state = 'open' AND mode <> 'immediate';
-- Finding due batches reads only open ones, however much history there is.
CREATE INDEX batches_due ON batches (closes_at) WHERE state = 'open';
CREATE INDEX batches_state ON batches (state, id);
CREATE INDEX batches_recipient ON batches (recipient_id, id);
CREATE INDEX batches_recent_immediate ON batches (recipient_id, type_key, opened_at)
    WHERE mode = 'immediate';

CREATE SEQUENCE notifications_id_seq;
CREATE TABLE notifications (
    id           bigint NOT NULL DEFAULT nextval('notifications_id_seq'),
    created_at   timestamptz NOT NULL DEFAULT now(),
    event_id     bigint NOT NULL,
    recipient_id text NOT NULL,
    type_key     text NOT NULL,
    batch_id     bigint,
    occurred_at  timestamptz NOT NULL,
    retracted_at timestamptz,
    read_at      timestamptz,
    seen_at      timestamptz,
    PRIMARY KEY (id, created_at)
) PARTITION BY RANGE (created_at);
CREATE INDEX notifications_batch ON notifications (batch_id);
CREATE INDEX notifications_event ON notifications (event_id);
CREATE INDEX notifications_recipient ON notifications (recipient_id, id);

-- One email per batch. Attempts are counted here and logged one by one in
-- delivery_attempts with the server's answer.
CREATE TABLE deliveries (
    id            bigserial PRIMARY KEY,
    batch_id      bigint NOT NULL UNIQUE REFERENCES batches ON DELETE CASCADE,
    state         text NOT NULL DEFAULT 'pending'
                  CHECK (state IN ('pending', 'sending', 'sent', 'failed')),
    message_id    text NOT NULL,
    to_address    text NOT NULL DEFAULT '',
    subject       text NOT NULL DEFAULT '',
    attempts      integer NOT NULL DEFAULT 0,
    last_error    text NOT NULL DEFAULT '',
    -- at-most-once: the delivery was marked sent before SMTP confirmed it,
    -- and the process died before the confirmation was recorded.
    possibly_lost boolean NOT NULL DEFAULT false,
    confirmed     boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now(),
    sending_at    timestamptz,
    sent_at       timestamptz,
    failed_at     timestamptz
);

CREATE TABLE delivery_attempts (
    id          bigserial PRIMARY KEY,
    delivery_id bigint NOT NULL REFERENCES deliveries ON DELETE CASCADE,
    at          timestamptz NOT NULL DEFAULT now(),
    ok          boolean NOT NULL,
    answer      text NOT NULL DEFAULT ''
);
CREATE INDEX delivery_attempts_delivery ON delivery_attempts (delivery_id);

-- Why something was not sent: one row per suppressed notification or
-- per canceled batch.
CREATE TABLE skips (
    id           bigserial PRIMARY KEY,
    created_at   timestamptz NOT NULL DEFAULT now(),
    recipient_id text NOT NULL,
    type_key     text NOT NULL DEFAULT '',
    event_id     bigint,
    batch_id     bigint,
    items        integer NOT NULL DEFAULT 1,
    reason       text NOT NULL
);
CREATE INDEX skips_batch ON skips (batch_id) WHERE batch_id IS NOT NULL;
CREATE INDEX skips_recipient ON skips (recipient_id, id);

-- The built-in outbox: what would have gone over SMTP when none is set.
CREATE TABLE outbox (
    id           bigserial PRIMARY KEY,
    created_at   timestamptz NOT NULL DEFAULT now(),
    message_id   text NOT NULL,
    batch_id     bigint,
    from_address text NOT NULL,
    to_address   text NOT NULL,
    subject      text NOT NULL,
    headers      jsonb NOT NULL DEFAULT '{}',
    text_body    text NOT NULL DEFAULT '',
    html_body    text NOT NULL DEFAULT ''
);
CREATE INDEX outbox_batch ON outbox (batch_id);

-- lull_ensure_partitions creates the day partitions of events and
-- notifications (UTC days) from yesterday to days_ahead days from now. A default
-- partition catches anything outside them, so an insert never fails for
-- want of a partition.
CREATE FUNCTION lull_ensure_partitions(days_ahead integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    d     date;
    t     text;
    today date := (now() AT TIME ZONE 'UTC')::date;
BEGIN
    FOREACH t IN ARRAY ARRAY['events', 'notifications'] LOOP
        EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF %I DEFAULT', t || '_default', t);
        FOR d IN SELECT generate_series(today - 1, today + days_ahead, interval '1 day')::date LOOP
            IF to_regclass(t || '_p' || to_char(d, 'YYYYMMDD')) IS NULL THEN
                EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                    t || '_p' || to_char(d, 'YYYYMMDD'), t,
                    d::timestamp AT TIME ZONE 'UTC', (d + 1)::timestamp AT TIME ZONE 'UTC');
            END IF;
        END LOOP;
    END LOOP;
END
$$;

SELECT lull_ensure_partitions(7);
