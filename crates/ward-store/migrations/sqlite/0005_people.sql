-- Ward schema v5 (SQLite): people — identity providers, their group mappings,
-- group invites, the people who logged in, and used one-time login values.

CREATE TABLE identity_providers (
    uid           TEXT PRIMARY KEY NOT NULL,
    parent_uid    TEXT NOT NULL REFERENCES groups (uid) ON DELETE RESTRICT,
    name          TEXT NOT NULL,
    description   TEXT NOT NULL,
    -- No foreign key: a deleted role leaves logins without a default binding.
    default_role  TEXT NOT NULL,
    issuer        TEXT NOT NULL,
    -- The OIDC configuration as proto3 JSON, without the client secret.
    oidc          TEXT NOT NULL,
    -- The client secret sealed with the server's secret key; NULL: a public client.
    client_secret BLOB,
    create_time   INTEGER NOT NULL,
    update_time   INTEGER NOT NULL
) STRICT;
CREATE INDEX identity_providers_parent ON identity_providers (parent_uid, uid);
CREATE INDEX identity_providers_name ON identity_providers (name, uid);
CREATE INDEX identity_providers_create_time ON identity_providers (create_time, uid);
CREATE INDEX identity_providers_update_time ON identity_providers (update_time, uid);

-- `name` is the external group id; `parent_uid` the identity provider.
CREATE TABLE external_group_role_mappings (
    uid         TEXT PRIMARY KEY NOT NULL,
    parent_uid  TEXT NOT NULL REFERENCES identity_providers (uid) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    role_uid    TEXT NOT NULL REFERENCES roles (uid) ON DELETE CASCADE,
    scope       TEXT NOT NULL,
    create_time INTEGER NOT NULL,
    update_time INTEGER NOT NULL,
    UNIQUE (parent_uid, name, role_uid, scope)
) STRICT;
CREATE INDEX external_group_role_mappings_name ON external_group_role_mappings (name, uid);
CREATE INDEX external_group_role_mappings_role ON external_group_role_mappings (role_uid);
CREATE INDEX external_group_role_mappings_create_time ON external_group_role_mappings (create_time, uid);

-- `name` is the invite's key id.
CREATE TABLE group_invites (
    uid         TEXT PRIMARY KEY NOT NULL,
    parent_uid  TEXT NOT NULL REFERENCES groups (uid) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    role_uid    TEXT NOT NULL,
    email       TEXT NOT NULL,
    expire_time INTEGER NOT NULL,
    single_use  INTEGER NOT NULL,
    create_time INTEGER NOT NULL,
    update_time INTEGER NOT NULL
) STRICT;
CREATE INDEX group_invites_parent ON group_invites (parent_uid, uid);
CREATE INDEX group_invites_name ON group_invites (name, uid);
CREATE INDEX group_invites_create_time ON group_invites (create_time, uid);

-- What a person's login told Ward about them.
CREATE TABLE people (
    identity_uid          TEXT PRIMARY KEY NOT NULL REFERENCES identities (uid) ON DELETE CASCADE,
    identity_provider_uid TEXT NOT NULL,
    email                 TEXT NOT NULL,
    email_verified        INTEGER NOT NULL,
    display_name          TEXT NOT NULL
) STRICT;

-- The identity providers a person has logged in through: the first login
-- through each binds its default role.
CREATE TABLE person_providers (
    identity_uid          TEXT NOT NULL REFERENCES identities (uid) ON DELETE CASCADE,
    identity_provider_uid TEXT NOT NULL,
    PRIMARY KEY (identity_uid, identity_provider_uid)
) STRICT;

-- One-time values already used (login states, handoff codes), until they expire.
CREATE TABLE used_once (
    id          TEXT PRIMARY KEY NOT NULL,
    expire_time INTEGER NOT NULL
) STRICT;
CREATE INDEX used_once_expire_time ON used_once (expire_time);
