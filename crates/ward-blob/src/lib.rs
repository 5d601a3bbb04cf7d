//! Content-addressed blob storage for the registry.
//!
//! Bytes arrive as a stream into an upload file, are hashed as they are
//! written, and only become a blob when their digest matches the one the
//! client claims: then the file is fsynced and renamed to
//! `blobs/<algorithm>/<first two hex>/<hex>`, and the directory is fsynced,
//! so a blob that was acknowledged survives a crash. Nothing is ever held
//! whole in memory beyond one write batch ([`WRITE_BATCH`]).
//!
//! The metadata (which repo holds which blob, upload sessions) lives in the
//! database; this crate holds bytes only. [`LocalBlobs`] keeps them on the
//! local disk (the default); [`S3Blobs`] in an S3-compatible bucket that
//! several replicas share.

use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use futures_util::{Stream, StreamExt as _};
use sha2::Digest as _;
use ward_core::registry::{Algorithm, Digest};

mod s3;
pub use s3::S3Blobs;

/// A stream of body bytes.
pub type ByteStream = Pin<Box<dyn Stream<Item = std::io::Result<Bytes>> + Send>>;

/// Bytes gathered before one write (and hash) on the writer thread.
pub const WRITE_BATCH: usize = 1024 * 1024;
/// Batches queued for the writer while more arrive.
const WRITE_QUEUE: usize = 2;
/// A batch's allocation: room for the chunk that crosses [`WRITE_BATCH`].
const BATCH_CAPACITY: usize = WRITE_BATCH + 512 * 1024;
/// Blobs up to this size are read in one piece; larger ones are streamed.
const READ_WHOLE: u64 = 4 * 1024 * 1024;
/// Chunk size when streaming a large blob.
const READ_CHUNK: usize = 1024 * 1024;

#[derive(Debug)]
pub enum BlobError {
    Io(std::io::Error),
    /// The upload is not at the offset the caller wrote at.
    Offset {
        at: u64,
    },
    /// The upload would exceed the size limit.
    TooLarge {
        limit: u64,
    },
    /// The bytes do not hash to the claimed digest.
    DigestMismatch {
        actual: String,
    },
    /// The upload's bytes are not here (another replica's disk, or removed).
    UnknownUpload,
}

impl From<std::io::Error> for BlobError {
    fn from(e: std::io::Error) -> Self {
        BlobError::Io(e)
    }
}

impl std::fmt::Display for BlobError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BlobError::Io(e) => write!(f, "blob storage: {e}"),
            BlobError::Offset { at } => write!(f, "the upload is at byte {at}"),
            BlobError::TooLarge { limit } => write!(f, "blobs are limited to {limit} bytes"),
            BlobError::DigestMismatch { actual } => write!(f, "the uploaded content has digest {actual}"),
            BlobError::UnknownUpload => f.write_str("the upload's data is gone"),
        }
    }
}

impl std::error::Error for BlobError {}

#[async_trait]
pub trait BlobStore: Send + Sync + 'static {
    /// Appends `body` to upload `id`, which must be `offset` bytes long
    /// (0 starts it). Returns the new length. Fails without growing the
    /// upload past `limit` bytes.
    async fn append(&self, id: &str, offset: u64, body: ByteStream, limit: u64) -> Result<u64, BlobError>;
    /// Verifies upload `id` (of `len` bytes) against `digest` and makes it
    /// that blob, durably. Returns its size. The upload is gone afterwards,
    /// whatever the outcome.
    async fn commit(&self, id: &str, len: u64, digest: &Digest) -> Result<u64, BlobError>;
    /// Discards upload `id` (no error if it is not there).
    async fn cancel(&self, id: &str) -> std::io::Result<()>;
    /// The blob's size, if it is stored.
    async fn size(&self, digest: &Digest) -> std::io::Result<Option<u64>>;
    /// The bytes `[start, end)` of a blob, if it is stored.
    async fn read(&self, digest: &Digest, start: u64, end: u64) -> std::io::Result<Option<ByteStream>>;
    /// Removes a blob unless it was written within `grace` (a push that
    /// races garbage collection keeps its bytes). Whether it was removed.
    async fn remove(&self, digest: &Digest, grace: Duration) -> std::io::Result<bool>;
}

