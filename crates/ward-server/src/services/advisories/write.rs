//! Writing advisories and their events, and the review workflow: a new event
//! is PENDING; someone with `advisories.approve` who did not write it moves
//! it to APPROVED or REJECTED (both final) or REQUEST_CHANGES, after which
//! a writer may change its content, which makes it PENDING again.

use ward_core::error::FieldViolation;
use ward_core::rpc;
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_proto::vulnerabilities::v2::{Advisory, AdvisoryEvent, ReviewState};
use ward_store::advisories::{ADVISORY_TYPE, AdvisoryRecord, EVENT_TYPE, EventRecord};

use super::{MAX_EVENTS, check_event, check_fields, event_to_proto, fields_of, new_event, payload_json};
use crate::authz::Caller;
use crate::services::events;
use crate::ward::Ward;

/// What an UpdateAdvisoryEvent asks for.
pub struct EventChange {
    /// The review state asked for (0: unchanged).
    pub review_state: i32,
    pub issue: Option<String>,
    /// New content (resubmitting after REQUEST_CHANGES), if any.
    pub content: Option<AdvisoryEvent>,
}

/// Whether `c` is the content `cur` already has (what a read-modify-write
/// client sends back): the same type and payload, and the same event time
/// and findings where it states them.
fn unchanged(cur: &EventRecord, c: &AdvisoryEvent) -> bool {
    let Some(t) = c.r#type.as_ref() else {
        return true;
    };
    payload_json(t).is_ok_and(|p| p == cur.payload)
        && i64::from(super::kind_of(t).filter_number()) == cur.kind
        && c.create_time.as_ref().is_none_or(|ts| ts.to_millis() == cur.event_time)
        && (c.findings.is_empty() || c.findings == cur.findings)
}

/// A new random advisory id (CGA); the store's unique index refuses a taken one.
pub(crate) fn fresh_cga() -> String {
    ward_core::advisory::new_cga(&mut rand::thread_rng())
}

impl Ward {
    /// Checks and builds the stored form of a new advisory under `parent`.
    pub(crate) fn new_advisory(
        &self,
        caller: &Caller,
        parent: &Uidp,
        a: &Advisory,
        origin: &str,
        advisory_id: String,
        imported: bool,
    ) -> Result<(AdvisoryRecord, Vec<EventRecord>)> {
        // A create names its fields under `advisory`; an import's results
        // name the advisory already.
        let prefix = if imported { "" } else { "advisory." };
        let now = self.clock.now_millis();
        let mut bad = Vec::new();
        check_fields(a, prefix, &mut bad);
        if a.events.is_empty() {
            bad.push(FieldViolation {
                field: format!("{prefix}events"),
                description: "an advisory needs at least one event".into(),
            });
        } else if a.events.len() > MAX_EVENTS {
            bad.push(FieldViolation {
                field: format!("{prefix}events"),
                description: format!("at most {MAX_EVENTS} events"),
            });
        } else {
            for (i, e) in a.events.iter().enumerate() {
                check_event(e, &format!("{prefix}events[{i}]"), now, imported, &mut bad);
            }
        }
        if !bad.is_empty() {
            return Err(Error::InvalidArgument(bad));
        }
        let uid = parent.new_child_ordered(now);
        let f = fields_of(a);
        let record = AdvisoryRecord {
            uid: uid.as_str().into(),
            parent_uid: parent.as_str().into(),
            advisory_id,
            legacy_advisory_id: a.legacy_advisory_id.clone().filter(|l| !l.is_empty()),
            origin: origin.into(),
            author: caller.subject.clone(),
            artifact_name: f.artifact_name,
            artifact_type: f.artifact_type,
            artifact_architecture: f.artifact_architecture,
            component_name: f.component_name,
            component_location: f.component_location,
            component_type: f.component_type,
            aliases: f.aliases,
            severities: f.severities,
            latest_type: 0,
            fixed_version: None,
            create_time: now,
            update_time: now,
            delete_time: None,
        };
        let events = a
            .events
            .iter()
            .map(|e| new_event(e, uid.new_child_ordered(now).into(), uid.as_str(), &caller.subject, now))
            .collect::<Result<Vec<_>>>()?;
        Ok((record, events))
    }

