-- Event subscriptions: a sink that receives the customer events of a group
-- and of every group below it. Each event's deliveries are jobs (kind
-- 'deliver', key '<subscription uid>|<event id>') queued in the event's own
-- transaction; the columns below are what the last attempts did.
CREATE TABLE subscriptions (
    uid                 TEXT PRIMARY KEY,
    parent_uid          TEXT NOT NULL REFERENCES groups (uid) ON DELETE RESTRICT,
    sink                TEXT NOT NULL,
    create_time         BIGINT NOT NULL,
    delivered           BIGINT NOT NULL DEFAULT 0,
    last_success_time   BIGINT NOT NULL DEFAULT 0,
    last_failure_time   BIGINT NOT NULL DEFAULT 0,
    last_failure_status BIGINT NOT NULL DEFAULT 0,
    last_failure_error  TEXT NOT NULL DEFAULT '',
    -- 1 while the deliveries queued for it are at their bound: new events
    -- are not queued for it (kept current by the deliverers, every second).
    backlogged          BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX subscriptions_parent ON subscriptions (parent_uid);

-- Deliveries that gave up (after 24 hours of retries, or refused by the
-- sink), kept until retried or their subscription is deleted.
CREATE TABLE failed_deliveries (
    subscription_uid TEXT NOT NULL,
    event_id         TEXT NOT NULL,
    event_type       TEXT NOT NULL,
    attempts         BIGINT NOT NULL,
    status           BIGINT NOT NULL,
    error            TEXT NOT NULL,
    time             BIGINT NOT NULL,
    PRIMARY KEY (subscription_uid, event_id)
);

-- One subscription's queued deliveries, by key prefix `<uid>|`: compared in
-- the C collation, where '|' < '}' always holds (the backlog bound counts
-- them on every customer event).
CREATE INDEX jobs_deliveries ON jobs ((key COLLATE "C")) WHERE kind = 'deliver';
