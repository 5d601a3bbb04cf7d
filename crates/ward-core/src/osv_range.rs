//! Whether a package version is affected by an OSV record's `affected` entry.
//!
//! This follows the evaluation pseudocode of the OSV schema: a version is
//! affected when it is listed in `versions` or lies in any `SEMVER` or
//! `ECOSYSTEM` range. A range's events are sorted by version and walked in
//! order: `introduced` at or below the version makes it affected, `fixed` at
//! or below it makes it unaffected, `last_affected` below it makes it
//! unaffected. `introduced: "0"` sorts before every version; a range with
//! `limit` events covers only versions below one of its limits (`"*"` is
//! infinity). `SEMVER` ranges use SemVer precedence (a leading `v`
//! tolerated), `ECOSYSTEM` ranges the ecosystem's order; `GIT` ranges need the
//! repository's history and are left to the `versions` list, which OSV
//! requires alongside them.
//!
//! Events at the same version sort `introduced` first, so `introduced: X,
//! fixed: X` is an empty range and `introduced: X, last_affected: X` holds
//! exactly `X`.
//!
//! Where Ward cannot order something the evaluation needs (the version, or an
//! event of a range, is not a version in that order), it answers `None`
//! instead of guessing, unless a match elsewhere already settles the answer.

use std::cmp::Ordering;

use serde_json::Value;

use crate::versions::{self, Ecosystem};

/// How a range's event versions are ordered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeType {
    /// SemVer 2.0 precedence.
    Semver,
    /// The package ecosystem's own order.
    Ecosystem,
    /// Git commits; not evaluated here.
    Git,
}

/// One event of a range's timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Introduced(String),
    Fixed(String),
    LastAffected(String),
    Limit(String),
}

impl Event {
    /// The event's version string.
    pub fn version(&self) -> &str {
        match self {
            Event::Introduced(v) | Event::Fixed(v) | Event::LastAffected(v) | Event::Limit(v) => v,
        }
    }
}

/// An OSV `affected[].ranges[]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    pub kind: RangeType,
    pub events: Vec<Event>,
}

/// A range's order: `None` when either side is not a version in it.
type Order = fn(Ecosystem, &str, &str) -> Option<Ordering>;

fn order_of(kind: &RangeType) -> Option<Order> {
    match kind {
        RangeType::Semver => Some(|_, a, b| versions::semver::compare_v(a, b)),
        RangeType::Ecosystem => Some(|eco, a, b| eco.compare(a, b)),
        RangeType::Git => None,
    }
}

/// An event's place in the walk: `introduced` first among equal versions.
fn rank(e: &Event) -> u8 {
    match e {
        Event::Introduced(_) => 0,
        Event::LastAffected(_) => 1,
        Event::Fixed(_) => 2,
        Event::Limit(_) => 3,
    }
}

/// Most events of one range Ward evaluates (a longer one is unorderable).
pub const MAX_EVENTS: usize = 512;

fn is_zero(e: &Event) -> bool {
    matches!(e, Event::Introduced(v) if v == "0")
}

