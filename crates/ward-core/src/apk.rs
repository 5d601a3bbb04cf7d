//! apk (Alpine and Wolfi) package versions and their order.
//!
//! An advisory says a vulnerability is fixed in, say, `0.2.107-r0`; whether an
//! installed package is still affected is a version comparison, so Ward has to
//! order versions exactly as apk-tools does. Neither string order nor semver
//! gets `1.9 < 1.10`, `1.0_rc1 < 1.0` or `1.0 < 1.0_p1` right.
//!
//! The grammar is apk-tools': `digits{.digits}[letter]{_suffix[digits]}[~hex][-rdigits]`.
//! Two versions are compared token by token. Tokens of the same kind compare by
//! value; at the first difference in kind, a pre-release suffix (`_alpha`,
//! `_beta`, `_pre`, `_rc`) loses, and otherwise the version whose token comes
//! earlier in the grammar wins (`1.0.1 > 1.0_p1 > 1.0~ab > 1.0-r1`).
//!
//! Ward departs from apk-tools in two ways, both only where apk's answer helps
//! nobody:
//! - A missing `-rN` counts as `-r0`, so `1.0` equals `1.0-r0`. (apk-tools ranks
//!   the bare form just below `-r0`.) An advisory's bare `fixed_version` then
//!   covers the first package build.
//! - Numbers compare exactly at any length; apk-tools reads them into 64 bits.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use crate::error::Error;
use crate::names::echo;

/// Longest version accepted, in bytes. Real versions are far shorter; the bound
/// keeps parsing and comparison cheap whatever a client sends.
pub const MAX_LEN: usize = 128;

/// The field an invalid version is reported against.
const FIELD: &str = "fixed_version";

/// Suffixes in their order; index 4 is the plain release, which has no suffix.
/// The first four sort before it, the rest after.
const SUFFIXES: [&str; 10] = ["alpha", "beta", "pre", "rc", "", "cvs", "svn", "git", "hg", "p"];
const PLAIN_RELEASE: usize = 4;

/// Token kinds in grammar order. The order is load-bearing: it is what decides
/// two versions whose tokens stop being of the same kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Initial,
    Component,
    Letter,
    Suffix,
    SuffixNumber,
    Commit,
    Release,
}

/// One token: its kind and the bytes of `Version::text` that spell its value
/// (without the leading `.`, `_`, `~` or `-r`). A missing release is an empty
/// span, which compares as zero.
#[derive(Clone, Copy, Debug)]
struct Token {
    kind: Kind,
    start: u8,
    end: u8,
}

/// A valid apk version. Equality is the order's: `1.0 == 1.0-r0`, and
/// `01.2 == 1.2` (the first number is compared numerically), but `1.02 != 1.2`.
#[derive(Clone, Debug)]
pub struct Version {
    text: Box<str>,
    /// Always ends with exactly one `Release` token.
    tokens: Vec<Token>,
}

/// Parses an apk version, reporting a problem against `fixed_version`.
pub fn parse(s: &str) -> Result<Version, Error> {
    let tokens = tokenize(s).map_err(|reason| {
        Error::invalid(
            FIELD,
            format!(
                "{FIELD} \"{}\" is not an apk version (like 1.2.3-r4 or 1.0_rc1): {reason}",
                echo(s)
            ),
        )
    })?;
    Ok(Version { text: s.into(), tokens })
}

/// Whether `s` is a valid apk version of at most [`MAX_LEN`] bytes.
pub fn is_valid(s: &str) -> bool {
    tokenize(s).is_ok()
}

/// Orders two version strings; `None` when either is not a valid version.
pub fn compare(a: &str, b: &str) -> Option<Ordering> {
    Some(parse(a).ok()?.cmp(&parse(b).ok()?))
}

impl Version {
    /// The version as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    fn value(&self, t: Token) -> &[u8] {
        &self.text.as_bytes()[usize::from(t.start)..usize::from(t.end)]
    }
}

