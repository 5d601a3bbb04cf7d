//! What the CLI prints of advisories and events, read from the proto JSON the
//! server sends: the v2 read API (`uid`, `createTime`, `reviewState`) or the
//! v1 write API (`id`, `timestamp`, `status`). Both name the event payloads
//! alike, so one reader serves both.
//!
//! An advisory's status is the type of its latest *approved* event by time
//! ("unreviewed" when none is approved), in words; `fixed` carries its version.

use std::fmt::Write as _;

use serde_json::Value;
use ward_proto::Timestamp;

use super::kinds::{EventKind, fp_words, review_words};
use crate::{Format, output};

/// Table columns of advisories, matching [`row`].
pub const HEADER: &[&str] = &["ID", "PACKAGE", "COMPONENT", "ALIASES", "STATUS"];

/// A string field; "" when absent or not a string.
pub fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The first of `keys` that is a non-empty string (the v2 name, then v1's).
fn either<'a>(v: &'a Value, keys: &[&str]) -> &'a str {
    keys.iter().map(|k| text(v, k)).find(|s| !s.is_empty()).unwrap_or("")
}

/// A list of strings; empty when absent.
pub fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The non-empty `parts`, joined by `sep`.
fn join(parts: &[&str], sep: &str) -> String {
    parts
        .iter()
        .filter(|p| !p.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(sep)
}

/// `main; note`, with the note's runs of whitespace (newlines) made one space.
fn with_note(main: &str, note: &str) -> String {
    let note = note.split_whitespace().collect::<Vec<_>>().join(" ");
    join(&[main, &note], "; ")
}

/// One event as the CLI shows it.
pub struct EventView {
    pub uid: String,
    /// As the server wrote it (RFC 3339).
    pub time: String,
    /// Milliseconds since the epoch, for ordering.
    at: Option<i64>,
    pub kind: Option<EventKind>,
    /// The advisory-schema type name (also for types the CLI has no flag for).
    pub label: &'static str,
    /// The payload in brief: fixed version, note, false-positive type, scanner finding.
    pub detail: String,
    fixed_version: String,
    pub author: String,
    pub reviewer: String,
    /// "pending", "approved", "request changes", "rejected", or "".
    pub review: String,
    /// The linked issue, if any.
    pub issue: String,
}

impl EventView {
    pub fn parse(ev: &Value) -> Self {
        let time = either(ev, &["createTime", "timestamp"]).to_owned();
        let at = serde_json::from_value::<Timestamp>(Value::String(time.clone()))
            .ok()
            .map(|t| t.to_millis());
        let (kind, label, detail, fixed_version) = payload(ev);
        Self {
            uid: either(ev, &["uid", "id"]).to_owned(),
            time,
            at,
            kind,
            label,
            detail,
            fixed_version,
            author: text(ev, "author").to_owned(),
            reviewer: text(ev, "reviewer").to_owned(),
            review: review_words(ev.get("reviewState").or_else(|| ev.get("status"))),
            issue: text(ev, "issue").to_owned(),
        }
    }

    pub fn approved(&self) -> bool {
        self.review == "approved"
    }

    /// The advisory status this event gives when it is the latest approved one.
    pub fn status(&self) -> String {
        match self.kind {
            Some(EventKind::Fixed) if !self.fixed_version.is_empty() => format!("fixed {}", self.fixed_version),
            Some(k) => k.status_word().to_owned(),
            None => self.label.replace('-', " "),
        }
    }

    /// "approved by X", "pending", "not reviewed"…
    fn review_text(&self) -> String {
        match (self.review.as_str(), self.reviewer.as_str()) {
            ("", _) => "not reviewed".into(),
            (state, "") => state.to_owned(),
            (state, who) => format!("{state} by {who}"),
        }
    }
}

/// The event type, its label, the payload in brief, and the fixed version.
fn payload(ev: &Value) -> (Option<EventKind>, &'static str, String, String) {
    for kind in EventKind::ALL {
        if let Some(p) = ev.get(kind.json_key()).filter(|p| p.is_object()) {
            let note = text(p, "note");
            let (detail, fixed) = match kind {
                EventKind::Detection => (detection(p), String::new()),
                EventKind::Fixed => (
                    with_note(text(p, "fixedVersion"), note),
                    text(p, "fixedVersion").to_owned(),
                ),
                EventKind::FalsePositive => (with_note(&fp_words(p.get("type")), note), String::new()),
                EventKind::Patched => (
                    with_note(&strings(p, "patchedVersions").join(", "), note),
                    String::new(),
                ),
                _ => (with_note("", note), String::new()),
            };
            return (Some(kind), kind.schema_name(), detail, fixed);
        }
    }
    if let Some(p) = ev.get("componentLocationChanged").filter(|p| p.is_object()) {
        let moved = format!("{} -> {}", text(p, "previousLocation"), text(p, "newLocation"));
        return (
            None,
            "component-location-changed",
            with_note(&moved, text(p, "note")),
            String::new(),
        );
    }
    (None, "unknown", String::new(), String::new())
}

/// `scan/v1 grype: stdlib 1.22.5 (go-module) at /usr/bin/app in app-sub`,
/// `nvdapi: cpe:2.3:…`, `manual`.
fn detection(p: &Value) -> String {
    if let Some(s) = p.get("scanv1").filter(|s| s.is_object()) {
        let mut out = join(&["scan/v1", text(s, "scanner")], " ");
        let component = join(
            &[either(s, &["component", "componentName"]), text(s, "componentVersion")],
            " ",
        );
        if !component.is_empty() {
            let _ = write!(out, ": {component}");
        }
        let kind = text(s, "componentType");
        if !kind.is_empty() {
            let _ = write!(out, " ({kind})");
        }
        let location = text(s, "componentLocation");
        if !location.is_empty() {
            let _ = write!(out, " at {location}");
        }
        let sub = either(s, &["subpackage", "subpackageName"]);
        if !sub.is_empty() {
            let _ = write!(out, " in {sub}");
        }
        return out;
    }
    if let Some(n) = p.get("nvdapi").filter(|n| n.is_object()) {
        return join(&["nvdapi", either(n, &["cpeFound", "cpeSearched"])], ": ");
    }
    if p.get("manual").is_some() {
        return "manual".into();
    }
    String::new()
}

/// The advisory's events, oldest first.
pub fn events(adv: &Value) -> Vec<EventView> {
    let mut events: Vec<EventView> = adv
        .get("events")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(EventView::parse).collect())
        .unwrap_or_default();
    // Stable: events at the same instant keep the server's order.
    events.sort_by_key(|e| e.at);
    events
}

