-- PostgreSQL keeps per-parent child counts (0010_parent_counts.sql); SQLite
-- counts its subtree ranges directly. Kept so both backends share version numbers.
SELECT 1;
