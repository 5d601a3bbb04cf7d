//! Get and List (v2): every filter of the reference, as one typed query the
//! stores render to SQL. Event filters combine on one event: an advisory
//! matches when one of its events satisfies all of them (so "pending, not
//! written by me" finds what I can review).

use ward_core::advisory::EventKind;
use ward_core::error::FieldViolation;
use ward_core::listing::{Cursor, CursorKey, FilterValue, ListQuery, Page, SortField, SubQuery};
use ward_core::rpc;
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_proto::vulnerabilities::v2::{Advisory, GetAdvisoryRequest, ListAdvisoriesRequest, ListAdvisoriesResponse};
use ward_store::advisories::{ADVISORY_TYPE, AdvisoryRecord};

use super::{MAX_NAME, to_proto};
use crate::authz::Caller;
use crate::services::list::{ListParams, MAX_IDS};
use crate::ward::Ward;

const COLLECTION: &str = "advisories";
/// Bytes of event payloads and findings one list page reads before it stops
/// (the page then ends early, with a token for the rest).
pub const LIST_BUDGET: usize = 8 * 1024 * 1024;
/// Advisories whose events are read per round trip.
const EVENT_CHUNK: usize = 16;
/// Longest `query` substring.
pub const MAX_QUERY: usize = 256;

/// A repeated string filter: bounded count and sizes.
fn strings(field: &str, values: &[String], bad: &mut Vec<FieldViolation>) -> Option<FilterValue> {
    if values.is_empty() {
        return None;
    }
    if values.len() > MAX_IDS || values.iter().any(|v| v.len() > MAX_NAME) {
        bad.push(FieldViolation {
            field: field.into(),
            description: format!("{field} may name at most {MAX_IDS} values of at most {MAX_NAME} bytes"),
        });
        return None;
    }
    Some(FilterValue::AnyOf(values.to_vec()))
}

fn enums(
    field: &str,
    values: &[i32],
    valid: impl Fn(i32) -> bool,
    bad: &mut Vec<FieldViolation>,
) -> Option<FilterValue> {
    if values.is_empty() {
        return None;
    }
    if values.len() > 16 {
        bad.push(FieldViolation {
            field: field.into(),
            description: format!("{field} may name at most 16 values"),
        });
        return None;
    }
    if values.iter().any(|v| !valid(*v)) {
        bad.push(FieldViolation {
            field: field.into(),
            description: format!("{field} holds an unknown value"),
        });
        return None;
    }
    Some(FilterValue::AnyOfInt(values.iter().map(|v| i64::from(*v)).collect()))
}

fn event_type_ok(n: i32) -> bool {
    EventKind::from_filter_number(n).is_some()
}

fn review_state_ok(n: i32) -> bool {
    (1..=4).contains(&n)
}

/// The advisory-specific filters of a list request, checked.
pub(crate) fn filters(req: &ListAdvisoriesRequest) -> Result<Vec<(&'static str, FilterValue)>> {
    let mut bad = Vec::new();
    let mut out = Vec::new();
    let mut add = |col: &'static str, v: Option<FilterValue>| {
        if let Some(v) = v {
            out.push((col, v));
        }
    };
    add("advisory_id", strings("advisory_ids", &req.advisory_ids, &mut bad));
    add(
        "legacy_advisory_id",
        strings("legacy_advisory_ids", &req.legacy_advisory_ids, &mut bad),
    );
    match &req.origin {
        Some(o) if o.len() > MAX_NAME => bad.push(FieldViolation {
            field: "origin".into(),
            description: format!("origin is longer than {MAX_NAME} bytes"),
        }),
        Some(o) if !o.is_empty() => add("origin", Some(FilterValue::Text(o.clone()))),
        _ => add(
            "artifact_name",
            strings("artifact_names", &req.artifact_names, &mut bad),
        ),
    }
    add(
        "artifact_type",
        strings("artifact_types", &req.artifact_types, &mut bad),
    );
    add(
        "artifact_architecture",
        strings("artifact_architectures", &req.artifact_architectures, &mut bad),
    );
    add(
        "component_name",
        strings("component_names", &req.component_names, &mut bad),
    );
    add(
        "component_type",
        strings("component_types", &req.component_types, &mut bad),
    );
    add(
        "component_location",
        strings("component_locations", &req.component_locations, &mut bad),
    );
    if let Some(aliases) = strings("aliases", &req.aliases, &mut bad) {
        add(
            "uid",
            Some(FilterValue::In(SubQuery {
                table: "advisory_aliases",
                key: "advisory_uid",
                filters: vec![("alias", aliases)],
            })),
        );
    }
    let mut on_event = Vec::new();
    let mut event = |col: &'static str, v: Option<FilterValue>| {
        if let Some(v) = v {
            on_event.push((col, v));
        }
    };
    event(
        "review_state",
        enums(
            "event_review_states",
            &req.event_review_states,
            review_state_ok,
            &mut bad,
        ),
    );
    event("author", strings("event_authors", &req.event_authors, &mut bad));
    if let Some(FilterValue::AnyOf(v)) = strings("exclude_event_authors", &req.exclude_event_authors, &mut bad) {
        event("author", Some(FilterValue::NoneOf(v)));
    }
    event("reviewer", strings("event_reviewers", &req.event_reviewers, &mut bad));
    event("type", enums("event_types", &req.event_types, event_type_ok, &mut bad));
    if !on_event.is_empty() {
        add(
            "uid",
            Some(FilterValue::In(SubQuery {
                table: "advisory_events",
                key: "advisory_uid",
                filters: on_event,
            })),
        );
    }
    if let Some(t) = req.latest_event_type {
        if event_type_ok(t) {
            add("latest_type", Some(FilterValue::Int(i64::from(t))));
        } else if t != 0 {
            bad.push(FieldViolation {
                field: "latest_event_type".into(),
                description: "latest_event_type holds an unknown value".into(),
            });
        }
    }
    if !req.query.is_empty() {
        if req.query.len() > MAX_QUERY {
            bad.push(FieldViolation {
                field: "query".into(),
                description: format!("query is longer than {MAX_QUERY} bytes"),
            });
        } else {
            add(
                "search",
                Some(FilterValue::Search {
                    index: "advisories_search",
                    text: req.query.to_lowercase(),
                }),
            );
        }
    }
    if !req.show_deleted {
        add("delete_time", Some(FilterValue::IsNull(true)));
    }
    if bad.is_empty() {
        Ok(out)
    } else {
        Err(Error::InvalidArgument(bad))
    }
}