/// Blobs on the local disk under one directory (the default).
pub struct LocalBlobs {
    root: PathBuf,
    /// Running sha256 state of uploads in progress on this server, by id,
    /// with the length it covers; a missing or stale state means re-hashing
    /// the file at commit.
    hashers: moka::sync::Cache<String, Arc<std::sync::Mutex<(u64, sha2::Sha256)>>>,
}

fn hex_of(algo: Algorithm, bytes: &[u8]) -> String {
    format!("{}:{}", algo.name(), hex::encode(bytes))
}

/// Whether an upload id is safe as a file name.
fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

fn invalid_id() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, "invalid upload id")
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, BlobError> + Send + 'static,
) -> Result<T, BlobError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| BlobError::Io(std::io::Error::other(e)))?
}

impl LocalBlobs {
    /// Blobs under `root` (created if needed).
    pub fn open(root: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(root.join("uploads"))?;
        std::fs::create_dir_all(root.join("blobs"))?;
        Ok(Self {
            root: root.to_path_buf(),
            hashers: moka::sync::Cache::builder()
                .max_capacity(10_000)
                .time_to_idle(Duration::from_secs(3600))
                .build(),
        })
    }

    fn upload_path(&self, id: &str) -> std::io::Result<PathBuf> {
        if valid_id(id) {
            Ok(self.root.join("uploads").join(id))
        } else {
            Err(invalid_id())
        }
    }

    /// The file a blob is stored in.
    pub fn blob_path(&self, d: &Digest) -> PathBuf {
        let hex = d.hex();
        self.root
            .join("blobs")
            .join(d.algorithm().name())
            .join(&hex[..2])
            .join(hex)
    }

    /// Every blob stored, with its file (a walk of the store; blocking).
    /// Files that are not named as a blob would be are skipped.
    pub fn stored(&self) -> std::io::Result<Vec<(Digest, PathBuf)>> {
        let mut out = Vec::new();
        let blobs = self.root.join("blobs");
        for algo in std::fs::read_dir(&blobs)? {
            let algo = algo?;
            let Some(algo_name) = algo.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            for prefix in std::fs::read_dir(algo.path())? {
                let prefix = prefix?;
                if !prefix.file_type()?.is_dir() {
                    continue;
                }
                for file in std::fs::read_dir(prefix.path())? {
                    let file = file?;
                    let name = file.file_name();
                    let Some(hex) = name.to_str() else { continue };
                    if let Some(d) = Digest::parse(&format!("{algo_name}:{hex}")) {
                        out.push((d, file.path()));
                    }
                }
            }
        }
        out.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        Ok(out)
    }

    /// Whether the file at `path` holds exactly the bytes of `d` (blocking).
    pub fn verify_file(path: &Path, d: &Digest) -> std::io::Result<bool> {
        Ok(Self::hash_file(path, d.algorithm())? == d.as_str())
    }

    /// Digest of a whole file with `algo`.
    fn hash_file(path: &Path, algo: Algorithm) -> std::io::Result<String> {
        let mut f = std::fs::File::open(path)?;
        let mut buf = vec![0u8; READ_CHUNK];
        let mut h256 = sha2::Sha256::new();
        let mut h512 = sha2::Sha512::new();
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                break;
            }
            match algo {
                Algorithm::Sha256 => h256.update(&buf[..n]),
                Algorithm::Sha512 => h512.update(&buf[..n]),
            }
        }
        Ok(match algo {
            Algorithm::Sha256 => hex_of(algo, &h256.finalize()),
            Algorithm::Sha512 => hex_of(algo, &h512.finalize()),
        })
    }
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

