-- A report reads, for each package name in an image, every feed record that
-- names it. In feed_record_packages those rows lie where each import put
-- them, so the ~10 rows of one name sit on ~10 different pages and a
-- report's 20,000 rows touch nearly every page of the table (a sequential
-- scan the planner prefers, ~50 ms, that never stays cached). This table
-- keeps them together: one row per (group, ecosystem, name) whose `entries`
-- is a JSON array of [record_id, affected, digest, withdrawn, update_time],
-- one per record, derived from feed_record_packages (which stays the source)
-- and rewritten in the same transaction as any import that touches the name.
CREATE TABLE feed_name_packages (
    parent_uid TEXT NOT NULL REFERENCES groups (uid) ON DELETE CASCADE,
    ecosystem  TEXT NOT NULL,
    name       TEXT NOT NULL,
    entries    TEXT NOT NULL,
    PRIMARY KEY (parent_uid, ecosystem, name)
);
CREATE INDEX feed_name_packages_name ON feed_name_packages (name);
INSERT INTO feed_name_packages (parent_uid, ecosystem, name, entries)
SELECT parent_uid, ecosystem, name,
       json_agg(json_build_array(record_id, affected, digest, withdrawn, update_time) ORDER BY record_id)::text
FROM feed_record_packages GROUP BY parent_uid, ecosystem, name;
