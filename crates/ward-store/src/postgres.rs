//! The PostgreSQL backend, for several replicas sharing one database.
//!
//! Transactions run at READ COMMITTED; the parent/child rules are made atomic by
//! row locks: creating a child holds `FOR SHARE` on the parent, deleting a group
//! holds `FOR UPDATE` on it before looking for children. Whichever comes second
//! waits for the first and then sees its result, so no child is ever orphaned.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgPool, PgPoolOptions, PgRow};
use sqlx::{FromRow, PgConnection};
use ward_core::listing::{ListQuery, Page};
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};

use crate::sql::{self, BINDING_COLUMNS, Dialect, GROUP_COLUMNS, IDENTITY_COLUMNS, ROLE_COLUMNS};
use crate::{
    GROUP_TYPE, GroupPatch, GroupRecord, HydratedBinding, IDENTITY_TYPE, IdentityPatch, IdentityRecord, Listed,
    ROLE_BINDING_TYPE, ROLE_TYPE, RoleBindingRecord, RolePatch, RoleRecord, SigningKeyRecord, Store, db_err,
    group_not_empty, page_of, still_bound,
};

mod account_associations;
mod advisories;
mod events;
mod people;
mod reads;
mod registry;
mod vulns;

pub struct PostgresStore {
    pool: PgPool,
    /// Point reads and pages (one round trip each; see [`reads`]).
    reads: reads::Reads,
    /// Counts by the digest of their query: (change counters' sum, count).
    counts: moka::sync::Cache<[u8; 32], (i64, i64)>,
    /// The `NOTIFY` channel of [`Store::broadcast`]: one per schema, so
    /// deployments in other schemas of the database are not woken.
    channel: String,
    /// Broadcasts waiting for their own notification to come back.
    echoes: Echoes,
}

/// A broadcast waits until this server's own listener has its notification
/// back: PostgreSQL has then handed it to every listening server at once,
/// so the change has reached the other replicas' listeners before the
/// changing request answers, not some time after.
#[derive(Clone, Default)]
struct Echoes {
    listening: Arc<std::sync::atomic::AtomicBool>,
    next: Arc<std::sync::atomic::AtomicU64>,
    waiting: Arc<std::sync::Mutex<std::collections::HashMap<u64, tokio::sync::oneshot::Sender<()>>>>,
}

/// How long a broadcast waits for its echo before answering anyway (the
/// caches' lifetimes remain the fallback).
const ECHO_WAIT: Duration = Duration::from_secs(1);

/// A notification's payload: the topic, then `|` and the broadcast's nonce.
fn payload_topic(payload: &str) -> (&str, Option<u64>) {
    match payload.rsplit_once('|') {
        Some((topic, nonce)) => (topic, nonce.parse().ok()),
        None => (payload, None),
    }
}

/// The prefix of the `NOTIFY` channel of [`Store::broadcast`].
const NOTIFY_CHANNEL: &str = "ward_changes";

/// Cached counts kept at most (about 60 bytes each).
const COUNT_CACHE_ENTRIES: u64 = 10_000;

/// A pooled connection idle this long is pinged before it is used again.
const PING_IF_IDLE_FOR: Duration = Duration::from_secs(30);

