//! The reports' API: the v1 registry's per-image RPCs (`GetVulnReport`,
//! `GetSbom`, `GetRawSbom`, `GetImageConfig`), the `Vulnerabilities`
//! listings, and Ward's affected-images query. Reads only: reports are
//! computed by the job queue; a read of an image whose inventory is still
//! being read is UNAVAILABLE (retry), one whose inventory failed is
//! FAILED_PRECONDITION with the reason.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;
use ward_core::registry::Digest;
use ward_core::rpc;
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_proto::Timestamp;
use ward_proto::registry as v1;
use ward_proto::tenant;
use ward_store::registry::{MANIFEST_TYPE, RepoRecord};
use ward_store::vulns::ReportRecord;

use super::SCANNER;
use super::inventory::Stored;
use super::matching::{Evaluation, Match};
use crate::authz::Caller;
use crate::ward::Ward;

/// Most images one affected-images page holds.
pub const MAX_AFFECTED_PAGE: u32 = 100;
/// Largest image config read.
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;
/// Most tags named per image in a listing.
const MAX_TAGS: u32 = 20;

/// Inventory status errors.
pub const INVENTORY_ERROR: &str = "INVENTORY_ERROR";

/// Refuses an inventory that is not a readable image's.
fn inventory_ready(status: &str, source: &str, error: &str, digest: &str) -> Result<()> {
    if status != "ready" {
        return Err(Error::precondition(
            INVENTORY_ERROR,
            digest,
            format!("the image's packages could not be read: {error}"),
        ));
    }
    if source == "none" {
        return Err(Error::precondition(
            INVENTORY_ERROR,
            digest,
            "the manifest is not an image (an artifact, signature or SBOM): it has no packages",
        ));
    }
    Ok(())
}

/// Most stored report bytes one `ExportVex` reads.
pub const MAX_VEX_REPORT_BYTES: usize = 64 << 20;

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}

fn pending(digest: &str) -> Error {
    Error::Unavailable(format!(
        "the report of {digest} is being computed; try again in a few seconds"
    ))
}

fn tenant_severity(s: &str) -> i32 {
    match s {
        "low" | "negligible" => 1,
        "medium" => 2,
        "high" => 3,
        "critical" => 4,
        _ => 0,
    }
}

fn v1_severity(s: &str) -> i32 {
    match s {
        "low" => 1,
        "medium" => 2,
        "high" => 3,
        "critical" => 4,
        "negligible" => 5,
        _ => 0,
    }
}

fn package2(p: &ward_sbom::Package) -> tenant::Package2 {
    tenant::Package2 {
        id: p.purl.clone(),
        name: p.name.clone(),
        version: p.version.clone(),
        license: p.license.clone().unwrap_or_default(),
        // Where the package was found: the SBOM's format, or the layer
        // reader and the file it read.
        description: match &p.location {
            Some(path) => format!("{} at {path}", p.source.as_str()),
            None => p.source.as_str().to_owned(),
        },
        purl: p.purl.clone(),
    }
}

fn tenant_match(m: &Match) -> tenant::VulnerabilityMatch {
    tenant::VulnerabilityMatch {
        vulnerability: Some(tenant::VulnerabilityRecord {
            id: m.id.clone(),
            description: if m.summary.is_empty() {
                m.details.clone()
            } else {
                m.summary.clone()
            },
            severity: tenant_severity(&m.severity),
            source: m.sources.join(","),
            cvss: m
                .cvss
                .iter()
                .map(|(score, version)| tenant::vulnerability_record::Cvss {
                    score: score.clone(),
                    version: version.clone(),
                })
                .collect(),
            cpe_uri: Vec::new(),
            related_urls: m.urls.clone(),
            advisories: m.advisories.clone().into_iter().collect(),
            related_vulnerabilities: m
                .aliases
                .iter()
                .map(|a| tenant::vulnerability_record::RelatedVulnerability {
                    id: a.clone(),
                    source: String::new(),
                })
                .collect(),
            display_id: m.id.clone(),
        }),
        pkg: Some(package2(&m.package)),
        fix: Some(tenant::Fix {
            versions: m.fix_versions.clone(),
            state: m.fix_state,
        }),
    }
}

