//! Vulnerability severity: qualitative ratings and CVSS base scores.
//!
//! Feeds rate severity in words (`MODERATE`, `Important`, `negligible`) or
//! give a CVSS vector; [`Severity`] is the one scale Ward sorts and filters
//! by, and [`cvss_score`] turns a CVSS v3.0, v3.1 or v4.0 vector into its base
//! score with the `cvss` crate.

use std::fmt;
use std::str::FromStr;

/// Longest CVSS vector accepted, in bytes; a full v4.0 vector with every
/// optional metric is under 300.
pub const MAX_VECTOR_LEN: usize = 1024;

/// A severity rating, ordered from least to most severe for sorting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Not rated.
    Unknown,
    /// A score of 0.0 (CVSS "None"), or rated as not worth fixing.
    Negligible,
    /// 0.1–3.9.
    Low,
    /// 4.0–6.9.
    Medium,
    /// 7.0–8.9.
    High,
    /// 9.0–10.0.
    Critical,
}

impl Severity {
    /// Every severity, least severe first.
    pub const ALL: [Severity; 6] = [
        Severity::Unknown,
        Severity::Negligible,
        Severity::Low,
        Severity::Medium,
        Severity::High,
        Severity::Critical,
    ];

    /// The CVSS qualitative rating of a score: 0.0 is `Negligible`, up to 3.9
    /// `Low`, up to 6.9 `Medium`, up to 8.9 `High`, up to 10.0 `Critical`.
    /// A score outside 0–10 (or NaN) is `Unknown`.
    pub fn from_score(score: f64) -> Self {
        if !(0.0..=10.0).contains(&score) {
            Self::Unknown
        } else if score == 0.0 {
            Self::Negligible
        } else if score < 4.0 {
            Self::Low
        } else if score < 7.0 {
            Self::Medium
        } else if score < 9.0 {
            Self::High
        } else {
            Self::Critical
        }
    }

    /// The lower-case name: `unknown`, `negligible`, `low`, `medium`, `high`
    /// or `critical`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            Self::Negligible => "negligible",
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
            Self::Critical => "critical",
        }
    }

    /// Reads a rating as feeds write it, ignoring case and surrounding
    /// whitespace: the names of [`Severity::as_str`], plus `none` and
    /// `unimportant` (Debian) for `Negligible`, `moderate` (GitHub, Red Hat)
    /// for `Medium` and `important` (Red Hat) for `High`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "unknown" => Self::Unknown,
            "negligible" | "none" | "unimportant" => Self::Negligible,
            "low" => Self::Low,
            "medium" | "moderate" => Self::Medium,
            "high" | "important" => Self::High,
            "critical" => Self::Critical,
            _ => return None,
        })
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The base metrics of CVSS v4.0; the threat, environmental and
/// supplemental metrics are left out of the base score.
const V4_BASE: [&str; 11] = ["AV", "AC", "AT", "PR", "UI", "VC", "VI", "VA", "SC", "SI", "SA"];

