//! Matching an inventory against advisory data: imported OSV records (any
//! ecosystem, their `ranges` and `versions` honoured exactly) and Ward's own
//! advisories, whose approved events are the team's decisions.
//!
//! Per package, every hit (a record whose affected range holds the
//! installed version, or an advisory naming the package) is grouped with
//! the hits it shares an id or alias with: one vulnerability. A decision in
//! the group then rules: an approved false-positive determination removes
//! the match (a `not_affected` statement), an approved fix at or below the
//! installed version removes it (`fixed`), one above gives the fix version;
//! an advisory with only pending events shows as under investigation and
//! decides nothing.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use ward_core::osv_range::{self, Range};
use ward_core::severity::{Severity, cvss_score};
use ward_core::versions::Ecosystem;
use ward_sbom::Package;
use ward_store::advisories::{APPROVED, AdvisoryRecord, EventRecord, PENDING};
use ward_store::vulns::FeedCandidate;

/// An imported OSV record, parsed once (and cached by group, id and digest).
#[derive(Debug)]
pub struct Record {
    pub group: String,
    pub id: String,
    pub aliases: Vec<String>,
    pub summary: String,
    pub details: String,
    /// `(score, version)` of each CVSS vector.
    pub cvss: Vec<(f64, &'static str)>,
    pub severity: Severity,
    pub urls: Vec<String>,
    pub affected: Vec<Affected>,
    pub withdrawn: bool,
    pub update_time: i64,
}

#[derive(Debug)]
pub struct Affected {
    pub ecosystem: String,
    pub name: String,
    pub ranges: Vec<Range>,
    pub versions: Vec<String>,
}

/// Longest summary or details a report repeats.
const MAX_TEXT: usize = 4096;

fn cut(s: &str) -> String {
    if s.len() <= MAX_TEXT {
        return s.to_owned();
    }
    let mut end = MAX_TEXT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

impl Record {
    /// Parses a stored record's body (imports checked it is an OSV object).
    pub fn parse(c: &FeedCandidate, body: &str) -> Option<Record> {
        let v: Value = serde_json::from_str(body).ok()?;
        let mut cvss = Vec::new();
        let mut severity = Severity::Unknown;
        for s in v.get("severity").and_then(Value::as_array).into_iter().flatten() {
            if let Some((score, version)) = s.get("score").and_then(Value::as_str).and_then(cvss_score) {
                cvss.push((score, version));
                severity = severity.max(Severity::from_score(score));
            }
        }
        if severity == Severity::Unknown
            && let Some(s) = v
                .get("database_specific")
                .and_then(|d| d.get("severity"))
                .and_then(Value::as_str)
                .and_then(Severity::parse)
        {
            severity = s;
        }
        let affected = v
            .get("affected")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|a| {
                let p = a.get("package")?;
                Some(Affected {
                    ecosystem: p.get("ecosystem")?.as_str()?.to_owned(),
                    name: p.get("name")?.as_str()?.to_owned(),
                    ranges: a.get("ranges").map(osv_range::parse_ranges).unwrap_or_default(),
                    versions: strings(a.get("versions")),
                })
            })
            .collect();
        Some(Record {
            group: c.parent_uid.clone(),
            id: c.id.clone(),
            aliases: strings(v.get("aliases")),
            summary: cut(v.get("summary").and_then(Value::as_str).unwrap_or("")),
            details: cut(v.get("details").and_then(Value::as_str).unwrap_or("")),
            cvss,
            severity,
            urls: v
                .get("references")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|r| r.get("url").and_then(Value::as_str).map(str::to_owned))
                .take(20)
                .collect(),
            affected,
            withdrawn: c.withdrawn,
            update_time: c.update_time,
        })
    }

    /// Bytes the record holds (its cache weight).
    pub fn weight(&self) -> usize {
        let ranges: usize = self
            .affected
            .iter()
            .map(|a| a.name.len() + a.ecosystem.len() + a.versions.iter().map(String::len).sum::<usize>() + 64)
            .sum();
        self.summary.len() + self.details.len() + self.aliases.iter().map(String::len).sum::<usize>() + ranges + 128
    }
}

/// What Ward's own advisory decided, from its events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// An approved fix at this version.
    Fixed(String),
    /// An approved false-positive determination: the OpenVEX justification.
    NotAffected(String),
    /// Approved: the fix is not planned.
    WontFix,
    /// Approved: affected, no fix yet (detection, true positive, pending
    /// upstream fix, analysis not planned).
    Affected,
    /// Only pending events: under investigation, nothing decided.
    UnderInvestigation,
}

/// An advisory's decision about its artifact (and component).
#[derive(Clone, Debug)]
pub struct Decision {
    pub advisory_id: String,
    pub ids: Vec<String>,
    pub names: Vec<String>,
    /// The purl type the advisory is about ("apk"), when it names one.
    pub purl_type: Option<String>,
    pub verdict: Verdict,
    pub severity: Severity,
    pub update_time: i64,
}