/// The walk over one range: whether `version` lies in it, and the events
/// sorted by version (`None` when something cannot be ordered).
fn evaluate<'r>(eco: Ecosystem, version: &str, range: &'r Range) -> Option<(bool, Vec<&'r Event>)> {
    let order = order_of(&range.kind)?;
    if range.events.len() > 2 * MAX_EVENTS {
        return None;
    }
    // Each event's version against the installed one, compared once (a
    // version that is not one in the order makes the range unorderable;
    // comparing is where versions are parsed, the cost of a report).
    let mut limits: Vec<Option<Ordering>> = Vec::new();
    let mut timeline: Vec<(&Event, Option<Ordering>)> = Vec::new();
    for e in &range.events {
        match e {
            Event::Limit(v) if v.contains('*') => limits.push(None),
            e if is_zero(e) => timeline.push((e, None)),
            Event::Limit(v) => limits.push(Some(order(eco, version, v)?)),
            e => timeline.push((e, Some(order(eco, version, e.version())?))),
        }
    }
    // With only `0` and `*` events, nothing above checked the version.
    if timeline.iter().all(|(_, c)| c.is_none())
        && limits.iter().all(Option::is_none)
        && order(eco, version, version).is_none()
    {
        return None;
    }
    if timeline.len() > MAX_EVENTS {
        return None;
    }
    let cmp = |a: &Event, b: &Event| {
        let by_version = match (is_zero(a), is_zero(b)) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            (false, false) => order(eco, a.version(), b.version()).unwrap_or(Ordering::Equal),
        };
        by_version.then_with(|| rank(a).cmp(&rank(b)))
    };
    // Insertion sort, not `sort_by`: some orders (Maven's, in odd cases) are
    // not transitive, and the standard sorts may panic on such a comparator.
    // Any comparator gives some order here; the bound keeps it cheap.
    for i in 1..timeline.len() {
        let mut j = i;
        while j > 0 && cmp(timeline[j - 1].0, timeline[j].0) == Ordering::Greater {
            timeline.swap(j - 1, j);
            j -= 1;
        }
    }
    // `version` against each limit: below one (or `*`) keeps the range open.
    let below_limits = limits.is_empty() || limits.iter().any(|l| l.is_none_or(|c| c == Ordering::Less));
    let mut affected = false;
    for (e, c) in &timeline {
        // c: the installed version against the event's (None: `0`).
        match (e, c) {
            (_, None) => affected = true,
            (Event::Introduced(_), Some(c)) if *c != Ordering::Less => affected = true,
            (Event::Fixed(_), Some(c)) if *c != Ordering::Less => affected = false,
            (Event::LastAffected(_), Some(c)) if *c == Ordering::Greater => affected = false,
            _ => {}
        }
    }
    Some((affected && below_limits, timeline.into_iter().map(|(e, _)| e).collect()))
}

/// Whether `version` of a package in `eco` is affected, given an `affected`
/// entry's `ranges` and `versions`.
///
/// A `versions` entry matches when it is the same string or, in `eco`'s
/// order, the same version (`1.0` and `1.0.0` in PyPI). `None` means the
/// answer depends on an order Ward cannot apply: the version (or an event of
/// a `SEMVER`/`ECOSYSTEM` range) is not a version in that order, and nothing
/// else matched. With no `SEMVER`/`ECOSYSTEM` ranges the `versions` list
/// alone decides.
pub fn is_affected(eco: Ecosystem, version: &str, ranges: &[Range], versions: &[String]) -> Option<bool> {
    let listed = versions
        .iter()
        .any(|v| v == version || eco.compare(version, v) == Some(Ordering::Equal));
    if listed {
        return Some(true);
    }
    let mut unknown = false;
    for range in ranges.iter().filter(|r| r.kind != RangeType::Git) {
        match evaluate(eco, version, range) {
            Some((true, _)) => return Some(true),
            Some((false, _)) => {}
            None => unknown = true,
        }
    }
    if unknown { None } else { Some(false) }
}

/// The `fixed` versions that would resolve a match for `version`: from each
/// `SEMVER`/`ECOSYSTEM` range that contains it, its `fixed` events above the
/// version, ascending within the range and without repeats. Empty when no
/// range contains the version (a `versions`-list match has no fix to name) or
/// the ranges cannot be ordered.
pub fn fixed_versions(eco: Ecosystem, version: &str, ranges: &[Range]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for range in ranges {
        let Some((true, timeline)) = evaluate(eco, version, range) else {
            continue;
        };
        let Some(order) = order_of(&range.kind) else {
            continue;
        };
        for e in timeline {
            if let Event::Fixed(v) = e
                && order(eco, v, version) == Some(Ordering::Greater)
                && !out.contains(v)
            {
                out.push(v.clone());
            }
        }
    }
    out
}

/// Parses an OSV `affected[].ranges` array (or an `affected` entry holding
/// one) into ranges. Ranges of other types, and events that are not a JSON
/// object with a string `introduced`, `fixed`, `last_affected` or `limit`,
/// are skipped. An event object carrying several of those (which the schema
/// forbids) yields one event per field.
pub fn parse_ranges(v: &Value) -> Vec<Range> {
    let ranges = match v {
        Value::Object(o) => o.get("ranges").and_then(Value::as_array),
        v => v.as_array(),
    };
    let Some(ranges) = ranges else {
        return Vec::new();
    };
    ranges
        .iter()
        .filter_map(|r| {
            let kind = match r.get("type")?.as_str()? {
                t if t.eq_ignore_ascii_case("SEMVER") => RangeType::Semver,
                t if t.eq_ignore_ascii_case("ECOSYSTEM") => RangeType::Ecosystem,
                t if t.eq_ignore_ascii_case("GIT") => RangeType::Git,
                _ => return None,
            };
            let events = r
                .get("events")
                .and_then(Value::as_array)
                .map(|events| {
                    events
                        .iter()
                        .flat_map(|e| {
                            let field = |name: &str| e.get(name).and_then(Value::as_str).map(str::to_owned);
                            [
                                field("introduced").map(Event::Introduced),
                                field("fixed").map(Event::Fixed),
                                field("last_affected").map(Event::LastAffected),
                                field("limit").map(Event::Limit),
                            ]
                            .into_iter()
                            .flatten()
                        })
                        .collect()
                })
                .unwrap_or_default();
            Some(Range { kind, events })
        })
        .collect()
}

