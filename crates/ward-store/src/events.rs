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

/// Most events one subscription's tail holds back: the outbox's bound. A
/// subscription further behind (a sink dead for a while) skips its oldest
/// events beyond it (they stay in the event log, the audit trail), so a
/// dead sink costs nothing but its place in the log, and one that comes back
/// receives at most this many old events. The tail's reader checks the bound
/// every second, so a burst may pass it by a second's writes.
pub const MAX_PENDING_PER_SUBSCRIPTION: i64 = 10_000;

/// Failed deliveries kept per subscription: the newest, trimmed with the
/// event log's pruning (a sink that refuses every event adds one a write).
pub const MAX_FAILED_PER_SUBSCRIPTION: i64 = 10_000;

/// A place in the event log, in the order deliveries read it:
/// (transaction id, seq). On SQLite, whose one writer commits events in
/// `seq` order, the transaction id is always 0; on PostgreSQL, where
/// transactions commit out of `seq` order, a tail reads only events of
/// transactions older than every one still running.
pub type Position = (i64, i64);

/// A subscription whose tail a server holds (a lease, renewed while it
/// runs), and the position its deliveries reached.
#[derive(Clone, Debug)]
pub struct Tail {
    pub subscription: SubscriptionRecord,
    pub position: Position,
}

/// The organization (root group) of a group: a tail reads its events.
pub fn root_of(group_uid: &str) -> &str {
    group_uid.split('/').next().unwrap_or_default()
}

/// What one tail's batch of deliveries did, written at once: the tail
/// moves to `position`, the sink took `delivered` of them (the latest at
/// `last_success`), `retries` go to the queue, `failed` gave up.
#[derive(Clone, Debug, Default)]
pub struct TailMove {
    pub subscription: String,
    pub position: Position,
    pub delivered: i64,
    pub last_success: i64,
    pub retries: Vec<QueuedDelivery>,
    pub failed: Vec<FailedDeliveryRecord>,
}

/// A delivery handed from a tail to the retry queue.
#[derive(Clone, Debug)]
pub struct QueuedDelivery {
    pub event_id: String,
    /// When it is due.
    pub run_after: i64,
    /// Attempts made (0: deferred before its first, the sink backing off).
    pub attempts: i64,
    pub error: String,
    /// The event's time: the give-up time counts from it.
    pub event_time: i64,
}

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
    /// refused pushes), in one transaction; they are delivered as any
    /// event is.
    async fn append_events(&self, events: &[EventRecord]) -> Result<()>;
    /// The event with this CloudEvent id.
    async fn get_logged_event(&self, id: &str) -> Result<Option<EventRecord>>;
    /// The events with these ids that the log still keeps, in any order
    /// (a deliverer reads its whole claim at once).
    async fn logged_events(&self, ids: &[String]) -> Result<Vec<EventRecord>>;
    /// Deletes events older than `before` (milliseconds), at most `limit` of
    /// them; returns how many went.
    async fn prune_events(&self, before: i64, limit: u32) -> Result<u64>;
    /// Forgets failed deliveries that failed before `before` (their events
    /// are past the retention) and, of each subscription's, all but the
    /// newest `keep`; returns how many went.
    async fn trim_failed_deliveries(&self, before: i64, keep: i64) -> Result<u64>;

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
    /// Deliveries of `subscription` not yet made: the customer events of its
    /// organization after its tail, and its queued retries (counted up to
    /// [`MAX_PENDING_PER_SUBSCRIPTION`] each); and those that gave up,
    /// newest first, at most `limit`.
    async fn deliveries(&self, subscription: &str, limit: u32) -> Result<(i64, Vec<FailedDeliveryRecord>)>;
    /// Leases to `owner` until `now + lease_ms` the tails that are free
    /// (their lease expired) or already its own, at most `limit`; returns
    /// every tail it now holds.
    async fn claim_tails(&self, owner: &str, now: i64, lease_ms: i64, limit: u32) -> Result<Vec<Tail>>;
    /// The log's latest `seq` (0 when empty): one read per server tells
    /// its idle tails whether anything was written.
    async fn log_head(&self) -> Result<i64>;
    /// Whether any tail is free (a new subscription's, or one whose
    /// server's lease lapsed): a read, so servers look often.
    async fn free_tails(&self, now: i64) -> Result<bool>;
    /// The customer events of organization `root` after `after`, in order,
    /// at most `limit`, each with its position (the caller keeps those of
    /// its subscription's group); none once `subscription` is deleted (in
    /// the same read: an event written after the deletion is never read
    /// for it, whichever server deleted it).
    async fn read_tail(
        &self,
        subscription: &str,
        root: &str,
        after: Position,
        limit: u32,
    ) -> Result<Vec<(Position, EventRecord)>>;
    /// Where a tail at `after` skips to when more than `bound` customer
    /// events of `root` follow it (leaving `bound`), or `None`.
    async fn trim_tail(&self, root: &str, after: Position, bound: i64) -> Result<Option<Position>>;
    /// Writes tails' batches in one transaction, each only if `owner`
    /// still holds its tail (otherwise another server delivers them again).
    async fn advance_tails(&self, owner: &str, moves: &[TailMove]) -> Result<()>;
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

/// Whether a subscription under `parent` receives an event of `group`:
/// the group itself or one below it.
pub fn receives(parent: &str, group: &str) -> bool {
    group
        .strip_prefix(parent)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        && !parent.is_empty()
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
        for parent in ["a", "a/b", "a/b/c"] {
            assert!(receives(parent, "a/b/c"), "{parent}");
        }
        for parent in ["a/b/c/d", "a/bb", "a/b/cc", "b", ""] {
            assert!(!receives(parent, "a/b/c"), "{parent}");
        }
        assert!(!receives("a/b", "a/bc"));
        assert_eq!(root_of("a/b/c"), "a");
        assert_eq!(root_of("a"), "a");
    }
}
