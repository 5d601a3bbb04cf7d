-- Change counters: every statement that writes one of the listed tables adds
-- one to a counter of that table, in the same transaction. A listing's
-- totalCount is cached with the sum of its tables' counters read in the same
-- snapshot as the count; a later read that sums to the same value sees exactly
-- the same committed writes, so the cached count is still exact, on every
-- replica. Each table has 16 counter rows (by backend), so concurrent writers
-- rarely wait on one another's row.
CREATE TABLE change_counters (
    tbl TEXT COLLATE "C" NOT NULL,
    shard INTEGER NOT NULL,
    n BIGINT NOT NULL,
    PRIMARY KEY (tbl, shard)
);

CREATE FUNCTION ward_count_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO change_counters (tbl, shard, n) VALUES (TG_TABLE_NAME, pg_backend_pid() % 16, 1)
    ON CONFLICT (tbl, shard) DO UPDATE SET n = change_counters.n + 1;
    RETURN NULL;
END
$$;

CREATE TRIGGER groups_changes AFTER INSERT OR UPDATE OR DELETE ON groups
    FOR EACH STATEMENT EXECUTE FUNCTION ward_count_change();
CREATE TRIGGER identities_changes AFTER INSERT OR UPDATE OR DELETE ON identities
    FOR EACH STATEMENT EXECUTE FUNCTION ward_count_change();
CREATE TRIGGER roles_changes AFTER INSERT OR UPDATE OR DELETE ON roles
    FOR EACH STATEMENT EXECUTE FUNCTION ward_count_change();
CREATE TRIGGER role_bindings_changes AFTER INSERT OR UPDATE OR DELETE ON role_bindings
    FOR EACH STATEMENT EXECUTE FUNCTION ward_count_change();
CREATE TRIGGER account_associations_changes AFTER INSERT OR UPDATE OR DELETE ON account_associations
    FOR EACH STATEMENT EXECUTE FUNCTION ward_count_change();
CREATE TRIGGER advisories_changes AFTER INSERT OR UPDATE OR DELETE ON advisories
    FOR EACH STATEMENT EXECUTE FUNCTION ward_count_change();
CREATE TRIGGER advisory_aliases_changes AFTER INSERT OR UPDATE OR DELETE ON advisory_aliases
    FOR EACH STATEMENT EXECUTE FUNCTION ward_count_change();
CREATE TRIGGER advisory_events_changes AFTER INSERT OR UPDATE OR DELETE ON advisory_events
    FOR EACH STATEMENT EXECUTE FUNCTION ward_count_change();
CREATE TRIGGER identity_providers_changes AFTER INSERT OR UPDATE OR DELETE ON identity_providers
    FOR EACH STATEMENT EXECUTE FUNCTION ward_count_change();
CREATE TRIGGER external_group_role_mappings_changes AFTER INSERT OR UPDATE OR DELETE ON external_group_role_mappings
    FOR EACH STATEMENT EXECUTE FUNCTION ward_count_change();
CREATE TRIGGER group_invites_changes AFTER INSERT OR UPDATE OR DELETE ON group_invites
    FOR EACH STATEMENT EXECUTE FUNCTION ward_count_change();
CREATE TRIGGER repos_changes AFTER INSERT OR UPDATE OR DELETE ON repos
    FOR EACH STATEMENT EXECUTE FUNCTION ward_count_change();
CREATE TRIGGER tags_changes AFTER INSERT OR UPDATE OR DELETE ON tags
    FOR EACH STATEMENT EXECUTE FUNCTION ward_count_change();