/// Parses a JSON array of OSV `affected` entries, keeping each entry's
/// ranges (as [`parse_ranges`] reads them) and `versions`. Straight into
/// typed fields, without a [`Value`] tree in between (the package index
/// holds these for every record of a name, and a report reads thousands);
/// `None` when the text is not such an array of well-typed entries, so the
/// caller can fall back to [`parse_ranges`] on its `Value`.
pub fn parse_affected(text: &str) -> Option<Vec<(Vec<Range>, Vec<String>)>> {
    #[derive(serde::Deserialize)]
    struct Entry {
        #[serde(default)]
        ranges: Vec<TypedRange>,
        #[serde(default)]
        versions: Vec<String>,
    }
    #[derive(serde::Deserialize)]
    struct TypedRange {
        #[serde(rename = "type")]
        kind: String,
        #[serde(default)]
        events: Vec<TypedEvent>,
    }
    #[derive(serde::Deserialize)]
    struct TypedEvent {
        introduced: Option<String>,
        fixed: Option<String>,
        last_affected: Option<String>,
        limit: Option<String>,
    }
    let entries: Vec<Entry> = serde_json::from_str(text).ok()?;
    Some(
        entries
            .into_iter()
            .map(|e| {
                let ranges = e
                    .ranges
                    .into_iter()
                    .filter_map(|r| {
                        let kind = match r.kind.as_str() {
                            t if t.eq_ignore_ascii_case("SEMVER") => RangeType::Semver,
                            t if t.eq_ignore_ascii_case("ECOSYSTEM") => RangeType::Ecosystem,
                            t if t.eq_ignore_ascii_case("GIT") => RangeType::Git,
                            _ => return None,
                        };
                        let events = r
                            .events
                            .into_iter()
                            .flat_map(|e| {
                                [
                                    e.introduced.map(Event::Introduced),
                                    e.fixed.map(Event::Fixed),
                                    e.last_affected.map(Event::LastAffected),
                                    e.limit.map(Event::Limit),
                                ]
                                .into_iter()
                                .flatten()
                            })
                            .collect();
                        Some(Range { kind, events })
                    })
                    .collect();
                (ranges, e.versions)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The typed reading agrees with the `Value` one wherever it answers.
    #[test]
    fn parse_affected_agrees_with_parse_ranges() {
        let texts = [
            r#"[{"ranges":[{"type":"ECOSYSTEM","events":[{"introduced":"0"},{"fixed":"1.2"}]}],"versions":["1.0"]}]"#,
            r#"[{"ranges":[{"type":"semver","events":[{"introduced":"1.0.0","fixed":"2.0.0"},{"limit":"3"}]},{"type":"GIT","repo":"x","events":[{"introduced":"abc"}]},{"type":"OTHER","events":[]}]}]"#,
            r#"[{"ranges":[{"type":"ECOSYSTEM","events":[{"last_affected":"4"}],"database_specific":{"a":1}}]},{"versions":[]},{}]"#,
        ];
        for t in texts {
            let typed = parse_affected(t).expect(t);
            let v: Value = serde_json::from_str(t).unwrap();
            let by_value: Vec<(Vec<Range>, Vec<String>)> = v
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    let versions = e
                        .get("versions")
                        .and_then(Value::as_array)
                        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                        .unwrap_or_default();
                    (parse_ranges(e.get("ranges").unwrap_or(&Value::Null)), versions)
                })
                .collect();
            assert_eq!(typed, by_value, "{t}");
        }
        // Ill-typed entries are left to the `Value` reading.
        for t in [
            r#"[{"ranges":null}]"#,
            r#"[{"versions":[1]}]"#,
            r#"{"ranges":[]}"#,
            "not json",
        ] {
            assert!(parse_affected(t).is_none(), "{t}");
        }
    }

    fn range(kind: RangeType, events: &[(&str, &str)]) -> Range {
        let events = events
            .iter()
            .map(|&(k, v)| match k {
                "introduced" => Event::Introduced(v.into()),
                "fixed" => Event::Fixed(v.into()),
                "last_affected" => Event::LastAffected(v.into()),
                "limit" => Event::Limit(v.into()),
                _ => panic!("event {k}"),
            })
            .collect();
        Range { kind, events }
    }

    fn eco(events: &[(&str, &str)]) -> Vec<Range> {
        vec![range(RangeType::Ecosystem, events)]
    }

    fn check(e: Ecosystem, ranges: &[Range], versions: &[&str], cases: &str) {
        let versions: Vec<String> = versions.iter().map(|v| v.to_string()).collect();
        for case in cases.split_whitespace() {
            let (v, want) = match case.rsplit_once(':') {
                Some((v, "yes")) => (v, Some(true)),
                Some((v, "no")) => (v, Some(false)),
                Some((v, "none")) => (v, None),
                _ => panic!("case {case}"),
            };
            assert_eq!(is_affected(e, v, ranges, &versions), want, "{e:?} {v}");
        }
    }

    #[test]
    fn introduced_zero_and_fixed() {
        let r = eco(&[("introduced", "0"), ("fixed", "1.0.2")]);
        check(
            Ecosystem::Npm,
            &r,
            &[],
            "0.0.0:yes 1.0.1:yes 1.0.2-rc.1:yes 1.0.2:no 2.0.0:no",
        );
        let r = eco(&[("introduced", "0")]);
        check(Ecosystem::Debian, &r, &[], "0~:yes 0:yes 1:99-1:yes");
    }

    #[test]
    fn several_introduced_fixed_pairs() {
        // The schema's multiple range example, events deliberately out of order.
        let r = vec![range(
            RangeType::Semver,
            &[
                ("fixed", "3.2.5"),
                ("introduced", "1.0.0"),
                ("introduced", "3.0.0"),
                ("fixed", "1.0.2"),
            ],
        )];
        check(
            Ecosystem::Npm,
            &r,
            &[],
            "0.9.0:no 1.0.0:yes 1.0.1:yes 1.0.2:no 2.5.0:no 3.0.0-rc.1:no 3.0.0:yes 3.2.4:yes 3.2.5:no 4.0.0:no",
        );
        assert_eq!(fixed_versions(Ecosystem::Npm, "1.0.1", &r), ["1.0.2", "3.2.5"]);
        assert_eq!(fixed_versions(Ecosystem::Npm, "3.1.0", &r), ["3.2.5"]);
        assert!(fixed_versions(Ecosystem::Npm, "2.0.0", &r).is_empty());
        assert!(fixed_versions(Ecosystem::Npm, "9.0.0", &r).is_empty());
    }

    #[test]
    fn last_affected() {
        let r = eco(&[("introduced", "0"), ("last_affected", "2.1.214")]);
        check(
            Ecosystem::Maven,
            &r,
            &[],
            "1.0:yes 2.1.214:yes 2.1.214.0:yes 2.1.215:no 2.1.214.1:no",
        );
        assert!(fixed_versions(Ecosystem::Maven, "1.0", &r).is_empty());
        // introduced and last_affected at one version hold exactly that version.
        let r = eco(&[("introduced", "1.5"), ("last_affected", "1.5")]);
        check(Ecosystem::PyPI, &r, &[], "1.4:no 1.5:yes 1.5.0:yes 1.5.post1:no");
        // introduced and fixed at one version hold nothing.
        let r = eco(&[("fixed", "1.5"), ("introduced", "1.5")]);
        check(Ecosystem::PyPI, &r, &[], "1.4:no 1.5:no 1.6:no");
    }

    #[test]
    fn limits() {
        let r = eco(&[("introduced", "1.0"), ("limit", "1.5")]);
        check(Ecosystem::Go, &r, &[], "0.9.0:none");
        let r = eco(&[("introduced", "1.0.0"), ("limit", "1.5.0")]);
        check(
            Ecosystem::Go,
            &r,
            &[],
            "v0.9.0:no v1.0.0:yes v1.4.9:yes v1.5.0:no v2.0.0:no",
        );
        let r = eco(&[
            ("introduced", "1.0.0"),
            ("limit", "1.5.0"),
            ("limit", "3.0.0"),
            ("fixed", "2.0.0"),
        ]);
        check(Ecosystem::Cargo, &r, &[], "1.6.0:yes 2.0.0:no 2.9.0:no");
        let r = eco(&[("introduced", "1.0.0"), ("limit", "*")]);
        check(Ecosystem::Cargo, &r, &[], "0.1.0:no 99.0.0:yes");
    }

    #[test]
    fn versions_list() {
        let r = vec![range(RangeType::Git, &[("introduced", "abc123"), ("fixed", "def456")])];
        check(
            Ecosystem::PyPI,
            &r,
            &["1.0", "1.1rc1"],
            "1.0:yes 1.0.0:yes 1.1rc1:yes 1.1:no 2.0:no",
        );
        // Unparseable versions still match by string; without ordered ranges
        // the list decides alone.
        check(Ecosystem::PyPI, &r, &["not-a-version"], "not-a-version:yes also-not:no");
        check(Ecosystem::PyPI, &[], &[], "1.0:no junk:no");
    }

    #[test]
    fn semver_ranges_tolerate_v_and_prereleases() {
        let r = vec![range(RangeType::Semver, &[("introduced", "0"), ("fixed", "1.20.5")])];
        check(
            Ecosystem::Go,
            &r,
            &[],
            "v1.20.4:yes 1.20.4:yes v1.20.5-rc.1:yes v1.20.5:no v1.21.0:no v0.0.0-20191109021931-daa7c04131f5:yes",
        );
        let r = vec![range(
            RangeType::Semver,
            &[("introduced", "v2.0.0-alpha"), ("fixed", "v2.0.0")],
        )];
        check(
            Ecosystem::Go,
            &r,
            &[],
            "v1.9.0:no v2.0.0-alpha:yes v2.0.0-beta.1:yes v2.0.0+incompatible:no v2.0.0:no",
        );
        assert_eq!(fixed_versions(Ecosystem::Go, "v2.0.0-beta.1", &r), ["v2.0.0"]);
        // A SEMVER range orders by SemVer whatever the ecosystem.
        let r = vec![range(RangeType::Semver, &[("introduced", "1.0.0"), ("fixed", "1.2.0")])];
        check(Ecosystem::PyPI, &r, &[], "1.1.0:yes 1.1:none 1.2.0:no");
    }

    #[test]
    fn unorderable_is_none() {
        let r = eco(&[("introduced", "0"), ("fixed", "1.0.2")]);
        check(Ecosystem::Npm, &r, &[], "latest:none 1.0:none");
        // …unless the versions list already matches it.
        check(Ecosystem::Npm, &r, &["latest"], "latest:yes");
        // An event that cannot be ordered makes its range unknown…
        let bad = eco(&[("introduced", "0"), ("fixed", "not-semver")]);
        check(Ecosystem::Cargo, &bad, &[], "1.0.0:none");
        assert!(fixed_versions(Ecosystem::Cargo, "1.0.0", &bad).is_empty());
        // …but another range that contains the version still answers.
        let mut both = bad.clone();
        both.extend(eco(&[("introduced", "0.5.0"), ("fixed", "2.0.0")]));
        check(Ecosystem::Cargo, &both, &[], "1.0.0:yes 3.0.0:none");
    }

    #[test]
    fn pypi_prerelease_ordering() {
        let r = eco(&[("introduced", "1.0rc1"), ("fixed", "1.0.1")]);
        check(
            Ecosystem::PyPI,
            &r,
            &[],
            "1.0b9:no 1.0rc1:yes 1.0:yes 1.0.0:yes 1.0.post1:yes 1.0.1rc1:yes 1.0.1:no 1.0.dev0:no",
        );
        let r = eco(&[("introduced", "0"), ("fixed", "2.0")]);
        check(
            Ecosystem::PyPI,
            &r,
            &[],
            "2.0rc1:yes 2.0.dev1:yes 1!0.1:no 2.0+local:no",
        );
        assert_eq!(fixed_versions(Ecosystem::PyPI, "2.0rc1", &r), ["2.0"]);
    }

    #[test]
    fn distro_ranges() {
        let r = eco(&[("introduced", "0"), ("fixed", "1.2.3-1+deb12u1")]);
        check(
            Ecosystem::Debian,
            &r,
            &[],
            "1.2.3-1:yes 1.2.3-1+deb12u1:no 1:0.1-1:no 1.2.3-1~bpo1:yes",
        );
        let r = eco(&[("introduced", "0"), ("fixed", "0:1.1.1k-7.el8_6")]);
        check(
            Ecosystem::Rpm,
            &r,
            &[],
            "1.1.1k-6.el8_5:yes 1.1.1k-7.el8_6:no 1:1.0-1:no",
        );
        let r = eco(&[("introduced", "0"), ("fixed", "3.0.8-r0")]);
        check(
            Ecosystem::Apk,
            &r,
            &[],
            "3.0.7-r1:yes 3.0.8-r0:no 3.0.8:no 3.0.8_rc1-r0:yes",
        );
        let r = eco(&[("introduced", "6.0.0"), ("fixed", "6.0.3.1")]);
        check(
            Ecosystem::RubyGems,
            &r,
            &[],
            "5.2.8:no 6.0.0.rc1:no 6.0.0:yes 6.0.3:yes 6.0.3.1:no",
        );
    }

    #[test]
    fn git_ranges_are_ignored() {
        let r = vec![range(RangeType::Git, &[("introduced", "0"), ("fixed", "abc")])];
        check(Ecosystem::Cargo, &r, &[], "1.0.0:no junk:no");
        assert!(fixed_versions(Ecosystem::Cargo, "1.0.0", &r).is_empty());
    }

    #[test]
    fn parses_osv_json() {
        let v = json!([
            {"type": "SEMVER", "events": [{"introduced": "0"}, {"fixed": "1.0.2"}]},
            {"type": "ECOSYSTEM", "events": [{"introduced": "1.0"}, {"last_affected": "1.4"}, {"limit": "*"}],
             "database_specific": {"x": 1}},
            {"type": "GIT", "repo": "https://example.com/r", "events": [{"introduced": "abc"}]},
            {"type": "SOMETHING_ELSE", "events": [{"introduced": "0"}]},
            {"events": [{"introduced": "0"}]},
            {"type": "ECOSYSTEM", "events": [{"introduced": 0}, "junk", {"fixed": "2", "introduced": "1"}]},
            {"type": "ECOSYSTEM"},
        ]);
        let ranges = parse_ranges(&v);
        assert_eq!(
            ranges,
            vec![
                range(RangeType::Semver, &[("introduced", "0"), ("fixed", "1.0.2")]),
                range(
                    RangeType::Ecosystem,
                    &[("introduced", "1.0"), ("last_affected", "1.4"), ("limit", "*")]
                ),
                range(RangeType::Git, &[("introduced", "abc")]),
                range(RangeType::Ecosystem, &[("introduced", "1"), ("fixed", "2")]),
                range(RangeType::Ecosystem, &[]),
            ]
        );
        assert_eq!(parse_ranges(&json!({"ranges": v})), ranges);
        assert!(parse_ranges(&json!("nope")).is_empty());
        assert!(parse_ranges(&json!({"versions": []})).is_empty());
        // End to end: a GHSA-style record.
        let affected = json!({
            "package": {"ecosystem": "PyPI", "name": "example"},
            "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "2.5.1"}]}],
            "versions": ["2.5.0", "2.5.1rc1"]
        });
        assert_eq!(Ecosystem::from_osv("PyPI"), Some(Ecosystem::PyPI));
        let e = Ecosystem::PyPI;
        let ranges = parse_ranges(&affected);
        let versions: Vec<String> = affected["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(String::from))
            .collect();
        assert_eq!(is_affected(e, "2.5.1rc1", &ranges, &versions), Some(true));
        assert_eq!(is_affected(e, "2.5.1", &ranges, &versions), Some(false));
        assert_eq!(fixed_versions(e, "2.4", &ranges), ["2.5.1"]);
    }

    #[test]
    fn empty_ranges_affect_nothing() {
        check(Ecosystem::Npm, &[range(RangeType::Semver, &[])], &[], "1.0.0:no");
        check(Ecosystem::Npm, &eco(&[("fixed", "1.0.0")]), &[], "0.1.0:no 2.0.0:no");
    }
}
