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