impl PostgresStore {
    /// Connects and runs migrations (serialized across replicas by sqlx's
    /// advisory lock).
    pub async fn connect(url: &str) -> Result<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(10))
            // sqlx pings every connection it hands out by default: a second
            // round trip per query, which halved a point read's throughput.
            // A connection is pinged only after it sat idle long enough for
            // the server or a proxy to have dropped it.
            .test_before_acquire(false)
            .before_acquire(|conn, meta| {
                Box::pin(async move {
                    if meta.idle_for >= PING_IF_IDLE_FOR {
                        sqlx::Connection::ping(conn).await?;
                    }
                    Ok(true)
                })
            })
            .connect(url)
            .await
            .map_err(|e| db_err("connect to postgres", e))?;
        let migrator = sqlx::migrate!("./migrations/postgres");
        let known = migrator.iter().map(|m| m.version).max().unwrap_or(0);
        // The newest version applied (an error: a new database, no table yet).
        let applied: Option<i64> = sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations WHERE success")
            .fetch_one(&pool)
            .await
            .unwrap_or(None);
        if let Some(found) = applied.filter(|v| *v > known) {
            return Err(Error::internal(crate::newer_schema(found, known)));
        }
        migrator
            .run(&pool)
            .await
            .map_err(|e| Error::internal(format_args!("postgres migrations: {e}")))?;
        let options = url
            .parse::<sqlx::postgres::PgConnectOptions>()
            .map_err(|e| db_err("connect to postgres", e))?;
        let schema: Option<String> = sqlx::query_scalar("SELECT current_schema()")
            .fetch_one(&pool)
            .await
            .map_err(|e| db_err("connect to postgres", e))?;
        // Channel names are identifiers: at most 63 bytes.
        let mut channel = format!("{NOTIFY_CHANNEL}.{}", schema.unwrap_or_default());
        while channel.len() > 63 {
            channel.pop();
        }
        Ok(Self {
            pool,
            reads: reads::Reads::connect(options, reads::READ_CONNECTIONS).await?,
            counts: moka::sync::Cache::new(COUNT_CACHE_ENTRIES),
            channel,
            // Nonces start at random, so servers sharing the channel (and
            // tests' replicas sharing a process) never answer each other's
            // waits.
            echoes: Echoes {
                next: Arc::new(std::sync::atomic::AtomicU64::new(rand::random::<u64>() >> 1)),
                ..Echoes::default()
            },
        })
    }
}

type Tx = sqlx::Transaction<'static, sqlx::Postgres>;

/// A listed row with the change counters' sum read beside it (`ward_version`).
struct Versioned<R> {
    row: R,
    version: i64,
}

impl<'r, R: FromRow<'r, PgRow>> FromRow<'r, PgRow> for Versioned<R> {
    fn from_row(row: &'r PgRow) -> sqlx::Result<Self> {
        Ok(Self {
            row: R::from_row(row)?,
            version: sqlx::Row::try_get(row, "ward_version")?,
        })
    }
}

/// Locks the row `uid` of `table` (`FOR SHARE` or `FOR UPDATE`); false if absent.
async fn lock(tx: &mut PgConnection, table: &str, uid: &str, mode: &str) -> Result<bool> {
    let found: Option<(i32,)> = sqlx::query_as(&format!("SELECT 1 FROM {table} WHERE uid = $1 {mode}"))
        .bind(uid)
        .fetch_optional(tx)
        .await
        .map_err(|e| db_err("lock row", e))?;
    Ok(found.is_some())
}

/// Uids of the role bindings whose `column` is `uid`.
async fn bound_by(tx: &mut PgConnection, column: &str, uid: &str) -> Result<Vec<String>> {
    let rows: Vec<(String,)> = sqlx::query_as(&format!(
        "SELECT uid FROM role_bindings WHERE {column} = $1 ORDER BY uid"
    ))
    .bind(uid)
    .fetch_all(tx)
    .await
    .map_err(|e| db_err("find bindings", e))?;
    Ok(rows.into_iter().map(|(u,)| u).collect())
}

fn insert_identity_sql() -> String {
    format!("INSERT INTO identities ({IDENTITY_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)")
}

type PgQuery<'q> = sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>;

fn bind_identity<'q>(q: PgQuery<'q>, i: &'q IdentityRecord) -> PgQuery<'q> {
    q.bind(&i.uid)
        .bind(&i.parent_uid)
        .bind(&i.name)
        .bind(&i.description)
        .bind(&i.company)
        .bind(i.relationship_type)
        .bind(&i.relationship)
        .bind(&i.issuer)
        .bind(&i.subject)
        .bind(i.last_seen_time)
        .bind(i.create_time)
        .bind(i.update_time)
}

