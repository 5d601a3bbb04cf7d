//! Delivery of events to subscriptions, as the Chainguard platform does it so
//! that existing receivers work unchanged: an HTTP POST in CloudEvents binary
//! mode (`Ce-*` headers), the body `{"actor": …, "body": …}`, and a bearer
//! JWT signed by Ward's issuer with audience `customer`, subject
//! `webhook:<subscription's group>` and the body's digest
//! (`webhook.digest`), so a receiver verifies origin and integrity with
//! Ward's JWKS alone.
//!
//! An event is written in its change's own transaction, and each
//! subscription reads the log from its tail ([`tails`]): a change that
//! commits is delivered even if the server dies right after, and a write
//! costs nothing more for having subscriptions. A failed first attempt
//! becomes a job of the one job queue (kind `deliver`), retried in a lane of
//! its own (a slow sink never holds up other background work). At most
//! [`IN_FLIGHT`] deliveries run at once per server; each attempt is bounded
//! in time and in what it reads. Failures on 5xx, 408, 429 (honouring
//! `Retry-After`), timeouts and connection errors are retried with
//! exponential backoff and jitter for [`GIVE_UP_AFTER_MS`] from the event;
//! then, or at once on any other answer, the delivery is kept as failed
//! (retryable on demand).
//!
//! One sink cannot crowd out the others: a subscription has at most
//! [`PER_SUBSCRIPTION`] deliveries in flight on a server, and a sink that
//! fails that way backs off as a whole (its queued deliveries wait with the
//! failed one, instead of each taking a slot to fail again). The lease makes exactly one replica deliver an
//! event at a time; a replica killed mid-delivery leaves it to another when
//! the lease expires.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng as _;
use serde_json::json;
use sha2::{Digest, Sha256};
use ward_core::uidp::Uidp;
use ward_store::events::{Attempt, Delivered, EventRecord, Expired, FailedDeliveryRecord, SubscriptionRecord};
use ward_store::vulns::{JobEnd, JobRecord, Lane};

use super::log::act_map;
use crate::ward::Ward;

mod tails;

/// How long a claim holds a delivery: well beyond one attempt.
pub const LEASE_MS: i64 = 30_000;
/// One attempt's bound: connect, send, and read the answer.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// Most bytes of a sink's answer read (for the error it reports).
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// How long after its event a delivery is retried before it fails for good.
pub const GIVE_UP_AFTER_MS: i64 = 24 * 60 * 60 * 1000;
/// The longest wait between attempts (and the most a `Retry-After` asks).
pub const MAX_BACKOFF_MS: i64 = 60 * 60 * 1000;
/// Deliveries in flight at once on one server.
pub const IN_FLIGHT: usize = 64;
/// Deliveries in flight at once to one subscription, on one server: a
/// busy sink gets half the slots, never all of them.
pub const PER_SUBSCRIPTION: usize = 32;
/// How long a delivery waits for a busy subscription's slot: in memory
/// (see [`WAITING`]), then deferred in the queue for as long again.
const BUSY_WAIT_MS: i64 = 250;
/// Deliveries of one subscription that wait in memory for its slot, on one
/// server, each holding one of the [`IN_FLIGHT`] slots while it waits. A
/// claim takes as many deliveries as there are free slots, often more than
/// its subscription has; those wait for a slot (which a fast sink frees
/// within milliseconds) instead of going back to the queue for
/// [`BUSY_WAIT_MS`], which put ~300 ms into the p99 latency under load and
/// cost two writes each. Only a fast sink's deliveries wait (see
/// [`FAST_MS`]): a slow one's go back to the queue at once, so they never
/// hold the slots other subscriptions' deliveries could use. A fast sink
/// may fill every slot, and the next free one goes to the oldest due
/// delivery, whichever subscription's.
const WAITING: usize = IN_FLIGHT - PER_SUBSCRIPTION;
/// A sink whose deliveries take at most this long on average (ms) is fast:
/// its [`PER_SUBSCRIPTION`] slots free one every few milliseconds.
const FAST_MS: i64 = 50;
/// How often an idle deliverer looks for due deliveries: most of the
/// latency from a write to its delivery on a quiet server.
const POLL: Duration = Duration::from_millis(25);
/// Lifetime of a delivery's token: a receiver may check it a while later.
const TOKEN_LIFETIME_SECS: i64 = 5 * 60;
/// The audience of delivery tokens, as receivers verify it.
pub const AUDIENCE: &str = "customer";
/// How long a sink's checked address (and its client's open connections)
/// is reused before its name is resolved and checked again.
const PINNED_FOR: Duration = Duration::from_secs(60);
/// Sinks whose clients are kept at once.
const PINNED_SINKS: u64 = 1_000;