    pub async fn create_advisory(&self, caller: &Caller, parent: &str, a: Advisory) -> Result<Advisory> {
        let parent = Uidp::parse("parent_id", parent)?;
        self.authorize(caller, &rpc::CREATE_ADVISORY, &parent)?;
        // A generated id is checked by the store's unique index: one taken
        // (1 in 20^12 per advisory) gets another.
        let generated = a.advisory_id.is_empty();
        let mut attempts = 0;
        loop {
            let id = if generated { fresh_cga() } else { a.advisory_id.clone() };
            let (record, events) = self.new_advisory(caller, &parent, &a, &a.artifact_name, id, false)?;
            let reply = super::v1::advisory_out(super::to_proto(record.clone(), events.clone()));
            let emit = self.created(
                caller,
                events::types::ADVISORY_CREATED,
                &record.uid,
                &record.parent_uid,
                &reply,
            );
            match self.store.create_advisory(&record, &events, emit).await {
                Err(Error::AlreadyExists { .. }) if generated && attempts < 3 => attempts += 1,
                Err(e) => return Err(e),
                Ok(()) => {
                    let uid = Uidp::parse("uid", &record.uid)?;
                    self.on_advisories_changed(
                        &record.parent_uid,
                        vec![
                            record.artifact_name.clone(),
                            record.component_name.clone(),
                            record.origin.clone(),
                        ],
                    )
                    .await;
                    return self.advisory_by_uid(&uid).await;
                }
            }
        }
    }

    pub(crate) async fn advisory_by_uid(&self, uid: &Uidp) -> Result<Advisory> {
        let a = self
            .store
            .get_advisory(uid)
            .await?
            .ok_or_else(|| Error::not_found(ADVISORY_TYPE, uid.as_str()))?;
        let mut out = self.with_events(vec![a]).await?;
        out.pop().ok_or_else(|| Error::not_found(ADVISORY_TYPE, uid.as_str()))
    }

    /// Full replacement of the advisory's own fields (its events are written
    /// one by one with `create_advisory_event`).
    pub async fn update_advisory(&self, caller: &Caller, a: Advisory) -> Result<Advisory> {
        let uid = Uidp::parse("id", &a.uid)?;
        let cur = self.authorized_advisory(caller, &rpc::UPDATE_ADVISORY, &uid).await?;
        if cur.delete_time.is_some() {
            return Err(Error::not_found(ADVISORY_TYPE, uid.as_str()));
        }
        let mut checked = a.clone();
        // The id is the stored one: aliases are checked against it.
        checked.advisory_id = cur.advisory_id.clone();
        let mut bad = Vec::new();
        check_fields(&checked, "", &mut bad);
        if !a.advisory_id.is_empty() && a.advisory_id != cur.advisory_id {
            bad.push(FieldViolation {
                field: "advisory_id".into(),
                description: "an advisory's id cannot change".into(),
            });
        }
        if !bad.is_empty() {
            return Err(Error::InvalidArgument(bad));
        }
        let mut f = fields_of(&checked);
        // Severities are output only through v1 (it has no such field).
        if a.severities.is_empty() {
            f.severities = cur.severities.clone();
        }
        // The body shows the advisory's own fields: its events are events
        // of their own.
        let emit = self.updated(
            caller,
            events::types::ADVISORY_UPDATED,
            uid.as_str(),
            &cur.parent_uid,
            |r: AdvisoryRecord| super::v1::advisory_out(super::to_proto(r, Vec::new())),
        );
        self.store
            .update_advisory(&uid, &f, self.clock.now_millis(), emit)
            .await?;
        self.on_advisories_changed(
            &cur.parent_uid,
            vec![
                cur.artifact_name.clone(),
                cur.component_name.clone(),
                cur.origin.clone(),
                f.artifact_name.clone(),
                f.component_name.clone(),
            ],
        )
        .await;
        self.advisory_by_uid(&uid).await
    }

