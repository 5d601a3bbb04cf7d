-- Ward schema v3 (SQLite): the registry. Manifests are kept here with their
-- bytes; blob bytes live in the blob store and only their digests are here.

CREATE TABLE repos (
    uid          TEXT PRIMARY KEY NOT NULL,
    parent_uid   TEXT NOT NULL REFERENCES groups (uid) ON DELETE RESTRICT,
    -- The organization: names are unique within it.
    org_uid      TEXT NOT NULL,
    name         TEXT NOT NULL,
    description  TEXT NOT NULL,
    catalog_tier INTEGER NOT NULL DEFAULT 0,
    -- JSON arrays.
    bundles      TEXT NOT NULL DEFAULT '[]',
    aliases      TEXT NOT NULL DEFAULT '[]',
    active_tags  TEXT NOT NULL DEFAULT '[]',
    readme       TEXT NOT NULL DEFAULT '',
    create_time  INTEGER NOT NULL,
    update_time  INTEGER NOT NULL,
    UNIQUE (org_uid, name)
);
CREATE INDEX repos_parent ON repos (parent_uid, uid);
CREATE INDEX repos_name ON repos (name, uid);
CREATE INDEX repos_create_time ON repos (create_time, uid);
CREATE INDEX repos_update_time ON repos (update_time, uid);

CREATE TABLE blobs (
    digest      TEXT PRIMARY KEY NOT NULL,
    size        INTEGER NOT NULL,
    create_time INTEGER NOT NULL
);

-- Which repos may serve which blobs.
CREATE TABLE repo_blobs (
    repo_uid    TEXT NOT NULL REFERENCES repos (uid) ON DELETE CASCADE,
    digest      TEXT NOT NULL REFERENCES blobs (digest) ON DELETE RESTRICT,
    create_time INTEGER NOT NULL,
    PRIMARY KEY (repo_uid, digest)
);
CREATE INDEX repo_blobs_digest ON repo_blobs (digest);

CREATE TABLE manifests (
    repo_uid      TEXT NOT NULL REFERENCES repos (uid) ON DELETE CASCADE,
    digest        TEXT NOT NULL,
    media_type    TEXT NOT NULL,
    artifact_type TEXT NOT NULL,
    subject       TEXT,
    annotations   TEXT NOT NULL,
    content       BLOB NOT NULL,
    create_time   INTEGER NOT NULL,
    PRIMARY KEY (repo_uid, digest)
);
CREATE INDEX manifests_subject ON manifests (repo_uid, subject) WHERE subject IS NOT NULL;

-- Blobs and child manifests a manifest names (garbage collection keeps them).
CREATE TABLE manifest_refs (
    repo_uid        TEXT NOT NULL,
    manifest_digest TEXT NOT NULL,
    target          TEXT NOT NULL,
    PRIMARY KEY (repo_uid, manifest_digest, target),
    FOREIGN KEY (repo_uid, manifest_digest) REFERENCES manifests (repo_uid, digest) ON DELETE CASCADE
);
CREATE INDEX manifest_refs_target ON manifest_refs (target);

CREATE TABLE tags (
    uid         TEXT PRIMARY KEY NOT NULL,
    parent_uid  TEXT NOT NULL,
    name        TEXT NOT NULL,
    digest      TEXT NOT NULL,
    -- The classes v2 lists hide by default (sha256-*, *-20yymmdd, *-rN).
    is_referrer INTEGER NOT NULL,
    is_dated    INTEGER NOT NULL,
    is_epoch    INTEGER NOT NULL,
    create_time INTEGER NOT NULL,
    update_time INTEGER NOT NULL,
    UNIQUE (parent_uid, name),
    FOREIGN KEY (parent_uid, digest) REFERENCES manifests (repo_uid, digest) ON DELETE CASCADE
);
CREATE INDEX tags_digest ON tags (parent_uid, digest);
CREATE INDEX tags_name ON tags (name, uid);
CREATE INDEX tags_create_time ON tags (create_time, uid);
CREATE INDEX tags_update_time ON tags (update_time, uid);

CREATE TABLE uploads (
    uuid        TEXT PRIMARY KEY NOT NULL,
    repo_uid    TEXT NOT NULL REFERENCES repos (uid) ON DELETE CASCADE,
    size        INTEGER NOT NULL,
    create_time INTEGER NOT NULL,
    update_time INTEGER NOT NULL
);
CREATE INDEX uploads_update_time ON uploads (update_time);
