-- Deliveries read the event log from each subscription's position (its
-- tail) instead of a job row queued per event and subscription in the
-- write's transaction: a write with subscriptions costs what one without
-- does, and a delivery costs the deliverer a read, not three writes. Jobs
-- (kind 'deliver') remain for retries only. On SQLite the one writer
-- commits events in `seq` order, so a position is a seq.
ALTER TABLE events ADD COLUMN root TEXT NOT NULL DEFAULT '';
UPDATE events SET root = CASE WHEN instr(group_uid, '/') = 0 THEN group_uid
    ELSE substr(group_uid, 1, instr(group_uid, '/') - 1) END;
CREATE INDEX events_tail ON events (root, seq) WHERE audience = 'customer';

-- The position (`tail_seq`; `tail_txid` is always 0 here) up to which the
-- subscription's events were delivered or handed to the retry queue, and
-- which server advances it until when (a lease, as jobs have).
ALTER TABLE subscriptions ADD COLUMN tail_txid INTEGER NOT NULL DEFAULT 0;
ALTER TABLE subscriptions ADD COLUMN tail_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE subscriptions ADD COLUMN tail_owner TEXT NOT NULL DEFAULT '';
ALTER TABLE subscriptions ADD COLUMN tail_until INTEGER NOT NULL DEFAULT 0;
UPDATE subscriptions SET tail_seq = (SELECT COALESCE(MAX(seq), 0) FROM events);
-- The backlog bound is kept by each tail's reader now (see the deliverer).
ALTER TABLE subscriptions DROP COLUMN backlogged;
