//! What an import keeps that a client's own write would be refused: public
//! corpora carry values Ward cannot use in its decisions (a fixed version
//! that is not an apk version) and texts over Ward's bounds (scanner output).
//! Refusing the whole advisory would lose what is true in it, so an import
//! keeps such a value as written where it is safe text, shortens an
//! over-long text to its bound, and flags both on the advisory. A flagged
//! version decides nothing: `resolved_at` and the OSV export treat a fix
//! they cannot order as no fix.

use ward_proto::vulnerabilities::v2::{Advisory, advisory_event, detection};
use ward_store::advisories::FlagRecord;

use super::{MAX_LOCATION, MAX_NAME, MAX_TEXT};

/// A kept version that does not order.
pub const UNORDERABLE_VERSION: &str = "UNORDERABLE_VERSION";
/// A text shortened to its bound.
pub const TRUNCATED: &str = "TRUNCATED";

/// Whether an import keeps `v` as written although it is not an apk version:
/// it is non-empty safe text within the bound of a name.
pub fn unorderable(v: &str) -> bool {
    let mut bad = Vec::new();
    ward_core::names::check_text("v", v, MAX_NAME, &mut bad);
    bad.is_empty() && !v.trim().is_empty() && !ward_core::apk::is_valid(v)
}

/// Collects flags while an advisory's fields are adjusted.
struct Flags {
    prefix: String,
    out: Vec<FlagRecord>,
}

impl Flags {
    /// Shortens `v` to at most `max` bytes (at a character boundary).
    fn cut(&mut self, field: &str, v: &mut String, max: usize) {
        if v.len() <= max {
            return;
        }
        let was = v.len();
        let mut end = max;
        while !v.is_char_boundary(end) {
            end -= 1;
        }
        v.truncate(end);
        self.out.push(FlagRecord {
            code: TRUNCATED.into(),
            field: format!("{}{field}", self.prefix),
            detail: format!("{was} bytes, over the bound of {max}: the first {end} are kept"),
        });
    }

    fn version(&mut self, field: &str, v: &str) {
        if unorderable(v) {
            self.out.push(FlagRecord {
                code: UNORDERABLE_VERSION.into(),
                field: format!("{}{field}", self.prefix),
                detail: format!(
                    "{:?} is not an apk version: kept as written, it decides nothing",
                    ward_core::names::echo(v)
                ),
            });
        }
    }
}

/// Adjusts an imported advisory as described above and returns its flags
/// (fields named under `prefix`, as the document names them).
pub fn keep_what_is_valid(a: &mut Advisory, prefix: &str) -> Vec<FlagRecord> {
    use advisory_event::Type as T;
    let mut f = Flags {
        prefix: prefix.to_owned(),
        out: Vec::new(),
    };
    f.cut("artifact_name", &mut a.artifact_name, MAX_NAME);
    f.cut("artifact_type", &mut a.artifact_type, MAX_NAME);
    f.cut("artifact_architecture", &mut a.artifact_architecture, MAX_NAME);
    f.cut("component_name", &mut a.component_name, MAX_NAME);
    f.cut("component_type", &mut a.component_type, MAX_NAME);
    f.cut("component_location", &mut a.component_location, MAX_LOCATION);
    for e in &mut a.events {
        // An event is named by its time and type, not its position: a
        // later import of a longer history names it the same.
        let when = chrono::DateTime::from_timestamp_millis(e.create_time.as_ref().map_or(0, |t| t.to_millis()))
            .unwrap_or_default()
            .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true);
        let kind = e.r#type.as_ref().map_or("", |t| super::kind_of(t).schema_name());
        let at = |name: &str| format!("events[{when} {kind}].{name}");
        match &mut e.r#type {
            Some(T::Detection(d)) => match &mut d.r#type {
                Some(detection::Type::Scanv1(s)) => {
                    for (name, v) in [
                        ("scanner", &mut s.scanner),
                        ("subpackage", &mut s.subpackage),
                        ("component_id", &mut s.component_id),
                        ("component", &mut s.component),
                        ("component_version", &mut s.component_version),
                        ("component_type", &mut s.component_type),
                        ("artifact_version", &mut s.artifact_version),
                        ("scanner_version", &mut s.scanner_version),
                        ("grype_db_built", &mut s.grype_db_built),
                        ("grype_db_checksum", &mut s.grype_db_checksum),
                    ] {
                        f.cut(&at(&format!("detection.scanv1.{name}")), v, MAX_TEXT);
                    }
                    f.cut(
                        &at("detection.scanv1.component_location"),
                        &mut s.component_location,
                        MAX_LOCATION,
                    );
                }
                Some(detection::Type::Nvdapi(n)) => {
                    f.cut(&at("detection.nvdapi.cpe_searched"), &mut n.cpe_searched, MAX_TEXT);
                    f.cut(&at("detection.nvdapi.cpe_found"), &mut n.cpe_found, MAX_TEXT);
                }
                _ => {}
            },
            Some(T::Fixed(x)) => {
                f.version(&at("fixed.fixed_version"), &x.fixed_version);
                f.cut(&at("fixed.note"), &mut x.note, MAX_TEXT);
                f.cut(&at("fixed.scanner_version"), &mut x.scanner_version, MAX_NAME);
                f.cut(&at("fixed.grype_db_built"), &mut x.grype_db_built, MAX_NAME);
                f.cut(&at("fixed.grype_db_checksum"), &mut x.grype_db_checksum, MAX_NAME);
            }
            Some(T::Patched(x)) => {
                for (j, v) in x.patched_versions.iter().enumerate() {
                    f.version(&at(&format!("patched.patched_versions[{j}]")), v);
                }
                f.cut(&at("patched.note"), &mut x.note, MAX_TEXT);
            }
            Some(T::FalsePositiveDetermination(x)) => {
                f.cut(&at("false_positive_determination.note"), &mut x.note, MAX_TEXT)
            }
            Some(T::TruePositiveDetermination(x)) => {
                f.cut(&at("true_positive_determination.note"), &mut x.note, MAX_TEXT)
            }
            Some(T::AnalysisNotPlanned(x)) => f.cut(&at("analysis_not_planned.note"), &mut x.note, MAX_TEXT),
            Some(T::FixNotPlanned(x)) => f.cut(&at("fix_not_planned.note"), &mut x.note, MAX_TEXT),
            Some(T::PendingUpstreamFix(x)) => f.cut(&at("pending_upstream_fix.note"), &mut x.note, MAX_TEXT),
            None => {}
        }
    }
    f.out
}

