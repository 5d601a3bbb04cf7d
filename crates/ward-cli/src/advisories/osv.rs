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

/// The string fields of an OSV record, read from YAML as their text. YAML
/// reads a plain `1.10` as the number 1.1 and `0x10` as 16; OSV's versions,
/// ids and times are strings, so they are taken as written and laid over
/// the generic conversion. Unknown fields are not read here.
#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct YamlStrings {
    id: Option<String>,
    modified: Option<String>,
    published: Option<String>,
    withdrawn: Option<String>,
    schema_version: Option<String>,
    summary: Option<String>,
    details: Option<String>,
    aliases: Option<Vec<String>>,
    related: Option<Vec<String>>,
    upstream: Option<Vec<String>>,
    affected: Option<Vec<YamlAffected>>,
    severity: Option<Vec<YamlSeverity>>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct YamlAffected {
    package: Option<YamlPackage>,
    ranges: Option<Vec<YamlRange>>,
    versions: Option<Vec<String>>,
    severity: Option<Vec<YamlSeverity>>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct YamlPackage {
    ecosystem: Option<String>,
    name: Option<String>,
    purl: Option<String>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct YamlRange {
    #[serde(rename = "type")]
    kind: Option<String>,
    repo: Option<String>,
    events: Option<Vec<std::collections::BTreeMap<String, String>>>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct YamlSeverity {
    #[serde(rename = "type")]
    kind: Option<String>,
    score: Option<String>,
}

/// Sets `v[key]` to `text` when the record has that key.
fn lay(v: &mut Value, key: &str, text: Option<String>) {
    if let (Some(t), Some(slot)) = (text, v.get_mut(key)) {
        *slot = Value::String(t);
    }
}

fn lay_list(v: &mut Value, key: &str, list: Option<Vec<String>>) {
    if let (Some(l), Some(slot)) = (list, v.get_mut(key)) {
        *slot = Value::Array(l.into_iter().map(Value::String).collect());
    }
}

fn lay_severity(v: &mut Value, list: Option<Vec<YamlSeverity>>) {
    for (s, slot) in list.unwrap_or_default().into_iter().zip(
        v.get_mut("severity")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten(),
    ) {
        lay(slot, "type", s.kind);
        lay(slot, "score", s.score);
    }
}

/// An OSV record in YAML as JSON: its structure by YAML's rules, its string
/// fields (ids, times, aliases, package names, range events, versions,
/// severity scores) exactly as written.
pub fn yaml_record(text: &str) -> Result<Value, Rejection> {
    let bad = |e: yaml_serde::Error| Rejection::file(format!("not an OSV record in YAML: {e}"));
    let mut v: Value = yaml_serde::from_str(text).map_err(bad)?;
    if !v.is_object() {
        return Err(Rejection::file("not an OSV record (a YAML mapping)".into()));
    }
    let s: YamlStrings = yaml_serde::from_str(text).map_err(bad)?;
    for (key, text) in [
        ("id", s.id),
        ("modified", s.modified),
        ("published", s.published),
        ("withdrawn", s.withdrawn),
        ("schema_version", s.schema_version),
        ("summary", s.summary),
        ("details", s.details),
    ] {
        lay(&mut v, key, text);
    }
    lay_list(&mut v, "aliases", s.aliases);
    lay_list(&mut v, "related", s.related);
    lay_list(&mut v, "upstream", s.upstream);
    lay_severity(&mut v, s.severity);
    let affected = v.get_mut("affected").and_then(Value::as_array_mut);
    for (a, slot) in s
        .affected
        .unwrap_or_default()
        .into_iter()
        .zip(affected.into_iter().flatten())
    {
        if let (Some(p), Some(pslot)) = (a.package, slot.get_mut("package")) {
            lay(pslot, "ecosystem", p.ecosystem);
            lay(pslot, "name", p.name);
            lay(pslot, "purl", p.purl);
        }
        lay_list(slot, "versions", a.versions);
        lay_severity(slot, a.severity);
        let ranges = slot.get_mut("ranges").and_then(Value::as_array_mut);
        for (r, rslot) in a
            .ranges
            .unwrap_or_default()
            .into_iter()
            .zip(ranges.into_iter().flatten())
        {
            lay(rslot, "type", r.kind);
            lay(rslot, "repo", r.repo);
            let events = rslot.get_mut("events").and_then(Value::as_array_mut);
            for (e, eslot) in r
                .events
                .unwrap_or_default()
                .into_iter()
                .zip(events.into_iter().flatten())
            {
                for (k, t) in e {
                    lay(eslot, &k, Some(t));
                }
            }
        }
    }
    Ok(v)
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

    #[test]
    fn yaml_strings_stay_as_written() {
        let text = [
            "id: PYSEC-Y1",
            "modified: 2023-06-05T16:25:53.09385Z",
            "aliases: [CVE-2023-1]",
            "affected:",
            "- package: {ecosystem: PyPI, name: 1.0}",
            "  ranges:",
            "  - type: ECOSYSTEM",
            "    events:",
            "    - introduced: 0",
            "    - fixed: 1.10",
            "    - last_affected: 2.0e1",
            "  versions: [1.0, 0x10, '2.0']",
            "database_specific: {count: 3}",
        ]
        .join("\n");
        let text = text.as_str();
        let v = yaml_record(text).unwrap();
        assert_eq!(v["modified"], "2023-06-05T16:25:53.09385Z");
        assert_eq!(v["affected"][0]["package"]["name"], "1.0");
        assert_eq!(
            v["affected"][0]["ranges"][0]["events"],
            json!([{"introduced": "0"}, {"fixed": "1.10"}, {"last_affected": "2.0e1"}])
        );
        assert_eq!(v["affected"][0]["versions"], json!(["1.0", "0x10", "2.0"]));
        assert_eq!(v["database_specific"]["count"], 3, "free-form fields by YAML's rules");
        assert!(yaml_record("- a\n- b\n").is_err());
    }

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
