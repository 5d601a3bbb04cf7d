//! First attempts, read from the event log. Each subscription has a tail:
//! the position in the log up to which its events were delivered or handed
//! to the retry queue. A server leases the tails it reads (renewed every
//! [`CLAIM_EVERY`]; a server killed leaves them to another when the lease
//! expires) and runs one task per tail: read the next customer events of
//! the subscription's organization, deliver those of its group and below
//! (up to [`PER_SUBSCRIPTION`] at once), then move the tail past them in
//! one write that also counts the deliveries and queues the failed ones as
//! retry jobs. A write with subscriptions therefore costs what a write
//! without them does (its event is in the log either way), and a delivery
//! costs the deliverer a share of one read and one write per batch instead
//! of three writes of its own.
//!
//! At least once: a server that dies between delivering a batch and moving
//! its tail leaves the batch to be delivered again, with the same `Ce-Id`.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use tokio::task::JoinSet;
use ward_store::events::{
    Attempt, EventRecord, FailedDeliveryRecord, MAX_PENDING_PER_SUBSCRIPTION, Position, QueuedDelivery,
    SubscriptionRecord, TailMove, receives, root_of,
};
use ward_store::vulns::{JobEnd, JobRecord};

use super::{BUSY_WAIT_MS, GIVE_UP_AFTER_MS, LEASE_MS, PER_SUBSCRIPTION, POLL, Sinks, deliver};
use crate::ward::Ward;

/// How often a server renews its tails' leases (and claims free ones).
const CLAIM_EVERY: Duration = Duration::from_secs(1);
/// How often a server looks for free tails between renewals: a new
/// subscription's first events wait for this, not for a renewal.
const LOOK_EVERY: Duration = Duration::from_millis(100);
/// How often a server trims the failed deliveries kept.
const TRIM_FAILED_EVERY: Duration = Duration::from_secs(60);
/// Tails one server reads at most.
const MAX_TAILS: u32 = 10_000;
/// Events a tail reads at once: one batch, one write.
const BATCH: u32 = 128;
/// How often a tail checks the outbox's bound.
const TRIM_EVERY_MS: i64 = 1_000;
/// How long an idle tail waits for the log's head to move before it reads
/// anyway (on PostgreSQL an event may become readable without the head
/// moving, when an older transaction ends).
const IDLE_READ_EVERY: Duration = Duration::from_millis(100);

/// Deliveries a tail runs at once when it keeps up: a fast sink (a few
/// milliseconds a delivery) takes thousands a second over a few
/// connections, and more at once only costs the machine (context switches,
/// connections): on the 2-core bench, writes beside a live sink ran at
/// ~0.75x of those without one with 32 at once, ~0.9x with 4.
const MIN_WIDTH: usize = 4;
/// A tail stops starting deliveries this long before its lease ends, when
/// renewing it keeps failing.
const LEASE_MARGIN_MS: i64 = 5_000;

