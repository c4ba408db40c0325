-- Who is watching a feed stream right now, per lull process. Ingest sends
-- NOTIFY only for recipients listed here: a transaction that notifies
-- takes a cluster-wide lock at commit, which would otherwise serialize
-- every ingest. Unlogged: after a crash the processes list their watchers
-- again, and a lost row costs a stream one wake-up, never data.
CREATE UNLOGGED TABLE feed_watchers (
    recipient_id text NOT NULL,
    hub          text NOT NULL,
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (recipient_id, hub)
);
