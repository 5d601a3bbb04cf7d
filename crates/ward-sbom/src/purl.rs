//! Package URLs (purl), parsed and printed in canonical form.
//!
//! Inventories are joined to advisories by purl, and the same package reaches
//! us from syft, cyclonedx-py and our own layer scan, each spelling it slightly
//! differently (`pkg:PYPI/Django_Package`, unencoded `@scope`, unsorted
//! qualifiers). Canonicalizing once, here, makes equal packages equal strings.
//!
//! Rules follow the purl specification: only ASCII letters, digits, `.-_~` and
//! `:` are left unencoded inside a component (so `+` is `%2B`, `@` in a
//! namespace is `%40`, and a Debian epoch `1:2.3-4` stays as is); the type is
//! lowercase; qualifier keys are lowercase and sorted, empty values dropped;
//! subpath segments `.`/`..`/empty are dropped. Types whose names are
//! case-insensitive are lowercased, and PyPI names get PEP 503 normalization.

use std::fmt::{self, Write as _};
use std::str::FromStr;

use crate::Error;

/// A parsed package URL. Component strings are held decoded; [`fmt::Display`]
/// prints the canonical encoded form.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Purl {
    /// Lowercase type ("deb", "npm", …).
    pub ty: String,
    /// Decoded namespace; several segments are joined with '/' (golang's
    /// "github.com/gorilla"). For npm it keeps the '@' ("@angular").
    pub namespace: Option<String>,
    pub name: String,
    pub version: Option<String>,
    /// Sorted by key; keys lowercase, values non-empty.
    pub qualifiers: Vec<(String, String)>,
    /// Decoded, segments joined with '/'.
    pub subpath: Option<String>,
}

/// Parses `s` and prints it back canonically.
pub fn canonical_purl(s: &str) -> Result<String, Error> {
    Ok(Purl::parse(s)?.to_string())
}

fn invalid(purl: &str, reason: &'static str) -> Error {
    // Keep the error small even when the input is not.
    let mut shown: String = purl.chars().take(200).collect();
    if shown.len() < purl.len() {
        shown.push('…');
    }
    Error::InvalidPurl { purl: shown, reason }
}

impl Purl {
    /// Builds a purl from decoded parts, normalizing as [`Purl::parse`] does.
    /// `namespace` may hold several '/'-separated segments.
    pub fn new(ty: &str, namespace: Option<&str>, name: &str, version: Option<&str>) -> Result<Purl, Error> {
        let namespace = namespace
            .map(|ns| ns.split('/').filter(|s| !s.is_empty()).collect::<Vec<_>>().join("/"))
            .filter(|ns| !ns.is_empty());
        let mut purl = Purl {
            ty: ty.to_owned(),
            namespace,
            name: name.to_owned(),
            version: version.filter(|v| !v.is_empty()).map(str::to_owned),
            qualifiers: Vec::new(),
            subpath: None,
        };
        purl.normalize(&format!("pkg:{ty}/{name}"))?;
        Ok(purl)
    }

    /// Sets (or, with an empty value, removes) a qualifier, keeping them sorted.
    pub fn with_qualifier(mut self, key: &str, value: &str) -> Result<Purl, Error> {
        let key = key.to_ascii_lowercase();
        if !valid_key(&key) {
            return Err(invalid(&key, "invalid qualifier key"));
        }
        self.qualifiers.retain(|(k, _)| *k != key);
        if !value.is_empty() {
            self.qualifiers.push((key, value.to_owned()));
            self.qualifiers.sort();
        }
        Ok(self)
    }

