//! Package versions and their order, per ecosystem.
//!
//! Whether an installed package is affected by an advisory comes down to a
//! version comparison, and every ecosystem orders versions its own way: dpkg
//! puts `1.0~rc1` before `1.0`, PEP 440 puts `1.0.dev1` before `1.0a1`, Maven
//! treats `1.0`, `1.0.0` and `1-ga` as one version. [`Ecosystem::compare`]
//! follows each ecosystem's own rules, and answers `None` rather than guessing
//! when a string is not a version there.
//!
//! Every ecosystem accepts at most [`MAX_LEN`] bytes (apk at most
//! [`crate::apk::MAX_LEN`]), so parsing and comparison stay cheap whatever a
//! feed or a client sends.

use std::cmp::Ordering;

mod debian;
mod go;
mod maven;
mod pep440;
mod rpm;
mod rubygems;
pub(crate) mod semver;

/// Longest version accepted, in bytes, in every ecosystem but apk.
pub const MAX_LEN: usize = 256;

/// A package ecosystem, as far as version ordering goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ecosystem {
    /// Alpine, Wolfi and Chainguard packages: apk-tools' order.
    Apk,
    /// Debian and Ubuntu packages: dpkg's order.
    Debian,
    /// Red Hat, SUSE and other RPM distributions: rpm's order.
    Rpm,
    /// Python packages: PEP 440.
    PyPI,
    /// npm packages: SemVer 2.0, with node-semver's leading `=` and `v`.
    Npm,
    /// Rust crates: SemVer 2.0.
    Cargo,
    /// Go modules: `v`-prefixed SemVer, pseudo-versions and `+incompatible`.
    Go,
    /// Maven artifacts: Maven's `ComparableVersion`.
    Maven,
    /// Ruby gems: `Gem::Version`.
    RubyGems,
}

impl Ecosystem {
    /// Every ecosystem.
    pub const ALL: [Ecosystem; 9] = [
        Ecosystem::Apk,
        Ecosystem::Debian,
        Ecosystem::Rpm,
        Ecosystem::PyPI,
        Ecosystem::Npm,
        Ecosystem::Cargo,
        Ecosystem::Go,
        Ecosystem::Maven,
        Ecosystem::RubyGems,
    ];

