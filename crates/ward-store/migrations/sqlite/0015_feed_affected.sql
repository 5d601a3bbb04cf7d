-- Each indexed package of a feed record keeps what a report needs to decide
-- whether the record can apply to an image, so a report reads only these
-- rows (no join to the records' bodies): the record's `ranges` and
-- `versions` for the package (NULL for records imported before: the body is
-- read instead), and the record's digest, withdrawal and update time (kept
-- with the record: its index rows are rewritten whenever it changes).
--
-- The table is rebuilt clustered by package name (WITHOUT ROWID): an
-- image's 2,000 names then read 2,000 runs of adjacent rows instead of
-- 20,000 scattered ones.
CREATE TABLE feed_record_packages_by_name_new (
    name        TEXT NOT NULL,
    parent_uid  TEXT NOT NULL,
    record_id   TEXT NOT NULL,
    ecosystem   TEXT NOT NULL,
    affected    TEXT,
    digest      TEXT NOT NULL DEFAULT '',
    withdrawn   INTEGER NOT NULL DEFAULT 0,
    update_time INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (name, parent_uid, record_id, ecosystem),
    FOREIGN KEY (parent_uid, record_id) REFERENCES feed_records (parent_uid, id) ON DELETE CASCADE
) WITHOUT ROWID;
INSERT INTO feed_record_packages_by_name_new (name, parent_uid, record_id, ecosystem, digest, withdrawn, update_time)
SELECT p.name, p.parent_uid, p.record_id, p.ecosystem, r.digest, r.withdrawn IS NOT NULL, r.update_time
FROM feed_record_packages p JOIN feed_records r ON r.parent_uid = p.parent_uid AND r.id = p.record_id;
DROP TABLE feed_record_packages;
ALTER TABLE feed_record_packages_by_name_new RENAME TO feed_record_packages;
-- A record's rows, rewritten when it changes (and its cascade).
CREATE INDEX feed_record_packages_record ON feed_record_packages (parent_uid, record_id);