/// Scores a CVSS vector: `CVSS:3.0/…`, `CVSS:3.1/…` or `CVSS:4.0/…`, giving
/// the base score and the version (`"3.0"`, `"3.1"` or `"4.0"`).
///
/// The vector must be well-formed for its version, with every base metric
/// and no metric twice; temporal, threat and environmental metrics are
/// checked but do not change the result, which is always the base score
/// (CVSS-B for v4.0). `None` for anything else, including CVSS v2 vectors
/// and vectors longer than [`MAX_VECTOR_LEN`]. Never panics.
pub fn cvss_score(vector: &str) -> Option<(f64, &'static str)> {
    let vector = vector.trim();
    if vector.len() > MAX_VECTOR_LEN {
        return None;
    }
    let (prefix, _) = vector.split_once('/')?;
    let (score, version) = match prefix {
        "CVSS:3.0" | "CVSS:3.1" => {
            let v = cvss::v3::Vector::from_str(vector).ok()?;
            let complete = v.av.is_some()
                && v.ac.is_some()
                && v.pr.is_some()
                && v.ui.is_some()
                && v.s.is_some()
                && v.c.is_some()
                && v.i.is_some()
                && v.a.is_some();
            if !complete {
                return None;
            }
            let version = if prefix == "CVSS:3.0" { "3.0" } else { "3.1" };
            (v.base_score().value(), version)
        }
        "CVSS:4.0" => {
            // The full vector must parse; the base vector is then scored.
            cvss::v4::Vector::from_str(vector).ok()?;
            let base: Vec<&str> = vector
                .split('/')
                .enumerate()
                .filter(|(i, metric)| {
                    *i == 0
                        || metric
                            .split_once(':')
                            .is_some_and(|(name, _)| V4_BASE.iter().any(|b| b.eq_ignore_ascii_case(name)))
                })
                .map(|(_, metric)| metric)
                .collect();
            let v = cvss::v4::Vector::from_str(&base.join("/")).ok()?;
            (v.score().value(), "4.0")
        }
        _ => return None,
    };
    (0.0..=10.0).contains(&score).then_some((score, version))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn score_bands() {
        let cases = [
            (0.0, Severity::Negligible),
            (0.1, Severity::Low),
            (3.9, Severity::Low),
            (4.0, Severity::Medium),
            (6.9, Severity::Medium),
            (7.0, Severity::High),
            (8.9, Severity::High),
            (9.0, Severity::Critical),
            (10.0, Severity::Critical),
            (-0.1, Severity::Unknown),
            (10.1, Severity::Unknown),
            (f64::NAN, Severity::Unknown),
            (f64::INFINITY, Severity::Unknown),
        ];
        for (score, want) in cases {
            assert_eq!(Severity::from_score(score), want, "{score}");
        }
    }

    #[test]
    fn names() {
        for s in Severity::ALL {
            assert_eq!(Severity::parse(s.as_str()), Some(s));
            assert_eq!(Severity::parse(&s.as_str().to_uppercase()), Some(s));
            assert_eq!(s.to_string(), s.as_str());
        }
        let cases = [
            ("MODERATE", Severity::Medium),
            ("Moderate", Severity::Medium),
            ("Important", Severity::High),
            (" HIGH ", Severity::High),
            ("None", Severity::Negligible),
            ("unimportant", Severity::Negligible),
            ("Critical", Severity::Critical),
        ];
        for (text, want) in cases {
            assert_eq!(Severity::parse(text), Some(want), "{text}");
        }
        for bad in ["", "severe", "7.5", "mediumish", "crit"] {
            assert_eq!(Severity::parse(bad), None, "{bad}");
        }
        let mut sorted = vec![Severity::Critical, Severity::Unknown, Severity::Low, Severity::High];
        sorted.sort();
        assert_eq!(
            sorted,
            [Severity::Unknown, Severity::Low, Severity::High, Severity::Critical]
        );
    }

    #[test]
    fn known_vectors() {
        let cases = [
            ("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H", 9.8, "3.1"),
            ("CVSS:3.1/AV:N/AC:L/PR:N/UI:R/S:C/C:L/I:L/A:N", 6.1, "3.1"),
            ("CVSS:3.0/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H", 9.8, "3.0"),
            ("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:C/C:H/I:H/A:H", 10.0, "3.1"),
            ("CVSS:3.1/AV:N/AC:H/PR:N/UI:N/S:U/C:H/I:N/A:N", 5.9, "3.1"),
            ("CVSS:3.1/AV:L/AC:L/PR:L/UI:N/S:U/C:H/I:H/A:H", 7.8, "3.1"),
            ("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:N/A:H", 7.5, "3.1"),
            ("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:N/A:N", 0.0, "3.1"),
            // Temporal metrics do not change the base score.
            ("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H/E:U/RL:O/RC:R", 9.8, "3.1"),
            (
                "CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:N/VC:H/VI:H/VA:H/SC:N/SI:N/SA:N",
                9.3,
                "4.0",
            ),
            (
                "CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:N/VC:H/VI:H/VA:H/SC:H/SI:H/SA:H",
                10.0,
                "4.0",
            ),
            (
                "CVSS:4.0/AV:L/AC:L/AT:N/PR:L/UI:N/VC:H/VI:H/VA:H/SC:N/SI:N/SA:N",
                8.5,
                "4.0",
            ),
            (
                "CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:N/VC:N/VI:N/VA:N/SC:N/SI:N/SA:N",
                0.0,
                "4.0",
            ),
            // Threat and supplemental metrics are dropped for the base score.
            (
                "CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:N/VC:H/VI:H/VA:H/SC:N/SI:N/SA:N/E:U/S:P/AU:Y",
                9.3,
                "4.0",
            ),
            (" CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H\n", 9.8, "3.1"),
        ];
        for (vector, score, version) in cases {
            assert_eq!(cvss_score(vector), Some((score, version)), "{vector}");
        }
        assert_eq!(
            cvss_score("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H").map(|(s, _)| Severity::from_score(s)),
            Some(Severity::Critical)
        );
    }

    #[test]
    fn malformed_vectors() {
        let long = format!("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H{}", "/E:X".repeat(300));
        for bad in [
            "",
            "CVSS:3.1",
            "CVSS:3.1/",
            "CVSS:3.1/AV:N",
            "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H",
            "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H/A:H",
            "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:Q",
            "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H/",
            "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H/XX:Y",
            "CVSS:3.2/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H",
            "CVSS:2.0/AV:N/AC:L/Au:N/C:P/I:P/A:P",
            "AV:N/AC:L/Au:N/C:P/I:P/A:P",
            "CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:N/VC:H/VI:H/VA:H/SC:N/SI:N",
            "CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:N/VC:H/VI:H/VA:H/SC:N/SI:N/SA:N/E:Z",
            "CVSS:4.0/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H",
            "cvss:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H",
            &long,
        ] {
            assert_eq!(cvss_score(bad), None, "{bad:?}");
        }
    }

    proptest! {
        /// Arbitrary input, and vectors built from real metric names and
        /// values, never panic, and any score is in range.
        #[test]
        fn never_panics(
            s in ".{0,1100}",
            v in "CVSS:(3\\.0|3\\.1|4\\.0)(/(AV|AC|AT|PR|UI|S|C|I|A|VC|VI|VA|SC|SI|SA|E|RL|RC|CR|IR|AR|MAV|MAC|MAT|MPR|MUI|MS|MC|MI|MA|MVC|MVI|MVA|MSC|MSI|MSA|AU|R|V|RE|U|XX):[NLHRUCAPXSTYDIMOWFG]{1,2}){0,16}",
        ) {
            for x in [&s, &v] {
                if let Some((score, version)) = cvss_score(x) {
                    prop_assert!((0.0..=10.0).contains(&score));
                    prop_assert!(["3.0", "3.1", "4.0"].contains(&version));
                }
            }
        }
    }
}
