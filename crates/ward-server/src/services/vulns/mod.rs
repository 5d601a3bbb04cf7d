//! Vulnerability reports: every image the registry holds matched against
//! the advisories its organization can see, with the team's reviewed
//! decisions applied.
//!
//! - `inventory`: the packages of a manifest, from its SBOM (a referrer or
//!   the `sha256-<hex>.sbom`/`.att` tag) or else from its layers, parsed by
//!   the bounded `ward-sbom` crate; an index gets the union of its images'.
//! - `matching`: an inventory against imported OSV records and Ward's own
//!   advisories, in each ecosystem's version ordering (`ward_core::versions`).
//! - `jobs`: the one durable job queue all of this runs on, off the request
//!   path: pushes, advisory changes and the backfill enqueue; workers claim.
//! - `api`: the registry's report, SBOM and config RPCs, the cross-repo
//!   listings and the affected-images query; `vex`: OpenVEX documents.

pub mod api;
pub mod history;
pub mod inventory;
pub mod jobs;
pub mod matching;
pub mod report;
pub mod vex;

use std::sync::Arc;

use ward_core::Result;

use crate::ward::Ward;

/// The scanner name reports carry.
pub const SCANNER: &str = "ward";

/// Job kinds.
pub const INVENTORY: &str = "inventory";
pub const REPORT: &str = "report";
pub const REEVAL: &str = "reeval";
pub const BACKFILL: &str = "backfill";
/// After feed imports: [`ward_store::vulns::VulnStore::tidy_feed_index`].
pub const TIDY: &str = "tidy";

/// Default bound on what one layer decompresses to (`--max-layer-bytes`).
pub const DEFAULT_MAX_LAYER_BYTES: u64 = 4 * 1024 * 1024 * 1024;

/// A manifest's job key.
pub(crate) fn key(repo_uid: &str, digest: &str) -> String {
    format!("{repo_uid}|{digest}")
}

pub(crate) fn split_key(k: &str) -> Option<(&str, &str)> {
    k.split_once('|')
}

/// The inventory jobs of the images an SBOM (by its subject or its tags)
/// speaks for.
fn sbom_jobs(repo_uid: &str, subject: Option<&str>, tags: &[String]) -> Vec<(String, String)> {
    let subjects = tags.iter().filter_map(|t| inventory::tagged_subject(t));
    subject
        .map(str::to_owned)
        .into_iter()
        .chain(subjects)
        .map(|s| (INVENTORY.to_owned(), key(repo_uid, &s)))
        .collect()
}

/// Background state shared by the workers of one server.
pub struct VulnState {
    /// Wakes the workers when this server enqueues work (other replicas'
    /// work is found by polling).
    pub(crate) wake: tokio::sync::Notify,
    /// Parsed OSV records by (group, id, digest): a report reads the same
    /// records for many images.
    pub(crate) records: moka::sync::Cache<String, Arc<matching::Record>>,
    /// Built reports by `repo|digest|report time` (a new report has a new
    /// key; old ones age out).
    pub(crate) served: moka::sync::Cache<String, Arc<ward_proto::tenant::VulnReport>>,
    /// The same, as REST's JSON.
    pub(crate) served_json: moka::sync::Cache<String, crate::rest::transcode::Encoded>,
    /// Bounds on the SBOMs and layers inventories read.
    pub limits: ward_sbom::Limits,
}

impl Default for VulnState {
    fn default() -> Self {
        Self {
            wake: tokio::sync::Notify::new(),
            records: moka::sync::Cache::builder()
                .weigher(|k: &String, v: &Arc<matching::Record>| {
                    u32::try_from(k.len() + v.weight()).unwrap_or(u32::MAX)
                })
                .max_capacity(64 * 1024 * 1024)
                .build(),
            served: moka::sync::Cache::builder()
                .weigher(|k: &String, v: &Arc<ward_proto::tenant::VulnReport>| {
                    u32::try_from(k.len() + prost::Message::encoded_len(&**v)).unwrap_or(u32::MAX)
                })
                .max_capacity(32 * 1024 * 1024)
                .build(),
            served_json: moka::sync::Cache::builder()
                .weigher(|k: &String, v: &crate::rest::transcode::Encoded| {
                    u32::try_from(k.len() + v.weight()).unwrap_or(u32::MAX)
                })
                .max_capacity(32 * 1024 * 1024)
                .build(),
            limits: ward_sbom::Limits {
                max_layer_bytes: DEFAULT_MAX_LAYER_BYTES,
                ..ward_sbom::Limits::default()
            },
        }
    }
}

