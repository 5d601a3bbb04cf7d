//! SPDX 2.2 / 2.3 JSON documents (what syft, Trivy and the Kubernetes bom
//! tool emit).
//!
//! Only the fields an inventory needs are deserialized; `files`, `snippets`
//! and the rest are skipped by serde without being built. A package's
//! identity is its `purl` external reference: without one there is no
//! ecosystem to match advisories in, so such packages are counted in
//! `skipped`, except the document's own subject (the image), which is not a
//! dependency of itself.

use std::collections::BTreeSet;

use serde::Deserialize;

use crate::{Collector, Error, Inventory, Limits, Package, Purl, Source, json};

#[derive(Deserialize)]
pub(crate) struct Document {
    #[serde(rename = "spdxVersion")]
    spdx_version: String,
    name: Option<String>,
    #[serde(rename = "creationInfo")]
    creation_info: Option<CreationInfo>,
    #[serde(default)]
    packages: Vec<SpdxPackage>,
    #[serde(rename = "documentDescribes", default)]
    document_describes: Vec<String>,
    #[serde(default)]
    relationships: Vec<Relationship>,
}

#[derive(Deserialize)]
struct CreationInfo {
    #[serde(default)]
    creators: Vec<String>,
    created: Option<String>,
}

#[derive(Deserialize)]
struct SpdxPackage {
    #[serde(rename = "SPDXID")]
    spdx_id: Option<String>,
    name: Option<String>,
    #[serde(rename = "versionInfo")]
    version_info: Option<String>,
    #[serde(rename = "licenseConcluded")]
    license_concluded: Option<String>,
    #[serde(rename = "licenseDeclared")]
    license_declared: Option<String>,
    #[serde(rename = "externalRefs", default)]
    external_refs: Vec<ExternalRef>,
}

#[derive(Deserialize)]
struct ExternalRef {
    #[serde(rename = "referenceType")]
    reference_type: Option<String>,
    #[serde(rename = "referenceLocator")]
    reference_locator: Option<String>,
}

#[derive(Deserialize)]
struct Relationship {
    #[serde(rename = "spdxElementId")]
    element: Option<String>,
    #[serde(rename = "relationshipType")]
    relationship_type: Option<String>,
    #[serde(rename = "relatedSpdxElement")]
    related: Option<String>,
}

const CONTEXT: &str = "in the SPDX document";

pub(crate) fn from_bytes(bytes: &[u8], limits: &Limits) -> Result<Document, Error> {
    json::from_slice(bytes, "SPDX document", limits.max_depth)
}

/// SPDX's "no value" words, which are not licenses or versions.
fn meaningful(value: Option<String>) -> Option<String> {
    value
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty() && v != "NOASSERTION" && v != "NONE")
}

pub(crate) fn parse(doc: Document, limits: &Limits) -> Result<Inventory, Error> {
    let format = match doc.spdx_version.as_str() {
        "SPDX-2.2" => "spdx-2.2",
        "SPDX-2.3" => "spdx-2.3",
        other => {
            return Err(Error::NotSbom {
                reason: format!("spdxVersion {:?}", other.chars().take(64).collect::<String>()),
            });
        }
    };
    let mut out = Collector::new(limits, "SPDX document");
    out.count(doc.packages.len())?;

    // The document's subjects: named in documentDescribes (2.2) or by
    // DOCUMENT DESCRIBES relationships (2.3).
    let mut roots: BTreeSet<&str> = doc.document_describes.iter().map(String::as_str).collect();
    for rel in &doc.relationships {
        if rel.element.as_deref() == Some("SPDXRef-DOCUMENT")
            && rel.relationship_type.as_deref() == Some("DESCRIBES")
            && let Some(related) = &rel.related
        {
            roots.insert(related);
        }
    }

    for pkg in &doc.packages {
        let is_root = pkg.spdx_id.as_deref().is_some_and(|id| roots.contains(id));
        let purl_ref = pkg.external_refs.iter().find(|r| {
            r.reference_type
                .as_deref()
                .is_some_and(|t| t.eq_ignore_ascii_case("purl"))
        });
        let Some(locator) = purl_ref.and_then(|r| r.reference_locator.as_deref()) else {
            if !is_root {
                out.skip();
            }
            continue;
        };
        limits.check_field(CONTEXT, "purl", locator)?;
        let name = meaningful(pkg.name.clone());
        let version = meaningful(pkg.version_info.clone());
        let license = meaningful(pkg.license_concluded.clone()).or_else(|| meaningful(pkg.license_declared.clone()));
        for (field, value) in [
            ("package name", &name),
            ("package version", &version),
            ("license", &license),
        ] {
            if let Some(v) = value {
                limits.check_field(CONTEXT, field, v)?;
            }
        }
        let Ok(mut purl) = Purl::parse(locator) else {
            out.skip();
            continue;
        };
        if purl.version.is_none() {
            purl.version = version.clone();
        }
        let Some(version) = purl.version.clone() else {
            out.skip();
            continue;
        };
        let name = name.unwrap_or_else(|| purl.name.clone());
        out.push(Package::from_purl(&purl, name, version, license, Source::Spdx, None))?;
    }

    let (tool, generated_at) = match doc.creation_info {
        Some(info) => {
            let tools: Vec<&str> = info
                .creators
                .iter()
                .filter_map(|c| c.strip_prefix("Tool:"))
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .collect();
            ((!tools.is_empty()).then(|| tools.join(", ")), info.created)
        }
        None => (None, None),
    };
    for (field, value) in [
        ("tool", &tool),
        ("creation time", &generated_at),
        ("document name", &doc.name),
    ] {
        if let Some(v) = value {
            limits.check_field(CONTEXT, field, v)?;
        }
    }
    Ok(Inventory {
        format: Some(format.to_owned()),
        tool,
        generated_at,
        name: doc.name,
        ..out.finish()
    })
}