    /// Looks up a qualifier's value.
    pub fn qualifier(&self, key: &str) -> Option<&str> {
        self.qualifiers.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Parses a purl string, leniently where the spec's own test suite is
    /// (`pkg://type/…`, an unencoded `@` before the name, mixed-case type and
    /// keys), strictly where ambiguity would follow (bad percent-encoding,
    /// duplicate qualifier keys, missing name).
    pub fn parse(s: &str) -> Result<Purl, Error> {
        let input = s;
        let s = s.trim();
        let (rest, subpath) = match s.rsplit_once('#') {
            Some((rest, sub)) => (rest, Some(sub)),
            None => (s, None),
        };
        let (rest, qualifiers) = match rest.rsplit_once('?') {
            Some((rest, q)) => (rest, Some(q)),
            None => (rest, None),
        };
        let (scheme, rest) = rest
            .split_once(':')
            .ok_or_else(|| invalid(input, "missing \"pkg:\" scheme"))?;
        if !scheme.eq_ignore_ascii_case("pkg") {
            return Err(invalid(input, "scheme is not \"pkg\""));
        }
        let rest = rest.trim_start_matches('/');
        let (ty, rest) = rest
            .split_once('/')
            .ok_or_else(|| invalid(input, "missing type or name"))?;
        let rest = rest.trim_end_matches('/');
        // The version separator is the last '@' after the last '/': an
        // unencoded npm scope ("@babel/core") is then not mistaken for one.
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (path, version) = match rest[last_slash..].rfind('@') {
            Some(at) => (&rest[..last_slash + at], Some(&rest[last_slash + at + 1..])),
            None => (rest, None),
        };
        let path = path.trim_end_matches('/');
        let (namespace, name) = match path.rsplit_once('/') {
            Some((ns, name)) => (Some(ns), name),
            None => (None, path),
        };

        let namespace = match namespace {
            Some(ns) => {
                let mut segments = Vec::new();
                for seg in ns.split('/').filter(|s| !s.is_empty()) {
                    let seg = decode(seg).ok_or_else(|| invalid(input, "bad percent-encoding"))?;
                    if seg.contains('/') {
                        return Err(invalid(input, "namespace segment contains '/'"));
                    }
                    if !seg.is_empty() {
                        segments.push(seg);
                    }
                }
                (!segments.is_empty()).then(|| segments.join("/"))
            }
            None => None,
        };
        let name = decode(name).ok_or_else(|| invalid(input, "bad percent-encoding"))?;
        let version = match version {
            Some(v) => Some(decode(v).ok_or_else(|| invalid(input, "bad percent-encoding"))?),
            None => None,
        };

        let mut pairs = Vec::new();
        for pair in qualifiers.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| invalid(input, "qualifier without '='"))?;
            let key = key.to_ascii_lowercase();
            if !valid_key(&key) {
                return Err(invalid(input, "invalid qualifier key"));
            }
            let value = decode(value).ok_or_else(|| invalid(input, "bad percent-encoding"))?;
            if pairs.iter().any(|(k, _)| *k == key) {
                return Err(invalid(input, "duplicate qualifier key"));
            }
            pairs.push((key, value));
        }

        let subpath = match subpath {
            Some(sub) => {
                let mut segments = Vec::new();
                for seg in sub.split('/') {
                    let seg = decode(seg).ok_or_else(|| invalid(input, "bad percent-encoding"))?;
                    if seg.contains('/') {
                        return Err(invalid(input, "subpath segment contains '/'"));
                    }
                    if !matches!(seg.as_str(), "" | "." | "..") {
                        segments.push(seg);
                    }
                }
                (!segments.is_empty()).then(|| segments.join("/"))
            }
            None => None,
        };

        let mut purl = Purl {
            ty: ty.to_owned(),
            namespace,
            name,
            version: version.filter(|v| !v.is_empty()),
            qualifiers: pairs,
            subpath,
        };
        purl.normalize(input)?;
        Ok(purl)
    }

    /// Validates the type and applies the canonical-form rules.
    fn normalize(&mut self, input: &str) -> Result<(), Error> {
        self.ty.make_ascii_lowercase();
        let mut chars = self.ty.chars();
        let starts_with_letter = chars.next().is_some_and(|c| c.is_ascii_lowercase());
        if !starts_with_letter || !chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+.-".contains(c)) {
            return Err(invalid(input, "invalid type"));
        }
        if self.name.is_empty() {
            return Err(invalid(input, "missing name"));
        }
        if lowercase_namespace(&self.ty)
            && let Some(ns) = &mut self.namespace
        {
            *ns = ns.to_lowercase();
        }
        if self.ty == "pypi" {
            self.name = pypi_normalize(&self.name);
        } else if lowercase_name(&self.ty) {
            self.name = self.name.to_lowercase();
        }
        self.qualifiers.retain(|(_, v)| !v.is_empty());
        self.qualifiers.sort();
        Ok(())
    }
}

