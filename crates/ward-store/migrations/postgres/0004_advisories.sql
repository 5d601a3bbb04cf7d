-- Ward schema v4 (PostgreSQL): vulnerability advisories and their events.

CREATE TABLE advisories (
    uid                   TEXT PRIMARY KEY NOT NULL,
    parent_uid            TEXT NOT NULL REFERENCES groups (uid) ON DELETE RESTRICT,
    -- CGA id, unique per server.
    advisory_id           TEXT NOT NULL UNIQUE,
    legacy_advisory_id    TEXT,
    -- The origin package (its subpackages' advisories share it).
    origin                TEXT NOT NULL,
    author                TEXT NOT NULL,
    artifact_name         TEXT NOT NULL,
    artifact_type         TEXT NOT NULL,
    artifact_architecture TEXT NOT NULL,
    component_name        TEXT NOT NULL,
    component_location    TEXT NOT NULL,
    component_type        TEXT NOT NULL,
    -- JSON arrays.
    aliases               TEXT NOT NULL,
    severities            TEXT NOT NULL,
    -- Lowercased artifact name, component name and aliases, for `query`.
    search                TEXT NOT NULL,
    -- The EventTypeFilter number of the latest approved event (0: none) and,
    -- when it is `fixed`, its version: kept in the transaction that changes
    -- events, so status filters are index lookups.
    latest_type           BIGINT NOT NULL DEFAULT 0,
    fixed_version         TEXT,
    create_time           BIGINT NOT NULL,
    update_time           BIGINT NOT NULL,
    delete_time           BIGINT
);
CREATE INDEX advisories_parent ON advisories (parent_uid, uid);
CREATE INDEX advisories_legacy ON advisories (legacy_advisory_id) WHERE legacy_advisory_id IS NOT NULL;
CREATE INDEX advisories_origin ON advisories (origin, uid);
CREATE INDEX advisories_artifact ON advisories (artifact_name, uid);
CREATE INDEX advisories_component ON advisories (component_name, uid);
CREATE INDEX advisories_latest ON advisories (latest_type, uid);
CREATE INDEX advisories_create_time ON advisories (create_time, uid);
CREATE INDEX advisories_update_time ON advisories (update_time, uid);
-- `query` is a substring match: it scans in uid order, and this covering
-- index lets it read search texts without visiting every row.
CREATE INDEX advisories_search ON advisories (uid, search, delete_time);

CREATE TABLE advisory_aliases (
    alias        TEXT NOT NULL,
    advisory_uid TEXT NOT NULL REFERENCES advisories (uid) ON DELETE CASCADE,
    PRIMARY KEY (alias, advisory_uid)
);
CREATE INDEX advisory_aliases_advisory ON advisory_aliases (advisory_uid);

CREATE TABLE advisory_events (
    uid          TEXT PRIMARY KEY NOT NULL,
    advisory_uid TEXT NOT NULL REFERENCES advisories (uid) ON DELETE CASCADE,
    -- When it happened (milliseconds), its EventTypeFilter number, review.
    event_time   BIGINT NOT NULL,
    type         BIGINT NOT NULL,
    author       TEXT NOT NULL,
    reviewer     TEXT NOT NULL,
    review_state BIGINT NOT NULL,
    issue        TEXT,
    -- The payload as proto3 JSON, and its digest (with time and type) to
    -- match events on re-import.
    payload      TEXT NOT NULL,
    fingerprint  TEXT NOT NULL,
    findings     BYTEA NOT NULL,
    create_time  BIGINT NOT NULL,
    update_time  BIGINT NOT NULL
);
CREATE INDEX advisory_events_advisory ON advisory_events (advisory_uid, event_time, uid);
CREATE INDEX advisory_events_state ON advisory_events (review_state, advisory_uid);
CREATE INDEX advisory_events_author ON advisory_events (author, advisory_uid);
