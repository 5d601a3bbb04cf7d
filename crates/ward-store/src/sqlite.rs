//! The embedded SQLite backend (the default).
//!
//! WAL with `synchronous=FULL`, so a commit that returned is on disk and survives
//! SIGKILL or power loss. One writer connection (SQLite has one writer anyway,
//! and a single connection turns contention into queueing instead of BUSY
//! errors) and a pool of readers that read concurrently with it.
//!
//! Queries run through rusqlite. Writes (which wait for fsync) run on the
//! writer's own thread, which commits the writes queued meanwhile together
//! (group commit, [`writer`]). Reads run inline on the calling thread, each on a read connection of
//! its own. They are bounded (point lookups, pages of at most 201 rows, counts
//! that are cached), and SQLite answers them from its page cache in
//! microseconds, while a thread hand-off costs tens of microseconds, and
//! crossing threads per *row*, as an async driver does, far more.
//!
//! `totalCount` of a listing is cached per query and invalidated by any write.
//! This is exact because an embedded SQLite database has exactly one Ward
//! process writing to it (several replicas use PostgreSQL).

use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, TryLockError};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params, params_from_iter};
use ward_core::listing::{ListQuery, Page};
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};

use crate::sql::{self, BINDING_COLUMNS, Bind, Dialect, GROUP_COLUMNS, IDENTITY_COLUMNS, ROLE_COLUMNS};
use crate::{
    GROUP_TYPE, GroupPatch, GroupRecord, HydratedBinding, IDENTITY_TYPE, IdentityPatch, IdentityRecord, Listed,
    ROLE_BINDING_TYPE, ROLE_TYPE, RoleBindingRecord, RolePatch, RoleRecord, SigningKeyRecord, Store, group_not_empty,
    page_of, still_bound,
};

/// Schema migrations, applied in order; `PRAGMA user_version` records how many
/// have run. Version numbers match `migrations/postgres`.
mod account_associations;
mod advisories;
mod events;
mod people;
mod registry;
mod vulns;
mod writer;

const MIGRATIONS: &[&str] = &[
    include_str!("../migrations/sqlite/0001_init.sql"),
    include_str!("../migrations/sqlite/0002_iam.sql"),
    include_str!("../migrations/sqlite/0003_registry.sql"),
    include_str!("../migrations/sqlite/0004_advisories.sql"),
    include_str!("../migrations/sqlite/0005_people.sql"),
    include_str!("../migrations/sqlite/0006_directory.sql"),
    include_str!("../migrations/sqlite/0007_account_associations.sql"),
    include_str!("../migrations/sqlite/0008_tag_history.sql"),
    include_str!("../migrations/sqlite/0009_change_counters.sql"),
    include_str!("../migrations/sqlite/0010_parent_counts.sql"),
    include_str!("../migrations/sqlite/0011_client_caps.sql"),
    include_str!("../migrations/sqlite/0012_wire_fields.sql"),
    include_str!("../migrations/sqlite/0013_advisory_feeds.sql"),
    include_str!("../migrations/sqlite/0014_vulns.sql"),
    include_str!("../migrations/sqlite/0015_feed_affected.sql"),
    include_str!("../migrations/sqlite/0016_report_stamp.sql"),
    include_str!("../migrations/sqlite/0017_events.sql"),
    include_str!("../migrations/sqlite/0018_subscriptions.sql"),
    include_str!("../migrations/sqlite/0019_feed_name_packages.sql"),
    include_str!("../migrations/sqlite/0020_subscription_tails.sql"),
    include_str!("../migrations/sqlite/0021_report_compression.sql"),
    include_str!("../migrations/sqlite/0022_finding_ids.sql"),
];

const PRAGMAS: &str = "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; \
                       PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 10000;";

/// Cached counts kept at most (about 60 bytes each).
const COUNT_CACHE_ENTRIES: u64 = 10_000;

pub struct SqliteStore {
    writer: writer::Writer,
    readers: Arc<Readers>,
    /// Bumped after every commit; cached counts from an older generation are stale.
    generation: Arc<AtomicU64>,
    /// Counts by the SHA-256 of their query and binds: a fixed 32-byte key
    /// however long the filter, so [`COUNT_CACHE_ENTRIES`] bounds the memory.
    counts: moka::sync::Cache<[u8; 32], (u64, i64)>,
}

fn err(context: &str, e: impl std::fmt::Display) -> Error {
    Error::internal(format_args!("{context}: {e}"))
}

fn group_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<GroupRecord> {
    Ok(GroupRecord {
        uid: r.get(0)?,
        parent_uid: r.get(1)?,
        name: r.get(2)?,
        description: r.get(3)?,
        verified: r.get(4)?,
        create_time: r.get(5)?,
        update_time: r.get(6)?,
        kind: r.get(7)?,
    })
}

