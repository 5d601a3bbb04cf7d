-- Ward schema v1 (SQLite). Keep version numbers in step with migrations/postgres.

-- Deployment-wide values created once (page-token key, admin identity uid).
CREATE TABLE settings (
    name  TEXT PRIMARY KEY NOT NULL,
    value BLOB NOT NULL
) STRICT;

-- Ward's own token signing keys; public halves are published in the JWKS.
CREATE TABLE signing_keys (
    kid         TEXT PRIMARY KEY NOT NULL,
    algorithm   TEXT NOT NULL,
    private_key BLOB NOT NULL,
    public_key  BLOB NOT NULL,
    create_time INTEGER NOT NULL
) STRICT;

-- Groups. `uid` is a UIDP; a group's descendants are the uid range [uid/, uid0).
CREATE TABLE groups (
    uid         TEXT PRIMARY KEY NOT NULL,
    parent_uid  TEXT REFERENCES groups (uid) ON DELETE RESTRICT,
    name        TEXT NOT NULL,
    description TEXT NOT NULL,
    verified    INTEGER NOT NULL DEFAULT 0,
    create_time INTEGER NOT NULL,
    update_time INTEGER NOT NULL
) STRICT;
CREATE INDEX groups_parent ON groups (parent_uid, uid);
CREATE INDEX groups_name ON groups (name, uid);
CREATE INDEX groups_create_time ON groups (create_time, uid);
CREATE INDEX groups_update_time ON groups (update_time, uid);
