//! Vulnerability reports' storage and the durable job queue that computes
//! them: inventories per manifest (with an index from package name to
//! manifests), the current report per manifest, and each finding's history
//! (first seen, resolved) for counts by day and resolved-vulnerability
//! reports.

use async_trait::async_trait;
use ward_core::Result;

/// A claimed job: `attempts` counts this one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobRecord {
    pub id: i64,
    pub kind: String,
    pub key: String,
    pub attempts: i64,
    /// The lease this claim holds: finishing checks it, so a worker whose
    /// lease expired (and whose job another worker took) changes nothing.
    pub lease_until: i64,
}

/// Which jobs a worker claims: event deliveries wait on other servers (a
/// slow sink), so they have workers of their own and never hold up the
/// rest of the queue, nor it them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// Every kind but deliveries.
    Work,
    /// Event deliveries (kind [`crate::events::DELIVER`]).
    Deliveries,
}

impl Lane {
    pub(crate) fn is_deliveries(self) -> bool {
        self == Lane::Deliveries
    }
}

/// How a claimed job ended.
#[derive(Clone, Debug)]
pub enum JobEnd {
    /// Done: the row goes, unless it was enqueued again meanwhile (then it
    /// runs once more).
    Done,
    /// Try again at this time (ms), keeping the error for operators.
    Retry { at: i64, error: String },
    /// Not attempted (its target is backing off): run at this time (ms),
    /// and this claim does not count as an attempt.
    Defer { at: i64 },
}

/// A manifest's inventory (or the error that stopped reading it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InventoryRecord {
    pub repo_uid: String,
    pub digest: String,
    /// "ready" or "error".
    pub status: String,
    pub error: String,
    /// "sbom", "layers", "index" or "none" (not an image).
    pub source: String,
    /// The manifest that carried the SBOM ("" when read from layers).
    pub sbom_digest: String,
    /// The inventory as JSON (the service layer owns its shape).
    pub document: String,
    pub update_time: i64,
}

/// A manifest's current report: `report` is its matches as JSON.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportRecord {
    pub repo_uid: String,
    pub digest: String,
    pub report: String,
    pub data_time: i64,
    pub create_time: i64,
}

/// See [`VulnStore::report_stamp`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportStamp {
    pub status: String,
    pub error: String,
    pub source: String,
    pub report_time: Option<i64>,
}

/// A report to write, if the stored one is still the one it was derived
/// from (`if_created`: its `create_time`; None: whatever is stored), so
/// concurrent re-evaluations never lose each other's changes.
#[derive(Clone, Debug)]
pub struct ReportWrite {
    pub report: ReportRecord,
    pub findings: Vec<FindingRecord>,
    pub if_created: Option<i64>,
}

/// One vulnerability a manifest's reports have shown.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FindingRecord {
    pub repo_uid: String,
    pub digest: String,
    pub vuln_id: String,
    pub severity: String,
    pub aliases: Vec<String>,
    pub first_seen: i64,
    pub resolved_at: Option<i64>,
}

/// An imported OSV record that names a package of some name: its
/// `affected` entries for that package (`FeedPackage::affected`; None for
/// records indexed before they were kept), not its body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeedCandidate {
    pub parent_uid: String,
    pub id: String,
    pub ecosystem: String,
    pub name: String,
    pub affected: Option<String>,
    pub digest: String,
    pub withdrawn: bool,
    pub update_time: i64,
}

/// A `(repo_uid, digest)` cursor for walks over manifests.
pub type ManifestKey = (String, String);

/// Most names one candidate lookup takes per statement.
pub const NAME_CHUNK: usize = 500;

