//! The event log on PostgreSQL.

use async_trait::async_trait;
use sqlx::PgConnection;
use ward_core::Result;

use super::PostgresStore;
use crate::db_err;
use crate::events::{EventQuery, EventRecord, EventStore, QueryValue, query_sql};

/// Appends `e` to the log, inside the caller's transaction.
pub(crate) async fn insert_event(c: &mut PgConnection, e: &EventRecord) -> Result<()> {
    sqlx::query(
        "INSERT INTO events (id, type, subject, group_uid, actor, act, body, audience, time) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
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
    .execute(c)
    .await
    .map_err(|e| db_err("insert event", e))?;
    Ok(())
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
