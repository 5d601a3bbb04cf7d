//! Registry rules with no I/O: digests, the OCI repository and tag grammars,
//! the tag classes v2 hides by default, and the repo field validators of the
//! reference (§3.7).

use std::fmt;

use crate::error::FieldViolation;

/// A content digest: `sha256:<64 hex>` or `sha512:<128 hex>`, lowercase.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest(String);

/// The digest algorithms Ward stores and verifies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    Sha256,
    Sha512,
}

impl Algorithm {
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Sha256 => "sha256",
            Algorithm::Sha512 => "sha512",
        }
    }

    fn hex_len(self) -> usize {
        match self {
            Algorithm::Sha256 => 64,
            Algorithm::Sha512 => 128,
        }
    }
}

impl Digest {
    /// Parses a digest; `None` for anything but a well-formed sha256/sha512 one.
    pub fn parse(raw: &str) -> Option<Self> {
        let (algo, hex) = raw.split_once(':')?;
        let algo = match algo {
            "sha256" => Algorithm::Sha256,
            "sha512" => Algorithm::Sha512,
            _ => return None,
        };
        let ok = hex.len() == algo.hex_len() && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        ok.then(|| Digest(raw.to_owned()))
    }

    /// The sha256 digest of `bytes`.
    pub fn sha256_of(bytes: &[u8]) -> Self {
        use sha2::Digest as _;
        Digest(format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes))))
    }

    /// The digest of `bytes` with this digest's algorithm.
    pub fn of_same_kind(&self, bytes: &[u8]) -> Self {
        use sha2::Digest as _;
        match self.algorithm() {
            Algorithm::Sha256 => Self::sha256_of(bytes),
            Algorithm::Sha512 => Digest(format!("sha512:{}", hex::encode(sha2::Sha512::digest(bytes)))),
        }
    }

    pub fn algorithm(&self) -> Algorithm {
        if self.0.starts_with("sha512:") {
            Algorithm::Sha512
        } else {
            Algorithm::Sha256
        }
    }

    /// The hex part.
    pub fn hex(&self) -> &str {
        &self.0[self.0.find(':').map_or(0, |i| i + 1)..]
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Longest repository name (within an organization), in bytes.
pub const MAX_REPO_NAME: usize = 255;
/// Most path components a repository name may have.
pub const MAX_REPO_COMPONENTS: usize = 16;
/// Longest tag (the OCI grammar's own bound).
pub const MAX_TAG: usize = 128;

/// Whether `name` is a repository name under the OCI grammar:
/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*`.
pub fn is_repo_name(name: &str) -> bool {
    if name.is_empty() || name.len() > MAX_REPO_NAME {
        return false;
    }
    let mut n = 0;
    for component in name.split('/') {
        n += 1;
        if n > MAX_REPO_COMPONENTS || !is_component(component) {
            return false;
        }
    }
    true
}

/// One path component: alphanumeric runs joined by `.`, `_`, `__` or `-+`.
fn is_component(c: &str) -> bool {
    let b = c.as_bytes();
    let alnum = |x: u8| x.is_ascii_lowercase() || x.is_ascii_digit();
    if b.is_empty() || !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(b[i]) {
            i += 1;
            continue;
        }
        // A separator run, followed by an alphanumeric (the last byte is one).
        let start = i;
        while i < b.len() && !alnum(b[i]) {
            i += 1;
        }
        let sep = &c[start..i];
        let ok = matches!(sep, "." | "_" | "__") || sep.bytes().all(|x| x == b'-');
        if !ok {
            return false;
        }
    }
    true
}

/// Whether `tag` matches `[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}`.
pub fn is_tag(tag: &str) -> bool {
    let b = tag.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_TAG
        && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
        && b[1..]
            .iter()
            .all(|&x| x.is_ascii_alphanumeric() || matches!(x, b'.' | b'_' | b'-'))
}

/// The classes of tags that v2's ListTags hides unless asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TagClass {
    /// `sha256-*`: tags that attach signatures, attestations or referrers.
    pub referrer: bool,
    /// `*-20yymmdd`: dated builds.
    pub dated: bool,
    /// `*-r<N>`: package epochs.
    pub epoch: bool,
}

impl TagClass {
    pub fn of(tag: &str) -> Self {
        let dated = tag.len() > 9 && {
            let tail = &tag.as_bytes()[tag.len() - 9..];
            tail[0] == b'-' && tail[1] == b'2' && tail[2] == b'0' && tail[3..].iter().all(u8::is_ascii_digit)
        };
        let epoch = tag
            .rsplit_once("-r")
            .is_some_and(|(head, n)| !head.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        TagClass {
            referrer: tag.starts_with("sha256-"),
            dated,
            epoch,
        }
    }
}

/// `bundles` values the reference allows.
pub const BUNDLES: &[&str] = &[
    "application",
    "base",
    "byol",
    "ai",
    "ai-gpu",
    "featured",
    "fips",
    "commercial",
    "emeritoss",
];

/// Most values a repeated repo field (`bundles`, `aliases`, `activeTags`) holds.
pub const MAX_REPO_LIST: usize = 64;

/// Checks `bundles` against the allow-list.
pub fn check_bundles(field: &str, bundles: &[String], bad: &mut Vec<FieldViolation>) {
    check_count(field, bundles, bad);
    for b in bundles {
        if !BUNDLES.contains(&b.as_str()) {
            bad.push(FieldViolation {
                field: field.into(),
                description: format!(
                    "\"{}\" is not a bundle; use one of {}",
                    crate::names::echo(b),
                    BUNDLES.join(", ")
                ),
            });
            return;
        }
    }
}

/// Checks `aliases`: each `name:tag`-like, per the reference's validator
/// `^[a-zA-Z0-9_.\-/]*[a-zA-Z0-9_.\-]:[a-zA-Z0-9_.\-]+$`.
pub fn check_aliases(field: &str, aliases: &[String], bad: &mut Vec<FieldViolation>) {
    check_count(field, aliases, bad);
    let word = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-');
    for a in aliases {
        let ok = a.len() <= MAX_REPO_NAME + MAX_TAG + 1
            && a.rsplit_once(':').is_some_and(|(name, tag)| {
                !name.is_empty()
                    && !tag.is_empty()
                    && name.bytes().all(|b| word(b) || b == b'/')
                    && word(name.as_bytes()[name.len() - 1])
                    && tag.bytes().all(word)
            });
        if !ok {
            bad.push(FieldViolation {
                field: field.into(),
                description: format!(
                    "alias \"{}\" must look like name:tag (letters, digits, _ . - and / in the name)",
                    crate::names::echo(a)
                ),
            });
            return;
        }
    }
}

/// Checks `active_tags`: each a valid tag.
pub fn check_tags(field: &str, tags: &[String], bad: &mut Vec<FieldViolation>) {
    check_count(field, tags, bad);
    if let Some(t) = tags.iter().find(|t| !is_tag(t)) {
        bad.push(FieldViolation {
            field: field.into(),
            description: format!(
                "\"{}\" is not a tag: tags match [a-zA-Z0-9_][a-zA-Z0-9._-]{{0,127}}",
                crate::names::echo(t)
            ),
        });
    }
}

fn check_count(field: &str, values: &[String], bad: &mut Vec<FieldViolation>) {
    if values.len() > MAX_REPO_LIST {
        bad.push(FieldViolation {
            field: field.into(),
            description: format!("{field} holds at most {MAX_REPO_LIST} values"),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests() {
        let d = Digest::sha256_of(b"");
        assert_eq!(
            d.as_str(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(Digest::parse(d.as_str()), Some(d.clone()));
        assert_eq!(d.hex().len(), 64);
        for bad in [
            "",
            "sha256:",
            "sha256:E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855",
            "md5:d41d8cd98f00b204e9800998ecf8427e",
            "sha256:e3b0",
            "sha512:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "sha256:../../../../etc/passwd",
        ] {
            assert_eq!(Digest::parse(bad), None, "{bad}");
        }
        let s512 = Digest::parse(&format!("sha512:{}", "a".repeat(128))).unwrap();
        assert_eq!(s512.algorithm(), Algorithm::Sha512);
        assert!(s512.of_same_kind(b"x").as_str().starts_with("sha512:"));
    }

    #[test]
    fn repo_names() {
        for ok in ["a", "nginx", "team/app", "a.b", "a_b", "a__b", "a---b", "x/y/z9", "0"] {
            assert!(is_repo_name(ok), "{ok}");
        }
        for bad in [
            "", "A", "a/", "/a", "a//b", "a..b", "a___b", "-a", "a-", "a_", "a b", "a:b", "a/../b", "é",
        ] {
            assert!(!is_repo_name(bad), "{bad}");
        }
        assert!(!is_repo_name(&"a".repeat(256)));
        assert!(!is_repo_name(&vec!["a"; 17].join("/")));
    }

    #[test]
    fn tags_and_classes() {
        assert!(is_tag("latest") && is_tag("_x") && is_tag("1.2.3-r4") && is_tag(&"a".repeat(128)));
        assert!(!is_tag("") && !is_tag(".x") && !is_tag("-x") && !is_tag("a/b") && !is_tag(&"a".repeat(129)));
        let c = TagClass::of("sha256-abc.sig");
        assert!(c.referrer && !c.dated && !c.epoch);
        assert!(TagClass::of("1.2-20240101").dated);
        assert!(!TagClass::of("1.2-19240101").dated);
        assert!(TagClass::of("1.2.3-r4").epoch);
        assert!(!TagClass::of("-r4").epoch && !TagClass::of("1-r").epoch && !TagClass::of("latest").epoch);
        assert_eq!(TagClass::of("latest"), TagClass::default());
    }

    #[test]
    fn repo_fields() {
        let mut bad = Vec::new();
        check_bundles("bundles", &["base".into(), "fips".into()], &mut bad);
        check_aliases("aliases", &["docker.io/library/nginx:latest".into()], &mut bad);
        check_tags("active_tags", &["latest".into()], &mut bad);
        assert!(bad.is_empty(), "{bad:?}");
        check_bundles("bundles", &["nope".into()], &mut bad);
        check_aliases("aliases", &["nginx".into()], &mut bad);
        check_aliases("aliases", &["nginx/:x".into()], &mut bad);
        check_tags("active_tags", &["a/b".into()], &mut bad);
        assert_eq!(bad.len(), 4);
    }
}