fn deleted(adv: &Value) -> bool {
    ["deleteTime", "deletedAt"]
        .iter()
        .any(|k| adv.get(*k).is_some_and(|v| !v.is_null()))
}

/// The status of an advisory: its latest approved event's, in words.
pub fn status(adv: &Value) -> String {
    let events = events(adv);
    // `max_by_key` keeps the last of equals: the later of two at one instant.
    let status = events
        .iter()
        .filter(|e| e.approved())
        .max_by_key(|e| e.at)
        .map_or_else(|| "unreviewed".to_owned(), EventView::status);
    if deleted(adv) {
        format!("{status} (deleted)")
    } else {
        status
    }
}

/// Whether the advisory is resolved at apk version `version` (reference
/// §7.1): its latest approved event says not affected, no fix or analysis
/// planned, pending upstream, patched, or fixed at or below `version`.
pub fn resolved_at(adv: &Value, version: &str) -> anyhow::Result<bool> {
    ward_core::apk::parse(version).map_err(|e| anyhow::anyhow!("{}", e.message()))?;
    let events = events(adv);
    let Some(latest) = events.iter().filter(|e| e.approved()).max_by_key(|e| e.at) else {
        return Ok(false);
    };
    let Some(kind) = latest
        .kind
        .and_then(|k| ward_core::advisory::EventKind::from_schema_name(k.schema_name()))
    else {
        return Ok(false);
    };
    let fixed = (!latest.fixed_version.is_empty()).then_some(latest.fixed_version.as_str());
    Ok(ward_core::advisory::resolved_at(kind, fixed, version))
}

/// The CGA id, else the legacy id.
pub fn advisory_id(adv: &Value) -> &str {
    either(adv, &["advisoryId", "legacyAdvisoryId", "legacyAdvisoryID"])
}

pub fn row(adv: &Value) -> Vec<String> {
    vec![
        advisory_id(adv).to_owned(),
        text(adv, "artifactName").to_owned(),
        text(adv, "componentName").to_owned(),
        strings(adv, "aliases").join(", "),
        status(adv),
    ]
}

