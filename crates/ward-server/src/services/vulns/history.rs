//! Reports over time, from each finding's history (first seen, resolved)
//! and each tag's history (which digest it pointed at when): counts by day
//! per repo and tag (`ListVulnCountReports`, cumulative or not) and the
//! vulnerabilities resolved in given image tags day by day
//! (`ListResolvedVulnsReports`).

use std::collections::{BTreeMap, BTreeSet};

use ward_core::rpc;
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_proto::Timestamp;
use ward_store::registry::{MAX_TAG_HISTORY, TAG_TYPE};
use ward_store::vulns::FindingRecord;

use crate::authz::Caller;
use crate::ward::Ward;

const DAY_MS: i64 = 24 * 60 * 60 * 1000;
/// Most days one request covers.
pub const MAX_DAYS: i64 = 366;
/// Most (repo, tag) pairs one request names.
pub const MAX_REFS: usize = 50;
/// Days covered when the request names no range.
const DEFAULT_DAYS: i64 = 30;

/// A vulnerability as a day's report lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DayVuln {
    pub id: String,
    pub aliases: Vec<String>,
    pub severity: String,
}

/// One tag's days: `(day start, open vulnerabilities at the day's end)`.
pub struct TagDays {
    pub repo: String,
    pub tag: String,
    pub days: Vec<(i64, Option<String>, BTreeMap<String, DayVuln>)>,
}

/// The days `[from, to]` covers, each as its start (ms, UTC).
pub fn days(from: Option<&Timestamp>, to: Option<&Timestamp>, now: i64) -> Result<Vec<i64>> {
    // Times outside [epoch, now] are clamped (and never overflow).
    let to = to.map(Timestamp::to_millis).unwrap_or(now).clamp(0, now);
    let from = from
        .map(Timestamp::to_millis)
        .unwrap_or(to.saturating_sub((DEFAULT_DAYS - 1) * DAY_MS))
        .clamp(0, now);
    if from > to {
        // An empty range: no days.
        return Ok(Vec::new());
    }
    // A longer range is cut to the MAX_DAYS days that end at `to`.
    let last = to.div_euclid(DAY_MS);
    let first = from.div_euclid(DAY_MS).max(last - MAX_DAYS + 1);
    Ok((first..=last).map(|d| d * DAY_MS).collect())
}

/// Findings of a digest open at `t`.
fn open_at(findings: &[FindingRecord], digest: &str, t: i64) -> BTreeMap<String, DayVuln> {
    findings
        .iter()
        .filter(|f| f.digest == digest && f.first_seen <= t && f.resolved_at.is_none_or(|r| r > t))
        .map(|f| {
            (
                f.vuln_id.clone(),
                DayVuln {
                    id: f.vuln_id.clone(),
                    aliases: f.aliases.clone(),
                    severity: f.severity.clone(),
                },
            )
        })
        .collect()
}

/// Most organizations a bare repo name is looked up in.
const MAX_NAME_ORGS: usize = 64;

