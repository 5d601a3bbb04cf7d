//! The event log: each change's CloudEvent, written by the store in the same
//! transaction as the change (an outbox), so a change that commits always
//! has its event and one that rolls back never does. The audit trail reads
//! it; delivery to subscriptions reads it too.
//!
//! A write that records an event takes an [`Emit`]: the event's head (type,
//! subject, group, actor, time) and how to render its body from what the
//! write produced. Taking one is part of the write's signature, so a write
//! cannot forget its event.

use async_trait::async_trait;
use ward_core::listing::{ListQuery, Page};
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};

/// An event as stored. `seq` orders the log (assigned on insert; 0 before).
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct EventRecord {
    pub seq: i64,
    /// The CloudEvent id (a UUID): stable across delivery attempts.
    pub id: String,
    /// The CloudEvent type (`dev.chainguard.api.iam.group.created.v1`).
    #[sqlx(rename = "type")]
    pub event_type: String,
    /// The uid of the resource the event is about (`Ce-Subject`).
    pub subject: String,
    /// The group the event belongs to (`Ce-Group`): who may read it and
    /// which subscriptions receive it (those at or above it).
    pub group_uid: String,
    /// The caller's identity (`actor.subject`).
    pub actor: String,
    /// The caller's delegation chain (`actor.act`), JSON; `{}` when none.
    pub act: String,
    /// The RPC's response, proto3 JSON.
    pub body: String,
    /// `customer` (delivered to subscriptions) or `internal` (audit only).
    pub audience: String,
    /// Milliseconds since the Unix epoch.
    pub time: i64,
}

/// The audience of events delivered to subscriptions.
pub const CUSTOMER: &str = "customer";

/// The audience of Ward's own bookkeeping: in the audit trail, never
/// delivered.
pub const INTERNAL: &str = "internal";

/// What a write emits: the head of its event and the body rendered from the
/// write's result, inside the write's transaction.
pub struct Emit<R> {
    head: EventRecord,
    render: Box<dyn FnOnce(&R) -> String + Send>,
}

impl<R> Emit<R> {
    /// An event whose body is rendered from the write's result.
    pub fn new(head: EventRecord, render: impl FnOnce(&R) -> String + Send + 'static) -> Self {
        Emit {
            head,
            render: Box::new(render),
        }
    }

    /// An event whose body is known before the write (`head.body`).
    pub fn fixed(head: EventRecord) -> Self {
        Emit {
            head,
            render: Box::new(|_| String::new()),
        }
    }

    /// The same event for another audience.
    pub fn audience(mut self, audience: &str) -> Self {
        self.head.audience = audience.to_owned();
        self
    }

    /// The event to store for the write's `result`.
    pub fn record(self, result: &R) -> EventRecord {
        let mut e = self.head;
        let body = (self.render)(result);
        if !body.is_empty() {
            e.body = body;
        }
        e
    }
}

impl<R> std::fmt::Debug for Emit<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emit").field("head", &self.head).finish_non_exhaustive()
    }
}

/// Which events an audit read returns: those of groups within one of
/// `scopes`, newest first, before `before_seq` when set.
#[derive(Clone, Debug, Default)]
pub struct EventQuery {
    pub scopes: Vec<String>,
    /// Any of these types; empty: every type.
    pub types: Vec<String>,
    pub actor: Option<String>,
    /// Time range, inclusive, in milliseconds.
    pub since: Option<i64>,
    pub until: Option<i64>,
    pub before_seq: Option<i64>,
    pub limit: u32,
}

/// The resource type named in a subscription's NOT_FOUND.
pub const SUBSCRIPTION_TYPE: &str = ward_core::rpc::Kind::Subscription.type_name();

/// The job kind of one event's delivery to one subscription (key:
/// [`delivery_key`]).
pub const DELIVER: &str = "deliver";

/// Most subscriptions one group may hold.
pub const MAX_SUBSCRIPTIONS_PER_GROUP: i64 = 16;

/// Most deliveries queued for one subscription at once: the outbox's bound.
/// Past it, a new event is not queued for that subscription (it stays in
/// the event log, and the subscription's status shows the backlog at the
/// bound), so a dead sink cannot grow the queue without limit. The bound is
/// checked by the deliverers every second ([`EventStore::refresh_backlogs`]),
/// not on every write, so a burst may pass it by a second's writes.
pub const MAX_PENDING_PER_SUBSCRIPTION: i64 = 10_000;

/// The job key of `event`'s delivery to `subscription`.
pub fn delivery_key(subscription: &str, event: &str) -> String {
    format!("{subscription}|{event}")
}

