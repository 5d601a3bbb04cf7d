//! The embedded SQLite backend (the default).
//!
//! WAL with `synchronous=FULL`, so a commit that returned is on disk and survives
//! SIGKILL or power loss; one writer connection (SQLite has one writer anyway,
//! and a single connection turns contention into queueing instead of BUSY
//! errors); a pool of read-only connections that read concurrently with it.

use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use ward_core::listing::{ListQuery, Page};
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};

use crate::sql::{self, Dialect, GROUP_COLUMNS};
use crate::{
    GROUP_TYPE, GroupPatch, GroupRecord, SigningKeyRecord, Store, db_err, has_children, page_of,
};

pub struct SqliteStore {
    writer: SqlitePool,
    reader: SqlitePool,
}

impl SqliteStore {
    /// Opens (creating if needed) the database file and runs migrations.
    pub async fn open(path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::internal(format_args!("create {}: {e}", dir.display())))?;
        }
        let opts = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10));
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(opts.clone())
            .await
            .map_err(|e| db_err("open sqlite", e))?;
        sqlx::migrate!("./migrations/sqlite")
            .run(&writer)
            .await
            .map_err(|e| Error::internal(format_args!("sqlite migrations: {e}")))?;
        let reader = SqlitePoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(opts.read_only(true))
            .await
            .map_err(|e| db_err("open sqlite readers", e))?;
        Ok(Self { writer, reader })
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1")
            .execute(&self.reader)
            .await
            .map_err(|e| db_err("ping", e))?;
        Ok(())
    }

    async fn setting_or_init(&self, name: &str, init: Vec<u8>) -> Result<Vec<u8>> {
        sqlx::query(
            "INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(init)
        .execute(&self.writer)
        .await
        .map_err(|e| db_err("init setting", e))?;
        let (v,): (Vec<u8>,) = sqlx::query_as("SELECT value FROM settings WHERE name = ?")
            .bind(name)
            .fetch_one(&self.writer)
            .await
            .map_err(|e| db_err("read setting", e))?;
        Ok(v)
    }

    async fn signing_keys(&self) -> Result<Vec<SigningKeyRecord>> {
        sqlx::query_as("SELECT kid, algorithm, private_key, public_key, create_time FROM signing_keys ORDER BY create_time, kid")
            .fetch_all(&self.writer)
            .await
            .map_err(|e| db_err("signing keys", e))
    }

    async fn insert_signing_key(&self, k: &SigningKeyRecord) -> Result<()> {
        sqlx::query("INSERT INTO signing_keys (kid, algorithm, private_key, public_key, create_time) VALUES (?, ?, ?, ?, ?)")
            .bind(&k.kid)
            .bind(&k.algorithm)
            .bind(&k.private_key)
            .bind(&k.public_key)
            .bind(k.create_time)
            .execute(&self.writer)
            .await
            .map_err(|e| db_err("insert signing key", e))?;
        Ok(())
    }

    async fn create_group(&self, g: &GroupRecord) -> Result<()> {
        let mut tx = self.writer.begin().await.map_err(|e| db_err("begin", e))?;
        if let Some(parent) = &g.parent_uid {
            let found: Option<(i64,)> = sqlx::query_as("SELECT 1 FROM groups WHERE uid = ?")
                .bind(parent)
                .fetch_optional(&mut *tx)
                .await
                .map_err(|e| db_err("find parent", e))?;
            if found.is_none() {
                return Err(Error::not_found(GROUP_TYPE, parent.clone()));
            }
        }
        sqlx::query(
            "INSERT INTO groups (uid, parent_uid, name, description, verified, create_time, update_time) \
             VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&g.uid)
        .bind(&g.parent_uid)
        .bind(&g.name)
        .bind(&g.description)
        .bind(g.verified)
        .bind(g.create_time)
        .bind(g.update_time)
        .execute(&mut *tx)
        .await
        .map_err(|e| db_err("insert group", e))?;
        tx.commit().await.map_err(|e| db_err("commit", e))
    }

    async fn get_group(&self, uid: &Uidp) -> Result<Option<GroupRecord>> {
        sqlx::query_as(&format!("SELECT {GROUP_COLUMNS} FROM groups WHERE uid = ?"))
            .bind(uid.as_str())
            .fetch_optional(&self.reader)
            .await
            .map_err(|e| db_err("get group", e))
    }

    async fn update_group(
        &self,
        uid: &Uidp,
        patch: &GroupPatch,
        now_ms: i64,
    ) -> Result<GroupRecord> {
        let row: Option<GroupRecord> = sqlx::query_as(&format!(
            "UPDATE groups SET name = COALESCE(?, name), description = COALESCE(?, description), \
             update_time = CASE WHEN ? > update_time THEN ? ELSE update_time + 1 END \
             WHERE uid = ? RETURNING {GROUP_COLUMNS}"
        ))
        .bind(&patch.name)
        .bind(&patch.description)
        .bind(now_ms)
        .bind(now_ms)
        .bind(uid.as_str())
        .fetch_optional(&self.writer)
        .await
        .map_err(|e| db_err("update group", e))?;
        row.ok_or_else(|| Error::not_found(GROUP_TYPE, uid.as_str()))
    }

    async fn delete_group(&self, uid: &Uidp) -> Result<()> {
        let mut tx = self.writer.begin().await.map_err(|e| db_err("begin", e))?;
        let child: Option<(i64,)> =
            sqlx::query_as("SELECT 1 FROM groups WHERE parent_uid = ? LIMIT 1")
                .bind(uid.as_str())
                .fetch_optional(&mut *tx)
                .await
                .map_err(|e| db_err("find children", e))?;
        if child.is_some() {
            return Err(has_children(uid));
        }
        let done = sqlx::query("DELETE FROM groups WHERE uid = ?")
            .bind(uid.as_str())
            .execute(&mut *tx)
            .await
            .map_err(|e| db_err("delete group", e))?;
        if done.rows_affected() == 0 {
            return Err(Error::not_found(GROUP_TYPE, uid.as_str()));
        }
        tx.commit().await.map_err(|e| db_err("commit", e))
    }

    async fn list_groups(&self, q: &ListQuery) -> Result<Page<GroupRecord>> {
        let c = sql::count(Dialect::Sqlite, "groups", q);
        let (total,): (i64,) = sql::bind_all(sqlx::query_as(&c.sql), c.binds)
            .fetch_one(&self.reader)
            .await
            .map_err(|e| db_err("count groups", e))?;
        let p = sql::page(Dialect::Sqlite, "groups", GROUP_COLUMNS, q);
        let rows = sql::bind_all(sqlx::query_as(&p.sql), p.binds)
            .fetch_all(&self.reader)
            .await
            .map_err(|e| db_err("list groups", e))?;
        Ok(page_of(rows, q, total))
    }
}
