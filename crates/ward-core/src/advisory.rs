//! Advisory identifiers, aliases and event kinds (reference §7.1, §7.2).
//!
//! These rules decide what an advisory may say about itself, so the stores and
//! every transport share one copy of them: the id's shape, which aliases are
//! acceptable, how event kinds are spelled in each of the places they appear,
//! and when an advisory no longer applies to a package version.

use std::collections::HashMap;

use rand::Rng;

use crate::apk;
use crate::error::FieldViolation;
use crate::names::echo;

/// GHSA's 20-character alphabet, which CGA ids reuse: digits and lowercase
/// letters without vowels or look-alikes, so no id spells a word or misreads.
pub const CGA_ALPHABET: &[u8; 20] = b"23456789cfghjmpqrvwx";

/// Most aliases one advisory may list. Real advisories have a handful; the
/// bound keeps validation and its error small.
pub const MAX_ALIASES: usize = 100;

/// Longest CVE id accepted. The pattern allows any number of digits; nobody
/// needs more than this, and the bound keeps a hostile value from being
/// scanned at length.
pub const MAX_CVE_LEN: usize = 64;

/// What an advisory shows before any of its events has been approved.
pub const UNREVIEWED: &str = "unreviewed";

/// Whether `s` is `<prefix>` followed by three `-xxxx` groups over
/// [`CGA_ALPHABET`]: the shape shared by CGA and GHSA ids.
fn is_grouped_id(s: &str, prefix: &str) -> bool {
    let Some(rest) = s.strip_prefix(prefix) else {
        return false;
    };
    let rest = rest.as_bytes();
    rest.len() == 15
        && rest
            .chunks(5)
            .all(|group| group[0] == b'-' && group[1..].iter().all(|c| CGA_ALPHABET.contains(c)))
}

/// Whether `s` is a CGA id: `^CGA(-[23456789cfghjmpqrvwx]{4}){3}$`.
pub fn is_cga(s: &str) -> bool {
    is_grouped_id(s, "CGA")
}

/// A new random CGA id, each character drawn uniformly from [`CGA_ALPHABET`].
/// 20^12 (about 4·10^15) ids make collisions rare; callers still insert under
/// a uniqueness constraint and retry.
pub fn new_cga(rng: &mut impl Rng) -> String {
    let mut id = String::from("CGA");
    for _ in 0..3 {
        id.push('-');
        for _ in 0..4 {
            id.push(char::from(CGA_ALPHABET[rng.gen_range(0..CGA_ALPHABET.len())]));
        }
    }
    id
}

/// The kinds of identifier an advisory may list as an alias.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AliasKind {
    /// `^CVE-\d{4}-\d{4,}$`
    Cve,
    /// `^GHSA(-[23456789cfghjmpqrvwx]{4}){3}$`
    Ghsa,
    /// `^GO-\d{4}-\d{4}$`
    Go,
}

fn all_digits(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_digit())
}

/// Which kind of alias `s` is, if any. Digits are ASCII digits only.
pub fn alias_kind(s: &str) -> Option<AliasKind> {
    if let Some(rest) = s.strip_prefix("CVE-") {
        let (year, number) = rest.split_once('-')?;
        let ok = s.len() <= MAX_CVE_LEN && year.len() == 4 && number.len() >= 4;
        return (ok && all_digits(year) && all_digits(number)).then_some(AliasKind::Cve);
    }
    if let Some(rest) = s.strip_prefix("GO-") {
        let (year, number) = rest.split_once('-')?;
        let ok = year.len() == 4 && number.len() == 4;
        return (ok && all_digits(year) && all_digits(number)).then_some(AliasKind::Go);
    }
    is_grouped_id(s, "GHSA").then_some(AliasKind::Ghsa)
}

/// Checks an advisory's aliases, returning one violation per problem so a
/// client can fix them all in one go: too many aliases, an alias of no known
/// kind, an alias equal to the advisory's own id, and a repeated alias. Only
/// the first [`MAX_ALIASES`] are examined, because a list over the limit is
/// rejected anyway. Violations name `field[i]`.
pub fn check_aliases(advisory_id: &str, aliases: &[String], field: &str) -> Vec<FieldViolation> {
    let mut out = Vec::new();
    let mut push = |field: String, description: String| out.push(FieldViolation { field, description });
    if aliases.len() > MAX_ALIASES {
        push(
            field.to_owned(),
            format!("{field} holds at most {MAX_ALIASES} aliases, not {}", aliases.len()),
        );
    }
    let mut first_seen: HashMap<&str, usize> = HashMap::new();
    for (i, alias) in aliases.iter().take(MAX_ALIASES).enumerate() {
        let here = format!("{field}[{i}]");
        if alias_kind(alias).is_none() {
            push(
                here.clone(),
                format!(
                    "\"{}\" is not a CVE (CVE-YYYY-NNNN), GHSA (GHSA-xxxx-xxxx-xxxx) or Go (GO-YYYY-NNNN) id",
                    echo(alias)
                ),
            );
        }
        if alias == advisory_id {
            push(here.clone(), format!("\"{}\" is the advisory's own id", echo(alias)));
        }
        if let Some(j) = first_seen.get(alias.as_str()) {
            push(here, format!("\"{}\" repeats {field}[{j}]", echo(alias)));
        } else {
            first_seen.insert(alias.as_str(), i);
        }
    }
    out
}

