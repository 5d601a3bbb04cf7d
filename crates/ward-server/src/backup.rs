//! `ward admin backup`, `restore` and `check`.
//!
//! A backup is a directory: `ward.db` (a consistent snapshot of the SQLite
//! database, taken while servers keep writing), `registry/blobs/…` (the
//! local blob store's files, each verified against its digest after the
//! copy), `secret.key` (the server secret that opens the sealed signing keys
//! and client secrets, when it is a file in the data directory) and
//! `backup.json` (what was taken). The database is taken first and the blobs
//! after, so every blob the snapshot names is already stored when the copy
//! runs (blobs are written before the rows that name them). Blobs already in
//! the backup directory are kept, not copied again, so backing up into the
//! same directory is incremental.
//!
//! PostgreSQL and S3 are backed up with their own tools (`pg_dump`, bucket
//! versioning; see the README); `check` works on them too.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use serde_json::json;
use ward_blob::{BlobStore, LocalBlobs};
use ward_core::registry::Digest;
use ward_store::backup::{check_sqlite, snapshot_sqlite, sqlite_known_blobs, sqlite_path};

use crate::ServerConfig;

/// What a backup took.
#[derive(Debug, Default)]
pub struct Backup {
    pub database_bytes: u64,
    pub blobs: u64,
    pub blobs_copied: u64,
    pub blob_bytes: u64,
}

/// What a check found.
#[derive(Debug, Default)]
pub struct Check {
    /// Problems the database's own checks report.
    pub database: Vec<String>,
    /// Blobs the database knows, checked in the blob store.
    pub blobs_known: u64,
    /// Blobs the database knows that the store lacks (or holds at another size).
    pub missing: Vec<String>,
    /// Blob files no database row knows (local store only; `ward admin gc`
    /// does not see these either).
    pub unreferenced: Vec<String>,
    /// Blob files whose bytes do not match their name (local store only).
    pub corrupt: Vec<String>,
}

impl Check {
    pub fn clean(&self) -> bool {
        self.database.is_empty() && self.missing.is_empty() && self.unreferenced.is_empty() && self.corrupt.is_empty()
    }
}

fn local_blobs(config: &ServerConfig) -> anyhow::Result<Option<LocalBlobs>> {
    if config.blob_store.is_some() {
        return Ok(None);
    }
    let dir = config.data_dir.join("registry");
    Ok(Some(LocalBlobs::open(&dir).with_context(|| {
        format!("opening the blob store at {}", dir.display())
    })?))
}

/// Copies `from` to `to` through a temporary file, then checks the copy
/// against `digest`.
fn copy_verified(from: &Path, to: &Path, digest: &Digest) -> anyhow::Result<u64> {
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = to.with_extension("partial");
    let n = std::fs::copy(from, &tmp).with_context(|| format!("copying {}", from.display()))?;
    std::fs::File::open(&tmp)?.sync_all()?;
    if !LocalBlobs::verify_file(&tmp, digest)? {
        let _ = std::fs::remove_file(&tmp);
        bail!("the copy of {digest} does not match its digest (is the source corrupt? run `ward admin check`)");
    }
    std::fs::rename(&tmp, to)?;
    Ok(n)
}

/// `ward admin backup --out DIR`: an online backup of a SQLite database and
/// the local blob store.
pub async fn backup(config: &ServerConfig, out: &Path) -> anyhow::Result<Backup> {
    let url = config.database_url();
    let Some(db) = sqlite_path(&url).map(Path::to_path_buf) else {
        bail!(
            "the database is PostgreSQL: back it up with pg_dump (see the README, \"Operating Ward\"); \
             `ward admin check` verifies it and the blob store"
        );
    };
    if !db.exists() {
        bail!("no database at {}", db.display());
    }
    let Some(blobs) = local_blobs(config)? else {
        bail!(
            "the blob store is S3: keep its bucket versioned and back it up with the bucket's own tools \
             (see the README); this command copies a local blob store only"
        );
    };
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let target = out.join("ward.db");
    let out = out.to_path_buf();
    let secret = config.data_dir.join("secret.key");
    let secret_is_file = config.secret_key.is_none() && secret.exists();
    tokio::task::spawn_blocking(move || -> anyhow::Result<Backup> {
        // The database first: a fresh snapshot replaces an older one.
        let tmp = out.join("ward.db.partial");
        let _ = std::fs::remove_file(&tmp);
        snapshot_sqlite(&db, &tmp).map_err(|e| anyhow::anyhow!("{}", e.message()))?;
        std::fs::File::open(&tmp)?.sync_all()?;
        std::fs::rename(&tmp, &target)?;
        let mut report = Backup {
            database_bytes: std::fs::metadata(&target)?.len(),
            ..Backup::default()
        };
        // Then the blobs the snapshot knows, and only those
        // (content-addressed: one already in the backup is kept).
        // The backup's blobs are laid out as a local store's.
        let backup_blobs = LocalBlobs::open(&out.join("registry"))?;
        let known = sqlite_known_blobs(&target).map_err(|e| anyhow::anyhow!("{}", e.message()))?;
        let mut wanted = std::collections::BTreeSet::new();
        for (digest, size) in known {
            let Some(digest) = Digest::parse(&digest) else {
                bail!("the database names a blob {digest:?} that is not a digest");
            };
            let dest = backup_blobs.blob_path(&digest);
            wanted.insert(dest.clone());
            report.blobs += 1;
            if dest.exists() && std::fs::metadata(&dest)?.len() == size as u64 {
                continue;
            }
            let path = blobs.blob_path(&digest);
            if !path.exists() {
                bail!("the database names blob {digest}, which the blob store lacks: run `ward admin check`");
            }
            report.blob_bytes += copy_verified(&path, &dest, &digest)?;
            report.blobs_copied += 1;
        }
        // Blobs of an earlier backup into this directory that this snapshot
        // no longer names go, so a restore holds exactly the snapshot's.
        for (_, path) in backup_blobs.stored()? {
            if !wanted.contains(&path) {
                std::fs::remove_file(&path)?;
            }
        }
        if secret_is_file {
            std::fs::copy(&secret, out.join("secret.key")).context("copying secret.key")?;
        }
        let manifest = json!({
            "ward": env!("CARGO_PKG_VERSION"),
            "created": chrono::Utc::now().to_rfc3339(),
            "database": "ward.db",
            "databaseBytes": report.database_bytes,
            "blobs": report.blobs,
            "secretKey": secret_is_file,
        });
        std::fs::write(out.join("backup.json"), serde_json::to_vec_pretty(&manifest)?)?;
        Ok(report)
    })
    .await?
}

