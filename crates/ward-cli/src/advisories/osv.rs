//! An OSV document (one vulnerability in one package) into an
//! `ImportDocument` holding one advisory.
//!
//! A CGA id is the advisory's id; any other id is kept as its legacy id (the
//! server then gives it a CGA id). The history OSV keeps is thin: a manual
//! detection at `published`, and a `fixed` event at `modified` for each fixed
//! version of an ECOSYSTEM range.

use serde_json::{Map, Value, json};

use super::ids;
use super::import::Rejection;
use super::view::{strings, text};

/// The `arch` qualifier of a purl, e.g. `pkg:apk/chainguard/x?arch=aarch64`.
fn purl_arch(purl: &str) -> Option<&str> {
    let (_, qualifiers) = purl.split_once('?')?;
    let qualifiers = qualifiers.split('#').next().unwrap_or(qualifiers);
    qualifiers
        .split('&')
        .find_map(|kv| kv.strip_prefix("arch="))
        .filter(|a| !a.is_empty())
}

/// Pushes `v` unless it is there already.
fn push_new(list: &mut Vec<String>, v: &str) {
    if !list.iter().any(|x| x == v) {
        list.push(v.to_owned());
    }
}

/// Whether an OSV record describes Ward's own kind of advisory (an apk
/// package of the Chainguard or Wolfi ecosystem, or a CGA id): those become
/// advisories, with a review. Records of every other ecosystem are imported
/// as feed records, kept as published.
pub fn is_advisory(osv: &Value) -> bool {
    if ids::is_cga(text(osv, "id")) {
        return true;
    }
    let affected: &[Value] = osv
        .get("affected")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    !affected.is_empty()
        && affected.iter().all(|a| {
            let eco = a.get("package").map_or("", |p| text(p, "ecosystem"));
            let eco = eco.split(':').next().unwrap_or(eco);
            eco.eq_ignore_ascii_case("chainguard") || eco.eq_ignore_ascii_case("wolfi")
        })
}

/// The `ImportDocument` of one OSV file.
#[cfg(test)]
pub fn document(source: &str, raw: &str) -> Result<Value, Rejection> {
    let osv: Value = serde_json::from_str(raw).map_err(|e| Rejection::file(format!("not JSON: {e}")))?;
    document_of(source, &osv)
}

