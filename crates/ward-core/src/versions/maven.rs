//! Maven versions, in the order of Maven's `ComparableVersion` (Maven 3.9).
//!
//! A version is lower-cased and split into items at `.`, at `-` and `_`, and
//! where digits and other characters meet; a `-`, `_` or digit/letter
//! transition opens a nested list, so `1.0-alpha-1` is `[1, 0, [alpha, [1]]]`.
//! A qualifier directly after a `.` that is followed by digits or ends the
//! version opens a list too (MNG-7644), so `1.0.rc1 == 1.0-rc1` and
//! `1.foo == 1-foo`. Each list then drops its trailing "null" items (`0`,
//! the empty qualifier, `ga`, `final`, `release`, empty lists), looking past
//! nested lists, so `1 == 1.0 == 1.0.0 == 1-ga` and `1.0.0-foo.0.0 == 1-foo`.
//!
//! Items compare as: numbers by value; qualifiers
//! `alpha < beta < milestone < rc = cr < snapshot < "" = ga = final = release < sp`,
//! then any other qualifier in lexical order; `a`, `b` and `m` directly
//! followed by a digit mean alpha, beta and milestone (`1-a1 == 1-alpha-1`,
//! but a bare `1-a` is the unknown qualifier `a`, above a release). A number
//! beats a list, which beats a qualifier. When one list runs out its
//! remaining items compare against "nothing": a non-zero number is greater, a
//! qualifier compares against the release qualifier.
//!
//! Like Maven's, this order is not transitive for some unusual versions: a
//! qualifier sorts below a list in the same place, yet a list starting with a
//! pre-release qualifier sorts below nothing there while any other qualifier
//! sorts above it, so `a < 0alpha` (`[a]` against `[[alpha]]`) and
//! `0alpha < 0` (`[[alpha]]` against `[]`) but `a > 0`.
//!
//! Maven accepts any string; Ward accepts any non-empty string without
//! whitespace or control characters. Digits are ASCII only, as the current
//! POM reference specifies; `_` separates like `-`, as it also specifies.

use std::cmp::Ordering;

use super::cmp_digits;

/// Index of the release qualifier (`""`, `ga`, `final`, `release`).
const RELEASE: u8 = 5;

#[derive(Debug, PartialEq, Eq)]
enum Qualifier {
    /// One of the well-known qualifiers, by rank.
    Known(u8),
    /// Any other qualifier; these sort after all known ones.
    Other(String),
}

impl Qualifier {
    fn new(text: &str, followed_by_digit: bool) -> Self {
        let text = match (followed_by_digit, text) {
            (true, "a") => "alpha",
            (true, "b") => "beta",
            (true, "m") => "milestone",
            _ => text,
        };
        match text {
            "alpha" => Self::Known(0),
            "beta" => Self::Known(1),
            "milestone" => Self::Known(2),
            "rc" | "cr" => Self::Known(3),
            "snapshot" => Self::Known(4),
            "" | "ga" | "final" | "release" => Self::Known(RELEASE),
            "sp" => Self::Known(6),
            other => Self::Other(other.to_owned()),
        }
    }

    fn order(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Self::Known(a), Self::Known(b)) => a.cmp(b),
            (Self::Known(_), Self::Other(_)) => Ordering::Less,
            (Self::Other(_), Self::Known(_)) => Ordering::Greater,
            // Java's String.compareTo: UTF-16 code units.
            (Self::Other(a), Self::Other(b)) => a.encode_utf16().cmp(b.encode_utf16()),
        }
    }
}

#[derive(Debug)]
enum Item {
    /// ASCII digits without leading zeros (empty for zero).
    Number(Box<[u8]>),
    Qualifier(Qualifier),
    List(Vec<Item>),
}

impl Item {
    fn parse(digits: bool, text: &str) -> Self {
        if digits {
            Self::Number(text.trim_start_matches('0').as_bytes().into())
        } else {
            Self::Qualifier(Qualifier::new(text, false))
        }
    }

