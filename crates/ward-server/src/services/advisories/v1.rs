//! v1 ⇄ v2 for advisories: v1 is a translation at the edge onto the one
//! service layer. The v1 and v2 payload messages share their field numbers
//! (v1's ScanV1 only names two fields differently, and FalsePositive types
//! keep their numbers), so payloads are carried across by their protobuf
//! encoding rather than field by field.

use prost::Message;
use ward_core::{Error, Result};
use ward_proto::vulnerabilities::{v1, v2};

fn transcode<A: Message, B: Message + Default>(a: &A) -> B {
    // Same field numbers and types on both sides: decoding cannot fail.
    B::decode(a.encode_to_vec().as_slice()).unwrap_or_default()
}

pub fn event_in(e: v1::AdvisoryEvent) -> Result<v2::AdvisoryEvent> {
    use v1::advisory_event::Type as A;
    use v2::advisory_event::Type as B;
    let r#type = match &e.r#type {
        None => None,
        Some(A::Detection(x)) => Some(B::Detection(transcode(x))),
        Some(A::Fixed(x)) => Some(B::Fixed(transcode(x))),
        Some(A::FalsePositiveDetermination(x)) => Some(B::FalsePositiveDetermination(transcode(x))),
        Some(A::AnalysisNotPlanned(x)) => Some(B::AnalysisNotPlanned(transcode(x))),
        Some(A::FixNotPlanned(x)) => Some(B::FixNotPlanned(transcode(x))),
        Some(A::PendingUpstreamFix(x)) => Some(B::PendingUpstreamFix(transcode(x))),
        Some(A::TruePositiveDetermination(x)) => Some(B::TruePositiveDetermination(transcode(x))),
        Some(A::Patched(x)) => Some(B::Patched(transcode(x))),
        Some(A::ComponentLocationChanged(_)) => {
            return Err(Error::invalid(
                "advisory_event.component_location_changed",
                "component-location-changed events are not supported: update the advisory's component_location",
            ));
        }
    };
    Ok(v2::AdvisoryEvent {
        uid: e.id,
        create_time: e.timestamp,
        findings: e.findings,
        author: e.author,
        reviewer: e.reviewer,
        review_state: e.status,
        issue: e.issue,
        r#type,
    })
}

pub fn event_out(e: v2::AdvisoryEvent) -> v1::AdvisoryEvent {
    use v1::advisory_event::Type as A;
    use v2::advisory_event::Type as B;
    let r#type = e.r#type.as_ref().map(|t| match t {
        B::Detection(x) => A::Detection(transcode(x)),
        B::Fixed(x) => A::Fixed(transcode(x)),
        B::FalsePositiveDetermination(x) => A::FalsePositiveDetermination(transcode(x)),
        B::AnalysisNotPlanned(x) => A::AnalysisNotPlanned(transcode(x)),
        B::FixNotPlanned(x) => A::FixNotPlanned(transcode(x)),
        B::PendingUpstreamFix(x) => A::PendingUpstreamFix(transcode(x)),
        B::TruePositiveDetermination(x) => A::TruePositiveDetermination(transcode(x)),
        B::Patched(x) => A::Patched(transcode(x)),
    });
    v1::AdvisoryEvent {
        id: e.uid,
        timestamp: e.create_time,
        findings: e.findings,
        author: e.author,
        reviewer: e.reviewer,
        status: e.review_state,
        issue: e.issue,
        r#type,
    }
}

pub fn advisory_in(a: v1::Advisory) -> Result<v2::Advisory> {
    let events = a.events.into_iter().map(event_in).collect::<Result<Vec<_>>>()?;
    Ok(v2::Advisory {
        uid: a.id,
        advisory_id: a.advisory_id,
        create_time: a.created_at,
        update_time: a.updated_at,
        delete_time: a.deleted_at,
        author: a.author,
        artifact_name: a.artifact_name,
        artifact_type: a.artifact_type,
        artifact_architecture: a.artifact_architecture,
        component_name: a.component_name.unwrap_or_default(),
        component_location: a.component_location.unwrap_or_default(),
        component_type: a.component_type.unwrap_or_default(),
        aliases: a.aliases,
        events,
        legacy_advisory_id: a.legacy_advisory_id,
        severities: Vec::new(),
    })
}

pub fn advisory_out(a: v2::Advisory) -> v1::Advisory {
    let opt = |s: String| (!s.is_empty()).then_some(s);
    v1::Advisory {
        id: a.uid,
        artifact_type: a.artifact_type,
        artifact_name: a.artifact_name,
        artifact_architecture: a.artifact_architecture,
        component_name: opt(a.component_name),
        component_location: opt(a.component_location),
        component_type: opt(a.component_type),
        created_at: a.create_time,
        updated_at: a.update_time,
        deleted_at: a.delete_time,
        aliases: a.aliases,
        events: a.events.into_iter().map(event_out).collect(),
        advisory_id: a.advisory_id,
        author: a.author,
        legacy_advisory_id: a.legacy_advisory_id,
    }
}

/// The v1 filter as the v2 list request (v1's order enum as `order_by`).
pub fn filter_in(f: v1::AdvisoryFilter) -> Result<v2::ListAdvisoriesRequest> {
    use v1::advisory_filter::OrderBy as O;
    let order_by = match O::try_from(f.order_by).unwrap_or_default() {
        O::Unspecified | O::IdAsc => "",
        O::IdDesc => "uid desc",
        O::CreatedAtAsc => "create_time",
        O::CreatedAtDesc => "create_time desc",
        O::UpdatedAtAsc => "update_time",
        O::UpdatedAtDesc => "update_time desc",
        O::AliasesAsc | O::AliasesDesc | O::DeletedAtAsc | O::DeletedAtDesc => {
            return Err(Error::invalid(
                "order_by",
                "advisories are ordered by id, created_at or updated_at",
            ));
        }
    };
    if f.page_size < 0 {
        return Err(Error::invalid("page_size", "page_size must not be negative"));
    }
    let mut ids = f.advisory_ids;
    let mut uidp = f.uidp;
    if !f.id.is_empty() {
        uidp.get_or_insert_with(Default::default).ids.push(f.id);
    }
    ids.dedup();
    Ok(v2::ListAdvisoriesRequest {
        uidp,
        advisory_ids: ids,
        legacy_advisory_ids: f.legacy_advisory_ids,
        artifact_names: f.artifact_name,
        artifact_types: f.artifact_type,
        artifact_architectures: f.artifact_architecture,
        component_names: f.component_name,
        component_types: f.component_type,
        component_locations: f.component_location,
        aliases: f.aliases,
        origin: f.origin,
        event_review_states: f.event_statuses,
        event_authors: f.event_author,
        exclude_event_authors: f.exclude_event_author,
        event_reviewers: f.event_reviewer,
        // v1 adds COMPONENT_LOCATION_CHANGED (9), which no v2 event has.
        event_types: f.event_types,
        latest_event_type: f.latest_event_type,
        page_size: i32::try_from(f.page_size.clamp(0, 1000)).unwrap_or_default(),
        page_token: f.page_token,
        order_by: order_by.into(),
        show_deleted: false,
        skip: 0,
        query: String::new(),
    })
}

/// The review (or resubmission) a v1 UpdateAdvisoryEvent asks for: its
/// status and issue, and new content when it carries a payload.
pub fn event_change(e: v1::AdvisoryEvent) -> Result<super::write::EventChange> {
    let review_state = e.status;
    let issue = e.issue.clone();
    let content = if e.r#type.is_some() { Some(event_in(e)?) } else { None };
    Ok(super::write::EventChange {
        review_state,
        issue,
        content,
    })
}
