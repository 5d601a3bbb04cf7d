//! dpkg databases: `var/lib/dpkg/status` and distroless's one-file-per-package
//! `var/lib/dpkg/status.d/`.
//!
//! RFC 822-style stanzas separated by blank lines; continuation lines start
//! with whitespace. Only packages whose `Status` says installed count (the
//! status file also remembers removed packages with leftover config files);
//! status.d files have no `Status` and are all installed. `Source` (minus any
//! "(version)") becomes the `upstream` qualifier when it differs from the
//! name: Debian files advisories under source packages.

use crate::layers::OsRelease;
use crate::{Collector, Error, Package, Purl, Source};

#[derive(Default)]
struct Stanza<'a> {
    lines: usize,
    name: Option<&'a str>,
    version: Option<&'a str>,
    arch: Option<&'a str>,
    source: Option<&'a str>,
    status: Option<&'a str>,
}

pub(crate) fn parse(
    data: &[u8],
    location: &str,
    os: &OsRelease,
    require_status: bool,
    out: &mut Collector,
) -> Result<(), Error> {
    let text = String::from_utf8_lossy(data);
    let mut stanza = Stanza::default();
    for line in text.lines().chain(std::iter::once("")) {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            if stanza.lines > 0 {
                emit(&stanza, location, os, require_status, out)?;
            }
            stanza = Stanza::default();
            continue;
        }
        stanza.lines += 1;
        if line.starts_with([' ', '\t']) {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        // Field names are case-insensitive in deb822.
        let slot = match key.trim().to_ascii_lowercase().as_str() {
            "package" => &mut stanza.name,
            "version" => &mut stanza.version,
            "architecture" => &mut stanza.arch,
            "source" => &mut stanza.source,
            "status" => &mut stanza.status,
            _ => continue,
        };
        if !value.is_empty() {
            *slot = Some(value);
        }
    }
    Ok(())
}

/// "want flag status": the third word is the state; "install ok installed"
/// and "hold ok installed" are both installed, "deinstall ok config-files" not.
fn installed(status: Option<&str>, require_status: bool) -> bool {
    match status {
        Some(s) => s.split_whitespace().nth(2) == Some("installed"),
        None => !require_status,
    }
}

fn emit(s: &Stanza, location: &str, os: &OsRelease, require_status: bool, out: &mut Collector) -> Result<(), Error> {
    if !installed(s.status, require_status) {
        return Ok(());
    }
    let (Some(name), Some(version)) = (s.name, s.version) else {
        out.skip();
        return Ok(());
    };
    let context = format!("in {location}");
    let limits = out.limits;
    limits.check_field(&context, "package name", name)?;
    limits.check_field(&context, "package version", version)?;
    for (field, value) in [("arch", s.arch), ("source", s.source)] {
        if let Some(v) = value {
            limits.check_field(&context, field, v)?;
        }
    }
    let Ok(mut purl) = Purl::new("deb", Some(os.namespace("debian")), name, Some(version)) else {
        out.skip();
        return Ok(());
    };
    purl = purl.with_qualifier("arch", s.arch.unwrap_or(""))?;
    let source = s.source.and_then(|src| src.split_whitespace().next());
    if let Some(source) = source.filter(|src| *src != name) {
        purl = purl.with_qualifier("upstream", source)?;
    }
    if let Some(distro) = os.distro() {
        purl = purl.with_qualifier("distro", &distro)?;
    }
    out.push(Package::from_purl(
        &purl,
        name.to_owned(),
        version.to_owned(),
        None,
        Source::Dpkg,
        Some(location.to_owned()),
    ))
}

#[cfg(test)]
mod tests {
    use super::installed;

    #[test]
    fn status_words() {
        assert!(installed(Some("install ok installed"), true));
        assert!(installed(Some("hold ok installed"), true));
        assert!(!installed(Some("deinstall ok config-files"), true));
        assert!(!installed(Some("install ok half-installed"), true));
        assert!(!installed(None, true));
        assert!(installed(None, false));
    }
}
