//! Ward's storage layer: one [`Store`] trait, two backends.
//!
//! - [`sqlite::SqliteStore`]: the embedded default (WAL, `synchronous=FULL`, one
//!   writer connection, a pool of readers).
//! - [`postgres::PostgresStore`]: for several stateless replicas sharing one
//!   database.
//!
//! Both build their list SQL with [`sql`] and pass the same conformance suite
//! (`tests/conformance.rs`). Rules that need atomicity (a parent must exist, a
//! group with children cannot go) are enforced inside the store's transactions;
//! everything else (validation, authorization) lives in the service layer.

use std::sync::Arc;

use async_trait::async_trait;
use ward_core::listing::{ListQuery, Page};
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};

pub mod account_associations;
pub mod advisories;
pub mod backup;
pub mod events;
pub mod people;
pub mod postgres;
pub mod registry;
mod sql;
pub use sql::{COUNTED_TABLES, PARENT_COUNTED_TABLES};
pub mod sqlite;
pub mod testing;
pub mod vulns;

/// Resource type names used in NOT_FOUND details.
pub const GROUP_TYPE: &str = ward_core::rpc::Kind::Group.type_name();
pub const IDENTITY_TYPE: &str = ward_core::rpc::Kind::Identity.type_name();
pub const ROLE_TYPE: &str = ward_core::rpc::Kind::Role.type_name();
pub const ROLE_BINDING_TYPE: &str = ward_core::rpc::Kind::RoleBinding.type_name();

/// A stored group. Times are milliseconds since the Unix epoch.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct GroupRecord {
    pub uid: String,
    pub parent_uid: Option<String>,
    pub name: String,
    pub description: String,
    pub verified: bool,
    pub create_time: i64,
    pub update_time: i64,
    /// The organization's `OrgKind` number, set when the root is created and
    /// copied to every group below it.
    pub kind: i32,
}

/// A stored identity. The relationship is kept as proto3 JSON (the service
/// layer owns its shape); issuer and subject are copied out for lookups.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct IdentityRecord {
    pub uid: String,
    pub parent_uid: Option<String>,
    pub name: String,
    pub description: String,
    pub company: String,
    pub relationship_type: i64,
    pub relationship: String,
    pub issuer: String,
    pub subject: String,
    pub last_seen_time: Option<i64>,
    pub create_time: i64,
    pub update_time: i64,
}

/// A stored role; built-in roles have no parent. Capabilities are in
/// `CapSet::to_storage` form.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct RoleRecord {
    pub uid: String,
    pub parent_uid: Option<String>,
    pub name: String,
    pub description: String,
    pub capabilities: String,
    pub create_time: i64,
    pub update_time: i64,
}

/// A stored role binding; the bound group is `parent_uid`.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct RoleBindingRecord {
    pub uid: String,
    pub parent_uid: String,
    pub identity_uid: String,
    pub role_uid: String,
    pub create_time: i64,
    pub update_time: i64,
}

/// A role binding with its identity, group and role, as the API returns it.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct HydratedBinding {
    pub uid: String,
    pub parent_uid: String,
    pub identity_uid: String,
    pub role_uid: String,
    pub create_time: i64,
    pub update_time: i64,
    /// The role's name (what `order_by=name` sorts by).
    pub name: String,
    pub identity_name: String,
    pub identity_description: String,
    pub identity_subject: String,
    pub identity_issuer: String,
    pub group_name: String,
    pub group_description: String,
    pub role_description: String,
}

/// Fields an identity update sets; `None` leaves a field as it is.
#[derive(Clone, Debug, Default)]
pub struct IdentityPatch {
    pub name: Option<String>,
    pub description: Option<String>,
    pub company: Option<String>,
    /// (relationship_type, relationship JSON, issuer, subject)
    pub relationship: Option<(i64, String, String, String)>,
}

/// Fields a role update sets.
#[derive(Clone, Debug, Default)]
pub struct RolePatch {
    pub name: Option<String>,
    pub description: Option<String>,
    pub capabilities: Option<String>,
}

/// The fields an update sets; `None` leaves a field as it is.
#[derive(Clone, Debug, Default)]
pub struct GroupPatch {
    pub name: Option<String>,
    pub description: Option<String>,
}

/// One of Ward's token signing keys.
#[derive(Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SigningKeyRecord {
    pub kid: String,
    pub algorithm: String,
    /// Secret: never logged (see the Debug impl).
    pub private_key: Vec<u8>,
    pub public_key: Vec<u8>,
    pub create_time: i64,
}

impl std::fmt::Debug for SigningKeyRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKeyRecord")
            .field("kid", &self.kid)
            .field("algorithm", &self.algorithm)
            .field("create_time", &self.create_time)
            .finish_non_exhaustive()
    }
}