    pub async fn delete_advisory(&self, caller: &Caller, uid: &str) -> Result<()> {
        let uid = Uidp::parse("id", uid)?;
        self.authorize(caller, &rpc::DELETE_ADVISORY, &uid)?;
        let emit = self.deleted(
            caller,
            events::types::ADVISORY_DELETED,
            uid.as_str(),
            &Ward::event_group(uid.as_str()),
        );
        self.store.delete_advisory(&uid, self.clock.now_millis(), emit).await?;
        self.advisory_names_changed(&uid).await;
        Ok(())
    }

    /// Re-evaluates the images holding the packages an advisory names.
    async fn advisory_names_changed(&self, uid: &Uidp) {
        if let Ok(Some(a)) = self.store.get_advisory(uid).await {
            self.on_advisories_changed(&a.parent_uid, vec![a.artifact_name, a.component_name, a.origin])
                .await;
        }
    }

    pub async fn create_advisory_event(
        &self,
        caller: &Caller,
        parent: &str,
        e: AdvisoryEvent,
    ) -> Result<AdvisoryEvent> {
        let parent = Uidp::parse("parent_id", parent)?;
        self.authorize(caller, &rpc::CREATE_ADVISORY_EVENT, &parent)?;
        let now = self.clock.now_millis();
        let mut bad = Vec::new();
        check_event(&e, "advisory_event", now, false, &mut bad);
        if !bad.is_empty() {
            return Err(Error::InvalidArgument(bad));
        }
        let record = new_event(
            &e,
            parent.new_child_ordered(now).into(),
            parent.as_str(),
            &caller.subject,
            now,
        )?;
        let reply = event_to_proto(record.clone());
        let emit = self.created(
            caller,
            events::types::ADVISORY_EVENT_CREATED,
            &record.uid,
            &Ward::event_group(parent.as_str()),
            &super::v1::event_out(reply.clone()),
        );
        self.store.add_event(&record, emit).await?;
        self.advisory_names_changed(&parent).await;
        Ok(reply)
    }

    pub async fn list_advisory_events(&self, caller: &Caller, parent: &str) -> Result<Vec<AdvisoryEvent>> {
        let parent = Uidp::parse("parent_id", parent)?;
        self.authorized_advisory(caller, &rpc::LIST_ADVISORY_EVENTS, &parent)
            .await?;
        let events = self.store.events_of(&[parent.as_str().to_owned()]).await?;
        Ok(events.into_iter().map(event_to_proto).collect())
    }

