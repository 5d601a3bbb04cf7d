-- The event log (outbox and audit trail): each change's CloudEvent, written
-- in the same transaction as the change. `seq` orders it.
CREATE TABLE events (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    id        TEXT NOT NULL UNIQUE,
    type      TEXT NOT NULL,
    subject   TEXT NOT NULL,
    group_uid TEXT NOT NULL,
    actor     TEXT NOT NULL,
    act       TEXT NOT NULL,
    body      TEXT NOT NULL,
    audience  TEXT NOT NULL,
    time      INTEGER NOT NULL
);
CREATE INDEX events_group ON events (group_uid, seq);
CREATE INDEX events_time ON events (time, seq);
