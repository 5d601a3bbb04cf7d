-- Advisory feeds (issue 24): what an import kept but flagged, and OSV
-- records of any ecosystem kept exactly as published.
--
-- advisory_flags: one row per thing an import kept that Ward cannot use in
-- its decisions (an unorderable version), shortened (an over-long text) or
-- approved as imported (reviewed upstream, not in Ward). Imports only add
-- rows, as they only add events.
CREATE TABLE advisory_flags (
    advisory_uid TEXT NOT NULL REFERENCES advisories (uid) ON DELETE CASCADE,
    code         TEXT NOT NULL,
    -- The field (or, for an approval, the event uid) the flag is about.
    field        TEXT NOT NULL,
    detail       TEXT NOT NULL,
    create_time  INTEGER NOT NULL,
    PRIMARY KEY (advisory_uid, code, field)
);

-- feed_records: an imported OSV record, the body byte for byte as sent. One
-- per (group, id); a newer `modified` replaces it, `withdrawn` marks it.
CREATE TABLE feed_records (
    parent_uid  TEXT NOT NULL REFERENCES groups (uid) ON DELETE CASCADE,
    id          TEXT NOT NULL,
    -- Milliseconds since the epoch.
    modified    INTEGER NOT NULL,
    withdrawn   INTEGER,
    -- JSON arrays of strings.
    aliases     TEXT NOT NULL,
    ecosystems  TEXT NOT NULL,
    body        TEXT NOT NULL,
    -- SHA-256 of the content (JSON, sorted keys): a re-import of the same
    -- record, however it is rendered, is unchanged.
    digest      TEXT NOT NULL,
    create_time INTEGER NOT NULL,
    update_time INTEGER NOT NULL,
    PRIMARY KEY (parent_uid, id)
);
CREATE INDEX feed_records_id ON feed_records (id, parent_uid);

-- The packages and aliases of each record, for lookups by package (reports)
-- and by alias.
CREATE TABLE feed_record_packages (
    parent_uid TEXT NOT NULL,
    record_id  TEXT NOT NULL,
    ecosystem  TEXT NOT NULL,
    name       TEXT NOT NULL,
    PRIMARY KEY (parent_uid, record_id, ecosystem, name),
    FOREIGN KEY (parent_uid, record_id) REFERENCES feed_records (parent_uid, id) ON DELETE CASCADE
);
CREATE INDEX feed_record_packages_name ON feed_record_packages (ecosystem, name);
CREATE TABLE feed_record_aliases (
    parent_uid TEXT NOT NULL,
    record_id  TEXT NOT NULL,
    alias      TEXT NOT NULL,
    PRIMARY KEY (parent_uid, record_id, alias),
    FOREIGN KEY (parent_uid, record_id) REFERENCES feed_records (parent_uid, id) ON DELETE CASCADE
);
CREATE INDEX feed_record_aliases_alias ON feed_record_aliases (alias);
