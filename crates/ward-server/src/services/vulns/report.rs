//! Computing and storing a manifest's report: its inventory evaluated
//! against the advisory data its organization can see (its own groups'
//! advisories and imported records, and the server's public advisory
//! groups). Findings keep their history: a vulnerability that leaves the
//! report is resolved, not forgotten.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_sbom::Package;
use ward_store::vulns::{FeedCandidate, FindingRecord, InventoryRecord, ManifestKey, ReportRecord, ReportWrite};

use super::inventory::Stored;
use super::matching::{Decision, Evaluation, Record, applicable, evaluate, lookup_names};
use crate::ward::Ward;

impl Ward {
    /// Whether advisory data in `group` applies to images of `org`.
    pub(crate) fn advisories_apply(&self, group: &str, org: &str) -> bool {
        Uidp::is_within(group, org)
            || self
                .public_advisories
                .iter()
                .any(|p| Uidp::is_within(group, p.as_str()))
    }

    /// Evaluates packages for the organization `org`.
    pub(crate) async fn evaluate_packages(&self, org: &str, packages: Vec<Package>) -> Result<Evaluation> {
        let mut names: Vec<String> = packages.iter().flat_map(lookup_names).collect();
        names.sort();
        names.dedup();
        let mut scopes = vec![org.to_owned()];
        scopes.extend(self.public_advisories.iter().map(|p| p.as_str().to_owned()));
        let t0 = std::time::Instant::now();
        // Which records can apply, from their indexed rows: read and decided
        // in two halves of the names at once (two reader connections, two
        // cores; the decision is CPU work, off the async workers); only
        // those records are parsed. Each half's read is a task of its own:
        // a SQLite read runs on the polling thread, so two reads in one task
        // would run one after the other.
        let packages = Arc::new(packages);
        let halves = names.chunks(names.len().div_ceil(2).max(1)).map(|half| {
            let (packages, store) = (packages.clone(), self.store.clone());
            let (half, scopes) = (half.to_vec(), scopes.clone());
            async move {
                let read = tokio::spawn(async move { store.feed_candidates(&half, &scopes).await });
                let mut candidates = read
                    .await
                    .map_err(|e| Error::internal(format_args!("a candidates read failed: {e}")))??;
                let read = t0.elapsed();
                candidates.retain(|c| self.advisories_apply(&c.parent_uid, org));
                let count = candidates.len();
                // Every record consulted dates the report, applicable or not.
                let consulted = candidates.iter().map(|c| c.update_time).max().unwrap_or(0);
                let keep = self
                    .cpu(move || -> Vec<FeedCandidate> {
                        applicable(&packages, &candidates).into_iter().cloned().collect()
                    })
                    .await?;
                Ok::<_, Error>((count, consulted, keep, read))
            }
        });
        // The team's decisions are read beside the candidates (a third
        // reader connection).
        let decided = async {
            let advisories: Vec<_> = self
                .store
                .advisories_naming(&names, &scopes)
                .await?
                .into_iter()
                .filter(|a| self.advisories_apply(&a.parent_uid, org))
                .collect();
            let uids: Vec<String> = advisories.iter().map(|a| a.uid.clone()).collect();
            let events = if uids.is_empty() {
                Vec::new()
            } else {
                self.store.events_of(&uids).await?
            };
            let mut by_advisory: BTreeMap<&str, Vec<_>> = BTreeMap::new();
            for e in &events {
                by_advisory.entry(e.advisory_uid.as_str()).or_default().push(e);
            }
            let decisions: Vec<Decision> = advisories
                .iter()
                .filter_map(|a| Decision::of(a, by_advisory.get(a.uid.as_str()).map(Vec::as_slice).unwrap_or(&[])))
                .collect();
            Ok::<_, Error>((decisions, t0.elapsed()))
        };
        let (halves, decided) = futures_util::future::join(futures_util::future::join_all(halves), decided).await;
        let (decisions, t_advisories) = decided?;
        let mut keep: Vec<FeedCandidate> = Vec::new();
        let (mut n_candidates, mut consulted, mut t_read) = (0, 0, std::time::Duration::ZERO);
        for half in halves {
            let (count, time, kept, read) = half?;
            n_candidates += count;
            consulted = consulted.max(time);
            t_read = t_read.max(read);
            keep.extend(kept);
        }
        // A record naming packages in both halves came twice.
        keep.sort_by(|a, b| (&a.parent_uid, &a.id).cmp(&(&b.parent_uid, &b.id)));
        keep.dedup_by(|a, b| a.parent_uid == b.parent_uid && a.id == b.id);
        let t_candidates = t0.elapsed();
        let n_kept = keep.len();
        let mut records: Vec<Arc<Record>> = Vec::new();
        let mut misses = Vec::new();
        for c in keep {
            let k = format!("{}\n{}\n{}", c.parent_uid, c.id, c.digest);
            match self.vulns.records.get(&k) {
                Some(r) => records.push(r),
                None => misses.push((k, c)),
            }
        }
        let n_parsed = misses.len();
        if !misses.is_empty() {
            let keys: Vec<(String, String)> = misses
                .iter()
                .map(|(_, c)| (c.parent_uid.clone(), c.id.clone()))
                .collect();
            let bodies: Arc<HashMap<(String, String), String>> = Arc::new(
                self.store
                    .feed_bodies(&keys)
                    .await?
                    .into_iter()
                    .map(|(g, id, body)| ((g, id), body))
                    .collect(),
            );
            // Parsed in two halves at once (two cores).
            let half = misses.len().div_ceil(2);
            let second = misses.split_off(half);
            let parse = |part: Vec<(String, FeedCandidate)>| {
                let bodies = bodies.clone();
                self.cpu(move || {
                    part.into_iter()
                        .filter_map(|(k, c)| {
                            let body = bodies.get(&(c.parent_uid.clone(), c.id.clone()))?;
                            Record::parse(&c, body).map(|r| (k, Arc::new(r)))
                        })
                        .collect::<Vec<_>>()
                })
            };
            let (a, b) = tokio::try_join!(parse(misses), parse(second))?;
            for (k, r) in a.into_iter().chain(b) {
                self.vulns.records.insert(k, r.clone());
                records.push(r);
            }
        }
        records.sort_by(|a, b| (&a.group, &a.id).cmp(&(&b.group, &b.id)));
        records.dedup_by(|a, b| a.group == b.group && a.id == b.id);
        let t_records = t0.elapsed();
        let mut eval = self.cpu(move || evaluate(&packages, &records, &decisions)).await?;
        eval.data_time = eval.data_time.max(consulted);
        // Where an evaluation's time goes (cumulative ms), for operators
        // and the benchmark.
        tracing::debug!(
            target: "ward::vulns",
            candidates = n_candidates,
            kept = n_kept,
            parsed = n_parsed,
            read_ms = t_read.as_millis() as u64,
            candidates_ms = t_candidates.as_millis() as u64,
            records_ms = t_records.as_millis() as u64,
            advisories_ms = t_advisories.as_millis() as u64,
            evaluated_ms = t0.elapsed().as_millis() as u64,
            "evaluation"
        );
        Ok(eval)
    }