/// The OpenVEX justification of a false-positive determination type.
fn justification(payload: &Value) -> String {
    let t = payload
        .get("falsePositiveDetermination")
        .and_then(|f| f.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("");
    match t {
        "TYPE_COMPONENT_VULNERABILITY_MISMATCH" | "TYPE_VULNERABLE_CODE_VERSION_NOT_USED" => "component_not_present",
        "TYPE_VULNERABLE_CODE_NOT_IN_EXECUTION_PATH" => "vulnerable_code_not_in_execute_path",
        "TYPE_VULNERABLE_CODE_CANNOT_BE_CONTROLLED_BY_ADVERSARY" => "vulnerable_code_cannot_be_controlled_by_adversary",
        "TYPE_INLINE_MITIGATIONS_EXIST" => "inline_mitigations_already_exist",
        _ => "vulnerable_code_not_present",
    }
    .to_owned()
}

impl Decision {
    /// The decision of an advisory from its events (oldest first). None when
    /// it has no events that say anything.
    pub fn of(a: &AdvisoryRecord, events: &[&EventRecord]) -> Option<Decision> {
        let latest = events
            .iter()
            .filter(|e| e.review_state == APPROVED)
            .max_by(|x, y| (x.event_time, &x.uid).cmp(&(y.event_time, &y.uid)));
        let verdict = match latest {
            Some(e) => {
                let payload: Value = serde_json::from_str(&e.payload).unwrap_or(Value::Null);
                match e.kind {
                    3 => Verdict::Fixed(
                        payload
                            .get("fixed")
                            .and_then(|f| f.get("fixedVersion"))
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned(),
                    ),
                    4 => Verdict::NotAffected(justification(&payload)),
                    // Patched: fixed from the first patched version, or
                    // (none named) mitigated in every version.
                    8 => match payload
                        .get("patched")
                        .and_then(|p| p.get("patchedVersions"))
                        .and_then(Value::as_array)
                        .and_then(|v| v.first())
                        .and_then(Value::as_str)
                    {
                        Some(v) => Verdict::Fixed(v.to_owned()),
                        None => Verdict::NotAffected("inline_mitigations_already_exist".to_owned()),
                    },
                    6 => Verdict::WontFix,
                    _ => Verdict::Affected,
                }
            }
            None if events.iter().any(|e| e.review_state == PENDING) => Verdict::UnderInvestigation,
            None => return None,
        };
        if matches!(&verdict, Verdict::Fixed(v) if v.is_empty()) {
            return None;
        }
        let mut ids = vec![a.advisory_id.clone()];
        ids.extend(a.alias_list());
        let severity = serde_json::from_str::<Vec<Value>>(&a.severities)
            .unwrap_or_default()
            .iter()
            .filter_map(|s| s.get("score").and_then(Value::as_str))
            .filter_map(|s| {
                cvss_score(s)
                    .map(|(n, _)| Severity::from_score(n))
                    .or_else(|| Severity::parse(s))
            })
            .max()
            .unwrap_or(Severity::Unknown);
        // The origin package too: an advisory is about its origin's source,
        // so every package built from it (its subpackages, at the origin's
        // version) is concerned, whichever subpackage a scan named.
        let mut names: Vec<String> = [&a.artifact_name, &a.component_name, &a.origin]
            .into_iter()
            .filter(|n| !n.is_empty())
            .cloned()
            .collect();
        names.sort();
        names.dedup();
        let purl_type = match a.artifact_type.as_str() {
            "" => None,
            t => Some(t.to_ascii_lowercase()),
        };
        Some(Decision {
            advisory_id: a.advisory_id.clone(),
            ids,
            names,
            purl_type,
            verdict,
            severity,
            update_time: a.update_time,
        })
    }
}

/// One vulnerability in one package.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Match {
    pub id: String,
    pub aliases: Vec<String>,
    /// The records and advisories it came from.
    pub sources: Vec<String>,
    pub summary: String,
    pub details: String,
    pub severity: String,
    pub cvss: Vec<(String, String)>,
    pub urls: Vec<String>,
    pub package: Package,
    pub fix_versions: Vec<String>,
    /// `tenant.Fix.State`: 0 unknown (under investigation), 1 fixed (a fix
    /// exists), 2 not fixed, 3 won't fix.
    pub fix_state: i32,
    /// Ward advisory id → its state ("fixed", "affected", "under_investigation", …).
    pub advisories: BTreeMap<String, String>,
}

/// An OpenVEX statement about one vulnerability in one package.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Statement {
    pub id: String,
    pub aliases: Vec<String>,
    pub purl: String,
    /// "affected", "fixed", "not_affected" or "under_investigation".
    pub status: String,
    pub justification: Option<String>,
    /// The advisory whose decision this is.
    pub advisory: Option<String>,
}

/// What one evaluation found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    pub matches: Vec<Match>,
    pub statements: Vec<Statement>,
    /// Newest change of the advisory data used (ms).
    pub data_time: i64,
    /// Packages whose version the ecosystem cannot order (matched by
    /// `versions` lists only).
    pub unorderable: Vec<String>,
}

impl Evaluation {
    /// Replaces what this evaluation says about the packages `purls` with
    /// `sub`, an evaluation of just those packages against current data.
    /// Each package is judged on its own, so the result is what evaluating
    /// every package again would give.
    pub fn replace_packages(&mut self, purls: &HashSet<&str>, sub: &Evaluation) {
        self.matches.retain(|m| !purls.contains(m.package.purl.as_str()));
        self.matches.extend(sub.matches.iter().cloned());
        self.matches
            .sort_by(|a, b| (&a.id, &a.package.purl).cmp(&(&b.id, &b.package.purl)));
        self.statements.retain(|s| !purls.contains(s.purl.as_str()));
        self.statements.extend(sub.statements.iter().cloned());
        self.statements.sort_by(|a, b| (&a.id, &a.purl).cmp(&(&b.id, &b.purl)));
        self.unorderable.retain(|p| !purls.contains(p.as_str()));
        self.unorderable.extend(sub.unorderable.iter().cloned());
        self.unorderable.sort();
        self.unorderable.dedup();
        self.data_time = self.data_time.max(sub.data_time);
    }
}

/// Whether an OSV ecosystem is the package's: the same ordering, and for
/// distribution packages the same distribution (the purl namespace) and,
/// when both name one, the same release (`Debian:12` and the purl's
/// `distro=debian-12`; `Alpine:v3.18` and `distro=alpine-3.18.4`).
fn ecosystem_fits(osv: &str, eco: Ecosystem, p: &Package) -> bool {
    if Ecosystem::from_osv(osv) != Some(eco) {
        return false;
    }
    match eco {
        Ecosystem::Apk | Ecosystem::Debian | Ecosystem::Rpm => {
            // The release is the first part that is a number: Alpine's
            // `Alpine:v3.18`, Debian's `Debian:12`, and Ubuntu's
            // `Ubuntu:22.04:LTS` and `Ubuntu:Pro:18.04:LTS` as Canonical
            // publishes them.
            let mut parts = osv.split(':');
            let distro = parts.next().unwrap_or_default().to_ascii_lowercase();
            let release = parts
                .map(|r| r.trim_start_matches('v'))
                .find(|r| r.starts_with(|c: char| c.is_ascii_digit()));
            let same_distro = match p.namespace.as_deref() {
                Some(ns) if !ns.is_empty() => {
                    let ns = ns.to_ascii_lowercase();
                    distro == ns || distro.replace(' ', "") == ns
                }
                _ => true,
            };
            let qualifier = purl_qualifier(&p.purl, "distro");
            let same_release = match (release, qualifier.as_deref().and_then(|d| d.split_once('-'))) {
                (Some(r), Some((_, have))) if !r.is_empty() => have == r || have.starts_with(&format!("{r}.")),
                _ => true,
            };
            same_distro && same_release
        }
        _ => true,
    }
}