/// `ward admin restore --from DIR`: verifies a backup, then puts it in
/// place as this config's database, blob store and secret key. The server
/// must be stopped. Refuses to replace an existing database unless `force`.
pub async fn restore(config: &ServerConfig, from: &Path, force: bool) -> anyhow::Result<Check> {
    let url = config.database_url();
    let Some(db) = sqlite_path(&url).map(Path::to_path_buf) else {
        bail!("the database is PostgreSQL: restore it with pg_restore (see the README)");
    };
    if config.blob_store.is_some() {
        bail!("the blob store is S3: restore it from the bucket's versions (see the README)");
    }
    let source = from.join("ward.db");
    if !source.exists() {
        bail!("{} holds no ward.db: not a backup", from.display());
    }
    if db.exists() && !force {
        bail!(
            "{} exists: stop the server and pass --force to replace it with the backup",
            db.display()
        );
    }
    let from = from.to_path_buf();
    let data_dir = config.data_dir.clone();
    let has_secret_flag = config.secret_key.is_some();
    tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
        let problems = check_sqlite(&source).map_err(|e| anyhow::anyhow!("{}", e.message()))?;
        if !problems.is_empty() {
            bail!("the backup's database is damaged: {}", problems.join("; "));
        }
        // Every blob of the backup is checked before anything is replaced.
        let backup_blobs = LocalBlobs::open(&from.join("registry"))?;
        let stored = backup_blobs.stored()?;
        for (digest, path) in &stored {
            if !LocalBlobs::verify_file(path, digest)? {
                bail!("the backup's blob {digest} does not match its digest");
            }
        }
        std::fs::create_dir_all(&data_dir)?;
        let blobs = LocalBlobs::open(&data_dir.join("registry"))?;
        for (digest, path) in &stored {
            let dest = blobs.blob_path(digest);
            if !dest.exists() {
                copy_verified(path, &dest, digest)?;
            }
        }
        if from.join("secret.key").exists() && !has_secret_flag {
            std::fs::copy(from.join("secret.key"), data_dir.join("secret.key"))?;
        }
        let tmp = db.with_extension("db.restoring");
        std::fs::copy(&source, &tmp)?;
        std::fs::File::open(&tmp)?.sync_all()?;
        for stale in ["-wal", "-shm"] {
            let mut p = db.clone().into_os_string();
            p.push(stale);
            let _ = std::fs::remove_file(p);
        }
        std::fs::rename(&tmp, &db)?;
        Ok(())
    })
    .await??;
    check(config).await
}

/// `ward admin check`: the database's integrity, and the blob store against
/// the blobs the database knows.
pub async fn check(config: &ServerConfig) -> anyhow::Result<Check> {
    let url = config.database_url();
    let mut report = Check::default();
    if let Some(db) = sqlite_path(&url).map(Path::to_path_buf) {
        if !db.exists() {
            bail!("no database at {}", db.display());
        }
        report.database = tokio::task::spawn_blocking(move || check_sqlite(&db))
            .await?
            .map_err(|e| anyhow::anyhow!("{}", e.message()))?;
    }
    let store = ward_store::open(&url).await.context("opening the database")?;
    store.ping().await?;
    let blobs: Arc<dyn BlobStore> = crate::blob_store(config)?;
    let mut known = std::collections::BTreeSet::new();
    let mut after = String::new();
    loop {
        let page = store.known_blobs(&after, 1000).await?;
        for (digest, size) in &page {
            report.blobs_known += 1;
            let stored = match Digest::parse(digest) {
                Some(d) => blobs.size(&d).await?,
                None => None,
            };
            if stored != Some(*size as u64) {
                report.missing.push(digest.clone());
            }
            known.insert(digest.clone());
        }
        match page.last() {
            Some((d, _)) if page.len() == 1000 => after = d.clone(),
            _ => break,
        }
    }
    if let Some(local) = local_blobs(config)? {
        let (unreferenced, corrupt) = tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
            let mut unreferenced = Vec::new();
            let mut corrupt = Vec::new();
            for (digest, path) in local.stored()? {
                if !known.contains(digest.as_str()) {
                    unreferenced.push(digest.as_str().to_owned());
                } else if !LocalBlobs::verify_file(&path, &digest)? {
                    corrupt.push(digest.as_str().to_owned());
                }
            }
            Ok((unreferenced, corrupt))
        })
        .await??;
        report.unreferenced = unreferenced;
        report.corrupt = corrupt;
    }
    Ok(report)
}