/// The cross-repo listing's shape of a report: one entry per
/// vulnerability, with every package it was matched in.
fn v1_vulnerabilities(eval: &Evaluation) -> Vec<v1::Vulnerability> {
    let mut out: Vec<v1::Vulnerability> = Vec::new();
    for m in &eval.matches {
        if let Some(v) = out.iter_mut().find(|v| v.id == m.id) {
            v.purls.push(m.package.purl.clone());
            if let Some(l) = &m.package.location {
                v.locations.push(l.clone());
            }
            continue;
        }
        out.push(v1::Vulnerability {
            id: m.id.clone(),
            aliases: m.aliases.clone(),
            purls: vec![m.package.purl.clone()],
            description: m.summary.clone(),
            details: m.details.clone(),
            severity: v1_severity(&m.severity),
            cvss: m
                .cvss
                .iter()
                .map(|(score, version)| v1::vulnerability::Cvss {
                    score: score.clone(),
                    version: version.clone(),
                })
                .collect(),
            fix: Some(v1::vulnerability::Fix {
                versions: m.fix_versions.clone(),
                state: m.fix_state,
            }),
            related_urls: m.urls.clone(),
            locations: m.package.location.iter().cloned().collect(),
        });
    }
    out
}

fn scanner() -> v1::Scanner {
    v1::Scanner {
        name: 0,
        version: format!("{SCANNER} {}", env!("CARGO_PKG_VERSION")),
        db_build_time: None,
    }
}

impl Ward {
    /// The repo and digest of a per-image request, after `rule` at the repo.
    async fn image(&self, caller: &Caller, rule: &rpc::Rule, repo: &str, digest: &str) -> Result<(RepoRecord, String)> {
        let (repo, digest) = self.image_repo(caller, rule, repo, digest).await?;
        self.manifest_exists(&repo, &digest).await?;
        Ok((repo, digest))
    }

    /// The repo, authorized, and the parsed digest; whether the manifest
    /// exists is left to the caller.
    async fn image_repo(
        &self,
        caller: &Caller,
        rule: &rpc::Rule,
        repo: &str,
        digest: &str,
    ) -> Result<(RepoRecord, String)> {
        let uid = Uidp::parse("repo_id", repo)?;
        let digest = Digest::parse(digest)
            .ok_or_else(|| Error::invalid("digest", "digest must be sha256:<64 hex> or sha512:<128 hex>"))?;
        let repo = self.authorized_repo(caller, rule, &uid).await?;
        Ok((repo, digest.as_str().to_owned()))
    }

    /// NOT_FOUND unless the repo holds the manifest.
    async fn manifest_exists(&self, repo: &RepoRecord, digest: &str) -> Result<()> {
        if self.store.get_manifest(&repo.uid, digest).await?.is_none() {
            return Err(Error::not_found(MANIFEST_TYPE, digest));
        }
        Ok(())
    }

    /// The image's inventory, ready (else UNAVAILABLE or the inventory error).
    async fn ready_inventory(&self, repo: &str, digest: &str) -> Result<(ward_store::vulns::InventoryRecord, Stored)> {
        let inv = self
            .store
            .get_inventory(repo, digest)
            .await?
            .ok_or_else(|| pending(digest))?;
        inventory_ready(&inv.status, &inv.source, &inv.error, digest)?;
        let stored = serde_json::from_str(&inv.document).map_err(Error::internal)?;
        Ok((inv, stored))
    }

    async fn ready_report(&self, repo: &str, digest: &str) -> Result<(ReportRecord, Evaluation)> {
        self.ready_inventory(repo, digest).await?;
        let r = self
            .store
            .get_report(repo, digest)
            .await?
            .ok_or_else(|| pending(digest))?;
        let eval = serde_json::from_str(&r.report).map_err(Error::internal)?;
        Ok((r, eval))
    }

    /// `host[:port]` clients pull from.
    fn registry_host(&self) -> String {
        url::Url::parse(&self.api_url)
            .ok()
            .and_then(|u| {
                u.host_str()
                    .map(|h| u.port().map_or(h.to_owned(), |p| format!("{h}:{p}")))
            })
            .unwrap_or_else(|| "localhost".into())
    }

    /// The OpenVEX document of one image's report; empty when the report
    /// has no statement (OpenVEX needs at least one).
    pub(crate) async fn image_vex(
        &self,
        repo: &RepoRecord,
        digest: &str,
        r: &ReportRecord,
        eval: &Evaluation,
    ) -> Result<String> {
        if eval.statements.is_empty() {
            return Ok(String::new());
        }
        let path = self.repo_path(repo).await?;
        let product = super::vex::product_id(&self.registry_host(), &path, &repo.name, digest);
        let id = format!("{}/vex/{}/{}", self.api_url.trim_end_matches('/'), repo.uid, digest);
        let doc = super::vex::document(&id, &rfc3339(r.create_time), r.create_time, &[(product, eval)]);
        serde_json::to_string_pretty(&doc).map_err(Error::internal)
    }

