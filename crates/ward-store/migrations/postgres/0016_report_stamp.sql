-- SQLite's migration 0016 adds a covering index for the report stamp (its
-- rows keep large values inline). PostgreSQL keeps them out of line
-- (TOAST), so reading the stamp never touches the report's JSON: nothing to
-- do here, and the version numbers of both backends stay the same.
SELECT 1;