    /// Computes and stores a manifest's report (if it has an inventory),
    /// again if another worker's report landed meanwhile.
    pub(crate) async fn build_report(self: &Arc<Self>, repo: &str, digest: &str) -> Result<()> {
        for _ in 0..3 {
            let before = self.store.get_reports(&[(repo.to_owned(), digest.to_owned())]).await?;
            let if_created = before.first().map(|r| r.create_time);
            if self.build_report_once(repo, digest, if_created).await? {
                return Ok(());
            }
        }
        Err(Error::Unavailable(
            "the report kept changing while it was computed".into(),
        ))
    }

    /// Reads the newest report time a new report must exceed.
    fn report_time(&self, previous: Option<i64>) -> i64 {
        self.clock.now_millis().max(previous.map_or(0, |t| t + 1))
    }

    async fn build_report_once(self: &Arc<Self>, repo: &str, digest: &str, if_created: Option<i64>) -> Result<bool> {
        let Some(inv) = self.store.get_inventory(repo, digest).await? else {
            return Ok(true);
        };
        if inv.status != "ready" {
            // An image whose packages can no longer be read has no open
            // findings (they would linger in counts and affected images).
            let report = ReportRecord {
                repo_uid: repo.to_owned(),
                digest: digest.to_owned(),
                report: serde_json::to_string(&Evaluation::default()).map_err(Error::internal)?,
                data_time: 0,
                create_time: self.report_time(if_created),
            };
            let write = ReportWrite {
                report,
                findings: Vec::new(),
                if_created,
            };
            return Ok(self.store.put_reports(&[write]).await?.first() == Some(&true));
        }
        let start = std::time::Instant::now();
        let stored: Stored = serde_json::from_str(&inv.document).map_err(Error::internal)?;
        let packages = stored.inventory.packages.len();
        let org = repo.split('/').next().unwrap_or(repo).to_owned();
        let eval = self.evaluate_packages(&org, stored.inventory.packages).await?;
        let evaluated_ms = start.elapsed().as_millis() as u64;
        let (report, findings) = report_record(repo, digest, &eval, self.report_time(if_created))?;
        let write = ReportWrite {
            report,
            findings,
            if_created,
        };
        if self.store.put_reports(&[write]).await?.first() != Some(&true) {
            return Ok(false);
        }
        tracing::info!(
            target: "ward::vulns",
            repo,
            digest,
            packages,
            matches = eval.matches.len(),
            evaluated_ms,
            ms = start.elapsed().as_millis() as u64,
            "report computed"
        );
        Ok(true)
    }