/// Splits `s` into tokens following apk-tools' state machine, or says why not.
fn tokenize(s: &str) -> Result<Vec<Token>, String> {
    if s.is_empty() {
        return Err("it is empty".into());
    }
    if s.len() > MAX_LEN {
        return Err(format!("it is longer than {MAX_LEN} bytes"));
    }
    if s.chars().any(char::is_whitespace) {
        return Err("it contains whitespace".into());
    }
    let b = s.as_bytes();
    let run = |from: usize, ok: fn(&u8) -> bool| from + b[from..].iter().take_while(|&c| ok(c)).count();
    let digit = |c: &u8| c.is_ascii_digit();
    let span = |kind, start: usize, end: usize| Token {
        kind,
        // Both fit: `s` is at most MAX_LEN (< 256) bytes long.
        start: start as u8,
        end: end as u8,
    };
    let mut tokens = Vec::new();
    let first = run(0, digit);
    if first == 0 {
        return Err("it must start with a digit".into());
    }
    tokens.push(span(Kind::Initial, 0, first));
    let mut at = first;
    while at < b.len() {
        let last = tokens.last().map_or(Kind::Initial, |t: &Token| t.kind);
        let (kind, start, end) = match b[at] {
            b'.' if last <= Kind::Component => (Kind::Component, at + 1, run(at + 1, digit)),
            b'a'..=b'z' if last <= Kind::Component => (Kind::Letter, at, at + 1),
            b'0'..=b'9' if last == Kind::Suffix => (Kind::SuffixNumber, at, run(at, digit)),
            b'_' if last <= Kind::SuffixNumber => {
                let end = run(at + 1, u8::is_ascii_lowercase);
                if !SUFFIXES.contains(&&s[at + 1..end]) || end == at + 1 {
                    return Err(format!(
                        "\"_{}\" is not a suffix; use _alpha, _beta, _pre, _rc, _cvs, _svn, _git, _hg or _p",
                        echo(&s[at + 1..end])
                    ));
                }
                (Kind::Suffix, at + 1, end)
            }
            b'~' if last < Kind::Commit => (
                Kind::Commit,
                at + 1,
                run(at + 1, |c| c.is_ascii_digit() || (b'a'..=b'f').contains(c)),
            ),
            b'-' if last < Kind::Release && b.get(at + 1) == Some(&b'r') => (Kind::Release, at + 2, run(at + 2, digit)),
            c => {
                let what = if c.is_ascii_graphic() {
                    format!("'{}'", char::from(c))
                } else {
                    "this character".into()
                };
                return Err(format!(
                    "{what} at byte {at} is out of place (the form is digits{{.digits}}[letter]{{_suffix[N]}}[~hash][-rN])"
                ));
            }
        };
        if end == start && kind != Kind::Letter {
            return Err(match kind {
                Kind::Commit => format!("'~' at byte {at} must be followed by lowercase hex digits"),
                Kind::Release => format!("\"-r\" at byte {at} must be followed by digits"),
                _ => format!("'.' at byte {at} must be followed by digits"),
            });
        }
        tokens.push(span(kind, start, end));
        at = end;
    }
    if tokens.last().map(|t| t.kind) != Some(Kind::Release) {
        tokens.push(span(Kind::Release, b.len(), b.len()));
    }
    Ok(tokens)
}