impl Ward {
    /// A repo as the SDK's `repo` fields name it ("the name of the repo"):
    /// its uid; its registry path `<organization>/<name>` (the organization
    /// by uid or by name, as `/v2/` reads it); or its bare name, when
    /// exactly one of the organizations the caller has bindings in has a
    /// repo of that name (several: INVALID_ARGUMENT on `field`, asking for
    /// the path). Then `rule` at the repo; NOT_FOUND for what the caller may
    /// not see.
    pub(crate) async fn repo_by_ref(
        &self,
        caller: &Caller,
        rule: &rpc::Rule,
        field: &str,
        raw: &str,
    ) -> Result<ward_store::registry::RepoRecord> {
        let not_found = || Error::not_found(ward_store::registry::REPO_TYPE, raw);
        if let Ok(uid) = Uidp::parse(field, raw) {
            return self.authorized_repo(caller, rule, &uid).await;
        }
        // Whether the caller may see a repo found by name: one it may not
        // is as absent as a name that names nothing (no uid in the answer,
        // and never counted towards "several").
        let visible = |r: &ward_store::registry::RepoRecord| {
            Uidp::parse(field, &r.uid)
                .is_ok_and(|uid| !matches!(self.authorize(caller, rule, &uid), Err(Error::NotFound { .. })))
        };
        let found = if raw.contains('/') {
            let target = self.oci_target(caller, raw).await.map_err(|e| {
                if e.status >= 500 {
                    Error::internal(e.message)
                } else {
                    not_found()
                }
            })?;
            target.repo.filter(visible).ok_or_else(not_found)?
        } else {
            let mut found = Vec::new();
            if caller.is_admin {
                // The server's admin sees every organization: two tell
                // "exactly one" from "more than one".
                let q = ward_core::listing::ListQuery {
                    name: Some(raw.to_owned()),
                    page_size: 2,
                    ..Default::default()
                };
                found = self.store.list_repos(&q).await?.items;
            } else {
                let orgs = caller.organizations();
                if orgs.len() > MAX_NAME_ORGS {
                    return Err(Error::invalid(
                        field,
                        format!(
                            "a bare repo name is looked up in at most {MAX_NAME_ORGS} organizations: give <organization>/<name> or the repo's uid"
                        ),
                    ));
                }
                for org in orgs {
                    found.extend(self.store.find_repo(org, raw).await?.filter(visible));
                }
            }
            match found.len() {
                0 => return Err(not_found()),
                1 => found.remove(0),
                n => {
                    return Err(Error::invalid(
                        field,
                        format!(
                            "{n} repos you can see are named {}: give <organization>/<name> or the repo's uid",
                            ward_core::names::echo(raw)
                        ),
                    ));
                }
            }
        };
        let uid = Uidp::parse(field, &found.uid)?;
        self.authorized_repo(caller, rule, &uid).await
    }

    /// `repo:tag` after `rule` at the repo (NOT_FOUND when either is not
    /// there for the caller; without a tag, only the repo is checked: it
    /// names no days).
    /// Each repo spelling is resolved once per request (`seen`).
    async fn visible_tag(
        &self,
        caller: &Caller,
        rule: &rpc::Rule,
        field: &str,
        (repo, tag): (&str, &str),
        seen: &mut std::collections::HashMap<String, ward_store::registry::RepoRecord>,
    ) -> Result<ward_store::registry::RepoRecord> {
        let r = match seen.get(repo) {
            Some(r) => r.clone(),
            None => {
                let r = self.repo_by_ref(caller, rule, field, repo).await?;
                seen.insert(repo.to_owned(), r.clone());
                r
            }
        };
        if !tag.is_empty() {
            self.store
                .find_tag(&r.uid, tag)
                .await?
                .ok_or_else(|| Error::not_found(TAG_TYPE, tag))?;
        }
        Ok(r)
    }

    /// Each day's open vulnerabilities of `repo:tag` (the digest it pointed
    /// at the day's end), after `rule` at the repo.
    pub(crate) async fn tag_days(
        &self,
        r: &ward_store::registry::RepoRecord,
        repo: &str,
        tag: &str,
        days: &[i64],
    ) -> Result<TagDays> {
        let t = self
            .store
            .find_tag(&r.uid, tag)
            .await?
            .ok_or_else(|| Error::not_found(TAG_TYPE, tag))?;
        let tag_uid = Uidp::parse("tag", &t.uid)?;
        let end = days.last().map_or(0, |d| d + DAY_MS - 1);
        let history = self.store.tag_history(&tag_uid, 0, end, MAX_TAG_HISTORY).await?;
        let at = |ms: i64| -> Option<String> {
            history
                .iter()
                .take_while(|h| h.update_time <= ms)
                .last()
                .map(|h| h.digest.clone())
                .filter(|d| !d.is_empty())
        };
        let mut digests: Vec<String> = days.iter().filter_map(|d| at(d + DAY_MS - 1)).collect();
        digests.sort();
        digests.dedup();
        let findings = self.store.findings_of(&r.uid, &digests).await?;
        let now = self.clock.now_millis();
        let days = days
            .iter()
            .map(|&d| {
                let t = (d + DAY_MS - 1).min(now);
                let digest = at(t);
                let open = digest
                    .as_deref()
                    .map(|dg| open_at(&findings, dg, t))
                    .unwrap_or_default();
                (d, digest, open)
            })
            .collect();
        Ok(TagDays {
            repo: repo.to_owned(),
            tag: tag.to_owned(),
            days,
        })
    }

