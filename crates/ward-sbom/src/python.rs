//! Installed Python distributions: `*.dist-info/METADATA` (wheels),
//! `*.egg-info/PKG-INFO` and `*.egg-info` files (eggs, setup.py installs).
//!
//! All are email-style headers ending at the first blank line (the body is
//! the long description). `License-Expression` (metadata 2.4) is preferred
//! over `License`, whose value is often a whole license text on continuation
//! lines: we keep only its first line, and drop it if even that is over the
//! field bound, since a long license is no reason to lose the package.

use crate::{Collector, Error, Package, Purl, Source};

pub(crate) fn parse(data: &[u8], location: &str, out: &mut Collector) -> Result<(), Error> {
    let text = String::from_utf8_lossy(data);
    let (mut name, mut version, mut license, mut expression) = (None, None, None, None);
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            break;
        }
        if line.starts_with([' ', '\t']) {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        let slot = match key.trim().to_ascii_lowercase().as_str() {
            "name" => &mut name,
            "version" => &mut version,
            "license" => &mut license,
            "license-expression" => &mut expression,
            _ => continue,
        };
        if slot.is_none() && !value.is_empty() {
            *slot = Some(value);
        }
    }
    let (Some(name), Some(version)) = (name, version) else {
        out.skip();
        return Ok(());
    };
    let context = format!("in {location}");
    let limits = out.limits;
    limits.check_field(&context, "package name", name)?;
    limits.check_field(&context, "package version", version)?;
    let license = expression
        .or(license)
        .filter(|l| !l.eq_ignore_ascii_case("UNKNOWN") && l.len() <= limits.max_field_bytes);
    let Ok(purl) = Purl::new("pypi", None, name, Some(version)) else {
        out.skip();
        return Ok(());
    };
    out.push(Package::from_purl(
        &purl,
        name.to_owned(),
        version.to_owned(),
        license.map(str::to_owned),
        Source::Python,
        Some(location.to_owned()),
    ))
}