async fn insert_binding(tx: &mut PgConnection, b: &RoleBindingRecord) -> Result<()> {
    sqlx::query(
        "INSERT INTO role_bindings (uid, parent_uid, identity_uid, role_uid, create_time, update_time) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(&b.uid)
    .bind(&b.parent_uid)
    .bind(&b.identity_uid)
    .bind(&b.role_uid)
    .bind(b.create_time)
    .bind(b.update_time)
    .execute(tx)
    .await
    .map_err(|e| db_err("insert role binding", e))?;
    Ok(())
}

impl PostgresStore {
    /// Deletes the row `uid` of `table`; NOT_FOUND (as `kind`) if absent.
    async fn delete_by_uid(
        &self,
        table: &str,
        kind: &'static str,
        uid: &Uidp,
        emit: crate::events::Emit<()>,
    ) -> Result<()> {
        let mut tx = self.begin().await?;
        let done = sqlx::query(&format!("DELETE FROM {table} WHERE uid = $1"))
            .bind(uid.as_str())
            .execute(&mut *tx)
            .await
            .map_err(|e| db_err("delete", e))?;
        if done.rows_affected() == 0 {
            return Err(Error::not_found(kind, uid.as_str()));
        }
        events::insert_event(&mut tx, &emit.record(&())).await?;
        tx.commit().await.map_err(|e| db_err("commit", e))
    }

    async fn begin(&self) -> Result<Tx> {
        let started = std::time::Instant::now();
        let span = crate::trace_span(
            || tracing::info_span!(target: ward_core::traceparent::SPANS, "store", db = "postgres", kind = "begin"),
        );
        let tx = tracing::Instrument::instrument(self.pool.begin(), span)
            .await
            .map_err(|e| db_err("begin", e));
        // A pooled connection's wait plus BEGIN: how busy the pool is.
        crate::observe_query("postgres", "begin", "begin", started);
        tx
    }

    async fn get_one<R>(&self, table: &str, columns: &str, uid: &Uidp) -> Result<Option<R>>
    where
        R: for<'r> FromRow<'r, PgRow> + Send + Unpin,
    {
        let span = crate::trace_span(
            || tracing::info_span!(target: ward_core::traceparent::SPANS, "store", db = "postgres", kind = "read", op = table),
        );
        tracing::Instrument::instrument(
            async move {
                let mut read = self.reads.get().await?;
                let r = sqlx::query_as(&format!("SELECT {columns} FROM {table} WHERE uid = $1"))
                    .bind(uid.as_str())
                    .fetch_optional(read.conn())
                    .await;
                read.done(r).map_err(|e| db_err(table, e))
            },
            span,
        )
        .await
    }

    /// One page of `table` with its total count. The count is cached with the
    /// change counters of the tables it reads (migration 0009), read in the
    /// page's own snapshot: when they sum to what they did when the count was
    /// taken, no write to those tables has committed since, on any replica,
    /// and the cached count is exact. Then a page costs one round trip and no
    /// count.
    async fn list<R>(&self, table: &str, columns: &str, q: &ListQuery) -> Result<Page<R>>
    where
        R: for<'r> FromRow<'r, PgRow> + Send + Unpin + Listed,
    {
        let c = sql::count_by_parents(table, q).unwrap_or_else(|| sql::count(Dialect::Postgres, table, q));
        let mut read = self.reads.get().await?;
        let Some(version) = sql::change_version(table, q) else {
            let r = sql::bind_all(sqlx::query_as(&c.sql), c.binds)
                .fetch_one(read.conn())
                .await;
            let (total,): (i64,) = read.done(r).map_err(|e| db_err("count", e))?;
            let p = sql::page(Dialect::Postgres, table, columns, q);
            let r = sql::bind_all(sqlx::query_as(&p.sql), p.binds)
                .fetch_all(read.conn())
                .await;
            let rows = read.done(r).map_err(|e| db_err("list", e))?;
            return Ok(page_of(rows, q, total));
        };
        let key = sql::count_key(&c.sql, &c.binds);
        let last = self.counts.get(&key);
        let versioned = format!("{columns}, {version} AS ward_version");
        // A small subtree is sorted, not found by walking the sort column's
        // index (see `sql::page_sorting_range`); the last count, even if
        // stale, tells its size well enough to choose.
        let p = last
            .filter(|(_, n)| *n <= sql::SORT_RANGE_MAX)
            .and_then(|_| sql::page_sorting_range(table, &versioned, q))
            .unwrap_or_else(|| sql::page(Dialect::Postgres, table, &versioned, q));
        let r = sql::bind_all(sqlx::query_as(&p.sql), p.binds)
            .fetch_all(read.conn())
            .await;
        let rows: Vec<Versioned<R>> = read.done(r).map_err(|e| db_err("list", e))?;
        let seen = rows.first().map(|r| r.version);
        let rows: Vec<R> = rows.into_iter().map(|r| r.row).collect();
        let cached = last.and_then(|(v, n)| (Some(v) == seen).then_some(n));
        let total = match cached {
            Some(n) => n,
            None => {
                // The count and the counters in one statement: one snapshot.
                let sql = format!("SELECT {version}, ({})", c.sql);
                let r = sql::bind_all(sqlx::query_as(&sql), c.binds)
                    .fetch_one(read.conn())
                    .await;
                let (v, n): (i64, i64) = read.done(r).map_err(|e| db_err("count", e))?;
                self.counts.insert(key, (v, n));
                n
            }
        };
        Ok(page_of(rows, q, total))
    }

    /// Inserts a child of a group, holding the group `FOR SHARE` so a concurrent
    /// delete of the group waits and then sees the child; and the write's
    /// event, when it records one, in the same transaction.
    async fn insert_under_group(
        &self,
        parent: Option<&str>,
        insert: sqlx::query::Query<'_, sqlx::Postgres, sqlx::postgres::PgArguments>,
        event: Option<crate::events::EventRecord>,
    ) -> Result<()> {
        let mut tx = self.begin().await?;
        if let Some(p) = parent
            && !lock(&mut tx, "groups", p, "FOR SHARE").await?
        {
            return Err(Error::not_found(GROUP_TYPE, p));
        }
        insert.execute(&mut *tx).await.map_err(|e| db_err("insert", e))?;
        if let Some(e) = &event {
            events::insert_event(&mut tx, e).await?;
        }
        tx.commit().await.map_err(|e| db_err("commit", e))
    }

    /// Deletes `uid` from `table` unless role bindings still use it.
    async fn delete_unless_bound(
        &self,
        table: &str,
        what: &str,
        kind: &'static str,
        column: &str,
        uid: &Uidp,
        event: Option<crate::events::EventRecord>,
    ) -> Result<()> {
        let mut tx = self.begin().await?;
        if !lock(&mut tx, table, uid.as_str(), "FOR UPDATE").await? {
            return Err(Error::not_found(kind, uid.as_str()));
        }
        let bound = bound_by(&mut tx, column, uid.as_str()).await?;
        if !bound.is_empty() {
            return Err(still_bound(what, uid, &bound));
        }
        sqlx::query(&format!("DELETE FROM {table} WHERE uid = $1"))
            .bind(uid.as_str())
            .execute(&mut *tx)
            .await
            .map_err(|e| db_err("delete", e))?;
        if let Some(e) = &event {
            events::insert_event(&mut tx, e).await?;
        }
        tx.commit().await.map_err(|e| db_err("commit", e))
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

    async fn broadcast(&self, topic: &str) -> Result<()> {
        let nonce = self.echoes.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let echo = if self.echoes.listening.load(std::sync::atomic::Ordering::Relaxed) {
            let (tx, rx) = tokio::sync::oneshot::channel();
            self.echoes
                .waiting
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(nonce, tx);
            Some(rx)
        } else {
            None
        };
        let sent = sqlx::query("SELECT pg_notify($1, $2)")
            .bind(&self.channel)
            .bind(format!("{topic}|{nonce}"))
            .execute(&self.pool)
            .await;
        if let Some(rx) = echo {
            if sent.is_ok() {
                let _ = tokio::time::timeout(ECHO_WAIT, rx).await;
            }
            self.echoes
                .waiting
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .remove(&nonce);
        }
        sent.map_err(|e| db_err("broadcast", e))?;
        Ok(())
    }

    async fn listen(&self) -> Result<Option<tokio::sync::mpsc::Receiver<String>>> {
        let mut listener = sqlx::postgres::PgListener::connect_with(&self.pool)
            .await
            .map_err(|e| db_err("listen", e))?;
        listener.listen(&self.channel).await.map_err(|e| db_err("listen", e))?;
        let (tx, rx) = tokio::sync::mpsc::channel(1024);
        let echoes = self.echoes.clone();
        echoes.listening.store(true, std::sync::atomic::Ordering::Relaxed);
        tokio::spawn(async move {
            loop {
                let topic = match listener.try_recv().await {
                    Ok(Some(n)) => {
                        let (topic, nonce) = payload_topic(n.payload());
                        // Ours: applied here first, then its broadcast answers.
                        let waiting = nonce.and_then(|k| {
                            echoes
                                .waiting
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner)
                                .remove(&k)
                        });
                        if tx.send(topic.to_owned()).await.is_err() {
                            return;
                        }
                        if let Some(w) = waiting {
                            let _ = w.send(());
                        }
                        continue;
                    }
                    // The connection dropped (the next call reconnects and
                    // listens again): whatever was sent meanwhile is lost.
                    Ok(None) => crate::EVERY_TOPIC.to_owned(),
                    Err(e) => {
                        tracing::warn!(error = %e, "listening for other servers' changes failed; retrying");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        crate::EVERY_TOPIC.to_owned()
                    }
                };
                if tx.send(topic).await.is_err() {
                    return;
                }
            }
        });
        Ok(Some(rx))
    }

    fn observe(&self) {
        let (size, idle) = (self.pool.size() as f64, self.pool.num_idle() as f64);
        metrics::gauge!("ward_db_pool_connections", "state" => "idle").set(idle);
        metrics::gauge!("ward_db_pool_connections", "state" => "in_use").set(size - idle);
    }

    async fn setting_or_init(&self, name: &str, init: Vec<u8>) -> Result<Vec<u8>> {
        sqlx::query("INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING")
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

    async fn set_setting(&self, name: &str, value: Vec<u8>) -> Result<()> {
        sqlx::query(
            "INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        )
        .bind(name)
        .bind(value)
        .execute(&self.pool)
        .await
        .map_err(|e| db_err("set setting", e))?;
        Ok(())
    }

    async fn setting(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let row: Option<(Vec<u8>,)> = sqlx::query_as("SELECT value FROM settings WHERE name = $1")
            .bind(name)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| db_err("read setting", e))?;
        Ok(row.map(|(v,)| v))
    }

    async fn signing_keys(&self) -> Result<Vec<SigningKeyRecord>> {
        sqlx::query_as(
            "SELECT kid, algorithm, private_key, public_key, create_time FROM signing_keys ORDER BY create_time, kid",
        )
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

    async fn delete_signing_key(&self, kid: &str) -> Result<()> {
        sqlx::query("DELETE FROM signing_keys WHERE kid = $1")
            .bind(kid)
            .execute(&self.pool)
            .await
            .map_err(|e| db_err("delete signing key", e))?;
        Ok(())
    }

    async fn find_identities(&self, issuer: &str, subject: &str) -> Result<Vec<IdentityRecord>> {
        sqlx::query_as(&format!(
            "SELECT {IDENTITY_COLUMNS} FROM identities WHERE issuer = $1 AND subject = $2 AND parent_uid IS NULL \
             ORDER BY uid LIMIT 10"
        ))
        .bind(issuer)
        .bind(subject)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db_err("find identities", e))
    }

    async fn touch_identity(&self, uid: &Uidp, now_ms: i64) -> Result<()> {
        sqlx::query("UPDATE identities SET last_seen_time = $1 WHERE uid = $2")
            .bind(now_ms)
            .bind(uid.as_str())
            .execute(&self.pool)
            .await
            .map_err(|e| db_err("touch identity", e))?;
        Ok(())
    }

    async fn create_group(
        &self,
        g: &GroupRecord,
        owner: Option<&RoleBindingRecord>,
        emit: crate::events::Emit<()>,
    ) -> Result<()> {
        let mut tx = self.begin().await?;
        if let Some(parent) = &g.parent_uid
            && !lock(&mut tx, "groups", parent, "FOR SHARE").await?
        {
            return Err(Error::not_found(GROUP_TYPE, parent.clone()));
        }
        sqlx::query(
            "INSERT INTO groups (uid, parent_uid, name, description, verified, create_time, update_time, kind) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&g.uid)
        .bind(&g.parent_uid)
        .bind(&g.name)
        .bind(&g.description)
        .bind(g.verified)
        .bind(g.create_time)
        .bind(g.update_time)
        .bind(g.kind)
        .execute(&mut *tx)
        .await
        .map_err(|e| db_err("insert group", e))?;
        if let Some(b) = owner {
            insert_binding(&mut tx, b).await?;
        }
        events::insert_event(&mut tx, &emit.record(&())).await?;
        tx.commit().await.map_err(|e| db_err("commit", e))
    }

    async fn get_group(&self, uid: &Uidp) -> Result<Option<GroupRecord>> {
        self.get_one("groups", GROUP_COLUMNS, uid).await
    }

    async fn update_group(
        &self,
        uid: &Uidp,
        patch: &GroupPatch,
        now_ms: i64,
        emit: crate::events::Emit<GroupRecord>,
    ) -> Result<GroupRecord> {
        let mut tx = self.begin().await?;
        let row: Option<GroupRecord> = sqlx::query_as(&format!(
            "UPDATE groups SET name = COALESCE($1, name), description = COALESCE($2, description), \
             update_time = CASE WHEN $3 > update_time THEN $3 ELSE update_time + 1 END \
             WHERE uid = $4 RETURNING {GROUP_COLUMNS}"
        ))
        .bind(&patch.name)
        .bind(&patch.description)
        .bind(now_ms)
        .bind(uid.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| db_err("update group", e))?;
        let row = row.ok_or_else(|| Error::not_found(GROUP_TYPE, uid.as_str()))?;
        events::insert_event(&mut tx, &emit.record(&row)).await?;
        tx.commit().await.map_err(|e| db_err("commit", e))?;
        Ok(row)
    }

    async fn delete_group(&self, uid: &Uidp, emit: crate::events::Emit<()>) -> Result<()> {
        let mut tx = self.begin().await?;
        if !lock(&mut tx, "groups", uid.as_str(), "FOR UPDATE").await? {
            return Err(Error::not_found(GROUP_TYPE, uid.as_str()));
        }
        let mut kinds = Vec::new();
        for (table, kind) in [
            ("groups", "groups"),
            ("repos", "repos"),
            ("advisories", "advisories"),
            ("identities", "identities"),
            ("identity_providers", "identity providers"),
            ("roles", "roles"),
            ("role_bindings", "role bindings"),
            ("subscriptions", "subscriptions"),
        ] {
            let any: Option<(i32,)> = sqlx::query_as(&format!("SELECT 1 FROM {table} WHERE parent_uid = $1 LIMIT 1"))
                .bind(uid.as_str())
                .fetch_optional(&mut *tx)
                .await
                .map_err(|e| db_err("find children", e))?;
            if any.is_some() {
                kinds.push(kind);
            }
        }
        if !kinds.is_empty() {
            return Err(group_not_empty(uid, &kinds));
        }
        sqlx::query("DELETE FROM groups WHERE uid = $1")
            .bind(uid.as_str())
            .execute(&mut *tx)
            .await
            .map_err(|e| db_err("delete group", e))?;
        events::insert_event(&mut tx, &emit.record(&())).await?;
        tx.commit().await.map_err(|e| db_err("commit", e))
    }

    async fn list_groups(&self, q: &ListQuery) -> Result<Page<GroupRecord>> {
        self.list("groups", GROUP_COLUMNS, q).await
    }

    async fn create_identity(&self, i: &IdentityRecord, emit: crate::events::Emit<()>) -> Result<()> {
        let sql = insert_identity_sql();
        let insert = bind_identity(sqlx::query(&sql), i);
        self.insert_under_group(i.parent_uid.as_deref(), insert, Some(emit.record(&())))
            .await
    }

    async fn get_identity(&self, uid: &Uidp) -> Result<Option<IdentityRecord>> {
        self.get_one("identities", IDENTITY_COLUMNS, uid).await
    }

    async fn update_identity(
        &self,
        uid: &Uidp,
        p: &IdentityPatch,
        now_ms: i64,
        emit: crate::events::Emit<IdentityRecord>,
    ) -> Result<IdentityRecord> {
        let mut tx = self.begin().await?;
        let (rt, rel, iss, sub) = match &p.relationship {
            Some((t, r, i, s)) => (Some(*t), Some(r.clone()), Some(i.clone()), Some(s.clone())),
            None => (None, None, None, None),
        };
        let row: Option<IdentityRecord> = sqlx::query_as(&format!(
            "UPDATE identities SET name = COALESCE($1, name), description = COALESCE($2, description), \
             company = COALESCE($3, company), relationship_type = COALESCE($4, relationship_type), \
             relationship = COALESCE($5, relationship), issuer = COALESCE($6, issuer), \
             subject = COALESCE($7, subject), \
             update_time = CASE WHEN $8 > update_time THEN $8 ELSE update_time + 1 END \
             WHERE uid = $9 RETURNING {IDENTITY_COLUMNS}"
        ))
        .bind(&p.name)
        .bind(&p.description)
        .bind(&p.company)
        .bind(rt)
        .bind(rel)
        .bind(iss)
        .bind(sub)
        .bind(now_ms)
        .bind(uid.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| db_err("update identity", e))?;
        let row = row.ok_or_else(|| Error::not_found(IDENTITY_TYPE, uid.as_str()))?;
        events::insert_event(&mut tx, &emit.record(&row)).await?;
        tx.commit().await.map_err(|e| db_err("commit", e))?;
        Ok(row)
    }

    async fn delete_identity(&self, uid: &Uidp, emit: crate::events::Emit<()>) -> Result<()> {
        let event = Some(emit.record(&()));
        self.delete_unless_bound("identities", "identity", IDENTITY_TYPE, "identity_uid", uid, event)
            .await
    }

    async fn list_identities(&self, q: &ListQuery) -> Result<Page<IdentityRecord>> {
        self.list("identities", IDENTITY_COLUMNS, q).await
    }

    async fn upsert_builtin_roles(&self, roles: &[RoleRecord]) -> Result<()> {
        let mut tx = self.begin().await?;
        for r in roles {
            sqlx::query(&format!(
                "INSERT INTO roles ({ROLE_COLUMNS}) VALUES ($1, NULL, $2, $3, $4, $5, $5) \
                 ON CONFLICT (uid) DO UPDATE SET name = excluded.name, description = excluded.description, \
                 capabilities = excluded.capabilities, update_time = excluded.update_time \
                 WHERE roles.capabilities <> excluded.capabilities OR roles.description <> excluded.description"
            ))
            .bind(&r.uid)
            .bind(&r.name)
            .bind(&r.description)
            .bind(&r.capabilities)
            .bind(r.create_time)
            .execute(&mut *tx)
            .await
            .map_err(|e| db_err("upsert built-in role", e))?;
        }
        tx.commit().await.map_err(|e| db_err("commit", e))
    }

    async fn create_role(&self, r: &RoleRecord, emit: crate::events::Emit<()>) -> Result<()> {
        let sql = format!("INSERT INTO roles ({ROLE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)");
        let insert = sqlx::query(&sql)
            .bind(&r.uid)
            .bind(&r.parent_uid)
            .bind(&r.name)
            .bind(&r.description)
            .bind(&r.capabilities)
            .bind(r.create_time)
            .bind(r.update_time);
        self.insert_under_group(r.parent_uid.as_deref(), insert, Some(emit.record(&())))
            .await
    }

    async fn get_role(&self, uid: &Uidp) -> Result<Option<RoleRecord>> {
        self.get_one("roles", ROLE_COLUMNS, uid).await
    }

    async fn update_role(
        &self,
        uid: &Uidp,
        p: &RolePatch,
        now_ms: i64,
        emit: crate::events::Emit<RoleRecord>,
    ) -> Result<RoleRecord> {
        let mut tx = self.begin().await?;
        let row: Option<RoleRecord> = sqlx::query_as(&format!(
            "UPDATE roles SET name = COALESCE($1, name), description = COALESCE($2, description), \
             capabilities = COALESCE($3, capabilities), \
             update_time = CASE WHEN $4 > update_time THEN $4 ELSE update_time + 1 END \
             WHERE uid = $5 RETURNING {ROLE_COLUMNS}"
        ))
        .bind(&p.name)
        .bind(&p.description)
        .bind(&p.capabilities)
        .bind(now_ms)
        .bind(uid.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| db_err("update role", e))?;
        let row = row.ok_or_else(|| Error::not_found(ROLE_TYPE, uid.as_str()))?;
        events::insert_event(&mut tx, &emit.record(&row)).await?;
        tx.commit().await.map_err(|e| db_err("commit", e))?;
        Ok(row)
    }

    async fn delete_role(&self, uid: &Uidp, emit: crate::events::Emit<()>) -> Result<()> {
        self.delete_unless_bound("roles", "role", ROLE_TYPE, "role_uid", uid, Some(emit.record(&())))
            .await
    }

    async fn list_roles(&self, q: &ListQuery) -> Result<Page<RoleRecord>> {
        self.list("roles", ROLE_COLUMNS, q).await
    }

    async fn create_bindings(
        &self,
        bindings: &[RoleBindingRecord],
        emit: crate::events::Emit<Vec<HydratedBinding>>,
    ) -> Result<()> {
        let mut tx = self.begin().await?;
        for b in bindings {
            for (table, kind, uid) in [
                ("groups", GROUP_TYPE, &b.parent_uid),
                ("identities", IDENTITY_TYPE, &b.identity_uid),
                ("roles", ROLE_TYPE, &b.role_uid),
            ] {
                if !lock(&mut tx, table, uid, "FOR SHARE").await? {
                    return Err(Error::not_found(kind, uid.clone()));
                }
            }
            insert_binding(&mut tx, b).await?;
        }
        let uids: Vec<&str> = bindings.iter().map(|b| b.uid.as_str()).collect();
        let rows: Vec<HydratedBinding> = sqlx::query_as(&format!(
            "SELECT {BINDING_COLUMNS} FROM role_bindings_hydrated WHERE uid = ANY($1) ORDER BY uid"
        ))
        .bind(&uids)
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| db_err("read role bindings", e))?;
        events::insert_event(&mut tx, &emit.record(&rows)).await?;
        tx.commit().await.map_err(|e| db_err("commit", e))
    }

    async fn get_binding(&self, uid: &Uidp) -> Result<Option<HydratedBinding>> {
        self.get_one("role_bindings_hydrated", BINDING_COLUMNS, uid).await
    }

    async fn update_binding(
        &self,
        uid: &Uidp,
        role_uid: &str,
        now_ms: i64,
        emit: crate::events::Emit<HydratedBinding>,
    ) -> Result<HydratedBinding> {
        let mut tx = self.begin().await?;
        if !lock(&mut tx, "roles", role_uid, "FOR SHARE").await? {
            return Err(Error::not_found(ROLE_TYPE, role_uid));
        }
        let n = sqlx::query(
            "UPDATE role_bindings SET role_uid = $1, \
             update_time = CASE WHEN $2 > update_time THEN $2 ELSE update_time + 1 END WHERE uid = $3",
        )
        .bind(role_uid)
        .bind(now_ms)
        .bind(uid.as_str())
        .execute(&mut *tx)
        .await
        .map_err(|e| db_err("update role binding", e))?;
        if n.rows_affected() == 0 {
            return Err(Error::not_found(ROLE_BINDING_TYPE, uid.as_str()));
        }
        let row: HydratedBinding = sqlx::query_as(&format!(
            "SELECT {BINDING_COLUMNS} FROM role_bindings_hydrated WHERE uid = $1"
        ))
        .bind(uid.as_str())
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| db_err("read role binding", e))?;
        events::insert_event(&mut tx, &emit.record(&row)).await?;
        tx.commit().await.map_err(|e| db_err("commit", e))?;
        Ok(row)
    }

    async fn delete_binding(&self, uid: &Uidp, emit: crate::events::Emit<()>) -> Result<bool> {
        let mut tx = self.begin().await?;
        let r = sqlx::query("DELETE FROM role_bindings WHERE uid = $1")
            .bind(uid.as_str())
            .execute(&mut *tx)
            .await
            .map_err(|e| db_err("delete role binding", e))?;
        let gone = r.rows_affected() > 0;
        if gone {
            events::insert_event(&mut tx, &emit.record(&())).await?;
        }
        tx.commit().await.map_err(|e| db_err("commit", e))?;
        Ok(gone)
    }

    async fn list_bindings(&self, q: &ListQuery) -> Result<Page<HydratedBinding>> {
        self.list("role_bindings_hydrated", BINDING_COLUMNS, q).await
    }

    async fn grants(&self, identity_uid: &str) -> Result<Vec<(String, String)>> {
        sqlx::query_as(
            "SELECT rb.parent_uid, r.capabilities FROM role_bindings rb JOIN roles r ON r.uid = rb.role_uid \
             WHERE rb.identity_uid = $1",
        )
        .bind(identity_uid)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db_err("grants", e))
    }
}

#[cfg(test)]
mod echo_tests {
    #[test]
    fn payloads_carry_the_topic_and_the_nonce() {
        assert_eq!(super::payload_topic("access|42"), ("access", Some(42)));
        assert_eq!(
            super::payload_topic("keys"),
            ("keys", None),
            "an older server's payload"
        );
        assert_eq!(super::payload_topic("*|x"), ("*", None));
    }
}
