//! CycloneDX 1.4–1.6 JSON BOMs (cyclonedx-py, cdxgen, syft, Trivy).
//!
//! Components nest (`components[].components`), so they are flattened with an
//! explicit stack: the walk's depth is bounded by our own counter rather than
//! the call stack. `metadata.component` is the BOM's subject (the image or
//! application), not one of its dependencies, and is not listed.

use serde::Deserialize;

use crate::{Collector, Error, Inventory, Limits, Package, Purl, Source, json};

#[derive(Deserialize)]
pub(crate) struct Bom {
    #[serde(rename = "bomFormat")]
    bom_format: String,
    #[serde(rename = "specVersion")]
    spec_version: String,
    metadata: Option<Metadata>,
    #[serde(default)]
    components: Vec<Component>,
}

#[derive(Deserialize)]
struct Metadata {
    timestamp: Option<String>,
    /// 1.4: an array of tools; 1.5+: `{components: [...], services: [...]}`.
    #[serde(default)]
    tools: serde_json::Value,
    component: Option<Subject>,
}

#[derive(Deserialize)]
struct Subject {
    name: Option<String>,
}

#[derive(Deserialize)]
struct Component {
    #[serde(rename = "type")]
    ty: Option<String>,
    name: Option<String>,
    version: Option<String>,
    purl: Option<String>,
    #[serde(default)]
    licenses: Vec<LicenseChoice>,
    #[serde(default)]
    components: Vec<Component>,
}

#[derive(Deserialize)]
struct LicenseChoice {
    license: Option<License>,
    expression: Option<String>,
}

#[derive(Deserialize)]
struct License {
    id: Option<String>,
    name: Option<String>,
}

const CONTEXT: &str = "in the CycloneDX document";

pub(crate) fn from_bytes(bytes: &[u8], limits: &Limits) -> Result<Bom, Error> {
    json::from_slice(bytes, "CycloneDX document", limits.max_depth)
}

/// Component types that describe things other than installable packages;
/// leaving them out without a purl is expected, not a gap worth counting.
fn is_package_like(ty: Option<&str>) -> bool {
    matches!(ty, None | Some("library" | "framework" | "application"))
}

pub(crate) fn parse(bom: Bom, limits: &Limits) -> Result<Inventory, Error> {
    if bom.bom_format != "CycloneDX" {
        return Err(Error::NotSbom {
            reason: format!("bomFormat {:?}", bom.bom_format.chars().take(64).collect::<String>()),
        });
    }
    let format = match bom.spec_version.as_str() {
        "1.4" => "cyclonedx-1.4",
        "1.5" => "cyclonedx-1.5",
        "1.6" => "cyclonedx-1.6",
        other => {
            return Err(Error::NotSbom {
                reason: format!("CycloneDX specVersion {:?}", other.chars().take(64).collect::<String>()),
            });
        }
    };
    let mut out = Collector::new(limits, "CycloneDX document");
    let mut seen = 0usize;
    let mut stack: Vec<(&Component, usize)> = bom.components.iter().rev().map(|c| (c, 1)).collect();
    while let Some((component, depth)) = stack.pop() {
        if depth > limits.max_depth {
            return Err(Error::TooDeep {
                what: "CycloneDX component",
                limit: limits.max_depth,
            });
        }
        seen += 1;
        out.count(seen)?;
        stack.extend(component.components.iter().rev().map(|c| (c, depth + 1)));
        component_package(component, limits, &mut out)?;
    }

    let (tool, generated_at, name) = match bom.metadata {
        Some(m) => (tools(&m.tools), m.timestamp, m.component.and_then(|c| c.name)),
        None => (None, None, None),
    };
    for (field, value) in [("tool", &tool), ("timestamp", &generated_at), ("subject name", &name)] {
        if let Some(v) = value {
            limits.check_field(CONTEXT, field, v)?;
        }
    }
    Ok(Inventory {
        format: Some(format.to_owned()),
        tool,
        generated_at,
        name,
        ..out.finish()
    })
}

fn component_package(c: &Component, limits: &Limits, out: &mut Collector) -> Result<(), Error> {
    let nonempty = |v: &Option<String>| v.as_deref().map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned);
    let Some(locator) = nonempty(&c.purl) else {
        if is_package_like(c.ty.as_deref()) {
            out.skip();
        }
        return Ok(());
    };
    limits.check_field(CONTEXT, "purl", &locator)?;
    let name = nonempty(&c.name);
    let version = nonempty(&c.version);
    let license = licenses(&c.licenses);
    for (field, value) in [
        ("package name", &name),
        ("package version", &version),
        ("license", &license),
    ] {
        if let Some(v) = value {
            limits.check_field(CONTEXT, field, v)?;
        }
    }
    let Ok(mut purl) = Purl::parse(&locator) else {
        out.skip();
        return Ok(());
    };
    if purl.version.is_none() {
        purl.version = version;
    }
    let Some(version) = purl.version.clone() else {
        out.skip();
        return Ok(());
    };
    let name = name.unwrap_or_else(|| purl.name.clone());
    out.push(Package::from_purl(
        &purl,
        name,
        version,
        license,
        Source::CycloneDx,
        None,
    ))
}

/// Joins a component's licenses: SPDX ids, free-text names or expressions.
/// Several entries all apply, hence AND.
fn licenses(choices: &[LicenseChoice]) -> Option<String> {
    let parts: Vec<&str> = choices
        .iter()
        .filter_map(|l| {
            l.expression
                .as_deref()
                .or_else(|| l.license.as_ref().and_then(|l| l.id.as_deref().or(l.name.as_deref())))
        })
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    match parts.len() {
        0 => None,
        1 => Some(parts[0].to_owned()),
        _ => Some(parts.join(" AND ")),
    }
}

/// "name version" for each tool, in either metadata.tools shape.
fn tools(value: &serde_json::Value) -> Option<String> {
    let describe = |t: &serde_json::Value| -> Option<String> {
        let name = t.get("name")?.as_str()?.trim();
        if name.is_empty() {
            return None;
        }
        Some(match t.get("version").and_then(|v| v.as_str()).map(str::trim) {
            Some(v) if !v.is_empty() => format!("{name} {v}"),
            _ => name.to_owned(),
        })
    };
    let list: Vec<String> = match value {
        serde_json::Value::Array(tools) => tools.iter().filter_map(describe).collect(),
        serde_json::Value::Object(o) => ["components", "services"]
            .iter()
            .filter_map(|k| o.get(*k).and_then(|v| v.as_array()))
            .flatten()
            .filter_map(describe)
            .collect(),
        _ => Vec::new(),
    };
    (!list.is_empty()).then(|| list.join(", "))
}