/// Clients bound to each sink's checked address, reused for
/// [`PINNED_FOR`] so that deliveries share connections.
pub struct Clients(moka::sync::Cache<String, Arc<ward_auth::upstream::Pinned>>);

impl Default for Clients {
    fn default() -> Self {
        Clients(
            moka::sync::Cache::builder()
                .max_capacity(PINNED_SINKS)
                .time_to_live(PINNED_FOR)
                .build(),
        )
    }
}

/// Starts the deliverer: first attempts read from each subscription's tail
/// of the event log ([`tails`]), retries from the job queue. `owner` names
/// this server in the tails' leases (kept across restarts, so a server
/// that restarts after a crash takes its tails back at once), with the
/// lock on its file ([`owner`]), held while the deliverer runs. The handle
/// stops it (deliveries in flight finish within [`ATTEMPT_TIMEOUT`] or are
/// dropped with the runtime; their leases expire and another attempt
/// follows).
pub fn spawn(ward: Arc<Ward>, (owner, lock): (String, Option<std::fs::File>)) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        // Held for as long as this deliverer runs.
        let _lock = lock;
        let permits = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
        let sinks = Arc::new(Sinks::default());
        tokio::select! {
            _ = tails::run(ward.clone(), owner, permits.clone(), sinks.clone()) => {}
            _ = retries(ward, permits, sinks) => {}
        }
    })
}

/// Delivers the retry queue's due deliveries until the runtime stops.
async fn retries(ward: Arc<Ward>, permits: Arc<tokio::sync::Semaphore>, sinks: Arc<Sinks>) {
    {
        let delivered = finisher(ward.clone());
        loop {
            // Wait for a free slot, then claim as many as are free.
            let Ok(first) = permits.clone().acquire_owned().await else {
                return;
            };
            let free = permits.available_permits() + 1;
            let now = ward.clock.now_millis();
            let jobs = match ward
                .store
                .claim_jobs(Lane::Deliveries, now, LEASE_MS, free as u32)
                .await
            {
                Ok(j) => j,
                Err(e) => {
                    tracing::warn!(error = %e.message(), "claiming event deliveries failed");
                    Vec::new()
                }
            };
            if jobs.is_empty() {
                drop(first);
                tokio::time::sleep(POLL).await;
                continue;
            }
            // The claim's events and subscriptions, read at once (most claims
            // are many events for few subscriptions).
            let (mut events, subs) = prefetch(&ward, &jobs).await;
            let mut first = Some(first);
            for job in jobs {
                let (sub, event_id) = job.key.split_once('|').unwrap_or_default();
                let (sub, event) = (sub.to_owned(), events.remove(event_id));
                let subscription = subs.get(&sub).cloned().flatten();
                let mut started = ward.clock.now_millis();
                let mut waiting = None;
                if let Err(until) = sinks.enter(&sub, started) {
                    waiting = sinks.park(&sub, started);
                    if waiting.is_none() {
                        defer(&ward, &job, until).await;
                        continue;
                    }
                }
                let permit = match first.take() {
                    Some(p) => p,
                    None => match permits.clone().acquire_owned().await {
                        Ok(p) => p,
                        Err(_) => return,
                    },
                };
                let (ward, sinks, delivered) = (ward.clone(), sinks.clone(), delivered.clone());
                tokio::spawn(async move {
                    if let Some(slot) = waiting {
                        match sinks.wait(&sub, &slot, &*ward.clock).await {
                            Ok(entered) => started = entered,
                            Err(until) => {
                                defer(&ward, &job, until).await;
                                drop(permit);
                                return;
                            }
                        }
                    }
                    let (end, down, attempt) = deliver(&ward, &job, subscription, event).await;
                    let now = ward.clock.now_millis();
                    let down = sinks.leave(&sub, down, now, started);
                    // Taken: its writes join the next batch (one transaction
                    // for many deliveries), and the slot is free at once.
                    if let (JobEnd::Done, None, Some(Attempt::Delivered { time })) = (&end, down, &attempt) {
                        let done = Delivered {
                            job_id: job.id,
                            lease_until: job.lease_until,
                            subscription: sub,
                            time: *time,
                        };
                        // Closed only with the runtime: the lease then
                        // expires and the event is delivered again.
                        let _ = delivered.send(done).await;
                        drop(permit);
                        return;
                    }
                    // What the queue waiting out the back-off gives up: the
                    // deliveries that would only run past their give-up time.
                    let expired = match &attempt {
                        Some(Attempt::Failed { status, error, .. }) => down.map(|until| Expired {
                            queued_before: until - GIVE_UP_AFTER_MS,
                            status: *status,
                            error: error.clone(),
                            time: now,
                        }),
                        _ => None,
                    };
                    // The attempt, the job's end and the sink's back-off are
                    // independent writes: at once, they share a commit.
                    let record = async {
                        match attempt {
                            Some(a) => ward.store.record_attempt(&sub, a).await,
                            None => Ok(()),
                        }
                    };
                    let defer = async {
                        match (down, expired) {
                            (Some(until), Some(expired)) => {
                                ward.store.defer_deliveries(&sub, until, &expired).await.map(drop)
                            }
                            _ => Ok(()),
                        }
                    };
                    let finish = ward.store.finish_job(&job, end, ward.clock.now_millis());
                    let (recorded, deferred, finished) = tokio::join!(record, defer, finish);
                    for (what, r) in [
                        ("recording an event delivery", recorded),
                        ("deferring a sink's deliveries", deferred),
                        ("finishing an event delivery", finished),
                    ] {
                        if let Err(e) = r {
                            tracing::warn!(error = %e.message(), "{what} failed");
                        }
                    }
                    drop(permit);
                });
            }
        }
    }
}

