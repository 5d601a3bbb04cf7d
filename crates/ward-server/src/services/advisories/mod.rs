//! Vulnerability advisories: what a security team decided about one
//! vulnerability in one artifact's component, as a history of events that a
//! second person reviews. Reads are the v2 `AdvisoriesService`; writes are
//! the v1 `Advisories` service, translated at the edge (`v1`) onto the v2
//! types this layer speaks. The status of an advisory is its latest
//! *approved* event; it is published as OSV (`osv`) and as the public
//! advisory feed.

pub mod feeds;
pub mod import;
pub mod lenient;
pub mod osv;
pub mod read;
pub mod v1;
pub mod write;

use sha2::{Digest as _, Sha256};
use ward_core::advisory::{EventKind, check_aliases, is_cga};
use ward_core::error::FieldViolation;
use ward_core::{Error, Result};
use ward_proto::Timestamp;
use ward_proto::vulnerabilities::v2::{Advisory, AdvisoryEvent, Severity, advisory_event};
use ward_store::advisories::{AdvisoryFields, AdvisoryRecord, EventRecord};

use crate::services::registry::{json_list, to_json_list};

/// Events may be dated at most this far ahead (clock skew between teams).
pub const MAX_FUTURE_MS: i64 = 2 * 60 * 60 * 1000;
/// Most events one advisory may be created or imported with.
pub const MAX_EVENTS: usize = 1000;
/// Longest note, name or other free text in an advisory, in bytes.
pub const MAX_TEXT: usize = 4096;
/// Longest component location (an advisory's, or a scan's): scanners list
/// every path a component was found at, and real advisories exceed
/// [`MAX_TEXT`] (the Wolfi corpus: up to about 10 KiB).
pub const MAX_LOCATION: usize = 64 * 1024;
/// Longest identifier-like field (artifact, component, type, architecture).
pub const MAX_NAME: usize = 512;
/// Largest `findings` payload of one event.
pub const MAX_FINDINGS: usize = 16 * 1024;
/// Most severities and patched versions one advisory or event may carry.
pub const MAX_LIST: usize = 100;

/// The kind of an event's payload.
pub fn kind_of(t: &advisory_event::Type) -> EventKind {
    use advisory_event::Type as T;
    match t {
        T::Detection(_) => EventKind::Detection,
        T::Fixed(_) => EventKind::Fixed,
        T::FalsePositiveDetermination(_) => EventKind::FalsePositiveDetermination,
        T::AnalysisNotPlanned(_) => EventKind::AnalysisNotPlanned,
        T::FixNotPlanned(_) => EventKind::FixNotPlanned,
        T::PendingUpstreamFix(_) => EventKind::PendingUpstreamFix,
        T::TruePositiveDetermination(_) => EventKind::TruePositiveDetermination,
        T::Patched(_) => EventKind::Patched,
    }
}

/// The event's payload (the oneof member only) as proto3 JSON, for storage.
pub(crate) fn payload_json(t: &advisory_event::Type) -> Result<String> {
    let ev = AdvisoryEvent {
        r#type: Some(t.clone()),
        ..Default::default()
    };
    let v = serde_json::to_value(&ev).map_err(Error::internal)?;
    let key = match t {
        advisory_event::Type::Detection(_) => "detection",
        advisory_event::Type::Fixed(_) => "fixed",
        advisory_event::Type::FalsePositiveDetermination(_) => "falsePositiveDetermination",
        advisory_event::Type::AnalysisNotPlanned(_) => "analysisNotPlanned",
        advisory_event::Type::FixNotPlanned(_) => "fixNotPlanned",
        advisory_event::Type::PendingUpstreamFix(_) => "pendingUpstreamFix",
        advisory_event::Type::TruePositiveDetermination(_) => "truePositiveDetermination",
        advisory_event::Type::Patched(_) => "patched",
    };
    let member = v.get(key).cloned().unwrap_or_default();
    Ok(serde_json::json!({ key: member }).to_string())
}