/// PEP 503 name normalization: lowercase, every run of `-`, `_`, `.` becomes
/// one `-`. "Django_Package" and "django.package" are the same PyPI project.
pub fn pypi_normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_run = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !in_run {
                out.push('-');
            }
            in_run = true;
        } else {
            out.extend(c.to_lowercase());
            in_run = false;
        }
    }
    out
}

/// Types whose namespace the purl type definitions call case-insensitive.
fn lowercase_namespace(ty: &str) -> bool {
    matches!(
        ty,
        "alpm"
            | "apk"
            | "bitbucket"
            | "brew"
            | "composer"
            | "deb"
            | "github"
            | "hex"
            | "luarocks"
            | "qpkg"
            | "rpm"
            | "vscode-extension"
            | "yocto"
    )
}

/// Types whose name the purl type definitions call case-insensitive (PyPI
/// is handled apart: it also folds separators).
fn lowercase_name(ty: &str) -> bool {
    matches!(
        ty,
        "alpm"
            | "apk"
            | "bitbucket"
            | "bitnami"
            | "brew"
            | "chrome-extension"
            | "composer"
            | "deb"
            | "github"
            | "hex"
            | "luarocks"
            | "oci"
            | "otp"
            | "pub"
            | "vscode-extension"
    )
}

fn valid_key(key: &str) -> bool {
    let mut chars = key.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || ".-_".contains(c))
}

/// Percent-decodes one component. `+` is a literal plus, never a space.
/// None for a malformed escape or bytes that are not UTF-8.
fn decode(s: &str) -> Option<String> {
    if !s.contains('%') {
        return Some(s.to_owned());
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hi = hex_value(*bytes.get(i + 1)?)?;
            let lo = hex_value(*bytes.get(i + 2)?)?;
            out.push(hi << 4 | lo);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Percent-encodes one component: everything but ASCII letters, digits,
/// `.-_~` and `:` becomes `%XX` (uppercase hex) of its UTF-8 bytes.
fn encode(out: &mut String, s: &str) {
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'~' | b':') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
}

impl fmt::Display for Purl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::with_capacity(self.name.len() + 32);
        out.push_str("pkg:");
        out.push_str(&self.ty);
        out.push('/');
        if let Some(ns) = &self.namespace {
            for seg in ns.split('/') {
                encode(&mut out, seg);
                out.push('/');
            }
        }
        encode(&mut out, &self.name);
        if let Some(v) = &self.version {
            out.push('@');
            encode(&mut out, v);
        }
        for (i, (k, v)) in self.qualifiers.iter().enumerate() {
            out.push(if i == 0 { '?' } else { '&' });
            out.push_str(k);
            out.push('=');
            encode(&mut out, v);
        }
        if let Some(sub) = &self.subpath {
            out.push('#');
            for (i, seg) in sub.split('/').enumerate() {
                if i > 0 {
                    out.push('/');
                }
                encode(&mut out, seg);
            }
        }
        f.write_str(&out)
    }
}