/// Compares digit strings by value, at any length.
fn numeric(a: &[u8], b: &[u8]) -> Ordering {
    let strip = |d: &[u8]| -> usize { d.iter().take_while(|&&c| c == b'0').count() };
    let (a, b) = (&a[strip(a)..], &b[strip(b)..]);
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

fn suffix_rank(name: &[u8]) -> usize {
    SUFFIXES
        .iter()
        .position(|s| s.as_bytes() == name)
        .unwrap_or(PLAIN_RELEASE)
}

fn is_pre_release(v: &Version, t: Token) -> bool {
    t.kind == Kind::Suffix && suffix_rank(v.value(t)) < PLAIN_RELEASE
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        for (&ta, &tb) in self.tokens.iter().zip(&other.tokens) {
            let (a, b) = (self.value(ta), other.value(tb));
            if ta.kind != tb.kind {
                // Both versions end in a release token, so they part ways here
                // or nowhere.
                return if is_pre_release(self, ta) {
                    Ordering::Less
                } else if is_pre_release(other, tb) {
                    Ordering::Greater
                } else {
                    tb.kind.cmp(&ta.kind)
                };
            }
            let order = match ta.kind {
                // apk's rule for later components: a leading zero makes the
                // comparison textual, so 1.01 < 1.1 and 1.05 < 1.4, as if the
                // digits were a decimal fraction.
                Kind::Component if a.first() == Some(&b'0') || b.first() == Some(&b'0') => a.cmp(b),
                Kind::Initial | Kind::Component | Kind::SuffixNumber | Kind::Release => numeric(a, b),
                Kind::Letter | Kind::Commit => a.cmp(b),
                Kind::Suffix => suffix_rank(a).cmp(&suffix_rank(b)),
            };
            if order != Ordering::Equal {
                return order;
            }
        }
        Ordering::Equal
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Version {}

/// Writes the version as it was given; every accepted spelling is already an
/// apk spelling, and advisories must repeat the one their author used.
impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for Version {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Known orders, `a<b` or `a=b`: mostly rows of apk-tools' own test data,
    /// then the leading-zero rule, commit hashes, long numbers and `-r0`.
    const ORDERS: &str = "
        1.0<1.0.1 1.0_alpha<1.0_beta 1.0_beta<1.0_pre 1.0_pre<1.0_rc 1.0_rc<1.0 1.0<1.0_cvs 1.0_cvs<1.0_svn
        1.0_svn<1.0_git 1.0_git<1.0_hg 1.0_hg<1.0_p 1.0<1.0_p1 1.0a<1.0b 1.0-r1<1.0-r2 1.9<1.10 2.0_rc1<2.0
        1.0<1.0_git20240101 0.2.99-r10<0.2.107-r0 0.1.0_alpha<0.1.0_alpha2 0.1.0_alpha<2.2.39-r1
        1.0.4-r3<1.0.4-r4 1.1_alpha1<1.1 1.2<1.2.1 2.3.0b-r1<2.3.0b-r2 0.12<0.13_beta1 1.2.11<1.2.12.1
        3.1_p16<3.1_p17 1.06-r6<006 1.0.0<1.2.2-r1 1.2.2<1.2.2-r1 2.59<20050718-r1 0.94<2.01.01_alpha10
        0.9.2<1.00_beta2 1.02<1.03-r1 1.02.07<1.02.10-r1 1.2.07.8<1.2.12.04 3.0.20060720<20060720
        2.5.1-r8<2.5.1a-r1 1.3.5-r9<1.3.5-r10 3.0.0-r2<021109-r3 0.9.16-r1<3.9_pre20060124 0.01<0.06
        0.10.0<0.10.0-r1 0.10.0<0.10.1_rc1 4.5_p1<4.5_p1-r1 1.6.8_p9-r2<1.6.8_p12-r1 1.07-r1<1.07.5
        0.20070118<0.20070207_rc1 1.7<1.7b 1.8.5<1.8.5_p2 2.9.11_pre20051101<2.9.11_pre20051101-r3
        1.3_pre1-r1<1.3.2 1.0_p9-r0<1.0_p10-r0 0.1.0_alpha_pre2<0.1.0_alpha 6.0_pre1<6.0 6.0<6.0_p1
        1.0.0_pre20191002222144-r0<1.0.0_pre20210530193627-r0
        1.01<1.1 1.05<1.4 1.0<1.00 3.29.2-r30<3.29.2-r31 1.2.3_git20240101-r1<1.2.3_git20240102
        1.0~abc<1.0~abd 1.0-r9<1.0~abc 1.0_p1<1.0a 1.0a<1.0.1 1.0~1-r1<1.0~1-r2
        99999999999999999999998<99999999999999999999999
        1.0=1.0-r0 01.2=1.2 1.0_rc01=1.0_rc1 2.16.1-r3=2.16.1-r03 20230102=20230102-r0 1.0~ab=1.0~ab-r0";

    #[test]
    fn apk_orders() {
        let mut pairs = 0;
        for row in ORDERS.split_whitespace() {
            let (a, b, want) = match (row.split_once('<'), row.split_once('=')) {
                (Some((a, b)), _) => (a, b, Ordering::Less),
                (None, Some((a, b))) => (a, b, Ordering::Equal),
                _ => panic!("malformed row {row}"),
            };
            assert_eq!(compare(a, b), Some(want), "{row}");
            assert_eq!(compare(b, a), Some(want.reverse()), "{row} reversed");
            pairs += 1;
        }
        assert!(pairs >= 60, "{pairs}");
    }

    #[test]
    fn accepts_and_rejects() {
        let good = "1.2.3-r4 1.0_rc1-r0 2.0.1a-r3 1.2.3_p2 0.2.107-r0 20230102 1.2.3_git20240101-r1 3.29.2-r31 \
                    1_p 1.0~0a-r1 1_alpha_beta2_p";
        for ok in good.split_whitespace() {
            assert!(is_valid(ok), "{ok}");
            assert_eq!(parse(ok).map(|v| v.to_string()).ok().as_deref(), Some(ok));
        }
        let bad = "v1.0 1. 1..0 .1 1.0- 1.0-r 1.0-1 1.0-r1-r2 1.0-r1a 1.0ab 1.0a1 1.0a.1 1.0_ 1.0_foo 1.0_RC1 \
                   1.0_rc1.2 1.0~ 1.0~xyz 1.0~ABC 1.0~ab~cd 1.0-r1~ab 1.0-r1_p1 1.0~ab_p1 1.0A 1,0 \u{661}.\u{660} -r1";
        for bad in bad
            .split_whitespace()
            .chain(["", " 1.0", "1.0 ", "1 .0", "1.0\n", "1.0\u{a0}"])
        {
            assert!(!is_valid(bad), "{bad:?}");
            assert_eq!(compare(bad, "1.0"), None);
        }
        assert!(is_valid(&"1".repeat(MAX_LEN)));
        assert!(!is_valid(&"1".repeat(MAX_LEN + 1)));
        let e = parse("1.0_foo").err().map(|e| e.message()).unwrap_or_default();
        assert!(e.contains("fixed_version \"1.0_foo\"") && e.contains("_foo"), "{e}");
        let e = parse(&"x".repeat(200)).err().map(|e| e.message()).unwrap_or_default();
        assert!(e.len() < 400 && e.contains("longer than 128"), "{e}");
    }

    /// Versions over a small alphabet, so that equal and nearly equal
    /// versions, leading zeros and every token kind turn up often.
    const SMALL: &str = "[0-2]{1,2}(\\.[0-2]{1,2}){0,2}[ab]?(_(alpha|rc|p|git)[0-2]?){0,2}(~[0a]{1,2})?(-r[0-2])?";

    /// The grammar as a regex: an oracle for the hand-written tokenizer.
    const GRAMMAR: &str =
        "^[0-9]+(\\.[0-9]+)*[a-z]?(_(alpha|beta|pre|rc|cvs|svn|git|hg|p)[0-9]*)*(~[0-9a-f]+)?(-r[0-9]+)?$";

    /// Any version of the grammar, with numbers long enough to carry.
    const WIDE: &str = "[0-9]{1,6}(\\.[0-9]{1,6}){0,3}[a-z]?(_(alpha|beta|pre|rc|cvs|svn|git|hg|p)[0-9]{0,8}){0,3}\
                        (~[0-9a-f]{1,8})?(-r[0-9]{1,4})?";

    proptest! {
        /// The order is total: reflexive, antisymmetric, transitive, and the
        /// equality agrees with it.
        #[test]
        fn total_order(a in SMALL, b in SMALL, c in SMALL) {
            let (Ok(va), Ok(vb), Ok(vc)) = (parse(&a), parse(&b), parse(&c)) else {
                return Err(TestCaseError::fail("generated version did not parse"));
            };
            prop_assert_eq!(va.cmp(&va), Ordering::Equal);
            prop_assert_eq!(va.cmp(&vb), vb.cmp(&va).reverse());
            prop_assert_eq!(va == vb, va.cmp(&vb) == Ordering::Equal);
            if va <= vb && vb <= vc {
                prop_assert!(va <= vc, "{} <= {} <= {}", a, b, c);
            }
            if va == vb {
                prop_assert_eq!(va.cmp(&vc), vb.cmp(&vc));
            }
            prop_assert_eq!(compare(&a, &b), Some(va.cmp(&vb)));
        }

        /// Display gives back a string that parses to an equal version.
        #[test]
        fn round_trip(a in WIDE) {
            let v = parse(&a).map_err(|e| TestCaseError::fail(e.message()))?;
            prop_assert_eq!(v.to_string(), a.clone());
            prop_assert_eq!(parse(&v.to_string()).ok(), Some(v));
        }

        /// Raising any number (the first, a later component, a suffix's
        /// number or the release, present or not) gives a greater version.
        #[test]
        fn bumps_increase(a in WIDE, pick: usize) {
            let v = parse(&a).map_err(|e| TestCaseError::fail(e.message()))?;
            let numbers: Vec<Token> =
                v.tokens.iter().copied().filter(|t| !matches!(t.kind, Kind::Letter | Kind::Suffix | Kind::Commit)).collect();
            let t = numbers[pick % numbers.len()];
            let (start, end) = (usize::from(t.start), usize::from(t.end));
            let n: u128 = a[start..end].parse().unwrap_or(0);
            let release = if start == end { "-r" } else { "" };
            let bumped = format!("{}{release}{}{}", &a[..start], n + 1, &a[end..]);
            prop_assert_eq!(compare(&a, &bumped), Some(Ordering::Less), "{} < {}", a, bumped);
        }

        /// Arbitrary input never panics, and validity matches the grammar.
        #[test]
        fn arbitrary_strings(s in ".{0,200}", t in "[0-9a-z._~r-]{0,24}") {
            let re = regex::Regex::new(GRAMMAR).map_err(|e| TestCaseError::fail(e.to_string()))?;
            for x in [&s, &t] {
                prop_assert_eq!(is_valid(x), x.len() <= MAX_LEN && re.is_match(x), "{:?}", x);
                if let Err(e) = parse(x) {
                    prop_assert!(e.bounded().message().len() < 1024);
                }
                let _ = compare(x, "1.0");
            }
        }
    }
}
