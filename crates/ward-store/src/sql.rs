//! SQL shared by both backends, rendered for each dialect's placeholders.
//!
//! Only list queries are built dynamically; every value is bound, never spliced.

use ward_core::listing::{CursorKey, FilterValue, ListQuery, SortField};

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// A bound value.
#[derive(Clone, Debug)]
pub enum Bind {
    Text(String),
    Int(i64),
}

/// SQL text plus its binds, in placeholder order.
pub struct Built {
    pub sql: String,
    pub binds: Vec<Bind>,
}

struct Builder {
    dialect: Dialect,
    binds: Vec<Bind>,
    /// Write subtree (uid range) conditions as `+uid`, which SQLite cannot
    /// serve from an index: see [`Plan`].
    unindexed_ranges: bool,
}

impl Builder {
    /// Adds a bind and returns its placeholder.
    fn bind(&mut self, b: Bind) -> String {
        self.binds.push(b);
        match self.dialect {
            Dialect::Sqlite => "?".into(),
            Dialect::Postgres => format!("${}", self.binds.len()),
        }
    }

    fn text(&mut self, s: &str) -> String {
        self.bind(Bind::Text(s.to_owned()))
    }

    /// The uid column as a subtree range condition names it.
    fn range_column(&self) -> &'static str {
        if self.unindexed_ranges { "+uid" } else { "uid" }
    }
}

pub const GROUP_COLUMNS: &str = "uid, parent_uid, name, description, verified, create_time, update_time, kind";
pub const IDENTITY_COLUMNS: &str = "uid, parent_uid, name, description, company, relationship_type, relationship, \
                                    issuer, subject, last_seen_time, create_time, update_time";
pub const ROLE_COLUMNS: &str = "uid, parent_uid, name, description, capabilities, create_time, update_time";
pub const BINDING_COLUMNS: &str = "uid, parent_uid, identity_uid, role_uid, create_time, update_time, name, \
                                   identity_name, identity_description, identity_subject, identity_issuer, \
                                   group_name, group_description, role_description";

pub const REPO_COLUMNS: &str = "uid, parent_uid, org_uid, name, description, catalog_tier, bundles, aliases, \
                                active_tags, create_time, update_time";
/// A tag made by name before any push has no digest (NULL); it reads as "".
pub const TAG_COLUMNS: &str =
    "uid, parent_uid, name, COALESCE(digest, '') AS digest, create_time, update_time, deprecated, bundles";
pub const ADVISORY_COLUMNS: &str = "uid, parent_uid, advisory_id, legacy_advisory_id, origin, author, artifact_name, \
                                    artifact_type, artifact_architecture, component_name, component_location, \
                                    component_type, aliases, severities, latest_type, fixed_version, create_time, \
                                    update_time, delete_time";
pub const EVENT_COLUMNS: &str = "uid, advisory_uid, event_time, type AS kind, author, reviewer, review_state, issue, \
                                 payload, fingerprint, findings, create_time, update_time";

fn sort_column(f: SortField) -> &'static str {
    match f {
        SortField::Uid => "uid",
        SortField::Name => "name",
        SortField::CreateTime => "create_time",
        SortField::UpdateTime => "update_time",
    }
}

/// The WHERE conditions of a list query, excluding the cursor.
fn filters(b: &mut Builder, q: &ListQuery) -> Vec<String> {
    let mut w = Vec::new();
    let f = &q.uidp;
    if let Some(p) = &f.descendants_of {
        // [P, P0) holds P itself and every uid below it: no other valid UIDP sorts
        // between P and P + "/" (segments are fixed-length hex).
        let (lo, hi) = (b.text(p.as_str()), b.text(&format!("{p}0")));
        let uid = b.range_column();
        w.push(format!("{uid} >= {lo} AND {uid} < {hi}"));
    }
    if let Some(p) = &f.children_of {
        let ph = b.text(p.as_str());
        w.push(format!("parent_uid = {ph}"));
    }
    if let Some(x) = &f.ancestors_of {
        let anc = x.ancestors();
        if anc.is_empty() {
            w.push("1 = 0".into());
        } else {
            let phs: Vec<String> = anc.iter().map(|a| b.text(a.as_str())).collect();
            w.push(format!("uid IN ({})", phs.join(", ")));
        }
    }
    if f.in_root {
        w.push("parent_uid IS NULL".into());
    }
    if !f.ids.is_empty() {
        let phs: Vec<String> = f.ids.iter().map(|a| b.text(a.as_str())).collect();
        w.push(format!("uid IN ({})", phs.join(", ")));
    }
    if let Some(n) = &q.name {
        let ph = b.text(n);
        w.push(format!("name = {ph}"));
    }
    column_filters(b, &q.filters, &mut w);
    if let Some(scopes) = &q.visible {
        visible(b, scopes, &mut w);
    }
    w
}