/// The kinds of advisory event (reference §7.1), without the v1-only
/// `component-location-changed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    Detection,
    TruePositiveDetermination,
    Fixed,
    FalsePositiveDetermination,
    AnalysisNotPlanned,
    FixNotPlanned,
    PendingUpstreamFix,
    Patched,
}

impl EventKind {
    /// Every kind, in `EventTypeFilter` order.
    pub const ALL: [EventKind; 8] = [
        EventKind::Detection,
        EventKind::TruePositiveDetermination,
        EventKind::Fixed,
        EventKind::FalsePositiveDetermination,
        EventKind::AnalysisNotPlanned,
        EventKind::FixNotPlanned,
        EventKind::PendingUpstreamFix,
        EventKind::Patched,
    ];

    /// The kind's number in the API's `EventTypeFilter` enum (0 is unset).
    pub fn filter_number(self) -> i32 {
        match self {
            EventKind::Detection => 1,
            EventKind::TruePositiveDetermination => 2,
            EventKind::Fixed => 3,
            EventKind::FalsePositiveDetermination => 4,
            EventKind::AnalysisNotPlanned => 5,
            EventKind::FixNotPlanned => 6,
            EventKind::PendingUpstreamFix => 7,
            EventKind::Patched => 8,
        }
    }

    pub fn from_filter_number(n: i32) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.filter_number() == n)
    }

    /// The spelling advisory-schema documents use.
    pub fn schema_name(self) -> &'static str {
        match self {
            EventKind::Detection => "detection",
            EventKind::TruePositiveDetermination => "true-positive-determination",
            EventKind::Fixed => "fixed",
            EventKind::FalsePositiveDetermination => "false-positive-determination",
            EventKind::AnalysisNotPlanned => "analysis-not-planned",
            EventKind::FixNotPlanned => "fix-not-planned",
            EventKind::PendingUpstreamFix => "pending-upstream-fix",
            EventKind::Patched => "patched",
        }
    }

    pub fn from_schema_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.schema_name() == s)
    }

    /// The status users see when this is the latest approved event.
    pub fn status(self) -> &'static str {
        match self {
            EventKind::Detection => "under_investigation",
            EventKind::TruePositiveDetermination => "affected",
            EventKind::Fixed => "fixed",
            EventKind::FalsePositiveDetermination => "not_affected",
            EventKind::AnalysisNotPlanned => "analysis_not_planned",
            EventKind::FixNotPlanned => "fix_not_planned",
            EventKind::PendingUpstreamFix => "pending_upstream_fix",
            EventKind::Patched => "patched",
        }
    }

    /// The event type in snake case, as OSV records' `latest_event_status` has it.
    pub fn osv_status(self) -> &'static str {
        match self {
            EventKind::Detection => "detection",
            EventKind::TruePositiveDetermination => "true_positive_determination",
            EventKind::Fixed => "fixed",
            EventKind::FalsePositiveDetermination => "false_positive_determination",
            EventKind::AnalysisNotPlanned => "analysis_not_planned",
            EventKind::FixNotPlanned => "fix_not_planned",
            EventKind::PendingUpstreamFix => "pending_upstream_fix",
            EventKind::Patched => "patched",
        }
    }

    /// Whether an advisory whose latest event is of this kind is resolved in
    /// general: every kind but a detection or a confirmation.
    pub fn is_resolved(self) -> bool {
        !matches!(self, EventKind::Detection | EventKind::TruePositiveDetermination)
    }
}