/// Puts a claimed delivery back in the queue until `until`, not counting
/// the claim as an attempt.
async fn defer(ward: &Ward, job: &JobRecord, until: i64) {
    if let Err(e) = ward.store.finish_job(job, JobEnd::Defer { at: until }, until).await {
        tracing::warn!(error = %e.message(), "deferring an event delivery failed");
    }
}

/// This server's name in the tails' leases, and the lock that makes it
/// this server's alone. It is kept in the data directory (`deliverer.id`),
/// so a server restarted after a crash holds its tails again at once
/// instead of waiting out its old leases. The file is locked for as long
/// as the lock is held: a second server started on the same directory
/// (replicas sharing it) finds it locked and takes a random id for its run,
/// since two servers under one name would both read the same tails. Random
/// too (for this run only) if the file cannot be kept.
pub fn owner(data_dir: &std::path::Path) -> (String, Option<std::fs::File>) {
    use std::io::{Read as _, Seek as _, Write as _};
    let random = || hex::encode(rand::random::<[u8; 16]>());
    let path = data_dir.join("deliverer.id");
    let mut file = match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(error = %e, "could not keep this server's deliverer id");
            return (random(), None);
        }
    };
    if file.try_lock().is_err() {
        tracing::warn!(
            path = %path.display(),
            "another server delivers events under this data directory's id: this one takes an id for this run"
        );
        return (random(), None);
    }
    let mut kept = String::new();
    if file.read_to_string(&mut kept).is_ok() && !kept.trim().is_empty() {
        return (kept.trim().to_owned(), Some(file));
    }
    let id = random();
    let written = file
        .set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| file.write_all(id.as_bytes()))
        .and_then(|()| file.sync_all());
    if let Err(e) = written {
        tracing::warn!(error = %e, "could not keep this server's deliverer id");
    }
    (id, Some(file))
}

/// Deliveries finished in one batch at most.
const FINISH_BATCH: usize = 512;

/// The task that writes taken deliveries in batches: whatever queued while
/// the last batch was written goes in the next (no waiting to fill one).
fn finisher(ward: Arc<Ward>) -> tokio::sync::mpsc::Sender<Delivered> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Delivered>(IN_FLIGHT * 4);
    tokio::spawn(async move {
        let mut batch = Vec::with_capacity(FINISH_BATCH);
        while rx.recv_many(&mut batch, FINISH_BATCH).await > 0 {
            if let Err(e) = ward.store.finish_deliveries(&batch).await {
                // Their leases expire and they are delivered again: at least once.
                tracing::warn!(error = %e.message(), n = batch.len(), "finishing event deliveries failed");
            }
            batch.clear();
        }
    });
    tx
}

