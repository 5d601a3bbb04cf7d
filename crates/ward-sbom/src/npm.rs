//! Installed npm packages: `node_modules/<name>/package.json` and
//! `node_modules/@<scope>/<name>/package.json`.
//!
//! A package.json that is not valid JSON, or lacks a name or version, is
//! counted as skipped rather than failing the image: node_modules trees hold
//! plenty of odd files, and one should not hide every other package.

use serde::Deserialize;

use crate::{Collector, Error, Package, Purl, Source, json};

#[derive(Deserialize)]
struct Manifest {
    name: Option<serde_json::Value>,
    version: Option<serde_json::Value>,
    license: Option<serde_json::Value>,
    /// The pre-SPDX form: `[{"type": "MIT"}, …]`.
    licenses: Option<serde_json::Value>,
}

pub(crate) fn parse(data: &[u8], location: &str, out: &mut Collector) -> Result<(), Error> {
    let limits = out.limits;
    let Ok(manifest) = json::from_slice::<Manifest>(json::strip_bom(data), "package.json", limits.max_depth) else {
        out.skip();
        return Ok(());
    };
    let text = |v: &Option<serde_json::Value>| {
        v.as_ref()
            .and_then(|v| v.as_str())
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let (Some(full_name), Some(version)) = (text(&manifest.name), text(&manifest.version)) else {
        out.skip();
        return Ok(());
    };
    let context = format!("in {location}");
    limits.check_field(&context, "package name", &full_name)?;
    limits.check_field(&context, "package version", &version)?;
    let license = license(&manifest);
    if let Some(l) = &license {
        limits.check_field(&context, "license", l)?;
    }
    let (namespace, name) = match full_name.split_once('/') {
        Some((scope, name)) if scope.len() > 1 && scope.starts_with('@') && !name.contains('/') => (Some(scope), name),
        Some(_) => {
            out.skip();
            return Ok(());
        }
        None => (None, full_name.as_str()),
    };
    let Ok(purl) = Purl::new("npm", namespace, name, Some(&version)) else {
        out.skip();
        return Ok(());
    };
    out.push(Package::from_purl(
        &purl,
        full_name.clone(),
        version,
        license,
        Source::Npm,
        Some(location.to_owned()),
    ))
}

/// `license` as a string or `{"type": …}`, else the legacy `licenses` array
/// (alternatives, hence OR).
fn license(m: &Manifest) -> Option<String> {
    let of = |v: &serde_json::Value| -> Option<String> {
        let s = match v {
            serde_json::Value::String(s) => s.as_str(),
            serde_json::Value::Object(o) => o.get("type")?.as_str()?,
            _ => return None,
        };
        let s = s.trim();
        (!s.is_empty()).then(|| s.to_owned())
    };
    if let Some(l) = m.license.as_ref().and_then(of) {
        return Some(l);
    }
    let list: Vec<String> = m.licenses.as_ref()?.as_array()?.iter().filter_map(of).collect();
    (!list.is_empty()).then(|| list.join(" OR "))
}
