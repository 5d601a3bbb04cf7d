//! RPM package versions, `[epoch:]version[-release]`, in rpm's order.
//!
//! Epochs compare as numbers (a missing epoch is 0), then version and release
//! each by `rpmvercmp`: separators (anything but letters, digits, `~` and
//! `^`) only split segments; `~` sorts before everything, even the end
//! (`1.0~rc1 < 1.0`); `^` sorts after the end but before any further segment
//! (`1.0 < 1.0^git1 < 1.0.1`); digit segments compare by value and beat
//! letter segments; letter segments compare bytewise; when one side runs out,
//! the longer wins.
//!
//! One departure, for a total order: rpm lets a missing release match any
//! release, which is not transitive (`1.0-1 = 1.0 = 1.0-2`). Here a missing
//! release is the empty string, so `1.0 < 1.0-1`; a fixed version given
//! without a release still covers every build of that version.
//!
//! Valid: a non-empty version and, after its `-`, a non-empty release, both
//! of ASCII letters, digits and `._+~^` (so at most one `-`); a numeric epoch
//! before the first `:`.

use std::cmp::Ordering;

use super::cmp_digits;

struct Evr<'a> {
    epoch: &'a [u8],
    version: &'a [u8],
    release: &'a [u8],
}

fn parse(s: &str) -> Option<Evr<'_>> {
    let (epoch, rest) = match s.split_once(':') {
        Some((e, rest)) if !e.is_empty() && e.bytes().all(|c| c.is_ascii_digit()) => (e, rest),
        Some(_) => return None,
        None => ("", s),
    };
    let (version, release) = match rest.rsplit_once('-') {
        Some((_, "")) => return None,
        Some((v, r)) => (v, r),
        None => (rest, ""),
    };
    let ok = |c: u8| c.is_ascii_alphanumeric() || b"._+~^".contains(&c);
    if version.is_empty() || !version.bytes().all(ok) || !release.bytes().all(ok) {
        return None;
    }
    Some(Evr {
        epoch: epoch.as_bytes(),
        version: version.as_bytes(),
        release: release.as_bytes(),
    })
}

pub(super) fn is_valid(s: &str) -> bool {
    parse(s).is_some()
}

pub(super) fn compare(a: &str, b: &str) -> Option<Ordering> {
    let (a, b) = (parse(a)?, parse(b)?);
    Some(
        cmp_digits(a.epoch, b.epoch)
            .then_with(|| rpmvercmp(a.version, b.version))
            .then_with(|| rpmvercmp(a.release, b.release)),
    )
}

/// rpm's segment-wise comparison of one version or release string.
fn rpmvercmp(a: &[u8], b: &[u8]) -> Ordering {
    if a == b {
        return Ordering::Equal;
    }
    let separator = |c: &u8| !c.is_ascii_alphanumeric() && *c != b'~' && *c != b'^';
    let (mut i, mut j) = (0, 0);
    loop {
        while a.get(i).is_some_and(separator) {
            i += 1;
        }
        while b.get(j).is_some_and(separator) {
            j += 1;
        }
        let (ca, cb) = (a.get(i).copied(), b.get(j).copied());
        if ca == Some(b'~') || cb == Some(b'~') {
            if ca != Some(b'~') {
                return Ordering::Greater;
            }
            if cb != Some(b'~') {
                return Ordering::Less;
            }
            (i, j) = (i + 1, j + 1);
            continue;
        }
        if ca == Some(b'^') || cb == Some(b'^') {
            return match (ca, cb) {
                (None, _) => Ordering::Less,
                (_, None) => Ordering::Greater,
                (Some(x), _) if x != b'^' => Ordering::Greater,
                (_, Some(y)) if y != b'^' => Ordering::Less,
                _ => {
                    (i, j) = (i + 1, j + 1);
                    continue;
                }
            };
        }
        let (Some(first), Some(_)) = (ca, cb) else {
            break;
        };
        let numeric = first.is_ascii_digit();
        let in_segment = |c: &u8| {
            if numeric {
                c.is_ascii_digit()
            } else {
                c.is_ascii_alphabetic()
            }
        };
        let (si, sj) = (i, j);
        while a.get(i).is_some_and(in_segment) {
            i += 1;
        }
        while b.get(j).is_some_and(in_segment) {
            j += 1;
        }
        if j == sj {
            // The segments differ in kind: a number beats letters.
            return if numeric { Ordering::Greater } else { Ordering::Less };
        }
        let order = if numeric {
            cmp_digits(&a[si..i], &b[sj..j])
        } else {
            a[si..i].cmp(&b[sj..j])
        };
        if order != Ordering::Equal {
            return order;
        }
    }
    match (i < a.len(), j < b.len()) {
        (false, false) => Ordering::Equal,
        (true, _) => Ordering::Greater,
        (false, true) => Ordering::Less,
    }
}

