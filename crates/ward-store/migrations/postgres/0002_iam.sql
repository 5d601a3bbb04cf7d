-- Ward schema v2 (PostgreSQL): identities, roles, role bindings.
-- Every table names its owning group `parent_uid`, so UIDP filters are uniform.

CREATE TABLE identities (
    uid               TEXT COLLATE "C" PRIMARY KEY NOT NULL,
    parent_uid        TEXT COLLATE "C" REFERENCES groups (uid) ON DELETE RESTRICT,
    name              TEXT COLLATE "C" NOT NULL,
    description       TEXT NOT NULL,
    company           TEXT NOT NULL DEFAULT '',
    relationship_type BIGINT NOT NULL,
    -- The relationship (ClaimMatch or StaticKeys) as proto3 JSON.
    relationship      TEXT NOT NULL,
    -- Exact issuer and subject ('' when given as patterns), for lookups and hydration.
    issuer            TEXT COLLATE "C" NOT NULL,
    subject           TEXT COLLATE "C" NOT NULL,
    last_seen_time    BIGINT,
    create_time       BIGINT NOT NULL,
    update_time       BIGINT NOT NULL
);
CREATE INDEX identities_parent ON identities (parent_uid, uid);
CREATE INDEX identities_name ON identities (name, uid);
CREATE INDEX identities_create_time ON identities (create_time, uid);
CREATE INDEX identities_update_time ON identities (update_time, uid);
CREATE INDEX identities_issuer_subject ON identities (issuer, subject);

-- Built-in roles have no parent.
CREATE TABLE roles (
    uid          TEXT COLLATE "C" PRIMARY KEY NOT NULL,
    parent_uid   TEXT COLLATE "C" REFERENCES groups (uid) ON DELETE RESTRICT,
    name         TEXT COLLATE "C" NOT NULL,
    description  TEXT NOT NULL,
    -- Capability enum numbers, comma-separated.
    capabilities TEXT NOT NULL,
    create_time  BIGINT NOT NULL,
    update_time  BIGINT NOT NULL
);
CREATE INDEX roles_parent ON roles (parent_uid, uid);
CREATE INDEX roles_name ON roles (name, uid);
CREATE INDEX roles_create_time ON roles (create_time, uid);
CREATE INDEX roles_update_time ON roles (update_time, uid);

CREATE TABLE role_bindings (
    uid          TEXT COLLATE "C" PRIMARY KEY NOT NULL,
    parent_uid   TEXT COLLATE "C" NOT NULL REFERENCES groups (uid) ON DELETE RESTRICT,
    identity_uid TEXT COLLATE "C" NOT NULL REFERENCES identities (uid) ON DELETE RESTRICT,
    role_uid     TEXT COLLATE "C" NOT NULL REFERENCES roles (uid) ON DELETE RESTRICT,
    create_time  BIGINT NOT NULL,
    update_time  BIGINT NOT NULL
);
CREATE INDEX role_bindings_parent ON role_bindings (parent_uid, uid);
CREATE INDEX role_bindings_identity ON role_bindings (identity_uid, uid);
CREATE INDEX role_bindings_role ON role_bindings (role_uid, uid);
CREATE INDEX role_bindings_create_time ON role_bindings (create_time, uid);

-- Bindings with their identity, group and role, as the API returns them.
CREATE VIEW role_bindings_hydrated AS
SELECT rb.uid, rb.parent_uid, rb.identity_uid, rb.role_uid, rb.create_time, rb.update_time,
       r.name AS name,
       i.name AS identity_name, i.description AS identity_description,
       i.subject AS identity_subject, i.issuer AS identity_issuer,
       g.name AS group_name, g.description AS group_description,
       r.description AS role_description
FROM role_bindings rb
JOIN identities i ON i.uid = rb.identity_uid
JOIN groups g ON g.uid = rb.parent_uid
JOIN roles r ON r.uid = rb.role_uid;