    /// Ward's `ExportVex`: one OpenVEX document for every image with a
    /// report in the group's repos and below (grants are inherited, so
    /// `vuln_report.list` at the group covers them all). Bounded: at most
    /// [`MAX_VEX_REPORT_BYTES`] of stored reports are read, more is refused
    /// (export a folder or repo below instead).
    pub async fn export_vex(&self, caller: &Caller, req: v1::ExportVexRequest) -> Result<v1::VexExport> {
        let scope = Uidp::parse("group", &req.group)?;
        self.authorize(caller, &rpc::EXPORT_VEX, &scope)?;
        if self.store.get_group(&scope).await?.is_none() && self.store.get_repo(&scope).await?.is_none() {
            return Err(Error::not_found("group", scope.as_str()));
        }
        let mut products: Vec<(String, Evaluation)> = Vec::new();
        let mut repos: HashMap<String, Option<(RepoRecord, String)>> = HashMap::new();
        let (mut after, mut bytes, mut newest) = (None, 0usize, 0i64);
        loop {
            let page = self.store.reports_within(scope.as_str(), after.as_ref(), 64).await?;
            let Some(last) = page.last() else { break };
            after = Some((last.repo_uid.clone(), last.digest.clone()));
            bytes += page.iter().map(|r| r.report.len()).sum::<usize>();
            if bytes > MAX_VEX_REPORT_BYTES {
                return Err(Error::invalid(
                    "group",
                    format!(
                        "the group's reports exceed {} MiB: export a folder or repo below it",
                        MAX_VEX_REPORT_BYTES >> 20
                    ),
                ));
            }
            let done = page.len() < 64;
            let parsed = self
                .cpu(move || {
                    page.into_iter()
                        .filter_map(|r| {
                            let eval: Evaluation = serde_json::from_str(&r.report).ok()?;
                            (!eval.statements.is_empty()).then_some((r, eval))
                        })
                        .collect::<Vec<_>>()
                })
                .await?;
            for (r, eval) in parsed {
                if !repos.contains_key(&r.repo_uid) {
                    let repo = match Uidp::parse("repo", &r.repo_uid) {
                        Ok(uid) => self.store.get_repo(&uid).await?,
                        Err(_) => None,
                    };
                    let entry = match repo {
                        Some(repo) => {
                            let path = self.repo_path(&repo).await?;
                            Some((repo, path))
                        }
                        None => None,
                    };
                    repos.insert(r.repo_uid.clone(), entry);
                }
                let Some(Some((repo, path))) = repos.get(&r.repo_uid) else {
                    continue;
                };
                newest = newest.max(r.create_time);
                let product = super::vex::product_id(&self.registry_host(), path, &repo.name, &r.digest);
                products.push((product, eval));
            }
            if done {
                break;
            }
        }
        if products.is_empty() {
            // OpenVEX needs a statement: no image with one, no document.
            return Ok(v1::VexExport {
                document: String::new(),
                images: 0,
            });
        }
        let id = format!("{}/vex/{}", self.api_url.trim_end_matches('/'), scope.as_str());
        let time = rfc3339(newest);
        let images = products.len();
        let document = self
            .cpu(move || {
                let refs: Vec<(String, &Evaluation)> = products.iter().map(|(p, e)| (p.clone(), e)).collect();
                serde_json::to_string_pretty(&super::vex::document(&id, &time, newest, &refs))
            })
            .await?
            .map_err(Error::internal)?;
        Ok(v1::VexExport {
            document,
            images: i32::try_from(images).unwrap_or(i32::MAX),
        })
    }

    /// `<org name>/<repo name>`: the path clients pull the repo at.
    async fn repo_path(&self, repo: &RepoRecord) -> Result<String> {
        let org = Uidp::parse("org", &repo.org_uid)?;
        let name = self.store.get_group(&org).await?.map(|g| g.name).unwrap_or_default();
        Ok(format!("{name}/{}", repo.name))
    }

    /// GetVulnReport for gRPC.
    pub async fn get_vuln_report(&self, caller: &Caller, req: v1::VulnReportRequest) -> Result<tenant::VulnReport> {
        let served = &self.vulns.served;
        let report = self.cached_report(caller, req, served, |m| Ok(Arc::new(m))).await?;
        Ok((*report).clone())
    }

    /// GetVulnReport for REST: its JSON (and gzip), encoded once per report
    /// version.
    pub async fn get_vuln_report_json(
        &self,
        caller: &Caller,
        req: v1::VulnReportRequest,
    ) -> Result<crate::rest::transcode::Encoded> {
        let encode = |m: tenant::VulnReport| {
            let json = serde_json::to_vec(&m).map_err(Error::internal)?;
            Ok(crate::rest::transcode::Encoded::compressed(json.into()))
        };
        self.cached_report(caller, req, &self.vulns.served_json, encode).await
    }

