//! Ward's event log, read through the API: the audit trail (every event of a
//! group and the groups below it, newest first), and the state of a
//! subscription's deliveries, with a retry of those that gave up.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ward_core::error::FieldViolation;
use ward_core::rpc;
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_proto::Timestamp;
use ward_proto::events::{
    Actor, DeliveryStatus, Event, EventList, FailedDelivery, GetDeliveriesRequest, ListEventsRequest,
    RetryDeliveryRequest,
};
use ward_store::events::{EventQuery, EventRecord};

use crate::authz::Caller;
use crate::ward::Ward;

/// Events one page holds unless the request asks for fewer.
pub const DEFAULT_PAGE: u32 = 50;
/// Most events one page holds.
pub const MAX_PAGE: u32 = 200;
/// Most body bytes one page holds: a page stops early past it (the next
/// page token continues after the last event given).
pub const MAX_PAGE_BYTES: usize = 4 * 1024 * 1024;
/// Most event types one query names.
pub const MAX_TYPES: usize = 50;
/// Longest event type, actor or page token accepted.
pub const MAX_FILTER_LEN: usize = 200;
/// Failed deliveries one status shows (newest first).
pub const FAILED_SHOWN: u32 = 100;

/// The claims an identity was assumed with (`actor.act`), as the string map
/// receivers decode: strings as they are, anything else (a list of
/// audiences) as its JSON text.
pub(crate) fn act_map(act: &str) -> BTreeMap<String, String> {
    let Ok(serde_json::Value::Object(m)) = serde_json::from_str(act) else {
        return BTreeMap::new();
    };
    m.into_iter()
        .map(|(k, v)| {
            let text = match v {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            };
            (k, text)
        })
        .collect()
}

fn to_proto(e: EventRecord) -> Event {
    Event {
        actor: Some(Actor {
            subject: e.actor,
            act: act_map(&e.act).into_iter().collect(),
        }),
        id: e.id,
        r#type: e.event_type,
        subject: e.subject,
        group: e.group_uid,
        body: e.body,
        audience: e.audience,
        time: Some(Timestamp::from_millis(e.time)),
    }
}

fn bad(field: &str, description: impl Into<String>) -> Error {
    Error::InvalidArgument(vec![FieldViolation {
        field: field.into(),
        description: description.into(),
    }])
}

/// The event sequence a page token continues before.
fn open_token(token: &str) -> Result<Option<i64>> {
    if token.is_empty() {
        return Ok(None);
    }
    URL_SAFE_NO_PAD
        .decode(token)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| s.strip_prefix("ev:").and_then(|n| n.parse::<i64>().ok()))
        .map(Some)
        .ok_or_else(|| bad("page_token", "page_token is not a token this listing issued"))
}

fn issue_token(seq: i64) -> String {
    URL_SAFE_NO_PAD.encode(format!("ev:{seq}"))
}

impl Ward {
    /// The audit trail: events of `group` and below, newest first, filtered
    /// by type, actor and time. Needs `loggie.logs.read` at the group.
    pub async fn list_events(&self, caller: &Caller, req: ListEventsRequest) -> Result<EventList> {
        let group = Uidp::parse("group", &req.group)?;
        if req.types.len() > MAX_TYPES {
            return Err(bad("types", format!("at most {MAX_TYPES} types")));
        }
        if req.types.iter().any(|t| t.len() > MAX_FILTER_LEN) || req.actor.len() > MAX_FILTER_LEN {
            return Err(bad(
                "types",
                format!("an event type or actor is at most {MAX_FILTER_LEN} bytes"),
            ));
        }
        if req.page_token.len() > MAX_FILTER_LEN {
            return Err(bad("page_token", "page_token is not a token this listing issued"));
        }
        if req.page_size < 0 {
            return Err(bad("page_size", "page_size must not be negative"));
        }
        let before_seq = open_token(&req.page_token)?;
        self.authorize(caller, &rpc::LIST_EVENTS, &group)?;
        let limit = match req.page_size {
            0 => DEFAULT_PAGE,
            n => (n as u32).min(MAX_PAGE),
        };
        let q = EventQuery {
            scopes: vec![group.into()],
            types: req.types,
            actor: (!req.actor.is_empty()).then_some(req.actor),
            since: req.since.map(|t| t.to_millis()),
            until: req.until.map(|t| t.to_millis()),
            before_seq,
            limit: limit + 1,
        };
        let mut rows = self.store.list_events(&q).await?;
        let mut more = rows.len() > limit as usize;
        rows.truncate(limit as usize);
        let mut bytes = 0usize;
        let mut kept = 0;
        for e in &rows {
            bytes += e.body.len() + e.act.len();
            if kept > 0 && bytes > MAX_PAGE_BYTES {
                more = true;
                break;
            }
            kept += 1;
        }
        rows.truncate(kept);
        let next_page_token = match (more, rows.last()) {
            (true, Some(last)) => issue_token(last.seq),
            _ => String::new(),
        };
        Ok(EventList {
            events: rows.into_iter().map(to_proto).collect(),
            next_page_token,
        })
    }

