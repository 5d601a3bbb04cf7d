-- Fields of the public wire contract Ward now keeps instead of refusing or
-- dropping: an organization's kind (set when the root is created, inherited
-- by its groups), a tag's deprecation flag and bundle labels, and tags with
-- no digest yet (created by name through the API, before any push; NULL,
-- so the manifest key does not apply to them).
--
-- SQLite cannot relax NOT NULL in place: the tags table is rebuilt (the
-- migration runner turns foreign keys off around migrations and checks them
-- before committing, so tag_history keeps its rows and its reference).
ALTER TABLE groups ADD COLUMN kind INTEGER NOT NULL DEFAULT 0;

CREATE TABLE tags_rebuilt (
    uid         TEXT PRIMARY KEY NOT NULL,
    parent_uid  TEXT NOT NULL,
    name        TEXT NOT NULL,
    digest      TEXT,
    -- The classes v2 lists hide by default (sha256-*, *-20yymmdd, *-rN).
    is_referrer INTEGER NOT NULL,
    is_dated    INTEGER NOT NULL,
    is_epoch    INTEGER NOT NULL,
    create_time INTEGER NOT NULL,
    update_time INTEGER NOT NULL,
    deprecated  INTEGER NOT NULL DEFAULT 0,
    -- JSON array of strings.
    bundles     TEXT NOT NULL DEFAULT '[]',
    UNIQUE (parent_uid, name),
    FOREIGN KEY (parent_uid, digest) REFERENCES manifests (repo_uid, digest) ON DELETE CASCADE
);
INSERT INTO tags_rebuilt (uid, parent_uid, name, digest, is_referrer, is_dated, is_epoch, create_time, update_time)
    SELECT uid, parent_uid, name, digest, is_referrer, is_dated, is_epoch, create_time, update_time FROM tags;
DROP TABLE tags;
ALTER TABLE tags_rebuilt RENAME TO tags;
CREATE INDEX tags_digest ON tags (parent_uid, digest);
CREATE INDEX tags_name ON tags (name, uid);
CREATE INDEX tags_create_time ON tags (create_time, uid);
CREATE INDEX tags_update_time ON tags (update_time, uid);
