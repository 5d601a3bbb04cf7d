//! SemVer 2.0 versions (npm, crates.io, OSV `SEMVER` ranges), through `semver`.
//!
//! Precedence is SemVer's: build metadata is ignored, so `1.0.0+a` and
//! `1.0.0+b` compare equal, and a pre-release sorts before its release.

use std::cmp::Ordering;

use ::semver::Version;

/// SemVer precedence: major, minor, patch, then pre-release (none is highest).
pub(crate) fn precedence(a: &Version, b: &Version) -> Ordering {
    (a.major, a.minor, a.patch)
        .cmp(&(b.major, b.minor, b.patch))
        .then_with(|| a.pre.cmp(&b.pre))
}

/// A crates.io version: strict SemVer 2.0.
pub(super) fn parse_cargo(s: &str) -> Option<Version> {
    Version::parse(s).ok()
}

/// An npm version: SemVer 2.0 after an optional `=` and an optional `v`, as
/// node-semver's `clean` allows.
pub(super) fn parse_npm(s: &str) -> Option<Version> {
    let s = s.strip_prefix('=').unwrap_or(s);
    let s = s.strip_prefix(['v', 'V']).unwrap_or(s);
    Version::parse(s).ok()
}

/// A version in an OSV `SEMVER` range or a Go module: SemVer 2.0, with or
/// without a leading `v`.
pub(crate) fn parse_v(s: &str) -> Option<Version> {
    Version::parse(s.strip_prefix('v').unwrap_or(s)).ok()
}

pub(super) fn compare_cargo(a: &str, b: &str) -> Option<Ordering> {
    Some(precedence(&parse_cargo(a)?, &parse_cargo(b)?))
}

pub(super) fn compare_npm(a: &str, b: &str) -> Option<Ordering> {
    Some(precedence(&parse_npm(a)?, &parse_npm(b)?))
}

/// Orders two versions of an OSV `SEMVER` range, tolerating a leading `v`;
/// `None` when either is not SemVer or is longer than [`super::MAX_LEN`].
pub(crate) fn compare_v(a: &str, b: &str) -> Option<Ordering> {
    if a.len() > super::MAX_LEN || b.len() > super::MAX_LEN {
        return None;
    }
    Some(precedence(&parse_v(a)?, &parse_v(b)?))
}

#[cfg(test)]
mod tests {
    use super::super::Ecosystem;
    use super::super::tests::{check_ascending, check_orders};
    use super::*;

    #[test]
    fn semver_spec_precedence() {
        // semver.org, section 11.
        let list = [
            "1.0.0-alpha",
            "1.0.0-alpha.1",
            "1.0.0-alpha.beta",
            "1.0.0-beta",
            "1.0.0-beta.2",
            "1.0.0-beta.11",
            "1.0.0-rc.1",
            "1.0.0",
            "2.0.0",
            "2.1.0",
            "2.1.1",
        ];
        check_ascending(Ecosystem::Cargo, &list);
        check_ascending(Ecosystem::Npm, &list);
    }

    #[test]
    fn build_metadata_and_prefixes() {
        let rows = "1.0.0+a=1.0.0+b 1.0.0-rc.1+x=1.0.0-rc.1 1.9.0<1.10.0 1.0.0-2<1.0.0-10 1.0.0-10<1.0.0-a";
        check_orders(Ecosystem::Cargo, rows);
        check_orders(Ecosystem::Npm, "v1.2.3=1.2.3 V1.0.0<1.0.1");
        for (a, b) in [("=1.2.3", "1.2.3"), ("=v1.2.3", "v1.2.3"), ("=1.2.3+b", "1.2.3")] {
            assert_eq!(Ecosystem::Npm.compare(a, b), Some(Ordering::Equal), "{a} = {b}");
        }
        for bad in [
            "v1.2.3", "=1.2.3", "1.2", "1", "01.2.3", "1.2.3-01", "1.2.3-", "1.2.3 ", "",
        ] {
            assert!(!Ecosystem::Cargo.is_valid(bad), "{bad:?}");
        }
        for bad in ["vv1.2.3", "==1.2.3", "v=1.2.3", "1.2", "x1.2.3", ""] {
            assert!(!Ecosystem::Npm.is_valid(bad), "{bad:?}");
        }
        assert_eq!(compare_v("v1.2.3", "1.2.3"), Some(Ordering::Equal));
        assert_eq!(compare_v("1.2.3-rc.1", "v1.2.3"), Some(Ordering::Less));
        assert_eq!(compare_v("1.2", "1.2.0"), None);
    }
}
