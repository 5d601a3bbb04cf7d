//! Go module versions: SemVer with a `v` prefix, ordered as `go` does.
//!
//! Pseudo-versions (`v0.0.0-20191109021931-daa7c04131f5`,
//! `v1.2.4-0.20191109021931-daa7c04131f5`, `v1.2.4-pre.0.20191109021931-…`)
//! are SemVer pre-releases by design, so SemVer precedence places them
//! between the release they build on and the next one, in commit-time order.
//! Build metadata such as `+incompatible` is accepted and ignored for order.
//!
//! The `v` is optional: OSV's Go data writes `1.2.3`, modules write `v1.2.3`.
//! Shorthands Go's `semver` package accepts outside module versions (`v1`,
//! `v1.2`) are not module versions and are rejected.

use std::cmp::Ordering;

use super::semver::{parse_v, precedence};

pub(super) fn is_valid(s: &str) -> bool {
    parse_v(s).is_some()
}

pub(super) fn compare(a: &str, b: &str) -> Option<Ordering> {
    Some(precedence(&parse_v(a)?, &parse_v(b)?))
}

#[cfg(test)]
mod tests {
    use super::super::Ecosystem;
    use super::super::tests::{check_ascending, check_orders};

    #[test]
    fn go_orders() {
        check_ascending(
            Ecosystem::Go,
            &[
                "v0.0.0-20191109021931-daa7c04131f5",
                "v0.0.0-20200101000000-abcdefabcdef",
                "v0.1.0",
                "v1.2.3",
                "v1.2.4-0.20191109021931-daa7c04131f5",
                "v1.2.4-0.20200101000000-abcdefabcdef",
                "v1.2.4-pre",
                "v1.2.4-pre.0.20191109021931-daa7c04131f5",
                "v1.2.4-pre.1",
                "v1.2.4",
                "v1.10.0",
                "v2.0.0+incompatible",
                "v2.0.1",
            ],
        );
        let rows = "v2.0.0+incompatible=v2.0.0 v1.2.3=1.2.3 1.20.5<v1.21.0-rc.1 v1.21.0-rc.1<1.21.0";
        check_orders(Ecosystem::Go, rows);
        for bad in ["v1", "v1.2", "V1.2.3", "vv1.2.3", "go1.20", "v01.2.3", "", "latest"] {
            assert!(!Ecosystem::Go.is_valid(bad), "{bad:?}");
        }
    }
}
