//! Debian and Ubuntu package versions, `[epoch:]upstream[-revision]`, in dpkg's order.
//!
//! The epoch compares as a number; upstream version and revision each compare
//! by alternating runs: a run of non-digits character by character, where `~`
//! sorts before everything (even the end of the string), letters before the
//! end, and the end before other characters; then a run of digits by value. A
//! missing revision is the empty string, which equals `0`, so `1.0 == 1.0-0`.
//!
//! Validity follows dpkg's errors: a non-empty upstream of letters, digits and
//! `.+~-:`, a numeric epoch, a non-empty revision of letters, digits and `.+~`.
//! Like dpkg, an upstream that does not start with a digit is accepted.

use std::cmp::Ordering;

use super::cmp_digits;

struct Parts<'a> {
    epoch: &'a [u8],
    upstream: &'a [u8],
    revision: &'a [u8],
}

fn parse(s: &str) -> Option<Parts<'_>> {
    let (epoch, rest) = match s.split_once(':') {
        Some((e, rest)) if !e.is_empty() && e.bytes().all(|c| c.is_ascii_digit()) => (e, rest),
        Some(_) => return None,
        None => ("", s),
    };
    let (upstream, revision) = match rest.rsplit_once('-') {
        Some((_, "")) => return None,
        Some((u, r)) => (u, r),
        None => (rest, ""),
    };
    let upstream_ok = |c: u8| c.is_ascii_alphanumeric() || b".+~-:".contains(&c);
    let revision_ok = |c: u8| c.is_ascii_alphanumeric() || b".+~".contains(&c);
    if upstream.is_empty() || !upstream.bytes().all(upstream_ok) || !revision.bytes().all(revision_ok) {
        return None;
    }
    Some(Parts {
        epoch: epoch.as_bytes(),
        upstream: upstream.as_bytes(),
        revision: revision.as_bytes(),
    })
}

pub(super) fn is_valid(s: &str) -> bool {
    parse(s).is_some()
}

pub(super) fn compare(a: &str, b: &str) -> Option<Ordering> {
    let (a, b) = (parse(a)?, parse(b)?);
    Some(
        cmp_digits(a.epoch, b.epoch)
            .then_with(|| verrevcmp(a.upstream, b.upstream))
            .then_with(|| verrevcmp(a.revision, b.revision)),
    )
}

/// A character's weight in a non-digit run; the end of the string (and a
/// digit, where the other side still has non-digits) weighs 0.
fn weight(c: Option<u8>) -> i32 {
    match c {
        None => 0,
        Some(b'~') => -1,
        Some(c) if c.is_ascii_digit() => 0,
        Some(c) if c.is_ascii_alphabetic() => i32::from(c),
        Some(c) => i32::from(c) + 256,
    }
}

/// dpkg's comparison of one upstream version or revision.
fn verrevcmp(a: &[u8], b: &[u8]) -> Ordering {
    let (mut i, mut j) = (0, 0);
    let non_digit = |s: &[u8], k: usize| s.get(k).is_some_and(|c| !c.is_ascii_digit());
    let digits_end = |s: &[u8], mut k: usize| {
        while s.get(k).is_some_and(u8::is_ascii_digit) {
            k += 1;
        }
        k
    };
    while i < a.len() || j < b.len() {
        while non_digit(a, i) || non_digit(b, j) {
            let (wa, wb) = (weight(a.get(i).copied()), weight(b.get(j).copied()));
            if wa != wb {
                return wa.cmp(&wb);
            }
            // Equal weights here mean both sides hold the same non-digit.
            i += 1;
            j += 1;
        }
        let (ei, ej) = (digits_end(a, i), digits_end(b, j));
        let order = cmp_digits(&a[i..ei], &b[j..ej]);
        if order != Ordering::Equal {
            return order;
        }
        (i, j) = (ei, ej);
    }
    Ordering::Equal
}

#[cfg(test)]
mod tests {
    use super::super::Ecosystem;
    use super::super::tests::{check_ascending, check_orders};

    #[test]
    fn dpkg_orders() {
        // Debian Policy 5.6.12's examples, dpkg's test suite and archive versions.
        let rows = "
            1.0~rc1<1.0 2.0<1:0.1 1.0-1<1.0-1ubuntu1 1.0=1.0-0 0:1.0=1.0 1.0=1.00 1.0-0=1.0-00
            1.0~~<1.0~~a 1.0~~a<1.0~ 1.0~<1.0 1.0<1.0a 1.0a<1.0+ 1.0+<1.0. 1.0<1.0+dfsg 1.0+dfsg<1.0.1
            1.9<1.10 1.0<1.0.0 7.6-0<7.6p2-4 2.30-1<2.30-1.1 1.2.3-1<1.2.3-1+deb12u1
            1.2.3-1+deb12u1<1.2.3-1+deb12u2 1.2.3-1+deb11u1<1.2.3-1+deb12u1 1.0-1~bpo1<1.0-1
            3.0.11-1~deb12u2<3.0.11-1 3.0.11-1<3.0.13-1~deb12u1 1:1.0<2:0.1 9:2<10:1 9:2=09:2
            2.36-9+deb12u7<2.36-9+deb12u10 1.0-1ubuntu0.1<1.0-1ubuntu1 1.1.1f-1ubuntu2.20<1.1.1f-1ubuntu2.22
            0.9.8+git20201008.1a2b<0.9.8+git20210101.0000 a1.0<b1.0 1.2-3-4<1.2-3-5 1.2-3-4<1.2-4-1
            1:2:3-1<1:2:4-1 00001:1.0=1:1.0 99999999999999999999:1<100000000000000000000:0";
        check_orders(Ecosystem::Debian, rows);
        // Policy's tilde example, ascending.
        check_ascending(Ecosystem::Debian, &["1.0~~", "1.0~~a", "1.0~", "1.0", "1.0a"]);
    }

    #[test]
    fn dpkg_syntax() {
        let e = Ecosystem::Debian;
        for ok in [
            "1.0",
            "1:1.0-1",
            "1.0-1ubuntu0.22.04.1",
            "2.36-9+deb12u7",
            "1.2-3-4",
            "1:2:3-4",
            "0",
            "a1.0",
            "1~",
        ] {
            assert!(e.is_valid(ok), "{ok}");
        }
        for bad in [
            "", ":1.0", "a:1.0", "1.0-", "-1", "1:", "1:-1", "1.0 ", "1.0_1", "1.0-1:2", "1.0-1-", "1,0", "é",
        ] {
            assert!(!e.is_valid(bad), "{bad:?}");
            assert_eq!(e.compare(bad, "1.0"), None, "{bad:?}");
        }
    }
}