fn identity_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<IdentityRecord> {
    Ok(IdentityRecord {
        uid: r.get(0)?,
        parent_uid: r.get(1)?,
        name: r.get(2)?,
        description: r.get(3)?,
        company: r.get(4)?,
        relationship_type: r.get(5)?,
        relationship: r.get(6)?,
        issuer: r.get(7)?,
        subject: r.get(8)?,
        last_seen_time: r.get(9)?,
        create_time: r.get(10)?,
        update_time: r.get(11)?,
    })
}

fn role_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RoleRecord> {
    Ok(RoleRecord {
        uid: r.get(0)?,
        parent_uid: r.get(1)?,
        name: r.get(2)?,
        description: r.get(3)?,
        capabilities: r.get(4)?,
        create_time: r.get(5)?,
        update_time: r.get(6)?,
    })
}

fn binding_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<HydratedBinding> {
    Ok(HydratedBinding {
        uid: r.get(0)?,
        parent_uid: r.get(1)?,
        identity_uid: r.get(2)?,
        role_uid: r.get(3)?,
        create_time: r.get(4)?,
        update_time: r.get(5)?,
        name: r.get(6)?,
        identity_name: r.get(7)?,
        identity_description: r.get(8)?,
        identity_subject: r.get(9)?,
        identity_issuer: r.get(10)?,
        group_name: r.get(11)?,
        group_description: r.get(12)?,
        role_description: r.get(13)?,
    })
}

/// Whether `table` has a row with this uid (inside a transaction).
fn exists(c: &Connection, table: &str, uid: &str) -> rusqlite::Result<bool> {
    Ok(c.prepare_cached(&format!("SELECT 1 FROM {table} WHERE uid = ?1"))?
        .query_row([uid], |_| Ok(()))
        .optional()?
        .is_some())
}

/// Uids of the role bindings whose `column` is `uid`.
fn bound_by(c: &Connection, column: &str, uid: &str) -> rusqlite::Result<Vec<String>> {
    c.prepare_cached(&format!(
        "SELECT uid FROM role_bindings WHERE {column} = ?1 ORDER BY uid"
    ))?
    .query_map([uid], |r| r.get(0))?
    .collect()
}

fn insert_identity(c: &Connection, i: &IdentityRecord) -> rusqlite::Result<usize> {
    c.execute(
        &format!(
            "INSERT INTO identities ({IDENTITY_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
        ),
        params![
            i.uid,
            i.parent_uid,
            i.name,
            i.description,
            i.company,
            i.relationship_type,
            i.relationship,
            i.issuer,
            i.subject,
            i.last_seen_time,
            i.create_time,
            i.update_time
        ],
    )
}

fn insert_binding(c: &Connection, b: &RoleBindingRecord) -> rusqlite::Result<usize> {
    c.execute(
        "INSERT INTO role_bindings (uid, parent_uid, identity_uid, role_uid, create_time, update_time) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            b.uid,
            b.parent_uid,
            b.identity_uid,
            b.role_uid,
            b.create_time,
            b.update_time
        ],
    )
}

type FromRow<R> = fn(&rusqlite::Row<'_>) -> rusqlite::Result<R>;

fn values(binds: Vec<Bind>) -> Vec<Value> {
    binds
        .into_iter()
        .map(|b| match b {
            Bind::Text(s) => Value::Text(s),
            Bind::Int(n) => Value::Integer(n),
        })
        .collect()
}

/// Runs the migrations not yet applied, in one transaction, with foreign
/// keys off (SQLite's procedure for rebuilding a table: dropping the old one
/// must not cascade to the rows that reference it) and checked before the
/// commit: a violation fails the whole migration.
fn migrate(c: &mut Connection) -> rusqlite::Result<()> {
    c.pragma_update(None, "foreign_keys", false)?;
    let result = (|| {
        let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let done: usize = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if done > MIGRATIONS.len() {
            return Err(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_MISMATCH),
                Some(crate::newer_schema(done as i64, MIGRATIONS.len() as i64)),
            ));
        }
        for (i, m) in MIGRATIONS.iter().enumerate().skip(done) {
            tx.execute_batch(m)?;
            tx.pragma_update(None, "user_version", i + 1)?;
        }
        let violation: Option<String> = tx.query_row("PRAGMA foreign_key_check", [], |r| r.get(0)).optional()?;
        if let Some(table) = violation {
            return Err(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY),
                Some(format!("migration left a broken foreign key in {table}")),
            ));
        }
        tx.commit()
    })();
    c.pragma_update(None, "foreign_keys", true)?;
    result
}

