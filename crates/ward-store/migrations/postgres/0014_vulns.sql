-- Vulnerability reports (issue 25) and the one durable job queue.
--
-- jobs: background work done off the request path (inventories, reports,
-- re-evaluation, backfill). One row per (kind, key): enqueueing work already
-- queued merges into it; enqueueing work that is running sets `again`, so it
-- runs once more after the running attempt. A claim leases rows until
-- `lease_until`; a worker that dies leaves the lease to expire.
CREATE TABLE jobs (
    id          BIGSERIAL PRIMARY KEY,
    kind        TEXT NOT NULL,
    key         TEXT NOT NULL,
    run_after   BIGINT NOT NULL,
    lease_until BIGINT,
    attempts    BIGINT NOT NULL DEFAULT 0,
    again       BIGINT NOT NULL DEFAULT 0,
    last_error  TEXT NOT NULL DEFAULT '',
    create_time BIGINT NOT NULL,
    UNIQUE (kind, key)
);
CREATE INDEX jobs_due ON jobs (run_after, id);

-- inventories: the packages of one manifest (an index: the union of its
-- images'), or the error that stopped reading them. `document` is the
-- inventory as JSON.
CREATE TABLE inventories (
    repo_uid    TEXT NOT NULL,
    digest      TEXT NOT NULL,
    status      TEXT NOT NULL,
    error       TEXT NOT NULL,
    source      TEXT NOT NULL,
    sbom_digest TEXT NOT NULL,
    document    TEXT NOT NULL,
    update_time BIGINT NOT NULL,
    PRIMARY KEY (repo_uid, digest),
    FOREIGN KEY (repo_uid, digest) REFERENCES manifests (repo_uid, digest) ON DELETE CASCADE
);
-- The index by package: which manifests hold a package of this name.
CREATE TABLE inventory_packages (
    repo_uid TEXT NOT NULL,
    digest   TEXT NOT NULL,
    name     TEXT NOT NULL,
    PRIMARY KEY (repo_uid, digest, name),
    FOREIGN KEY (repo_uid, digest) REFERENCES inventories (repo_uid, digest) ON DELETE CASCADE
);
CREATE INDEX inventory_packages_name ON inventory_packages (name, repo_uid, digest);

-- vuln_reports: the current report of one manifest (its matches as JSON).
CREATE TABLE vuln_reports (
    repo_uid    TEXT NOT NULL,
    digest      TEXT NOT NULL,
    report      TEXT NOT NULL,
    -- When the advisory data the report used last changed.
    data_time   BIGINT NOT NULL,
    create_time BIGINT NOT NULL,
    PRIMARY KEY (repo_uid, digest),
    FOREIGN KEY (repo_uid, digest) REFERENCES manifests (repo_uid, digest) ON DELETE CASCADE
);
-- vuln_findings: each vulnerability a manifest's reports have shown, from
-- when, until when (resolved_at NULL: still there). Counts by day and
-- resolved-vulnerability reports read these.
CREATE TABLE vuln_findings (
    repo_uid    TEXT NOT NULL,
    digest      TEXT NOT NULL,
    vuln_id     TEXT NOT NULL,
    severity    TEXT NOT NULL,
    -- JSON array of the vulnerability's aliases.
    aliases     TEXT NOT NULL,
    first_seen  BIGINT NOT NULL,
    resolved_at BIGINT,
    PRIMARY KEY (repo_uid, digest, vuln_id),
    FOREIGN KEY (repo_uid, digest) REFERENCES manifests (repo_uid, digest) ON DELETE CASCADE
);
-- Every id a finding answers to (its own and its aliases'): the
-- affected-images query.
CREATE TABLE vuln_finding_ids (
    repo_uid TEXT NOT NULL,
    digest   TEXT NOT NULL,
    vuln_id  TEXT NOT NULL,
    id       TEXT NOT NULL,
    PRIMARY KEY (repo_uid, digest, vuln_id, id),
    FOREIGN KEY (repo_uid, digest, vuln_id) REFERENCES vuln_findings (repo_uid, digest, vuln_id) ON DELETE CASCADE
);
CREATE INDEX vuln_finding_ids_id ON vuln_finding_ids (id, repo_uid, digest);

-- Feed records by package name alone (an image's packages are looked up by
-- name, then their ecosystem is compared).
CREATE INDEX feed_record_packages_by_name ON feed_record_packages (name);

-- Manifests by digest alone: the reports of a digest in every repo holding it.
CREATE INDEX manifests_digest ON manifests (digest, repo_uid);
-- An image's referrers and an image's indexes, looked up for every
-- inventory: indexes that lead with the repo and then the looked-up column
-- (SQLite otherwise walks the repo's primary-key range).
CREATE INDEX manifests_repo_subject ON manifests (repo_uid, subject, digest);
CREATE INDEX manifest_refs_repo_target ON manifest_refs (repo_uid, target);