/// Records one query's latency (`ward_db_query_duration_seconds`); `op` is
/// a fixed name from the code, never from a request, so the label stays
/// bounded. Free when no metrics recorder is installed.
/// A store span, made only inside a sampled request's work (see
/// `ward_core::traceparent::traced`); elsewhere a disabled span.
pub(crate) fn trace_span(make: impl FnOnce() -> tracing::Span) -> tracing::Span {
    if ward_core::traceparent::traced() {
        make()
    } else {
        tracing::Span::none()
    }
}

pub(crate) fn observe_query(backend: &'static str, kind: &'static str, op: &'static str, started: std::time::Instant) {
    if !RECORDING.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    // Handles by the labels' addresses (static strings): registering hashes
    // the whole labelled key, this only three pointers.
    type Handles = std::collections::HashMap<(usize, usize, usize), metrics::Histogram>;
    static HANDLES: std::sync::OnceLock<std::sync::RwLock<Handles>> = std::sync::OnceLock::new();
    let handles = HANDLES.get_or_init(Default::default);
    let key = (backend.as_ptr() as usize, kind.as_ptr() as usize, op.as_ptr() as usize);
    let found = handles
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(&key)
        .cloned();
    let h = found.unwrap_or_else(|| {
        let h = metrics::histogram!(
            "ward_db_query_duration_seconds",
            "backend" => backend,
            "kind" => kind,
            "op" => op
        );
        handles
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key, h.clone());
        h
    });
    h.record(started.elapsed().as_secs_f64());
}

