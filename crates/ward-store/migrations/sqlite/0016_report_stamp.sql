-- A covering index for the report stamp (the time a report was made), read
-- on every GetVulnReport to tell whether the cached reply is current. The
-- stamp column sits after the report's JSON in the row, and reading it
-- from the table walks that JSON's whole overflow chain (hundreds of pages
-- for a large image); from this index it is one lookup.
CREATE INDEX vuln_reports_stamp ON vuln_reports (repo_uid, digest, create_time);
