//! Advisory-schema YAML (`<package>.advisories.yaml`, one file per origin
//! package) into an `ImportDocument` (proto JSON of the v1 API).
//!
//! Every `data` key of every event type lives in one struct of strings, read
//! in one pass from the text: a plain scalar such as `1.10` stays the string
//! it was written as (a detour through a YAML value would make it the number
//! 1.1).

use serde::Deserialize;
use serde_json::{Map, Value, json};
use ward_proto::Timestamp;

use super::import::Rejection;
use super::kinds::{EventKind, FpType};

#[derive(Deserialize)]
struct SchemaFile {
    package: Package,
    advisories: Option<Vec<SchemaAdvisory>>,
}

#[derive(Deserialize)]
struct Package {
    name: String,
}

#[derive(Deserialize)]
struct SchemaAdvisory {
    id: String,
    aliases: Option<Vec<String>>,
    events: Option<Vec<SchemaEvent>>,
}

#[derive(Deserialize)]
struct SchemaEvent {
    timestamp: String,
    #[serde(rename = "type")]
    kind: String,
    data: Option<EventData>,
}

/// `data` of any event type.
#[derive(Default, Deserialize)]
struct EventData {
    /// The detection type (`scan/v1`, `nvdapi`, `manual`) or the false-positive type.
    #[serde(rename = "type")]
    kind: Option<String>,
    /// A detection's own data.
    data: Option<DetectionData>,
    #[serde(rename = "fixed-version")]
    fixed_version: Option<String>,
    note: Option<String>,
}

/// `scan/v1` and `nvdapi` detection data.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DetectionData {
    subpackage_name: Option<String>,
    #[serde(rename = "componentID", alias = "componentId")]
    component_id: Option<String>,
    component_name: Option<String>,
    component_version: Option<String>,
    component_type: Option<String>,
    component_location: Option<String>,
    scanner: Option<String>,
    cpe_searched: Option<String>,
    cpe_found: Option<String>,
}

/// The first scan's findings that describe the advisory itself.
struct Scan {
    subpackage: String,
    component_name: String,
    component_type: String,
    component_location: String,
}

fn s(v: Option<String>) -> String {
    v.unwrap_or_default()
}

/// The `ImportDocument` of one advisory-schema file, and the advisories in
/// it that could not be read (the rest are imported: one bad advisory does
/// not cost the file its others).
pub fn document(source: &str, text: &str) -> Result<(Value, Vec<Rejection>), Rejection> {
    let file: SchemaFile =
        yaml_serde::from_str(text).map_err(|e| Rejection::file(format!("not an advisory-schema document: {e}")))?;
    let package = file.package.name;
    if package.trim().is_empty() {
        return Err(Rejection::file("package.name is empty".into()));
    }
    let mut advisories = Vec::new();
    let mut rejected = Vec::new();
    for a in file.advisories.unwrap_or_default() {
        match advisory(&package, a) {
            Ok(v) => advisories.push(v),
            Err(r) => rejected.push(r),
        }
    }
    Ok((
        json!({"source": source, "package": package, "advisories": advisories}),
        rejected,
    ))
}

/// One advisory: the artifact and component come from its first `scan/v1`
/// detection, else the artifact is the origin package.
fn advisory(package: &str, adv: SchemaAdvisory) -> Result<Value, Rejection> {
    let mut scan: Option<Scan> = None;
    let mut events = Vec::new();
    for e in adv.events.unwrap_or_default() {
        let (ev, found) = event(e).map_err(|reason| Rejection {
            advisory_id: adv.id.clone(),
            reason,
        })?;
        if scan.is_none() {
            scan = found;
        }
        events.push(ev);
    }
    let mut out = Map::new();
    out.insert("advisoryId".into(), adv.id.clone().into());
    out.insert("aliases".into(), adv.aliases.unwrap_or_default().into());
    let artifact = scan
        .as_ref()
        .map(|s| s.subpackage.as_str())
        .filter(|s| !s.is_empty())
        .unwrap_or(package);
    out.insert("artifactName".into(), artifact.into());
    out.insert("artifactType".into(), "apk".into());
    out.insert("artifactArchitecture".into(), "".into());
    if let Some(s) = scan {
        out.insert("componentName".into(), s.component_name.into());
        out.insert("componentType".into(), s.component_type.into());
        out.insert("componentLocation".into(), s.component_location.into());
    }
    out.insert("events".into(), events.into());
    Ok(Value::Object(out))
}