impl FromStr for Purl {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Purl::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(s: &str) -> String {
        canonical_purl(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn canonical_forms() {
        assert_eq!(
            canon("pkg:PYPI/Django_Package@1.11.1.dev1"),
            "pkg:pypi/django-package@1.11.1.dev1"
        );
        assert_eq!(canon("pkg:pypi/zope..interface"), "pkg:pypi/zope-interface");
        assert_eq!(
            canon("pkg:npm/%40angular/animation@12.3.1"),
            "pkg:npm/%40angular/animation@12.3.1"
        );
        assert_eq!(
            canon("pkg:npm/@babel/core#/googleapis/api/annotations/"),
            "pkg:npm/%40babel/core#googleapis/api/annotations"
        );
        assert_eq!(
            canon("pkg:deb/debian/attr@1:2.4.47-2+b1?arch=amd64"),
            "pkg:deb/debian/attr@1:2.4.47-2%2Bb1?arch=amd64"
        );
        assert_eq!(
            canon("pkg:deb/debian/attr@1:2.4.47-2%2Bb1?arch=amd64"),
            "pkg:deb/debian/attr@1:2.4.47-2%2Bb1?arch=amd64"
        );
        assert_eq!(
            canon("pkg:Maven/org.apache.xmlgraphics/batik-anim@1.9.1?type=pom&repositorY_url=repo.spring.io/release"),
            "pkg:maven/org.apache.xmlgraphics/batik-anim@1.9.1?repository_url=repo.spring.io%2Frelease&type=pom"
        );
        assert_eq!(
            canon("pkg:///maven/org.apache.commons/io"),
            "pkg:maven/org.apache.commons/io"
        );
        assert_eq!(
            canon("pkg:golang/github.com/gorilla/context@234fd47e07d1004f0aed9c#api"),
            "pkg:golang/github.com/gorilla/context@234fd47e07d1004f0aed9c#api"
        );
        assert_eq!(
            canon("pkg:maven/mygroup/myartifact@1.0.0%20Final?mykey=my%20value&empty="),
            "pkg:maven/mygroup/myartifact@1.0.0%20Final?mykey=my%20value"
        );
        assert_eq!(
            canon("pkg:generic/bitwarderl?vcs_url=git%2Bhttps://git.fsfe.org/dxtr/bitwarderl%40cc55108da32"),
            "pkg:generic/bitwarderl?vcs_url=git%2Bhttps:%2F%2Fgit.fsfe.org%2Fdxtr%2Fbitwarderl%40cc55108da32"
        );
        assert_eq!(
            canon("pkg:APK/Alpine/Curl@7.83.0-r0?arch=x86"),
            "pkg:apk/alpine/curl@7.83.0-r0?arch=x86"
        );
        // Case-sensitive types keep their case.
        assert_eq!(
            canon("pkg:maven/HTTPClient/HTTPClient@0.3-3"),
            "pkg:maven/HTTPClient/HTTPClient@0.3-3"
        );
    }

    #[test]
    fn parsed_parts() {
        let p = Purl::parse("pkg:npm/%40angular/animation@12.3.1?b=2&a=1").unwrap();
        assert_eq!(p.ty, "npm");
        assert_eq!(p.namespace.as_deref(), Some("@angular"));
        assert_eq!(p.name, "animation");
        assert_eq!(p.version.as_deref(), Some("12.3.1"));
        assert_eq!(p.qualifiers, vec![("a".into(), "1".into()), ("b".into(), "2".into())]);
        assert_eq!(p.qualifier("b"), Some("2"));

        let p = Purl::parse("pkg:golang/github.com/gorilla/context").unwrap();
        assert_eq!(p.namespace.as_deref(), Some("github.com/gorilla"));
        assert_eq!(p.version, None);
    }

    #[test]
    fn rejects_invalid() {
        for bad in [
            "",
            "EnterpriseLibrary.Common@6.0.1304",
            "pkg:EnterpriseLibrary.Common@6.0.1304",
            "pkg:n&g?inx/nginx@0.8.9",
            "http:npm/foo@1",
            "pkg:1npm/foo@1",
            "pkg:npm/",
            "pkg:npm/foo@1?a=1&a=2",
            "pkg:npm/foo@1?novalue",
            "pkg:npm/foo@1?9key=x",
            "pkg:npm/foo%zz@1",
            "pkg:npm/foo%ff@1",
            "pkg:npm/a%2Fb/c@1",
        ] {
            assert!(Purl::parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn built_purls_round_trip() {
        let p = Purl::new("deb", Some("Debian"), "libc6", Some("2.36-9+deb12u4"))
            .unwrap()
            .with_qualifier("arch", "amd64")
            .unwrap()
            .with_qualifier("distro", "debian-12")
            .unwrap();
        let s = p.to_string();
        assert_eq!(s, "pkg:deb/debian/libc6@2.36-9%2Bdeb12u4?arch=amd64&distro=debian-12");
        assert_eq!(Purl::parse(&s).unwrap(), p);

        let odd = Purl::new("generic", Some("a b/ç"), "x?y#z@w%", Some("1 / 2")).unwrap();
        assert_eq!(Purl::parse(&odd.to_string()).unwrap(), odd);
    }
}
