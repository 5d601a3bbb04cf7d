-- PostgreSQL's 0009 adds change counters for its count cache. SQLite has one
-- writing process and caches counts by its own write generation, so there is
-- nothing to add here; the file keeps version numbers equal on both backends.
SELECT 1;
