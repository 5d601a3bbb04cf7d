//! The event log on PostgreSQL.

use async_trait::async_trait;
use sqlx::PgConnection;
use ward_core::listing::{ListQuery, Page};
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};

use super::{PostgresStore, lock};
use crate::events::{
    Attempt, DELIVER, Delivered, EVENT_COLUMNS, Emit, EventQuery, EventRecord, EventStore, Expired,
    FailedDeliveryRecord, MAX_PENDING_PER_SUBSCRIPTION, MAX_SUBSCRIPTIONS_PER_GROUP, Position, QueryValue,
    SUBSCRIPTION_COLUMNS, SUBSCRIPTION_TYPE, SubscriptionRecord, Tail, TailMove, delivered_per_subscription, query_sql,
    root_of,
};
use crate::{GROUP_TYPE, db_err};

/// One subscription's queued deliveries (`$sub` is its uid), on the
/// `jobs_deliveries` index: keys `<uid>|…` in the C collation.
fn deliveries_of(sub: &str) -> String {
    format!(
        "kind = 'deliver' AND (key COLLATE \"C\") >= (({sub}) || '|') COLLATE \"C\" \
         AND (key COLLATE \"C\") < (({sub}) || '}}') COLLATE \"C\""
    )
}

/// A failed delivery's columns, in [`FailedDeliveryRecord`]'s order.
const FAILED_COLUMNS: &str = "subscription_uid, event_id, event_type, attempts, status, error, time";