/// Claims tails and runs one task per tail held, until dropped (the tasks
/// with it).
pub(super) async fn run(ward: Arc<Ward>, owner: String, permits: Arc<tokio::sync::Semaphore>, sinks: Arc<Sinks>) {
    let lease = Arc::new(AtomicI64::new(0));
    // The log's head, read once per poll for every idle tail of this server.
    let (head_tx, head) = tokio::sync::watch::channel(0_i64);
    let watcher = ward.clone();
    let _head_watch = AbortOnDrop(tokio::spawn(async move {
        loop {
            if let Ok(h) = watcher.store.log_head().await {
                head_tx.send_if_modified(|v| std::mem::replace(v, h) != h);
            }
            tokio::time::sleep(POLL).await;
        }
    }));
    // Each task with the flag that stops it: a task is never aborted (its
    // deliveries in flight would leave their sink's slots taken), it stops
    // at its next delivery, leaving the rest of its batch to the tail's
    // next reader.
    let mut tasks: HashMap<String, (Arc<AtomicBool>, tokio::task::AbortHandle)> = HashMap::new();
    let mut set = JoinSet::new();
    let mut ticker = tokio::time::interval(LOOK_EVERY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut renewed: Option<tokio::time::Instant> = None;
    let mut trimmed = tokio::time::Instant::now();
    loop {
        ticker.tick().await;
        while set.try_join_next().is_some() {}
        if trimmed.elapsed() >= TRIM_FAILED_EVERY {
            trimmed = tokio::time::Instant::now();
            match ward.trim_failed_deliveries().await {
                Ok(0) => {}
                Ok(n) => tracing::info!(n, "forgot failed deliveries past their bound"),
                Err(e) => tracing::warn!(error = %e.message(), "trimming failed deliveries failed"),
            }
        }
        let now = ward.clock.now_millis();
        let due = renewed.is_none_or(|t| t.elapsed() >= CLAIM_EVERY);
        if !due && !ward.store.free_tails(now).await.unwrap_or(false) {
            continue;
        }
        renewed = Some(tokio::time::Instant::now());
        let tails = match ward.store.claim_tails(&owner, now, LEASE_MS, MAX_TAILS).await {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(error = %e.message(), "claiming event subscriptions' tails failed");
                continue;
            }
        };
        lease.store(now + LEASE_MS, Ordering::Relaxed);
        if tails.len() >= MAX_TAILS as usize {
            tracing::warn!(
                held = tails.len(),
                "this server reads as many subscriptions' tails as it may; others wait for another server"
            );
        }
        // Tails no longer held (deleted, or taken by another server after a
        // lapse) stop; new ones start from their stored position.
        let held: HashMap<String, _> = tails.into_iter().map(|t| (t.subscription.uid.clone(), t)).collect();
        tasks.retain(|uid, (stop, task)| {
            let keep = held.contains_key(uid) && !task.is_finished();
            if !keep {
                stop.store(true, Ordering::Relaxed);
            }
            keep
        });
        for (uid, t) in held {
            if tasks.contains_key(&uid) {
                continue;
            }
            let reader = Reader {
                ward: ward.clone(),
                owner: owner.clone(),
                sub: Arc::new(t.subscription),
                position: t.position,
                permits: permits.clone(),
                sinks: sinks.clone(),
                lease: lease.clone(),
                width: MIN_WIDTH,
                stop: Arc::new(AtomicBool::new(false)),
                head: head.clone(),
            };
            let stop = reader.stop.clone();
            tasks.insert(uid, (stop, set.spawn(reader.run())));
        }
    }
}

/// One tail, read by one task.
struct Reader {
    ward: Arc<Ward>,
    owner: String,
    sub: Arc<SubscriptionRecord>,
    position: Position,
    permits: Arc<tokio::sync::Semaphore>,
    sinks: Arc<Sinks>,
    /// Until when this server's leases hold (as last renewed).
    lease: Arc<AtomicI64>,
    /// Deliveries run at once: doubled (up to [`PER_SUBSCRIPTION`]) after
    /// a full batch (the tail is behind: a slow sink needs more at once),
    /// halved (down to [`MIN_WIDTH`]) after one that was not.
    width: usize,
    /// Set when this server no longer holds the tail.
    stop: Arc<AtomicBool>,
    /// The log's head: an idle tail waits for it to move.
    head: tokio::sync::watch::Receiver<i64>,
}

/// Aborts its task when dropped (with the deliverer).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How one delivery of a batch ended.
struct Ended {
    event: EventRecord,
    end: JobEnd,
    down: Option<i64>,
    attempt: Option<Attempt>,
}

impl Reader {
    /// Whether it may start another delivery: it still holds the tail,
    /// with time left on the lease.
    fn holds(&self, now: i64) -> bool {
        !self.stop.load(Ordering::Relaxed) && now + LEASE_MARGIN_MS < self.lease.load(Ordering::Relaxed)
    }