#[async_trait]
pub trait VulnStore: Send + Sync + 'static {
    /// Queues `(kind, key)` jobs to run from `run_after`: one merges into a
    /// queued job of the same kind and key (the earlier time wins), and a
    /// running one is marked to run again once it ends.
    async fn enqueue_jobs(&self, jobs: &[(String, String)], run_after: i64, now_ms: i64) -> Result<()>;
    /// Leases up to `limit` due jobs of `lane` until `now_ms + lease_ms`,
    /// oldest first; a job whose lease expired (its worker died) is due again.
    async fn claim_jobs(&self, lane: Lane, now_ms: i64, lease_ms: i64, limit: u32) -> Result<Vec<JobRecord>>;
    /// Frees the leases of jobs no worker can still be running: on SQLite,
    /// which one server owns, every lease when that server starts (a killed
    /// server's jobs run again at once instead of when their leases
    /// expire); on PostgreSQL none (other replicas may be running them).
    async fn release_orphaned_leases(&self) -> Result<()>;
    /// Ends a claimed job, if `job`'s lease is still the row's.
    async fn finish_job(&self, job: &JobRecord, end: JobEnd, now_ms: i64) -> Result<()>;
    /// Jobs queued or running, by kind (for operators and the backfill's progress).
    async fn job_counts(&self) -> Result<Vec<(String, i64)>>;
    /// Jobs queued or running by kind, with the oldest one's `run_after`
    /// (how far behind the queue is, for metrics).
    async fn job_backlog(&self) -> Result<Vec<(String, i64, i64)>>;
    /// `(manifests, manifests with an inventory)`: the backfill's progress.
    async fn inventory_progress(&self) -> Result<(i64, i64)>;

    /// Replaces a manifest's inventory and its package index (`names`,
    /// each once). Nothing is written if the manifest is gone.
    async fn put_inventory(&self, inv: &InventoryRecord, names: &[String]) -> Result<()>;
    async fn get_inventory(&self, repo_uid: &str, digest: &str) -> Result<Option<InventoryRecord>>;
    /// A manifest's inventory state without its document, and its report's
    /// `create_time` (None: no report yet): what a cached report is checked
    /// against.
    async fn report_stamp(&self, repo_uid: &str, digest: &str) -> Result<Option<ReportStamp>>;
    /// Manifests whose inventory holds a package of one of these names, in
    /// repos within `scope` (an organization's uid; None: every repo),
    /// after `after`, in key order, at most `limit`.
    async fn manifests_with_packages(
        &self,
        names: &[String],
        scope: Option<&str>,
        after: Option<&ManifestKey>,
        limit: u32,
    ) -> Result<Vec<ManifestKey>>;
    /// Manifests of the repo naming `digest` as a child (its indexes).
    async fn parents_of(&self, repo_uid: &str, digest: &str) -> Result<Vec<String>>;
    /// Manifests without an inventory, after `after`, in key order (the backfill).
    async fn manifests_without_inventory(&self, after: Option<&ManifestKey>, limit: u32) -> Result<Vec<ManifestKey>>;

    /// Replaces a manifest's report and brings its findings up to date: new
    /// ones are first seen now, ones no longer in `findings` are resolved
    /// now, resolved ones seen again are open again. Nothing is written if
    /// the manifest is gone.
    async fn put_report(&self, r: &ReportRecord, findings: &[FindingRecord]) -> Result<()> {
        let write = ReportWrite {
            report: r.clone(),
            findings: findings.to_vec(),
            if_created: None,
        };
        self.put_reports(&[write]).await.map(drop)
    }
    /// [`put_report`](Self::put_report) for many manifests, in one
    /// transaction; each only if its condition holds. Says which were written
    /// (or skipped because the manifest is gone).
    async fn put_reports(&self, writes: &[ReportWrite]) -> Result<Vec<bool>>;
    /// The inventories of these manifests (those that have one).
    async fn get_inventories(&self, keys: &[ManifestKey]) -> Result<Vec<InventoryRecord>>;
    /// The reports of these manifests (those that have one).
    async fn get_reports(&self, keys: &[ManifestKey]) -> Result<Vec<ReportRecord>>;
    async fn get_report(&self, repo_uid: &str, digest: &str) -> Result<Option<ReportRecord>>;
    /// Reports of manifests in repos at or below `scope` (a group or repo
    /// uid), after `after`, in key order, at most `limit`.
    async fn reports_within(&self, scope: &str, after: Option<&ManifestKey>, limit: u32) -> Result<Vec<ReportRecord>>;
    /// Every finding (open and resolved) of these manifests of one repo.
    async fn findings_of(&self, repo_uid: &str, digests: &[String]) -> Result<Vec<FindingRecord>>;
    /// Open findings answering to one of `ids` (an id or an alias, at most
    /// [`NAME_CHUNK`]) in repos within one of `scopes` (group uids; None:
    /// every repo), as `(repo_uid, digest, vuln_id)`, after `after`, in key
    /// order.
    async fn affected_by(
        &self,
        ids: &[String],
        scopes: Option<&[String]>,
        after: Option<&ManifestKey>,
        limit: u32,
    ) -> Result<Vec<(String, String, String)>>;

    /// Repos holding a manifest of this digest, in uid order, at most `limit`.
    async fn repos_holding(&self, digest: &str, limit: u32) -> Result<Vec<String>>;
    /// Names of the repo's tags that point at `digest`, at most `limit`.
    async fn tags_pointing(&self, repo_uid: &str, digest: &str, limit: u32) -> Result<Vec<String>>;

    /// Imported OSV records naming a package of one of these names, in
    /// groups within one of `scopes` (group uids).
    async fn feed_candidates(&self, names: &[String], scopes: &[String]) -> Result<Vec<FeedCandidate>>;
    /// The bodies of these `(group, id)` feed records, as `(group, id,
    /// body)`; missing ones are left out.
    async fn feed_bodies(&self, keys: &[(String, String)]) -> Result<Vec<(String, String, String)>>;
    /// Advisories (not deleted) whose artifact or component is one of these
    /// names, in groups within one of `scopes`.
    async fn advisories_naming(
        &self,
        names: &[String],
        scopes: &[String],
    ) -> Result<Vec<crate::advisories::AdvisoryRecord>>;
    /// `(id, group)` of the feed records and advisories (their CGA ids) that
    /// list `alias` among their aliases.
    async fn ids_aliased(&self, alias: &str) -> Result<Vec<(String, String)>>;
    /// Tidies the per-name feed index after imports rewrote it: on
    /// PostgreSQL a `VACUUM (ANALYZE)` of `feed_name_packages` (an import
    /// rewrites the row of every name it touches, and a report read right
    /// after a feed's import would otherwise walk the dead versions); on
    /// SQLite nothing.
    async fn tidy_feed_index(&self) -> Result<()>;
}

/// SQL that keeps rows whose `column` is one of `scopes` or below one, with
/// placeholders from `first` (`?N` on SQLite, `$N` on PostgreSQL); one bind
/// per scope. An empty list keeps nothing.
pub(crate) fn within_sql(column: &str, scopes: usize, first: usize, dollar: bool) -> String {
    if scopes == 0 {
        return "FALSE".into();
    }
    let p = |i: usize| if dollar { format!("${i}") } else { format!("?{i}") };
    let parts: Vec<String> = (first..first + scopes)
        .map(|i| format!("({column} = {p} OR {column} LIKE {p} || '/%')", p = p(i)))
        .collect();
    format!("({})", parts.join(" OR "))
}