    /// `ListVulnCountReports` and, `cumulative`, `ListCumulativeVulnCountReports`.
    pub async fn list_vuln_counts(
        &self,
        caller: &Caller,
        f: ward_proto::registry::VulnCountReportFilter,
        cumulative: bool,
    ) -> Result<ward_proto::registry::VulnCountReportList> {
        use ward_proto::registry::{VulnCount, VulnCountReport, VulnCountReportList};
        // A pair without a repo names nothing.
        let mut refs: Vec<(String, String)> = f
            .references
            .iter()
            .filter(|r| !r.repo.is_empty())
            .map(|r| (r.repo.clone(), r.tag.clone()))
            .collect();
        if !f.repo.is_empty() {
            refs.insert(0, (f.repo.clone(), f.tag.clone()));
        }
        if refs.is_empty() {
            return Ok(VulnCountReportList { items: Vec::new() });
        }
        if refs.len() > MAX_REFS {
            return Err(Error::invalid(
                "references",
                format!("at most {MAX_REFS} repo and tag pairs"),
            ));
        }
        // What the caller may not see is NOT_FOUND before any other answer.
        let (mut repos, mut seen) = (Vec::with_capacity(refs.len()), Default::default());
        for (i, (repo, tag)) in refs.iter().enumerate() {
            let field = if i == 0 && !f.repo.is_empty() {
                "repo"
            } else {
                "references.repo"
            };
            repos.push(
                self.visible_tag(caller, &rpc::LIST_VULN_COUNTS, field, (repo, tag), &mut seen)
                    .await?,
            );
        }
        let days = days(f.from.as_ref(), f.to.as_ref(), self.clock.now_millis())?;
        let mut items = Vec::new();
        if days.is_empty() {
            return Ok(VulnCountReportList { items });
        }
        for ((repo, tag), r) in refs.into_iter().zip(&repos).filter(|((_, t), _)| !t.is_empty()) {
            let td = self.tag_days(r, &repo, &tag, &days).await?;
            let mut seen: BTreeMap<String, DayVuln> = BTreeMap::new();
            for (day, digest, open) in td.days {
                let counted = if cumulative {
                    seen.extend(open);
                    seen.clone()
                } else {
                    open
                };
                let mut by: BTreeMap<i32, Vec<String>> = BTreeMap::new();
                for v in counted.values() {
                    by.entry(severity_number(&v.severity)).or_default().push(v.id.clone());
                }
                let ids = |n: i32| by.get(&n).cloned().unwrap_or_default();
                let size_bytes = match &digest {
                    Some(d) => self.image_size(&r.uid, d).await?,
                    None => 0,
                };
                items.push(VulnCountReport {
                    repo: td.repo.clone(),
                    tag: td.tag.clone(),
                    date: Some(Timestamp::from_millis(day)),
                    vuln_counts: by
                        .iter()
                        .map(|(s, v)| VulnCount {
                            severity: *s,
                            count: i32::try_from(v.len()).unwrap_or(i32::MAX),
                        })
                        .collect(),
                    size_bytes,
                    cve_ids: counted.keys().cloned().collect(),
                    low_cve_ids: ids(1),
                    med_cve_ids: ids(2),
                    high_cve_ids: ids(3),
                    crit_cve_ids: ids(4),
                    negligible_cve_ids: ids(5),
                    unknown_cve_ids: ids(0),
                });
            }
        }
        Ok(VulnCountReportList { items })
    }

