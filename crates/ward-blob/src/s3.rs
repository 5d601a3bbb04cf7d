//! Blobs in an S3-compatible bucket, shared by every replica.
//!
//! Objects are immutable, so an upload session is a series of part objects,
//! `uploads/<id>/<start offset, 20 digits>`, one per request that appended
//! to it (a retried request at the same offset replaces its part). Any
//! replica can append to or finish any session: the database says how long
//! it is, and the parts say the rest. Finishing reads the parts once to
//! verify the digest, then writes the blob to `blobs/<algorithm>/<hex>` (a
//! server-side copy when there is a single part) and deletes the parts, so a
//! blob object only ever exists with the content its name promises.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::{StreamExt as _, TryStreamExt as _};
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, WriteMultipart};
use sha2::Digest as _;
use ward_core::registry::{Algorithm, Digest};

use crate::{BlobError, BlobStore, ByteStream, valid_id};

/// object_store's own reqwest client, with each request carrying the W3C
/// `traceparent` of the work in progress (when traces are exported), so a
/// bucket's request logs join the trace of the push or pull that caused
/// them. The header is added after signing and is not signed; S3 takes
/// such headers as they are.
#[derive(Debug)]
struct Traced;

impl object_store::client::HttpConnector for Traced {
    fn connect(&self, options: &object_store::ClientOptions) -> object_store::Result<object_store::client::HttpClient> {
        let inner = object_store::client::ReqwestConnector::default().connect(options)?;
        Ok(object_store::client::HttpClient::new(TracedClient(inner)))
    }
}

#[derive(Debug)]
struct TracedClient(object_store::client::HttpClient);

#[async_trait]
impl object_store::client::HttpService for TracedClient {
    async fn call(
        &self,
        mut req: object_store::client::HttpRequest,
    ) -> Result<object_store::client::HttpResponse, object_store::client::HttpError> {
        if let Some(v) = ward_core::traceparent::current().and_then(|tp| tp.parse().ok()) {
            req.headers_mut().insert(ward_core::traceparent::HEADER, v);
        }
        self.0.execute(req).await
    }
}

/// Multipart chunk size (S3's minimum part size is 5 MiB).
const PART: usize = 8 * 1024 * 1024;

pub struct S3Blobs {
    store: Arc<dyn ObjectStore>,
}

fn io(e: object_store::Error) -> std::io::Error {
    match e {
        object_store::Error::NotFound { .. } => std::io::Error::new(std::io::ErrorKind::NotFound, e.to_string()),
        e => std::io::Error::other(e.to_string()),
    }
}

impl S3Blobs {
    /// `s3://bucket?endpoint=http://host:port&region=…&allow_http=true`;
    /// credentials come from the usual `AWS_*` environment variables.
    pub fn open(url: &str) -> std::io::Result<Self> {
        let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("--blob-store {url}: {m}"));
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| bad("expected s3://bucket[?endpoint=…]"))?;
        let (bucket, query) = rest.split_once('?').unwrap_or((rest, ""));
        if bucket.is_empty() || bucket.contains('/') {
            return Err(bad("name a bucket: s3://bucket"));
        }
        let mut b = object_store::aws::AmazonS3Builder::from_env().with_bucket_name(bucket);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            b = match k {
                "endpoint" => b.with_endpoint(v).with_virtual_hosted_style_request(false),
                "region" => b.with_region(v),
                "allow_http" => b.with_allow_http(v == "true"),
                // Unsigned requests: for buckets that need no credentials
                // (and local test servers).
                "skip_signature" => b.with_skip_signature(v == "true"),
                _ => return Err(bad(&format!("unknown option {k}"))),
            };
        }
        if query.contains("endpoint=http://") && !query.contains("allow_http=") {
            b = b.with_allow_http(true);
        }
        let store = b.with_http_connector(Traced).build().map_err(|e| bad(&e.to_string()))?;
        Ok(Self { store: Arc::new(store) })
    }

    fn blob_path(d: &Digest) -> Path {
        Path::from(format!("blobs/{}/{}", d.algorithm().name(), d.hex()))
    }

    fn part_path(id: &str, start: u64) -> Path {
        Path::from(format!("uploads/{id}/{start:020}"))
    }

    /// The parts of upload `id` that make up its first `len` bytes, in order.
    async fn chain(&self, id: &str, len: u64) -> Result<Vec<Path>, BlobError> {
        let prefix = Path::from(format!("uploads/{id}"));
        let mut parts: Vec<(u64, u64, Path)> = self
            .store
            .list(Some(&prefix))
            .map_ok(|m| {
                let start = m
                    .location
                    .filename()
                    .and_then(|f| f.parse::<u64>().ok())
                    .unwrap_or(u64::MAX);
                (start, m.size, m.location)
            })
            .try_collect()
            .await
            .map_err(|e| BlobError::Io(io(e)))?;
        parts.sort_by_key(|p| p.0);
        let mut chain = Vec::new();
        let mut pos = 0;
        for (start, size, path) in parts {
            if pos == len {
                break;
            }
            if start != pos {
                return Err(BlobError::UnknownUpload);
            }
            pos += size;
            chain.push(path);
        }
        if pos != len {
            return Err(BlobError::UnknownUpload);
        }
        Ok(chain)
    }

    async fn delete_parts(&self, id: &str) -> std::io::Result<()> {
        let prefix = Path::from(format!("uploads/{id}"));
        let paths: Vec<Path> = self
            .store
            .list(Some(&prefix))
            .map_ok(|m| m.location)
            .try_collect()
            .await
            .map_err(io)?;
        for p in paths {
            match self.store.delete(&p).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(io(e)),
            }
        }
        Ok(())
    }

    async fn stream_of(&self, path: &Path) -> std::io::Result<ByteStream> {
        let r = self.store.get(path).await.map_err(io)?;
        Ok(Box::pin(r.into_stream().map_err(io)))
    }
}