/// How a re-import recognises an event: its time, kind and payload.
pub(crate) fn fingerprint(event_time: i64, kind: EventKind, payload: &str) -> String {
    let mut h = Sha256::new();
    h.update(event_time.to_be_bytes());
    h.update(kind.filter_number().to_be_bytes());
    h.update(payload.as_bytes());
    hex::encode(h.finalize())
}

pub(crate) fn event_to_proto(e: EventRecord) -> AdvisoryEvent {
    // The payload was written by `payload_json`; a row that does not parse
    // (never expected) still shows its review fields.
    let mut ev: AdvisoryEvent = serde_json::from_str(&e.payload).unwrap_or_default();
    ev.uid = e.uid;
    ev.create_time = Some(Timestamp::from_millis(e.event_time));
    ev.findings = e.findings;
    ev.author = e.author;
    ev.reviewer = e.reviewer;
    ev.review_state = i32::try_from(e.review_state).unwrap_or_default();
    ev.issue = e.issue;
    ev
}

pub(crate) fn to_proto(a: AdvisoryRecord, events: Vec<EventRecord>) -> Advisory {
    let severities: Vec<Severity> = serde_json::from_str(&a.severities).unwrap_or_default();
    Advisory {
        uid: a.uid,
        advisory_id: a.advisory_id,
        create_time: Some(Timestamp::from_millis(a.create_time)),
        update_time: Some(Timestamp::from_millis(a.update_time)),
        delete_time: a.delete_time.map(Timestamp::from_millis),
        author: a.author,
        artifact_name: a.artifact_name,
        artifact_type: a.artifact_type,
        artifact_architecture: a.artifact_architecture,
        component_name: a.component_name,
        component_location: a.component_location,
        component_type: a.component_type,
        aliases: json_list(&a.aliases),
        events: events.into_iter().map(event_to_proto).collect(),
        legacy_advisory_id: a.legacy_advisory_id,
        severities,
    }
}

/// The advisory's own fields as stored.
pub(crate) fn fields_of(a: &Advisory) -> AdvisoryFields {
    AdvisoryFields {
        artifact_name: a.artifact_name.clone(),
        artifact_type: a.artifact_type.clone(),
        artifact_architecture: a.artifact_architecture.clone(),
        component_name: a.component_name.clone(),
        component_location: a.component_location.clone(),
        component_type: a.component_type.clone(),
        aliases: to_json_list(&a.aliases),
        severities: serde_json::to_string(&a.severities).unwrap_or_else(|_| "[]".into()),
    }
}

fn violation(bad: &mut Vec<FieldViolation>, field: impl Into<String>, description: impl Into<String>) {
    bad.push(FieldViolation {
        field: field.into(),
        description: description.into(),
    });
}

fn check_text(bad: &mut Vec<FieldViolation>, field: &str, value: &str, max: usize, required: bool) {
    if required && value.trim().is_empty() {
        violation(bad, field, format!("{field} is required"));
    } else {
        ward_core::names::check_text(field, value, max, bad);
    }
}

/// Notes are prose: line breaks and tabs are allowed, nothing else that
/// [`ward_core::names::is_forbidden_char`] refuses.
fn check_note(bad: &mut Vec<FieldViolation>, field: &str, value: &str) {
    if value.len() > MAX_TEXT {
        violation(bad, field, format!("{field} must be at most {MAX_TEXT} bytes"));
    } else if value
        .chars()
        .any(|c| !matches!(c, '\n' | '\r' | '\t') && ward_core::names::is_forbidden_char(c))
    {
        violation(
            bad,
            field,
            format!("{field} must not contain control, bidirectional-override or zero-width characters"),
        );
    }
}

