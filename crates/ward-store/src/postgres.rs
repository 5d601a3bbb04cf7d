//! The PostgreSQL backend, for several replicas sharing one database.
//!
//! Transactions run at READ COMMITTED; the parent/child rules are made atomic by
//! row locks: creating a child holds `FOR SHARE` on the parent, deleting a group
//! holds `FOR UPDATE` on it before looking for children. Whichever comes second
//! waits for the first and then sees its result, so no child is ever orphaned.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgPool, PgPoolOptions};
use ward_core::listing::{ListQuery, Page};
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};

use crate::sql::{self, Dialect, GROUP_COLUMNS};
use crate::{
    GROUP_TYPE, GroupPatch, GroupRecord, SigningKeyRecord, Store, db_err, has_children, page_of,
};

pub struct PostgresStore {
    pool: PgPool,
}

impl PostgresStore {
    /// Connects and runs migrations (serialized across replicas by sqlx's
    /// advisory lock).
    pub async fn connect(url: &str) -> Result<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(10))
            .connect(url)
            .await
            .map_err(|e| db_err("connect to postgres", e))?;
        sqlx::migrate!("./migrations/postgres")
            .run(&pool)
            .await
            .map_err(|e| Error::internal(format_args!("postgres migrations: {e}")))?;
        Ok(Self { pool })
    }
}

#[async_trait]
impl Store for PostgresStore {
    async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map_err(|e| db_err("ping", e))?;
        Ok(())
    }

    async fn setting_or_init(&self, name: &str, init: Vec<u8>) -> Result<Vec<u8>> {
        sqlx::query(
            "INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(init)
        .execute(&self.pool)
        .await
        .map_err(|e| db_err("init setting", e))?;
        let (v,): (Vec<u8>,) = sqlx::query_as("SELECT value FROM settings WHERE name = $1")
            .bind(name)
            .fetch_one(&self.pool)
            .await
            .map_err(|e| db_err("read setting", e))?;
        Ok(v)
    }

    async fn signing_keys(&self) -> Result<Vec<SigningKeyRecord>> {
        sqlx::query_as("SELECT kid, algorithm, private_key, public_key, create_time FROM signing_keys ORDER BY create_time, kid")
            .fetch_all(&self.pool)
            .await
            .map_err(|e| db_err("signing keys", e))
    }

    async fn insert_signing_key(&self, k: &SigningKeyRecord) -> Result<()> {
        sqlx::query(
            "INSERT INTO signing_keys (kid, algorithm, private_key, public_key, create_time) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&k.kid)
        .bind(&k.algorithm)
        .bind(&k.private_key)
        .bind(&k.public_key)
        .bind(k.create_time)
        .execute(&self.pool)
        .await
        .map_err(|e| db_err("insert signing key", e))?;
        Ok(())
    }

    async fn create_group(&self, g: &GroupRecord) -> Result<()> {
        let mut tx = self.pool.begin().await.map_err(|e| db_err("begin", e))?;
        if let Some(parent) = &g.parent_uid {
            let found: Option<(i32,)> =
                sqlx::query_as("SELECT 1 FROM groups WHERE uid = $1 FOR SHARE")
                    .bind(parent)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(|e| db_err("lock parent", e))?;
            if found.is_none() {
                return Err(Error::not_found(GROUP_TYPE, parent.clone()));
            }
        }
        sqlx::query(
            "INSERT INTO groups (uid, parent_uid, name, description, verified, create_time, update_time) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
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
        sqlx::query_as(&format!(
            "SELECT {GROUP_COLUMNS} FROM groups WHERE uid = $1"
        ))
        .bind(uid.as_str())
        .fetch_optional(&self.pool)
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
            "UPDATE groups SET name = COALESCE($1, name), description = COALESCE($2, description), \
             update_time = CASE WHEN $3 > update_time THEN $3 ELSE update_time + 1 END \
             WHERE uid = $4 RETURNING {GROUP_COLUMNS}"
        ))
        .bind(&patch.name)
        .bind(&patch.description)
        .bind(now_ms)
        .bind(uid.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| db_err("update group", e))?;
        row.ok_or_else(|| Error::not_found(GROUP_TYPE, uid.as_str()))
    }

    async fn delete_group(&self, uid: &Uidp) -> Result<()> {
        let mut tx = self.pool.begin().await.map_err(|e| db_err("begin", e))?;
        let found: Option<(i32,)> =
            sqlx::query_as("SELECT 1 FROM groups WHERE uid = $1 FOR UPDATE")
                .bind(uid.as_str())
                .fetch_optional(&mut *tx)
                .await
                .map_err(|e| db_err("lock group", e))?;
        if found.is_none() {
            return Err(Error::not_found(GROUP_TYPE, uid.as_str()));
        }
        let child: Option<(i32,)> =
            sqlx::query_as("SELECT 1 FROM groups WHERE parent_uid = $1 LIMIT 1")
                .bind(uid.as_str())
                .fetch_optional(&mut *tx)
                .await
                .map_err(|e| db_err("find children", e))?;
        if child.is_some() {
            return Err(has_children(uid));
        }
        sqlx::query("DELETE FROM groups WHERE uid = $1")
            .bind(uid.as_str())
            .execute(&mut *tx)
            .await
            .map_err(|e| db_err("delete group", e))?;
        tx.commit().await.map_err(|e| db_err("commit", e))
    }

    async fn list_groups(&self, q: &ListQuery) -> Result<Page<GroupRecord>> {
        let c = sql::count(Dialect::Postgres, "groups", q);
        let (total,): (i64,) = sql::bind_all(sqlx::query_as(&c.sql), c.binds)
            .fetch_one(&self.pool)
            .await
            .map_err(|e| db_err("count groups", e))?;
        let p = sql::page(Dialect::Postgres, "groups", GROUP_COLUMNS, q);
        let rows = sql::bind_all(sqlx::query_as(&p.sql), p.binds)
            .fetch_all(&self.pool)
            .await
            .map_err(|e| db_err("list groups", e))?;
        Ok(page_of(rows, q, total))
    }
}