    /// Reviews an event, or resubmits its content after REQUEST_CHANGES.
    pub async fn update_advisory_event(
        &self,
        caller: &Caller,
        uid: &str,
        change: EventChange,
    ) -> Result<AdvisoryEvent> {
        let uid = Uidp::parse("id", uid)?;
        // Seeing the event is seeing its advisory.
        let visible = self.caps_at(caller, &uid).contains(rpc::GET_ADVISORY.capability);
        if !visible {
            return Err(Error::not_found(EVENT_TYPE, uid.as_str()));
        }
        let cur = self
            .store
            .get_event(&uid)
            .await?
            .ok_or_else(|| Error::not_found(EVENT_TYPE, uid.as_str()))?;
        let state = |n: i64| ReviewState::try_from(i32::try_from(n).unwrap_or_default()).unwrap_or_default();
        let current = state(cur.review_state);
        if matches!(current, ReviewState::Approved | ReviewState::Rejected) {
            return Err(Error::precondition(
                "REVIEW_FINAL",
                uid.as_str(),
                format!(
                    "the event is {}; approved and rejected events are final (add a new event instead)",
                    current.as_str_name()
                ),
            ));
        }
        let asked = ReviewState::try_from(change.review_state)
            .map_err(|_| Error::invalid("status", "unknown review status"))?;
        let now = self.clock.now_millis();
        let mut next = cur.clone();
        next.update_time = now;
        if let Some(issue) = change.issue {
            let mut bad = Vec::new();
            ward_core::names::check_text("issue", &issue, super::MAX_NAME, &mut bad);
            if !bad.is_empty() {
                return Err(Error::InvalidArgument(bad));
            }
            next.issue = (!issue.is_empty()).then_some(issue);
        }
        match asked {
            ReviewState::Approved | ReviewState::Rejected | ReviewState::RequestChanges => {
                self.authorize(caller, &rpc::REVIEW_ADVISORY_EVENT, &uid)?;
                if cur.author == caller.subject {
                    return Err(Error::PermissionDenied(
                        "an event is reviewed by someone other than its author".into(),
                    ));
                }
                // A v1 client sends the event back as it read it, with a new
                // status: content as it is is not a change.
                if change.content.as_ref().is_some_and(|c| !unchanged(&cur, c)) {
                    return Err(Error::invalid(
                        "advisory_event",
                        "a review changes the status, reviewer and issue only, not the event's content",
                    ));
                }
                next.review_state = i64::from(asked as i32);
                next.reviewer = caller.subject.clone();
            }
            ReviewState::Pending | ReviewState::Unspecified => {
                self.authorize(caller, &rpc::UPDATE_ADVISORY_EVENT, &uid)?;
                if let Some(content) = change.content.filter(|c| c.r#type.is_some() && !unchanged(&cur, c)) {
                    if current != ReviewState::RequestChanges {
                        return Err(Error::precondition(
                            "REVIEW_STATE",
                            uid.as_str(),
                            "an event's content changes only after a reviewer requested changes",
                        ));
                    }
                    let mut bad = Vec::new();
                    check_event(&content, "advisory_event", now, false, &mut bad);
                    if !bad.is_empty() {
                        return Err(Error::InvalidArgument(bad));
                    }
                    // New content is its submitter's: they may no longer
                    // review it (else one approver could request changes,
                    // rewrite and approve an event nobody else has seen).
                    let fresh = new_event(&content, cur.uid.clone(), &cur.advisory_uid, &caller.subject, now)?;
                    next.author = fresh.author.clone();
                    next.kind = fresh.kind;
                    next.payload = payload_json(
                        content
                            .r#type
                            .as_ref()
                            .ok_or_else(|| Error::invalid("advisory_event", "the event has no type"))?,
                    )?;
                    next.fingerprint = fresh.fingerprint;
                    next.event_time = fresh.event_time;
                    next.findings = fresh.findings;
                    next.review_state = i64::from(ReviewState::Pending as i32);
                    next.reviewer = String::new();
                } else if asked == ReviewState::Pending && current == ReviewState::RequestChanges {
                    next.review_state = i64::from(ReviewState::Pending as i32);
                    next.reviewer = String::new();
                }
            }
        }
        let kind = match asked {
            ReviewState::Approved | ReviewState::Rejected | ReviewState::RequestChanges => {
                events::types::ADVISORY_EVENT_REVIEWED
            }
            _ => events::types::ADVISORY_EVENT_UPDATED,
        };
        let emit = self.updated(
            caller,
            kind,
            uid.as_str(),
            &Ward::event_group(&Ward::event_group(uid.as_str())),
            |e: ward_store::advisories::EventRecord| super::v1::event_out(event_to_proto(e)),
        );
        let row = self.store.update_event(&next, cur.review_state, emit).await?;
        if let Some(parent) = uid.parent() {
            self.advisory_names_changed(&parent).await;
        }
        Ok(event_to_proto(row))
    }
}