/// A flag in words, for an import's report.
pub fn describe(f: &FlagRecord) -> String {
    format!("{} {}: {}", f.code, f.field, f.detail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ward_proto::vulnerabilities::v2::{AdvisoryEvent, Detection, Fixed};

    fn event(t: advisory_event::Type) -> AdvisoryEvent {
        AdvisoryEvent {
            r#type: Some(t),
            ..Default::default()
        }
    }

    #[test]
    fn keeps_unorderable_versions_and_cuts_long_texts_with_flags() {
        let long = "é".repeat(MAX_LOCATION); // 2 bytes each: over the bound
        let mut a = Advisory {
            component_location: long.clone(),
            events: vec![
                event(advisory_event::Type::Fixed(Fixed {
                    fixed_version: "1.1.0-r1-r0".into(),
                    ..Default::default()
                })),
                event(advisory_event::Type::Fixed(Fixed {
                    fixed_version: "1.1.0-r1".into(),
                    ..Default::default()
                })),
                event(advisory_event::Type::Detection(Detection {
                    r#type: Some(detection::Type::Scanv1(detection::ScanV1 {
                        component_location: "x".repeat(MAX_LOCATION + 1),
                        ..Default::default()
                    })),
                })),
            ],
            ..Default::default()
        };
        let flags = keep_what_is_valid(&mut a, "advisories[3].");
        let got: Vec<(&str, &str)> = flags.iter().map(|f| (f.code.as_str(), f.field.as_str())).collect();
        assert_eq!(
            got,
            [
                (TRUNCATED, "advisories[3].component_location"),
                (
                    UNORDERABLE_VERSION,
                    "advisories[3].events[1970-01-01T00:00:00Z fixed].fixed.fixed_version"
                ),
                (
                    TRUNCATED,
                    "advisories[3].events[1970-01-01T00:00:00Z detection].detection.scanv1.component_location"
                ),
            ]
        );
        assert_eq!(a.component_location.len(), MAX_LOCATION);
        assert!(long.starts_with(&a.component_location));
        let Some(advisory_event::Type::Fixed(x)) = &a.events[0].r#type else {
            panic!()
        };
        assert_eq!(x.fixed_version, "1.1.0-r1-r0", "kept as written");
        assert!(flags[1].detail.contains("decides nothing"), "{}", flags[1].detail);
    }

    #[test]
    fn unsafe_or_empty_versions_are_not_kept() {
        assert!(unorderable("1.1.0-r1-r0"));
        assert!(!unorderable("1.1.0-r1"));
        assert!(!unorderable(""));
        assert!(!unorderable("1.0\u{202e}"));
        assert!(!unorderable(&"1".repeat(MAX_NAME + 1)));
    }
}