/// Advisories as a table or a JSON array (as the server sent them).
pub fn show(format: Format, advisories: &[Value]) -> anyhow::Result<()> {
    match format {
        Format::Json => output::json(&advisories),
        Format::Table => {
            output::table(HEADER, advisories.iter().map(row).collect());
            Ok(())
        }
    }
}

/// One advisory as a one-row table or a JSON object.
pub fn show_one(format: Format, adv: &Value) -> anyhow::Result<()> {
    match format {
        Format::Json => output::json(adv),
        Format::Table => show(format, std::slice::from_ref(adv)),
    }
}

/// The timeline: one line per event, oldest first, time and type aligned.
pub fn timeline(events: &[EventView]) -> Vec<String> {
    let time_width = events.iter().map(|e| e.time.len()).max().unwrap_or(0);
    let label_width = events.iter().map(|e| e.label.len()).max().unwrap_or(0);
    events
        .iter()
        .map(|e| {
            let mut parts = vec![format!("{:<time_width$}", e.time), format!("{:<label_width$}", e.label)];
            if !e.detail.is_empty() {
                parts.push(e.detail.clone());
            }
            if !e.author.is_empty() {
                parts.push(format!("by {}", e.author));
            }
            parts.push(e.review_text());
            if !e.issue.is_empty() {
                parts.push(format!("issue {}", e.issue));
            }
            if !e.uid.is_empty() {
                parts.push(format!("[{}]", e.uid));
            }
            format!("  {}", parts.join("  "))
        })
        .collect()
}

/// Events as timeline lines or a JSON array.
pub fn show_events(format: Format, events: &[Value]) -> anyhow::Result<()> {
    match format {
        Format::Json => output::json(&events),
        Format::Table => {
            let mut views: Vec<EventView> = events.iter().map(EventView::parse).collect();
            views.sort_by_key(|e| e.at);
            for l in timeline(&views) {
                output::line(&l);
            }
            Ok(())
        }
    }
}

/// One event as a timeline line or a JSON object.
pub fn show_event(format: Format, event: &Value) -> anyhow::Result<()> {
    match format {
        Format::Json => output::json(event),
        Format::Table => show_events(format, std::slice::from_ref(event)),
    }
}

/// `describe`: the advisory's fields, then its timeline.
/// The flags an import left on the advisory, under the fields.
pub fn describe_flags(flags: &[Value]) {
    if flags.is_empty() {
        return;
    }
    output::line("Flags:");
    for f in flags {
        output::line(&format!(
            "  {} {}: {}",
            text(f, "code"),
            text(f, "field"),
            text(f, "detail")
        ));
    }
}