#[async_trait]
impl BlobStore for LocalBlobs {
    async fn append(&self, id: &str, offset: u64, mut body: ByteStream, limit: u64) -> Result<u64, BlobError> {
        let path = self.upload_path(id)?;
        let state = if offset == 0 {
            let s = Arc::new(std::sync::Mutex::new((0, sha2::Sha256::new())));
            self.hashers.insert(id.to_owned(), s.clone());
            Some(s)
        } else {
            self.hashers.get(id)
        };
        let file = blocking(move || {
            let mut f = std::fs::OpenOptions::new()
                .create(offset == 0)
                .truncate(false)
                .read(true)
                .write(true)
                .open(&path)
                .map_err(|e| match e.kind() {
                    std::io::ErrorKind::NotFound => BlobError::UnknownUpload,
                    _ => BlobError::Io(e),
                })?;
            let len = f.metadata()?.len();
            if len < offset {
                return Err(BlobError::UnknownUpload);
            }
            // Bytes past `offset` were written by a request that never
            // recorded them (it failed or the server stopped): drop them.
            if len > offset {
                f.set_len(offset)?;
            }
            f.seek(SeekFrom::Start(offset))?;
            Ok(f)
        })
        .await?;
        // The running hash only helps if it covers exactly the bytes before `offset`.
        let state = state.filter(|s| s.lock().map(|g| g.0 == offset).unwrap_or(false));
        // A writer thread hashes and writes batches while the next one
        // arrives from the network (at most WRITE_QUEUE batches in memory).
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Bytes>(WRITE_QUEUE);
        let writer_state = state.clone();
        let writer = tokio::task::spawn_blocking(move || -> Result<(), BlobError> {
            let mut file = file;
            while let Some(batch) = rx.blocking_recv() {
                file.write_all(&batch)?;
                if let Some(st) = &writer_state
                    && let Ok(mut g) = st.lock()
                {
                    g.0 += batch.len() as u64;
                    g.1.update(&batch);
                }
            }
            Ok(())
        });
        let mut total = offset;
        // Each batch is allocated once at its full size (no doubling as it fills).
        let mut buf = BytesMut::with_capacity(BATCH_CAPACITY);
        let mut failure = None;
        loop {
            let next = body.next().await;
            let done = next.is_none();
            match next {
                Some(Ok(chunk)) => {
                    total += chunk.len() as u64;
                    if total > limit {
                        failure = Some(BlobError::TooLarge { limit });
                        break;
                    }
                    buf.extend_from_slice(&chunk);
                }
                Some(Err(e)) => {
                    failure = Some(BlobError::Io(e));
                    break;
                }
                None => {}
            }
            if buf.len() >= WRITE_BATCH || (done && !buf.is_empty()) {
                let batch = std::mem::replace(&mut buf, BytesMut::with_capacity(BATCH_CAPACITY)).freeze();
                if tx.send(batch).await.is_err() {
                    // The writer stopped: its error is reported below.
                    break;
                }
            }

            if done {
                break;
            }
        }
        drop(tx);
        let written = writer.await.map_err(|e| BlobError::Io(std::io::Error::other(e)))?;
        if let Some(f) = failure {
            self.hashers.invalidate(id);
            return Err(f);
        }
        written?;
        if state.is_none() {
            self.hashers.invalidate(id);
        }
        Ok(total)
    }

