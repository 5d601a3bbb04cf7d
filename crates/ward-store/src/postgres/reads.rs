//! Connections for the hot reads (point reads and pages), kept outside
//! sqlx's pool.
//!
//! sqlx's pool pings every connection it takes back (sqlx 0.8
//! `return_to_pool`), so each pooled query costs two round trips: the query
//! and a `Sync` after it. These connections are borrowed and given back
//! without that ping. What the ping guards against, a query abandoned midway
//! (its request was cancelled) leaving the connection mid-protocol, is
//! handled here instead: a connection is marked suspect while a query runs
//! and is replaced before its next use unless the query finished.

use std::sync::atomic::{AtomicUsize, Ordering};

use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, PgConnection};
use ward_core::Result;

use crate::db_err;

/// How many read connections a server keeps (beside the pool's 16).
pub(super) const READ_CONNECTIONS: usize = 8;

pub(super) struct Reads {
    options: PgConnectOptions,
    slots: Box<[tokio::sync::Mutex<Slot>]>,
    next: AtomicUsize,
}

struct Slot {
    conn: PgConnection,
    /// Set while a query runs, cleared when it finished (with rows or with
    /// an error the server sent). Still set at the next borrow: the query was
    /// abandoned or the connection failed, so it is replaced.
    suspect: bool,
}

/// A borrowed read connection, and when its query started.
pub(super) struct Read<'a>(tokio::sync::MutexGuard<'a, Slot>, std::time::Instant);

impl Reads {
    /// Opens `n` connections.
    pub(super) async fn connect(options: PgConnectOptions, n: usize) -> Result<Self> {
        let mut slots = Vec::with_capacity(n);
        for _ in 0..n.max(1) {
            let conn = options.connect().await.map_err(|e| db_err("connect to postgres", e))?;
            slots.push(tokio::sync::Mutex::new(Slot { conn, suspect: false }));
        }
        Ok(Self {
            options,
            slots: slots.into_boxed_slice(),
            next: AtomicUsize::new(0),
        })
    }

    /// A free connection if there is one, else the next in turn once it is
    /// free; a suspect one is replaced first.
    pub(super) async fn get(&self) -> Result<Read<'_>> {
        let n = self.slots.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let free = (0..n).find_map(|i| self.slots[(start + i) % n].try_lock().ok());
        let mut slot = match free {
            Some(s) => s,
            None => self.slots[start % n].lock().await,
        };
        if slot.suspect {
            slot.conn = self
                .options
                .connect()
                .await
                .map_err(|e| db_err("connect to postgres", e))?;
            slot.suspect = false;
        }
        Ok(Read(slot, std::time::Instant::now()))
    }
}

impl Read<'_> {
    /// The connection, for one query; pass the query's result to
    /// [`Read::done`].
    pub(super) fn conn(&mut self) -> &mut PgConnection {
        self.0.suspect = true;
        self.1 = std::time::Instant::now();
        &mut self.0.conn
    }

    /// Clears the mark [`Read::conn`] set, unless `r` shows the connection
    /// failed: it is fine after rows or an error the database sent, not after
    /// an I/O or protocol failure.
    pub(super) fn done<T>(&mut self, r: sqlx::Result<T>) -> sqlx::Result<T> {
        crate::observe_query("postgres", "read", "read", self.1);
        if matches!(
            &r,
            Ok(_) | Err(sqlx::Error::Database(_) | sqlx::Error::RowNotFound | sqlx::Error::ColumnDecode { .. })
        ) {
            self.0.suspect = false;
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn backend_pid(reads: &Reads) -> i32 {
        let mut read = reads.get().await.expect("borrow");
        let r = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(read.conn())
            .await;
        read.done(r).expect("pid")
    }

    /// A query abandoned midway (its request cancelled) leaves its
    /// connection suspect, and the next borrower gets a fresh connection
    /// that answers correctly; a finished query, even a failed one, keeps it.
    #[tokio::test]
    async fn an_abandoned_query_replaces_its_connection() {
        let Ok(url) = std::env::var("WARD_TEST_POSTGRES_URL") else {
            eprintln!("note: WARD_TEST_POSTGRES_URL unset; skipped");
            return;
        };
        let reads = Reads::connect(url.parse().expect("url"), 1).await.expect("connect");
        let first = backend_pid(&reads).await;
        assert_eq!(
            backend_pid(&reads).await,
            first,
            "a finished query keeps its connection"
        );

        let mut read = reads.get().await.expect("borrow");
        let r = sqlx::query("SELECT * FROM no_such_table").execute(read.conn()).await;
        assert!(read.done(r).is_err());
        drop(read);
        assert_eq!(
            backend_pid(&reads).await,
            first,
            "a database error keeps the connection"
        );

        let mut read = reads.get().await.expect("borrow");
        let slow = sqlx::query("SELECT pg_sleep(5)").execute(read.conn());
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(100), slow)
                .await
                .is_err()
        );
        drop(read);
        assert_ne!(
            backend_pid(&reads).await,
            first,
            "the abandoned connection was replaced"
        );
    }
}