impl Ward {
    /// Queues background jobs now and wakes this server's workers. Failing
    /// to queue never fails the request that asked (the backfill and the
    /// next change catch up); it is logged.
    pub(crate) async fn enqueue(&self, mut jobs: Vec<(String, String)>) {
        // One statement may not name a job twice (PostgreSQL's upsert).
        jobs.sort();
        jobs.dedup();
        if jobs.is_empty() {
            return;
        }
        let now = self.clock.now_millis();
        match self.store.enqueue_jobs(&jobs, now, now).await {
            Ok(()) => self.vulns.wake.notify_waiters(),
            Err(e) => tracing::warn!(error = %e.message(), "could not queue background work"),
        }
    }

    /// A manifest was pushed: read its inventory (and, for an SBOM or
    /// attestation, its subject's) off the request path.
    pub(crate) async fn on_manifest_pushed(
        &self,
        repo_uid: &str,
        digest: &str,
        subject: Option<&str>,
        tags: &[String],
    ) {
        let mut jobs = vec![(INVENTORY.to_owned(), key(repo_uid, digest))];
        jobs.extend(sbom_jobs(repo_uid, subject, tags));
        self.enqueue(jobs).await;
    }

    /// An SBOM or attestation came or went other than by a push (its
    /// manifest deleted, or a `sha256-<hex>.sbom`/`.att` tag written or
    /// deleted through the API): the subject's inventory is read again, from
    /// what remains (its layers, when no SBOM does).
    pub(crate) async fn on_sboms_changed(&self, repo_uid: &str, subject: Option<&str>, tags: &[String]) {
        self.enqueue(sbom_jobs(repo_uid, subject, tags)).await;
    }

    /// Advisory data of `group` about these package names changed:
    /// re-evaluate the images holding one of them that the data applies to
    /// (the group's organization's, or every one for a public group). Names
    /// are looked up as written and normalized, as inventories index them.
    pub(crate) async fn on_advisories_changed(&self, group: &str, names: Vec<String>) {
        let public = self
            .public_advisories
            .iter()
            .any(|p| ward_core::uidp::Uidp::is_within(group, p.as_str()));
        let scope = if public {
            ""
        } else {
            group.split('/').next().unwrap_or(group)
        };
        let mut jobs: Vec<(String, String)> = Vec::new();
        // A job covers the name's spellings (as written, lowercased,
        // normalized): one per name, not one per spelling.
        for n in names.iter().filter(|n| !n.is_empty()) {
            jobs.push((REEVAL.to_owned(), format!("{scope}|{n}")));
        }
        self.enqueue(jobs).await;
    }

    /// A job failed for good: an inventory says so (the API shows it),
    /// instead of answering "being computed" forever.
    pub(crate) async fn job_failed(&self, job: &ward_store::vulns::JobRecord, error: &str) {
        if job.kind != INVENTORY && job.kind != REPORT {
            return;
        }
        let Some((repo, digest)) = split_key(&job.key) else {
            return;
        };
        let record = ward_store::vulns::InventoryRecord {
            repo_uid: repo.to_owned(),
            digest: digest.to_owned(),
            status: "error".into(),
            error: format!("Ward could not read the image's packages or match them: {error}"),
            source: String::new(),
            sbom_digest: String::new(),
            document: "{}".into(),
            update_time: self.clock.now_millis(),
        };
        if let Err(e) = self.store.put_inventory(&record, &[]).await {
            tracing::warn!(error = %e.message(), "recording a failed inventory failed");
        }
    }

    /// Queues the backfill (inventories of manifests pushed before reports
    /// existed); resumable, since it only picks manifests without one.
    pub async fn start_backfill(&self) -> Result<()> {
        let now = self.clock.now_millis();
        self.store
            .enqueue_jobs(&[(BACKFILL.to_owned(), String::new())], now, now)
            .await?;
        self.vulns.wake.notify_waiters();
        Ok(())
    }
}