/// Whether an advisory whose latest event is `kind` no longer applies to a
/// package at `version` (reference §7.1). A fix counts only from its
/// `fixed_version` on, in apk order; a fix whose versions cannot be compared
/// counts as not resolved, because claiming safety by mistake is the worse
/// error. A patch is applied to the versions the event lists, so the event
/// itself says the package is resolved.
pub fn resolved_at(kind: EventKind, fixed_version: Option<&str>, version: &str) -> bool {
    match kind {
        EventKind::Detection | EventKind::TruePositiveDetermination => false,
        EventKind::Fixed => fixed_version
            .and_then(|fixed| apk::compare(version, fixed))
            .is_some_and(|o| o.is_ge()),
        EventKind::FalsePositiveDetermination
        | EventKind::AnalysisNotPlanned
        | EventKind::FixNotPlanned
        | EventKind::PendingUpstreamFix
        | EventKind::Patched => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn cga_ids() {
        assert!(is_cga("CGA-3g3j-8396-2m48") && is_cga("CGA-xxxx-2222-cfgh"));
        let bad = "CGA CGA- CGA-3g3j-8396 CGA-3g3j-8396-2m48- CGA-3g3j-8396-2m4 CGA-3g3j-8396-2m488 cga-3g3j-8396-2m48 \
                   CGA-3G3J-8396-2M48 CGA-3g3j-8396-2m41 CGA-3g3j-8396-2ma8 CGA-3g3j_8396-2m48 CGA-3g3j-8396-2m0x \
                   GHSA-3g3j-8396-2m48 CGA-3g3j-8396-2m4é CGA--3g3j-8396-2m4";
        for bad in bad.split_whitespace().chain(["", " CGA-3g3j-8396-2m48"]) {
            assert!(!is_cga(bad), "{bad}");
        }
    }

    #[test]
    fn alias_kinds() {
        let table = [
            (Some(AliasKind::Cve), "CVE-2024-1234 CVE-2021-44228 CVE-2024-123456789"),
            (Some(AliasKind::Ghsa), "GHSA-jfh8-c2jp-5v3q GHSA-2222-xxxx-cfgh"),
            (Some(AliasKind::Go), "GO-2022-0969 GO-0000-0000"),
            (
                None,
                "CVE-2024-123 CVE-24-1234 cve-2024-1234 CVE-2024-12a4 CVE-2024--1234 CVE-\u{662}\u{660}\u{662}\u{664}-1234 \
                 GHSA-jfh8-c2jp-5v3a GHSA-JFH8-C2JP-5V3Q GO-2022-09690 GO-22-0969 GO-2022-096 CGA-3g3j-8396-2m48",
            ),
        ];
        for (kind, ids) in table {
            for id in ids.split_whitespace() {
                assert_eq!(alias_kind(id), kind, "{id}");
            }
        }
        assert_eq!(alias_kind(""), None);
        assert_eq!(alias_kind("CVE-2024-1234 "), None);
        let long = format!("CVE-2024-{}", "1".repeat(MAX_CVE_LEN - 9));
        assert_eq!(alias_kind(&long), Some(AliasKind::Cve));
        assert_eq!(alias_kind(&format!("{long}1")), None);
    }

    #[test]
    fn aliases_report_every_problem() {
        let id = "CGA-3g3j-8396-2m48";
        let fine = strings(&["CVE-2024-1234", "GHSA-jfh8-c2jp-5v3q", "GO-2022-0969"]);
        assert!(check_aliases(id, &fine, "aliases").is_empty());
        let bad = strings(&["CVE-2024-1234", "nope", "CVE-2024-1234", id, "nope"]);
        let v = check_aliases(id, &bad, "aliases");
        let got: Vec<(&str, &str)> = v.iter().map(|f| (f.field.as_str(), f.description.as_str())).collect();
        assert_eq!(got.len(), 6, "{got:?}");
        assert!(got[0].0 == "aliases[1]" && got[0].1.contains("\"nope\" is not a CVE"));
        assert!(got[1].0 == "aliases[2]" && got[1].1.contains("repeats aliases[0]"));
        assert!(got[2].0 == "aliases[3]" && got[2].1.contains("is not a CVE"));
        assert!(got[3].0 == "aliases[3]" && got[3].1.contains("own id"));
        assert!(got[4].0 == "aliases[4]" && got[4].1.contains("is not a CVE"));
        assert!(got[5].0 == "aliases[4]" && got[5].1.contains("repeats aliases[1]"));
        let many: Vec<String> = (0..150).map(|i| format!("CVE-2024-{:04}", 1000 + i)).collect();
        let v = check_aliases(id, &many, "aliases");
        assert_eq!(v.len(), 1);
        assert!(v[0].field == "aliases" && v[0].description.contains("at most 100"));
        let v = check_aliases(id, &[format!("x{}", "y".repeat(10_000))], "aliases");
        assert!(v[0].description.len() < 400);
    }

    #[test]
    fn event_kinds() {
        for k in EventKind::ALL {
            assert_eq!(EventKind::from_filter_number(k.filter_number()), Some(k));
            assert_eq!(EventKind::from_schema_name(k.schema_name()), Some(k));
        }
        let numbers: Vec<i32> = EventKind::ALL.iter().map(|k| k.filter_number()).collect();
        assert_eq!(numbers, (1..=8).collect::<Vec<_>>());
        assert_eq!(EventKind::from_filter_number(0), None);
        assert_eq!(EventKind::from_filter_number(9), None);
        assert_eq!(EventKind::from_schema_name("component-location-changed"), None);
        assert_eq!(
            EventKind::TruePositiveDetermination.schema_name(),
            "true-positive-determination"
        );
        assert_eq!(EventKind::Detection.status(), "under_investigation");
        assert_eq!(EventKind::TruePositiveDetermination.status(), "affected");
        assert_eq!(EventKind::FalsePositiveDetermination.status(), "not_affected");
        assert_eq!(
            EventKind::FalsePositiveDetermination.osv_status(),
            "false_positive_determination"
        );
        assert_eq!(EventKind::PendingUpstreamFix.osv_status(), "pending_upstream_fix");
        assert_ne!(UNREVIEWED, EventKind::Detection.status());
        assert!(!EventKind::Detection.is_resolved() && EventKind::Patched.is_resolved());
    }

    #[test]
    fn resolution() {
        use EventKind::*;
        for k in [Detection, TruePositiveDetermination] {
            assert!(!resolved_at(k, Some("0.1"), "9.9"), "{k:?}");
            assert!(!resolved_at(k, None, "1.0"), "{k:?}");
        }
        for k in [
            FalsePositiveDetermination,
            FixNotPlanned,
            AnalysisNotPlanned,
            PendingUpstreamFix,
            Patched,
        ] {
            assert!(resolved_at(k, None, "1.0"), "{k:?}");
        }
        assert!(resolved_at(Fixed, Some("0.2.107-r0"), "0.2.107-r0"));
        assert!(resolved_at(Fixed, Some("0.2.107-r0"), "0.2.107"));
        assert!(resolved_at(Fixed, Some("0.2.107-r0"), "0.2.107-r1"));
        assert!(resolved_at(Fixed, Some("1.9"), "1.10"));
        assert!(!resolved_at(Fixed, Some("0.2.107-r0"), "0.2.99-r10"));
        assert!(!resolved_at(Fixed, Some("2.0"), "2.0_rc1"));
        assert!(!resolved_at(Fixed, Some("not a version"), "1.0"));
        assert!(!resolved_at(Fixed, Some("1.0"), "v1.0"));
        assert!(!resolved_at(Fixed, None, "1.0"));
    }

    proptest! {
        /// Generated ids always match the pattern and use the whole alphabet
        /// over enough draws.
        #[test]
        fn new_cga_is_cga(seed: u64) {
            let mut rng = StdRng::seed_from_u64(seed);
            let ids: Vec<String> = (0..100).map(|_| new_cga(&mut rng)).collect();
            for id in &ids {
                prop_assert!(is_cga(id), "{}", id);
            }
            let used: std::collections::HashSet<u8> = ids.iter().flat_map(|i| i.bytes().skip(3)).collect();
            prop_assert_eq!(used.len(), 21, "20 letters and '-'");
        }

        /// The hand-written checks agree with the reference's patterns.
        #[test]
        fn patterns_agree(s in "(CGA|GHSA|CVE|GO|cga|X)?(-[0-9a-zA-Z]{1,5}){0,4}", t in ".{0,80}") {
            let re = |p: &str| regex::Regex::new(p).map_err(|e| TestCaseError::fail(e.to_string()));
            let (cga, ghsa) = (re("^CGA(-[23456789cfghjmpqrvwx]{4}){3}$")?, re("^GHSA(-[23456789cfghjmpqrvwx]{4}){3}$")?);
            let (cve, go) = (re("^CVE-[0-9]{4}-[0-9]{4,}$")?, re("^GO-[0-9]{4}-[0-9]{4}$")?);
            for x in [&s, &t] {
                prop_assert_eq!(is_cga(x), cga.is_match(x));
                let want = if cve.is_match(x) && x.len() <= MAX_CVE_LEN {
                    Some(AliasKind::Cve)
                } else if ghsa.is_match(x) {
                    Some(AliasKind::Ghsa)
                } else if go.is_match(x) {
                    Some(AliasKind::Go)
                } else {
                    None
                };
                prop_assert_eq!(alias_kind(x), want, "{:?}", x);
            }
        }
    }
}