    /// The report as built for its current version, as `encode` makes it:
    /// checked against the inventory's state and the report's time (one
    /// small read) after the caller's authorization, built once per version
    /// and then served from memory.
    async fn cached_report<T, E>(
        &self,
        caller: &Caller,
        req: v1::VulnReportRequest,
        cache: &moka::sync::Cache<String, T>,
        encode: E,
    ) -> Result<T>
    where
        T: Clone + Send + Sync + 'static,
        E: FnOnce(tenant::VulnReport) -> Result<T> + Send + 'static,
    {
        // An inventory exists only while its manifest does (the rows go
        // together), so the stamp answers for the manifest too: the
        // manifest is looked up only when there is no stamp.
        let (repo, digest) = self
            .image_repo(caller, &rpc::GET_VULN_REPORT, &req.repo_id, &req.digest)
            .await?;
        let Some(stamp) = self.store.report_stamp(&repo.uid, &digest).await? else {
            self.manifest_exists(&repo, &digest).await?;
            return Err(pending(&digest));
        };
        inventory_ready(&stamp.status, &stamp.source, &stamp.error, &digest)?;
        let created = stamp.report_time.ok_or_else(|| pending(&digest))?;
        let key = format!("{}|{digest}|{created}", repo.uid);
        if let Some(report) = cache.get(&key) {
            return Ok(report);
        }
        let (r, eval) = self.ready_report(&repo.uid, &digest).await?;
        let report = tenant::VulnReport {
            id: format!("{}/{digest}", repo.uid),
            vulnerability_db_last_build_time: (r.data_time > 0).then(|| Timestamp::from_millis(r.data_time)),
            vulnerability_matches: eval.matches.iter().map(tenant_match).collect(),
            scanner: Some(tenant::Scanner {
                name: SCANNER.into(),
                version: env!("CARGO_PKG_VERSION").into(),
            }),
            report_generation: Some(Timestamp::from_millis(r.create_time)),
            // The OpenVEX document is GetRawVulnReport's: repeating it here
            // would more than double every response.
            raw_vuln_report: Vec::new(),
            // When Ward last evaluated the image.
            last_seen: Some(Timestamp::from_millis(r.create_time)),
        };
        let encoded = self.cpu(move || encode(report)).await??;
        cache.insert(format!("{}|{digest}|{}", repo.uid, r.create_time), encoded.clone());
        Ok(encoded)
    }

    /// The SBOM document as pushed, if the inventory came from one.
    async fn raw_sbom_bytes(&self, repo: &str, stored: &Stored) -> Result<Option<Vec<u8>>> {
        let Some(blob) = &stored.sbom_blob else {
            return Ok(None);
        };
        // Only what this repo's pushes stored, within the SBOM bound.
        let Some(size) = self.store.repo_blob(repo, blob).await? else {
            return Ok(None);
        };
        let size = u64::try_from(size).unwrap_or(u64::MAX);
        if size > self.vulns.limits.max_document_bytes as u64 {
            return Ok(None);
        }
        self.blob_bytes_public(blob, size).await
    }

    async fn blob_bytes_public(&self, blob: &str, size: u64) -> Result<Option<Vec<u8>>> {
        let Some(d) = Digest::parse(blob) else {
            return Ok(None);
        };
        let Some(stream) = self.blobs.read(&d, 0, size).await.map_err(Error::internal)? else {
            return Ok(None);
        };
        use futures_util::StreamExt as _;
        let mut out = Vec::with_capacity(size as usize);
        let mut stream = stream;
        while let Some(c) = stream.next().await {
            out.extend_from_slice(&c.map_err(Error::internal)?);
        }
        Ok(Some(out))
    }

    /// The manifest `arch` names at `digest`: an index's image for that
    /// architecture (`default` when `arch` is empty; none: the index
    /// itself), or the image itself when its config says that
    /// architecture. INVALID_ARGUMENT on `arch` otherwise.
    async fn platform(&self, repo: &str, digest: &str, arch: &str, default: Option<&str>) -> Result<(String, Value)> {
        let m = self
            .store
            .get_manifest(repo, digest)
            .await?
            .ok_or_else(|| Error::not_found(MANIFEST_TYPE, digest))?;
        let v: Value = serde_json::from_slice(&m.content).unwrap_or(Value::Null);
        let wanted = if arch.is_empty() { default } else { Some(arch) };
        let Some(wanted) = wanted else {
            return Ok((digest.to_owned(), v));
        };
        if let Some(children) = v.get("manifests").and_then(Value::as_array) {
            let child = children
                .iter()
                .find(|d| d.pointer("/platform/architecture").and_then(Value::as_str) == Some(wanted))
                .and_then(|d| d.get("digest").and_then(Value::as_str))
                .ok_or_else(|| Error::invalid("arch", "the index has no image for that architecture"))?
                .to_owned();
            let c = self
                .store
                .get_manifest(repo, &child)
                .await?
                .ok_or_else(|| Error::not_found(MANIFEST_TYPE, child.clone()))?;
            return Ok((child, serde_json::from_slice(&c.content).unwrap_or(Value::Null)));
        }
        if !arch.is_empty() {
            let config = self.image_config_json(digest, &v).await?;
            let has = config.get("architecture").and_then(Value::as_str).unwrap_or("");
            if has != arch {
                return Err(Error::invalid(
                    "arch",
                    format!(
                        "the image is for {:?}, not {:?}",
                        ward_core::names::echo(has),
                        ward_core::names::echo(arch)
                    ),
                ));
            }
        }
        Ok((digest.to_owned(), v))
    }

