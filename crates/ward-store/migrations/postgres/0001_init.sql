-- Ward schema v1 (PostgreSQL). Keep version numbers in step with migrations/sqlite.
-- Text keys use the "C" collation: UIDP range scans ([uid/, uid0)) and name
-- ordering must compare bytes, exactly as SQLite does.

CREATE TABLE settings (
    name  TEXT COLLATE "C" PRIMARY KEY,
    value BYTEA NOT NULL
);

CREATE TABLE signing_keys (
    kid         TEXT COLLATE "C" PRIMARY KEY,
    algorithm   TEXT NOT NULL,
    private_key BYTEA NOT NULL,
    public_key  BYTEA NOT NULL,
    create_time BIGINT NOT NULL
);

CREATE TABLE groups (
    uid         TEXT COLLATE "C" PRIMARY KEY,
    parent_uid  TEXT COLLATE "C" REFERENCES groups (uid) ON DELETE RESTRICT,
    name        TEXT COLLATE "C" NOT NULL,
    description TEXT NOT NULL,
    verified    BOOLEAN NOT NULL DEFAULT FALSE,
    create_time BIGINT NOT NULL,
    update_time BIGINT NOT NULL
);
CREATE INDEX groups_parent ON groups (parent_uid, uid);
CREATE INDEX groups_name ON groups (name, uid);
CREATE INDEX groups_create_time ON groups (create_time, uid);
CREATE INDEX groups_update_time ON groups (update_time, uid);