impl Ward {
    /// The advisory at `uid` after checking `rule` there.
    pub(crate) async fn authorized_advisory(
        &self,
        caller: &Caller,
        rule: &ward_core::rpc::Rule,
        uid: &Uidp,
    ) -> Result<AdvisoryRecord> {
        self.authorize(caller, rule, uid)?;
        self.store
            .get_advisory(uid)
            .await?
            .ok_or_else(|| Error::not_found(ADVISORY_TYPE, uid.as_str()))
    }

    /// Advisories with their events, in page order.
    pub(crate) async fn with_events(&self, rows: Vec<AdvisoryRecord>) -> Result<Vec<Advisory>> {
        Ok(self.with_events_within(rows, usize::MAX).await?.0)
    }

    /// Advisories with their events, in page order, stopping after the chunk
    /// that takes the events read past `budget` bytes (an advisory holds at
    /// most 1 MiB of them); also whether it stopped early.
    pub(crate) async fn with_events_within(
        &self,
        rows: Vec<AdvisoryRecord>,
        budget: usize,
    ) -> Result<(Vec<Advisory>, bool)> {
        let total = rows.len();
        let mut out = Vec::with_capacity(total);
        let mut spent = 0usize;
        let mut rows = rows.into_iter().peekable();
        while rows.peek().is_some() {
            let chunk: Vec<AdvisoryRecord> = rows.by_ref().take(EVENT_CHUNK).collect();
            let uids: Vec<String> = chunk.iter().map(|a| a.uid.clone()).collect();
            let events = self.store.events_of(&uids).await?;
            spent += events.iter().map(|e| e.payload.len() + e.findings.len()).sum::<usize>();
            let mut by: std::collections::HashMap<String, Vec<_>> = std::collections::HashMap::new();
            for e in events {
                by.entry(e.advisory_uid.clone()).or_default().push(e);
            }
            out.extend(chunk.into_iter().map(|a| {
                let ev = by.remove(&a.uid).unwrap_or_default();
                to_proto(a, ev)
            }));
            if spent > budget {
                break;
            }
        }
        let stopped = out.len() < total;
        Ok((out, stopped))
    }

    pub async fn get_advisory(&self, caller: &Caller, req: GetAdvisoryRequest) -> Result<Advisory> {
        let uid = Uidp::parse("uid", &req.uid)?;
        let a = self.authorized_advisory(caller, &rpc::GET_ADVISORY, &uid).await?;
        let mut out = self.with_events(vec![a]).await?;
        out.pop().ok_or_else(|| Error::not_found(ADVISORY_TYPE, uid.as_str()))
    }

    /// A page of advisories visible in `visible` (None: all).
    pub(crate) async fn advisory_page(
        &self,
        req: &ListAdvisoriesRequest,
        visible: Option<Vec<Uidp>>,
    ) -> Result<(ListQuery, i32, Page<AdvisoryRecord>)> {
        let params = ListParams {
            uidp: req.uidp.as_ref(),
            name: "",
            page_size: req.page_size,
            page_token: &req.page_token,
            order_by: &req.order_by,
            skip: req.skip,
            filters: filters(req)?,
        };
        let (q, skipped) = self.list_query(COLLECTION, params, visible)?;
        if q.order.field == SortField::Name {
            return Err(Error::invalid(
                "order_by",
                "advisories are ordered by uid, create_time or update_time",
            ));
        }
        let page = self.store.list_advisories(&q).await?;
        Ok((q, skipped, page))
    }

    pub async fn list_advisories(&self, caller: &Caller, req: ListAdvisoriesRequest) -> Result<ListAdvisoriesResponse> {
        let visible = self.visible_scopes(caller, rpc::LIST_ADVISORIES.capability);
        let (q, skipped, mut page) = self.advisory_page(&req, visible).await?;
        let rows = std::mem::take(&mut page.items);
        let (advisories, stopped) = self.with_events_within(rows, LIST_BUDGET).await?;
        // A page cut short by its events' size continues after its last advisory.
        if stopped && let Some(last) = advisories.last() {
            let millis = |t: &Option<ward_proto::Timestamp>| t.as_ref().map_or(0, ward_proto::Timestamp::to_millis);
            let key = match q.order.field {
                SortField::CreateTime => CursorKey::Millis(millis(&last.create_time)),
                SortField::UpdateTime => CursorKey::Millis(millis(&last.update_time)),
                SortField::Uid | SortField::Name => CursorKey::Text(last.uid.clone()),
            };
            page.next = Some(Cursor {
                key,
                uid: last.uid.clone(),
            });
        }
        let next_page_token = self.next_page_token(COLLECTION, &q, skipped, &page);
        Ok(ListAdvisoriesResponse {
            advisories,
            next_page_token,
            total_count: Some(page.total_count),
            skipped,
        })
    }
}