/// A claim's events by id, and its subscriptions by uid (`None`: deleted).
/// What a read that failed leaves out, each delivery reads on its own.
async fn prefetch(
    ward: &Ward,
    jobs: &[JobRecord],
) -> (
    std::collections::HashMap<String, EventRecord>,
    std::collections::HashMap<String, Option<SubscriptionRecord>>,
) {
    let mut ids = Vec::with_capacity(jobs.len());
    let mut subs = std::collections::HashMap::new();
    for (sub, id) in jobs.iter().filter_map(|j| j.key.split_once('|')) {
        ids.push(id.to_owned());
        if !subs.contains_key(sub)
            && let Ok(uid) = Uidp::parse("subscription", sub)
            && let Ok(found) = ward.store.get_subscription(&uid).await
        {
            subs.insert(sub.to_owned(), found);
        }
    }
    let events = match ward.store.logged_events(&ids).await {
        Ok(v) => v.into_iter().map(|e| (e.id.clone(), e)).collect(),
        Err(_) => std::collections::HashMap::new(),
    };
    (events, subs)
}

/// What this server knows of each subscription's sink: deliveries in
/// flight, and until when it backs off. Only subscriptions with deliveries
/// in flight or backing off have an entry.
#[derive(Default)]
struct Sinks(std::sync::Mutex<std::collections::HashMap<String, Sink>>);

#[derive(Default)]
struct Sink {
    in_flight: usize,
    /// Deliveries waiting for a slot ([`WAITING`] at most), and how a
    /// freed slot wakes one.
    waiting: usize,
    freed: Arc<tokio::sync::Notify>,
    /// How long its deliveries take (ms, a moving average of the last few).
    took_ms: i64,
    paused_until: i64,
    /// Failures since the sink last answered: its back-off grows with them
    /// (not with any one delivery's attempts, since each probe may be a
    /// different delivery).
    failures: i64,
    /// When the last counted failure was seen.
    failed_at: i64,
}

