-- Child counts: how many rows of a table each parent group has, kept by row
-- triggers in the writing transaction. The count of a subtree (every row
-- whose uid lies in [P, P0)) is the sum of its parents' counts over the same
-- range, plus the row P itself: reading a few rows per group instead of
-- every row, and exact, since it commits with the rows it counts. Each
-- parent has up to 16 rows per table (by backend), so concurrent creates
-- under one parent rarely wait on one another's row.
CREATE TABLE parent_counts (
    tbl TEXT COLLATE "C" NOT NULL,
    parent_uid TEXT COLLATE "C" NOT NULL,
    shard INTEGER NOT NULL,
    n BIGINT NOT NULL,
    PRIMARY KEY (tbl, parent_uid, shard)
);

CREATE FUNCTION ward_count_child() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') AND OLD.parent_uid IS NOT NULL THEN
        INSERT INTO parent_counts (tbl, parent_uid, shard, n)
        VALUES (TG_TABLE_NAME, OLD.parent_uid, pg_backend_pid() % 16, -1)
        ON CONFLICT (tbl, parent_uid, shard) DO UPDATE SET n = parent_counts.n - 1;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.parent_uid IS NOT NULL THEN
        INSERT INTO parent_counts (tbl, parent_uid, shard, n)
        VALUES (TG_TABLE_NAME, NEW.parent_uid, pg_backend_pid() % 16, 1)
        ON CONFLICT (tbl, parent_uid, shard) DO UPDATE SET n = parent_counts.n + 1;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER groups_children AFTER INSERT OR DELETE OR UPDATE OF parent_uid ON groups
    FOR EACH ROW EXECUTE FUNCTION ward_count_child();
CREATE TRIGGER identities_children AFTER INSERT OR DELETE OR UPDATE OF parent_uid ON identities
    FOR EACH ROW EXECUTE FUNCTION ward_count_child();
CREATE TRIGGER role_bindings_children AFTER INSERT OR DELETE OR UPDATE OF parent_uid ON role_bindings
    FOR EACH ROW EXECUTE FUNCTION ward_count_child();
CREATE TRIGGER repos_children AFTER INSERT OR DELETE OR UPDATE OF parent_uid ON repos
    FOR EACH ROW EXECUTE FUNCTION ward_count_child();

-- The rows already there.
INSERT INTO parent_counts (tbl, parent_uid, shard, n)
SELECT 'groups', parent_uid, 0, COUNT(*) FROM groups WHERE parent_uid IS NOT NULL GROUP BY parent_uid;
INSERT INTO parent_counts (tbl, parent_uid, shard, n)
SELECT 'identities', parent_uid, 0, COUNT(*) FROM identities WHERE parent_uid IS NOT NULL GROUP BY parent_uid;
INSERT INTO parent_counts (tbl, parent_uid, shard, n)
SELECT 'role_bindings', parent_uid, 0, COUNT(*) FROM role_bindings GROUP BY parent_uid;
INSERT INTO parent_counts (tbl, parent_uid, shard, n)
SELECT 'repos', parent_uid, 0, COUNT(*) FROM repos GROUP BY parent_uid;
