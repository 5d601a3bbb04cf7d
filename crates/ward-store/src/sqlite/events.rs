//! The event log on SQLite.

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};
use ward_core::listing::{ListQuery, Page};
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};

use super::{SqliteStore, exists};
use crate::GROUP_TYPE;
use crate::events::{
    Attempt, DELIVER, Delivered, EVENT_COLUMNS, Emit, EventQuery, EventRecord, EventStore, Expired,
    FailedDeliveryRecord, MAX_PENDING_PER_SUBSCRIPTION, MAX_SUBSCRIPTIONS_PER_GROUP, Position, QueryValue,
    SUBSCRIPTION_COLUMNS, SUBSCRIPTION_TYPE, SubscriptionRecord, Tail, TailMove, delivered_per_subscription, query_sql,
    root_of,
};

/// Appends `e` to the log, inside the caller's transaction. Its
/// deliveries read it from there (each subscription's tail): a write with
/// subscriptions writes what one without does.
pub(crate) fn insert_event(c: &Connection, e: &EventRecord) -> rusqlite::Result<()> {
    c.prepare_cached(
        "INSERT INTO events (id, type, subject, group_uid, actor, act, body, audience, time, root) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?
    .execute(params![
        e.id,
        e.event_type,
        e.subject,
        e.group_uid,
        e.actor,
        e.act,
        e.body,
        e.audience,
        e.time,
        root_of(&e.group_uid)
    ])?;
    Ok(())
}

/// Keeps a delivery that gave up, while its subscription exists (a delete
/// meanwhile took its deliveries with it).
fn keep_failed(c: &Connection, f: &FailedDeliveryRecord) -> rusqlite::Result<()> {
    c.prepare_cached(&format!(
        "INSERT OR REPLACE INTO failed_deliveries ({FAILED_COLUMNS}) \
         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 WHERE EXISTS (SELECT 1 FROM subscriptions WHERE uid = ?1)"
    ))?
    .execute(params![
        f.subscription_uid,
        f.event_id,
        f.event_type,
        f.attempts,
        f.status,
        f.error,
        f.time
    ])?;
    Ok(())
}

fn subscription_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SubscriptionRecord> {
    Ok(SubscriptionRecord {
        uid: r.get(0)?,
        parent_uid: r.get(1)?,
        sink: r.get(2)?,
        create_time: r.get(3)?,
        delivered: r.get(4)?,
        last_success_time: r.get(5)?,
        last_failure_time: r.get(6)?,
        last_failure_status: r.get(7)?,
        last_failure_error: r.get(8)?,
    })
}

fn failed_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<FailedDeliveryRecord> {
    Ok(FailedDeliveryRecord {
        subscription_uid: r.get(0)?,
        event_id: r.get(1)?,
        event_type: r.get(2)?,
        attempts: r.get(3)?,
        status: r.get(4)?,
        error: r.get(5)?,
        time: r.get(6)?,
    })
}

/// A failed delivery's columns, in [`FailedDeliveryRecord`]'s order.
const FAILED_COLUMNS: &str = "subscription_uid, event_id, event_type, attempts, status, error, time";

fn event_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<EventRecord> {
    Ok(EventRecord {
        seq: r.get(0)?,
        id: r.get(1)?,
        event_type: r.get(2)?,
        subject: r.get(3)?,
        group_uid: r.get(4)?,
        actor: r.get(5)?,
        act: r.get(6)?,
        body: r.get(7)?,
        audience: r.get(8)?,
        time: r.get(9)?,
    })
}

#[async_trait]
impl EventStore for SqliteStore {
    async fn list_events(&self, q: &EventQuery) -> Result<Vec<EventRecord>> {
        let (sql, binds) = query_sql(q, false);
        self.read("list events", move |c| {
            let values: Vec<rusqlite::types::Value> = binds
                .into_iter()
                .map(|b| match b {
                    QueryValue::Text(s) => s.into(),
                    QueryValue::Int(i) => i.into(),
                })
                .collect();
            c.prepare_cached(&sql)?
                .query_map(params_from_iter(values), event_from_row)?
                .collect()
        })
        .await
    }

    async fn append_events(&self, events: &[EventRecord]) -> Result<()> {
        let events = events.to_vec();
        self.write("append events", move |c| {
            let tx = c.savepoint()?;
            for e in &events {
                insert_event(&tx, e)?;
            }
            tx.commit()
        })
        .await
    }

    async fn get_logged_event(&self, id: &str) -> Result<Option<EventRecord>> {
        let id = id.to_owned();
        self.read("get event", move |c| {
            c.prepare_cached(&format!("SELECT {EVENT_COLUMNS} FROM events WHERE id = ?1"))?
                .query_row([id], event_from_row)
                .optional()
        })
        .await
    }

    async fn logged_events(&self, ids: &[String]) -> Result<Vec<EventRecord>> {
        let ids = serde_json::to_string(ids).unwrap_or_else(|_| "[]".into());
        self.read("get events", move |c| {
            c.prepare_cached(&format!(
                "SELECT {EVENT_COLUMNS} FROM events WHERE id IN (SELECT value FROM json_each(?1))"
            ))?
            .query_map([ids], event_from_row)?
            .collect()
        })
        .await
    }

    async fn finish_deliveries(&self, done: &[Delivered]) -> Result<()> {
        let per = delivered_per_subscription(done);
        let mut jobs: Vec<(i64, i64, i64)> = done.iter().map(|d| (d.job_id, d.lease_until, d.time)).collect();
        jobs.sort_unstable();
        self.write("finish deliveries", move |c| {
            let tx = c.savepoint()?;
            {
                let mut gone =
                    tx.prepare_cached("DELETE FROM jobs WHERE id = ?1 AND lease_until = ?2 AND again = 0")?;
                let mut again = tx.prepare_cached(
                    "UPDATE jobs SET again = 0, lease_until = NULL, run_after = ?2, attempts = 0, last_error = '' \
                     WHERE id = ?1 AND lease_until = ?3",
                )?;
                for (id, lease, time) in &jobs {
                    gone.execute([id, lease])?;
                    again.execute([id, time, lease])?;
                }
                let mut counted = tx.prepare_cached(
                    "UPDATE subscriptions SET delivered = delivered + ?2, \
                     last_success_time = MAX(last_success_time, ?3) WHERE uid = ?1",
                )?;
                for (uid, n, time) in &per {
                    counted.execute(params![uid, n, time])?;
                }
            }
            tx.commit()
        })
        .await
    }

    async fn create_subscription(&self, s: &SubscriptionRecord, emit: Emit<()>) -> Result<()> {
        let s = s.clone();
        self.write("create subscription", move |c| {
            let tx = c.savepoint()?;
            if !exists(&tx, "groups", &s.parent_uid)? {
                return Ok(Err(Error::not_found(GROUP_TYPE, s.parent_uid.clone())));
            }
            let held: i64 = tx
                .prepare_cached("SELECT COUNT(*) FROM subscriptions WHERE parent_uid = ?1")?
                .query_row([&s.parent_uid], |r| r.get(0))?;
            if held >= MAX_SUBSCRIPTIONS_PER_GROUP {
                return Ok(Err(crate::events::too_many_subscriptions(&s.parent_uid)));
            }
            // It receives the events committed after it (its own event
            // among them).
            tx.execute(
                "INSERT INTO subscriptions (uid, parent_uid, sink, create_time, tail_seq) \
                 VALUES (?1, ?2, ?3, ?4, (SELECT COALESCE(MAX(seq), 0) FROM events))",
                params![s.uid, s.parent_uid, s.sink, s.create_time],
            )?;
            insert_event(&tx, &emit.record(&()))?;
            tx.commit()?;
            Ok(Ok(()))
        })
        .await?
    }

    async fn get_subscription(&self, uid: &Uidp) -> Result<Option<SubscriptionRecord>> {
        self.get_one(
            "get subscription",
            "subscriptions",
            SUBSCRIPTION_COLUMNS,
            uid,
            subscription_from_row,
        )
        .await
    }

    async fn list_subscriptions(&self, q: &ListQuery) -> Result<Page<SubscriptionRecord>> {
        self.list(
            "list subscriptions",
            "subscriptions",
            SUBSCRIPTION_COLUMNS,
            q,
            subscription_from_row,
        )
        .await
    }

    async fn delete_subscription(&self, uid: &Uidp, emit: Emit<()>) -> Result<()> {
        let u = uid.as_str().to_owned();
        self.write("delete subscription", move |c| {
            let tx = c.savepoint()?;
            if tx.execute("DELETE FROM subscriptions WHERE uid = ?1", [&u])? == 0 {
                return Ok(Err(Error::not_found(SUBSCRIPTION_TYPE, u.clone())));
            }
            tx.execute(
                "DELETE FROM jobs WHERE kind = ?1 AND key >= ?2 || '|' AND key < ?2 || '}'",
                params![DELIVER, u],
            )?;
            tx.execute("DELETE FROM failed_deliveries WHERE subscription_uid = ?1", [&u])?;
            insert_event(&tx, &emit.record(&()))?;
            tx.commit()?;
            Ok(Ok(()))
        })
        .await?
    }

    async fn record_attempt(&self, subscription: &str, attempt: Attempt) -> Result<()> {
        let s = subscription.to_owned();
        self.write("record delivery", move |c| {
            match attempt {
                Attempt::Delivered { time } => {
                    c.prepare_cached(
                        "UPDATE subscriptions SET delivered = delivered + 1, \
                         last_success_time = MAX(last_success_time, ?2) WHERE uid = ?1",
                    )?
                    .execute(params![s, time])?;
                }
                Attempt::Failed {
                    time,
                    status,
                    error,
                    gave_up,
                } => {
                    c.prepare_cached(
                        "UPDATE subscriptions SET last_failure_time = ?2, last_failure_status = ?3, \
                         last_failure_error = ?4 WHERE uid = ?1 AND last_failure_time <= ?2",
                    )?
                    .execute(params![s, time, status, error])?;
                    if let Some(f) = gave_up {
                        keep_failed(c, &f)?;
                    }
                }
            }
            Ok(())
        })
        .await
    }

    async fn deliveries(&self, subscription: &str, limit: u32) -> Result<(i64, Vec<FailedDeliveryRecord>)> {
        let s = subscription.to_owned();
        self.read("deliveries", move |c| {
            let queued: i64 = c
                .prepare_cached(
                    "SELECT COUNT(*) FROM (SELECT 1 FROM jobs WHERE kind = ?1 AND key >= ?2 || '|' \
                     AND key < ?2 || '}' LIMIT ?3)",
                )?
                .query_row(params![DELIVER, s, MAX_PENDING_PER_SUBSCRIPTION], |r| r.get(0))?;
            let tail: Option<(String, i64)> = c
                .prepare_cached("SELECT parent_uid, tail_seq FROM subscriptions WHERE uid = ?1")?
                .query_row([&s], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            let behind: i64 = match tail {
                Some((parent, seq)) => c
                    .prepare_cached(
                        "SELECT COUNT(*) FROM (SELECT 1 FROM events WHERE root = ?1 AND audience = 'customer' \
                         AND seq > ?2 AND (group_uid = ?3 OR group_uid LIKE ?3 || '/%') LIMIT ?4)",
                    )?
                    .query_row(
                        params![root_of(&parent), seq, parent, MAX_PENDING_PER_SUBSCRIPTION],
                        |r| r.get(0),
                    )?,
                None => 0,
            };
            let pending = queued + behind;
            let failed = c
                .prepare_cached(&format!(
                    "SELECT {FAILED_COLUMNS} FROM failed_deliveries WHERE subscription_uid = ?1 \
                     ORDER BY time DESC, event_id LIMIT ?2"
                ))?
                .query_map(params![s, limit], failed_from_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok((pending, failed))
        })
        .await
    }

    async fn claim_tails(&self, owner: &str, now: i64, lease_ms: i64, limit: u32) -> Result<Vec<Tail>> {
        let owner = owner.to_owned();
        self.write("claim tails", move |c| {
            c.prepare_cached(&format!(
                "UPDATE subscriptions SET tail_owner = ?1, tail_until = ?2 WHERE uid IN \
                 (SELECT uid FROM subscriptions WHERE tail_owner = ?1 OR tail_until < ?3 ORDER BY uid LIMIT ?4) \
                 RETURNING {SUBSCRIPTION_COLUMNS}, tail_txid, tail_seq"
            ))?
            .query_map(params![owner, now + lease_ms, now, limit], |r| {
                Ok(Tail {
                    subscription: subscription_from_row(r)?,
                    position: (r.get(9)?, r.get(10)?),
                })
            })?
            .collect()
        })
        .await
    }

    async fn log_head(&self) -> Result<i64> {
        self.read("log head", |c| {
            c.prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM events")?
                .query_row([], |r| r.get(0))
        })
        .await
    }

    async fn free_tails(&self, now: i64) -> Result<bool> {
        self.read("free tails", move |c| {
            c.prepare_cached("SELECT EXISTS (SELECT 1 FROM subscriptions WHERE tail_until < ?1)")?
                .query_row([now], |r| r.get(0))
        })
        .await
    }

    async fn read_tail(
        &self,
        subscription: &str,
        root: &str,
        after: Position,
        limit: u32,
    ) -> Result<Vec<(Position, EventRecord)>> {
        let (subscription, root) = (subscription.to_owned(), root.to_owned());
        self.read("read tail", move |c| {
            c.prepare_cached(&format!(
                "SELECT {EVENT_COLUMNS} FROM events WHERE root = ?1 AND audience = 'customer' AND seq > ?2 \
                 AND EXISTS (SELECT 1 FROM subscriptions WHERE uid = ?4) ORDER BY seq LIMIT ?3"
            ))?
            .query_map(params![root, after.1, limit, subscription], |r| {
                let e = event_from_row(r)?;
                Ok(((0, e.seq), e))
            })?
            .collect()
        })
        .await
    }

    async fn trim_tail(&self, root: &str, after: Position, bound: i64) -> Result<Option<Position>> {
        let root = root.to_owned();
        self.read("trim tail", move |c| {
            c.prepare_cached(
                "SELECT seq FROM events WHERE root = ?1 AND audience = 'customer' AND seq > ?2 \
                 ORDER BY seq DESC LIMIT 1 OFFSET ?3",
            )?
            .query_row(params![root, after.1, bound], |r| Ok((0, r.get(0)?)))
            .optional()
        })
        .await
    }

    async fn advance_tails(&self, owner: &str, moves: &[TailMove]) -> Result<()> {
        let (owner, moves) = (owner.to_owned(), moves.to_vec());
        self.write("advance tails", move |c| {
            let tx = c.savepoint()?;
            {
                let mut advance = tx.prepare_cached(
                    "UPDATE subscriptions SET tail_txid = ?2, tail_seq = ?3, delivered = delivered + ?4, \
                     last_success_time = MAX(last_success_time, ?5) WHERE uid = ?1 AND tail_owner = ?6",
                )?;
                let mut retry = tx.prepare_cached(
                    "INSERT INTO jobs (kind, key, run_after, attempts, last_error, create_time) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (kind, key) DO NOTHING",
                )?;
                for m in &moves {
                    let held = advance.execute(params![
                        m.subscription,
                        m.position.0,
                        m.position.1,
                        m.delivered,
                        m.last_success,
                        owner
                    ])?;
                    if held == 0 {
                        continue;
                    }
                    for q in &m.retries {
                        let key = crate::events::delivery_key(&m.subscription, &q.event_id);
                        retry.execute(params![DELIVER, key, q.run_after, q.attempts, q.error, q.event_time])?;
                    }
                    for f in &m.failed {
                        keep_failed(&tx, f)?;
                    }
                }
            }
            tx.commit()
        })
        .await
    }

    async fn defer_deliveries(&self, subscription: &str, until: i64, expired: &Expired) -> Result<u64> {
        const QUEUED: &str = "j.kind = ?1 AND j.key >= ?2 || '|' AND j.key < ?2 || '}' AND j.lease_until IS NULL";
        /// Deliveries moved per transaction: the one writer's other work
        /// waits for a few milliseconds at a time, not for 10,000 rows.
        const CHUNK: u64 = 1_000;
        let (s, x) = (subscription.to_owned(), expired.clone());
        self.write("expire deliveries", move |c| {
            let tx = c.savepoint()?;
            let queued = QUEUED;
            tx.prepare_cached(&format!(
                "INSERT OR REPLACE INTO failed_deliveries ({FAILED_COLUMNS}) \
                 SELECT ?2, substr(j.key, length(?2) + 2), COALESCE(e.type, ''), j.attempts, ?4, ?5, ?6 \
                 FROM jobs j LEFT JOIN events e ON e.id = substr(j.key, length(?2) + 2) \
                 WHERE {queued} AND j.create_time < ?3 AND EXISTS (SELECT 1 FROM subscriptions WHERE uid = ?2)"
            ))?
            .execute(params![DELIVER, s, x.queued_before, x.status, x.error, x.time])?;
            tx.prepare_cached(&format!(
                "DELETE FROM jobs WHERE id IN (SELECT j.id FROM jobs j WHERE {queued} AND j.create_time < ?3)"
            ))?
            .execute(params![DELIVER, s, x.queued_before])?;
            tx.commit()
        })
        .await?;
        let mut moved = 0;
        loop {
            let s = subscription.to_owned();
            let n = self
                .write("defer deliveries", move |c| {
                    c.prepare_cached(&format!(
                        "UPDATE jobs SET run_after = ?3 WHERE id IN (SELECT j.id FROM jobs j WHERE {QUEUED} \
                         AND j.run_after < ?3 LIMIT ?4)"
                    ))?
                    .execute(params![DELIVER, s, until, CHUNK])
                    .map(|n| n as u64)
                })
                .await?;
            moved += n;
            if n < CHUNK {
                return Ok(moved);
            }
        }
    }

    async fn retry_deliveries(&self, subscription: &str, event_id: Option<&str>, now_ms: i64) -> Result<u64> {
        let s = subscription.to_owned();
        let id = event_id.map(str::to_owned);
        self.write("retry deliveries", move |c| {
            let tx = c.savepoint()?;
            let which = "subscription_uid = ?1 AND (?2 IS NULL OR event_id = ?2)";
            tx.execute(
                &format!(
                    "INSERT INTO jobs (kind, key, run_after, create_time) \
                     SELECT ?3, subscription_uid || '|' || event_id, ?4, ?4 FROM failed_deliveries WHERE {which} \
                     ON CONFLICT (kind, key) DO NOTHING"
                ),
                params![s, id, DELIVER, now_ms],
            )?;
            let n = tx.execute(&format!("DELETE FROM failed_deliveries WHERE {which}"), params![s, id])?;
            tx.commit()?;
            Ok(n as u64)
        })
        .await
    }

    async fn trim_failed_deliveries(&self, before: i64, keep: i64) -> Result<u64> {
        self.write("trim failed deliveries", move |c| {
            let old = c.execute("DELETE FROM failed_deliveries WHERE time < ?1", params![before])?;
            let over = c.execute(
                "DELETE FROM failed_deliveries WHERE rowid IN (SELECT rowid FROM (SELECT rowid, \
                 row_number() OVER (PARTITION BY subscription_uid ORDER BY time DESC, event_id) AS n \
                 FROM failed_deliveries) WHERE n > ?1)",
                params![keep],
            )?;
            Ok((old + over) as u64)
        })
        .await
    }

    async fn prune_events(&self, before: i64, limit: u32) -> Result<u64> {
        self.write("prune events", move |c| {
            let n = c.execute(
                "DELETE FROM events WHERE seq IN (SELECT seq FROM events WHERE time < ?1 ORDER BY time, seq LIMIT ?2)",
                params![before, limit],
            )?;
            Ok(n as u64)
        })
        .await
    }
}