pub fn describe(adv: &Value) {
    let severities: Vec<String> = adv
        .get("severities")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|s| {
            let kind = text(s, "type");
            join(&[kind.strip_prefix("TYPE_").unwrap_or(kind), text(s, "score")], " ")
        })
        .collect();
    let fields: Vec<(&str, String)> = vec![
        ("UID:", either(adv, &["uid", "id"]).to_owned()),
        ("ID:", text(adv, "advisoryId").to_owned()),
        (
            "Legacy ID:",
            either(adv, &["legacyAdvisoryId", "legacyAdvisoryID"]).to_owned(),
        ),
        ("Package:", text(adv, "artifactName").to_owned()),
        ("Type:", text(adv, "artifactType").to_owned()),
        ("Architecture:", text(adv, "artifactArchitecture").to_owned()),
        ("Component:", text(adv, "componentName").to_owned()),
        ("Component type:", text(adv, "componentType").to_owned()),
        ("Location:", text(adv, "componentLocation").to_owned()),
        ("Aliases:", strings(adv, "aliases").join(", ")),
        ("Severities:", severities.join(", ")),
        ("Status:", status(adv)),
        ("Author:", text(adv, "author").to_owned()),
        ("Created:", either(adv, &["createTime", "createdAt"]).to_owned()),
        ("Updated:", either(adv, &["updateTime", "updatedAt"]).to_owned()),
        ("Deleted:", either(adv, &["deleteTime", "deletedAt"]).to_owned()),
    ];
    let width = fields.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in fields.iter().filter(|(_, v)| !v.is_empty()) {
        output::line(&format!("{k:<width$}  {v}"));
    }
    let events = events(adv);
    output::line("");
    if events.is_empty() {
        output::line("Events: none");
        return;
    }
    output::line("Events:");
    for l in timeline(&events) {
        output::line(&l);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v2_event(time: &str, state: &str, payload: Value) -> Value {
        let mut e = json!({"uid": "e", "createTime": time, "author": "a", "reviewer": "r", "reviewState": state});
        if let (Some(e), Some(p)) = (e.as_object_mut(), payload.as_object()) {
            e.extend(p.clone());
        }
        e
    }

    #[test]
    fn status_is_the_latest_approved_event() {
        let adv = json!({"advisoryId": "CGA-3g3j-8396-2m48", "events": [
            v2_event("2024-05-01T00:00:00.000Z", "REVIEW_STATE_APPROVED", json!({"detection": {"manual": {}}})),
            v2_event("2024-05-03T00:00:00.000Z", "REVIEW_STATE_APPROVED", json!({"fixed": {"fixedVersion": "1.2.3-r1"}})),
            v2_event("2024-05-02T00:00:00.000Z", "REVIEW_STATE_APPROVED", json!({"truePositiveDetermination": {}})),
            v2_event("2024-05-04T00:00:00.000Z", "REVIEW_STATE_PENDING", json!({"fixNotPlanned": {"note": "eol"}})),
        ]});
        assert_eq!(status(&adv), "fixed 1.2.3-r1");
        let none =
            json!({"events": [v2_event("2024-05-04T00:00:00.000Z", "REVIEW_STATE_PENDING", json!({"fixed": {}}))]});
        assert_eq!(status(&none), "unreviewed");
        let fp = json!({"deleteTime": "2024-06-01T00:00:00.000Z", "events": [v2_event("2024-05-04T00:00:00.000Z", "REVIEW_STATE_APPROVED",
            json!({"falsePositiveDetermination": {"type": "TYPE_INLINE_MITIGATIONS_EXIST"}}))]});
        assert_eq!(status(&fp), "not affected (deleted)");
    }

    #[test]
    fn timeline_orders_and_describes_events() {
        let adv = json!({"events": [
            v2_event("2024-05-02T00:00:00.000Z", "REVIEW_STATE_PENDING", json!({"falsePositiveDetermination": {"type": "TYPE_VULNERABLE_CODE_NOT_IN_EXECUTION_PATH", "note": "not\nreached"}})),
            v2_event("2024-05-01T00:00:00.000Z", "REVIEW_STATE_APPROVED", json!({"detection": {"scanv1": {"scanner": "grype", "component": "stdlib", "componentVersion": "1.22.5", "componentType": "go-module", "componentLocation": "/usr/bin/app", "subpackage": "app"}}})),
        ]});
        let lines = timeline(&events(&adv));
        assert_eq!(lines.len(), 2);
        assert!(
            lines[0].starts_with("  2024-05-01T00:00:00.000Z  detection  "),
            "{lines:?}"
        );
        assert!(
            lines[0].contains("scan/v1 grype: stdlib 1.22.5 (go-module) at /usr/bin/app in app"),
            "{lines:?}"
        );
        assert!(lines[0].contains("by a  approved by r  [e]"), "{lines:?}");
        assert!(
            lines[1].contains("false-positive-determination  vulnerable-code-not-in-execution-path; not reached"),
            "{lines:?}"
        );
        assert!(lines[1].contains("pending by r"), "{lines:?}");
        // A linked issue is shown before the uid.
        let mut with_issue = adv.clone();
        with_issue["events"][0]["issue"] = json!("https://tracker.example/1");
        let lines = timeline(&events(&with_issue));
        assert!(lines[1].contains("issue https://tracker.example/1  [e]"), "{lines:?}");
    }

    #[test]
    fn v1_events_read_alike() {
        let ev = json!({"id": "x", "timestamp": "2024-05-01T00:00:00.000Z", "status": "APPROVED", "fixed": {"fixedVersion": "2.0.0-r0"}});
        let v = EventView::parse(&ev);
        assert_eq!(
            (v.uid.as_str(), v.approved(), v.status()),
            ("x", true, "fixed 2.0.0-r0".to_owned())
        );
    }
}
