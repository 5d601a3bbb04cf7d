//! A manifest's inventory: the packages it holds and where each came from.
//! An SBOM attached to the image wins (a referrer of an SBOM or DSSE
//! artifact type, or the `sha256-<hex>.sbom` / `.att` tag); without one the
//! layers are read (bottom to top, whiteouts applied). An index gets the
//! union of its images'. Untrusted bytes are parsed by `ward-sbom` under its
//! bounds on a blocking thread; a bad document or layer gives the manifest
//! an inventory error the API shows, never a failed job.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use ward_core::registry::Digest;
use ward_core::{Error, Result};
use ward_sbom::{Inventory, LayerScanner, Limits};
use ward_store::vulns::InventoryRecord;

use super::{INVENTORY, REPORT, key};
use crate::ward::Ward;

/// Artifact types of SBOM referrers.
pub const SBOM_TYPES: &[&str] = &[
    "application/spdx+json",
    "application/vnd.cyclonedx+json",
    "application/vnd.dsse.envelope.v1+json",
    "application/vnd.in-toto+json",
];
/// Image config media types: a manifest with another config is an artifact.
const IMAGE_CONFIGS: &[&str] = &[
    "application/vnd.oci.image.config.v1+json",
    "application/vnd.docker.container.image.v1+json",
];
/// Most layers read from one image, and most images of one index.
pub const MAX_LAYERS: usize = 256;
pub const MAX_CHILDREN: usize = 64;
/// Most SBOM candidates (referrers and layers) tried for one image.
const MAX_CANDIDATES: usize = 16;

/// What the inventories table keeps as `document`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Stored {
    pub inventory: Inventory,
    /// The SBOM blob (a layer of `sbom_digest`'s manifest), when one was read.
    pub sbom_blob: Option<String>,
    pub sbom_media_type: Option<String>,
}

/// `sha256-<hex>.sbom` / `.att` → `sha256:<hex>`.
pub fn tagged_subject(tag: &str) -> Option<String> {
    let rest = tag.strip_prefix("sha256-")?;
    let hex = rest.strip_suffix(".sbom").or_else(|| rest.strip_suffix(".att"))?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()))
        .then(|| format!("sha256:{hex}"))
}

fn descriptors(m: &Value, key: &str) -> Vec<(String, String, u64)> {
    m.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|d| {
            Some((
                d.get("digest")?.as_str()?.to_owned(),
                d.get("mediaType").and_then(Value::as_str).unwrap_or("").to_owned(),
                d.get("size")?.as_u64()?,
            ))
        })
        .collect()
}

/// Text safe to store and show: control characters (a NUL would fail a
/// PostgreSQL write) become U+FFFD, and it is at most 4 KiB.
pub(crate) fn sanitize(s: &str) -> String {
    let mut out: String = s.chars().map(|c| if c.is_control() { '\u{fffd}' } else { c }).collect();
    if out.len() > 4096 {
        let mut end = 4096;
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
    }
    out
}

/// Whether a package's fields are safe text (the rest are skipped).
fn clean(p: &ward_sbom::Package) -> bool {
    [&p.name, &p.version, &p.purl]
        .iter()
        .all(|f| !f.chars().any(char::is_control))
        && p.license.as_deref().is_none_or(|l| !l.chars().any(char::is_control))
        && p.location.as_deref().is_none_or(|l| !l.chars().any(char::is_control))
}

pub(crate) fn is_image(m: &Value) -> bool {
    m.get("subject").is_none()
        && m.get("config")
            .and_then(|c| c.get("mediaType"))
            .and_then(Value::as_str)
            .is_some_and(|t| IMAGE_CONFIGS.contains(&t))
}

impl Ward {
    /// The declared size of a blob the repo holds (linked by a push): a
    /// manifest may name any digest (a foreign layer is never uploaded), and
    /// Ward reads only what the repo's own pushes stored.
    pub(crate) async fn repo_blob_size(&self, repo: &str, digest: &str, declared: u64) -> Result<Option<u64>> {
        let stored = self.store.repo_blob(repo, digest).await?;
        Ok(stored
            .filter(|s| u64::try_from(*s).ok() == Some(declared))
            .map(|_| declared))
    }

    async fn blob_bytes(&self, digest: &str, size: u64, max: u64) -> Result<Option<Vec<u8>>> {
        if size > max {
            return Ok(None);
        }
        let Some(d) = Digest::parse(digest) else {
            return Ok(None);
        };
        let Some(stream) = self.blobs.read(&d, 0, size).await.map_err(Error::internal)? else {
            return Ok(None);
        };
        use futures_util::StreamExt as _;
        let mut out = Vec::with_capacity(size as usize);
        let mut stream = stream;
        while let Some(chunk) = stream.next().await {
            out.extend_from_slice(&chunk.map_err(Error::internal)?);
            if out.len() as u64 > max {
                return Ok(None);
            }
        }
        Ok(Some(out))
    }