    /// An image manifest's config blob as a JSON object: FAILED_PRECONDITION
    /// when the manifest is no image, or its config is missing, too large
    /// or not a JSON object.
    async fn image_config_json(&self, digest: &str, manifest: &Value) -> Result<Value> {
        if !super::inventory::is_image(manifest) {
            return Err(Error::precondition(
                "NOT_AN_IMAGE",
                digest,
                "the manifest is not an image (an artifact, signature or SBOM): it has no image config",
            ));
        }
        let cfg = manifest
            .get("config")
            .ok_or_else(|| Error::precondition("NOT_AN_IMAGE", digest, "the manifest has no config"))?;
        let (Some(blob), Some(size)) = (
            cfg.get("digest").and_then(Value::as_str),
            cfg.get("size").and_then(Value::as_u64),
        ) else {
            return Err(Error::precondition(
                "NOT_AN_IMAGE",
                digest,
                "the manifest's config has no digest or size",
            ));
        };
        if size > MAX_CONFIG_BYTES {
            return Err(Error::precondition(
                "CONFIG_TOO_LARGE",
                digest,
                format!("the config is over {MAX_CONFIG_BYTES} bytes"),
            ));
        }
        let bytes = self
            .blob_bytes_public(blob, size)
            .await?
            .ok_or_else(|| Error::precondition("CONFIG_MISSING", digest, "the image's config blob is not stored"))?;
        // A config that is no JSON object is said so, not shown as empty.
        match serde_json::from_slice(&bytes) {
            Ok(v @ Value::Object(_)) => Ok(v),
            _ => Err(Error::precondition(
                "CONFIG_NOT_JSON",
                digest,
                "the image's config is not a JSON object",
            )),
        }
    }

    pub async fn get_sbom(&self, caller: &Caller, req: v1::SbomRequest) -> Result<tenant::Sbom2> {
        let (repo, digest) = self.image(caller, &rpc::GET_SBOM, &req.repo_id, &req.digest).await?;
        // An index's SBOM is its images' union, or one architecture's.
        let (digest, _) = self.platform(&repo.uid, &digest, &req.arch, None).await?;
        let (inv, stored) = self.ready_inventory(&repo.uid, &digest).await?;
        let raw = self.raw_sbom_bytes(&repo.uid, &stored).await?.unwrap_or_default();
        let i = &stored.inventory;
        Ok(tenant::Sbom2 {
            id: format!("{}/{digest}", repo.uid),
            raw_sbom: raw,
            graph: Some(tenant::ComponentGraph {
                nodes: i
                    .packages
                    .iter()
                    .map(|p| tenant::component_graph::Node {
                        typed_node: Some(tenant::component_graph::node::TypedNode::Package(package2(p))),
                    })
                    .collect(),
                edges: Vec::new(),
            }),
            last_seen: Some(Timestamp::from_millis(inv.update_time)),
            tool: i
                .tool
                .clone()
                .unwrap_or_else(|| format!("{SCANNER} {}", env!("CARGO_PKG_VERSION"))),
            format: i.format.clone().unwrap_or_else(|| format!("{SCANNER}-{}", inv.source)),
            generated_at: i
                .generated_at
                .as_deref()
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .map(|t| Timestamp::from_millis(t.timestamp_millis())),
            authors: String::new(),
            source: if inv.source == "sbom" { 1 } else { 2 },
            name: i.name.clone().unwrap_or_default(),
            description: match i.skipped {
                0 => format!("packages read from the image's {}", inv.source),
                n => format!(
                    "packages read from the image's {}; {n} entries skipped (no usable purl, name or version, or characters no text may hold)",
                    inv.source
                ),
            },
            digest,
        })
    }

