//! The event log on SQLite.

use async_trait::async_trait;
use rusqlite::{Connection, params, params_from_iter};
use ward_core::Result;

use super::SqliteStore;
use crate::events::{EventQuery, EventRecord, EventStore, QueryValue, query_sql};

/// Appends `e` to the log, inside the caller's transaction.
pub(crate) fn insert_event(c: &Connection, e: &EventRecord) -> rusqlite::Result<()> {
    c.prepare_cached(
        "INSERT INTO events (id, type, subject, group_uid, actor, act, body, audience, time) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
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
        e.time
    ])?;
    Ok(())
}

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