/// Whether a metrics recorder is installed ([`record_metrics`]).
static RECORDING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Turns the store's metrics on (once a recorder is installed: handles
/// registered before would stay no-ops).
pub fn record_metrics() {
    RECORDING.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// The topic [`Store::listen`] yields when notifications may have been lost:
/// everything cached is stale.
pub const EVERY_TOPIC: &str = "*";

/// The error for a database a newer Ward has migrated: this one would not
/// know its tables, so it refuses to start instead of misreading them.
pub(crate) fn newer_schema(found: i64, known: i64) -> String {
    format!(
        "the database's schema is version {found}, newer than this ward knows (version {known}): \
         it was written by a newer release; run that release (or newer), or restore a backup taken \
         before the upgrade"
    )
}

#[async_trait]
pub trait Store:
    registry::RegistryStore
    + advisories::AdvisoryStore
    + people::PeopleStore
    + account_associations::AccountAssociationStore
    + vulns::VulnStore
    + events::EventStore
    + Send
    + Sync
    + 'static
{
    /// Whether the database answers (readiness).
    async fn ping(&self) -> Result<()>;

    /// Tells every server sharing this database that what it cached about
    /// `topic` is stale (PostgreSQL `NOTIFY`, delivered to each listener
    /// once this returns). A no-op where one server owns the database.
    async fn broadcast(&self, topic: &str) -> Result<()> {
        let _ = topic;
        Ok(())
    }

    /// The topics servers broadcast (this one's own included), as they
    /// arrive; `None` where one server owns the database. After the
    /// connection was lost (notifications may have been missed) it yields
    /// [`EVERY_TOPIC`].
    async fn listen(&self) -> Result<Option<tokio::sync::mpsc::Receiver<String>>> {
        Ok(None)
    }

    /// Sets the gauges only a look at the store tells (connection pools),
    /// when metrics are scraped.
    fn observe(&self) {}

    /// The setting `name`, storing `init` first if it is absent. Safe against
    /// concurrent first starts: every caller gets the value that won.
    async fn setting_or_init(&self, name: &str, init: Vec<u8>) -> Result<Vec<u8>>;
    /// Sets (inserts or replaces) the setting `name`.
    async fn set_setting(&self, name: &str, value: Vec<u8>) -> Result<()>;
    /// The setting `name`, if it was ever stored.
    async fn setting(&self, name: &str) -> Result<Option<Vec<u8>>>;

    async fn signing_keys(&self) -> Result<Vec<SigningKeyRecord>>;
    async fn insert_signing_key(&self, key: &SigningKeyRecord) -> Result<()>;
    async fn delete_signing_key(&self, kid: &str) -> Result<()>;

    /// Inserts a group, and with it `owner` (the creator's binding) and the
    /// event in the same transaction. NOT_FOUND if its parent does not exist.
    async fn create_group(
        &self,
        group: &GroupRecord,
        owner: Option<&RoleBindingRecord>,
        emit: events::Emit<()>,
    ) -> Result<()>;
    async fn get_group(&self, uid: &Uidp) -> Result<Option<GroupRecord>>;
    /// Sets the given fields and `update_time` in one statement (so concurrent
    /// updates of different fields never undo each other) and returns the result.
    /// `update_time` always moves forward (by 1 ms if the clock has not). NOT_FOUND
    /// if the group is gone.
    async fn update_group(
        &self,
        uid: &Uidp,
        patch: &GroupPatch,
        now_ms: i64,
        emit: events::Emit<GroupRecord>,
    ) -> Result<GroupRecord>;
    /// Deletes a group. NOT_FOUND if absent; FAILED_PRECONDITION
    /// (RESOURCE_NOT_EMPTY, naming what is in the way) while it has children of
    /// any kind.
    async fn delete_group(&self, uid: &Uidp, emit: events::Emit<()>) -> Result<()>;
    async fn list_groups(&self, query: &ListQuery) -> Result<Page<GroupRecord>>;

    /// NOT_FOUND if the parent group does not exist.
    async fn create_identity(&self, identity: &IdentityRecord, emit: events::Emit<()>) -> Result<()>;
    async fn get_identity(&self, uid: &Uidp) -> Result<Option<IdentityRecord>>;
    async fn update_identity(
        &self,
        uid: &Uidp,
        patch: &IdentityPatch,
        now_ms: i64,
        emit: events::Emit<IdentityRecord>,
    ) -> Result<IdentityRecord>;
    /// FAILED_PRECONDITION while role bindings name the identity.
    async fn delete_identity(&self, uid: &Uidp, emit: events::Emit<()>) -> Result<()>;
    async fn list_identities(&self, query: &ListQuery) -> Result<Page<IdentityRecord>>;
    /// Root-level identities (registered people) whose exact issuer and
    /// subject are these (token exchange without an explicit identity). Only
    /// those: identities in groups, which any organization can create with
    /// any issuer and subject, can never crowd them out of the answer.
    async fn find_identities(&self, issuer: &str, subject: &str) -> Result<Vec<IdentityRecord>>;
    /// Records a token exchange (`last_seen_time`).
    async fn touch_identity(&self, uid: &Uidp, now_ms: i64) -> Result<()>;

    /// Inserts or refreshes the built-in roles (idempotent; every start).
    async fn upsert_builtin_roles(&self, roles: &[RoleRecord]) -> Result<()>;
    /// NOT_FOUND if the parent group does not exist.
    async fn create_role(&self, role: &RoleRecord, emit: events::Emit<()>) -> Result<()>;
    async fn get_role(&self, uid: &Uidp) -> Result<Option<RoleRecord>>;
    async fn update_role(
        &self,
        uid: &Uidp,
        patch: &RolePatch,
        now_ms: i64,
        emit: events::Emit<RoleRecord>,
    ) -> Result<RoleRecord>;
    /// FAILED_PRECONDITION while the role is bound.
    async fn delete_role(&self, uid: &Uidp, emit: events::Emit<()>) -> Result<()>;
    async fn list_roles(&self, query: &ListQuery) -> Result<Page<RoleRecord>>;

    /// NOT_FOUND if the group, identity or role does not exist.
    async fn create_binding(
        &self,
        binding: &RoleBindingRecord,
        emit: events::Emit<Vec<HydratedBinding>>,
    ) -> Result<()> {
        self.create_bindings(std::slice::from_ref(binding), emit).await
    }
    /// Creates every binding or none (one transaction, with its one event,
    /// rendered from the bindings as the API shows them); NOT_FOUND naming
    /// the first group, identity or role that does not exist.
    async fn create_bindings(
        &self,
        bindings: &[RoleBindingRecord],
        emit: events::Emit<Vec<HydratedBinding>>,
    ) -> Result<()>;
    async fn get_binding(&self, uid: &Uidp) -> Result<Option<HydratedBinding>>;
    /// Points the binding at another role. NOT_FOUND if the binding or role is gone.
    async fn update_binding(
        &self,
        uid: &Uidp,
        role_uid: &str,
        now_ms: i64,
        emit: events::Emit<HydratedBinding>,
    ) -> Result<HydratedBinding>;
    /// Whether a binding was deleted (deleting a missing one is not an
    /// error, and records no event).
    async fn delete_binding(&self, uid: &Uidp, emit: events::Emit<()>) -> Result<bool>;
    async fn list_bindings(&self, query: &ListQuery) -> Result<Page<HydratedBinding>>;

    /// Every (group uid, role capabilities) the identity is bound to.
    async fn grants(&self, identity_uid: &str) -> Result<Vec<(String, String)>>;
}

/// Opens the store named by `database`: a `postgres://` / `postgresql://` URL, or
/// a SQLite file path (`sqlite://` prefix optional). Runs migrations.
pub async fn open(database: &str) -> Result<Arc<dyn Store>> {
    if database.starts_with("postgres://") || database.starts_with("postgresql://") {
        Ok(Arc::new(postgres::PostgresStore::connect(database).await?))
    } else {
        let path = database.strip_prefix("sqlite://").unwrap_or(database);
        Ok(Arc::new(sqlite::SqliteStore::open(std::path::Path::new(path)).await?))
    }
}

/// Maps a database error; the detail goes to the log (by the caller), not the client.
pub(crate) fn db_err(context: &str, e: sqlx::Error) -> Error {
    match e {
        sqlx::Error::PoolTimedOut => Error::Unavailable("the database is busy; retry".into()),
        e => Error::internal(format_args!("{context}: {e}")),
    }
}

/// What keyset pagination needs from a listed record.
pub(crate) trait Listed {
    fn uid(&self) -> &str;
    fn sort_key(&self, field: ward_core::listing::SortField) -> ward_core::listing::CursorKey;
}

macro_rules! listed {
    ($t:ty) => {
        impl Listed for $t {
            fn uid(&self) -> &str {
                &self.uid
            }
            fn sort_key(&self, field: ward_core::listing::SortField) -> ward_core::listing::CursorKey {
                use ward_core::listing::{CursorKey, SortField};
                match field {
                    SortField::Uid => CursorKey::Text(self.uid.clone()),
                    SortField::Name => CursorKey::Text(self.name.clone()),
                    SortField::CreateTime => CursorKey::Millis(self.create_time),
                    SortField::UpdateTime => CursorKey::Millis(self.update_time),
                }
            }
        }
    };
}
listed!(GroupRecord);
listed!(IdentityRecord);
listed!(RoleRecord);
listed!(HydratedBinding);
listed!(registry::RepoRecord);
listed!(registry::TagRecord);
listed!(people::IdentityProviderRecord);
listed!(people::GroupMappingRecord);
listed!(people::GroupInviteRecord);
listed!(account_associations::AccountAssociationRecord);

impl Listed for advisories::AdvisoryRecord {
    fn uid(&self) -> &str {
        &self.uid
    }
    fn sort_key(&self, field: ward_core::listing::SortField) -> ward_core::listing::CursorKey {
        use ward_core::listing::{CursorKey, SortField};
        match field {
            // Advisories have no name; the service refuses that order.
            SortField::Uid | SortField::Name => CursorKey::Text(self.uid.clone()),
            SortField::CreateTime => CursorKey::Millis(self.create_time),
            SortField::UpdateTime => CursorKey::Millis(self.update_time),
        }
    }
}

impl Listed for events::SubscriptionRecord {
    fn uid(&self) -> &str {
        &self.uid
    }
    fn sort_key(&self, field: ward_core::listing::SortField) -> ward_core::listing::CursorKey {
        use ward_core::listing::{CursorKey, SortField};
        match field {
            // Subscriptions have no name or update time; the service refuses
            // those orders.
            SortField::Uid | SortField::Name => CursorKey::Text(self.uid.clone()),
            SortField::CreateTime | SortField::UpdateTime => CursorKey::Millis(self.create_time),
        }
    }
}

/// Builds a page from `limit + 1` fetched rows.
pub(crate) fn page_of<T: Listed>(mut rows: Vec<T>, query: &ListQuery, total_count: i64) -> Page<T> {
    use ward_core::listing::Cursor;
    let more = rows.len() > query.page_size as usize;
    rows.truncate(query.page_size as usize);
    let next = match (more, rows.last()) {
        (true, Some(last)) => Some(Cursor {
            key: last.sort_key(query.order.field),
            uid: last.uid().to_owned(),
        }),
        _ => None,
    };
    Page {
        items: rows,
        next,
        total_count,
    }
}

/// The precondition failure for deleting a group that still holds things.
pub(crate) fn group_not_empty(uid: &Uidp, kinds: &[&str]) -> Error {
    Error::not_empty(
        uid.as_str(),
        format!("cannot delete group with child {}", kinds.join(", ")),
    )
}

/// The precondition failure for deleting something role bindings still use.
pub(crate) fn still_bound(what: &str, uid: &Uidp, bindings: &[String]) -> Error {
    let more = if bindings.len() > 5 {
        format!(" and {} more", bindings.len() - 5)
    } else {
        String::new()
    };
    let shown: Vec<&str> = bindings.iter().take(5).map(String::as_str).collect();
    Error::FailedPrecondition(vec![ward_core::error::PreconditionViolation {
        kind: "RESOURCE_IN_USE".into(),
        subject: uid.as_str().to_owned(),
        description: format!(
            "cannot delete {what} while role bindings use it: {}{more}",
            shown.join(", ")
        ),
    }])
}
