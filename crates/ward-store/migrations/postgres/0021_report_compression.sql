-- A stored report is ~1 MB of JSON for a 2,000-package image, compressed on
-- every write (each push, each re-evaluation that changes it). pglz, the
-- default, spent ~20 ms of the PostgreSQL bench's ~100 ms report on it; lz4
-- compresses several times faster. A server built without lz4 keeps pglz.
DO $$
BEGIN
    ALTER TABLE vuln_reports ALTER COLUMN report SET COMPRESSION lz4;
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'vuln_reports.report keeps its default compression: %', SQLERRM;
END
$$;