    fn is_null(&self) -> bool {
        match self {
            Self::Number(d) => d.is_empty(),
            Self::Qualifier(q) => *q == Qualifier::Known(RELEASE),
            Self::List(items) => items.is_empty(),
        }
    }

    /// This item against a missing one (the other list ran out).
    fn order_to_nothing(&self) -> Ordering {
        match self {
            Self::Number(d) if d.is_empty() => Ordering::Equal,
            Self::Number(_) => Ordering::Greater,
            Self::Qualifier(q) => q.order(&Qualifier::Known(RELEASE)),
            Self::List(items) => items
                .iter()
                .map(Item::order_to_nothing)
                .find(|o| o.is_ne())
                .unwrap_or(Ordering::Equal),
        }
    }

    fn order(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Self::Number(a), Self::Number(b)) => cmp_digits(a, b),
            (Self::Number(_), _) => Ordering::Greater,
            (Self::Qualifier(_), Self::Number(_)) => Ordering::Less,
            (Self::Qualifier(a), Self::Qualifier(b)) => a.order(b),
            (Self::Qualifier(_), Self::List(_)) => Ordering::Less,
            (Self::List(_), Self::Number(_)) => Ordering::Less,
            (Self::List(_), Self::Qualifier(_)) => Ordering::Greater,
            (Self::List(a), Self::List(b)) => order_lists(a, b),
        }
    }
}

fn order_lists(a: &[Item], b: &[Item]) -> Ordering {
    for k in 0..a.len().max(b.len()) {
        let order = match (a.get(k), b.get(k)) {
            (Some(x), Some(y)) => x.order(y),
            (Some(x), None) => x.order_to_nothing(),
            (None, Some(y)) => y.order_to_nothing().reverse(),
            (None, None) => Ordering::Equal,
        };
        if order.is_ne() {
            return order;
        }
    }
    Ordering::Equal
}

/// Drops trailing null items, looking past (already normalized) nested lists.
fn normalize(list: &mut Vec<Item>) {
    let mut i = list.len();
    while i > 0 {
        i -= 1;
        if list[i].is_null() {
            list.remove(i);
        } else if !matches!(list[i], Item::List(_)) {
            break;
        }
    }
}

/// Splits a version into its item tree.
fn parse(version: &str) -> Vec<Item> {
    let chars: Vec<char> = version.to_lowercase().chars().collect();
    let text = |from: usize, to: usize| -> String { chars[from..to].iter().collect() };
    // The open lists, outermost first; each one ends up as the last item of
    // the list before it.
    let mut stack: Vec<Vec<Item>> = vec![Vec::new()];
    let current_is_empty = |stack: &Vec<Vec<Item>>| stack.last().is_none_or(Vec::is_empty);
    let push = |stack: &mut Vec<Vec<Item>>, item: Item| {
        if let Some(list) = stack.last_mut() {
            list.push(item);
        }
    };
    let mut digits = false;
    let mut start = 0;
    for (i, &c) in chars.iter().enumerate() {
        match c {
            '.' | '-' | '_' => {
                let item = if i == start {
                    Item::Number(Box::default())
                } else {
                    Item::parse(digits, &text(start, i))
                };
                push(&mut stack, item);
                start = i + 1;
                if c != '.' {
                    stack.push(Vec::new());
                }
            }
            '0'..='9' => {
                if !digits && i > start {
                    if !current_is_empty(&stack) {
                        stack.push(Vec::new());
                    }
                    push(&mut stack, Item::Qualifier(Qualifier::new(&text(start, i), true)));
                    start = i;
                    stack.push(Vec::new());
                }
                digits = true;
            }
            _ => {
                if digits && i > start {
                    push(&mut stack, Item::parse(true, &text(start, i)));
                    start = i;
                    stack.push(Vec::new());
                }
                digits = false;
            }
        }
    }
    if chars.len() > start {
        if !digits && !current_is_empty(&stack) {
            stack.push(Vec::new());
        }
        push(&mut stack, Item::parse(digits, &text(start, chars.len())));
    }
    let mut child: Option<Vec<Item>> = None;
    while let Some(mut list) = stack.pop() {
        if let Some(c) = child.take() {
            list.push(Item::List(c));
        }
        normalize(&mut list);
        child = Some(list);
    }
    child.unwrap_or_default()
}