    /// The SBOM attached to the image, parsed: `(manifest, blob, media
    /// type, result)` of the newest candidate that parses, else of the
    /// newest that failed.
    async fn attached_sbom(
        &self,
        repo: &str,
        digest: &str,
        limits: &Limits,
    ) -> Result<Option<(String, String, String, std::result::Result<Inventory, String>)>> {
        let mut candidates: Vec<(i64, String)> = self
            .store
            .referrers(repo, digest, 1000)
            .await?
            .into_iter()
            .filter(|m| SBOM_TYPES.contains(&m.artifact_type.as_str()))
            .map(|m| (m.create_time, m.digest))
            .collect();
        if let Some(hex) = digest.strip_prefix("sha256:") {
            for suffix in ["sbom", "att"] {
                if let Some(t) = self.store.find_tag(repo, &format!("sha256-{hex}.{suffix}")).await?
                    && !t.digest.is_empty()
                {
                    candidates.push((t.update_time, t.digest));
                }
            }
        }
        candidates.sort_by(|a, b| b.cmp(a));
        candidates.dedup_by(|a, b| a.1 == b.1);
        let mut failed = None;
        let mut tried = 0;
        for (_, m) in candidates {
            let Some(rec) = self.store.get_manifest(repo, &m).await? else {
                continue;
            };
            let v: Value = serde_json::from_slice(&rec.content).unwrap_or(Value::Null);
            let envelope = SBOM_TYPES[2..].contains(&rec.artifact_type.as_str());
            for (blob, media_type, size) in descriptors(&v, "layers") {
                tried += 1;
                if tried > MAX_CANDIDATES {
                    break;
                }
                if self.repo_blob_size(repo, &blob, size).await?.is_none() {
                    continue;
                }
                let Some(bytes) = self.blob_bytes(&blob, size, limits.max_document_bytes as u64).await? else {
                    failed.get_or_insert((
                        m.clone(),
                        blob.clone(),
                        media_type.clone(),
                        Err(format!(
                            "the SBOM {blob} is {size} bytes, over the {}-byte bound",
                            limits.max_document_bytes
                        )),
                    ));
                    continue;
                };
                let (subject, l) = (digest.to_owned(), *limits);
                let parsed = self
                    .cpu(move || ward_sbom::parse_sbom(&bytes, Some(&subject), &l))
                    .await?;
                match parsed {
                    Ok(inv) => return Ok(Some((m, blob, media_type, Ok(inv)))),
                    // An attestation that is not an SBOM (provenance), or
                    // is about another image, says nothing of this one's
                    // packages: the layers are read instead.
                    Err(ward_sbom::Error::UnsupportedPredicate { .. } | ward_sbom::Error::SubjectMismatch { .. })
                        if envelope => {}
                    Err(e) => {
                        failed.get_or_insert((m.clone(), blob, media_type, Err(sanitize(&e.to_string()))));
                    }
                }
            }
        }
        Ok(failed)
    }

    /// Reads the packages in the image's layers.
    async fn scan_layers(
        &self,
        repo: &str,
        layers: Vec<(String, String, u64)>,
        limits: Limits,
    ) -> Result<Result<Inventory, String>> {
        if layers.len() > MAX_LAYERS {
            return Ok(Err(format!(
                "the image has {} layers, over the {MAX_LAYERS} read",
                layers.len()
            )));
        }
        // A layer listed twice is read once; only layers the repo holds are read.
        let mut seen = std::collections::HashSet::new();
        let mut checked = Vec::with_capacity(layers.len());
        for (digest, media_type, size) in layers {
            if !seen.insert(digest.clone()) {
                continue;
            }
            if self.repo_blob_size(repo, &digest, size).await?.is_none() {
                return Ok(Err(format!(
                    "layer {digest} is not stored in this repo (foreign layers are not read)"
                )));
            }
            checked.push((digest, media_type, size));
        }
        let layers = checked;
        let blobs = self.blobs.clone();
        let rt = tokio::runtime::Handle::current();
        self.cpu(move || {
            let mut scanner = LayerScanner::new(limits);
            for (digest, media_type, size) in layers {
                let Some(d) = Digest::parse(&digest) else {
                    return Err(format!("layer {digest} has no valid digest"));
                };
                let stream = match rt.block_on(blobs.read(&d, 0, size)) {
                    Ok(Some(s)) => s,
                    Ok(None) => return Err(format!("layer {digest} is not stored")),
                    Err(e) => return Err(format!("reading layer {digest}: {e}")),
                };
                let reader = tokio_util::io::SyncIoBridge::new_with_handle(
                    tokio_util::io::StreamReader::new(stream),
                    rt.clone(),
                );
                scanner
                    .add_layer(reader, &media_type)
                    .map_err(|e| format!("layer {digest}: {e}"))?;
            }
            scanner.finish().map_err(|e| e.to_string())
        })
        .await
        .map(|r| r.map_err(|e| sanitize(&e)))
    }