#[async_trait]
impl BlobStore for S3Blobs {
    async fn append(&self, id: &str, offset: u64, mut body: ByteStream, limit: u64) -> Result<u64, BlobError> {
        if !valid_id(id) {
            return Err(BlobError::Io(crate::invalid_id()));
        }
        if offset > 0 {
            // The bytes before `offset` must all be there.
            self.chain(id, offset).await?;
        }
        let upload = self
            .store
            .put_multipart(&Self::part_path(id, offset))
            .await
            .map_err(|e| BlobError::Io(io(e)))?;
        let mut w = WriteMultipart::new_with_chunk_size(upload, PART);
        let mut total = offset;
        while let Some(chunk) = body.next().await {
            let chunk = match chunk {
                Ok(c) => c,
                Err(e) => {
                    let _ = w.abort().await;
                    return Err(BlobError::Io(e));
                }
            };
            total += chunk.len() as u64;
            if total > limit {
                let _ = w.abort().await;
                return Err(BlobError::TooLarge { limit });
            }
            w.wait_for_capacity(2).await.map_err(|e| BlobError::Io(io(e)))?;
            w.put(chunk);
        }
        w.finish().await.map_err(|e| BlobError::Io(io(e)))?;
        Ok(total)
    }

    async fn commit(&self, id: &str, len: u64, digest: &Digest) -> Result<u64, BlobError> {
        if !valid_id(id) {
            return Err(BlobError::Io(crate::invalid_id()));
        }
        let result = async {
            let chain = self.chain(id, len).await?;
            let mut h256 = sha2::Sha256::new();
            let mut h512 = sha2::Sha512::new();
            for p in &chain {
                let mut s = self.stream_of(p).await?;
                while let Some(c) = s.next().await {
                    let c = c?;
                    match digest.algorithm() {
                        Algorithm::Sha256 => h256.update(&c),
                        Algorithm::Sha512 => h512.update(&c),
                    }
                }
            }
            let actual = match digest.algorithm() {
                Algorithm::Sha256 => format!("sha256:{}", hex::encode(h256.finalize())),
                Algorithm::Sha512 => format!("sha512:{}", hex::encode(h512.finalize())),
            };
            if actual != digest.as_str() {
                return Err(BlobError::DigestMismatch { actual });
            }
            let target = Self::blob_path(digest);
            if let [single] = chain.as_slice() {
                self.store
                    .copy(single, &target)
                    .await
                    .map_err(|e| BlobError::Io(io(e)))?;
            } else {
                let upload = self
                    .store
                    .put_multipart(&target)
                    .await
                    .map_err(|e| BlobError::Io(io(e)))?;
                let mut w = WriteMultipart::new_with_chunk_size(upload, PART);
                for p in &chain {
                    let mut s = self.stream_of(p).await?;
                    while let Some(c) = s.next().await {
                        let c: Bytes = c?;
                        w.wait_for_capacity(2).await.map_err(|e| BlobError::Io(io(e)))?;
                        w.put(c);
                    }
                }
                w.finish().await.map_err(|e| BlobError::Io(io(e)))?;
            }
            Ok(len)
        }
        .await;
        let _ = self.delete_parts(id).await;
        result
    }

    async fn cancel(&self, id: &str) -> std::io::Result<()> {
        if !valid_id(id) {
            return Err(crate::invalid_id());
        }
        self.delete_parts(id).await
    }

    async fn size(&self, digest: &Digest) -> std::io::Result<Option<u64>> {
        match self.store.head(&Self::blob_path(digest)).await {
            Ok(m) => Ok(Some(m.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(io(e)),
        }
    }

    async fn read(&self, digest: &Digest, start: u64, end: u64) -> std::io::Result<Option<ByteStream>> {
        let opts = GetOptions {
            range: (end > start).then_some(GetRange::Bounded(start..end)),
            ..GetOptions::default()
        };
        match self.store.get_opts(&Self::blob_path(digest), opts).await {
            Ok(r) if end > start => Ok(Some(Box::pin(r.into_stream().map_err(io)))),
            // An empty range (a 0-byte blob): nothing to send.
            Ok(_) => Ok(Some(Box::pin(futures_util::stream::empty()))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(io(e)),
        }
    }

    async fn remove(&self, digest: &Digest, grace: Duration) -> std::io::Result<bool> {
        let path = Self::blob_path(digest);
        let meta = match self.store.head(&path).await {
            Ok(m) => m,
            Err(object_store::Error::NotFound { .. }) => return Ok(false),
            Err(e) => return Err(io(e)),
        };
        let age = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|n| n.as_secs() as i64)
            .unwrap_or(0)
            - meta.last_modified.timestamp();
        if age < grace.as_secs() as i64 {
            return Ok(false);
        }
        self.store.delete(&path).await.map_err(io)?;
        Ok(true)
    }
}