    async fn commit(&self, id: &str, len: u64, digest: &Digest) -> Result<u64, BlobError> {
        let path = self.upload_path(id)?;
        let target = self.blob_path(digest);
        let running = self
            .hashers
            .remove(id)
            .filter(|_| digest.algorithm() == Algorithm::Sha256);
        let want = digest.clone();
        blocking(move || {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|e| match e.kind() {
                    std::io::ErrorKind::NotFound => BlobError::UnknownUpload,
                    _ => BlobError::Io(e),
                })?;
            let size = f.metadata()?.len();
            if size > len {
                f.set_len(len)?;
            } else if size < len {
                return Err(BlobError::UnknownUpload);
            }
            let from_state = running.and_then(|s| {
                let g = s.lock().ok()?;
                (g.0 == len).then(|| hex_of(Algorithm::Sha256, &g.1.clone().finalize()))
            });
            let actual = match from_state {
                Some(d) => d,
                None => LocalBlobs::hash_file(&path, want.algorithm())?,
            };
            if actual != want.as_str() {
                let _ = std::fs::remove_file(&path);
                return Err(BlobError::DigestMismatch { actual });
            }
            // Both outcomes below cost the same disk work (an fsync of the
            // upload, one of the directory): a fast answer for content that
            // is already stored would tell a client that some other tenant
            // holds it.
            f.sync_all()?;
            drop(f);
            let dir = target.parent().ok_or_else(|| BlobError::Io(invalid_id()))?;
            std::fs::create_dir_all(dir)?;
            if target.exists() {
                // Verified when it was written: keep it, never replace it
                // (other repos serve it), but mark it fresh, so a garbage
                // collection racing this push keeps it.
                if let Ok(existing) = std::fs::OpenOptions::new().write(true).open(&target) {
                    let _ = existing.set_modified(SystemTime::now());
                }
                std::fs::remove_file(&path)?;
            } else {
                std::fs::rename(&path, &target)?;
            }
            sync_dir(dir)?;
            Ok(len)
        })
        .await
    }

    async fn cancel(&self, id: &str) -> std::io::Result<()> {
        let path = self.upload_path(id)?;
        self.hashers.invalidate(id);
        match tokio::fs::remove_file(path).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    async fn size(&self, digest: &Digest) -> std::io::Result<Option<u64>> {
        match tokio::fs::metadata(self.blob_path(digest)).await {
            Ok(m) => Ok(Some(m.len())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn read(&self, digest: &Digest, start: u64, end: u64) -> std::io::Result<Option<ByteStream>> {
        let path = self.blob_path(digest);
        let len = end.saturating_sub(start);
        if len <= READ_WHOLE {
            let bytes = tokio::task::spawn_blocking(move || -> std::io::Result<Option<Bytes>> {
                let mut f = match std::fs::File::open(&path) {
                    Ok(f) => f,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                    Err(e) => return Err(e),
                };
                f.seek(SeekFrom::Start(start))?;
                let mut buf = vec![0u8; len as usize];
                f.read_exact(&mut buf)?;
                Ok(Some(Bytes::from(buf)))
            })
            .await
            .map_err(std::io::Error::other)??;
            return Ok(bytes.map(|b| Box::pin(futures_util::stream::once(async move { Ok(b) })) as ByteStream));
        }
        let mut f = match tokio::fs::File::open(&path).await {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        tokio::io::AsyncSeekExt::seek(&mut f, SeekFrom::Start(start)).await?;
        let limited = tokio::io::AsyncReadExt::take(f, len);
        Ok(Some(Box::pin(tokio_util::io::ReaderStream::with_capacity(
            limited, READ_CHUNK,
        ))))
    }

    async fn remove(&self, digest: &Digest, grace: Duration) -> std::io::Result<bool> {
        let path = self.blob_path(digest);
        tokio::task::spawn_blocking(move || {
            let m = match std::fs::metadata(&path) {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
                Err(e) => return Err(e),
            };
            let fresh = m
                .modified()
                .ok()
                .and_then(|t| SystemTime::now().duration_since(t).ok())
                .is_none_or(|age| age < grace);
            if fresh {
                return Ok(false);
            }
            std::fs::remove_file(&path)?;
            Ok(true)
        })
        .await
        .map_err(std::io::Error::other)?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(parts: Vec<&'static [u8]>) -> ByteStream {
        Box::pin(futures_util::stream::iter(
            parts.into_iter().map(|p| Ok(Bytes::from_static(p))),
        ))
    }

    async fn collect(s: ByteStream) -> Vec<u8> {
        s.map(|c| c.unwrap().to_vec()).concat().await
    }

    #[tokio::test]
    async fn chunked_upload_commits_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let b = LocalBlobs::open(dir.path()).unwrap();
        let n = b.append("a1", 0, stream(vec![b"hello ", b"wor"]), 100).await.unwrap();
        assert_eq!(n, 9);
        assert!(matches!(b.append("a1", 3, stream(vec![b"x"]), 100).await, Ok(4)));
        // The upload was cut back to 3 bytes and the running hash dropped:
        // rewrite from there and the commit re-hashes the file.
        let n = b.append("a1", 4, stream(vec![b"lo world"]), 100).await.unwrap();
        assert_eq!(n, 12);
        let content = b"helxlo world";
        let d = Digest::sha256_of(content);
        assert_eq!(b.commit("a1", 12, &d).await.unwrap(), 12);
        assert_eq!(b.size(&d).await.unwrap(), Some(12));
        assert_eq!(collect(b.read(&d, 0, 12).await.unwrap().unwrap()).await, content);
        assert_eq!(collect(b.read(&d, 3, 5).await.unwrap().unwrap()).await, b"xl");
        assert!(matches!(b.commit("a1", 12, &d).await, Err(BlobError::UnknownUpload)));
    }

    #[tokio::test]
    async fn wrong_digest_and_limits() {
        let dir = tempfile::tempdir().unwrap();
        let b = LocalBlobs::open(dir.path()).unwrap();
        b.append("a2", 0, stream(vec![b"abc"]), 100).await.unwrap();
        let wrong = Digest::sha256_of(b"abd");
        assert!(matches!(
            b.commit("a2", 3, &wrong).await,
            Err(BlobError::DigestMismatch { .. })
        ));
        assert_eq!(b.size(&wrong).await.unwrap(), None);
        assert!(matches!(
            b.append("a3", 0, stream(vec![b"abcdef"]), 4).await,
            Err(BlobError::TooLarge { limit: 4 })
        ));
        assert!(b.append("../x", 0, stream(vec![b"a"]), 4).await.is_err());
        assert!(matches!(
            b.append("a4", 5, stream(vec![b"a"]), 10).await,
            Err(BlobError::UnknownUpload)
        ));
    }

    /// Content already stored takes the same path to the client as new
    /// content (an fsync of the upload, one of the directory), so how long a
    /// commit takes does not tell whether some other tenant holds it; the
    /// stored blob is kept and marked fresh for garbage collection.
    #[tokio::test]
    async fn committing_stored_content_keeps_the_blob_and_marks_it_fresh() {
        let dir = tempfile::tempdir().unwrap();
        let b = LocalBlobs::open(dir.path()).unwrap();
        let d = Digest::sha256_of(b"shared layer");
        b.append("f1", 0, stream(vec![b"shared layer"]), 100).await.unwrap();
        b.commit("f1", 12, &d).await.unwrap();
        let path = b.blob_path(&d);
        let old = SystemTime::now() - Duration::from_secs(3600);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(old)
            .unwrap();
        b.append("f2", 0, stream(vec![b"shared layer"]), 100).await.unwrap();
        assert_eq!(b.commit("f2", 12, &d).await.unwrap(), 12);
        let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
        assert!(modified > old + Duration::from_secs(1800), "marked fresh");
        assert_eq!(
            collect(b.read(&d, 0, 12).await.unwrap().unwrap()).await,
            b"shared layer"
        );
        assert_eq!(std::fs::read_dir(dir.path().join("uploads")).unwrap().count(), 0);
        // A fresh blob survives a collection with a grace period.
        assert!(!b.remove(&d, Duration::from_secs(60)).await.unwrap());
    }

    #[tokio::test]
    async fn sha512_and_gc_grace() {
        let dir = tempfile::tempdir().unwrap();
        let b = LocalBlobs::open(dir.path()).unwrap();
        b.append("a5", 0, stream(vec![b"abc"]), 100).await.unwrap();
        let d = Digest::parse(&format!("sha512:{}", hex::encode(sha2::Sha512::digest(b"abc")))).unwrap();
        b.commit("a5", 3, &d).await.unwrap();
        assert!(!b.remove(&d, Duration::from_secs(60)).await.unwrap());
        assert!(b.remove(&d, Duration::ZERO).await.unwrap());
        assert_eq!(b.size(&d).await.unwrap(), None);
    }
}
