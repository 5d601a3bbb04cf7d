//! The apk installed database, `lib/apk/db/installed` (Alpine, Wolfi,
//! Chainguard).
//!
//! Blank-line separated stanzas of single-letter `K:value` lines; we read
//! `P` (name), `V` (version), `A` (arch), `L` (license) and `o` (origin, the
//! source package advisories are filed under, which becomes the `upstream`
//! qualifier when it differs from the name, as syft writes it).

use crate::layers::OsRelease;
use crate::{Collector, Error, Package, Purl, Source};

#[derive(Default)]
struct Stanza<'a> {
    lines: usize,
    name: Option<&'a str>,
    version: Option<&'a str>,
    arch: Option<&'a str>,
    license: Option<&'a str>,
    origin: Option<&'a str>,
}

pub(crate) fn parse(data: &[u8], location: &str, os: &OsRelease, out: &mut Collector) -> Result<(), Error> {
    let text = String::from_utf8_lossy(data);
    let mut stanza = Stanza::default();
    for line in text.lines().chain(std::iter::once("")) {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            if stanza.lines > 0 {
                emit(&stanza, location, os, out)?;
            }
            stanza = Stanza::default();
            continue;
        }
        stanza.lines += 1;
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        let slot = match key {
            "P" => &mut stanza.name,
            "V" => &mut stanza.version,
            "A" => &mut stanza.arch,
            "L" => &mut stanza.license,
            "o" => &mut stanza.origin,
            _ => continue,
        };
        if !value.is_empty() {
            *slot = Some(value);
        }
    }
    Ok(())
}

fn emit(s: &Stanza, location: &str, os: &OsRelease, out: &mut Collector) -> Result<(), Error> {
    let (Some(name), Some(version)) = (s.name, s.version) else {
        out.skip();
        return Ok(());
    };
    let context = format!("in {location}");
    let limits = out.limits;
    limits.check_field(&context, "package name", name)?;
    limits.check_field(&context, "package version", version)?;
    for (field, value) in [("license", s.license), ("arch", s.arch), ("origin", s.origin)] {
        if let Some(v) = value {
            limits.check_field(&context, field, v)?;
        }
    }
    let Ok(mut purl) = Purl::new("apk", Some(os.namespace("alpine")), name, Some(version)) else {
        out.skip();
        return Ok(());
    };
    purl = purl.with_qualifier("arch", s.arch.unwrap_or(""))?;
    if let Some(origin) = s.origin.filter(|o| *o != name) {
        purl = purl.with_qualifier("upstream", origin)?;
    }
    if let Some(distro) = os.distro() {
        purl = purl.with_qualifier("distro", &distro)?;
    }
    out.push(Package::from_purl(
        &purl,
        name.to_owned(),
        version.to_owned(),
        s.license.map(str::to_owned),
        Source::Apk,
        Some(location.to_owned()),
    ))
}