/// A qualifier of a purl (`None` if the purl does not parse or lacks it).
fn purl_qualifier(purl: &str, key: &str) -> Option<String> {
    ward_sbom::Purl::parse(purl).ok()?.qualifier(key).map(str::to_owned)
}

/// The spellings a package name is indexed and looked up under: as
/// written, lowercased, and PEP 503-normalized.
pub fn name_variants(name: &str) -> Vec<String> {
    let mut v = vec![name.to_owned(), name.to_ascii_lowercase(), normalize_pypi(name)];
    v.sort();
    v.dedup();
    v
}

/// Names a package may be listed under in advisory data: as inventoried,
/// and in its purl's normalized form.
pub fn lookup_names(p: &Package) -> Vec<String> {
    // A package is identified by its purl: an SBOM's own name for the
    // component (which may say anything) is not looked up.
    let purl = ward_sbom::Purl::parse(&p.purl).ok();
    let name = purl.as_ref().map_or(p.name.as_str(), |u| u.name.as_str());
    let mut v = name_variants(name);
    // The purl's normalized name (`jinja2`) and the name as written
    // (`Jinja2`, as records may name it too) are one package.
    if name != p.name && normalize_pypi(name) == normalize_pypi(&p.name) {
        v.extend(name_variants(&p.name));
    }
    // A distribution's binary package is also known by its source package
    // (libssl3 by openssl), which advisories name.
    if let Some(upstream) = purl.as_ref().and_then(|u| u.qualifier("upstream")) {
        v.extend(name_variants(upstream));
    }
    if let Some(ns) = &p.namespace
        && matches!(p.purl_type.as_str(), "npm" | "golang" | "maven")
    {
        let sep = if p.purl_type == "maven" { ":" } else { "/" };
        v.push(format!("{}{sep}{}", ns.replace("%40", "@"), name));
    }
    v.sort();
    v.dedup();
    v
}

fn same_name(a: &str, names: &[String], p: &Package) -> bool {
    names.iter().any(|n| n == a) || (p.purl_type == "pypi" && names.contains(&normalize_pypi(a)))
}

/// A Python project name as PEP 503 compares them (`jw.util`, `JW__Util`
/// and `jw-util` are one): the purl parser's normalization.
pub use ward_sbom::pypi_normalize as normalize_pypi;

struct Hit<'a> {
    ids: BTreeSet<String>,
    record: Option<&'a Record>,
    decision: Option<&'a Decision>,
    fixed: Vec<String>,
}

fn primary(ids: &BTreeSet<String>, hits: &[&Hit<'_>]) -> String {
    if let Some(cve) = ids.iter().find(|i| i.starts_with("CVE-")) {
        return cve.clone();
    }
    if let Some(r) = hits.iter().find_map(|h| h.record) {
        return r.id.clone();
    }
    ids.iter().next().cloned().unwrap_or_default()
}

/// The candidates (rows of records naming a package of the inventory) that
/// may apply to one of `packages`: a range or version list holds its
/// version, or its version cannot be ordered, or the row kept no ranges
/// (then only the body tells). A superset of the records [`evaluate`]
/// finds affecting, decided from the index's few bytes per row, so a
/// report parses only those records.
pub fn applicable<'c>(packages: &[Package], candidates: &'c [FeedCandidate]) -> Vec<&'c FeedCandidate> {
    #[derive(Deserialize)]
    struct Entry {
        #[serde(default)]
        ranges: Value,
        #[serde(default)]
        versions: Vec<Value>,
    }
    let mut by_name: HashMap<String, Vec<(usize, Ecosystem, Vec<String>)>> = HashMap::new();
    for (i, p) in packages.iter().enumerate() {
        let Some(eco) = Ecosystem::from_purl_type(&p.purl_type) else {
            continue;
        };
        let names = lookup_names(p);
        for n in &names {
            by_name.entry(n.clone()).or_default().push((i, eco, names.clone()));
        }
    }
    let mut keep: Vec<&FeedCandidate> = Vec::new();
    for c in candidates.iter().filter(|c| !c.withdrawn) {
        let Some(affected) = c.affected.as_deref() else {
            keep.push(c);
            continue;
        };
        // Typed first (no `Value` tree: thousands of rows per report), the
        // lenient `Value` reading for what it refuses.
        let parsed = osv_range::parse_affected(affected).or_else(|| {
            let entries: Vec<Entry> = serde_json::from_str(affected).ok()?;
            Some(
                entries
                    .into_iter()
                    .map(|e| {
                        let versions = e.versions.iter().filter_map(Value::as_str).map(str::to_owned).collect();
                        (osv_range::parse_ranges(&e.ranges), versions)
                    })
                    .collect::<Vec<(Vec<Range>, Vec<String>)>>(),
            )
        });
        let Some(parsed) = parsed else {
            keep.push(c);
            continue;
        };
        let low = c.name.to_ascii_lowercase();
        let mut hits = by_name.get(&c.name).into_iter().flatten();
        let mut low_hits = (low != c.name)
            .then(|| by_name.get(&low))
            .flatten()
            .into_iter()
            .flatten();
        let may = hits.by_ref().chain(low_hits.by_ref()).any(|(i, eco, names)| {
            let p = &packages[*i];
            same_name(&c.name, names, p)
                && ecosystem_fits(&c.ecosystem, *eco, p)
                && parsed
                    .iter()
                    .any(|(r, v)| osv_range::is_affected(*eco, &p.version, r, v) != Some(false))
        });
        if may {
            keep.push(c);
        }
    }
    keep.sort_by(|a, b| (&a.parent_uid, &a.id).cmp(&(&b.parent_uid, &b.id)));
    keep.dedup_by(|a, b| a.parent_uid == b.parent_uid && a.id == b.id);
    keep
}

