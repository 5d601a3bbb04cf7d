//! Ruby gem versions, in the order of RubyGems' `Gem::Version`.
//!
//! A valid version is digits, then `.`-separated runs of letters and digits,
//! then optionally a `-` and `.`-separated runs that may also hold `-`
//! (`Gem::Version`'s pattern, without the surrounding whitespace it also
//! strips). Each `-` reads as `.pre.`. The segments are the runs of digits
//! and the runs of letters, so `1.0.b1` is `[1, 0, "b", 1]`; a version with
//! any letter is a pre-release. Trailing zeros are dropped from the numeric
//! part and from the string part (`1.0 == 1`, `1.0.a == 1.a`), then the
//! segments compare in turn, a missing one counting as 0: numbers by value,
//! strings bytewise, and a string below a number (`1.0.a < 1.0`).

use std::cmp::Ordering;

use super::cmp_digits;

enum Segment<'a> {
    /// Digits without leading zeros (empty for zero).
    Number(&'a [u8]),
    Text(&'a [u8]),
}

const ZERO: Segment<'static> = Segment::Number(b"");

impl Segment<'_> {
    fn is_zero(&self) -> bool {
        matches!(self, Segment::Number(d) if d.is_empty())
    }
}

fn valid(s: &str) -> bool {
    let (release, pre) = match s.split_once('-') {
        Some((r, p)) => (r, Some(p)),
        None => (s, None),
    };
    let mut parts = release.split('.');
    let first_ok = parts
        .next()
        .is_some_and(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()));
    let rest_ok = parts.all(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_alphanumeric()));
    let pre_ok = pre.is_none_or(|p| {
        p.split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-'))
    });
    first_ok && rest_ok && pre_ok
}

/// The canonical segments: trailing zeros dropped from the numeric part
/// (before the first string) and from the string part.
fn segments(s: &str) -> Option<Vec<Segment<'_>>> {
    if !valid(s) {
        return None;
    }
    // `-` reads as `.pre.`; as the segments are the runs of letters and of
    // digits, that is a "pre" segment where each `-` stands.
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'-' {
            out.push(Segment::Text(b"pre"));
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            let digits = &b[start..i];
            let zeros = digits.iter().take_while(|&&d| d == b'0').count();
            out.push(Segment::Number(&digits[zeros..]));
        } else if c.is_ascii_alphabetic() {
            let start = i;
            while i < b.len() && b[i].is_ascii_alphabetic() {
                i += 1;
            }
            out.push(Segment::Text(&b[start..i]));
        } else {
            i += 1;
        }
    }
    let string_start = out
        .iter()
        .position(|s| matches!(s, Segment::Text(_)))
        .unwrap_or(out.len());
    let mut strings = out.split_off(string_start);
    while out.last().is_some_and(Segment::is_zero) {
        out.pop();
    }
    while strings.last().is_some_and(Segment::is_zero) {
        strings.pop();
    }
    out.append(&mut strings);
    Some(out)
}

pub(super) fn is_valid(s: &str) -> bool {
    valid(s)
}

pub(super) fn compare(a: &str, b: &str) -> Option<Ordering> {
    let (a, b) = (segments(a)?, segments(b)?);
    for k in 0..a.len().max(b.len()) {
        let order = match (a.get(k).unwrap_or(&ZERO), b.get(k).unwrap_or(&ZERO)) {
            (Segment::Number(x), Segment::Number(y)) => cmp_digits(x, y),
            (Segment::Text(x), Segment::Text(y)) => x.cmp(y),
            (Segment::Text(_), Segment::Number(_)) => Ordering::Less,
            (Segment::Number(_), Segment::Text(_)) => Ordering::Greater,
        };
        if order.is_ne() {
            return Some(order);
        }
    }
    Some(Ordering::Equal)
}

#[cfg(test)]
mod tests {
    use super::super::Ecosystem;
    use super::super::tests::{check_ascending, check_orders};

    const GEM: Ecosystem = Ecosystem::RubyGems;

    #[test]
    fn gem_version_orders() {
        // Gem::Version's documented examples and RubyGems' own tests.
        let rows = "
            1.0.a<1.0 1.0.b1<1.0.b2 1.0.0=1 1.8.2.a9<1.8.2.a10 1.0=1.0.0 1.0.a=1.a 1.0.a.0=1.a 0.9<1.0
            1.0.a<1.0.b 1.0.a10<1.0.b1 1.0.rc1<1.0 1.0.0.pre<1.0.0 1.0.0-pre=1.0.0.pre.pre 1.0-rc1=1.0.pre.rc1
            1.9.3<1.10 5.2.4.3<5.2.4.4 6.0.0.beta1<6.0.0.rc1 6.0.0.rc1<6.0.0 1.2.3.4<1.2.4 2.0.0.a<2.0.0.b
            1.0.A<1.0.a 1.1<1.1.1 1.a<1.0.1 0001.2=1.2 1.8.2.a10<1.8.2 1.0-b=1.0.pre.b";
        check_orders(GEM, rows);
        check_ascending(
            GEM,
            &[
                "1.0.a", "1.0.a1", "1.0.b", "1.0.rc", "1.0", "1.0.1", "1.1.a", "1.1", "2",
            ],
        );
    }

    #[test]
    fn gem_version_syntax() {
        for ok in [
            "1",
            "1.0",
            "1.0.a",
            "1.0.0.rc1",
            "1.0-pre",
            "1.0-pre.1",
            "1.0-x-y",
            "0.0.1",
            "1.a.b.c",
        ] {
            assert!(GEM.is_valid(ok), "{ok}");
        }
        for bad in [
            "", "a", "1.", ".1", "1..0", "1.0-", "1.0-.a", "junk", "1.0 ", " 1.0", "1_0", "1.0+x", "v1.0", "-1",
        ] {
            assert!(!GEM.is_valid(bad), "{bad:?}");
            assert_eq!(GEM.compare(bad, "1"), None);
        }
    }
}