/// One condition per `(column, value)`, all to hold.
fn column_filters(b: &mut Builder, filters: &[(&'static str, FilterValue)], w: &mut Vec<String>) {
    for (col, v) in filters {
        let cond = match v {
            FilterValue::Text(s) => format!("{col} = {}", b.text(s)),
            FilterValue::Int(n) => format!("{col} = {}", b.bind(Bind::Int(*n))),
            FilterValue::AtLeast(n) => format!("{col} >= {}", b.bind(Bind::Int(*n))),
            FilterValue::EndsWith(s) => format!("{col} LIKE {}", b.text(&format!("%{s}"))),
            FilterValue::AnyOf(vs) | FilterValue::NoneOf(vs) if vs.is_empty() => {
                let none = matches!(v, FilterValue::AnyOf(_));
                if none { "1 = 0".into() } else { "1 = 1".into() }
            }
            FilterValue::AnyOf(vs) => {
                let phs: Vec<String> = vs.iter().map(|s| b.text(s)).collect();
                format!("{col} IN ({})", phs.join(", "))
            }
            FilterValue::NoneOf(vs) => {
                let phs: Vec<String> = vs.iter().map(|s| b.text(s)).collect();
                format!("{col} NOT IN ({})", phs.join(", "))
            }
            FilterValue::AnyOfInt(ns) if ns.is_empty() => "1 = 0".into(),
            FilterValue::AnyOfInt(ns) => {
                let phs: Vec<String> = ns.iter().map(|n| b.bind(Bind::Int(*n))).collect();
                format!("{col} IN ({})", phs.join(", "))
            }
            FilterValue::Search { text, .. } => {
                let ph = b.text(text);
                match b.dialect {
                    Dialect::Sqlite => format!("instr({col}, {ph}) > 0"),
                    Dialect::Postgres => format!("strpos({col}, {ph}) > 0"),
                }
            }
            FilterValue::IsNull(true) => format!("{col} IS NULL"),
            FilterValue::IsNull(false) => format!("{col} IS NOT NULL"),
            FilterValue::In(sub) => {
                let mut inner = Vec::new();
                column_filters(b, &sub.filters, &mut inner);
                format!(
                    "{col} IN (SELECT {} FROM {}{})",
                    sub.key,
                    sub.table,
                    where_clause(&inner)
                )
            }
        };
        w.push(cond);
    }
}

/// Restricts to uids at or below one of `scopes`.
fn visible(b: &mut Builder, scopes: &[ward_core::uidp::Uidp], w: &mut Vec<String>) {
    let scopes = outermost(scopes);
    if scopes.is_empty() {
        w.push("1 = 0".into());
        return;
    }
    let ranges: Vec<String> = scopes
        .iter()
        .map(|s| {
            let (lo, hi) = (b.text(s), b.text(&format!("{s}0")));
            let uid = b.range_column();
            format!("({uid} >= {lo} AND {uid} < {hi})")
        })
        .collect();
    w.push(balanced_or(&ranges));
}

/// The scopes that no other scope contains, sorted: a scope below another
/// adds no rows, only SQL.
fn outermost(scopes: &[ward_core::uidp::Uidp]) -> Vec<&str> {
    let mut all: Vec<&str> = scopes.iter().map(ward_core::uidp::Uidp::as_str).collect();
    all.sort_unstable();
    all.dedup();
    let mut out: Vec<&str> = Vec::with_capacity(all.len());
    for s in all {
        // Sorted, so a containing scope (a prefix) comes right before its
        // descendants: comparing with the last one kept is enough.
        if out.last().is_none_or(|kept| !ward_core::uidp::Uidp::is_within(s, kept)) {
            out.push(s);
        }
    }
    out
}

/// `a OR b OR …` as a balanced tree of parenthesized halves: SQLite refuses
/// an expression deeper than 1,000, and a chain of n ORs is n deep; the tree
/// is log2(n).
fn balanced_or(terms: &[String]) -> String {
    match terms {
        [] => "1 = 0".into(),
        [one] => one.clone(),
        _ => {
            let (l, r) = terms.split_at(terms.len() / 2);
            format!("({} OR {})", balanced_or(l), balanced_or(r))
        }
    }
}

/// The OCI catalog: `(org_uid, name)` of repos in `visible`, after `after`.
pub fn catalog(
    dialect: Dialect,
    scopes: Option<&[ward_core::uidp::Uidp]>,
    after: Option<(&str, &str)>,
    limit: u32,
) -> Built {
    let mut b = Builder {
        dialect,
        binds: Vec::new(),
        unindexed_ranges: false,
    };
    let mut w = Vec::new();
    if let Some(scopes) = scopes {
        visible(&mut b, scopes, &mut w);
    }
    if let Some((org, name)) = after {
        let (o, n) = (b.text(org), b.text(name));
        w.push(format!("(org_uid, name) > ({o}, {n})"));
    }
    let l = b.bind(Bind::Int(i64::from(limit)));
    Built {
        sql: format!(
            "SELECT org_uid, name FROM repos{} ORDER BY org_uid, name LIMIT {l}",
            where_clause(&w)
        ),
        binds: b.binds,
    }
}

fn where_clause(w: &[String]) -> String {
    if w.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", w.join(" AND "))
    }
}

/// The table, and on SQLite the index a substring search must scan: left
/// to itself the planner walks the primary key and reads every row.
fn from(dialect: Dialect, table: &str, q: &ListQuery) -> String {
    let search = q.filters.iter().find_map(|(_, v)| match v {
        FilterValue::Search { index, .. } => Some(*index),
        _ => None,
    });
    match (dialect, search) {
        (Dialect::Sqlite, Some(index)) => format!("{table} INDEXED BY {index}"),
        _ => table.to_owned(),
    }
}

/// The count cache's key for a query: a digest, never the query itself, so a
/// cache entry is 32 bytes however long the filter.
pub fn count_key(sql: &str, binds: &[Bind]) -> [u8; 32] {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    h.update(sql.as_bytes());
    for b in binds {
        h.update([0u8]);
        h.update(format!("{b:?}").as_bytes());
    }
    h.finalize().into()
}

/// Tables whose writes PostgreSQL counts in `change_counters` (migration
/// 0009 gives each a trigger; a test checks the two lists agree).
pub const COUNTED_TABLES: &[&str] = &[
    "groups",
    "identities",
    "roles",
    "role_bindings",
    "account_associations",
    "advisories",
    "advisory_aliases",
    "advisory_events",
    "identity_providers",
    "external_group_role_mappings",
    "group_invites",
    "repos",
    "tags",
];

/// A scalar subquery summing the change counters of every table a listing's
/// count reads (its table, a view's tables, subquery tables), or `None` when
/// one of them is not counted: then the count cannot be cached.
pub fn change_version(table: &str, q: &ListQuery) -> Option<String> {
    let mut tables: Vec<&str> = match table {
        "role_bindings_hydrated" => vec!["role_bindings", "identities", "groups", "roles"],
        t => vec![t],
    };
    fn subquery_tables(filters: &[(&'static str, FilterValue)], out: &mut Vec<&str>) {
        for (_, v) in filters {
            if let FilterValue::In(sub) = v {
                out.push(sub.table);
                subquery_tables(&sub.filters, out);
            }
        }
    }
    subquery_tables(&q.filters, &mut tables);
    if !tables.iter().all(|t| COUNTED_TABLES.contains(t)) {
        return None;
    }
    let list = tables.iter().map(|t| format!("'{t}'")).collect::<Vec<_>>().join(", ");
    Some(format!(
        "(SELECT COALESCE(SUM(n), 0)::BIGINT FROM change_counters WHERE tbl IN ({list}))"
    ))
}

/// `SELECT COUNT(*)` of every match, across pages.
pub fn count(dialect: Dialect, table: &str, q: &ListQuery) -> Built {
    let mut b = Builder {
        dialect,
        binds: Vec::new(),
        unindexed_ranges: false,
    };
    let w = filters(&mut b, q);
    Built {
        sql: format!(
            "SELECT COUNT(*) FROM {}{}",
            from(dialect, count_table(table, q), q),
            where_clause(&w)
        ),
        binds: b.binds,
    }
}

/// Tables whose rows PostgreSQL counts per parent group (migration 0010).
pub const PARENT_COUNTED_TABLES: &[&str] = &["groups", "identities", "role_bindings", "repos"];

/// A PostgreSQL count of a whole subtree read from the per-parent child
/// counts of migration 0010: `None` unless the query is only
/// `descendants_of` a uid, on a table counted per parent. A row's uid is its
/// parent's uid plus one segment, so the rows in the subtree [P, P0) are the
/// row P itself and the children of the parents in [P, P0). The sum reads a
/// few rows per group in the subtree, however many rows they hold.
pub fn count_by_parents(table: &str, q: &ListQuery) -> Option<Built> {
    let table = count_table(table, q);
    let f = &q.uidp;
    let only_subtree = f.children_of.is_none()
        && f.ancestors_of.is_none()
        && !f.in_root
        && f.ids.is_empty()
        && q.name.is_none()
        && q.filters.is_empty()
        && q.visible.is_none();
    let p = f.descendants_of.as_ref().filter(|_| only_subtree)?;
    if !PARENT_COUNTED_TABLES.contains(&table) {
        return None;
    }
    Some(Built {
        sql: format!(
            "SELECT (SELECT COALESCE(SUM(n), 0) FROM parent_counts \
             WHERE tbl = '{table}' AND parent_uid >= $1 AND parent_uid < $2)::BIGINT \
             + (SELECT COUNT(*) FROM {table} WHERE uid = $1)"
        ),
        binds: vec![Bind::Text(p.as_str().to_owned()), Bind::Text(format!("{p}0"))],
    })
}

/// The columns of `role_bindings` itself, under the same names in its view.
const BINDING_BASE_COLUMNS: &[&str] = &[
    "uid",
    "parent_uid",
    "identity_uid",
    "role_uid",
    "create_time",
    "update_time",
];

/// The table a count reads. A binding's identity, group and role are
/// required foreign keys, so the view `role_bindings_hydrated` (inner joins
/// on them) has exactly the rows of `role_bindings`: unless a filter reads a
/// joined column (the role's name), the count skips the joins (17 ms → 2 ms
/// over 20,000 bindings).
fn count_table<'a>(table: &'a str, q: &ListQuery) -> &'a str {
    let base_only = q.name.is_none() && q.filters.iter().all(|(col, _)| BINDING_BASE_COLUMNS.contains(col));
    if table == "role_bindings_hydrated" && base_only {
        "role_bindings"
    } else {
        table
    }
}

/// One page (`page_size + 1` rows, to tell whether more follow), after the cursor.
pub fn page(dialect: Dialect, table: &str, columns: &str, q: &ListQuery) -> Built {
    build_page(dialect, table, columns, q, Plan::Planner)
}

/// How a page ordered by a column other than uid, of a subtree (a uid range),
/// is to be read. Planners cannot tell a subtree's size from its range, and
/// the two plans differ by orders of magnitude: walking the `(column, uid)`
/// index and skipping rows outside the subtree meets a match every few rows
/// in a subtree that is a large share of its table (0.02 ms for a page of
/// 10,001 groups ordered by name, where sorting them takes 4.8 ms), but walks
/// most of the index for a small one (8 ms on PostgreSQL for 100 of 10,001
/// groups, where sorting them takes 0.2 ms). The stores pick with the count.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// Whatever the database's planner picks.
    Planner,
    /// Walk the sort column's index (SQLite: the range as `+uid`, which no
    /// index serves).
    WalkIndex,
    /// Read the range and sort it (the sort key as an expression, `name || ''`
    /// or `create_time + 0`, which no index serves).
    SortRange,
}