/// Checks an advisory's own fields (not its events): every violation at once.
pub(crate) fn check_fields(a: &Advisory, prefix: &str, bad: &mut Vec<FieldViolation>) {
    let f = |name: &str| format!("{prefix}{name}");
    check_text(bad, &f("artifact_name"), &a.artifact_name, MAX_NAME, true);
    check_text(bad, &f("artifact_type"), &a.artifact_type, MAX_NAME, true);
    check_text(
        bad,
        &f("artifact_architecture"),
        &a.artifact_architecture,
        MAX_NAME,
        false,
    );
    check_text(bad, &f("component_name"), &a.component_name, MAX_NAME, false);
    check_text(
        bad,
        &f("component_location"),
        &a.component_location,
        MAX_LOCATION,
        false,
    );
    check_text(bad, &f("component_type"), &a.component_type, MAX_NAME, false);
    if !a.advisory_id.is_empty() && !is_cga(&a.advisory_id) {
        violation(
            bad,
            f("advisory_id"),
            format!(
                "\"{}\" is not a CGA id (CGA-xxxx-xxxx-xxxx from 23456789cfghjmpqrvwx)",
                ward_core::names::echo(&a.advisory_id)
            ),
        );
    }
    bad.extend(check_aliases(&a.advisory_id, &a.aliases, &f("aliases")));
    if a.severities.len() > MAX_LIST {
        violation(bad, f("severities"), format!("at most {MAX_LIST} severities"));
    }
    for (i, s) in a.severities.iter().enumerate() {
        check_text(bad, &f(&format!("severities[{i}].score")), &s.score, MAX_NAME, true);
    }
    if let Some(l) = &a.legacy_advisory_id {
        check_text(bad, &f("legacy_advisory_id"), l, MAX_NAME, false);
    }
}