/// An event subscription and what its deliveries last did.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct SubscriptionRecord {
    pub uid: String,
    pub parent_uid: String,
    pub sink: String,
    pub create_time: i64,
    pub delivered: i64,
    pub last_success_time: i64,
    pub last_failure_time: i64,
    pub last_failure_status: i64,
    pub last_failure_error: String,
}

/// A subscription's columns, in [`SubscriptionRecord`]'s order.
pub(crate) const SUBSCRIPTION_COLUMNS: &str = "uid, parent_uid, sink, create_time, delivered, last_success_time, \
     last_failure_time, last_failure_status, last_failure_error";

/// A delivery that gave up.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct FailedDeliveryRecord {
    pub subscription_uid: String,
    pub event_id: String,
    pub event_type: String,
    pub attempts: i64,
    /// The sink's last HTTP status (0: no answer).
    pub status: i64,
    pub error: String,
    pub time: i64,
}

/// A delivery its sink took: the claimed job, its subscription, and when.
#[derive(Clone, Debug)]
pub struct Delivered {
    pub job_id: i64,
    pub lease_until: i64,
    pub subscription: String,
    pub time: i64,
}

/// Per subscription (sorted by uid, so concurrent batches lock rows in one
/// order): how many of `done` it took, and the latest time.
pub(crate) fn delivered_per_subscription(done: &[Delivered]) -> Vec<(String, i64, i64)> {
    let mut per: std::collections::BTreeMap<&str, (i64, i64)> = std::collections::BTreeMap::new();
    for d in done {
        let e = per.entry(d.subscription.as_str()).or_insert((0, 0));
        e.0 += 1;
        e.1 = e.1.max(d.time);
    }
    per.into_iter().map(|(s, (n, t))| (s.to_owned(), n, t)).collect()
}

/// Deliveries a deferral gives up instead: those queued before
/// `queued_before`, recorded as failed with the sink's last failure.
#[derive(Clone, Debug)]
pub struct Expired {
    pub queued_before: i64,
    pub status: i64,
    pub error: String,
    pub time: i64,
}

/// How one delivery attempt ended, as recorded on its subscription.
#[derive(Clone, Debug)]
pub enum Attempt {
    /// The sink took it (2xx).
    Delivered { time: i64 },
    /// It failed; `gave_up` keeps it as a failed delivery.
    Failed {
        time: i64,
        status: i64,
        error: String,
        gave_up: Option<FailedDeliveryRecord>,
    },
}

#[async_trait]
pub trait EventStore {
    /// Events matching `q`, newest first, at most `q.limit`.
    async fn list_events(&self, q: &EventQuery) -> Result<Vec<EventRecord>>;
    /// Appends events that record no change of their own (registry pulls,
    /// refused pushes), in one transaction; their deliveries queue as any
    /// event's do.
    async fn append_events(&self, events: &[EventRecord]) -> Result<()>;
    /// The event with this CloudEvent id.
    async fn get_logged_event(&self, id: &str) -> Result<Option<EventRecord>>;
    /// The events with these ids that the log still keeps, in any order
    /// (a deliverer reads its whole claim at once).
    async fn logged_events(&self, ids: &[String]) -> Result<Vec<EventRecord>>;
    /// Deletes events older than `before` (milliseconds), at most `limit` of
    /// them; returns how many went.
    async fn prune_events(&self, before: i64, limit: u32) -> Result<u64>;