    /// The ecosystem of a package URL type (`pkg:<type>/…`): `apk`, `deb`,
    /// `rpm`, `pypi`, `npm`, `cargo`, `golang`, `maven` or `gem`. purl types
    /// are case-insensitive.
    pub fn from_purl_type(t: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.purl_type().eq_ignore_ascii_case(t))
    }

    /// The ecosystem whose order an OSV `affected[].package.ecosystem` uses.
    ///
    /// A `:` suffix (a release such as `Debian:12`, `Alpine:v3.18` or
    /// `Ubuntu:22.04:LTS`, or Maven's repository URL) does not change the
    /// order, so only the name before it counts. Ubuntu orders as Debian;
    /// Alpine, Alpaquita, Wolfi and Chainguard as apk; Red Hat, AlmaLinux,
    /// Rocky Linux, openSUSE, SUSE, Mageia, Azure Linux, openEuler and
    /// Photon OS as rpm. Names match case-insensitively; other ecosystems
    /// give `None`.
    pub fn from_osv(name: &str) -> Option<Self> {
        let base = name.split_once(':').map_or(name, |(base, _)| base).trim();
        let is = |s: &str| base.eq_ignore_ascii_case(s);
        let starts = |p: &str| base.len() >= p.len() && base.as_bytes()[..p.len()].eq_ignore_ascii_case(p.as_bytes());
        Some(if is("PyPI") {
            Self::PyPI
        } else if is("npm") {
            Self::Npm
        } else if is("crates.io") {
            Self::Cargo
        } else if is("Go") {
            Self::Go
        } else if is("Maven") {
            Self::Maven
        } else if is("RubyGems") {
            Self::RubyGems
        } else if is("Debian") || is("Ubuntu") {
            Self::Debian
        } else if is("Alpine") || is("Alpaquita") || is("Wolfi") || is("Chainguard") {
            Self::Apk
        } else if is("Red Hat")
            || is("AlmaLinux")
            || is("Rocky Linux")
            || is("Mageia")
            || is("Azure Linux")
            || is("openEuler")
            || is("Photon OS")
            || starts("openSUSE")
            || starts("SUSE")
        {
            Self::Rpm
        } else {
            return None;
        })
    }

    /// The package URL type: `apk`, `deb`, `rpm`, `pypi`, `npm`, `cargo`,
    /// `golang`, `maven` or `gem`.
    pub fn purl_type(self) -> &'static str {
        match self {
            Self::Apk => "apk",
            Self::Debian => "deb",
            Self::Rpm => "rpm",
            Self::PyPI => "pypi",
            Self::Npm => "npm",
            Self::Cargo => "cargo",
            Self::Go => "golang",
            Self::Maven => "maven",
            Self::RubyGems => "gem",
        }
    }

    /// Orders two versions the way this ecosystem does; `None` when either is
    /// not a valid version here. Versions that the ecosystem treats as the
    /// same (`1.0` and `1.0.0` in PyPI, `1.0` and `1.0-0` in Debian) compare
    /// `Equal`. The order is reflexive and antisymmetric on valid versions,
    /// and transitive too except in Maven, whose own order is not for a few
    /// unusual mixes of qualifiers and lists (as `maven.rs` shows).
    pub fn compare(self, a: &str, b: &str) -> Option<Ordering> {
        if a.len() > MAX_LEN || b.len() > MAX_LEN {
            return None;
        }
        match self {
            Self::Apk => crate::apk::compare(a, b),
            Self::Debian => debian::compare(a, b),
            Self::Rpm => rpm::compare(a, b),
            Self::PyPI => pep440::compare(a, b),
            Self::Npm => semver::compare_npm(a, b),
            Self::Cargo => semver::compare_cargo(a, b),
            Self::Go => go::compare(a, b),
            Self::Maven => maven::compare(a, b),
            Self::RubyGems => rubygems::compare(a, b),
        }
    }

    /// Whether `v` is a valid version in this ecosystem.
    pub fn is_valid(self, v: &str) -> bool {
        if v.len() > MAX_LEN {
            return false;
        }
        match self {
            Self::Apk => crate::apk::is_valid(v),
            Self::Debian => debian::is_valid(v),
            Self::Rpm => rpm::is_valid(v),
            Self::PyPI => pep440::is_valid(v),
            Self::Npm => semver::parse_npm(v).is_some(),
            Self::Cargo => semver::parse_cargo(v).is_some(),
            Self::Go => go::is_valid(v),
            Self::Maven => maven::is_valid(v),
            Self::RubyGems => rubygems::is_valid(v),
        }
    }
}

