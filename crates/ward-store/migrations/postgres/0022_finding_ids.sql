-- Every id a finding answers to (its own and its aliases') moves into the
-- finding's row, searched through a GIN index, instead of a row of its own
-- per id: storing an image's first report wrote ~2,000 such rows, each
-- with a foreign-key check against its finding, which cost more than the
-- findings themselves (a 1,016-finding report: ~45 ms of inserts, ~16 ms
-- with the array). Only open findings are ever searched by id.
ALTER TABLE vuln_findings ADD COLUMN ids TEXT[] NOT NULL DEFAULT '{}';
UPDATE vuln_findings f SET ids = ARRAY(
    SELECT i.id FROM vuln_finding_ids i
    WHERE i.repo_uid = f.repo_uid AND i.digest = f.digest AND i.vuln_id = f.vuln_id
    ORDER BY i.id
);
ALTER TABLE vuln_findings ALTER COLUMN ids DROP DEFAULT;
DROP TABLE vuln_finding_ids;
CREATE INDEX vuln_findings_ids ON vuln_findings USING gin (ids) WHERE resolved_at IS NULL;