    /// Builds and stores a manifest's inventory, then queues its report.
    pub(crate) async fn build_inventory(self: &Arc<Self>, repo: &str, digest: &str) -> Result<()> {
        let start = std::time::Instant::now();
        let Some(m) = self.store.get_manifest(repo, digest).await? else {
            return Ok(());
        };
        let v: Value = serde_json::from_slice(&m.content).unwrap_or(Value::Null);
        let limits = self.vulns.limits;
        let now = self.clock.now_millis();
        let mut record = InventoryRecord {
            repo_uid: repo.to_owned(),
            digest: digest.to_owned(),
            status: "ready".into(),
            error: String::new(),
            source: String::new(),
            sbom_digest: String::new(),
            document: String::new(),
            update_time: now,
        };
        let mut stored = Stored::default();
        if v.get("manifests").is_some() {
            record.source = "index".into();
            let mut waiting = Vec::new();
            let mut errors = Vec::new();
            let children = descriptors(&v, "manifests");
            if children.len() > MAX_CHILDREN {
                errors.push(format!(
                    "the index has {} images, over the {MAX_CHILDREN} read",
                    children.len()
                ));
            }
            for (child, _, _) in children.into_iter().take(MAX_CHILDREN) {
                match self.store.get_inventory(repo, &child).await? {
                    Some(inv) if inv.status == "ready" => {
                        let s: Stored = serde_json::from_str(&inv.document).unwrap_or_default();
                        stored.inventory.packages.extend(s.inventory.packages);
                        stored.inventory.skipped += s.inventory.skipped;
                    }
                    Some(inv) => errors.push(format!("{child}: {}", inv.error)),
                    None if self.store.get_manifest(repo, &child).await?.is_none() => {
                        errors.push(format!("{child}: the index's image is gone"));
                    }
                    None => waiting.push((INVENTORY.to_owned(), key(repo, &child))),
                }
            }
            if !waiting.is_empty() {
                // Each image, once read, queues this index again.
                self.enqueue(waiting).await;
                return Ok(());
            }
            stored.inventory.packages.sort_by(|a, b| a.purl.cmp(&b.purl));
            stored.inventory.packages.dedup_by(|a, b| a.purl == b.purl);
            if stored.inventory.packages.len() > limits.max_components {
                errors.push(format!(
                    "the index's images hold {} packages, over the {} bound",
                    stored.inventory.packages.len(),
                    limits.max_components
                ));
                stored.inventory.packages.clear();
            }
            if !errors.is_empty() {
                record.status = "error".into();
                record.error = errors.join("; ");
            }
        } else if !is_image(&v) {
            record.source = "none".into();
        } else if let Some((manifest, blob, media_type, parsed)) = self.attached_sbom(repo, digest, &limits).await? {
            record.source = "sbom".into();
            record.sbom_digest = manifest;
            stored.sbom_blob = Some(blob);
            stored.sbom_media_type = Some(media_type);
            match parsed {
                Ok(inv) => stored.inventory = inv,
                Err(e) => {
                    record.status = "error".into();
                    record.error = e;
                }
            }
        } else {
            record.source = "layers".into();
            match self.scan_layers(repo, descriptors(&v, "layers"), limits).await? {
                Ok(inv) => stored.inventory = inv,
                Err(e) => {
                    record.status = "error".into();
                    record.error = e;
                }
            }
        }
        let before = stored.inventory.packages.len();
        stored.inventory.packages.retain(clean);
        stored.inventory.skipped += (before - stored.inventory.packages.len()) as u64;
        record.error = sanitize(&record.error);
        record.document = serde_json::to_string(&stored).map_err(Error::internal)?;
        let mut names: Vec<String> = stored
            .inventory
            .packages
            .iter()
            .flat_map(super::matching::lookup_names)
            .collect();
        names.sort();
        names.dedup();
        self.store.put_inventory(&record, &names).await?;
        tracing::info!(
            target: "ward::vulns",
            repo,
            digest,
            source = %record.source,
            status = %record.status,
            packages = stored.inventory.packages.len(),
            ms = start.elapsed().as_millis() as u64,
            "inventory read"
        );
        let mut next: Vec<(String, String)> = self
            .store
            .parents_of(repo, digest)
            .await?
            .into_iter()
            .map(|p| (INVENTORY.to_owned(), key(repo, &p)))
            .collect();
        if record.source != "none" {
            next.push((REPORT.to_owned(), key(repo, digest)));
        }
        self.enqueue(next).await;
        Ok(())
    }
}