#[cfg(test)]
mod tests {
    use super::super::Ecosystem;
    use super::super::tests::check_orders;
    use super::*;

    /// rpm's own `rpmvercmp` test cases (tests/rpmvercmp.at): `a<b` or `a=b`.
    const RPMVERCMP: &str = "
        1.0=1.0 1.0<2.0 2.0.1=2.0.1 2.0<2.0.1 2.0.1a=2.0.1a 2.0.1<2.0.1a 5.5p1=5.5p1 5.5p1<5.5p2
        5.5p10=5.5p10 5.5p1<5.5p10 10xyz<10.1xyz xyz10=xyz10 xyz10<xyz10.1 xyz.4=xyz.4 xyz.4<8 xyz.4<2
        5.5p2<5.6p1 5.6p1<6.5p1 6.0<6.0.rc1 10a2<10b2 1.0aa=1.0aa 1.0a<1.0aa 10.0001=10.0001 10.0001=10.1
        10.0001<10.0039 4.999.9<5.0 20101121=20101121 20101121<20101122 2_0=2_0 2.0=2_0 a=a a+=a+ a+=a_
        +a=+a +a=_a +_=+_ _+=+_ _+=_ +=_ 1.0~rc1=1.0~rc1 1.0~rc1<1.0 1.0~rc1<1.0~rc2
        1.0~rc1~git123=1.0~rc1~git123 1.0~rc1~git123<1.0~rc1 1.0^=1.0^ 1.0<1.0^ 1.0^git1=1.0^git1
        1.0<1.0^git1 1.0^git1<1.0^git2 1.0^git1<1.01 1.0^20160101=1.0^20160101 1.0^20160101<1.0.1
        1.0^20160101^git1=1.0^20160101^git1 1.0^20160101^git1<1.0^20160102 1.0~rc1^git1=1.0~rc1^git1
        1.0~rc1<1.0~rc1^git1 1.0^git1~pre=1.0^git1~pre 1.0^git1~pre<1.0^git1";

    #[test]
    fn rpmvercmp_cases() {
        let mut n = 0;
        for row in RPMVERCMP.split_whitespace() {
            let (a, b, want) = match (row.split_once('<'), row.split_once('=')) {
                (Some((a, b)), _) => (a, b, Ordering::Less),
                (None, Some((a, b))) => (a, b, Ordering::Equal),
                _ => panic!("malformed row {row}"),
            };
            assert_eq!(rpmvercmp(a.as_bytes(), b.as_bytes()), want, "{row}");
            assert_eq!(rpmvercmp(b.as_bytes(), a.as_bytes()), want.reverse(), "{row} reversed");
            n += 1;
        }
        assert!(n >= 55, "{n}");
    }

    #[test]
    fn evr_orders() {
        let rows = "
            1.0-1<1.0-2 1.0-9<1.0-10 1.0<1.0-1 0:1.0-1=1.0-1 0:9.9-9<1:0.1-1
            2.4.37-43.module_el8.1.0+1234<2.4.37-43.module_el8.2.0+1 1.1.1k-6.el8_5<1.1.1k-7.el8_6
            3.0.7-16.el9_2<3.0.7-17.el9 7.61.1-22.el8<7.61.1-22.el8_6.3 1.0-1.fc38~rc1<1.0-1.fc38
            5.14.0-284.11.1.el9_2=5.14.0-284.11.1.el9_2 1.0-1=1.0-01 1.2.3-4.el8_2<1:0.1-1";
        check_orders(Ecosystem::Rpm, rows);
    }

    #[test]
    fn evr_syntax() {
        let e = Ecosystem::Rpm;
        for ok in ["1.0", "0:1.0-1.el8", "1.0^git1~pre-2.fc39", "xyz.4", "2_0", "a+"] {
            assert!(e.is_valid(ok), "{ok}");
        }
        for bad in [
            "", "-1", "1.0-", ":1.0", "a:1.0", "1:", "1.0 1", "1.0-1:2", "1.0@1", "1.0-é", "1:2-3-4",
        ] {
            assert!(!e.is_valid(bad), "{bad:?}");
            assert_eq!(e.compare("1.0", bad), None, "{bad:?}");
        }
    }
}