    /// Re-evaluates these manifests after a change to advisory data about
    /// `names` (each spelling the package index may hold). Only a manifest's
    /// packages of those names are evaluated again (once per organization
    /// and distinct set of such packages, however many images share it) and
    /// merged into its stored report; a chunk's reports are written in one
    /// transaction, each only if no other report landed since it was read
    /// (those, and manifests without a report, are computed whole). Two
    /// chunks run at once, so one chunk's reads and evaluation overlap the
    /// other's write (the database works beside the server's two cores).
    pub(crate) async fn reevaluate_manifests(self: &Arc<Self>, names: &[String], keys: &[ManifestKey]) -> Result<()> {
        use futures_util::StreamExt as _;
        let wanted: Arc<HashSet<String>> = Arc::new(names.iter().cloned().collect());
        let mut runs = futures_util::stream::iter(keys.chunks(REEVAL_CHUNK).map(<[_]>::to_vec))
            .map(|chunk| {
                let (ward, wanted) = (self.clone(), wanted.clone());
                async move { ward.reevaluate_chunk(wanted, &chunk).await }
            })
            .buffer_unordered(REEVAL_CONCURRENCY);
        while let Some(done) = runs.next().await {
            done?;
        }
        Ok(())
    }

    async fn reevaluate_chunk(self: &Arc<Self>, wanted: Arc<HashSet<String>>, chunk: &[ManifestKey]) -> Result<()> {
        let start = std::time::Instant::now();
        // Two reads at once: the reports' in a task of its own (a SQLite read
        // runs on the polling thread).
        let (store, keys) = (self.store.clone(), chunk.to_vec());
        let reports = tokio::spawn(async move { store.get_reports(&keys).await });
        let inventories = self.store.get_inventories(chunk).await?;
        let reports = reports
            .await
            .map_err(|e| Error::internal(format_args!("a reports read failed: {e}")))??;
        let (merges, mut whole) = self.cpu(move || plan_merges(inventories, reports, &wanted)).await?;
        let mut subs: HashMap<(String, String), Arc<Evaluation>> = HashMap::new();
        for m in &merges {
            if !subs.contains_key(&m.group) {
                let eval = self.evaluate_packages(&m.group.0, m.changed.clone()).await?;
                subs.insert(m.group.clone(), Arc::new(eval));
            }
        }
        let now = self.clock.now_millis();
        let writes = self
            .cpu(move || {
                merges
                    .into_iter()
                    .map(|mut m| {
                        let sub = &subs[&m.group];
                        let purls: HashSet<&str> = m.changed.iter().map(|p| p.purl.as_str()).collect();
                        m.old.replace_packages(&purls, sub);
                        let (report, findings) = report_record(&m.key.0, &m.key.1, &m.old, now.max(m.created + 1))?;
                        Ok(ReportWrite {
                            report,
                            findings,
                            if_created: Some(m.created),
                        })
                    })
                    .collect::<Result<Vec<_>>>()
            })
            .await??;
        let written = self.store.put_reports(&writes).await?;
        let merged = written.iter().filter(|w| **w).count();
        whole.extend(
            writes
                .iter()
                .zip(&written)
                .filter(|(_, w)| !**w)
                .map(|(x, _)| (x.report.repo_uid.clone(), x.report.digest.clone())),
        );
        for (repo, digest) in &whole {
            self.build_report(repo, digest).await?;
        }
        tracing::info!(
            target: "ward::vulns",
            manifests = chunk.len(),
            merged,
            whole = whole.len(),
            ms = start.elapsed().as_millis() as u64,
            "reports re-evaluated"
        );
        Ok(())
    }
}