    pub async fn get_raw_sbom(&self, caller: &Caller, req: v1::RawSbomRequest) -> Result<v1::RawSbom> {
        let digest = if req.digest.is_empty() {
            req.reference.clone()
        } else {
            req.digest.clone()
        };
        let (repo, digest) = self.image(caller, &rpc::GET_RAW_SBOM, &req.repo_id, &digest).await?;
        let (_, stored) = self.ready_inventory(&repo.uid, &digest).await?;
        let raw = self
            .raw_sbom_bytes(&repo.uid, &stored)
            .await?
            .ok_or_else(|| Error::not_found("sbom", digest.clone()))?;
        let raw_sbom = String::from_utf8(raw)
            .map_err(|_| Error::precondition("SBOM_NOT_UTF8", &digest, "the stored SBOM is not UTF-8 text"))?;
        Ok(v1::RawSbom { raw_sbom })
    }

    pub async fn get_image_config(&self, caller: &Caller, req: v1::ImageConfigRequest) -> Result<v1::ImageConfig> {
        let (repo, digest) = self
            .image(caller, &rpc::GET_IMAGE_CONFIG, &req.repo_id, &req.digest)
            .await?;
        // An index's image for `arch`, amd64 when none is named.
        let (image, v) = self.platform(&repo.uid, &digest, &req.arch, Some("amd64")).await?;
        let c = self.image_config_json(&image, &v).await?;
        let c = c.get("config").cloned().unwrap_or(Value::Null);
        let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let list = |k: &str| -> Vec<String> {
            c.get(k)
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                .unwrap_or_default()
        };
        let keys = |k: &str| -> Vec<String> {
            c.get(k)
                .and_then(Value::as_object)
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default()
        };
        Ok(v1::ImageConfig {
            user: s("User"),
            exposed_ports: keys("ExposedPorts")
                .into_iter()
                .map(|k| (k, v1::image_config::ExposedPort {}))
                .collect(),
            env: list("Env"),
            entrypoint: list("Entrypoint"),
            cmd: list("Cmd"),
            volumes: keys("Volumes")
                .into_iter()
                .map(|k| (k, v1::image_config::Volume {}))
                .collect(),
            working_dir: s("WorkingDir"),
            labels: c
                .get("Labels")
                .and_then(Value::as_object)
                .map(|o| {
                    o.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                        .collect()
                })
                .unwrap_or_default(),
            stop_signal: s("StopSignal"),
        })
    }

    /// The digests a listing covers: the one asked for, the tag's, or every
    /// tagged digest of the repo (at most 100 tags).
    async fn listed_digests(&self, repo: &RepoRecord, digest: &str, tag: &str) -> Result<Vec<String>> {
        if !digest.is_empty() {
            let d = Digest::parse(digest)
                .ok_or_else(|| Error::invalid("digest", "digest must be sha256:<64 hex> or sha512:<128 hex>"))?;
            return Ok(vec![d.as_str().to_owned()]);
        }
        if !tag.is_empty() {
            let t = self
                .store
                .find_tag(&repo.uid, tag)
                .await?
                .ok_or_else(|| Error::not_found(ward_store::registry::TAG_TYPE, tag))?;
            return Ok(vec![t.digest]);
        }
        let mut out = Vec::new();
        for name in self.store.tag_names(&repo.uid, None, 100).await? {
            if let Some(t) = self.store.find_tag(&repo.uid, &name).await?
                && !t.digest.is_empty()
                && !out.contains(&t.digest)
            {
                out.push(t.digest);
            }
        }
        Ok(out)
    }

    /// A repo named by a listing, after `vuln_report.list` there.
    async fn listed_repo(&self, caller: &Caller, rule: &rpc::Rule, repo_id: &str) -> Result<RepoRecord> {
        if repo_id.is_empty() {
            return Err(Error::invalid("repo_id", "name the repo whose reports to list"));
        }
        let uid = Uidp::parse("repo_id", repo_id)?;
        self.authorized_repo(caller, rule, &uid).await
    }

    /// Repos the caller may list reports of that hold `digest` (at most 100).
    async fn repos_with_digest(&self, caller: &Caller, digest: &str) -> Result<Vec<RepoRecord>> {
        let d = Digest::parse(digest)
            .ok_or_else(|| Error::invalid("digest", "digest must be sha256:<64 hex> or sha512:<128 hex>"))?;
        let mut out = Vec::new();
        for uid in self.store.repos_holding(d.as_str(), 100).await? {
            let Ok(u) = Uidp::parse("repo", &uid) else { continue };
            if !self.caps_at(caller, &u).contains(rpc::LIST_VULN_REPORTS.capability) {
                continue;
            }
            if let Some(r) = self.store.get_repo(&u).await? {
                out.push(r);
            }
        }
        Ok(out)
    }