/// Checks one event as written by a client; `now_ms` bounds its time. An
/// `imported` event may carry versions that do not order (kept as written,
/// flagged by [`lenient`], deciding nothing); they must still be safe text.
pub(crate) fn check_event(e: &AdvisoryEvent, field: &str, now_ms: i64, imported: bool, bad: &mut Vec<FieldViolation>) {
    use advisory_event::Type as T;
    match &e.create_time {
        None => violation(bad, format!("{field}.timestamp"), "the event's timestamp is required"),
        Some(t) if !t.is_valid() || t.to_millis() <= 0 => violation(
            bad,
            format!("{field}.timestamp"),
            "the event's timestamp must be a valid time after 1970-01-01T00:00:00Z",
        ),
        Some(t) if t.to_millis() > now_ms.saturating_add(MAX_FUTURE_MS) => violation(
            bad,
            format!("{field}.timestamp"),
            "the event's timestamp is more than 2 hours in the future",
        ),
        Some(_) => {}
    }
    if e.findings.len() > MAX_FINDINGS {
        violation(
            bad,
            format!("{field}.findings"),
            format!("findings are larger than {MAX_FINDINGS} bytes"),
        );
    }
    if let Some(issue) = &e.issue {
        check_text(bad, &format!("{field}.issue"), issue, MAX_NAME, false);
    }
    let note = |bad: &mut Vec<FieldViolation>, n: &str| check_note(bad, &format!("{field}.note"), n);
    match &e.r#type {
        None => violation(
            bad,
            field,
            "an event needs exactly one of detection, fixed, false_positive_determination, \
             true_positive_determination, pending_upstream_fix, fix_not_planned, analysis_not_planned, patched",
        ),
        Some(T::Detection(d)) => {
            use ward_proto::vulnerabilities::v2::detection::Type as D;
            match &d.r#type {
                None => violation(
                    bad,
                    format!("{field}.detection"),
                    "a detection is one of nvdapi, manual, scanv1",
                ),
                Some(D::Scanv1(s)) => {
                    for (name, v) in [
                        ("scanner", &s.scanner),
                        ("subpackage", &s.subpackage),
                        ("component_id", &s.component_id),
                        ("component", &s.component),
                        ("component_version", &s.component_version),
                        ("component_type", &s.component_type),
                        ("artifact_version", &s.artifact_version),
                        ("scanner_version", &s.scanner_version),
                        ("grype_db_built", &s.grype_db_built),
                        ("grype_db_checksum", &s.grype_db_checksum),
                    ] {
                        check_text(bad, &format!("{field}.detection.scanv1.{name}"), v, MAX_TEXT, false);
                    }
                    check_text(
                        bad,
                        &format!("{field}.detection.scanv1.component_location"),
                        &s.component_location,
                        MAX_LOCATION,
                        false,
                    );
                }
                Some(D::Nvdapi(n)) => {
                    check_text(
                        bad,
                        &format!("{field}.detection.nvdapi.cpe_searched"),
                        &n.cpe_searched,
                        MAX_TEXT,
                        false,
                    );
                    check_text(
                        bad,
                        &format!("{field}.detection.nvdapi.cpe_found"),
                        &n.cpe_found,
                        MAX_TEXT,
                        false,
                    );
                }
                Some(D::Manual(_)) => {}
            }
        }
        Some(T::Fixed(x)) => {
            if imported && lenient::unorderable(&x.fixed_version) {
                check_text(
                    bad,
                    &format!("{field}.fixed.fixed_version"),
                    &x.fixed_version,
                    MAX_NAME,
                    true,
                );
            } else if let Err(Error::InvalidArgument(v)) = ward_core::apk::parse(&x.fixed_version) {
                for mut v in v {
                    v.field = format!("{field}.fixed.fixed_version");
                    bad.push(v);
                }
            }
            note(bad, &x.note);
            for (name, v) in [
                ("scanner_version", &x.scanner_version),
                ("grype_db_built", &x.grype_db_built),
                ("grype_db_checksum", &x.grype_db_checksum),
            ] {
                check_text(bad, &format!("{field}.fixed.{name}"), v, MAX_NAME, false);
            }
        }
        Some(T::FalsePositiveDetermination(x)) => {
            if !(1..=7).contains(&x.r#type) {
                violation(
                    bad,
                    format!("{field}.false_positive_determination.type"),
                    "a false-positive determination needs one of its seven types",
                );
            }
            note(bad, &x.note);
        }
        Some(T::Patched(x)) => {
            if x.patched_versions.is_empty() || x.patched_versions.len() > MAX_LIST {
                violation(
                    bad,
                    format!("{field}.patched.patched_versions"),
                    format!("between 1 and {MAX_LIST} patched versions"),
                );
            }
            for (i, v) in x.patched_versions.iter().take(MAX_LIST).enumerate() {
                if imported && lenient::unorderable(v) {
                    check_text(
                        bad,
                        &format!("{field}.patched.patched_versions[{i}]"),
                        v,
                        MAX_NAME,
                        true,
                    );
                } else if !ward_core::apk::is_valid(v) {
                    violation(
                        bad,
                        format!("{field}.patched.patched_versions[{i}]"),
                        format!("\"{}\" is not an apk version", ward_core::names::echo(v)),
                    );
                }
            }
            note(bad, &x.note);
        }
        Some(T::TruePositiveDetermination(x)) => note(bad, &x.note),
        Some(T::AnalysisNotPlanned(x)) => note(bad, &x.note),
        Some(T::FixNotPlanned(x)) => note(bad, &x.note),
        Some(T::PendingUpstreamFix(x)) => note(bad, &x.note),
    }
}

/// The stored form of a client's event (already checked), new and pending.
pub(crate) fn new_event(
    e: &AdvisoryEvent,
    uid: String,
    advisory_uid: &str,
    author: &str,
    now_ms: i64,
) -> Result<EventRecord> {
    let t = e
        .r#type
        .as_ref()
        .ok_or_else(|| Error::invalid("event", "the event has no type"))?;
    let kind = kind_of(t);
    let payload = payload_json(t)?;
    let event_time = e.create_time.as_ref().map_or(0, Timestamp::to_millis);
    Ok(EventRecord {
        uid,
        advisory_uid: advisory_uid.to_owned(),
        event_time,
        kind: i64::from(kind.filter_number()),
        author: author.to_owned(),
        reviewer: String::new(),
        review_state: i64::from(ward_proto::vulnerabilities::v2::ReviewState::Pending as i32),
        issue: e.issue.clone(),
        fingerprint: fingerprint(event_time, kind, &payload),
        payload,
        findings: e.findings.clone(),
        create_time: now_ms,
        update_time: now_ms,
    })
}
