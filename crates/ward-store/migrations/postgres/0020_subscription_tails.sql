-- Deliveries read the event log from each subscription's position (its
-- tail) instead of a job row queued per event and subscription in the
-- write's transaction: a write with subscriptions costs what one without
-- does, and a delivery costs the deliverer a read, not three writes. Jobs
-- (kind 'deliver') remain for retries only.
--
-- Transactions commit out of `seq` order here, so a reader that moved past
-- seq 11 could miss seq 10 committed later. Each event records its
-- transaction's id (`txid`), and a tail reads only events of transactions
-- older than every one still running (the snapshot's xmin): those are all
-- committed or gone, so ordering by (txid, seq) never skips one. Ward's
-- write transactions are short (imports commit in chunks), so the wait is
-- that of the oldest write in flight.
ALTER TABLE events ADD COLUMN root TEXT NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN txid BIGINT NOT NULL DEFAULT 0;
ALTER TABLE events ALTER COLUMN txid SET DEFAULT (pg_current_xact_id()::text::bigint);
UPDATE events SET root = split_part(group_uid, '/', 1);
CREATE INDEX events_tail ON events (root, txid, seq) WHERE audience = 'customer';

-- The position (`tail_txid`, `tail_seq`) up to which the subscription's
-- events were delivered or handed to the retry queue, and which server
-- advances it until when (a lease, as jobs have).
ALTER TABLE subscriptions ADD COLUMN tail_txid BIGINT NOT NULL DEFAULT 0;
ALTER TABLE subscriptions ADD COLUMN tail_seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE subscriptions ADD COLUMN tail_owner TEXT NOT NULL DEFAULT '';
ALTER TABLE subscriptions ADD COLUMN tail_until BIGINT NOT NULL DEFAULT 0;
UPDATE subscriptions SET tail_txid = pg_snapshot_xmin(pg_current_snapshot())::text::bigint;
-- The backlog bound is kept by each tail's reader now (see the deliverer).
ALTER TABLE subscriptions DROP COLUMN backlogged;