pub(super) fn is_valid(s: &str) -> bool {
    !s.is_empty() && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

pub(super) fn compare(a: &str, b: &str) -> Option<Ordering> {
    if !is_valid(a) || !is_valid(b) {
        return None;
    }
    Some(order_lists(&parse(a), &parse(b)))
}

#[cfg(test)]
mod tests {
    use super::super::Ecosystem;
    use super::super::tests::{check_ascending, check_orders};

    const MAVEN: Ecosystem = Ecosystem::Maven;

    #[test]
    fn comparable_version_test_lists() {
        // Maven's ComparableVersionTest: VERSIONS_QUALIFIER, and
        // VERSIONS_NUMBER in its order since MNG-7644 (2.0.0.a == 2.0.a).
        check_ascending(
            MAVEN,
            &[
                "1-alpha2snapshot",
                "1-alpha2",
                "1-alpha-123",
                "1-beta-2",
                "1-beta123",
                "1-m2",
                "1-m11",
                "1-rc",
                "1-cr2",
                "1-rc123",
                "1-SNAPSHOT",
                "1",
                "1-sp",
                "1-sp2",
                "1-sp123",
                "1-abc",
                "1-def",
                "1-pom-1",
                "1-1-snapshot",
                "1-1",
                "1-2",
                "1-123",
            ],
        );
        check_ascending(
            MAVEN,
            &[
                "2.0", "2.0.a", "2-1", "2.0.2", "2.0.123", "2.1.0", "2.1-a", "2.1b", "2.1-c", "2.1-1", "2.1.0.1",
                "2.2", "2.123", "11.a2", "11.a11", "11.b2", "11.b11", "11.m2", "11.m11", "11", "11.a", "11b", "11c",
                "11m",
            ],
        );
    }

    #[test]
    fn comparable_version_test_equalities() {
        let rows = "
            1=1 1=1.0 1=1.0.0 1.0=1.0.0 1=1-0 1=1.0-0 1.0=1.0-0 1a=1-a 1a=1.0-a 1a=1.0.0-a 1.0a=1-a 1.0.0a=1-a
            1x=1-x 1x=1.0-x 1x=1.0.0-x 1.0x=1-x 1.0.0x=1-x 1ga=1 1release=1 1final=1 1cr=1rc 1a1=1-alpha-1
            1b2=1-beta-2 1m3=1-milestone-3 1X=1x 1A=1a 1B=1b 1M=1m 1Ga=1 1GA=1 1RELEASE=1 1RELeaSE=1 1Final=1
            1FINAL=1 1Cr=1Rc 1cR=1rC 1m3=1Milestone3 1m3=1MILESTONE3 1-abcdefghijklmnopqrstuvwxyz=1-ABCDEFGHIJKLMNOPQRSTUVWXYZ
            0000000000000000001=1 00001=01 0000000000000000000=0 000=0";
        check_orders(MAVEN, rows);
        let rows = "
            1<2 1.5<2 1<2.5 1.0<1.1 1.1<1.2 1.0.0<1.1 1.0.1<1.1 1.1<1.2.0 1.0-alpha-1<1.0 1.0-alpha-1<1.0-alpha-2
            1.0-alpha-1<1.0-beta-1 1.0-beta-1<1.0-SNAPSHOT 1.0-SNAPSHOT<1.0 1.0-alpha-1-SNAPSHOT<1.0-alpha-1
            1.0<1.0-1 1.0-1<1.0-2 1.0.0<1.0-1 2.0-1<2.0.1 2.0.1-klm<2.0.1-lmn 2.0.1<2.0.1-xyz 2.0.1<2.0.1-123
            2.0.1-xyz<2.0.1-123 6.1.0rc3<6.1.0 6.1.0rc3<6.1H.5-beta 6.1.0<6.1H.5-beta 20190126.230843<1234567890.12345
            1234567890.12345<123456789012345.1H.5-beta 123456789012345.1H.5-beta<12345678901234567890.1H.5-beta
            1-0.alpha<1 1-0.beta<1 1-0.alpha<1-0.beta 0.7<2 0.2<1.0.7";
        check_orders(MAVEN, rows);
    }

    #[test]
    fn mng_7644() {
        for x in ["abc", "alpha", "a", "beta", "b", "def", "milestone", "m", "RC"] {
            let lt = format!("1.0.0.{x}1<1.0.0-{x}2");
            let eq = format!("2-{x}=2.0.{x} 2-{x}=2.0.0.{x} 2.0.{x}=2.0.0.{x}");
            check_orders(MAVEN, &format!("{lt} {eq}"));
        }
    }

    #[test]
    fn pom_reference_examples() {
        // The "End Result Examples" of the POM reference's version order
        // specification, and its trimming examples.
        let rows = "
            1<1.1 1-snapshot<1 1<1-sp 1-foo2<1-foo10 1.foo=1-foo 1-foo<1-1 1-1<1.1 1.ga=1-ga 1-ga=1-0
            1-0=1_0 1_0=1.0 1.0=1 1-ga<1-sp 1-ga.1<1-sp.1 1-sp-1<1-ga-1 1-a1=1-alpha-1 1.0-alpha1=1.0-ALPHA1
            1.K<1.7 5.aardvark<5.zebra 1.b<1.α 1.0.0=1 1.final=1 1.=1 1-=1 1_=1 1.0.0-foo.0.0=1-foo
            1.0.0-0.0.0=1";
        check_orders(MAVEN, rows);
    }

    #[test]
    fn real_world_orders() {
        let rows = "
            1.0.0-alpha1=1-a1 1-alpha<1 1<1-a 1-alpha<1-a 5.3.0.RELEASE=5.3.0 1.2.3.Final=1.2.3
            2.0.0.M1<2.0.0.RC1 2.0.0.RC1<2.0.0 31.0-android<31.0-jre 30.1-jre<31.0-android
            9.4.41.v20210516<9.4.42.v20210604 2.12.7.1<2.13.0 2.13.0-rc1<2.13.0 1.2.17<1.2.17.1
            2.17.0<2.17.1 2.0-beta9<2.0-rc1 2.0-rc2<2.0 4.1.86.Final<4.1.100.Final 1.0.0-SNAPSHOT<1.0.0
            1.0.0.CR2<1.0.0.GA 1.0.0.GA=1.0.0 3.0.0-beta-1=3.0.0-beta1 3.0.0-beta1<3.0.0-M1";
        check_orders(MAVEN, rows);
        check_ascending(
            MAVEN,
            &[
                "NotAVersionSting",
                "1.0a1-SNAPSHOT",
                "1.0-alpha1",
                "1.0beta1-SNAPSHOT",
                "1.0-b2",
                "1.0-beta3.SNAPSHOT",
                "1.0-beta3",
                "1.0-milestone1-SNAPSHOT",
                "1.0-m2",
                "1.0-rc1-SNAPSHOT",
                "1.0-cr1",
                "1.0-SNAPSHOT",
                "1.0",
                "1.0-sp",
                "1.0-a",
                "1.0-whatever",
                "1.0.z",
                "1.0.1",
                "1.0.1.0.0.0.0.0.0.0.0.0.0.0.1",
            ],
        );
    }

    #[test]
    fn not_transitive_like_maven() {
        check_orders(MAVEN, "a<0alpha 0alpha<0 0<a");
    }

    #[test]
    fn validity() {
        for ok in ["1", "a", "1.0-SNAPSHOT", "${project.version}", "-", ".", "1.α"] {
            assert!(MAVEN.is_valid(ok), "{ok}");
        }
        for bad in ["", " ", "1.0 ", "1\t0", "1\u{0}"] {
            assert!(!MAVEN.is_valid(bad), "{bad:?}");
            assert_eq!(MAVEN.compare(bad, "1"), None);
        }
        // Deep nesting stays cheap and never overflows.
        let deep = "1-".repeat(128);
        assert_eq!(
            MAVEN.compare(&deep[..255], &deep[..253]),
            Some(std::cmp::Ordering::Greater)
        );
    }
}