/// Evaluates packages against records and decisions (already limited to
/// what the image's organization can see).
pub fn evaluate(packages: &[Package], records: &[Arc<Record>], decisions: &[Decision]) -> Evaluation {
    let mut by_name: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, r) in records.iter().enumerate() {
        for a in &r.affected {
            let mut names = vec![a.name.clone(), a.name.to_ascii_lowercase()];
            // A PyPI record may spell a project any way PEP 503 allows.
            if a.ecosystem.eq_ignore_ascii_case("pypi") {
                names.push(normalize_pypi(&a.name));
            }
            names.sort();
            names.dedup();
            for n in names {
                by_name.entry(n).or_default().push(i);
            }
        }
    }
    let mut decisions_by_name: HashMap<&str, Vec<&Decision>> = HashMap::new();
    for d in decisions {
        for n in &d.names {
            decisions_by_name.entry(n.as_str()).or_default().push(d);
        }
    }
    let mut out = Evaluation {
        data_time: records
            .iter()
            .map(|r| r.update_time)
            .chain(decisions.iter().map(|d| d.update_time))
            .max()
            .unwrap_or(0),
        ..Evaluation::default()
    };
    for p in packages {
        let Some(eco) = Ecosystem::from_purl_type(&p.purl_type) else {
            continue;
        };
        let mut hits: Vec<Hit<'_>> = Vec::new();
        let mut seen: BTreeSet<usize> = BTreeSet::new();
        let names = lookup_names(p);
        for n in &names {
            for &i in by_name.get(n).into_iter().flatten() {
                if !seen.insert(i) {
                    continue;
                }
                let r = &records[i];
                if r.withdrawn {
                    continue;
                }
                let mut affected = false;
                let mut fixed = Vec::new();
                for a in r
                    .affected
                    .iter()
                    .filter(|a| same_name(&a.name, &names, p) && ecosystem_fits(&a.ecosystem, eco, p))
                {
                    match osv_range::is_affected(eco, &p.version, &a.ranges, &a.versions) {
                        Some(true) => {
                            affected = true;
                            fixed.extend(osv_range::fixed_versions(eco, &p.version, &a.ranges));
                        }
                        Some(false) => {}
                        None => out.unorderable.push(p.purl.clone()),
                    }
                }
                if affected {
                    let mut ids: BTreeSet<String> = r.aliases.iter().cloned().collect();
                    ids.insert(r.id.clone());
                    hits.push(Hit {
                        ids,
                        record: Some(r),
                        decision: None,
                        fixed,
                    });
                }
            }
        }
        let mut ds: Vec<&Decision> = names
            .iter()
            .flat_map(|n| decisions_by_name.get(n.as_str()).into_iter().flatten().copied())
            .filter(|d| d.purl_type.as_deref().is_none_or(|t| t == p.purl_type))
            .collect();
        ds.sort_by(|a, b| a.advisory_id.cmp(&b.advisory_id));
        ds.dedup_by(|a, b| a.advisory_id == b.advisory_id);
        for d in ds {
            hits.push(Hit {
                ids: d.ids.iter().cloned().collect(),
                record: None,
                decision: Some(d),
                fixed: Vec::new(),
            });
        }
        for group in cluster(&hits) {
            judge(p, eco, &group, &mut out);
        }
    }
    out.unorderable.sort();
    out.unorderable.dedup();
    out.matches
        .sort_by(|a, b| (&a.id, &a.package.purl).cmp(&(&b.id, &b.package.purl)));
    out.statements.sort_by(|a, b| (&a.id, &a.purl).cmp(&(&b.id, &b.purl)));
    out
}

/// Groups hits that share an id or alias (transitively).
fn cluster<'h, 'a>(hits: &'h [Hit<'a>]) -> Vec<Vec<&'h Hit<'a>>> {
    let mut parent: Vec<usize> = (0..hits.len()).collect();
    fn find(p: &mut [usize], i: usize) -> usize {
        let mut r = i;
        while p[r] != r {
            r = p[r];
        }
        let mut j = i;
        while p[j] != r {
            let n = p[j];
            p[j] = r;
            j = n;
        }
        r
    }
    let mut owner: HashMap<&str, usize> = HashMap::new();
    for (i, h) in hits.iter().enumerate() {
        for id in &h.ids {
            match owner.get(id.as_str()) {
                Some(&j) => {
                    let (a, b) = (find(&mut parent, i), find(&mut parent, j));
                    parent[a] = b;
                }
                None => {
                    owner.insert(id, i);
                }
            }
        }
    }
    let mut groups: BTreeMap<usize, Vec<&Hit<'a>>> = BTreeMap::new();
    for (i, h) in hits.iter().enumerate() {
        let r = find(&mut parent, i);
        groups.entry(r).or_default().push(h);
    }
    groups.into_values().collect()
}

/// `versions` without repeats, in the ecosystem's order (`2.9.3` before
/// `2.10.1`); one it cannot order goes after those it can, by text. An
/// insertion sort: a partial order never panics it, and a vulnerability
/// has a handful of fixes.
fn in_version_order(eco: Ecosystem, versions: Vec<String>) -> Vec<String> {
    use std::cmp::Ordering;
    let before = |a: &str, b: &str| match (eco.compare(a, b), eco.compare(a, a), eco.compare(b, b)) {
        (Some(o), _, _) => o == Ordering::Less,
        (None, Some(_), None) => true,
        (None, None, Some(_)) => false,
        (None, _, _) => a < b,
    };
    let mut out: Vec<String> = Vec::with_capacity(versions.len());
    for v in versions {
        if out.contains(&v) {
            continue;
        }
        let at = out.iter().position(|o| before(&v, o)).unwrap_or(out.len());
        out.insert(at, v);
    }
    out
}