/// Appends `e` to the log, inside the caller's transaction (its `txid`
/// is the transaction's). Its deliveries read it from there (each
/// subscription's tail): a write with subscriptions writes what one
/// without does.
pub(crate) async fn insert_event(c: &mut PgConnection, e: &EventRecord) -> Result<()> {
    sqlx::query(
        "INSERT INTO events (id, type, subject, group_uid, actor, act, body, audience, time, root) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(&e.id)
    .bind(&e.event_type)
    .bind(&e.subject)
    .bind(&e.group_uid)
    .bind(&e.actor)
    .bind(&e.act)
    .bind(&e.body)
    .bind(&e.audience)
    .bind(e.time)
    .bind(root_of(&e.group_uid))
    .execute(&mut *c)
    .await
    .map_err(|e| db_err("insert event", e))?;
    Ok(())
}

/// Keeps a delivery that gave up, while its subscription exists (a delete
/// meanwhile took its deliveries with it).
async fn keep_failed(c: &mut PgConnection, f: &FailedDeliveryRecord) -> Result<()> {
    sqlx::query(&format!(
        "INSERT INTO failed_deliveries ({FAILED_COLUMNS}) \
         SELECT $1, $2, $3, $4, $5, $6, $7 WHERE EXISTS (SELECT 1 FROM subscriptions WHERE uid = $1) \
         ON CONFLICT (subscription_uid, event_id) DO UPDATE SET attempts = EXCLUDED.attempts, \
         status = EXCLUDED.status, error = EXCLUDED.error, time = EXCLUDED.time"
    ))
    .bind(&f.subscription_uid)
    .bind(&f.event_id)
    .bind(&f.event_type)
    .bind(f.attempts)
    .bind(f.status)
    .bind(&f.error)
    .bind(f.time)
    .execute(&mut *c)
    .await
    .map_err(|e| db_err("record failed delivery", e))?;
    Ok(())
}

/// The position before every event a transaction still running may yet
/// commit: a tail reads only events of transactions older than the
/// snapshot's oldest running one.
const HORIZON: &str = "pg_snapshot_xmin(pg_current_snapshot())::text::bigint";

/// An event read from a tail, with its transaction's id.
#[derive(sqlx::FromRow)]
struct TailRow {
    txid: i64,
    #[sqlx(flatten)]
    event: EventRecord,
}

/// A tail as claimed.
#[derive(sqlx::FromRow)]
struct ClaimedTail {
    #[sqlx(flatten)]
    subscription: SubscriptionRecord,
    tail_txid: i64,
    tail_seq: i64,
}

#[async_trait]
impl EventStore for PostgresStore {
    async fn list_events(&self, q: &EventQuery) -> Result<Vec<EventRecord>> {
        let (sql, binds) = query_sql(q, true);
        let mut query = sqlx::query_as::<_, EventRecord>(&sql);
        for b in binds {
            query = match b {
                QueryValue::Text(s) => query.bind(s),
                QueryValue::Int(i) => query.bind(i),
            };
        }
        let mut read = self.reads.get().await?;
        let r = query.fetch_all(read.conn()).await;
        read.done(r).map_err(|e| db_err("list events", e))
    }

    async fn append_events(&self, events: &[EventRecord]) -> Result<()> {
        let mut tx = self.begin().await?;
        for e in events {
            insert_event(&mut tx, e).await?;
        }
        tx.commit().await.map_err(|e| db_err("commit", e))
    }

    async fn get_logged_event(&self, id: &str) -> Result<Option<EventRecord>> {
        let mut read = self.reads.get().await?;
        let r = sqlx::query_as(&format!("SELECT {EVENT_COLUMNS} FROM events WHERE id = $1"))
            .bind(id)
            .fetch_optional(read.conn())
            .await;
        read.done(r).map_err(|e| db_err("get event", e))
    }

    async fn logged_events(&self, ids: &[String]) -> Result<Vec<EventRecord>> {
        let mut read = self.reads.get().await?;
        let r = sqlx::query_as(&format!("SELECT {EVENT_COLUMNS} FROM events WHERE id = ANY($1)"))
            .bind(ids)
            .fetch_all(read.conn())
            .await;
        read.done(r).map_err(|e| db_err("get events", e))
    }

    async fn finish_deliveries(&self, done: &[Delivered]) -> Result<()> {
        let mut jobs: Vec<(i64, i64)> = done.iter().map(|d| (d.job_id, d.lease_until)).collect();
        jobs.sort_unstable();
        let (ids, leases): (Vec<i64>, Vec<i64>) = jobs.into_iter().unzip();
        let now = done.iter().map(|d| d.time).max().unwrap_or_default();
        let per = delivered_per_subscription(done);
        let mut tx = self.begin().await?;
        sqlx::query(
            "DELETE FROM jobs j USING UNNEST($1::BIGINT[], $2::BIGINT[]) AS d(id, lease) \
             WHERE j.id = d.id AND j.lease_until = d.lease AND j.again = 0",
        )
        .bind(&ids)
        .bind(&leases)
        .execute(&mut *tx)
        .await
        .map_err(|e| db_err("finish deliveries", e))?;
        sqlx::query(
            "UPDATE jobs j SET again = 0, lease_until = NULL, run_after = $3, attempts = 0, last_error = '' \
             FROM UNNEST($1::BIGINT[], $2::BIGINT[]) AS d(id, lease) WHERE j.id = d.id AND j.lease_until = d.lease",
        )
        .bind(&ids)
        .bind(&leases)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(|e| db_err("finish deliveries", e))?;
        let (uids, (counts, times)): (Vec<String>, (Vec<i64>, Vec<i64>)) =
            per.into_iter().map(|(u, n, t)| (u, (n, t))).unzip();
        sqlx::query(
            "UPDATE subscriptions s SET delivered = s.delivered + d.n, \
             last_success_time = GREATEST(s.last_success_time, d.t) \
             FROM UNNEST($1::TEXT[], $2::BIGINT[], $3::BIGINT[]) AS d(uid, n, t) WHERE s.uid = d.uid",
        )
        .bind(&uids)
        .bind(&counts)
        .bind(&times)
        .execute(&mut *tx)
        .await
        .map_err(|e| db_err("count deliveries", e))?;
        tx.commit().await.map_err(|e| db_err("commit", e))
    }

    async fn create_subscription(&self, s: &SubscriptionRecord, emit: Emit<()>) -> Result<()> {
        let mut tx = self.begin().await?;
        // FOR UPDATE: concurrent creates in one group take turns, so the
        // bound holds.
        if !lock(&mut tx, "groups", &s.parent_uid, "FOR UPDATE").await? {
            return Err(Error::not_found(GROUP_TYPE, s.parent_uid.clone()));
        }
        let (held,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM subscriptions WHERE parent_uid = $1")
            .bind(&s.parent_uid)
            .fetch_one(&mut *tx)
            .await
            .map_err(|e| db_err("count subscriptions", e))?;
        if held >= MAX_SUBSCRIPTIONS_PER_GROUP {
            return Err(crate::events::too_many_subscriptions(&s.parent_uid));
        }
        // It receives the events of transactions that began after this one
        // (and this one's own event): every transaction that committed
        // before it has a smaller id.
        sqlx::query(
            "INSERT INTO subscriptions (uid, parent_uid, sink, create_time, tail_txid) \
             VALUES ($1, $2, $3, $4, pg_current_xact_id()::text::bigint)",
        )
        .bind(&s.uid)
        .bind(&s.parent_uid)
        .bind(&s.sink)
        .bind(s.create_time)
        .execute(&mut *tx)
        .await
        .map_err(|e| db_err("create subscription", e))?;
        insert_event(&mut tx, &emit.record(&())).await?;
        tx.commit().await.map_err(|e| db_err("commit", e))
    }

    async fn get_subscription(&self, uid: &Uidp) -> Result<Option<SubscriptionRecord>> {
        self.get_one("subscriptions", SUBSCRIPTION_COLUMNS, uid).await
    }

    async fn list_subscriptions(&self, q: &ListQuery) -> Result<Page<SubscriptionRecord>> {
        self.list("subscriptions", SUBSCRIPTION_COLUMNS, q).await
    }

    async fn delete_subscription(&self, uid: &Uidp, emit: Emit<()>) -> Result<()> {
        let mut tx = self.begin().await?;
        let gone = sqlx::query("DELETE FROM subscriptions WHERE uid = $1")
            .bind(uid.as_str())
            .execute(&mut *tx)
            .await
            .map_err(|e| db_err("delete subscription", e))?;
        if gone.rows_affected() == 0 {
            return Err(Error::not_found(SUBSCRIPTION_TYPE, uid.as_str()));
        }
        sqlx::query(&format!("DELETE FROM jobs WHERE {}", deliveries_of("$1")))
            .bind(uid.as_str())
            .execute(&mut *tx)
            .await
            .map_err(|e| db_err("delete deliveries", e))?;
        sqlx::query("DELETE FROM failed_deliveries WHERE subscription_uid = $1")
            .bind(uid.as_str())
            .execute(&mut *tx)
            .await
            .map_err(|e| db_err("delete failed deliveries", e))?;
        insert_event(&mut tx, &emit.record(&())).await?;
        tx.commit().await.map_err(|e| db_err("commit", e))
    }

    async fn record_attempt(&self, subscription: &str, attempt: Attempt) -> Result<()> {
        match attempt {
            Attempt::Delivered { time } => {
                sqlx::query(
                    "UPDATE subscriptions SET delivered = delivered + 1, \
                     last_success_time = GREATEST(last_success_time, $2) WHERE uid = $1",
                )
                .bind(subscription)
                .bind(time)
                .execute(&self.pool)
                .await
                .map_err(|e| db_err("record delivery", e))?;
            }
            Attempt::Failed {
                time,
                status,
                error,
                gave_up,
            } => {
                let mut tx = self.begin().await?;
                sqlx::query(
                    "UPDATE subscriptions SET last_failure_time = $2, last_failure_status = $3, \
                     last_failure_error = $4 WHERE uid = $1 AND last_failure_time <= $2",
                )
                .bind(subscription)
                .bind(time)
                .bind(status)
                .bind(&error)
                .execute(&mut *tx)
                .await
                .map_err(|e| db_err("record delivery", e))?;
                if let Some(f) = gave_up {
                    keep_failed(&mut tx, &f).await?;
                }
                tx.commit().await.map_err(|e| db_err("commit", e))?;
            }
        }
        Ok(())
    }

    async fn deliveries(&self, subscription: &str, limit: u32) -> Result<(i64, Vec<FailedDeliveryRecord>)> {
        let mut read = self.reads.get().await?;
        let r = sqlx::query_as(&format!(
            "SELECT COUNT(*) FROM (SELECT 1 FROM jobs WHERE {} LIMIT $2) backlog",
            deliveries_of("$1")
        ))
        .bind(subscription)
        .bind(MAX_PENDING_PER_SUBSCRIPTION)
        .fetch_one(read.conn())
        .await;
        let (queued,): (i64,) = read.done(r).map_err(|e| db_err("count deliveries", e))?;
        let r = sqlx::query_as(
            "SELECT COUNT(*) FROM (SELECT 1 FROM subscriptions s JOIN events e \
             ON e.root = split_part(s.parent_uid, '/', 1) AND e.audience = 'customer' \
             AND (e.txid, e.seq) > (s.tail_txid, s.tail_seq) \
             WHERE s.uid = $1 AND (e.group_uid = s.parent_uid OR e.group_uid LIKE s.parent_uid || '/%') \
             LIMIT $2) behind",
        )
        .bind(subscription)
        .bind(MAX_PENDING_PER_SUBSCRIPTION)
        .fetch_one(read.conn())
        .await;
        let (behind,): (i64,) = read.done(r).map_err(|e| db_err("count deliveries", e))?;
        let pending = queued + behind;
        let r = sqlx::query_as(&format!(
            "SELECT {FAILED_COLUMNS} FROM failed_deliveries WHERE subscription_uid = $1 \
             ORDER BY time DESC, event_id LIMIT $2"
        ))
        .bind(subscription)
        .bind(i64::from(limit))
        .fetch_all(read.conn())
        .await;
        let failed = read.done(r).map_err(|e| db_err("failed deliveries", e))?;
        Ok((pending, failed))
    }

    async fn claim_tails(&self, owner: &str, now: i64, lease_ms: i64, limit: u32) -> Result<Vec<Tail>> {
        // Its own tails are renewed (waiting for a row its own batch is
        // moving: skipping it would read as losing the tail); free ones are
        // taken with SKIP LOCKED (one another replica is claiming is its).
        let mut rows: Vec<ClaimedTail> = sqlx::query_as(&format!(
            "UPDATE subscriptions SET tail_until = $2 WHERE tail_owner = $1 \
             RETURNING {SUBSCRIPTION_COLUMNS}, tail_txid, tail_seq"
        ))
        .bind(owner)
        .bind(now + lease_ms)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db_err("renew tails", e))?;
        let room = i64::from(limit) - rows.len() as i64;
        if room > 0 {
            let free: Vec<ClaimedTail> = sqlx::query_as(&format!(
                "UPDATE subscriptions s SET tail_owner = $1, tail_until = $2 FROM \
                 (SELECT uid AS claimed FROM subscriptions WHERE tail_until < $3 AND tail_owner <> $1 \
                  ORDER BY uid LIMIT $4 FOR UPDATE SKIP LOCKED) c \
                 WHERE s.uid = c.claimed RETURNING {SUBSCRIPTION_COLUMNS}, tail_txid, tail_seq"
            ))
            .bind(owner)
            .bind(now + lease_ms)
            .bind(now)
            .bind(room)
            .fetch_all(&self.pool)
            .await
            .map_err(|e| db_err("claim tails", e))?;
            rows.extend(free);
        }
        Ok(rows
            .into_iter()
            .map(|r| Tail {
                subscription: r.subscription,
                position: (r.tail_txid, r.tail_seq),
            })
            .collect())
    }

    async fn log_head(&self) -> Result<i64> {
        sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0) FROM events")
            .fetch_one(&self.pool)
            .await
            .map_err(|e| db_err("log head", e))
    }

    async fn free_tails(&self, now: i64) -> Result<bool> {
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM subscriptions WHERE tail_until < $1)")
            .bind(now)
            .fetch_one(&self.pool)
            .await
            .map_err(|e| db_err("free tails", e))
    }

    async fn read_tail(
        &self,
        subscription: &str,
        root: &str,
        after: Position,
        limit: u32,
    ) -> Result<Vec<(Position, EventRecord)>> {
        // On the primary: its snapshot says which transactions are done.
        let rows: Vec<TailRow> = sqlx::query_as(&format!(
            "SELECT txid, {EVENT_COLUMNS} FROM events WHERE root = $1 AND audience = 'customer' \
             AND (txid, seq) > ($2, $3) AND txid < {HORIZON} \
             AND EXISTS (SELECT 1 FROM subscriptions WHERE uid = $5) ORDER BY txid, seq LIMIT $4"
        ))
        .bind(root)
        .bind(after.0)
        .bind(after.1)
        .bind(i64::from(limit))
        .bind(subscription)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db_err("read tail", e))?;
        Ok(rows.into_iter().map(|r| ((r.txid, r.event.seq), r.event)).collect())
    }

    async fn trim_tail(&self, root: &str, after: Position, bound: i64) -> Result<Option<Position>> {
        sqlx::query_as(&format!(
            "SELECT txid, seq FROM events WHERE root = $1 AND audience = 'customer' AND (txid, seq) > ($2, $3) \
                 AND txid < {HORIZON} ORDER BY txid DESC, seq DESC LIMIT 1 OFFSET $4"
        ))
        .bind(root)
        .bind(after.0)
        .bind(after.1)
        .bind(bound)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| db_err("trim tail", e))
    }

    async fn advance_tails(&self, owner: &str, moves: &[TailMove]) -> Result<()> {
        let e = |e| db_err("advance tails", e);
        let mut tx = self.begin().await?;
        for m in moves {
            let held = sqlx::query(
                "UPDATE subscriptions SET tail_txid = $2, tail_seq = $3, delivered = delivered + $4, \
                 last_success_time = GREATEST(last_success_time, $5) WHERE uid = $1 AND tail_owner = $6",
            )
            .bind(&m.subscription)
            .bind(m.position.0)
            .bind(m.position.1)
            .bind(m.delivered)
            .bind(m.last_success)
            .bind(owner)
            .execute(&mut *tx)
            .await
            .map_err(e)?;
            if held.rows_affected() == 0 {
                continue;
            }
            for q in &m.retries {
                sqlx::query(
                    "INSERT INTO jobs (kind, key, run_after, attempts, last_error, create_time) \
                     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (kind, key) DO NOTHING",
                )
                .bind(DELIVER)
                .bind(crate::events::delivery_key(&m.subscription, &q.event_id))
                .bind(q.run_after)
                .bind(q.attempts)
                .bind(&q.error)
                .bind(q.event_time)
                .execute(&mut *tx)
                .await
                .map_err(e)?;
            }
            for f in &m.failed {
                keep_failed(&mut tx, f).await?;
            }
        }
        tx.commit().await.map_err(|e| db_err("commit", e))
    }

    async fn defer_deliveries(&self, subscription: &str, until: i64, expired: &Expired) -> Result<u64> {
        let mut tx = self.begin().await?;
        // SKIP LOCKED: a delivery another replica holds is its to finish.
        let gone: Vec<(String, i64)> = sqlx::query_as(&format!(
            "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE {} AND lease_until IS NULL \
             AND create_time < $2 FOR UPDATE SKIP LOCKED) RETURNING key, attempts",
            deliveries_of("$1")
        ))
        .bind(subscription)
        .bind(expired.queued_before)
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| db_err("expire deliveries", e))?;
        if !gone.is_empty() {
            let (ids, attempts): (Vec<String>, Vec<i64>) = gone
                .into_iter()
                .map(|(k, a)| (k.split_once('|').map_or(k.clone(), |(_, id)| id.to_owned()), a))
                .unzip();
            sqlx::query(&format!(
                "INSERT INTO failed_deliveries ({FAILED_COLUMNS}) \
                 SELECT $1, g.id, COALESCE(e.type, ''), g.attempts, $4, $5, $6 \
                 FROM UNNEST($2::TEXT[], $3::BIGINT[]) AS g(id, attempts) LEFT JOIN events e ON e.id = g.id \
                 WHERE EXISTS (SELECT 1 FROM subscriptions WHERE uid = $1) ON CONFLICT (subscription_uid, event_id) DO UPDATE SET event_type = EXCLUDED.event_type, \
                 attempts = EXCLUDED.attempts, status = EXCLUDED.status, error = EXCLUDED.error, time = EXCLUDED.time"
            ))
            .bind(subscription)
            .bind(&ids)
            .bind(&attempts)
            .bind(expired.status)
            .bind(&expired.error)
            .bind(expired.time)
            .execute(&mut *tx)
            .await
            .map_err(|e| db_err("record expired deliveries", e))?;
        }
        let done = sqlx::query(&format!(
            "UPDATE jobs SET run_after = $2 WHERE {} AND lease_until IS NULL AND run_after < $2",
            deliveries_of("$1")
        ))
        .bind(subscription)
        .bind(until)
        .execute(&mut *tx)
        .await
        .map_err(|e| db_err("defer deliveries", e))?;
        tx.commit().await.map_err(|e| db_err("commit", e))?;
        Ok(done.rows_affected())
    }

    async fn retry_deliveries(&self, subscription: &str, event_id: Option<&str>, now_ms: i64) -> Result<u64> {
        let mut tx = self.begin().await?;
        let which = "subscription_uid = $1 AND ($2::TEXT IS NULL OR event_id = $2)";
        sqlx::query(&format!(
            "INSERT INTO jobs (kind, key, run_after, create_time) \
             SELECT $3, subscription_uid || '|' || event_id, $4, $4 FROM failed_deliveries WHERE {which} \
             ON CONFLICT (kind, key) DO NOTHING"
        ))
        .bind(subscription)
        .bind(event_id)
        .bind(DELIVER)
        .bind(now_ms)
        .execute(&mut *tx)
        .await
        .map_err(|e| db_err("retry deliveries", e))?;
        let n = sqlx::query(&format!("DELETE FROM failed_deliveries WHERE {which}"))
            .bind(subscription)
            .bind(event_id)
            .execute(&mut *tx)
            .await
            .map_err(|e| db_err("retry deliveries", e))?;
        tx.commit().await.map_err(|e| db_err("commit", e))?;
        Ok(n.rows_affected())
    }

    async fn trim_failed_deliveries(&self, before: i64, keep: i64) -> Result<u64> {
        let e = |e| db_err("trim failed deliveries", e);
        let mut tx = self.begin().await?;
        let old = sqlx::query("DELETE FROM failed_deliveries WHERE time < $1")
            .bind(before)
            .execute(&mut *tx)
            .await
            .map_err(e)?;
        let over = sqlx::query(
            "DELETE FROM failed_deliveries f USING (SELECT subscription_uid, event_id FROM (SELECT subscription_uid, \
             event_id, row_number() OVER (PARTITION BY subscription_uid ORDER BY time DESC, event_id) AS n \
             FROM failed_deliveries) r WHERE n > $1) d \
             WHERE f.subscription_uid = d.subscription_uid AND f.event_id = d.event_id",
        )
        .bind(keep)
        .execute(&mut *tx)
        .await
        .map_err(e)?;
        tx.commit().await.map_err(e)?;
        Ok(old.rows_affected() + over.rows_affected())
    }

    async fn prune_events(&self, before: i64, limit: u32) -> Result<u64> {
        let done = sqlx::query(
            "DELETE FROM events WHERE seq IN (SELECT seq FROM events WHERE time < $1 ORDER BY time, seq LIMIT $2)",
        )
        .bind(before)
        .bind(i64::from(limit))
        .execute(&self.pool)
        .await
        .map_err(|e| db_err("prune events", e))?;
        Ok(done.rows_affected())
    }
}