/// Whether a list is a subtree ordered by a column other than uid: the case
/// where the choice of [`Plan`] matters.
fn ordered_subtree(q: &ListQuery) -> bool {
    let search = q.filters.iter().any(|(_, v)| matches!(v, FilterValue::Search { .. }));
    let ranged = q.uidp.descendants_of.is_some() || q.visible.is_some();
    q.order.field != SortField::Uid && ranged && !search
}

/// The page of [`page`] read by walking the sort column's index, for SQLite
/// (whose planner always sorts the range): `None` where the choice does not
/// arise, or for a view. The store takes it when the matches are a large
/// share of the table ([`WALK_INDEX_SHARE`]); either way the work is linear
/// at worst.
pub fn page_walking_index(table: &str, columns: &str, q: &ListQuery) -> Option<Built> {
    (ordered_subtree(q) && !table.ends_with("_hydrated"))
        .then(|| build_page(Dialect::Sqlite, table, columns, q, Plan::WalkIndex))
}

/// SQLite walks the index when matches × this ≥ the table's size.
pub const WALK_INDEX_SHARE: i64 = 8;

/// The page of [`page`] read by sorting the subtree's range, for PostgreSQL
/// (whose planner, without a size estimate for the range, walks the index):
/// `None` where the choice does not arise. The store takes it when the last
/// count of the query was at most [`SORT_RANGE_MAX`].
pub fn page_sorting_range(table: &str, columns: &str, q: &ListQuery) -> Option<Built> {
    ordered_subtree(q).then(|| build_page(Dialect::Postgres, table, columns, q, Plan::SortRange))
}