    pub async fn list_vuln_reports(&self, caller: &Caller, f: v1::VulnReportFilter) -> Result<v1::VulnReportList> {
        // The SDK's rule: a repo, or a digest (then every repo holding it
        // that the caller may see); neither names nothing.
        let repos = if !f.repo_id.is_empty() {
            vec![self.listed_repo(caller, &rpc::LIST_VULN_REPORTS, &f.repo_id).await?]
        } else if !f.digest.is_empty() {
            self.repos_with_digest(caller, &f.digest).await?
        } else {
            Vec::new()
        };
        let since = f.created_since.map(|t| t.to_millis()).unwrap_or(i64::MIN);
        let mut items = Vec::new();
        // Ward's reports are its own scanner's (`UNKNOWN` in the SDK's
        // enum): a filter on Grype's or Trivy's finds none.
        if f.scanner.as_ref().is_some_and(|s| s.name != 0) {
            return Ok(v1::VulnReportList { items });
        }
        for repo in repos {
            self.append_reports(&repo, &f, since, &mut items).await?;
        }
        Ok(v1::VulnReportList { items })
    }

    async fn append_reports(
        &self,
        repo: &RepoRecord,
        f: &v1::VulnReportFilter,
        since: i64,
        items: &mut Vec<v1::VulnReport>,
    ) -> Result<()> {
        for digest in self.listed_digests(repo, &f.digest, &f.tag).await? {
            let Some(r) = self.store.get_report(&repo.uid, &digest).await? else {
                continue;
            };
            if r.create_time < since {
                continue;
            }
            let eval: Evaluation = serde_json::from_str(&r.report).map_err(Error::internal)?;
            let mut s = scanner();
            s.db_build_time = (r.data_time > 0).then(|| Timestamp::from_millis(r.data_time));
            items.push(v1::VulnReport {
                digest,
                scanner: Some(s),
                created_at: Some(Timestamp::from_millis(r.create_time)),
                vulnerabilities: v1_vulnerabilities(&eval),
            });
        }
        Ok(())
    }

    pub async fn get_raw_vuln_report(
        &self,
        caller: &Caller,
        req: v1::GetRawVulnReportRequest,
    ) -> Result<v1::RawVulnReport> {
        let repo_id = if req.repo_id.is_empty() {
            // The SDK names only the digest: the first repo the caller may
            // see that holds it with a report.
            let mut found = None;
            for r in self.repos_with_digest(caller, &req.digest).await? {
                if self.store.get_report(&r.uid, &req.digest).await?.is_some() {
                    found = Some(r.uid);
                    break;
                }
            }
            found.ok_or_else(|| Error::not_found(MANIFEST_TYPE, req.digest.clone()))?
        } else {
            req.repo_id.clone()
        };
        let repo = self.listed_repo(caller, &rpc::GET_RAW_VULN_REPORT, &repo_id).await?;
        let (repo, digest) = self
            .image(caller, &rpc::GET_RAW_VULN_REPORT, &repo.uid, &req.digest)
            .await?;
        let (r, eval) = self.ready_report(&repo.uid, &digest).await?;
        // Only Ward's own scanner reports, and only the current report is
        // kept: asked for Grype's or Trivy's, or as of a time before the
        // current one was made, there is none.
        if req.scanner != 0 {
            return Err(Error::not_found("vuln report", format!("{digest} from that scanner")));
        }
        if let Some(at) = &req.created_at
            && at.to_millis() < r.create_time
        {
            return Err(Error::not_found(
                "vuln report",
                format!(
                    "{digest} as of {}: only the current report, made at {}, is kept",
                    rfc3339(at.to_millis()),
                    rfc3339(r.create_time)
                ),
            ));
        }
        let raw_report = self.image_vex(&repo, &digest, &r, &eval).await?;
        let mut s = scanner();
        s.db_build_time = (r.data_time > 0).then(|| Timestamp::from_millis(r.data_time));
        Ok(v1::RawVulnReport {
            digest,
            scanner: Some(s),
            created_at: Some(Timestamp::from_millis(r.create_time)),
            raw_report,
            raw_report_url: String::new(),
        })
    }

