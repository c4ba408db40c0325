-- The suppression list: addresses lull stops mailing because they bounced,
-- their owner complained, or an operator or the host app said so. The key
-- is the address as sent, lower-cased (in Go, so every writer and the flush
-- agree), and in the C collation so that a search by prefix walks the
-- primary key. Scope 'all' stops every email; 'non_required' stops all but
-- the required types (security alerts still reach someone who complained).
CREATE TABLE suppressions (
    address    text COLLATE "C" PRIMARY KEY,
    reason     text NOT NULL CHECK (reason IN ('hard_bounce', 'soft_bounce', 'complaint', 'operator')),
    scope      text NOT NULL CHECK (scope IN ('all', 'non_required')),
    detail     text NOT NULL DEFAULT '',
    source     text NOT NULL DEFAULT '',
    batch_id   bigint NOT NULL DEFAULT 0,
    created_by text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Every bounce and complaint heard, once: a report repeated for the same
-- address, batch and kind (a webhook redelivered, a DSN resent) finds its
-- row and counts nothing again; one that names no batch is known again by
-- the time its source gave (reported_at, when lull heard it if none).
-- type_key is the batch's type, or its batch key for a digest, so rates
-- can be given per type; '' when unknown.
CREATE TABLE bounce_reports (
    id          bigserial PRIMARY KEY,
    address     text COLLATE "C" NOT NULL,
    kind        text NOT NULL CHECK (kind IN ('hard', 'soft', 'complaint')),
    batch_id    bigint NOT NULL DEFAULT 0,
    type_key    text NOT NULL DEFAULT '',
    status      text NOT NULL DEFAULT '',
    source      text NOT NULL DEFAULT '',
    detail      text NOT NULL DEFAULT '',
    reported_at timestamptz NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX bounce_reports_once ON bounce_reports (address, batch_id, kind) WHERE batch_id <> 0;
CREATE UNIQUE INDEX bounce_reports_once_unbatched ON bounce_reports (address, kind, reported_at) WHERE batch_id = 0;
CREATE INDEX bounce_reports_received ON bounce_reports (received_at);

-- An address's soft bounce score, as Mailman keeps it: one point per soft
-- bounce, starting again from nothing when the last one is older than the
-- decay period.
CREATE TABLE bounce_scores (
    address text COLLATE "C" PRIMARY KEY,
    score   integer NOT NULL,
    last_at timestamptz NOT NULL
);

