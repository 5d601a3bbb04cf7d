-- Ward schema v6 (SQLite): verified email domains of organizations, terms
-- acceptances, and requests to join a group.

CREATE TABLE verified_domains (
    domain    TEXT PRIMARY KEY NOT NULL,
    group_uid TEXT NOT NULL REFERENCES groups (uid) ON DELETE CASCADE
) STRICT;
CREATE INDEX verified_domains_group ON verified_domains (group_uid);

CREATE TABLE terms_acceptances (
    group_uid   TEXT NOT NULL REFERENCES groups (uid) ON DELETE CASCADE,
    doc_id      TEXT NOT NULL,
    accepted_by TEXT NOT NULL,
    create_time INTEGER NOT NULL,
    PRIMARY KEY (group_uid, doc_id, accepted_by)
) STRICT;

CREATE TABLE group_access_requests (
    group_uid    TEXT NOT NULL REFERENCES groups (uid) ON DELETE CASCADE,
    identity_uid TEXT NOT NULL REFERENCES identities (uid) ON DELETE CASCADE,
    email        TEXT NOT NULL,
    create_time  INTEGER NOT NULL,
    PRIMARY KEY (group_uid, identity_uid)
) STRICT;
CREATE INDEX group_access_requests_identity ON group_access_requests (identity_uid);

-- Headless logins in progress: the CLI polls with its device code (kept as
-- its SHA-256), the person types the user code in a browser anywhere.
CREATE TABLE device_logins (
    id          TEXT PRIMARY KEY NOT NULL,
    user_code   TEXT NOT NULL UNIQUE,
    idp_uid     TEXT NOT NULL,
    challenge   TEXT NOT NULL,
    -- The sealed handoff once the person has logged in.
    handoff     TEXT,
    expire_time INTEGER NOT NULL
) STRICT;
CREATE INDEX device_logins_expire_time ON device_logins (expire_time);
CREATE INDEX device_logins_idp ON device_logins (idp_uid);

-- A person's own profile details (UpdateIdentityMetadata), as proto3 JSON.
CREATE TABLE identity_metadata (
    identity_uid TEXT PRIMARY KEY NOT NULL REFERENCES identities (uid) ON DELETE CASCADE,
    data         TEXT NOT NULL
) STRICT;
