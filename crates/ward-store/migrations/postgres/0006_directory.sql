-- Ward schema v6 (PostgreSQL): verified email domains of organizations, terms
-- acceptances, and requests to join a group.

CREATE TABLE verified_domains (
    domain    TEXT COLLATE "C" PRIMARY KEY NOT NULL,
    group_uid TEXT COLLATE "C" NOT NULL REFERENCES groups (uid) ON DELETE CASCADE
);
CREATE INDEX verified_domains_group ON verified_domains (group_uid);

CREATE TABLE terms_acceptances (
    group_uid   TEXT COLLATE "C" NOT NULL REFERENCES groups (uid) ON DELETE CASCADE,
    doc_id      TEXT COLLATE "C" NOT NULL,
    accepted_by TEXT COLLATE "C" NOT NULL,
    create_time BIGINT NOT NULL,
    PRIMARY KEY (group_uid, doc_id, accepted_by)
);

CREATE TABLE group_access_requests (
    group_uid    TEXT COLLATE "C" NOT NULL REFERENCES groups (uid) ON DELETE CASCADE,
    identity_uid TEXT COLLATE "C" NOT NULL REFERENCES identities (uid) ON DELETE CASCADE,
    email        TEXT NOT NULL,
    create_time  BIGINT NOT NULL,
    PRIMARY KEY (group_uid, identity_uid)
);
CREATE INDEX group_access_requests_identity ON group_access_requests (identity_uid);

-- Headless logins in progress: the CLI polls with its device code (kept as
-- its SHA-256), the person types the user code in a browser anywhere.
CREATE TABLE device_logins (
    id          TEXT COLLATE "C" PRIMARY KEY NOT NULL,
    user_code   TEXT COLLATE "C" NOT NULL UNIQUE,
    idp_uid     TEXT NOT NULL,
    challenge   TEXT NOT NULL,
    -- The sealed handoff once the person has logged in.
    handoff     TEXT,
    expire_time BIGINT NOT NULL
);
CREATE INDEX device_logins_expire_time ON device_logins (expire_time);
CREATE INDEX device_logins_idp ON device_logins (idp_uid);

-- A person's own profile details (UpdateIdentityMetadata), as proto3 JSON.
CREATE TABLE identity_metadata (
    identity_uid TEXT COLLATE "C" PRIMARY KEY NOT NULL REFERENCES identities (uid) ON DELETE CASCADE,
    data         TEXT NOT NULL
);