    /// Every image (repo, tags, digest) whose report holds the vulnerability
    /// `id` or one of its aliases, among the repos where the caller holds
    /// `vuln_report.list`.
    pub async fn list_affected_images(
        &self,
        caller: &Caller,
        req: v1::AffectedImagesRequest,
    ) -> Result<v1::AffectedImageList> {
        let id = req.id.trim();
        if id.is_empty() || id.len() > 256 || !id.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(Error::invalid(
                "id",
                "a vulnerability id or alias, such as CVE-2024-3094",
            ));
        }
        // CVE and GHSA ids as their databases spell them, however typed.
        let prefix = |p: &str| id.get(..p.len()).is_some_and(|h| h.eq_ignore_ascii_case(p));
        let id = &if prefix("cve-") {
            id.to_ascii_uppercase()
        } else if prefix("ghsa-") {
            format!("GHSA-{}", id[5..].to_ascii_lowercase())
        } else {
            id.to_owned()
        };
        let size = match req.page_size {
            n if n <= 0 => 50,
            n => (n as u32).min(MAX_AFFECTED_PAGE),
        };
        // Signed and bound to the id asked about, as every listing's token.
        let fingerprint = format!("affected-images|{id}");
        let mut after: Option<(String, String)> = if req.page_token.is_empty() {
            None
        } else {
            self.page_tokens
                .open(&req.page_token, &fingerprint, self.clock.now_millis())?
                .and_then(|(c, _)| match c.key {
                    ward_core::listing::CursorKey::Text(repo) => Some((repo, c.uid)),
                    ward_core::listing::CursorKey::Millis(_) => None,
                })
        };
        let token = |repo: &str, digest: &str| {
            let cursor = ward_core::listing::Cursor {
                key: ward_core::listing::CursorKey::Text(repo.to_owned()),
                uid: digest.to_owned(),
            };
            self.page_tokens
                .issue(&fingerprint, &cursor, 0, self.clock.now_millis())
        };
        // The id, and the ids of the records and advisories the caller may
        // read (or that are public) that list it as an alias: another
        // organization's data never widens the query.
        let mut ids = vec![id.to_owned()];
        for (other, group) in self.store.ids_aliased(id).await? {
            let readable = Uidp::parse("group", &group)
                .is_ok_and(|g| self.caps_at(caller, &g).contains(rpc::GET_ADVISORY.capability))
                || self
                    .public_advisories
                    .iter()
                    .any(|p| Uidp::is_within(&group, p.as_str()));
            if readable {
                ids.push(other);
            }
        }
        ids.sort();
        ids.dedup();
        ids.truncate(ward_store::vulns::NAME_CHUNK);
        // Only repos within the caller's grants are walked.
        let scopes: Option<Vec<String>> = self
            .visible_scopes(caller, rpc::LIST_AFFECTED_IMAGES.capability)
            .map(|v| v.into_iter().map(|u| u.as_str().to_owned()).collect());
        if scopes.as_ref().is_some_and(Vec::is_empty) {
            return Ok(v1::AffectedImageList::default());
        }
        let mut items: Vec<v1::AffectedImage> = Vec::new();
        let mut next = String::new();
        // Walk in key order, keeping what the caller may see; a bounded
        // number of rounds per page.
        let mut finished = false;
        'walk: for _ in 0..20 {
            let rows = self
                .store
                .affected_by(&ids, scopes.as_deref(), after.as_ref(), 500)
                .await?;
            let done = rows.len() < 500;
            for (repo_uid, digest, vuln_id) in rows {
                after = Some((repo_uid.clone(), digest.clone()));
                let Ok(uid) = Uidp::parse("repo", &repo_uid) else {
                    continue;
                };
                if !self
                    .caps_at(caller, &uid)
                    .contains(rpc::LIST_AFFECTED_IMAGES.capability)
                {
                    continue;
                }
                if let Some(last) = items.last_mut()
                    && last.repo_id == repo_uid
                    && last.digest == digest
                {
                    continue;
                }
                if items.len() as u32 == size {
                    // One more exists: the page ends before it.
                    next = items.last().map(|l| token(&l.repo_id, &l.digest)).unwrap_or_default();
                    break 'walk;
                }
                let Some(repo) = self.store.get_repo(&uid).await? else {
                    continue;
                };
                let purls = match self.store.get_report(&repo_uid, &digest).await? {
                    Some(r) => serde_json::from_str::<Evaluation>(&r.report)
                        .map(|e| {
                            e.matches
                                .into_iter()
                                .filter(|m| m.id == vuln_id)
                                .map(|m| m.package.purl)
                                .collect()
                        })
                        .unwrap_or_default(),
                    None => Vec::new(),
                };
                items.push(v1::AffectedImage {
                    repo_id: repo_uid.clone(),
                    repo_name: repo.name,
                    tags: self.store.tags_pointing(&repo_uid, &digest, MAX_TAGS).await?,
                    digest,
                    vulnerability_id: vuln_id,
                    purls,
                });
            }
            if done {
                finished = true;
                break;
            }
        }
        // The walk's budget ran out before the end: the caller resumes
        // where it stopped (a short page is not the last one).
        if !finished
            && next.is_empty()
            && let Some((r, d)) = &after
        {
            next = token(r, d);
        }
        Ok(v1::AffectedImageList {
            items,
            next_page_token: next,
        })
    }
}