    async fn run(mut self) {
        let root = root_of(&self.sub.parent_uid).to_owned();
        let mut trimmed = 0;
        let mut written = 0;
        let mut stored = self.position;
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            let now = self.ward.clock.now_millis();
            if !self.holds(now) {
                tokio::time::sleep(POLL).await;
                continue;
            }
            if now - trimmed >= TRIM_EVERY_MS {
                trimmed = now;
                self.trim(&root).await;
            }
            if let Some(until) = self.sinks.paused_until(&self.sub.uid, now) {
                let wait = (until - now).clamp(1, CLAIM_EVERY.as_millis() as i64);
                tokio::time::sleep(Duration::from_millis(wait as u64)).await;
                continue;
            }
            // What the head says now is what this read covers.
            self.head.borrow_and_update();
            let events = match self
                .ward
                .store
                .read_tail(&self.sub.uid, &root, self.position, BATCH)
                .await
            {
                Ok(e) => e,
                Err(e) => {
                    tracing::warn!(error = %e.message(), "reading a subscription's events failed");
                    tokio::time::sleep(CLAIM_EVERY).await;
                    continue;
                }
            };
            let Some((last, _)) = events.last() else {
                // Caught up: a position moved only in memory is written.
                if self.position != stored {
                    let moved = TailMove {
                        subscription: self.sub.uid.clone(),
                        position: self.position,
                        ..TailMove::default()
                    };
                    if self.ward.store.advance_tails(&self.owner, &[moved]).await.is_ok() {
                        stored = self.position;
                    }
                }
                if let Ok(Err(_)) = tokio::time::timeout(IDLE_READ_EVERY, self.head.changed()).await {
                    // The head is no longer watched: read at that pace.
                    tokio::time::sleep(IDLE_READ_EVERY).await;
                }
                continue;
            };
            self.width = if events.len() == BATCH as usize {
                (self.width * 2).min(PER_SUBSCRIPTION)
            } else {
                (self.width / 2).max(MIN_WIDTH)
            };
            let mut batch = TailMove {
                subscription: self.sub.uid.clone(),
                position: *last,
                ..TailMove::default()
            };
            let mine = events
                .into_iter()
                .map(|(_, e)| e)
                .filter(|e| receives(&self.sub.parent_uid, &e.group_uid));
            if !self.deliver(mine, &mut batch).await {
                // Stopped mid-batch: the tail's next reader delivers it again.
                continue;
            }
            // A batch with nothing for this subscription moves the tail in
            // memory; it is written at most once a second (a reader that
            // dies meanwhile leaves events of other groups to read again).
            let idle = batch.delivered == 0 && batch.retries.is_empty() && batch.failed.is_empty();
            let now = self.ward.clock.now_millis();
            if idle && now - written < TRIM_EVERY_MS {
                self.position = batch.position;
                continue;
            }
            written = now;
            match self
                .ward
                .store
                .advance_tails(&self.owner, std::slice::from_ref(&batch))
                .await
            {
                Ok(()) => {
                    self.position = batch.position;
                    stored = batch.position;
                }
                Err(e) => {
                    // Delivered again from the same place: at least once.
                    tracing::warn!(error = %e.message(), "moving a subscription's tail failed");
                    tokio::time::sleep(CLAIM_EVERY).await;
                }
            }
        }
    }

    /// The outbox's bound: a tail more than [`MAX_PENDING_PER_SUBSCRIPTION`]
    /// events behind skips the oldest.
    async fn trim(&mut self, root: &str) {
        let skip = match self
            .ward
            .store
            .trim_tail(root, self.position, MAX_PENDING_PER_SUBSCRIPTION)
            .await
        {
            Ok(Some(p)) => p,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e.message(), "checking a subscription's backlog failed");
                return;
            }
        };
        tracing::warn!(subscription = %self.sub.uid, "a subscription's backlog passed its bound: its oldest events are skipped");
        let moved = TailMove {
            subscription: self.sub.uid.clone(),
            position: skip,
            ..TailMove::default()
        };
        if self.ward.store.advance_tails(&self.owner, &[moved]).await.is_ok() {
            self.position = skip;
        }
    }

    /// Delivers a batch's events (in order of start, up to the sink's
    /// slots at once) and records in `batch` how each ended; false when it
    /// stopped before the end (the tail was lost, or its lease runs out).
    async fn deliver(&self, events: impl Iterator<Item = EventRecord>, batch: &mut TailMove) -> bool {
        let mut complete = true;
        let mut running = JoinSet::new();
        let clock = self.ward.clock.clone();
        for event in events {
            if !self.holds(clock.now_millis()) {
                complete = false;
                break;
            }
            while running.len() >= self.width {
                if let Some(Ok(done)) = running.join_next().await {
                    self.ended(done, batch).await;
                }
            }
            let now = clock.now_millis();
            // Past its give-up time before its first attempt (the sink was
            // down, or every server was, for a day): kept as failed.
            if now > event.time + GIVE_UP_AFTER_MS {
                batch.failed.push(FailedDeliveryRecord {
                    subscription_uid: self.sub.uid.clone(),
                    event_id: event.id.clone(),
                    event_type: event.event_type.clone(),
                    attempts: 0,
                    status: self.sub.last_failure_status,
                    error: format!(
                        "not delivered within {} hours of the event",
                        GIVE_UP_AFTER_MS / 3_600_000
                    ),
                    time: now,
                });
                continue;
            }
            let started = match self.sinks.slot(&self.sub.uid, &*clock).await {
                Ok(t) => t,
                Err(until) => {
                    // The sink backs off: the rest wait in the retry queue.
                    batch.retries.push(retry(&event, until, 0, String::new()));
                    continue;
                }
            };
            let Ok(permit) = self.permits.clone().acquire_owned().await else {
                complete = false;
                break;
            };
            let (ward, sinks, sub) = (self.ward.clone(), self.sinks.clone(), self.sub.clone());
            running.spawn(async move {
                let job = JobRecord {
                    id: 0,
                    kind: ward_store::events::DELIVER.to_owned(),
                    key: ward_store::events::delivery_key(&sub.uid, &event.id),
                    attempts: 1,
                    lease_until: 0,
                };
                let (end, down, attempt) = deliver(&ward, &job, Some((*sub).clone()), Some(event.clone())).await;
                let down = sinks.leave(&sub.uid, down, ward.clock.now_millis(), started);
                drop(permit);
                Ended {
                    event,
                    end,
                    down,
                    attempt,
                }
            });
        }
        while let Some(done) = running.join_next().await {
            match done {
                Ok(done) => self.ended(done, batch).await,
                // A delivery that panicked is not counted as made: the
                // batch is read again.
                Err(_) => complete = false,
            }
        }
        complete
    }

    /// Records one delivery's end in `batch`; a failure is recorded on the
    /// subscription at once (its status), and a sink going down backs off
    /// its queued retries too.
    async fn ended(&self, done: Ended, batch: &mut TailMove) {
        let Ended {
            event,
            end,
            down,
            attempt,
        } = done;
        match attempt {
            Some(Attempt::Delivered { time }) => {
                batch.delivered += 1;
                batch.last_success = batch.last_success.max(time);
                return;
            }
            Some(a @ Attempt::Failed { .. }) => {
                let expired = match (&a, down) {
                    (
                        Attempt::Failed {
                            status, error, time, ..
                        },
                        Some(until),
                    ) => Some(ward_store::events::Expired {
                        queued_before: until - GIVE_UP_AFTER_MS,
                        status: *status,
                        error: error.clone(),
                        time: *time,
                    }),
                    _ => None,
                };
                if let Err(e) = self.ward.store.record_attempt(&self.sub.uid, a).await {
                    tracing::warn!(error = %e.message(), "recording an event delivery failed");
                }
                if let (Some(until), Some(expired)) = (down, expired)
                    && let Err(e) = self.ward.store.defer_deliveries(&self.sub.uid, until, &expired).await
                {
                    tracing::warn!(error = %e.message(), "deferring a sink's deliveries failed");
                }
            }
            None => {}
        }
        match end {
            JobEnd::Retry { at, error } => batch.retries.push(retry(&event, at, 1, error)),
            JobEnd::Defer { at } => batch.retries.push(retry(&event, at, 0, String::new())),
            JobEnd::Done => {}
        }
    }
}