/// Decides one vulnerability of one package.
fn judge(p: &Package, eco: Ecosystem, group: &[&Hit<'_>], out: &mut Evaluation) {
    let ids: BTreeSet<String> = group.iter().flat_map(|h| h.ids.iter().cloned()).collect();
    let id = primary(&ids, group);
    let aliases: Vec<String> = ids.iter().filter(|i| **i != id).cloned().collect();
    let decisions: Vec<&Decision> = group.iter().filter_map(|h| h.decision).collect();
    let records: Vec<&Record> = group.iter().filter_map(|h| h.record).collect();
    let statement = |status: &str, justification: Option<String>, advisory: Option<&Decision>| Statement {
        id: id.clone(),
        aliases: aliases.clone(),
        purl: p.purl.clone(),
        status: status.to_owned(),
        justification,
        advisory: advisory.map(|d| d.advisory_id.clone()),
    };
    // A false-positive determination rules first, then a fix.
    if let Some(d) = decisions.iter().find(|d| matches!(d.verdict, Verdict::NotAffected(_))) {
        let Verdict::NotAffected(j) = &d.verdict else {
            unreachable!()
        };
        out.statements.push(statement("not_affected", Some(j.clone()), Some(d)));
        return;
    }
    let mut fix_versions: Vec<String> = Vec::new();
    let mut fix_state;
    let mut advisories = BTreeMap::new();
    // A fix the ecosystem can order comes before one it cannot.
    let orderable = |d: &&&Decision| matches!(&d.verdict, Verdict::Fixed(v) if eco.compare(v, v).is_some());
    let fixed = decisions
        .iter()
        .find(orderable)
        .or_else(|| decisions.iter().find(|d| matches!(d.verdict, Verdict::Fixed(_))));
    if let Some(d) = fixed {
        let Verdict::Fixed(v) = &d.verdict else { unreachable!() };
        match eco.compare(&p.version, v) {
            Some(std::cmp::Ordering::Less) => {
                fix_versions.push(v.clone());
                fix_state = 1;
                advisories.insert(d.advisory_id.clone(), "fixed".to_owned());
            }
            Some(_) => {
                out.statements.push(statement("fixed", None, Some(d)));
                return;
            }
            // A fix at a version the ecosystem cannot order (Wolfi's
            // `1.1.0-r1-r0`) decides nothing and is not offered as the fix:
            // the records' fixes, if any, are.
            None if eco.compare(v, v).is_none() => {
                fix_state = 2;
                advisories.insert(d.advisory_id.clone(), "fixed_unorderable".to_owned());
            }
            // The installed version cannot be ordered: the fix is offered.
            None => {
                fix_versions.push(v.clone());
                fix_state = 1;
                advisories.insert(d.advisory_id.clone(), "fixed".to_owned());
            }
        }
    } else if let Some(d) = decisions.iter().find(|d| d.verdict == Verdict::WontFix) {
        fix_state = 3;
        advisories.insert(d.advisory_id.clone(), "fix_not_planned".to_owned());
    } else if let Some(d) = decisions.iter().find(|d| d.verdict == Verdict::Affected) {
        fix_state = 2;
        advisories.insert(d.advisory_id.clone(), "affected".to_owned());
    } else if records.is_empty() {
        // Only advisories under investigation: shown, nothing decided.
        fix_state = 0;
    } else {
        fix_state = 2;
    }
    for d in decisions.iter().filter(|d| d.verdict == Verdict::UnderInvestigation) {
        advisories.insert(d.advisory_id.clone(), "under_investigation".to_owned());
    }
    if fix_versions.is_empty() && fix_state == 2 {
        for h in group {
            fix_versions.extend(h.fixed.iter().cloned());
        }
        fix_versions = in_version_order(eco, fix_versions);
        if !fix_versions.is_empty() {
            fix_state = 1;
        }
    }
    let severity = records
        .iter()
        .map(|r| r.severity)
        .chain(decisions.iter().map(|d| d.severity))
        .max()
        .unwrap_or(Severity::Unknown);
    let mut cvss: Vec<(String, String)> = records
        .iter()
        .flat_map(|r| r.cvss.iter().map(|(s, v)| (format!("{s:.1}"), (*v).to_owned())))
        .collect();
    cvss.sort();
    cvss.dedup();
    let first = records.first();
    let mut sources: Vec<String> = records
        .iter()
        .map(|r| r.id.clone())
        .chain(decisions.iter().map(|d| d.advisory_id.clone()))
        .collect();
    sources.sort();
    sources.dedup();
    let status = if fix_state == 0 {
        "under_investigation"
    } else {
        "affected"
    };
    out.statements.push(statement(status, None, decisions.first().copied()));
    out.matches.push(Match {
        id: id.clone(),
        aliases: aliases.clone(),
        sources,
        summary: first.map(|r| r.summary.clone()).unwrap_or_default(),
        details: first.map(|r| r.details.clone()).unwrap_or_default(),
        severity: severity.as_str().to_owned(),
        cvss,
        urls: first.map(|r| r.urls.clone()).unwrap_or_default(),
        package: p.clone(),
        fix_versions,
        fix_state,
        advisories,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use ward_sbom::Source;

    fn pkg(purl: &str, namespace: Option<&str>, name: &str, version: &str) -> Package {
        Package {
            name: name.into(),
            version: version.into(),
            purl: purl.into(),
            purl_type: purl[4..].split('/').next().unwrap().into(),
            namespace: namespace.map(str::to_owned),
            license: None,
            source: Source::Spdx,
            location: None,
        }
    }

    fn record(id: &str, aliases: &[&str], eco: &str, name: &str, introduced: &str, fixed: &str) -> Arc<Record> {
        let body = serde_json::json!({
            "id": id, "aliases": aliases,
            "affected": [{"package": {"ecosystem": eco, "name": name},
                "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": introduced}, {"fixed": fixed}]}]}],
            "severity": [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"}],
        });
        Arc::new(
            Record::parse(
                &FeedCandidate {
                    parent_uid: "g".into(),
                    id: id.into(),
                    ecosystem: eco.into(),
                    name: name.into(),
                    affected: None,
                    digest: "d".into(),
                    withdrawn: false,
                    update_time: 7,
                },
                &body.to_string(),
            )
            .unwrap(),
        )
    }

    fn decision(id: &str, alias: &str, name: &str, verdict: Verdict) -> Decision {
        Decision {
            advisory_id: id.into(),
            ids: vec![id.into(), alias.into()],
            names: vec![name.into()],
            purl_type: Some("pypi".into()),
            verdict,
            severity: Severity::Unknown,
            update_time: 9,
        }
    }

    fn ids(e: &Evaluation) -> Vec<(&str, i32)> {
        e.matches.iter().map(|m| (m.id.as_str(), m.fix_state)).collect()
    }

    #[test]
    fn fixes_are_listed_in_the_ecosystems_order() {
        let v = |eco, l: &[&str]| in_version_order(eco, l.iter().map(|s| s.to_string()).collect());
        assert_eq!(v(Ecosystem::PyPI, &["2.10.1", "2.9.3", "2.10.1"]), ["2.9.3", "2.10.1"]);
        assert_eq!(
            v(Ecosystem::Apk, &["1.1.0-r1-r0", "1.10.0-r0", "1.9.0-r1", "0-bad"]),
            ["1.9.0-r1", "1.10.0-r0", "0-bad", "1.1.0-r1-r0"]
        );
        // An approved fix at a version the ecosystem cannot order is not
        // offered as the fix (Wolfi's `1.1.0-r1-r0`).
        let p = [pkg("pkg:pypi/urllib3@1.24.1", None, "urllib3", "1.24.1")];
        let e = evaluate(
            &p,
            &[],
            &[decision(
                "CGA-1",
                "CVE-1",
                "urllib3",
                Verdict::Fixed("1.1.0-r1-r0".into()),
            )],
        );
        assert_eq!(ids(&e), [("CVE-1", 2)]);
        assert!(e.matches[0].fix_versions.is_empty());
        assert_eq!(e.matches[0].advisories["CGA-1"], "fixed_unorderable");
        // Another advisory's orderable fix is the one offered.
        let e = evaluate(
            &p,
            &[],
            &[
                decision("CGA-1", "CVE-1", "urllib3", Verdict::Fixed("1.1.0-r1-r0".into())),
                decision("CGA-2", "CVE-1", "urllib3", Verdict::Fixed("1.24.2".into())),
            ],
        );
        assert_eq!(ids(&e), [("CVE-1", 1)]);
        assert_eq!(e.matches[0].fix_versions, ["1.24.2"]);
        // An installed version the ecosystem cannot order still gets the fix.
        let odd = [pkg(
            "pkg:pypi/urllib3@1.24-custom-build",
            None,
            "urllib3",
            "1.24-custom-build",
        )];
        let e = evaluate(
            &odd,
            &[],
            &[decision("CGA-2", "CVE-1", "urllib3", Verdict::Fixed("1.24.2".into()))],
        );
        assert_eq!(ids(&e), [("CVE-1", 1)]);
        assert_eq!(e.matches[0].fix_versions, ["1.24.2"]);
    }

    #[test]
    fn python_projects_match_by_their_pep_503_name() {
        assert_eq!(normalize_pypi("JW__Util.-x"), "jw-util-x");
        let recs = [record(
            "PYSEC-2020-341",
            &["CVE-2020-13388"],
            "PyPI",
            "jw.util",
            "0",
            "1.3",
        )];
        for (purl, name) in [
            ("pkg:pypi/jw-util@1.2", "jw_util"),
            ("pkg:pypi/jw.util@1.2", "jw.util"),
            ("pkg:pypi/jw-util@1.2", "JW-Util"),
        ] {
            let p = pkg(purl, None, name, "1.2");
            assert_eq!(ids(&evaluate(&[p], &recs, &[])), [("CVE-2020-13388", 1)], "{purl}");
        }
        let other = pkg("pkg:pypi/jwutil@1.2", None, "jwutil", "1.2");
        assert!(evaluate(&[other], &recs, &[]).matches.is_empty());
    }

    #[test]
    fn records_sharing_an_alias_are_one_vulnerability() {
        let p = [pkg("pkg:pypi/requests@2.19.0", None, "requests", "2.19.0")];
        let recs = [
            record(
                "GHSA-x84v-xcm2-53pg",
                &["CVE-2018-18074"],
                "PyPI",
                "requests",
                "0",
                "2.20.0",
            ),
            record("PYSEC-2018-28", &["CVE-2018-18074"], "PyPI", "requests", "0", "2.20.0"),
            record("GHSA-unrelated", &[], "PyPI", "requests", "3.0", "3.1"),
        ];
        let e = evaluate(&p, &recs, &[]);
        assert_eq!(ids(&e), [("CVE-2018-18074", 1)]);
        assert_eq!(e.matches[0].aliases, ["GHSA-x84v-xcm2-53pg", "PYSEC-2018-28"]);
        assert_eq!(e.matches[0].fix_versions, ["2.20.0"]);
        assert_eq!(e.matches[0].severity, "critical");
        assert_eq!(e.data_time, 7);
    }

    #[test]
    fn decisions_rule_over_records() {
        let p = [pkg("pkg:pypi/urllib3@1.24.1", None, "urllib3", "1.24.1")];
        let recs = [record(
            "GHSA-r64q",
            &["CVE-2019-11236"],
            "PyPI",
            "urllib3",
            "0",
            "1.24.3",
        )];
        let with = |v: Verdict| evaluate(&p, &recs, &[decision("CGA-1", "CVE-2019-11236", "urllib3", v)]);
        // A false positive removes the match: a not_affected statement.
        let e = with(Verdict::NotAffected("vulnerable_code_not_in_execute_path".into()));
        assert!(e.matches.is_empty());
        assert_eq!(e.statements[0].status, "not_affected");
        assert_eq!(e.statements[0].advisory.as_deref(), Some("CGA-1"));
        // A fix at or below the installed version removes it; above, it is the fix.
        assert!(with(Verdict::Fixed("1.24.1".into())).matches.is_empty());
        assert_eq!(with(Verdict::Fixed("1.24.1".into())).statements[0].status, "fixed");
        let e = with(Verdict::Fixed("1.24.2".into()));
        assert_eq!(ids(&e), [("CVE-2019-11236", 1)]);
        assert_eq!(e.matches[0].fix_versions, ["1.24.2"]);
        assert_eq!(ids(&with(Verdict::WontFix)), [("CVE-2019-11236", 3)]);
        // Pending only: still matched as the record says, marked, not decided.
        let e = with(Verdict::UnderInvestigation);
        assert_eq!(ids(&e), [("CVE-2019-11236", 1)]);
        assert_eq!(e.matches[0].advisories["CGA-1"], "under_investigation");
        // A decision about another package decides nothing here.
        let e = evaluate(
            &p,
            &recs,
            &[decision(
                "CGA-2",
                "CVE-2019-11236",
                "requests",
                Verdict::Fixed("0".into()),
            )],
        );
        assert_eq!(ids(&e), [("CVE-2019-11236", 1)]);
        // An advisory with only pending events and no record: shown, undecided.
        let e = evaluate(
            &p,
            &[],
            &[decision("CGA-3", "CVE-2024-1", "urllib3", Verdict::UnderInvestigation)],
        );
        assert_eq!(ids(&e), [("CVE-2024-1", 0)]);
        assert_eq!(e.statements[0].status, "under_investigation");
    }

    #[test]
    fn distribution_packages_match_by_source_package_and_release() {
        let libssl = pkg(
            "pkg:deb/debian/libssl3@3.0.11-1?arch=amd64&distro=debian-12&upstream=openssl",
            Some("debian"),
            "libssl3",
            "3.0.11-1",
        );
        let recs = [
            record("DSA-12", &["CVE-2023-5678"], "Debian:12", "openssl", "0", "3.0.13-1"),
            record("DSA-11", &["CVE-2023-1111"], "Debian:11", "openssl", "0", "9.0"),
            record("ALPINE", &["CVE-2023-2222"], "Alpine:v3.18", "openssl", "0", "9.0"),
        ];
        let e = evaluate(&[libssl], &recs, &[]);
        assert_eq!(ids(&e), [("CVE-2023-5678", 1)], "Debian 12's record only");
        let wolfi = pkg(
            "pkg:apk/wolfi/libcrypto3@3.1.4-r0?arch=x86_64&upstream=openssl",
            Some("wolfi"),
            "libcrypto3",
            "3.1.4-r0",
        );
        let recs = [record("CGA-a", &["CVE-2023-3"], "Wolfi", "openssl", "0", "3.1.4-r1")];
        assert_eq!(ids(&evaluate(&[wolfi], &recs, &[])), [("CVE-2023-3", 1)]);
        // Ubuntu's ecosystems as Canonical publishes them.
        let curl = pkg(
            "pkg:deb/ubuntu/curl@7.81.0-1ubuntu1.10?arch=amd64&distro=ubuntu-22.04",
            Some("ubuntu"),
            "curl",
            "7.81.0-1ubuntu1.10",
        );
        for eco in ["Ubuntu:22.04:LTS", "Ubuntu:Pro:22.04:LTS", "Ubuntu:22.04", "Ubuntu"] {
            let recs = [record("USN-1", &["CVE-2024-7"], eco, "curl", "0", "7.81.0-1ubuntu1.15")];
            assert_eq!(
                ids(&evaluate(std::slice::from_ref(&curl), &recs, &[])),
                [("CVE-2024-7", 1)],
                "{eco}"
            );
        }
        let recs = [record("USN-2", &["CVE-2024-8"], "Ubuntu:20.04:LTS", "curl", "0", "9")];
        assert!(evaluate(&[curl], &recs, &[]).matches.is_empty(), "another release");
    }

    /// Wolfi's advisories are about an origin package; a scan's detection
    /// names the subpackage it happened to find the vulnerability in, and
    /// the import makes that the artifact. Every package of the origin is
    /// concerned (CVE-2024-9143 was found in openssl-engine-capi, fixed in
    /// openssl 3.3.2-r2, and libcrypto3 3.1.4-r0 holds it).
    #[test]
    fn an_advisory_concerns_every_package_of_its_origin() {
        let advisory = AdvisoryRecord {
            uid: "a".into(),
            parent_uid: "g".into(),
            advisory_id: "CGA-v9jx-g57m-5v45".into(),
            legacy_advisory_id: None,
            origin: "openssl".into(),
            author: String::new(),
            artifact_name: "openssl-engine-capi".into(),
            artifact_type: "apk".into(),
            artifact_architecture: String::new(),
            component_name: String::new(),
            component_location: String::new(),
            component_type: String::new(),
            aliases: r#"["CVE-2024-9143"]"#.into(),
            severities: "[]".into(),
            latest_type: 0,
            fixed_version: None,
            create_time: 1,
            update_time: 2,
            delete_time: None,
        };
        let fixed = EventRecord {
            uid: "e".into(),
            advisory_uid: "a".into(),
            event_time: 1,
            kind: 3,
            author: String::new(),
            reviewer: String::new(),
            review_state: APPROVED,
            issue: None,
            payload: r#"{"fixed":{"fixedVersion":"3.3.2-r2"}}"#.into(),
            fingerprint: String::new(),
            findings: Vec::new(),
            create_time: 1,
            update_time: 1,
        };
        let d = Decision::of(&advisory, &[&fixed]).unwrap();
        let libcrypto = pkg(
            "pkg:apk/wolfi/libcrypto3@3.1.4-r0?arch=x86_64&upstream=openssl",
            Some("wolfi"),
            "libcrypto3",
            "3.1.4-r0",
        );
        let openssl = pkg(
            "pkg:apk/wolfi/openssl@3.3.2-r2?arch=x86_64",
            Some("wolfi"),
            "openssl",
            "3.3.2-r2",
        );
        let e = evaluate(&[libcrypto, openssl], &[], std::slice::from_ref(&d));
        assert_eq!(ids(&e), [("CVE-2024-9143", 1)], "{:?}", e.matches);
        assert_eq!(e.matches[0].package.name, "libcrypto3");
        assert_eq!(e.matches[0].fix_versions, ["3.3.2-r2"]);
        assert!(
            e.statements
                .iter()
                .any(|s| s.purl.starts_with("pkg:apk/wolfi/openssl@") && s.status == "fixed"),
            "{:?}",
            e.statements
        );
    }

    #[test]
    fn a_package_is_identified_by_its_purl_not_the_sboms_name_for_it() {
        let recs = [record(
            "PYSEC-1",
            &["CVE-2018-18074"],
            "PyPI",
            "requests",
            "0",
            "2.20.0",
        )];
        let named_otherwise = pkg("pkg:pypi/requests@2.19.0", None, "foo", "2.19.0");
        assert_eq!(ids(&evaluate(&[named_otherwise], &recs, &[])), [("CVE-2018-18074", 1)]);
        let recs = [record("PYSEC-2", &["CVE-2099-1"], "PyPI", "foo", "0", "9")];
        let foo_by_name_only = pkg("pkg:pypi/requests@2.19.0", None, "foo", "2.19.0");
        assert!(evaluate(&[foo_by_name_only], &recs, &[]).matches.is_empty());
    }

    #[test]
    fn withdrawn_and_unorderable_records_match_nothing() {
        let p = [pkg(
            "pkg:pypi/requests@not.a.version!",
            None,
            "requests",
            "not.a.version!",
        )];
        let recs = [record("GHSA-1", &["CVE-1"], "PyPI", "requests", "0", "2.20.0")];
        let e = evaluate(&p, &recs, &[]);
        assert!(e.matches.is_empty());
        assert_eq!(e.unorderable, ["pkg:pypi/requests@not.a.version!"]);
    }

    /// Random packages and records: the prefilter keeps every record the
    /// evaluation finds affecting (so the report is the same from the kept
    /// records alone), and re-evaluating one name's packages merged into an
    /// older report equals evaluating everything again.
    #[test]
    fn prefilter_and_merge_agree_with_a_whole_evaluation() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let names = ["alpha", "Beta_Pkg", "gamma"];
        for round in 0..300 {
            let packages: Vec<Package> = (0..rng.gen_range(1..5))
                .map(|i| {
                    let n = names[rng.gen_range(0..names.len())];
                    let v = format!("{}.{}", rng.gen_range(0..4), rng.gen_range(0..4));
                    pkg(&format!("pkg:pypi/{}@{v}?i={i}", n.to_ascii_lowercase()), None, n, &v)
                })
                .collect();
            let mut bodies = Vec::new();
            for r in 0..rng.gen_range(0..8) {
                let n = names[rng.gen_range(0..names.len())];
                let spelled = if rng.gen_bool(0.3) {
                    n.to_ascii_lowercase()
                } else {
                    n.to_owned()
                };
                let a = format!("{}.{}", rng.gen_range(0..4), rng.gen_range(0..4));
                let b = format!("{}.{}", rng.gen_range(0..4), rng.gen_range(0..4));
                let affected = match rng.gen_range(0..3) {
                    0 => serde_json::json!({"package": {"ecosystem": "PyPI", "name": spelled},
                        "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": a}, {"fixed": b}]}]}),
                    1 => serde_json::json!({"package": {"ecosystem": "PyPI", "name": spelled}, "versions": [a, b]}),
                    _ => serde_json::json!({"package": {"ecosystem": "npm", "name": spelled},
                        "ranges": [{"type": "SEMVER", "events": [{"introduced": "0"}]}]}),
                };
                let alias = format!("CVE-{}", rng.gen_range(0..4));
                bodies.push((
                    format!("R-{round}-{r}"),
                    serde_json::json!({"id": format!("R-{round}-{r}"),
                    "aliases": [alias], "affected": [affected]}),
                ));
            }
            let candidates: Vec<FeedCandidate> = bodies
                .iter()
                .map(|(id, b)| {
                    let a = &b["affected"][0];
                    let mut entry = a.as_object().unwrap().clone();
                    entry.remove("package");
                    FeedCandidate {
                        parent_uid: "g".into(),
                        id: id.clone(),
                        ecosystem: a["package"]["ecosystem"].as_str().unwrap().into(),
                        name: a["package"]["name"].as_str().unwrap().into(),
                        affected: Some(serde_json::Value::Array(vec![entry.into()]).to_string()),
                        digest: "d".into(),
                        withdrawn: false,
                        update_time: 7,
                    }
                })
                .collect();
            let records: Vec<Arc<Record>> = candidates
                .iter()
                .zip(&bodies)
                .map(|(c, (_, b))| Arc::new(Record::parse(c, &b.to_string()).unwrap()))
                .collect();
            let whole = evaluate(&packages, &records, &[]);
            let kept: Vec<Arc<Record>> = applicable(&packages, &candidates)
                .iter()
                .map(|c| records.iter().find(|r| r.id == c.id).unwrap().clone())
                .collect();
            let mut pre = evaluate(&packages, &kept, &[]);
            pre.data_time = whole.data_time;
            assert_eq!(pre, whole, "round {round}: the prefilter changed the report");

            // The last record is new: merge an evaluation of its name's packages.
            let Some(last) = candidates.last() else { continue };
            let before = evaluate(&packages, &records[..records.len() - 1], &[]);
            let wanted: HashSet<String> = name_variants(&last.name).into_iter().collect();
            let changed: Vec<Package> = packages
                .iter()
                .filter(|p| lookup_names(p).iter().any(|n| wanted.contains(n)))
                .cloned()
                .collect();
            let purls: HashSet<&str> = changed.iter().map(|p| p.purl.as_str()).collect();
            let mut merged = before;
            merged.replace_packages(&purls, &evaluate(&changed, &records, &[]));
            assert_eq!(merged.matches, whole.matches, "round {round}: merged matches");
            assert_eq!(merged.statements, whole.statements, "round {round}");
            assert_eq!(merged.unorderable, whole.unorderable, "round {round}");
        }
    }
}