    /// The bytes the image's manifest declares (config and layers).
    async fn image_size(&self, repo: &str, digest: &str) -> Result<i64> {
        let Some(m) = self.store.get_manifest(repo, digest).await? else {
            return Ok(0);
        };
        let v: serde_json::Value = serde_json::from_slice(&m.content).unwrap_or_default();
        let size = |d: &serde_json::Value| d.get("size").and_then(serde_json::Value::as_i64).unwrap_or(0).max(0);
        Ok(v.get("layers")
            .and_then(serde_json::Value::as_array)
            .into_iter()
            .flatten()
            .map(size)
            .fold(v.get("config").map(size).unwrap_or(0), i64::saturating_add))
    }

    /// Per day, the vulnerabilities the tags held at the day's start (the
    /// previous day's end) and no longer at its end; days with none are
    /// left out.
    pub(crate) async fn resolved_vulns(
        &self,
        caller: &Caller,
        refs: Vec<(String, Vec<String>)>,
        from: Option<&Timestamp>,
        to: Option<&Timestamp>,
    ) -> Result<Vec<(i64, Vec<DayVuln>)>> {
        let pairs: Vec<(String, String)> = refs
            .into_iter()
            .filter(|(r, _)| !r.is_empty())
            .flat_map(|(r, tags)| tags.into_iter().map(move |t| (r.clone(), t)))
            .collect();
        if pairs.is_empty() {
            return Ok(Vec::new());
        }
        if pairs.len() > MAX_REFS {
            return Err(Error::invalid("image_refs", format!("at most {MAX_REFS} tags at once")));
        }
        let (mut repos, mut seen) = (Vec::with_capacity(pairs.len()), Default::default());
        for (repo, tag) in &pairs {
            repos.push(
                self.visible_tag(
                    caller,
                    &rpc::LIST_RESOLVED_VULNS,
                    "image_refs.repo",
                    (repo, tag),
                    &mut seen,
                )
                .await?,
            );
        }
        let days = days(from, to, self.clock.now_millis())?;
        if days.is_empty() {
            return Ok(Vec::new());
        }
        // One more day before the range: its end is the first day's start.
        let mut with_before = vec![days[0] - DAY_MS];
        with_before.extend(&days);
        let mut resolved: BTreeMap<i64, BTreeMap<String, DayVuln>> = BTreeMap::new();
        for ((repo, tag), r) in pairs.into_iter().zip(&repos).filter(|((_, t), _)| !t.is_empty()) {
            let td = self.tag_days(r, &repo, &tag, &with_before).await?;
            for w in td.days.windows(2) {
                let (before, (day, _, after)) = (&w[0].2, (&w[1].0, &w[1].1, &w[1].2));
                for (id, v) in before {
                    if !after.contains_key(id) {
                        resolved.entry(*day).or_default().insert(id.clone(), v.clone());
                    }
                }
            }
        }
        Ok(resolved
            .into_iter()
            .map(|(d, vs)| (d, vs.into_values().collect()))
            .collect())
    }
}

impl Ward {
    pub async fn list_resolved_vulns_reports(
        &self,
        caller: &Caller,
        req: ward_proto::advisory::v2::ListResolvedVulnsReportsRequest,
    ) -> Result<ward_proto::advisory::v2::ListResolvedVulnsReportsResponse> {
        // What the v2 SDK marks REQUIRED (no `image_refs` stays an empty
        // answer: the OpenAPI document cannot say how to send one).
        if req.image_refs.iter().any(|r| r.repo.is_empty()) {
            return Err(Error::invalid("image_refs.repo", "every image names its repo"));
        }
        for (field, t) in [("start_time", &req.start_time), ("end_time", &req.end_time)] {
            if t.is_none() {
                return Err(Error::invalid(field, "the range's first and last days are required"));
            }
        }
        self.resolved_vulns_reports(caller, req).await
    }