/// PostgreSQL sorts a subtree's range of at most this many rows (well under
/// a millisecond).
pub const SORT_RANGE_MAX: i64 = 2_000;

fn build_page(dialect: Dialect, table: &str, columns: &str, q: &ListQuery, plan: Plan) -> Built {
    let mut b = Builder {
        dialect,
        binds: Vec::new(),
        unindexed_ranges: plan == Plan::WalkIndex,
    };
    let mut w = filters(&mut b, q);
    let col = sort_column(q.order.field);
    let (cmp, dir) = if q.order.desc { ("<", "DESC") } else { (">", "ASC") };
    if let Some(c) = &q.after {
        let key = match &c.key {
            CursorKey::Text(s) => Bind::Text(s.clone()),
            CursorKey::Millis(n) => Bind::Int(*n),
        };
        if q.order.field == SortField::Uid {
            let u = b.text(&c.uid);
            w.push(format!("uid {cmp} {u}"));
        } else {
            let (k, u) = (b.bind(key), b.text(&c.uid));
            w.push(format!("({col}, uid) {cmp} ({k}, {u})"));
        }
    }
    let order = match (q.order.field, plan) {
        (SortField::Uid, _) => format!("uid {dir}"),
        (SortField::Name, Plan::SortRange) => format!("{col} || '' {dir}, uid {dir}"),
        (_, Plan::SortRange) => format!("{col} + 0 {dir}, uid {dir}"),
        _ => format!("{col} {dir}, uid {dir}"),
    };
    let limit = b.bind(Bind::Int(i64::from(q.page_size) + 1));
    let offset = b.bind(Bind::Int(i64::from(q.skip)));
    Built {
        sql: format!(
            "SELECT {columns} FROM {}{} ORDER BY {order} LIMIT {limit} OFFSET {offset}",
            from(dialect, table, q),
            where_clause(&w)
        ),
        binds: b.binds,
    }
}

/// Binds `binds` in order onto a `query_as`.
pub fn bind_all<'q, DB, O>(
    mut q: sqlx::query::QueryAs<'q, DB, O, <DB as sqlx::Database>::Arguments<'q>>,
    binds: Vec<Bind>,
) -> sqlx::query::QueryAs<'q, DB, O, <DB as sqlx::Database>::Arguments<'q>>
where
    DB: sqlx::Database,
    String: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    for b in binds {
        q = match b {
            Bind::Text(s) => q.bind(s),
            Bind::Int(n) => q.bind(n),
        };
    }
    q
}

pub const IDENTITY_PROVIDER_COLUMNS: &str =
    "uid, parent_uid, name, description, default_role, issuer, oidc, client_secret, create_time, update_time";
pub const GROUP_MAPPING_COLUMNS: &str = "uid, parent_uid, name, role_uid, scope, create_time, update_time";
pub const GROUP_INVITE_COLUMNS: &str =
    "uid, parent_uid, name, role_uid, email, expire_time, single_use, create_time, update_time";
pub const PERSON_COLUMNS: &str = "identity_uid, identity_provider_uid, email, email_verified, display_name";