    /// A subscription's deliveries: when the last succeeded and failed, how
    /// many wait, and those that gave up.
    pub async fn get_deliveries(&self, caller: &Caller, req: GetDeliveriesRequest) -> Result<DeliveryStatus> {
        let uid = Uidp::parse("subscription", &req.subscription)?;
        self.visible_subscription(caller, &uid).await?;
        self.authorize(caller, &rpc::GET_DELIVERIES, &uid)?;
        self.delivery_status(&uid).await
    }

    /// Queues failed deliveries of a subscription again (one event's, or
    /// every one); answers the status after.
    pub async fn retry_delivery(&self, caller: &Caller, req: RetryDeliveryRequest) -> Result<DeliveryStatus> {
        let uid = Uidp::parse("subscription", &req.subscription)?;
        if req.event_id.len() > 200 {
            return Err(bad("event_id", "event_id is at most 200 bytes"));
        }
        self.visible_subscription(caller, &uid).await?;
        self.authorize(caller, &rpc::RETRY_DELIVERY, &uid)?;
        let event = (!req.event_id.is_empty()).then_some(req.event_id.as_str());
        let n = self
            .store
            .retry_deliveries(uid.as_str(), event, self.clock.now_millis())
            .await?;
        if n == 0
            && let Some(id) = event
        {
            return Err(Error::not_found("events.chainguard.dev/FailedDelivery", id));
        }
        self.delivery_status(&uid).await
    }

    async fn delivery_status(&self, uid: &Uidp) -> Result<DeliveryStatus> {
        let s = self
            .store
            .get_subscription(uid)
            .await?
            .ok_or_else(|| Error::not_found(ward_store::events::SUBSCRIPTION_TYPE, uid.as_str()))?;
        let (pending, failed) = self.store.deliveries(uid.as_str(), FAILED_SHOWN).await?;
        let at = |ms: i64| (ms > 0).then(|| Timestamp::from_millis(ms));
        Ok(DeliveryStatus {
            subscription: s.uid,
            last_success_time: at(s.last_success_time),
            last_failure_time: at(s.last_failure_time),
            last_failure_status: i32::try_from(s.last_failure_status).unwrap_or(0),
            last_failure_error: s.last_failure_error,
            pending,
            delivered: s.delivered,
            failed: failed
                .into_iter()
                .map(|f| FailedDelivery {
                    event_id: f.event_id,
                    event_type: f.event_type,
                    attempts: i32::try_from(f.attempts).unwrap_or(i32::MAX),
                    status: i32::try_from(f.status).unwrap_or(0),
                    error: f.error,
                    failed_time: Some(Timestamp::from_millis(f.time)),
                })
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_tokens_round_trip_and_refuse_strangers() {
        assert_eq!(open_token(&issue_token(42)).unwrap(), Some(42));
        assert_eq!(open_token("").unwrap(), None);
        assert!(open_token("bm9wZQ").is_err());
        assert!(open_token("!!").is_err());
    }

    #[test]
    fn act_is_a_string_map() {
        let m = act_map(r#"{"iss":"https://issuer","sub":"x","aud":["a","b"]}"#);
        assert_eq!(m["iss"], "https://issuer");
        assert_eq!(m["aud"], r#"["a","b"]"#);
        assert!(act_map("{}").is_empty());
        assert!(act_map("not json").is_empty());
    }
}