    /// Inserts a subscription and its event. NOT_FOUND if its group does not
    /// exist; FAILED_PRECONDITION past [`MAX_SUBSCRIPTIONS_PER_GROUP`].
    async fn create_subscription(&self, s: &SubscriptionRecord, emit: Emit<()>) -> Result<()>;
    async fn get_subscription(&self, uid: &Uidp) -> Result<Option<SubscriptionRecord>>;
    async fn list_subscriptions(&self, q: &ListQuery) -> Result<Page<SubscriptionRecord>>;
    /// Deletes a subscription with its queued and failed deliveries, and
    /// records its event. NOT_FOUND if it is gone.
    async fn delete_subscription(&self, uid: &Uidp, emit: Emit<()>) -> Result<()>;
    /// Records an attempt on its subscription (and a delivery that gave up).
    async fn record_attempt(&self, subscription: &str, attempt: Attempt) -> Result<()>;
    /// Deliveries the sinks took, in one transaction: each job ends (as
    /// `finish_job` with `Done` does), and each subscription counts them and
    /// its last success. What one delivery's three writes were, for a batch.
    async fn finish_deliveries(&self, done: &[Delivered]) -> Result<()>;
    /// Deliveries of `subscription` queued or being retried (counted up to
    /// [`MAX_PENDING_PER_SUBSCRIPTION`]), and those that gave up, newest
    /// first, at most `limit`.
    async fn deliveries(&self, subscription: &str, limit: u32) -> Result<(i64, Vec<FailedDeliveryRecord>)>;
    /// Marks each subscription whose queued deliveries reached
    /// [`MAX_PENDING_PER_SUBSCRIPTION`] as backlogged (new events skip it),
    /// and clears the mark of those below it.
    async fn refresh_backlogs(&self) -> Result<()>;
    /// Moves the queued deliveries of `subscription` that would run before
    /// `until` to `until` (its sink is backing off); returns how many. Those
    /// queued before `expired.queued_before` would only run past their give-up
    /// time: they fail for good now, with the sink's last failure, all in the
    /// same transaction (a sink dead for a day gives its whole backlog up at
    /// once, not one probe at a time).
    async fn defer_deliveries(&self, subscription: &str, until: i64, expired: &Expired) -> Result<u64>;
    /// Queues failed deliveries of `subscription` again (one event's, or
    /// every one), at `now_ms`; returns how many.
    async fn retry_deliveries(&self, subscription: &str, event_id: Option<&str>, now_ms: i64) -> Result<u64>;
}

/// The groups whose subscriptions receive an event of `group`: the group
/// and each of its ancestors.
pub(crate) fn receiving_groups(group: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut end = 0;
    for (i, ch) in group.char_indices() {
        if ch == '/' {
            out.push(group[..i].to_owned());
        }
        end = i + ch.len_utf8();
    }
    if end > 0 {
        out.push(group.to_owned());
    }
    out
}

/// The event log's columns, in [`EventRecord`]'s order.
pub(crate) const EVENT_COLUMNS: &str = "seq, id, type, subject, group_uid, actor, act, body, audience, time";

/// SQL for `q`'s conditions after `WHERE`, with placeholders from 1 (`?N`
/// on SQLite, `$N` on PostgreSQL), and the values to bind in order.
pub(crate) fn query_sql(q: &EventQuery, dollar: bool) -> (String, Vec<QueryValue>) {
    let mut binds: Vec<QueryValue> = Vec::new();
    let p = |n: usize| if dollar { format!("${n}") } else { format!("?{n}") };
    let mut parts = vec![crate::vulns::within_sql("group_uid", q.scopes.len(), 1, dollar)];
    binds.extend(q.scopes.iter().cloned().map(QueryValue::Text));
    if !q.types.is_empty() {
        let list: Vec<String> = (0..q.types.len()).map(|i| p(binds.len() + 1 + i)).collect();
        parts.push(format!("type IN ({})", list.join(", ")));
        binds.extend(q.types.iter().cloned().map(QueryValue::Text));
    }
    if let Some(a) = &q.actor {
        parts.push(format!("actor = {}", p(binds.len() + 1)));
        binds.push(QueryValue::Text(a.clone()));
    }
    if let Some(t) = q.since {
        parts.push(format!("time >= {}", p(binds.len() + 1)));
        binds.push(QueryValue::Int(t));
    }
    if let Some(t) = q.until {
        parts.push(format!("time <= {}", p(binds.len() + 1)));
        binds.push(QueryValue::Int(t));
    }
    if let Some(s) = q.before_seq {
        parts.push(format!("seq < {}", p(binds.len() + 1)));
        binds.push(QueryValue::Int(s));
    }
    let limit = p(binds.len() + 1);
    binds.push(QueryValue::Int(i64::from(q.limit)));
    (
        format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE {} ORDER BY seq DESC LIMIT {limit}",
            parts.join(" AND ")
        ),
        binds,
    )
}

/// A value bound into [`query_sql`]'s statement.
#[derive(Clone, Debug)]
pub(crate) enum QueryValue {
    Text(String),
    Int(i64),
}

/// The error for a group already holding the most subscriptions.
pub(crate) fn too_many_subscriptions(group: &str) -> Error {
    Error::precondition(
        "TOO_MANY_SUBSCRIPTIONS",
        group,
        format!("a group holds at most {MAX_SUBSCRIPTIONS_PER_GROUP} subscriptions; delete one first"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_reaches_its_group_and_every_ancestor() {
        assert_eq!(receiving_groups("a/b/c"), vec!["a", "a/b", "a/b/c"]);
        assert_eq!(receiving_groups("a"), vec!["a"]);
        assert!(receiving_groups("").is_empty());
    }
}