/// One event as a v1 `AdvisoryEvent`, and the scan it reports, if any.
fn event(e: SchemaEvent) -> Result<(Value, Option<Scan>), String> {
    if serde_json::from_value::<Timestamp>(Value::String(e.timestamp.clone())).is_err() {
        return Err(format!("event time {:?} is not an RFC 3339 time", e.timestamp));
    }
    let kind = EventKind::from_schema(&e.kind).ok_or_else(|| format!("unknown event type {:?}", e.kind))?;
    let data = e.data.unwrap_or_default();
    let note = s(data.note);
    let mut scan = None;
    let payload = match kind {
        EventKind::Detection => {
            let d = data.data.unwrap_or_default();
            match data.kind.as_deref().unwrap_or("manual") {
                "scan/v1" => {
                    let found = Scan {
                        subpackage: d.subpackage_name.clone().unwrap_or_default(),
                        component_name: d.component_name.clone().unwrap_or_default(),
                        component_type: d.component_type.clone().unwrap_or_default(),
                        component_location: d.component_location.clone().unwrap_or_default(),
                    };
                    let v1 = json!({"scanv1": {
                        "subpackageName": s(d.subpackage_name),
                        "componentId": s(d.component_id),
                        "componentName": s(d.component_name),
                        "componentVersion": s(d.component_version),
                        "componentType": s(d.component_type),
                        "componentLocation": s(d.component_location),
                        "scanner": s(d.scanner),
                    }});
                    scan = Some(found);
                    v1
                }
                "nvdapi" => json!({"nvdapi": {"cpeSearched": s(d.cpe_searched), "cpeFound": s(d.cpe_found)}}),
                "manual" | "" => json!({"manual": {}}),
                other => return Err(format!("unknown detection type {other:?}")),
            }
        }
        EventKind::Fixed => json!({"fixedVersion": s(data.fixed_version), "note": note}),
        EventKind::FalsePositive => {
            let named = s(data.kind);
            let fp = FpType::from_schema(&named).ok_or_else(|| {
                if named.is_empty() {
                    "a false-positive-determination without a type".to_owned()
                } else {
                    format!("unknown false-positive type {named:?}")
                }
            })?;
            json!({"type": fp.v1_name(), "note": note})
        }
        EventKind::TruePositive
        | EventKind::PendingUpstreamFix
        | EventKind::FixNotPlanned
        | EventKind::AnalysisNotPlanned => json!({"note": note}),
        EventKind::Patched => return Err("unknown event type \"patched\"".into()),
    };
    let mut ev = Map::new();
    ev.insert("timestamp".into(), e.timestamp.into());
    ev.insert(kind.json_key().into(), payload);
    Ok((Value::Object(ev), scan))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"
schema-version: "2.0.2"
package:
  name: sample
advisories:
  - id: CGA-3g3j-8396-2m48
    aliases:
      - CVE-2024-12345
    events:
      - timestamp: 2024-05-01T10:00:00Z
        type: detection
        data:
          type: scan/v1
          data:
            subpackageName: sample-tools
            componentID: 4d2f0c1e9a7b3c55
            componentName: github.com/example/lib
            componentVersion: 1.10
            componentType: go-module
            componentLocation: /usr/bin/sample-tool
            scanner: grype
      - timestamp: 2024-05-02T10:00:00Z
        type: false-positive-determination
        data:
          type: inline-mitigations-exist
          note: Guarded by a length check.
      - timestamp: 2024-05-03T10:00:00Z
        type: true-positive-determination
  - id: CGA-5v4q-653x-xxff
    aliases: []
    events:
      - timestamp: 2024-06-01T10:00:00Z
        type: detection
        data:
          type: nvdapi
          data:
            cpeSearched: cpe:2.3:a:example:sample:*:*:*:*:*:*:*:*
            cpeFound: cpe:2.3:a:example:sample:1.0:*:*:*:*:*:*:*
      - timestamp: 2024-06-02T10:00:00Z
        type: fixed
        data:
          fixed-version: 1.0.1-r0
"#;

    #[test]
    fn maps_onto_an_import_document() {
        let (doc, rejected) = document("sample.advisories.yaml", DOC).unwrap();
        assert!(rejected.is_empty());
        assert_eq!(doc["package"], "sample");
        let a = &doc["advisories"][0];
        assert_eq!(a["artifactName"], "sample-tools");
        assert_eq!(a["componentName"], "github.com/example/lib");
        assert_eq!(a["componentLocation"], "/usr/bin/sample-tool");
        let scan = &a["events"][0]["detection"]["scanv1"];
        assert_eq!(scan["componentVersion"], "1.10", "kept as written");
        assert_eq!(scan["componentId"], "4d2f0c1e9a7b3c55");
        assert_eq!(
            a["events"][1]["falsePositiveDetermination"]["type"],
            "INLINE_MITIGATIONS_EXIST"
        );
        assert_eq!(a["events"][2]["truePositiveDetermination"], json!({"note": ""}));
        let b = &doc["advisories"][1];
        assert_eq!(b["artifactName"], "sample");
        assert!(b.get("componentName").is_none());
        assert_eq!(b["events"][1]["fixed"]["fixedVersion"], "1.0.1-r0");
        // The server's own type takes it.
        let typed: ward_proto::vulnerabilities::v1::ImportDocument = serde_json::from_value(doc).unwrap();
        assert_eq!(typed.advisories.len(), 2);
    }

    #[test]
    fn problems_are_rejections_not_crashes() {
        let broken = document("x.yaml", "package: [unclosed").unwrap_err();
        assert!(broken.advisory_id.is_empty() && broken.reason.starts_with("not an advisory-schema document"));
        let unknown = DOC.replace("type: true-positive-determination", "type: exploded");
        // One bad advisory is refused; the file's others are kept.
        let (doc, rejected) = document("x.yaml", &unknown).unwrap();
        let r = &rejected[0];
        assert_eq!(
            (r.advisory_id.as_str(), r.reason.as_str()),
            ("CGA-3g3j-8396-2m48", "unknown event type \"exploded\"")
        );
        assert_eq!(doc["advisories"].as_array().map(Vec::len), Some(1));
        let fp = DOC.replace("inline-mitigations-exist", "it-just-is");
        assert!(document("x.yaml", &fp).unwrap().1[0].reason.contains("it-just-is"));
        let time = DOC.replace("2024-06-02T10:00:00Z", "last tuesday");
        assert!(document("x.yaml", &time).unwrap().1[0].reason.contains("RFC 3339"));
    }

    /// Every fixture the CLI tests import maps cleanly.
    #[test]
    fn the_fixtures_map() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../ward/tests/fixtures/advisories");
        let mut advisories = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.to_string_lossy().ends_with(".advisories.yaml") {
                let text = std::fs::read_to_string(&path).unwrap();
                let (doc, rejected) = document(&path.display().to_string(), &text).unwrap();
                assert!(rejected.is_empty(), "{}", path.display());
                advisories += doc["advisories"].as_array().unwrap().len();
                serde_json::from_value::<ward_proto::vulnerabilities::v1::ImportDocument>(doc).unwrap();
            }
        }
        assert_eq!(advisories, 12);
    }
}
