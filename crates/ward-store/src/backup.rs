//! What backups and integrity checks need of the database: a consistent
//! online copy of a SQLite database, its integrity, and the blobs the
//! database knows.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};
use ward_core::{Error, Result};

/// The SQLite file of a database URL, or None for PostgreSQL.
pub fn sqlite_path(database: &str) -> Option<&Path> {
    if database.starts_with("postgres://") || database.starts_with("postgresql://") {
        None
    } else {
        Some(Path::new(database.strip_prefix("sqlite://").unwrap_or(database)))
    }
}

fn err(context: &str, e: impl std::fmt::Display) -> Error {
    Error::internal(format_args!("{context}: {e}"))
}

/// A read-only connection: nothing here writes to the database it reads.
fn open_read_only(db: &Path) -> Result<Connection> {
    Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(|e| err("open the database", e))
}

/// Writes a consistent copy of the SQLite database at `db` to `out` (which
/// must not exist) while servers keep writing: `VACUUM INTO` reads one
/// snapshot (every write committed before it began, none after) on a
/// read-only connection, so writers are never blocked. Blocking: call it
/// off the async workers.
pub fn snapshot_sqlite(db: &Path, out: &Path) -> Result<()> {
    let c = open_read_only(db)?;
    c.busy_timeout(std::time::Duration::from_secs(30))
        .map_err(|e| err("open the database", e))?;
    let target = out
        .to_str()
        .ok_or_else(|| Error::invalid("out", "the backup path must be UTF-8"))?;
    c.execute("VACUUM INTO ?1", [target])
        .map_err(|e| err("copy the database", e))?;
    Ok(())
}

/// The problems SQLite's own checks find in the database at `db` (`PRAGMA
/// integrity_check` and `foreign_key_check`); empty when it is sound.
/// Blocking.
pub fn check_sqlite(db: &Path) -> Result<Vec<String>> {
    let c = open_read_only(db)?;
    let mut problems: Vec<String> = c
        .prepare("PRAGMA integrity_check")
        .and_then(|mut s| s.query_map([], |r| r.get::<_, String>(0))?.collect())
        .map_err(|e| err("integrity_check", e))?;
    problems.retain(|p| p != "ok");
    let broken: Vec<String> = c
        .prepare("PRAGMA foreign_key_check")
        .and_then(|mut s| {
            s.query_map([], |r| {
                Ok(format!(
                    "a row of {} (rowid {}) names a missing row of {}",
                    r.get::<_, String>(0)?,
                    r.get::<_, Option<i64>>(1)?.unwrap_or_default(),
                    r.get::<_, String>(2)?
                ))
            })?
            .collect()
        })
        .map_err(|e| err("foreign_key_check", e))?;
    problems.extend(broken);
    Ok(problems)
}

/// The blobs (digest, size) the SQLite database at `db` knows. Blocking.
pub fn sqlite_known_blobs(db: &Path) -> Result<Vec<(String, i64)>> {
    open_read_only(db)?
        .prepare("SELECT digest, size FROM blobs ORDER BY digest")
        .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
        .map_err(|e| err("read the blobs", e))
}
