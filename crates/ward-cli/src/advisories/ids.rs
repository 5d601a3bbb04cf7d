//! Advisory ids and the aliases they carry (reference §7.2): `CGA-xxxx-xxxx-xxxx`,
//! CVE, GHSA and Go vulnerability ids.

/// The 20 characters of CGA and GHSA id groups.
const ALPHABET: &str = "23456789cfghjmpqrvwx";

/// `PREFIX-xxxx-xxxx-xxxx`, each `x` from [`ALPHABET`].
fn three_groups(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|rest| {
            let groups: Vec<&str> = rest.split('-').collect();
            groups.len() == 3
                && groups
                    .iter()
                    .all(|g| g.len() == 4 && g.chars().all(|c| ALPHABET.contains(c)))
        })
}

/// `s` is `PREFIX-<digits>-<digits>` with `year` digits, then at least `min`.
fn digits(s: &str, prefix: &str, min: usize, exact: bool) -> bool {
    let Some(rest) = s.strip_prefix(prefix) else {
        return false;
    };
    let Some((year, number)) = rest.split_once('-') else {
        return false;
    };
    let all_digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    year.len() == 4
        && all_digits(year)
        && all_digits(number)
        && if exact {
            number.len() == min
        } else {
            number.len() >= min
        }
}

/// A CGA id, e.g. `CGA-3g3j-8396-2m48`.
pub fn is_cga(s: &str) -> bool {
    three_groups(s, "CGA")
}

/// A CVE (`CVE-2024-12345`), GHSA (`GHSA-xxxx-xxxx-xxxx`) or Go
/// (`GO-2024-1234`) id.
pub fn is_alias(s: &str) -> bool {
    digits(s, "CVE-", 4, false) || three_groups(s, "GHSA") || digits(s, "GO-", 4, true)
}

/// Whether `s` names one of the kinds of alias an advisory carries (by its
/// prefix alone: a malformed one is left for the server to report).
pub fn looks_like_alias(s: &str) -> bool {
    ["CVE-", "GHSA-", "GO-"].iter().any(|p| s.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cga_ids() {
        assert!(is_cga("CGA-3g3j-8396-2m48"));
        for bad in [
            "CGA-3g3j-8396",
            "CGA-3g3j-8396-2m4",
            "CGA-3g3j-8396-2m4a",
            "cga-3g3j-8396-2m48",
            "CGA-3g3j-8396-2m48-",
        ] {
            assert!(!is_cga(bad), "{bad}");
        }
    }

    #[test]
    fn aliases() {
        for good in ["CVE-2024-12345", "CVE-2021-0001", "GHSA-292c-qr74-p9v7", "GO-2024-1234"] {
            assert!(is_alias(good), "{good}");
        }
        for bad in [
            "CVE-24-101",
            "CVE-2024-123",
            "GHSA-292c-qr74-p9v1",
            "GO-2024-12345",
            "CGA-3g3j-8396-2m48",
        ] {
            assert!(!is_alias(bad), "{bad}");
        }
    }
}