/// Manifests one re-evaluation reads and writes at a time.
const REEVAL_CHUNK: usize = 256;

/// Chunks of one re-evaluation in flight at once.
const REEVAL_CONCURRENCY: usize = 2;

/// A stored report to bring up to date for some of its packages.
struct Merge {
    key: ManifestKey,
    /// (organization, the changed packages as JSON): images sharing it share
    /// one evaluation.
    group: (String, String),
    changed: Vec<Package>,
    old: Evaluation,
    created: i64,
}

/// Splits a chunk into reports to merge and manifests to compute whole.
fn plan_merges(
    inventories: Vec<InventoryRecord>,
    reports: Vec<ReportRecord>,
    names: &HashSet<String>,
) -> (Vec<Merge>, Vec<ManifestKey>) {
    let mut reports: HashMap<ManifestKey, ReportRecord> = reports
        .into_iter()
        .map(|r| ((r.repo_uid.clone(), r.digest.clone()), r))
        .collect();
    let mut merges = Vec::new();
    let mut whole = Vec::new();
    for inv in inventories {
        let key = (inv.repo_uid.clone(), inv.digest.clone());
        let report = reports.remove(&key);
        let stored = (inv.status == "ready")
            .then(|| serde_json::from_str::<Stored>(&inv.document).ok())
            .flatten();
        let old = report.as_ref().and_then(|r| {
            serde_json::from_str::<Evaluation>(&r.report)
                .ok()
                .map(|e| (e, r.create_time))
        });
        let (Some(stored), Some((old, created))) = (stored, old) else {
            whole.push(key);
            continue;
        };
        let changed: Vec<Package> = stored
            .inventory
            .packages
            .into_iter()
            .filter(|p| lookup_names(p).iter().any(|n| names.contains(n)))
            .collect();
        let org = key.0.split('/').next().unwrap_or(&key.0).to_owned();
        let group = (org, serde_json::to_string(&changed).unwrap_or_default());
        merges.push(Merge {
            key,
            group,
            changed,
            old,
            created,
        });
    }
    (merges, whole)
}

/// A report's row and its findings.
fn report_record(repo: &str, digest: &str, eval: &Evaluation, now: i64) -> Result<(ReportRecord, Vec<FindingRecord>)> {
    let mut findings: BTreeMap<String, FindingRecord> = BTreeMap::new();
    // Matches under investigation (only pending decisions) are shown,
    // not counted: nothing was decided.
    for m in eval.matches.iter().filter(|m| m.fix_state != 0) {
        let f = findings.entry(m.id.clone()).or_insert_with(|| FindingRecord {
            repo_uid: repo.to_owned(),
            digest: digest.to_owned(),
            vuln_id: m.id.clone(),
            severity: m.severity.clone(),
            aliases: Vec::new(),
            first_seen: now,
            resolved_at: None,
        });
        let mut aliases: BTreeSet<String> = f.aliases.drain(..).collect();
        aliases.extend(m.aliases.iter().cloned());
        f.aliases = aliases.into_iter().collect();
        if severity_rank(&m.severity) > severity_rank(&f.severity) {
            f.severity = m.severity.clone();
        }
    }
    let record = ReportRecord {
        repo_uid: repo.to_owned(),
        digest: digest.to_owned(),
        report: serde_json::to_string(&eval).map_err(Error::internal)?,
        data_time: eval.data_time,
        create_time: now,
    };
    Ok((record, findings.into_values().collect()))
}

/// Orders severity names as `ward_core::severity::Severity` does.
pub(crate) fn severity_rank(s: &str) -> ward_core::severity::Severity {
    ward_core::severity::Severity::parse(s).unwrap_or(ward_core::severity::Severity::Unknown)
}