/// Creates the database file readable by its owner only (SQLite creates
/// its WAL and shared-memory files with the database's permissions): it holds
/// the token signing keys. An existing file is left as it is.
fn create_private(path: &Path) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Read-only connections, used inline: a caller takes any free one without
/// waiting, and only when every one is busy waits for one on a blocking thread.
struct Readers {
    conns: Vec<Mutex<Connection>>,
    next: AtomicUsize,
}

impl Readers {
    fn open(path: &Path) -> Result<Self> {
        let n = std::thread::available_parallelism().map_or(4, |n| n.get() * 2).max(4);
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
        let conns = (0..n)
            .map(|_| {
                let c = Connection::open_with_flags(path, flags)?;
                c.busy_timeout(Duration::from_secs(10))?;
                Ok(Mutex::new(c))
            })
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| err("open sqlite readers", e))?;
        Ok(Self {
            conns,
            next: AtomicUsize::new(0),
        })
    }

    /// Runs `f` on a free connection right here, if there is one.
    fn try_run<T>(&self, f: &mut Option<impl FnOnce(&mut Connection) -> T>) -> Option<T> {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        for i in 0..self.conns.len() {
            let guard = match self.conns[(start + i) % self.conns.len()].try_lock() {
                Ok(g) => g,
                // A panic while reading leaves the connection usable.
                Err(TryLockError::Poisoned(p)) => p.into_inner(),
                Err(TryLockError::WouldBlock) => continue,
            };
            let mut conn = guard;
            return f.take().map(|f| f(&mut conn));
        }
        None
    }

    /// Waits for a connection (blocking) and runs `f`.
    fn run_blocking<T>(&self, f: impl FnOnce(&mut Connection) -> T) -> T {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.conns.len();
        let mut conn = self.conns[i].lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut conn)
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database file and runs migrations.
    pub async fn open(path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| err(&format!("create {}", dir.display()), e))?;
        }
        create_private(path).map_err(|e| err(&format!("create {}", path.display()), e))?;
        // Creates the file (and the WAL) before the read-only connections open it.
        let mut conn = Connection::open(path).map_err(|e| err("open sqlite", e))?;
        conn.execute_batch(PRAGMAS).map_err(|e| err("open sqlite", e))?;
        migrate(&mut conn).map_err(|e| err("migrate", e))?;
        let generation = Arc::new(AtomicU64::new(0));
        let writer = writer::Writer::start(conn, generation.clone()).map_err(|e| err("start the sqlite writer", e))?;
        Ok(Self {
            writer,
            readers: Arc::new(Readers::open(path)?),
            generation,
            counts: moka::sync::Cache::new(COUNT_CACHE_ENTRIES),
        })
    }

    /// Runs `f` on the writer connection in the next group commit (inside a
    /// transaction: `f` opens savepoints, never `BEGIN`), answering once it is
    /// durable; the commit invalidates cached counts.
    async fn write<T: Send + 'static>(
        &self,
        context: &'static str,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T> {
        self.writer.write(context, f).await
    }

    /// Deletes the row `uid` of `table`; NOT_FOUND (as `kind`) if absent.
    async fn delete_by_uid(
        &self,
        context: &'static str,
        table: &'static str,
        kind: &'static str,
        uid: &Uidp,
        emit: crate::events::Emit<()>,
    ) -> Result<()> {
        let key = uid.as_str().to_owned();
        let n = self
            .write(context, move |c| {
                let tx = c.savepoint()?;
                let n = tx.execute(&format!("DELETE FROM {table} WHERE uid = ?1"), [key])?;
                if n > 0 {
                    events::insert_event(&tx, &emit.record(&()))?;
                }
                tx.commit()?;
                Ok(n)
            })
            .await?;
        if n == 0 {
            return Err(Error::not_found(kind, uid.as_str()));
        }
        Ok(())
    }

    async fn get_one<R: Send + 'static>(
        &self,
        context: &'static str,
        table: &'static str,
        columns: &'static str,
        uid: &Uidp,
        from_row: FromRow<R>,
    ) -> Result<Option<R>> {
        let uid = uid.as_str().to_owned();
        self.read(context, move |c| {
            c.prepare_cached(&format!("SELECT {columns} FROM {table} WHERE uid = ?1"))?
                .query_row([uid], from_row)
                .optional()
        })
        .await
    }

    /// One page of `table`, with its total count (cached until the next write).
    async fn list<R: Listed + Send + 'static>(
        &self,
        context: &'static str,
        table: &'static str,
        columns: &'static str,
        q: &ListQuery,
        from_row: FromRow<R>,
    ) -> Result<Page<R>> {
        let count = sql::count(Dialect::Sqlite, table, q);
        let page = sql::page(Dialect::Sqlite, table, columns, q);
        let walking_index = sql::page_walking_index(table, columns, q);
        // Read the generation before counting: a write that lands meanwhile bumps
        // it, so a count that might include or miss that write is never reused.
        let generation = self.generation.load(Ordering::SeqCst);
        let count_key = sql::count_key(&count.sql, &count.binds);
        let cached = self
            .counts
            .get(&count_key)
            .filter(|(g, _)| *g == generation)
            .map(|(_, n)| n);
        let (total, rows) = self
            .read(context, move |c| {
                let total = match cached {
                    Some(n) => n,
                    None => c
                        .prepare_cached(&count.sql)?
                        .query_row(params_from_iter(values(count.binds)), |r| r.get(0))?,
                };
                // The table's size, from its largest rowid (never less).
                let page = match walking_index {
                    Some(walking) => {
                        let size: i64 = c
                            .prepare_cached(&format!("SELECT COALESCE(MAX(rowid), 0) FROM {table}"))?
                            .query_row([], |r| r.get(0))?;
                        if total.saturating_mul(sql::WALK_INDEX_SHARE) >= size {
                            walking
                        } else {
                            page
                        }
                    }
                    None => page,
                };
                let rows = c
                    .prepare_cached(&page.sql)?
                    .query_map(params_from_iter(values(page.binds)), from_row)?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                Ok((total, rows))
            })
            .await?;
        if cached.is_none() {
            self.counts.insert(count_key, (generation, total));
        }
        Ok(page_of(rows, q, total))
    }

    async fn read<T: Send + 'static>(
        &self,
        context: &'static str,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T> {
        let started = std::time::Instant::now();
        let span = crate::trace_span(
            || tracing::info_span!(target: ward_core::traceparent::SPANS, "store", db = "sqlite", kind = "read", op = context),
        );
        let run = async move {
            let mut f = Some(f);
            let r = match self.readers.try_run(&mut f) {
                Some(r) => r,
                None => {
                    let (readers, f) = (self.readers.clone(), f.take().expect("not yet run"));
                    tokio::task::spawn_blocking(move || readers.run_blocking(f))
                        .await
                        .map_err(|e| err(context, e))?
                }
            };
            crate::observe_query("sqlite", "read", context, started);
            r.map_err(|e| err(context, e))
        };
        tracing::Instrument::instrument(run, span).await
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn ping(&self) -> Result<()> {
        self.read("ping", |c| c.query_row("SELECT 1", [], |_| Ok(()))).await
    }

    async fn setting_or_init(&self, name: &str, init: Vec<u8>) -> Result<Vec<u8>> {
        let name = name.to_owned();
        self.write("setting", move |c| {
            c.execute(
                "INSERT INTO settings (name, value) VALUES (?1, ?2) ON CONFLICT (name) DO NOTHING",
                params![name, init],
            )?;
            c.query_row("SELECT value FROM settings WHERE name = ?1", [&name], |r| r.get(0))
        })
        .await
    }

    async fn set_setting(&self, name: &str, value: Vec<u8>) -> Result<()> {
        let name = name.to_owned();
        self.write("set setting", move |c| {
            c.execute(
                "INSERT INTO settings (name, value) VALUES (?1, ?2) \
                 ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                params![name, value],
            )
            .map(|_| ())
        })
        .await
    }

    async fn setting(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let name = name.to_owned();
        self.read("setting", move |c| {
            c.prepare_cached("SELECT value FROM settings WHERE name = ?1")?
                .query_row([name], |r| r.get(0))
                .optional()
        })
        .await
    }

    async fn signing_keys(&self) -> Result<Vec<SigningKeyRecord>> {
        self.read("signing keys", |c| {
            let mut st = c.prepare_cached(
                "SELECT kid, algorithm, private_key, public_key, create_time FROM signing_keys ORDER BY create_time, kid",
            )?;
            let rows = st.query_map([], |r| {
                Ok(SigningKeyRecord {
                    kid: r.get(0)?,
                    algorithm: r.get(1)?,
                    private_key: r.get(2)?,
                    public_key: r.get(3)?,
                    create_time: r.get(4)?,
                })
            })?;
            rows.collect()
        })
        .await
    }

    async fn insert_signing_key(&self, k: &SigningKeyRecord) -> Result<()> {
        let k = k.clone();
        self.write("insert signing key", move |c| {
            c.execute(
                "INSERT INTO signing_keys (kid, algorithm, private_key, public_key, create_time) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![k.kid, k.algorithm, k.private_key, k.public_key, k.create_time],
            )
            .map(drop)
        })
        .await
    }

    async fn delete_signing_key(&self, kid: &str) -> Result<()> {
        let kid = kid.to_owned();
        self.write("delete signing key", move |c| {
            c.execute("DELETE FROM signing_keys WHERE kid = ?1", [kid]).map(drop)
        })
        .await
    }

    async fn find_identities(&self, issuer: &str, subject: &str) -> Result<Vec<IdentityRecord>> {
        let (iss, sub) = (issuer.to_owned(), subject.to_owned());
        self.read("find identities", move |c| {
            c.prepare_cached(&format!(
                "SELECT {IDENTITY_COLUMNS} FROM identities WHERE issuer = ?1 AND subject = ?2 AND parent_uid IS NULL \
                 ORDER BY uid LIMIT 10"
            ))?
            .query_map([iss, sub], identity_from_row)?
            .collect()
        })
        .await
    }

    async fn touch_identity(&self, uid: &Uidp, now_ms: i64) -> Result<()> {
        let uid = uid.as_str().to_owned();
        self.write("touch identity", move |c| {
            c.execute(
                "UPDATE identities SET last_seen_time = ?1 WHERE uid = ?2",
                params![now_ms, uid],
            )
            .map(drop)
        })
        .await
    }

    async fn create_group(
        &self,
        g: &GroupRecord,
        owner: Option<&RoleBindingRecord>,
        emit: crate::events::Emit<()>,
    ) -> Result<()> {
        let (g, owner) = (g.clone(), owner.cloned());
        self.write("create group", move |c| {
            let tx = c.savepoint()?;
            if let Some(parent) = &g.parent_uid
                && !exists(&tx, "groups", parent)?
            {
                return Ok(Err(Error::not_found(GROUP_TYPE, parent.clone())));
            }
            tx.execute(
                "INSERT INTO groups (uid, parent_uid, name, description, verified, create_time, update_time, kind) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    g.uid,
                    g.parent_uid,
                    g.name,
                    g.description,
                    g.verified,
                    g.create_time,
                    g.update_time,
                    g.kind
                ],
            )?;
            if let Some(b) = &owner {
                insert_binding(&tx, b)?;
            }
            events::insert_event(&tx, &emit.record(&()))?;
            tx.commit()?;
            Ok(Ok(()))
        })
        .await?
    }

    async fn get_group(&self, uid: &Uidp) -> Result<Option<GroupRecord>> {
        self.get_one("get group", "groups", GROUP_COLUMNS, uid, group_from_row)
            .await
    }

    async fn update_group(
        &self,
        uid: &Uidp,
        patch: &GroupPatch,
        now_ms: i64,
        emit: crate::events::Emit<GroupRecord>,
    ) -> Result<GroupRecord> {
        let (key, patch) = (uid.as_str().to_owned(), patch.clone());
        let row = self
            .write("update group", move |c| {
                let tx = c.savepoint()?;
                let row = tx
                    .prepare_cached(&format!(
                        "UPDATE groups SET name = COALESCE(?1, name), description = COALESCE(?2, description), \
                         update_time = CASE WHEN ?3 > update_time THEN ?3 ELSE update_time + 1 END \
                         WHERE uid = ?4 RETURNING {GROUP_COLUMNS}"
                    ))?
                    .query_row(params![patch.name, patch.description, now_ms, key], group_from_row)
                    .optional()?;
                if let Some(g) = &row {
                    events::insert_event(&tx, &emit.record(g))?;
                }
                tx.commit()?;
                Ok(row)
            })
            .await?;
        row.ok_or_else(|| Error::not_found(GROUP_TYPE, uid.as_str()))
    }

    async fn delete_group(&self, uid: &Uidp, emit: crate::events::Emit<()>) -> Result<()> {
        let u = uid.clone();
        self.write("delete group", move |c| {
            let tx = c.savepoint()?;
            if !exists(&tx, "groups", u.as_str())? {
                return Ok(Err(Error::not_found(GROUP_TYPE, u.as_str())));
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
                let any = tx
                    .prepare_cached(&format!("SELECT 1 FROM {table} WHERE parent_uid = ?1 LIMIT 1"))?
                    .query_row([u.as_str()], |_| Ok(()))
                    .optional()?;
                if any.is_some() {
                    kinds.push(kind);
                }
            }
            if !kinds.is_empty() {
                return Ok(Err(group_not_empty(&u, &kinds)));
            }
            tx.execute("DELETE FROM groups WHERE uid = ?1", [u.as_str()])?;
            events::insert_event(&tx, &emit.record(&()))?;
            tx.commit()?;
            Ok(Ok(()))
        })
        .await?
    }

    async fn list_groups(&self, q: &ListQuery) -> Result<Page<GroupRecord>> {
        self.list("list groups", "groups", GROUP_COLUMNS, q, group_from_row)
            .await
    }

    async fn create_identity(&self, i: &IdentityRecord, emit: crate::events::Emit<()>) -> Result<()> {
        let i = i.clone();
        self.write("create identity", move |c| {
            let tx = c.savepoint()?;
            if let Some(parent) = &i.parent_uid
                && !exists(&tx, "groups", parent)?
            {
                return Ok(Err(Error::not_found(GROUP_TYPE, parent.clone())));
            }
            insert_identity(&tx, &i)?;
            events::insert_event(&tx, &emit.record(&()))?;
            tx.commit()?;
            Ok(Ok(()))
        })
        .await?
    }

    async fn get_identity(&self, uid: &Uidp) -> Result<Option<IdentityRecord>> {
        self.get_one("get identity", "identities", IDENTITY_COLUMNS, uid, identity_from_row)
            .await
    }

    async fn update_identity(
        &self,
        uid: &Uidp,
        p: &IdentityPatch,
        now_ms: i64,
        emit: crate::events::Emit<IdentityRecord>,
    ) -> Result<IdentityRecord> {
        let (key, p) = (uid.as_str().to_owned(), p.clone());
        let (rt, rel, iss, sub) = match p.relationship {
            Some((t, r, i, s)) => (Some(t), Some(r), Some(i), Some(s)),
            None => (None, None, None, None),
        };
        let row = self
            .write("update identity", move |c| {
                let tx = c.savepoint()?;
                let row = tx
                    .prepare_cached(&format!(
                        "UPDATE identities SET name = COALESCE(?1, name), description = COALESCE(?2, description), \
                     company = COALESCE(?3, company), relationship_type = COALESCE(?4, relationship_type), \
                     relationship = COALESCE(?5, relationship), issuer = COALESCE(?6, issuer), \
                     subject = COALESCE(?7, subject), \
                     update_time = CASE WHEN ?8 > update_time THEN ?8 ELSE update_time + 1 END \
                     WHERE uid = ?9 RETURNING {IDENTITY_COLUMNS}"
                    ))?
                    .query_row(
                        params![p.name, p.description, p.company, rt, rel, iss, sub, now_ms, key],
                        identity_from_row,
                    )
                    .optional()?;
                if let Some(i) = &row {
                    events::insert_event(&tx, &emit.record(i))?;
                }
                tx.commit()?;
                Ok(row)
            })
            .await?;
        row.ok_or_else(|| Error::not_found(IDENTITY_TYPE, uid.as_str()))
    }

    async fn delete_identity(&self, uid: &Uidp, emit: crate::events::Emit<()>) -> Result<()> {
        let u = uid.clone();
        self.write("delete identity", move |c| {
            let tx = c.savepoint()?;
            if !exists(&tx, "identities", u.as_str())? {
                return Ok(Err(Error::not_found(IDENTITY_TYPE, u.as_str())));
            }
            let bound = bound_by(&tx, "identity_uid", u.as_str())?;
            if !bound.is_empty() {
                return Ok(Err(still_bound("identity", &u, &bound)));
            }
            tx.execute("DELETE FROM identities WHERE uid = ?1", [u.as_str()])?;
            events::insert_event(&tx, &emit.record(&()))?;
            tx.commit()?;
            Ok(Ok(()))
        })
        .await?
    }

    async fn list_identities(&self, q: &ListQuery) -> Result<Page<IdentityRecord>> {
        self.list("list identities", "identities", IDENTITY_COLUMNS, q, identity_from_row)
            .await
    }

    async fn upsert_builtin_roles(&self, roles: &[RoleRecord]) -> Result<()> {
        let roles = roles.to_vec();
        self.write("upsert built-in roles", move |c| {
            let tx = c.savepoint()?;
            for r in &roles {
                tx.execute(
                    &format!(
                        "INSERT INTO roles ({ROLE_COLUMNS}) VALUES (?1, NULL, ?2, ?3, ?4, ?5, ?5) \
                         ON CONFLICT (uid) DO UPDATE SET name = excluded.name, description = excluded.description, \
                         capabilities = excluded.capabilities, update_time = excluded.update_time \
                         WHERE roles.capabilities <> excluded.capabilities OR roles.description <> excluded.description"
                    ),
                    params![r.uid, r.name, r.description, r.capabilities, r.create_time],
                )?;
            }
            tx.commit()
        })
        .await
    }

    async fn create_role(&self, r: &RoleRecord, emit: crate::events::Emit<()>) -> Result<()> {
        let r = r.clone();
        self.write("create role", move |c| {
            let tx = c.savepoint()?;
            if let Some(parent) = &r.parent_uid
                && !exists(&tx, "groups", parent)?
            {
                return Ok(Err(Error::not_found(GROUP_TYPE, parent.clone())));
            }
            tx.execute(
                &format!("INSERT INTO roles ({ROLE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
                params![
                    r.uid,
                    r.parent_uid,
                    r.name,
                    r.description,
                    r.capabilities,
                    r.create_time,
                    r.update_time
                ],
            )?;
            events::insert_event(&tx, &emit.record(&()))?;
            tx.commit()?;
            Ok(Ok(()))
        })
        .await?
    }

    async fn get_role(&self, uid: &Uidp) -> Result<Option<RoleRecord>> {
        self.get_one("get role", "roles", ROLE_COLUMNS, uid, role_from_row)
            .await
    }

    async fn update_role(
        &self,
        uid: &Uidp,
        p: &RolePatch,
        now_ms: i64,
        emit: crate::events::Emit<RoleRecord>,
    ) -> Result<RoleRecord> {
        let (key, p) = (uid.as_str().to_owned(), p.clone());
        let row = self
            .write("update role", move |c| {
                let tx = c.savepoint()?;
                let row = tx
                    .prepare_cached(&format!(
                        "UPDATE roles SET name = COALESCE(?1, name), description = COALESCE(?2, description), \
                     capabilities = COALESCE(?3, capabilities), \
                     update_time = CASE WHEN ?4 > update_time THEN ?4 ELSE update_time + 1 END \
                     WHERE uid = ?5 RETURNING {ROLE_COLUMNS}"
                    ))?
                    .query_row(
                        params![p.name, p.description, p.capabilities, now_ms, key],
                        role_from_row,
                    )
                    .optional()?;
                if let Some(r) = &row {
                    events::insert_event(&tx, &emit.record(r))?;
                }
                tx.commit()?;
                Ok(row)
            })
            .await?;
        row.ok_or_else(|| Error::not_found(ROLE_TYPE, uid.as_str()))
    }

    async fn delete_role(&self, uid: &Uidp, emit: crate::events::Emit<()>) -> Result<()> {
        let u = uid.clone();
        self.write("delete role", move |c| {
            let tx = c.savepoint()?;
            if !exists(&tx, "roles", u.as_str())? {
                return Ok(Err(Error::not_found(ROLE_TYPE, u.as_str())));
            }
            let bound = bound_by(&tx, "role_uid", u.as_str())?;
            if !bound.is_empty() {
                return Ok(Err(still_bound("role", &u, &bound)));
            }
            tx.execute("DELETE FROM roles WHERE uid = ?1", [u.as_str()])?;
            events::insert_event(&tx, &emit.record(&()))?;
            tx.commit()?;
            Ok(Ok(()))
        })
        .await?
    }

    async fn list_roles(&self, q: &ListQuery) -> Result<Page<RoleRecord>> {
        self.list("list roles", "roles", ROLE_COLUMNS, q, role_from_row).await
    }

    async fn create_bindings(
        &self,
        bindings: &[RoleBindingRecord],
        emit: crate::events::Emit<Vec<HydratedBinding>>,
    ) -> Result<()> {
        let bindings = bindings.to_vec();
        self.write("create role bindings", move |c| {
            let tx = c.savepoint()?;
            for b in &bindings {
                for (table, kind, uid) in [
                    ("groups", GROUP_TYPE, &b.parent_uid),
                    ("identities", IDENTITY_TYPE, &b.identity_uid),
                    ("roles", ROLE_TYPE, &b.role_uid),
                ] {
                    if !exists(&tx, table, uid)? {
                        return Ok(Err(Error::not_found(kind, uid.clone())));
                    }
                }
                insert_binding(&tx, b)?;
            }
            let mut rows = Vec::with_capacity(bindings.len());
            for b in &bindings {
                rows.push(
                    tx.prepare_cached(&format!(
                        "SELECT {BINDING_COLUMNS} FROM role_bindings_hydrated WHERE uid = ?1"
                    ))?
                    .query_row([&b.uid], binding_from_row)?,
                );
            }
            events::insert_event(&tx, &emit.record(&rows))?;
            tx.commit()?;
            Ok(Ok(()))
        })
        .await?
    }

    async fn get_binding(&self, uid: &Uidp) -> Result<Option<HydratedBinding>> {
        self.get_one(
            "get role binding",
            "role_bindings_hydrated",
            BINDING_COLUMNS,
            uid,
            binding_from_row,
        )
        .await
    }

    async fn update_binding(
        &self,
        uid: &Uidp,
        role_uid: &str,
        now_ms: i64,
        emit: crate::events::Emit<HydratedBinding>,
    ) -> Result<HydratedBinding> {
        let (u, role) = (uid.clone(), role_uid.to_owned());
        self.write("update role binding", move |c| {
            let tx = c.savepoint()?;
            if !exists(&tx, "roles", &role)? {
                return Ok(Err(Error::not_found(ROLE_TYPE, role)));
            }
            let n = tx.execute(
                "UPDATE role_bindings SET role_uid = ?1, \
                 update_time = CASE WHEN ?2 > update_time THEN ?2 ELSE update_time + 1 END WHERE uid = ?3",
                params![role, now_ms, u.as_str()],
            )?;
            if n == 0 {
                return Ok(Err(Error::not_found(ROLE_BINDING_TYPE, u.as_str())));
            }
            let row = tx
                .prepare_cached(&format!(
                    "SELECT {BINDING_COLUMNS} FROM role_bindings_hydrated WHERE uid = ?1"
                ))?
                .query_row([u.as_str()], binding_from_row)?;
            events::insert_event(&tx, &emit.record(&row))?;
            tx.commit()?;
            Ok(Ok(row))
        })
        .await?
    }

    async fn delete_binding(&self, uid: &Uidp, emit: crate::events::Emit<()>) -> Result<bool> {
        let u = uid.as_str().to_owned();
        self.write("delete role binding", move |c| {
            let tx = c.savepoint()?;
            let gone = tx.execute("DELETE FROM role_bindings WHERE uid = ?1", [u])? > 0;
            if gone {
                events::insert_event(&tx, &emit.record(&()))?;
            }
            tx.commit()?;
            Ok(gone)
        })
        .await
    }

    async fn list_bindings(&self, q: &ListQuery) -> Result<Page<HydratedBinding>> {
        self.list(
            "list role bindings",
            "role_bindings_hydrated",
            BINDING_COLUMNS,
            q,
            binding_from_row,
        )
        .await
    }

    async fn grants(&self, identity_uid: &str) -> Result<Vec<(String, String)>> {
        let id = identity_uid.to_owned();
        self.read("grants", move |c| {
            c.prepare_cached(
                "SELECT rb.parent_uid, r.capabilities FROM role_bindings rb JOIN roles r ON r.uid = rb.role_uid \
                 WHERE rb.identity_uid = ?1",
            )?
            .query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect()
        })
        .await
    }
}