/// A tail's delivery handed to the retry queue.
fn retry(event: &EventRecord, at: i64, attempts: i64, error: String) -> QueuedDelivery {
    QueuedDelivery {
        event_id: event.id.clone(),
        run_after: at,
        attempts,
        error,
        event_time: event.time,
    }
}

impl Sinks {
    /// Until when `sub`'s sink backs off, if it does.
    pub(super) fn paused_until(&self, sub: &str, now: i64) -> Option<i64> {
        self.map().get(sub).map(|s| s.paused_until).filter(|u| *u > now)
    }

    /// Takes a slot for `sub` as soon as one is free (the time it did), or
    /// says until when its sink backs off.
    pub(super) async fn slot(&self, sub: &str, clock: &dyn ward_core::clock::Clock) -> Result<i64, i64> {
        loop {
            let now = clock.now_millis();
            match self.enter(sub, now) {
                Ok(()) => return Ok(now),
                Err(until) if until > now + BUSY_WAIT_MS => return Err(until),
                Err(_) => {}
            }
            let freed = {
                let mut map = self.map();
                let s = map.entry(sub.to_owned()).or_default();
                s.waiting += 1;
                s.freed.clone()
            };
            match self.wait(sub, &freed, clock).await {
                Ok(t) => return Ok(t),
                Err(until) if until > clock.now_millis() + BUSY_WAIT_MS => return Err(until),
                Err(_) => {}
            }
        }
    }
}
