-- Each indexed package of a feed record keeps what a report needs to decide
-- whether the record can apply to an image, so a report reads only these
-- rows (no join to the records' bodies): the record's `ranges` and
-- `versions` for the package (NULL for records imported before: the body is
-- read instead), and the record's digest, withdrawal and update time (kept
-- with the record: its index rows are rewritten whenever it changes).
ALTER TABLE feed_record_packages ADD COLUMN affected TEXT;
ALTER TABLE feed_record_packages ADD COLUMN digest TEXT NOT NULL DEFAULT '';
ALTER TABLE feed_record_packages ADD COLUMN withdrawn BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE feed_record_packages ADD COLUMN update_time BIGINT NOT NULL DEFAULT 0;
UPDATE feed_record_packages p SET digest = r.digest, withdrawn = (r.withdrawn IS NOT NULL), update_time = r.update_time
FROM feed_records r WHERE r.parent_uid = p.parent_uid AND r.id = p.record_id;