/// The `ImportDocument` of one parsed OSV record.
pub fn document_of(source: &str, osv: &Value) -> Result<Value, Rejection> {
    let osv = osv.clone();
    if !osv.is_object() {
        return Err(Rejection::file("not an OSV document (a JSON object)".into()));
    }
    let id = text(&osv, "id");
    if id.is_empty() {
        return Err(Rejection::file("an OSV document without an id".into()));
    }
    let reject = |reason: String| Rejection {
        advisory_id: id.to_owned(),
        reason,
    };

    let mut aliases = Vec::new();
    if ids::is_alias(id) {
        push_new(&mut aliases, id);
    }
    for a in strings(&osv, "aliases") {
        if ids::looks_like_alias(&a) {
            push_new(&mut aliases, &a);
        }
    }

    let affected: &[Value] = osv
        .get("affected")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut packages = Vec::new();
    for a in affected {
        let name = a.get("package").map_or("", |p| text(p, "name"));
        if !name.is_empty() {
            push_new(&mut packages, name);
        }
    }
    let package = match packages.as_slice() {
        [one] => one.clone(),
        [] => return Err(reject("`affected` names no package".into())),
        many => {
            return Err(reject(format!(
                "`affected` names {} packages ({}); one advisory covers one package",
                many.len(),
                many.join(", ")
            )));
        }
    };
    let arch = affected
        .iter()
        .filter_map(|a| a.get("package").map(|p| text(p, "purl")))
        .find_map(purl_arch)
        .unwrap_or("");

    let mut fixed = Vec::new();
    for range in affected.iter().filter_map(|a| a.get("ranges")?.as_array()).flatten() {
        if text(range, "type") != "ECOSYSTEM" {
            continue;
        }
        for ev in range.get("events").and_then(Value::as_array).into_iter().flatten() {
            let v = text(ev, "fixed");
            if !v.is_empty() {
                push_new(&mut fixed, v);
            }
        }
    }

    let modified = text(&osv, "modified");
    let published = Some(text(&osv, "published"))
        .filter(|p| !p.is_empty())
        .unwrap_or(modified);
    if published.is_empty() {
        return Err(reject("neither `published` nor `modified` is set".into()));
    }
    let mut events = vec![json!({"timestamp": published, "detection": {"manual": {}}})];
    if !fixed.is_empty() && modified.is_empty() {
        return Err(reject("fixed versions without a `modified` time".into()));
    }
    events.extend(
        fixed
            .iter()
            .map(|v| json!({"timestamp": modified, "fixed": {"fixedVersion": v}})),
    );

    let mut adv = Map::new();
    if ids::is_cga(id) {
        adv.insert("advisoryId".into(), id.into());
    } else {
        adv.insert("legacyAdvisoryID".into(), id.into());
    }
    adv.insert("aliases".into(), aliases.into());
    adv.insert("artifactName".into(), package.clone().into());
    adv.insert("artifactType".into(), "apk".into());
    adv.insert("artifactArchitecture".into(), arch.into());
    let component = affected
        .iter()
        .find_map(|a| a.get("ecosystem_specific")?.get("components")?.as_array()?.first());
    if let Some(c) = component {
        adv.insert("componentName".into(), text(c, "component_name").into());
        adv.insert("componentType".into(), text(c, "component_type").into());
        adv.insert("componentLocation".into(), text(c, "component_location").into());
    }
    adv.insert("events".into(), events.into());
    Ok(json!({"source": source, "package": package, "advisories": [adv]}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn osv(id: &str, affected: Value) -> String {
        json!({
            "schema_version": "1.6.0",
            "id": id,
            "aliases": ["CVE-2025-27761", "GHSA-qvw3-2c8h-mwv3", "DEBIAN-CVE-2025-27761"],
            "published": "2025-08-04T13:22:51Z",
            "modified": "2025-08-07T09:41:36Z",
            "affected": affected,
        })
        .to_string()
    }

    fn affected(name: &str, purl: &str) -> Value {
        json!({
            "package": {"ecosystem": "Chainguard", "name": name, "purl": purl},
            "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "2.4.1-r3"}]}],
            "ecosystem_specific": {"components": [{"component_name": "mdparse", "component_type": "go-module", "component_location": "/usr/bin/q"}]},
        })
    }

    #[test]
    fn a_cga_document() {
        let raw = osv(
            "CGA-f9gc-q67g-2rh6",
            json!([affected("quillmark", "pkg:apk/chainguard/quillmark?arch=x86_64")]),
        );
        let doc = document("CGA-f9gc-q67g-2rh6.json", &raw).unwrap();
        let a = &doc["advisories"][0];
        assert_eq!(a["advisoryId"], "CGA-f9gc-q67g-2rh6");
        assert_eq!(a["aliases"], json!(["CVE-2025-27761", "GHSA-qvw3-2c8h-mwv3"]));
        assert_eq!(
            (a["artifactName"].as_str(), a["artifactArchitecture"].as_str()),
            (Some("quillmark"), Some("x86_64"))
        );
        assert_eq!(a["componentName"], "mdparse");
        assert_eq!(
            a["events"],
            json!([
                {"timestamp": "2025-08-04T13:22:51Z", "detection": {"manual": {}}},
                {"timestamp": "2025-08-07T09:41:36Z", "fixed": {"fixedVersion": "2.4.1-r3"}},
            ])
        );
        serde_json::from_value::<ward_proto::vulnerabilities::v1::ImportDocument>(doc).unwrap();
    }

    #[test]
    fn other_ids_are_legacy_ids() {
        let raw = osv(
            "CVE-2025-27761",
            json!([affected("quillmark", "pkg:apk/chainguard/quillmark")]),
        );
        let doc = document("x.json", &raw).unwrap();
        let a = &doc["advisories"][0];
        assert!(a.get("advisoryId").is_none());
        assert_eq!(a["legacyAdvisoryID"], "CVE-2025-27761");
        assert_eq!(a["aliases"], json!(["CVE-2025-27761", "GHSA-qvw3-2c8h-mwv3"]));
        assert_eq!(a["artifactArchitecture"], "");
        let typed: ward_proto::vulnerabilities::v1::ImportDocument = serde_json::from_value(doc).unwrap();
        assert_eq!(typed.advisories.len(), 1);
    }

    #[test]
    fn two_packages_are_refused() {
        let raw = osv(
            "CGA-f9gc-q67g-2rh6",
            json!([
                affected("a", "pkg:apk/chainguard/a"),
                affected("b", "pkg:apk/chainguard/b")
            ]),
        );
        let r = document("x.json", &raw).unwrap_err();
        assert_eq!(r.advisory_id, "CGA-f9gc-q67g-2rh6");
        assert!(r.reason.contains("2 packages (a, b)"), "{}", r.reason);
        assert!(
            document("x.json", "{not json")
                .unwrap_err()
                .reason
                .starts_with("not JSON")
        );
    }
}
