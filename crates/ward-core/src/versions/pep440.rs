//! Python package versions: PEP 440, through `pep440_rs`.
//!
//! Normalized forms compare equal (`1.0 == 1.0.0`, `1.0RC1 == 1.0rc1`,
//! `1.0-1 == 1.0.post1`, `v1.0 == 1.0`); epochs, pre-, post- and
//! dev-releases and local versions order as the specification says.

use std::cmp::Ordering;
use std::str::FromStr;

use pep440_rs::Version;

fn parse(s: &str) -> Option<Version> {
    Version::from_str(s).ok()
}

pub(super) fn is_valid(s: &str) -> bool {
    parse(s).is_some()
}

pub(super) fn compare(a: &str, b: &str) -> Option<Ordering> {
    Some(parse(a)?.cmp(&parse(b)?))
}

#[cfg(test)]
mod tests {
    use super::super::Ecosystem;
    use super::super::tests::{check_ascending, check_orders};

    #[test]
    fn pep440_spec_order() {
        // The ordering example of PEP 440's "Summary of permitted suffixes and
        // relative ordering", plus local versions.
        check_ascending(
            Ecosystem::PyPI,
            &[
                "1.0.dev456",
                "1.0a1",
                "1.0a2.dev456",
                "1.0a12.dev456",
                "1.0a12",
                "1.0b1.dev456",
                "1.0b2",
                "1.0b2.post345.dev456",
                "1.0b2.post345",
                "1.0rc1.dev456",
                "1.0rc1",
                "1.0",
                "1.0+abc.5",
                "1.0+abc.7",
                "1.0+5",
                "1.0.post456.dev34",
                "1.0.post456",
                "1.0.15",
                "1.1.dev1",
            ],
        );
    }

    #[test]
    fn pep440_normalization_and_epochs() {
        let rows = "
            1.0=1.0.0 1.0.0.0=1 1.0RC1=1.0rc1 1.0c1=1.0rc1 1.0-alpha1=1.0a1 1.0.preview2=1.0rc2
            1.0-1=1.0.post1 1.0.post=1.0.post0 1.0-dev=1.0.dev0 v1.0=1.0 1.0+ABC=1.0+abc 01.02=1.2
            2013.10<1!1.0 1!1.0<1!1.1 1.9<1.10 1.0a1<1.0 1.0<1.0.post1 1.0.dev1<1.0a1 0.9.99<1.0rc1";
        check_orders(Ecosystem::PyPI, rows);
        for bad in ["", "1.0-foo", "1..0", "one", "1.0+", "1.0+a_", "*", "1.0.*", "=1.0"] {
            assert!(!Ecosystem::PyPI.is_valid(bad), "{bad:?}");
        }
    }
}
