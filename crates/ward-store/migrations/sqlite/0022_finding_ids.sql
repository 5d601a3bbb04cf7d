-- PostgreSQL keeps a finding's ids in its row from this version on (its
-- per-id rows cost a foreign-key check each); SQLite keeps its
-- vuln_finding_ids table. Nothing to do; the number keeps the two
-- backends' migration versions in step.
SELECT 1;