impl Sinks {
    /// The sinks' state (a panic while it was held leaves it as it was).
    fn map(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Sink>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes a slot for a delivery to `sub`, or says until when to defer it.
    fn enter(&self, sub: &str, now: i64) -> Result<(), i64> {
        let mut map = self.map();
        let s = map.entry(sub.to_owned()).or_default();
        if s.paused_until > now {
            return Err(s.paused_until);
        }
        if s.in_flight >= PER_SUBSCRIPTION {
            return Err(now + BUSY_WAIT_MS);
        }
        s.in_flight += 1;
        Ok(())
    }

    /// A place among `sub`'s waiting deliveries, if it is busy (not backing
    /// off) and has one free.
    fn park(&self, sub: &str, now: i64) -> Option<Arc<tokio::sync::Notify>> {
        let mut map = self.map();
        let s = map.get_mut(sub)?;
        if s.paused_until > now || s.waiting >= WAITING || s.took_ms > FAST_MS {
            return None;
        }
        s.waiting += 1;
        Some(s.freed.clone())
    }

    /// Waits (a place taken with [`park`](Self::park)) up to
    /// [`BUSY_WAIT_MS`] for a slot: the time it entered, or until when to
    /// defer the delivery (the sink went down, or no slot came).
    async fn wait(
        &self,
        sub: &str,
        freed: &tokio::sync::Notify,
        clock: &dyn ward_core::clock::Clock,
    ) -> Result<i64, i64> {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(BUSY_WAIT_MS as u64);
        let entered = loop {
            let now = clock.now_millis();
            let wake = freed.notified();
            match self.enter(sub, now) {
                Ok(()) => break Ok(now),
                Err(until) if until > now + BUSY_WAIT_MS => break Err(until),
                Err(_) => {}
            }
            if tokio::time::timeout_at(deadline, wake).await.is_err() {
                break Err(now + BUSY_WAIT_MS);
            }
        };
        let mut map = self.map();
        if let Some(s) = map.get_mut(sub) {
            s.waiting = s.waiting.saturating_sub(1);
        }
        entered
    }

    /// Gives the slot back. `down`: the delivery (begun at `started`)
    /// failed in a way worth retrying and asks to wait until then; the sink
    /// then backs off until that or its own back-off, whichever is later,
    /// and the new end of its back-off is returned. No `down`: it answered,
    /// and any back-off ends. Only an attempt begun after the last counted
    /// failure counts as another: the deliveries in flight when a sink goes
    /// down fail together, and are one failure, not 32.
    fn leave(&self, sub: &str, down: Option<i64>, now: i64, started: i64) -> Option<i64> {
        let mut map = self.map();
        let s = map.get_mut(sub)?;
        s.in_flight = s.in_flight.saturating_sub(1);
        s.took_ms = (s.took_ms * 7 + (now - started).max(0)) / 8;
        if s.waiting > 0 {
            s.freed.notify_one();
        }
        let paused = match down {
            Some(d) => {
                if started >= s.failed_at {
                    s.failures += 1;
                    s.failed_at = now;
                }
                let until = d.max(now + backoff_ms(s.failures));
                let longer = until > s.paused_until;
                s.paused_until = s.paused_until.max(until);
                longer.then_some(s.paused_until)
            }
            None => {
                s.failures = 0;
                s.failed_at = 0;
                s.paused_until = 0;
                None
            }
        };
        if s.in_flight == 0 && s.paused_until == 0 && s.waiting == 0 {
            map.remove(sub);
        }
        paused
    }
}

/// Why an attempt failed.
struct Failure {
    /// The sink's HTTP status; 0 when it did not answer.
    status: i64,
    error: String,
    retryable: bool,
    /// What the sink's `Retry-After` asked (milliseconds from now).
    retry_after: Option<i64>,
}

impl Failure {
    fn unanswered(error: impl Into<String>) -> Self {
        Failure {
            status: 0,
            error: error.into(),
            retryable: true,
            retry_after: None,
        }
    }
}

/// One attempt of one job: deliver; say how the job ends, until when the
/// sink backs off (when it failed in a way worth retrying), and what to
/// record on the subscription.
async fn deliver(
    ward: &Ward,
    job: &JobRecord,
    sub: Option<SubscriptionRecord>,
    event: Option<EventRecord>,
) -> (JobEnd, Option<i64>, Option<Attempt>) {
    let now = ward.clock.now_millis();
    let retry_soon = |error: String| (JobEnd::Retry { at: now + 5_000, error }, None, None);
    let Some((sub_uid, event_id)) = job.key.split_once('|') else {
        return (JobEnd::Done, None, None);
    };
    let Ok(uid) = Uidp::parse("subscription", sub_uid) else {
        return (JobEnd::Done, None, None);
    };
    // What the claim's reads did not bring (a failed read, an event pruned
    // or a subscription deleted since), read again on its own.
    let (sub, event) = tokio::join!(
        async {
            match sub {
                Some(s) => Ok(Some(s)),
                None => ward.store.get_subscription(&uid).await,
            }
        },
        async {
            match event {
                Some(e) => Ok(Some(e)),
                None => ward.store.get_logged_event(event_id).await,
            }
        }
    );
    let sub = match sub {
        Ok(Some(s)) => s,
        // Deleted meanwhile: nothing to deliver to.
        Ok(None) => return (JobEnd::Done, None, None),
        Err(e) => return retry_soon(e.message()),
    };
    let event = match event {
        Ok(Some(e)) => e,
        // Pruned past the retention.
        Ok(None) => return (JobEnd::Done, None, None),
        Err(e) => return retry_soon(e.message()),
    };
    // Its own span (a delivery runs after the request that made the event):
    // the sink receives its traceparent.
    let span = if crate::traces::sampled_root() {
        tracing::info_span!(target: crate::traces::SAMPLED_DELIVERY, "deliver", event = %event.id, r#type = %event.event_type)
    } else {
        tracing::info_span!("deliver", event = %event.id, r#type = %event.event_type)
    };
    let outcome = tracing::Instrument::instrument(post(ward, &sub, &event), span).await;
    let now = ward.clock.now_millis();
    let mut down = None;
    let (attempt, end) = match outcome {
        Ok(()) => (Attempt::Delivered { time: now }, JobEnd::Done),
        Err(f) => {
            let delay = f.retry_after.unwrap_or_else(|| backoff_ms(job.attempts));
            let give_up = !f.retryable || now + delay > event.time + GIVE_UP_AFTER_MS;
            tracing::debug!(subscription = %sub.uid, event = %event.id, status = f.status, error = %f.error, give_up, "event delivery failed");
            let gave_up = give_up.then(|| FailedDeliveryRecord {
                subscription_uid: sub.uid.clone(),
                event_id: event.id.clone(),
                event_type: event.event_type.clone(),
                attempts: job.attempts,
                status: f.status,
                error: f.error.clone(),
                time: now,
            });
            if f.retryable {
                down = Some(now + delay);
            }
            let end = if give_up {
                JobEnd::Done
            } else {
                JobEnd::Retry {
                    at: now + delay,
                    error: f.error.clone(),
                }
            };
            (
                Attempt::Failed {
                    time: now,
                    status: f.status,
                    error: f.error,
                    gave_up,
                },
                end,
            )
        }
    };
    (end, down, Some(attempt))
}

/// The wait before attempt `attempts + 1`: 1 s doubling to an hour, with
/// jitter (between half and all of it), so a sink coming back is not hit
/// by every delivery at once.
fn backoff_ms(attempts: i64) -> i64 {
    let full = (1000_i64 << attempts.clamp(1, 13).saturating_sub(1)).min(MAX_BACKOFF_MS);
    rand::thread_rng().gen_range(full / 2..=full)
}

/// The delivery's body: who did it, and the RPC's response.
pub(crate) fn envelope(e: &EventRecord) -> String {
    let actor = json!({"subject": e.actor, "act": act_map(&e.act)});
    // The stored body is the response's proto3 JSON already.
    format!("{{\"actor\":{actor},\"body\":{}}}", e.body)
}

/// `Retry-After`: seconds, or an HTTP date; as milliseconds from `now_ms`,
/// at most [`MAX_BACKOFF_MS`].
fn retry_after_ms(value: &str, now_ms: i64) -> Option<i64> {
    let v = value.trim();
    let ms = match v.parse::<i64>() {
        Ok(secs) => secs.checked_mul(1000)?,
        Err(_) => chrono::DateTime::parse_from_rfc2822(v).ok()?.timestamp_millis() - now_ms,
    };
    Some(ms.clamp(0, MAX_BACKOFF_MS))
}

/// One attempt: the signed POST, and the sink's answer.
async fn post(ward: &Ward, sub: &SubscriptionRecord, e: &EventRecord) -> Result<(), Failure> {
    let body = envelope(e);
    let digest = format!("sha256:{}", hex::encode(Sha256::digest(body.as_bytes())));
    let now = ward.clock.now_secs();
    let claims = json!({
        "iss": ward.tokens.issuer(),
        "sub": format!("webhook:{}", sub.parent_uid),
        "aud": AUDIENCE,
        "iat": now,
        "nbf": now,
        "exp": now + TOKEN_LIFETIME_SECS,
        "webhook": {"digest": digest},
    });
    let token = ward
        .tokens
        .sign(&claims)
        .map_err(|err| Failure::unanswered(err.message()))?;
    let pinned = match ward.sink_clients.0.get(&sub.sink) {
        Some(p) => p,
        None => {
            let p = Arc::new(
                ward_auth::upstream::pinned(&sub.sink, ward.sink_policy, ATTEMPT_TIMEOUT)
                    .await
                    .map_err(Failure::unanswered)?,
            );
            ward.sink_clients.0.insert(sub.sink.clone(), p.clone());
            p
        }
    };
    let time = chrono::DateTime::from_timestamp_millis(e.time)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let request = pinned
        .client
        .post(pinned.url.clone())
        .header("ce-id", &e.id)
        .header("ce-specversion", "1.0")
        .header("ce-source", &ward.api_url)
        .header("ce-type", &e.event_type)
        .header("ce-subject", &e.subject)
        .header("ce-time", time)
        .header("ce-group", &e.group_uid)
        .header("ce-audience", &e.audience)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::AUTHORIZATION, format!("Bearer {token}"))
        .header(http::header::USER_AGENT, concat!("Ward/", env!("CARGO_PKG_VERSION")))
        .body(body);
    let request = match ward_core::traceparent::current() {
        Some(tp) => request.header(ward_core::traceparent::HEADER, tp),
        None => request,
    };
    let mut resp = request.send().await.map_err(|err| {
        // A failed connection is checked afresh next time.
        ward.sink_clients.0.invalidate(&sub.sink);
        let why = if err.is_timeout() {
            format!("the sink did not answer within {} s", ATTEMPT_TIMEOUT.as_secs())
        } else if err.is_connect() {
            "could not connect to the sink".to_owned()
        } else {
            format!("sending to the sink failed: {err}")
        };
        Failure::unanswered(why)
    })?;
    ward_auth::upstream::check_peer(&resp, pinned.addr, &sub.sink).map_err(Failure::unanswered)?;
    let status = resp.status();
    if status.is_success() {
        return Ok(());
    }
    let retry_after = resp
        .headers()
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| retry_after_ms(v, ward.clock.now_millis()));
    // What the sink said, for the status a user reads: bounded.
    let mut said = Vec::new();
    while said.len() < MAX_RESPONSE_BYTES {
        match resp.chunk().await {
            Ok(Some(c)) => said.extend_from_slice(&c[..c.len().min(MAX_RESPONSE_BYTES - said.len())]),
            _ => break,
        }
    }
    // Printable text only: a NUL (which PostgreSQL refuses in text) or a
    // control character from the sink must not make its failure unwritable.
    let text: String = String::from_utf8_lossy(&said)
        .chars()
        .filter(|c| !c.is_control())
        .take(200)
        .collect();
    let code = status.as_u16();
    Err(Failure {
        status: i64::from(code),
        error: format!("the sink answered {status}: {}", text.trim()),
        retryable: status.is_server_error() || code == 429 || code == 408,
        retry_after,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_directory_names_one_running_deliverer() {
        let dir = tempfile::tempdir().unwrap();
        let (first, lock) = owner(dir.path());
        assert!(lock.is_some(), "the first server holds the id");
        let (second, none) = owner(dir.path());
        assert!(none.is_none());
        assert_ne!(first, second, "a second server on the directory takes an id of its own");
        drop(lock);
        let (again, lock) = owner(dir.path());
        assert_eq!(again, first, "kept for the next run");
        assert!(lock.is_some());
    }

    #[test]
    fn a_sink_has_few_slots_and_backs_off_as_a_whole() {
        let sinks = Sinks::default();
        for _ in 0..PER_SUBSCRIPTION {
            assert!(sinks.enter("a", 0).is_ok());
        }
        assert_eq!(sinks.enter("a", 0), Err(BUSY_WAIT_MS), "busy");
        assert!(sinks.enter("b", 0).is_ok(), "another sink is not held up");
        assert_eq!(sinks.leave("a", Some(5_000), 0, 0), Some(5_000));
        assert_eq!(sinks.enter("a", 10), Err(5_000), "backing off");
        // Each failure backs the sink off longer, whichever delivery it was.
        let mut last = 5_000;
        for probe in 1..=8 {
            if let Some(until) = sinks.leave("a", Some(0), probe, probe) {
                assert!(until >= last, "{until} < {last}");
                last = until;
            }
            assert!(sinks.enter("a", 0).is_err());
            sinks.0.lock().unwrap().get_mut("a").unwrap().in_flight += 1;
        }
        assert!(last >= 64_000, "backed off for {last} ms after 9 failures");
        sinks.leave("a", None, 0, 0);
        assert!(sinks.enter("a", 10).is_ok(), "an answer ends the back-off");
        sinks.0.lock().unwrap().get_mut("a").unwrap().in_flight = 1;
        sinks.leave("a", None, 0, 0);
        sinks.leave("b", None, 0, 0);
        assert!(sinks.0.lock().unwrap().is_empty(), "idle sinks are forgotten");
    }

    /// A busy sink's next deliveries wait in memory for its slots (a few,
    /// briefly), so a fast sink's deliveries do not go back to the queue.
    #[tokio::test]
    async fn deliveries_wait_briefly_for_a_busy_sinks_slot() {
        use ward_core::clock::Clock as _;
        let (sinks, clock) = (Arc::new(Sinks::default()), ward_core::clock::SystemClock);
        assert!(sinks.park("a", 0).is_none(), "an idle sink needs no waiting");
        for _ in 0..PER_SUBSCRIPTION {
            assert!(sinks.enter("a", 0).is_ok());
        }
        let places: Vec<_> = (0..WAITING).map(|_| sinks.park("a", 0)).collect();
        assert!(places.iter().all(Option::is_some));
        assert!(sinks.park("a", 0).is_none(), "at most {WAITING} wait");

        // A freed slot lets one waiter in at once.
        let first = places[0].clone().unwrap();
        let waiter = {
            let sinks = sinks.clone();
            tokio::spawn(async move { sinks.wait("a", &first, &ward_core::clock::SystemClock).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        let t = std::time::Instant::now();
        sinks.leave("a", None, 0, 0);
        assert!(waiter.await.unwrap().is_ok(), "the waiter took the freed slot");
        assert!(t.elapsed() < Duration::from_millis(BUSY_WAIT_MS as u64));

        // No slot within the wait: deferred.
        let second = places[1].clone().unwrap();
        let t = std::time::Instant::now();
        let now = clock.now_millis();
        let until = sinks.wait("a", &second, &clock).await.unwrap_err();
        assert!(t.elapsed() >= Duration::from_millis(BUSY_WAIT_MS as u64));
        assert!(until >= now + BUSY_WAIT_MS);
        assert_eq!(
            sinks.0.lock().unwrap()["a"].waiting,
            WAITING - 2,
            "each waiter leaves its place"
        );

        // The sink goes down: a waiter is deferred until its back-off ends.
        let third = places[2].clone().unwrap();
        let waiter = {
            let sinks = sinks.clone();
            tokio::spawn(async move { sinks.wait("a", &third, &ward_core::clock::SystemClock).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        let now = clock.now_millis();
        sinks.leave("a", Some(now + 60_000), now, now);
        assert_eq!(waiter.await.unwrap(), Err(now + 60_000));
    }

    #[test]
    fn a_slow_sinks_deliveries_do_not_wait_for_its_slots() {
        let sinks = Sinks::default();
        for _ in 0..PER_SUBSCRIPTION {
            assert!(sinks.enter("slow", 0).is_ok());
        }
        // Its deliveries took 2 s each.
        for _ in 0..8 {
            sinks.leave("slow", None, 2_000, 0);
            assert!(sinks.enter("slow", 2_000).is_ok());
        }
        assert!(sinks.enter("slow", 2_000).is_err(), "busy");
        assert!(
            sinks.park("slow", 2_000).is_none(),
            "back to the queue, not holding a slot"
        );
    }

    #[test]
    fn deliveries_in_flight_when_a_sink_goes_down_are_one_failure() {
        let sinks = Sinks::default();
        for _ in 0..PER_SUBSCRIPTION {
            assert!(sinks.enter("a", 0).is_ok());
        }
        for _ in 0..PER_SUBSCRIPTION {
            sinks.leave("a", Some(0), 100, 0);
        }
        let s = sinks.0.lock().unwrap();
        let a = s.get("a").unwrap();
        assert_eq!(a.failures, 1);
        assert!(
            a.paused_until <= 100 + 1_000,
            "one failure's back-off: {}",
            a.paused_until
        );
    }

    #[test]
    fn backoff_doubles_with_jitter_up_to_an_hour() {
        for _ in 0..100 {
            let first = backoff_ms(1);
            assert!((500..=1000).contains(&first), "{first}");
            let third = backoff_ms(3);
            assert!((2000..=4000).contains(&third), "{third}");
            let late = backoff_ms(40);
            assert!((MAX_BACKOFF_MS / 2..=MAX_BACKOFF_MS).contains(&late), "{late}");
        }
    }

    #[test]
    fn retry_after_is_seconds_or_a_date_and_bounded() {
        assert_eq!(retry_after_ms("3", 0), Some(3000));
        assert_eq!(retry_after_ms("999999999", 0), Some(MAX_BACKOFF_MS));
        assert_eq!(retry_after_ms("-5", 0), Some(0));
        let now = chrono::DateTime::parse_from_rfc2822("Wed, 21 Oct 2015 07:28:00 GMT")
            .unwrap()
            .timestamp_millis();
        assert_eq!(retry_after_ms("Wed, 21 Oct 2015 07:28:10 GMT", now), Some(10_000));
        assert_eq!(retry_after_ms("soon", 0), None);
    }

    #[test]
    fn the_envelope_carries_the_actor_and_the_body_as_json() {
        let e = EventRecord {
            seq: 1,
            id: "i".into(),
            event_type: "t".into(),
            subject: "s".into(),
            group_uid: "g".into(),
            actor: "a".into(),
            act: r#"{"iss":"https://x","sub":"y","aud":"z"}"#.into(),
            body: r#"{"uid":"u","name":"n"}"#.into(),
            audience: "customer".into(),
            time: 0,
        };
        let v: serde_json::Value = serde_json::from_str(&envelope(&e)).unwrap();
        assert_eq!(v["actor"]["subject"], "a");
        assert_eq!(v["actor"]["act"]["iss"], "https://x");
        assert_eq!(v["body"]["name"], "n");
    }
}
