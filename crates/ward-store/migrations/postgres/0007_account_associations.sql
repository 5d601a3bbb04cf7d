-- Ward schema v7 (PostgreSQL): account associations, at most one per group.
-- `uid` and `parent_uid` are both the group's uid, so UIDP filters and
-- visibility work as for every other table; deleting the group deletes it.

CREATE TABLE account_associations (
    uid         TEXT COLLATE "C" PRIMARY KEY NOT NULL,
    parent_uid  TEXT COLLATE "C" NOT NULL REFERENCES groups (uid) ON DELETE CASCADE,
    name        TEXT COLLATE "C" NOT NULL,
    description TEXT NOT NULL,
    -- The provider parts (amazon, google, chainguard, azure, github) as proto3 JSON.
    config      TEXT NOT NULL,
    create_time BIGINT NOT NULL,
    update_time BIGINT NOT NULL,
    CHECK (uid = parent_uid)
);
CREATE INDEX account_associations_parent ON account_associations (parent_uid, uid);
CREATE INDEX account_associations_name ON account_associations (name, uid);
CREATE INDEX account_associations_create_time ON account_associations (create_time, uid);
CREATE INDEX account_associations_update_time ON account_associations (update_time, uid);