    /// `ListResolvedVulnsReports` without v2's required fields: v1's
    /// `from`/`to` are optional (the last 30 days), and an image without a
    /// repo names nothing there.
    pub async fn resolved_vulns_reports(
        &self,
        caller: &Caller,
        req: ward_proto::advisory::v2::ListResolvedVulnsReportsRequest,
    ) -> Result<ward_proto::advisory::v2::ListResolvedVulnsReportsResponse> {
        use ward_proto::advisory::v2 as a;
        // "If empty, defaults to 'latest'", as the SDK says of `tags`.
        let refs = req
            .image_refs
            .into_iter()
            .map(|r| {
                let tags = if r.tags.is_empty() {
                    vec!["latest".to_owned()]
                } else {
                    r.tags
                };
                (r.repo, tags)
            })
            .collect();
        let days = self
            .resolved_vulns(caller, refs, req.start_time.as_ref(), req.end_time.as_ref())
            .await?;
        Ok(a::ListResolvedVulnsReportsResponse {
            resolved_vulns_reports: days
                .into_iter()
                .map(|(d, vs)| a::ResolvedVulnsReport {
                    date: Some(Timestamp::from_millis(d)),
                    resolved_vulns: vs
                        .into_iter()
                        .map(|v| a::ResolvedVuln {
                            id: v.id,
                            aliases: v.aliases,
                            cvss_severities: Vec::new(),
                        })
                        .collect(),
                })
                .collect(),
        })
    }
}

/// `registry.Vulnerability.Severity` of a severity name.
fn severity_number(s: &str) -> i32 {
    match s {
        "low" => 1,
        "medium" => 2,
        "high" => 3,
        "critical" => 4,
        "negligible" => 5,
        _ => 0,
    }
}

/// The ids a set of day vulnerabilities answers to (for tests and callers).
pub fn ids(v: &[DayVuln]) -> BTreeSet<&str> {
    v.iter().map(|d| d.id.as_str()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(id: &str, first: i64, resolved: Option<i64>) -> FindingRecord {
        FindingRecord {
            repo_uid: "r".into(),
            digest: "d".into(),
            vuln_id: id.into(),
            severity: "high".into(),
            aliases: vec![],
            first_seen: first,
            resolved_at: resolved,
        }
    }

    #[test]
    fn open_findings_at_a_time() {
        let f = [
            finding("A", 10, None),
            finding("B", 10, Some(20)),
            finding("C", 30, None),
        ];
        let keys = |t| open_at(&f, "d", t).into_keys().collect::<Vec<_>>();
        assert_eq!(keys(5), Vec::<String>::new());
        assert_eq!(keys(15), ["A", "B"]);
        assert_eq!(keys(20), ["A"]);
        assert_eq!(keys(35), ["A", "C"]);
        assert!(open_at(&f, "other", 35).is_empty());
    }

    #[test]
    fn day_ranges_are_bounded() {
        let now = 400 * DAY_MS + 5;
        assert_eq!(days(None, None, now).unwrap().len(), DEFAULT_DAYS as usize);
        let from = Timestamp::from_millis(0);
        let cut = days(Some(&from), None, now).unwrap();
        assert_eq!(cut.len(), MAX_DAYS as usize, "cut to {MAX_DAYS} days");
        assert_eq!(cut.last(), Some(&(400 * DAY_MS)), "ending at `to`");
        let to = Timestamp::from_millis(DAY_MS * 2 + 1);
        assert_eq!(days(Some(&from), Some(&to), now).unwrap(), vec![0, DAY_MS, 2 * DAY_MS]);
        assert!(days(Some(&to), Some(&from), now).unwrap().is_empty(), "an empty range");
    }
}