/// Compares two runs of ASCII digits by value, at any length.
fn cmp_digits(a: &[u8], b: &[u8]) -> Ordering {
    let strip = |d: &[u8]| -> usize { d.iter().take_while(|&&c| c == b'0').count() };
    let (a, b) = (&a[strip(a)..], &b[strip(b)..]);
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Checks rows of `a<b` and `a=b` (whitespace-separated) in both directions.
    pub(super) fn check_orders(eco: Ecosystem, rows: &str) {
        for row in rows.split_whitespace() {
            let (a, b, want) = match (row.split_once('<'), row.split_once('=')) {
                (Some((a, b)), _) => (a, b, Ordering::Less),
                (None, Some((a, b))) => (a, b, Ordering::Equal),
                _ => panic!("malformed row {row}"),
            };
            assert_eq!(eco.compare(a, b), Some(want), "{eco:?}: {row}");
            assert_eq!(eco.compare(b, a), Some(want.reverse()), "{eco:?}: {row} reversed");
        }
    }

    /// Checks that a list is strictly ascending, every pair.
    pub(super) fn check_ascending(eco: Ecosystem, list: &[&str]) {
        for (i, a) in list.iter().enumerate() {
            for b in &list[i + 1..] {
                assert_eq!(eco.compare(a, b), Some(Ordering::Less), "{eco:?}: {a} < {b}");
                assert_eq!(eco.compare(b, a), Some(Ordering::Greater), "{eco:?}: {b} > {a}");
            }
        }
    }

    #[test]
    fn purl_types_round_trip() {
        for e in Ecosystem::ALL {
            assert_eq!(Ecosystem::from_purl_type(e.purl_type()), Some(e));
        }
        assert_eq!(Ecosystem::from_purl_type("DEB"), Some(Ecosystem::Debian));
        assert_eq!(Ecosystem::from_purl_type("golang"), Some(Ecosystem::Go));
        assert_eq!(Ecosystem::from_purl_type("gem"), Some(Ecosystem::RubyGems));
        for t in ["go", "pip", "crates.io", "", "nuget", "oci", "apkx"] {
            assert_eq!(Ecosystem::from_purl_type(t), None, "{t}");
        }
    }

    #[test]
    fn osv_ecosystem_names() {
        use Ecosystem::*;
        let cases = [
            ("PyPI", PyPI),
            ("npm", Npm),
            ("crates.io", Cargo),
            ("Go", Go),
            ("Maven", Maven),
            ("Maven:https://maven.google.com", Maven),
            ("RubyGems", RubyGems),
            ("Debian", Debian),
            ("Debian:12", Debian),
            ("Debian:sid", Debian),
            ("Ubuntu", Debian),
            ("Ubuntu:22.04:LTS", Debian),
            ("Ubuntu:Pro:18.04:LTS", Debian),
            ("Alpine", Apk),
            ("Alpine:v3.18", Apk),
            ("Wolfi", Apk),
            ("Chainguard", Apk),
            ("Alpaquita:23", Apk),
            ("Red Hat", Rpm),
            ("Red Hat:enterprise_linux:9::appstream", Rpm),
            ("AlmaLinux:9", Rpm),
            ("Rocky Linux:8", Rpm),
            ("openSUSE:Tumbleweed", Rpm),
            ("openSUSE Leap 15.5", Rpm),
            ("SUSE:Linux Enterprise Server 15 SP5", Rpm),
            ("Mageia:9", Rpm),
            ("Azure Linux:3", Rpm),
            ("openEuler:24.03-LTS", Rpm),
            ("Photon OS:5.0", Rpm),
            ("pypi", PyPI),
        ];
        for (name, want) in cases {
            assert_eq!(Ecosystem::from_osv(name), Some(want), "{name}");
        }
        for name in [
            "",
            "NuGet",
            "Packagist",
            "Hex",
            "GIT",
            "Linux",
            "OSS-Fuzz",
            "Debianish",
            ":Debian",
            "Root:Debian:12",
        ] {
            assert_eq!(Ecosystem::from_osv(name), None, "{name}");
        }
    }

    #[test]
    fn length_is_bounded() {
        let long = format!("1.{}", "0".repeat(MAX_LEN));
        for e in Ecosystem::ALL {
            assert!(!e.is_valid(&long), "{e:?}");
            assert_eq!(e.compare(&long, "1.0"), None, "{e:?}");
            assert_eq!(e.compare("1.0", &long), None, "{e:?}");
        }
    }

    #[test]
    fn one_version_in_every_ecosystem() {
        for e in Ecosystem::ALL {
            assert!(e.is_valid("1.2.3"), "{e:?}");
            assert_eq!(e.compare("1.2.3", "1.2.3"), Some(Ordering::Equal), "{e:?}");
            assert_eq!(e.compare("1.2.3", "1.10.0"), Some(Ordering::Less), "{e:?}");
        }
    }

    /// Small-alphabet generators of valid versions, so that equal and nearly
    /// equal versions turn up often.
    fn generator(e: Ecosystem) -> &'static str {
        match e {
            Ecosystem::Apk => "[0-2]{1,2}(\\.[0-2]{1,2}){0,2}[ab]?(_(alpha|rc|p)[0-2]?)?(-r[0-2])?",
            Ecosystem::Debian => "([0-2]:)?[0-2]{1,2}([.~+][0-2a]{1,2}){0,3}[a~]?(-[0-2a~.]{0,2}[0-2a])?",
            Ecosystem::Rpm => {
                "([0-2]:)?[0-2a]{1,2}([._~^+]{1,2}[0-2a]{1,2}){0,3}[~^]?(-[0-2a]{1,2}([.~^][0-2a]{0,2}){0,2})?"
            }
            Ecosystem::PyPI => {
                "([0-2]!)?[0-2]{1,2}(\\.[0-2]{1,2}){0,2}((a|b|rc)[0-2])?(\\.post[0-2])?(\\.dev[0-2])?\
                 (\\+[a-c0-2]{1,3}(\\.[a-c0-2]{1,3})?)?"
            }
            Ecosystem::Npm => {
                "[=]?v?[0-2]\\.[0-2]\\.[0-2](-(alpha|beta|rc|[0-2]|0a)(\\.(alpha|[0-2]|x)){0,2})?(\\+[a-z0-2]{1,3})?"
            }
            Ecosystem::Cargo => {
                "[0-2]\\.[0-2]\\.[0-2](-(alpha|beta|rc|[0-2]|0a)(\\.(alpha|[0-2]|x)){0,2})?(\\+[a-z0-2]{1,3})?"
            }
            Ecosystem::Go => {
                "v?[0-2]\\.[0-2]\\.[0-2](-(pre|0|pre\\.0)\\.2019010[12]000000-[0-9a-f]{2}|-rc\\.[0-2])?(\\+incompatible)?"
            }
            Ecosystem::Maven => {
                "([0-2]{1,2}|[a-c]{1,2})([._-]{0,2}([0-2]{1,2}|alpha|a|b|rc|cr|sp|snapshot|ga|final|release|foo|x)){0,5}"
            }
            Ecosystem::RubyGems => {
                "[0-2]{1,2}(\\.([0-2]{1,2}|[ab]{1,2}[0-2]?|pre)){0,4}(-[a0-2]{1,2}(\\.[b0-2]{1,2})?)?"
            }
        }
    }

    fn ecosystems() -> impl Strategy<Value = Ecosystem> {
        proptest::sample::select(Ecosystem::ALL.to_vec())
    }

    fn triple() -> impl Strategy<Value = (Ecosystem, String, String, String)> {
        ecosystems().prop_flat_map(|e| {
            let g = generator(e);
            (Just(e), g, g, g)
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// Generated versions are valid, and the order is reflexive,
        /// antisymmetric and transitive.
        #[test]
        fn orders_are_total((e, a, b, c) in triple()) {
            for v in [&a, &b, &c] {
                prop_assert!(e.is_valid(v), "{:?}: {:?} should be valid", e, v);
            }
            prop_assert_eq!(e.compare(&a, &a), Some(Ordering::Equal), "{:?} {}", e, a);
            let ab = e.compare(&a, &b);
            prop_assert!(ab.is_some());
            prop_assert_eq!(ab, e.compare(&b, &a).map(Ordering::reverse), "{:?}: {} vs {}", e, a, b);
            // Maven's own order is not transitive where a qualifier meets a
            // nested list (see maven.rs); every other order is.
            if e == Ecosystem::Maven {
                return Ok(());
            }
            let (bc, ac) = (e.compare(&b, &c), e.compare(&a, &c));
            if ab != Some(Ordering::Greater) && bc != Some(Ordering::Greater) {
                prop_assert!(ac != Some(Ordering::Greater), "{:?}: {} <= {} <= {}", e, a, b, c);
            }
            if ab == Some(Ordering::Equal) {
                prop_assert_eq!(ac, bc, "{:?}: {} == {}, against {}", e, a, b, c);
            }
        }

        /// Arbitrary input never panics, and compare agrees with is_valid.
        #[test]
        fn arbitrary_strings(e in ecosystems(), s in ".{0,300}", t in "[0-9a-zA-Z.:~^+_=!-]{0,24}") {
            for x in [&s, &t] {
                let valid = e.is_valid(x);
                prop_assert_eq!(e.compare(x, x).is_some(), valid, "{:?}: {:?}", e, x);
                prop_assert_eq!(e.compare(x, "1.0.0").is_some(), valid && e.is_valid("1.0.0"));
                if valid {
                    prop_assert_eq!(e.compare(x, x), Some(Ordering::Equal), "{:?}: {:?}", e, x);
                }
            }
        }
    }
}
