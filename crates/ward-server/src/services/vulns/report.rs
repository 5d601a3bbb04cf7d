//! Computing and storing a manifest's report: its inventory evaluated
//! against the advisory data its organization can see (its own groups'
//! advisories and imported records, and the server's public advisory
//! groups). Findings keep their history: a vulnerability that leaves the
//! report is resolved, not forgotten.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_store::vulns::{FindingRecord, ReportRecord};

use super::inventory::Stored;
use super::matching::{Decision, Evaluation, Record, evaluate, lookup_names};
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

    /// Evaluates an inventory for the organization `org`.
    pub(crate) async fn evaluate_packages(&self, org: &str, stored: Stored) -> Result<Evaluation> {
        let mut names: Vec<String> = stored.inventory.packages.iter().flat_map(lookup_names).collect();
        names.sort();
        names.dedup();
        let mut scopes = vec![org.to_owned()];
        scopes.extend(self.public_advisories.iter().map(|p| p.as_str().to_owned()));
        let mut records: Vec<Arc<Record>> = Vec::new();
        let mut misses = Vec::new();
        for c in self.store.feed_candidates(&names, &scopes).await? {
            if !self.advisories_apply(&c.parent_uid, org) {
                continue;
            }
            let k = format!("{}\n{}\n{}", c.parent_uid, c.id, c.digest);
            match self.vulns.records.get(&k) {
                Some(r) => records.push(r),
                None => misses.push((k, c)),
            }
        }
        // Parsing records is CPU work: off the async workers.
        let parsed = self
            .cpu(move || {
                misses
                    .into_iter()
                    .filter_map(|(k, c)| Record::parse(&c).map(|r| (k, Arc::new(r))))
                    .collect::<Vec<_>>()
            })
            .await?;
        for (k, r) in parsed {
            self.vulns.records.insert(k, r.clone());
            records.push(r);
        }
        records.sort_by(|a, b| (&a.group, &a.id).cmp(&(&b.group, &b.id)));
        records.dedup_by(|a, b| a.group == b.group && a.id == b.id);
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
        self.cpu(move || evaluate(&stored.inventory.packages, &records, &decisions))
            .await
    }

    /// Computes and stores a manifest's report (if it has an inventory).
    pub(crate) async fn build_report(self: &Arc<Self>, repo: &str, digest: &str) -> Result<()> {
        let Some(inv) = self.store.get_inventory(repo, digest).await? else {
            return Ok(());
        };
        if inv.status != "ready" {
            // An image whose packages can no longer be read has no open
            // findings (they would linger in counts and affected images).
            let record = ReportRecord {
                repo_uid: repo.to_owned(),
                digest: digest.to_owned(),
                report: serde_json::to_string(&Evaluation::default()).map_err(Error::internal)?,
                data_time: 0,
                create_time: self.clock.now_millis(),
            };
            return self.store.put_report(&record, &[]).await;
        }
        let start = std::time::Instant::now();
        let stored: Stored = serde_json::from_str(&inv.document).map_err(Error::internal)?;
        let packages = stored.inventory.packages.len();
        let org = repo.split('/').next().unwrap_or(repo).to_owned();
        let eval = self.evaluate_packages(&org, stored).await?;
        let now = self.clock.now_millis();
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
        let findings: Vec<FindingRecord> = findings.into_values().collect();
        self.store.put_report(&record, &findings).await?;
        tracing::info!(
            target: "ward::vulns",
            repo,
            digest,
            packages,
            matches = eval.matches.len(),
            ms = start.elapsed().as_millis() as u64,
            "report computed"
        );
        Ok(())
    }
}

/// Orders severity names as `ward_core::severity::Severity` does.
pub(crate) fn severity_rank(s: &str) -> ward_core::severity::Severity {
    ward_core::severity::Severity::parse(s).unwrap_or(ward_core::severity::Severity::Unknown)
}
