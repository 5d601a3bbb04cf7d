//! Images: platforms and sizes, computed from the manifests a repo holds.

use serde_json::Value;
use ward_core::registry::Digest;
use ward_core::rpc;
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_proto::registry::v2::{Architectures, GetArchitecturesRequest, GetSizeRequest, Size};
use ward_store::registry::MANIFEST_TYPE;

use crate::authz::Caller;
use crate::ward::Ward;

/// Largest config blob read to learn a single image's platform.
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

fn manifest_json(content: &[u8]) -> Result<Value> {
    serde_json::from_slice(content).map_err(|_| Error::internal("a stored manifest does not parse"))
}

fn descriptors<'a>(m: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    m.get(key).and_then(Value::as_array).into_iter().flatten()
}

/// `os/architecture[/variant]` style name of an index entry: the architecture,
/// with the variant when there is one (`arm/v7`).
fn platform_arch(d: &Value) -> Option<String> {
    let p = d.get("platform")?;
    let arch = p.get("architecture")?.as_str()?;
    Some(match p.get("variant").and_then(Value::as_str) {
        Some(v) if !v.is_empty() => format!("{arch}/{v}"),
        _ => arch.to_owned(),
    })
}

impl Ward {
    async fn image_manifest(
        &self,
        caller: &Caller,
        rule: &rpc::Rule,
        repo: &str,
        digest: &str,
    ) -> Result<(Uidp, Value)> {
        let repo = Uidp::parse("repo_uid", repo)?;
        let digest = Digest::parse(digest)
            .ok_or_else(|| Error::invalid("digest", "digest must be sha256:<64 hex> or sha512:<128 hex>"))?;
        self.authorized_repo(caller, rule, &repo).await?;
        let m = self
            .store
            .get_manifest(repo.as_str(), digest.as_str())
            .await?
            .ok_or_else(|| Error::not_found(MANIFEST_TYPE, digest.as_str()))?;
        Ok((repo, manifest_json(&m.content)?))
    }

    /// The architecture in a single image's config blob.
    async fn config_arch(&self, manifest: &Value) -> Result<Option<String>> {
        let Some(cfg) = manifest.get("config") else {
            return Ok(None);
        };
        let Some(d) = cfg.get("digest").and_then(Value::as_str).and_then(Digest::parse) else {
            return Ok(None);
        };
        let size = cfg.get("size").and_then(Value::as_u64).unwrap_or(u64::MAX);
        if size > MAX_CONFIG_BYTES {
            return Ok(None);
        }
        // Pushes refuse a descriptor whose size is not its blob's; a manifest
        // stored before that check may still say otherwise: then no answer,
        // never a short read.
        if self.blobs.size(&d).await.map_err(Error::internal)? != Some(size) {
            return Ok(None);
        }
        let Some(stream) = self.blobs.read(&d, 0, size).await.map_err(Error::internal)? else {
            return Ok(None);
        };
        use futures_util::StreamExt as _;
        let bytes: Vec<u8> = stream.map(|c| c.map(|b| b.to_vec()).unwrap_or_default()).concat().await;
        let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok(v.get("architecture").and_then(Value::as_str).map(str::to_owned))
    }

    pub async fn get_architectures(&self, caller: &Caller, req: GetArchitecturesRequest) -> Result<Architectures> {
        let (_, m) = self
            .image_manifest(caller, &rpc::GET_ARCHITECTURES, &req.repo_uid, &req.digest)
            .await?;
        let mut architectures: Vec<String> = Vec::new();
        if m.get("manifests").is_some() {
            for a in descriptors(&m, "manifests").filter_map(platform_arch) {
                // Attestation entries of buildx indexes say "unknown".
                if a != "unknown" && !architectures.contains(&a) {
                    architectures.push(a);
                }
            }
        } else if let Some(a) = self.config_arch(&m).await? {
            architectures.push(a);
        }
        Ok(Architectures { architectures })
    }

    pub async fn get_size(&self, caller: &Caller, req: GetSizeRequest) -> Result<Size> {
        let (repo, mut m) = self
            .image_manifest(caller, &rpc::GET_SIZE, &req.repo_uid, &req.digest)
            .await?;
        let wanted = if req.architecture.is_empty() {
            "amd64".to_owned()
        } else {
            req.architecture.clone()
        };
        let mut architecture = wanted.clone();
        if m.get("manifests").is_some() {
            let child = descriptors(&m, "manifests")
                .find(|d| platform_arch(d).as_deref() == Some(wanted.as_str()))
                .and_then(|d| d.get("digest").and_then(Value::as_str).map(str::to_owned))
                .ok_or_else(|| {
                    Error::invalid(
                        "architecture",
                        format!(
                            "the index has no image for architecture \"{}\"",
                            ward_core::names::echo(&wanted)
                        ),
                    )
                })?;
            let c = self
                .store
                .get_manifest(repo.as_str(), &child)
                .await?
                .ok_or_else(|| Error::not_found(MANIFEST_TYPE, child))?;
            m = manifest_json(&c.content)?;
        } else if let Some(a) = self.config_arch(&m).await? {
            architecture = a;
        }
        // Sizes are what the manifest declares: add them without overflow.
        let size_of = |d: &Value| d.get("size").and_then(Value::as_i64).unwrap_or(0).max(0);
        let size = descriptors(&m, "layers")
            .map(size_of)
            .fold(m.get("config").map(size_of).unwrap_or(0), i64::saturating_add);
        Ok(Size { size, architecture })
    }
}
