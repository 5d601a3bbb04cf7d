-- Event subscriptions: a sink that receives the customer events of a group
-- and of every group below it. Each event's deliveries are jobs (kind
-- 'deliver', key '<subscription uid>|<event id>') queued in the event's own
-- transaction; the columns below are what the last attempts did.
CREATE TABLE subscriptions (
    uid                 TEXT PRIMARY KEY,
    parent_uid          TEXT NOT NULL REFERENCES groups (uid) ON DELETE RESTRICT,
    sink                TEXT NOT NULL,
    create_time         INTEGER NOT NULL,
    delivered           INTEGER NOT NULL DEFAULT 0,
    last_success_time   INTEGER NOT NULL DEFAULT 0,
    last_failure_time   INTEGER NOT NULL DEFAULT 0,
    last_failure_status INTEGER NOT NULL DEFAULT 0,
    last_failure_error  TEXT NOT NULL DEFAULT '',
    -- 1 while the deliveries queued for it are at their bound: new events
    -- are not queued for it (kept current by the deliverers, every second).
    backlogged          INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX subscriptions_parent ON subscriptions (parent_uid);

-- Deliveries that gave up (after 24 hours of retries, or refused by the
-- sink), kept until retried or their subscription is deleted.
CREATE TABLE failed_deliveries (
    subscription_uid TEXT NOT NULL,
    event_id         TEXT NOT NULL,
    event_type       TEXT NOT NULL,
    attempts         INTEGER NOT NULL,
    status           INTEGER NOT NULL,
    error            TEXT NOT NULL,
    time             INTEGER NOT NULL,
    PRIMARY KEY (subscription_uid, event_id)
);
