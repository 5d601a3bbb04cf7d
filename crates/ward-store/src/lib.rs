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

pub mod postgres;
mod sql;
pub mod sqlite;
pub mod testing;

/// Resource type name used in NOT_FOUND details.
pub const GROUP_TYPE: &str = "iam.chainguard.dev/Group";

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

#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Whether the database answers (readiness).
    async fn ping(&self) -> Result<()>;

    /// The setting `name`, storing `init` first if it is absent. Safe against
    /// concurrent first starts: every caller gets the value that won.
    async fn setting_or_init(&self, name: &str, init: Vec<u8>) -> Result<Vec<u8>>;

    async fn signing_keys(&self) -> Result<Vec<SigningKeyRecord>>;
    async fn insert_signing_key(&self, key: &SigningKeyRecord) -> Result<()>;

    /// Inserts a group. NOT_FOUND if its parent does not exist (checked in the
    /// same transaction).
    async fn create_group(&self, group: &GroupRecord) -> Result<()>;
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
    ) -> Result<GroupRecord>;
    /// Deletes a group. NOT_FOUND if absent; FAILED_PRECONDITION
    /// (RESOURCE_NOT_EMPTY) while it has children.
    async fn delete_group(&self, uid: &Uidp) -> Result<()>;
    async fn list_groups(&self, query: &ListQuery) -> Result<Page<GroupRecord>>;
}

/// Opens the store named by `database`: a `postgres://` / `postgresql://` URL, or
/// a SQLite file path (`sqlite://` prefix optional). Runs migrations.
pub async fn open(database: &str) -> Result<Arc<dyn Store>> {
    if database.starts_with("postgres://") || database.starts_with("postgresql://") {
        Ok(Arc::new(postgres::PostgresStore::connect(database).await?))
    } else {
        let path = database.strip_prefix("sqlite://").unwrap_or(database);
        Ok(Arc::new(
            sqlite::SqliteStore::open(std::path::Path::new(path)).await?,
        ))
    }
}

/// Maps a database error; the detail goes to the log (by the caller), not the client.
pub(crate) fn db_err(context: &str, e: sqlx::Error) -> Error {
    match e {
        sqlx::Error::PoolTimedOut => Error::Unavailable("the database is busy; retry".into()),
        e => Error::internal(format_args!("{context}: {e}")),
    }
}

/// The "child groups" precondition failure, shared by both backends.
pub(crate) fn has_children(uid: &Uidp) -> Error {
    Error::not_empty(uid.as_str(), "cannot delete group with child groups")
}

/// Builds a page from `limit + 1` fetched rows.
pub(crate) fn page_of(
    mut rows: Vec<GroupRecord>,
    query: &ListQuery,
    total_count: i64,
) -> Page<GroupRecord> {
    use ward_core::listing::{Cursor, CursorKey, SortField};
    let more = rows.len() > query.page_size as usize;
    rows.truncate(query.page_size as usize);
    let next = match (more, rows.last()) {
        (true, Some(last)) => Some(Cursor {
            key: match query.order.field {
                SortField::Uid => CursorKey::Text(last.uid.clone()),
                SortField::Name => CursorKey::Text(last.name.clone()),
                SortField::CreateTime => CursorKey::Millis(last.create_time),
                SortField::UpdateTime => CursorKey::Millis(last.update_time),
            },
            uid: last.uid.clone(),
        }),
        _ => None,
    };
    Page {
        items: rows,
        next,
        total_count,
    }
}