#[cfg(test)]
mod migration_tests {
    use super::*;

    /// The tags-table rebuild of migration 12 keeps every tag and its
    /// history (foreign keys are off while it runs, so dropping the old
    /// table cascades nowhere), and leaves foreign keys on and intact.
    #[test]
    fn rebuilding_tags_keeps_tags_and_their_history() {
        let mut c = Connection::open_in_memory().expect("open");
        c.execute_batch("PRAGMA foreign_keys = ON").expect("fk on");
        {
            let tx = c.transaction().expect("tx");
            for m in &MIGRATIONS[..11] {
                tx.execute_batch(m).expect("migration");
            }
            tx.pragma_update(None, "user_version", 11).expect("version");
            tx.execute_batch(
                "INSERT INTO groups (uid, parent_uid, name, description, verified, create_time, update_time) \
                 VALUES ('g', NULL, 'acme', '', 0, 1, 1); \
                 INSERT INTO repos (uid, parent_uid, org_uid, name, description, create_time, update_time) \
                 VALUES ('g/r', 'g', 'g', 'app', '', 1, 1); \
                 INSERT INTO manifests (repo_uid, digest, media_type, artifact_type, subject, annotations, content, \
                 create_time) VALUES ('g/r', 'sha256:aa', 'm', '', NULL, '{}', x'00', 1); \
                 INSERT INTO tags (uid, parent_uid, name, digest, is_referrer, is_dated, is_epoch, create_time, \
                 update_time) VALUES ('g/r/t', 'g/r', 'latest', 'sha256:aa', 0, 0, 0, 1, 2); \
                 INSERT INTO tag_history (tag_uid, update_time, digest) VALUES ('g/r/t', 2, 'sha256:aa');",
            )
            .expect("rows");
            tx.commit().expect("commit");
        }
        let history = |c: &Connection| -> i64 {
            c.query_row("SELECT COUNT(*) FROM tag_history WHERE tag_uid = 'g/r/t'", [], |r| {
                r.get(0)
            })
            .expect("count")
        };
        assert_eq!(history(&c), 1);
        migrate(&mut c).expect("migrate to the latest version");
        assert_eq!(history(&c), 1, "the history survives the rebuild");
        let (digest, deprecated, bundles): (String, bool, String) = c
            .query_row(
                "SELECT digest, deprecated, bundles FROM tags WHERE uid = 'g/r/t'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .expect("the tag");
        assert_eq!(
            (digest.as_str(), deprecated, bundles.as_str()),
            ("sha256:aa", false, "[]")
        );
        let fk: bool = c.query_row("PRAGMA foreign_keys", [], |r| r.get(0)).expect("pragma");
        assert!(fk, "foreign keys are on again");
        // Deleting the manifest still cascades to the tag, then its history.
        c.execute("DELETE FROM manifests WHERE digest = 'sha256:aa'", [])
            .expect("delete");
        assert_eq!(history(&c), 0);
    }
}
