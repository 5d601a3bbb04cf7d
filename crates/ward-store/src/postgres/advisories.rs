//! The advisories tables on PostgreSQL. Event writes hold their advisory
//! `FOR UPDATE`, so the status columns are recomputed by one writer at a time.

use std::collections::BTreeSet;

use async_trait::async_trait;
use sqlx::PgConnection;
use ward_core::listing::{ListQuery, Page};
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};

use super::events::insert_event as log_event;
use super::{PostgresStore, lock};
use crate::advisories::{
    ADVISORY_TYPE, APPROVED, APPROVED_AS_IMPORTED, AdvisoryFields, AdvisoryRecord, AdvisoryStore, EVENT_TYPE,
    EVENT_USAGE_POSTGRES, EventRecord, FeedOutcome, FeedRecord, FlagRecord, ImportApproval, ImportItem, ImportOutcome,
    LATEST_APPROVED, PENDING, Plan, StoredPrint, advisory_exists, alias_list, ecosystems_json, event_reviewed,
    feed_plan, has_room, plan, search_text, status_of, too_many_events,
};
use crate::events::Emit;
use crate::sql::{ADVISORY_COLUMNS, EVENT_COLUMNS};
use crate::{GROUP_TYPE, db_err};

fn is_unique_violation(e: &sqlx::Error) -> bool {
    e.as_database_error().is_some_and(|d| d.is_unique_violation())
}

async fn get_advisory(c: &mut PgConnection, column: &str, key: &str, lock: &str) -> Result<Option<AdvisoryRecord>> {
    sqlx::query_as(&format!(
        "SELECT {ADVISORY_COLUMNS} FROM advisories WHERE {column} = $1 {lock}"
    ))
    .bind(key)
    .fetch_optional(c)
    .await
    .map_err(|e| db_err("get advisory", e))
}

/// Inserts the advisory and its aliases; the raw error so callers can tell a
/// taken advisory id.
async fn insert_advisory(c: &mut PgConnection, a: &AdvisoryRecord) -> std::result::Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO advisories (uid, parent_uid, advisory_id, legacy_advisory_id, origin, author, artifact_name, \
         artifact_type, artifact_architecture, component_name, component_location, component_type, aliases, \
         severities, search, create_time, update_time) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)",
    )
    .bind(&a.uid)
    .bind(&a.parent_uid)
    .bind(&a.advisory_id)
    .bind(&a.legacy_advisory_id)
    .bind(&a.origin)
    .bind(&a.author)
    .bind(&a.artifact_name)
    .bind(&a.artifact_type)
    .bind(&a.artifact_architecture)
    .bind(&a.component_name)
    .bind(&a.component_location)
    .bind(&a.component_type)
    .bind(&a.aliases)
    .bind(&a.severities)
    .bind(search_text(&a.fields()))
    .bind(a.create_time)
    .bind(a.update_time)
    .execute(&mut *c)
    .await?;
    insert_aliases(c, &a.uid, &a.aliases).await
}

async fn insert_aliases(c: &mut PgConnection, uid: &str, aliases: &str) -> std::result::Result<(), sqlx::Error> {
    for a in alias_list(aliases) {
        sqlx::query("INSERT INTO advisory_aliases (alias, advisory_uid) VALUES ($1, $2) ON CONFLICT DO NOTHING")
            .bind(a)
            .bind(uid)
            .execute(&mut *c)
            .await?;
    }
    Ok(())
}

async fn write_fields(c: &mut PgConnection, uid: &str, f: &AdvisoryFields, now_ms: i64) -> Result<()> {
    sqlx::query(
        "UPDATE advisories SET artifact_name = $1, artifact_type = $2, artifact_architecture = $3, \
         component_name = $4, component_location = $5, component_type = $6, aliases = $7, severities = $8, \
         search = $9 WHERE uid = $10",
    )
    .bind(&f.artifact_name)
    .bind(&f.artifact_type)
    .bind(&f.artifact_architecture)
    .bind(&f.component_name)
    .bind(&f.component_location)
    .bind(&f.component_type)
    .bind(&f.aliases)
    .bind(&f.severities)
    .bind(search_text(f))
    .bind(uid)
    .execute(&mut *c)
    .await
    .map_err(|e| db_err("update advisory", e))?;
    sqlx::query("DELETE FROM advisory_aliases WHERE advisory_uid = $1")
        .bind(uid)
        .execute(&mut *c)
        .await
        .map_err(|e| db_err("update aliases", e))?;
    insert_aliases(c, uid, &f.aliases)
        .await
        .map_err(|e| db_err("update aliases", e))?;
    touch(c, uid, now_ms).await
}

async fn touch(c: &mut PgConnection, uid: &str, now_ms: i64) -> Result<()> {
    sqlx::query(
        "UPDATE advisories SET update_time = CASE WHEN $1 > update_time THEN $1 ELSE update_time + 1 END \
         WHERE uid = $2",
    )
    .bind(now_ms)
    .bind(uid)
    .execute(c)
    .await
    .map_err(|e| db_err("touch advisory", e))?;
    Ok(())
}

async fn insert_event(c: &mut PgConnection, e: &EventRecord) -> Result<()> {
    sqlx::query(
        "INSERT INTO advisory_events (uid, advisory_uid, event_time, type, author, reviewer, review_state, issue, \
         payload, fingerprint, findings, create_time, update_time) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
    )
    .bind(&e.uid)
    .bind(&e.advisory_uid)
    .bind(e.event_time)
    .bind(e.kind)
    .bind(&e.author)
    .bind(&e.reviewer)
    .bind(e.review_state)
    .bind(&e.issue)
    .bind(&e.payload)
    .bind(&e.fingerprint)
    .bind(&e.findings)
    .bind(e.create_time)
    .bind(e.update_time)
    .execute(c)
    .await
    .map_err(|e| db_err("insert event", e))?;
    Ok(())
}

async fn refresh_status(c: &mut PgConnection, uid: &str) -> Result<()> {
    let latest: Option<(i64, String)> = sqlx::query_as(&LATEST_APPROVED.replace("{a}", "$1"))
        .bind(uid)
        .fetch_optional(&mut *c)
        .await
        .map_err(|e| db_err("latest event", e))?;
    let (kind, fixed) = status_of(latest);
    sqlx::query("UPDATE advisories SET latest_type = $1, fixed_version = $2 WHERE uid = $3")
        .bind(kind)
        .bind(fixed)
        .bind(uid)
        .execute(c)
        .await
        .map_err(|e| db_err("advisory status", e))?;
    Ok(())
}

/// Whether the advisory can take these events (see `has_room`).
async fn room_for(c: &mut PgConnection, uid: &str, adding: &[&EventRecord]) -> Result<bool> {
    let (count, bytes): (i64, i64) = sqlx::query_as(EVENT_USAGE_POSTGRES)
        .bind(uid)
        .fetch_one(c)
        .await
        .map_err(|e| db_err("event usage", e))?;
    Ok(has_room(count, bytes, adding))
}

/// Locks the live advisory `uid`, else NOT_FOUND.
async fn lock_live(c: &mut PgConnection, uid: &str) -> Result<AdvisoryRecord> {
    match get_advisory(c, "uid", uid, "FOR UPDATE").await? {
        Some(a) if a.delete_time.is_none() => Ok(a),
        _ => Err(Error::not_found(ADVISORY_TYPE, uid)),
    }
}

async fn insert_flag(c: &mut PgConnection, advisory_uid: &str, f: &FlagRecord, now_ms: i64) -> Result<()> {
    sqlx::query(
        "INSERT INTO advisory_flags (advisory_uid, code, field, detail, create_time) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
    )
    .bind(advisory_uid)
    .bind(&f.code)
    .bind(&f.field)
    .bind(&f.detail)
    .bind(now_ms)
    .execute(c)
    .await
    .map_err(|e| db_err("insert flag", e))?;
    Ok(())
}

fn approval_flag(event_uid: &str, a: &ImportApproval) -> FlagRecord {
    FlagRecord {
        code: APPROVED_AS_IMPORTED.into(),
        field: event_uid.into(),
        detail: a.detail.clone(),
    }
}

/// Rewrites the `feed_name_packages` rows of `touched` (ecosystem, name)
/// pairs of one group from `feed_record_packages`, after this transaction
/// changed the latter. Concurrent imports touching the same name take turns:
/// each locks the names' rows (created empty if missing) in key order, then
/// aggregates in a statement whose snapshot postdates the lock, so it sees
/// every import that held the lock before it. The last to commit therefore
/// wrote an aggregate of everything committed, its own rows included.
async fn refresh_feed_names(c: &mut PgConnection, parent: &str, touched: &BTreeSet<(String, String)>) -> Result<()> {
    if touched.is_empty() {
        return Ok(());
    }
    let (ecosystems, names): (Vec<String>, Vec<String>) = touched.iter().cloned().unzip();
    // Each statement takes the group and the (ecosystem, name) pairs.
    for sql in [
        "INSERT INTO feed_name_packages (parent_uid, ecosystem, name, entries) \
         SELECT $1, k.e, k.n, '[]' FROM UNNEST($2::text[], $3::text[]) AS k(e, n) ORDER BY k.e, k.n \
         ON CONFLICT DO NOTHING",
        "SELECT 1 FROM feed_name_packages f JOIN UNNEST($2::text[], $3::text[]) AS k(e, n) \
         ON f.ecosystem = k.e AND f.name = k.n WHERE f.parent_uid = $1 \
         ORDER BY f.ecosystem, f.name FOR UPDATE OF f",
        "UPDATE feed_name_packages f SET entries = a.entries FROM (\
           SELECT k.e, k.n, COALESCE((SELECT json_agg(json_build_array(p.record_id, p.affected, p.digest, \
             p.withdrawn, p.update_time) ORDER BY p.record_id)::text FROM feed_record_packages p \
             WHERE p.parent_uid = $1 AND p.ecosystem = k.e AND p.name = k.n), '[]') AS entries \
           FROM UNNEST($2::text[], $3::text[]) AS k(e, n)) a \
         WHERE f.parent_uid = $1 AND f.ecosystem = a.e AND f.name = a.n",
        "DELETE FROM feed_name_packages f USING UNNEST($2::text[], $3::text[]) AS k(e, n) \
         WHERE f.parent_uid = $1 AND f.ecosystem = k.e AND f.name = k.n AND f.entries = '[]'",
    ] {
        sqlx::query(sql)
            .bind(parent)
            .bind(&ecosystems)
            .bind(&names)
            .execute(&mut *c)
            .await
            .map_err(|e| db_err("feed names", e))?;
    }
    Ok(())
}

/// Indexes a feed record's packages and aliases.
async fn feed_index(c: &mut PgConnection, parent: &str, r: &FeedRecord, now_ms: i64) -> Result<()> {
    for p in &r.packages {
        sqlx::query(
            "INSERT INTO feed_record_packages \
             (parent_uid, record_id, ecosystem, name, affected, digest, withdrawn, update_time) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING",
        )
        .bind(parent)
        .bind(&r.id)
        .bind(&p.ecosystem)
        .bind(&p.name)
        .bind(&p.affected)
        .bind(&r.digest)
        .bind(r.withdrawn.is_some())
        .bind(now_ms)
        .execute(&mut *c)
        .await
        .map_err(|e| db_err("index feed record", e))?;
    }
    for alias in &r.aliases {
        sqlx::query(
            "INSERT INTO feed_record_aliases (parent_uid, record_id, alias) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
        )
        .bind(parent)
        .bind(&r.id)
        .bind(alias)
        .execute(&mut *c)
        .await
        .map_err(|e| db_err("index feed record", e))?;
    }
    Ok(())
}

async fn import_one(
    c: &mut PgConnection,
    parent: &str,
    item: &ImportItem,
    now_ms: i64,
) -> Result<(ImportOutcome, String)> {
    let r = &item.record;
    // By CGA id, else (an advisory first imported from a non-CGA source) by
    // its legacy id in the group.
    let mut existing = get_advisory(c, "advisory_id", &r.advisory_id, "FOR UPDATE").await?;
    if existing.is_none()
        && item.by_legacy_id
        && let Some(legacy) = &r.legacy_advisory_id
    {
        existing = sqlx::query_as(&format!(
            "SELECT {ADVISORY_COLUMNS} FROM advisories WHERE legacy_advisory_id = $1 AND parent_uid = $2 FOR UPDATE"
        ))
        .bind(legacy)
        .bind(parent)
        .fetch_optional(&mut *c)
        .await
        .map_err(|e| db_err("find advisory", e))?;
    }
    let prints: Vec<StoredPrint> = match &existing {
        Some(a) => sqlx::query_as::<_, (String, String, i64)>(
            "SELECT fingerprint, uid, review_state FROM advisory_events WHERE advisory_uid = $1",
        )
        .bind(&a.uid)
        .fetch_all(&mut *c)
        .await
        .map_err(|e| db_err("event fingerprints", e))?
        .into_iter()
        .map(|(fingerprint, uid, review_state)| StoredPrint {
            fingerprint,
            uid,
            review_state,
        })
        .collect(),
        None => Vec::new(),
    };
    let id = existing
        .as_ref()
        .map_or_else(|| r.advisory_id.clone(), |a| a.advisory_id.clone());
    let outcome = match plan(parent, existing.as_ref().map(|a| (a, prints.as_slice())), item) {
        Plan::Create => {
            if !has_room(0, 0, &item.events.iter().collect::<Vec<_>>()) {
                return Ok((ImportOutcome::Rejected(too_many_events(&r.advisory_id).message()), id));
            }
            match insert_advisory(c, r).await {
                Err(e) if is_unique_violation(&e) => return Err(advisory_exists(&r.advisory_id)),
                r => r.map_err(|e| db_err("insert advisory", e))?,
            }
            for e in &item.events {
                insert_event(c, e).await?;
                if let Some(a) = &item.approval {
                    insert_flag(c, &r.uid, &approval_flag(&e.uid, a), now_ms).await?;
                }
            }
            for f in &item.flags {
                insert_flag(c, &r.uid, f, now_ms).await?;
            }
            refresh_status(c, &r.uid).await?;
            ImportOutcome::Created
        }
        Plan::Update {
            uid,
            fields,
            events,
            approve,
        } => {
            if !room_for(c, &uid, &events).await? {
                return Ok((ImportOutcome::Rejected(too_many_events(&r.advisory_id).message()), id));
            }
            if let Some(f) = fields {
                write_fields(c, &uid, &f, now_ms).await?;
            }
            for e in events {
                let e = EventRecord {
                    advisory_uid: uid.clone(),
                    uid: format!("{uid}/{}", e.uid.rsplit('/').next().unwrap_or_default()),
                    ..e.clone()
                };
                insert_event(c, &e).await?;
                if let Some(a) = &item.approval {
                    insert_flag(c, &uid, &approval_flag(&e.uid, a), now_ms).await?;
                }
            }
            if let Some(a) = &item.approval {
                for event_uid in &approve {
                    sqlx::query(
                        "UPDATE advisory_events SET review_state = $1, reviewer = $2, update_time = $3 \
                         WHERE uid = $4 AND review_state = $5",
                    )
                    .bind(APPROVED)
                    .bind(&a.reviewer)
                    .bind(now_ms)
                    .bind(event_uid)
                    .bind(PENDING)
                    .execute(&mut *c)
                    .await
                    .map_err(|e| db_err("approve event", e))?;
                    insert_flag(c, &uid, &approval_flag(event_uid, a), now_ms).await?;
                }
            }
            for f in &item.flags {
                insert_flag(c, &uid, f, now_ms).await?;
            }
            touch(c, &uid, now_ms).await?;
            refresh_status(c, &uid).await?;
            ImportOutcome::Updated
        }
        Plan::Unchanged => {
            if let Some(a) = existing.as_ref() {
                for f in &item.flags {
                    insert_flag(c, &a.uid, f, now_ms).await?;
                }
            }
            ImportOutcome::Unchanged
        }
        Plan::Reject(why) => ImportOutcome::Rejected(why),
    };
    Ok((outcome, id))
}

#[async_trait]
impl AdvisoryStore for PostgresStore {
    async fn create_advisory(&self, a: &AdvisoryRecord, events: &[EventRecord], emit: Emit<()>) -> Result<()> {
        let mut tx = self.begin().await?;
        if !lock(&mut tx, "groups", &a.parent_uid, "FOR SHARE").await? {
            return Err(Error::not_found(GROUP_TYPE, a.parent_uid.clone()));
        }
        match insert_advisory(&mut tx, a).await {
            Err(e) if is_unique_violation(&e) => return Err(advisory_exists(&a.advisory_id)),
            r => r.map_err(|e| db_err("insert advisory", e))?,
        }
        for e in events {
            insert_event(&mut tx, e).await?;
        }
        refresh_status(&mut tx, &a.uid).await?;
        log_event(&mut tx, &emit.record(&())).await?;
        tx.commit().await.map_err(|e| db_err("commit", e))
    }

    async fn get_advisory(&self, uid: &Uidp) -> Result<Option<AdvisoryRecord>> {
        self.get_one("advisories", ADVISORY_COLUMNS, uid).await
    }

    async fn update_advisory(
        &self,
        uid: &Uidp,
        f: &AdvisoryFields,
        now_ms: i64,
        emit: Emit<AdvisoryRecord>,
    ) -> Result<AdvisoryRecord> {
        let mut tx = self.begin().await?;
        lock_live(&mut tx, uid.as_str()).await?;
        write_fields(&mut tx, uid.as_str(), f, now_ms).await?;
        let row = get_advisory(&mut tx, "uid", uid.as_str(), "")
            .await?
            .ok_or_else(|| Error::not_found(ADVISORY_TYPE, uid.as_str()))?;
        log_event(&mut tx, &emit.record(&row)).await?;
        tx.commit().await.map_err(|e| db_err("commit", e))?;
        Ok(row)
    }

    async fn delete_advisory(&self, uid: &Uidp, now_ms: i64, emit: Emit<()>) -> Result<()> {
        let mut tx = self.begin().await?;
        let n = sqlx::query(
            "UPDATE advisories SET delete_time = $1, \
             update_time = CASE WHEN $1 > update_time THEN $1 ELSE update_time + 1 END \
             WHERE uid = $2 AND delete_time IS NULL",
        )
        .bind(now_ms)
        .bind(uid.as_str())
        .execute(&mut *tx)
        .await
        .map_err(|e| db_err("delete advisory", e))?
        .rows_affected();
        if n == 0 {
            return Err(Error::not_found(ADVISORY_TYPE, uid.as_str()));
        }
        log_event(&mut tx, &emit.record(&())).await?;
        tx.commit().await.map_err(|e| db_err("commit", e))
    }

    async fn list_advisories(&self, q: &ListQuery) -> Result<Page<AdvisoryRecord>> {
        self.list("advisories", ADVISORY_COLUMNS, q).await
    }

    async fn events_of(&self, advisory_uids: &[String]) -> Result<Vec<EventRecord>> {
        if advisory_uids.is_empty() {
            return Ok(Vec::new());
        }
        sqlx::query_as(&format!(
            "SELECT {EVENT_COLUMNS} FROM advisory_events WHERE advisory_uid = ANY($1) \
             ORDER BY advisory_uid, event_time, uid"
        ))
        .bind(advisory_uids)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db_err("list events", e))
    }

    async fn add_event(&self, e: &EventRecord, emit: Emit<()>) -> Result<()> {
        let mut tx = self.begin().await?;
        lock_live(&mut tx, &e.advisory_uid).await?;
        if !room_for(&mut tx, &e.advisory_uid, &[e]).await? {
            return Err(too_many_events(&e.advisory_uid));
        }
        insert_event(&mut tx, e).await?;
        touch(&mut tx, &e.advisory_uid, e.create_time).await?;
        refresh_status(&mut tx, &e.advisory_uid).await?;
        log_event(&mut tx, &emit.record(&())).await?;
        tx.commit().await.map_err(|e| db_err("commit", e))
    }

    async fn get_event(&self, uid: &Uidp) -> Result<Option<EventRecord>> {
        sqlx::query_as(&format!("SELECT {EVENT_COLUMNS} FROM advisory_events WHERE uid = $1"))
            .bind(uid.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| db_err("get event", e))
    }

    async fn update_event(&self, e: &EventRecord, expected_state: i64, emit: Emit<EventRecord>) -> Result<EventRecord> {
        let mut tx = self.begin().await?;
        lock_live(&mut tx, &e.advisory_uid).await?;
        let row: Option<EventRecord> = sqlx::query_as(&format!(
            "UPDATE advisory_events SET type = $1, reviewer = $2, review_state = $3, issue = $4, \
             payload = $5, fingerprint = $6, findings = $7, event_time = $8, \
             update_time = CASE WHEN $9 > update_time THEN $9 ELSE update_time + 1 END, author = $12 \
             WHERE uid = $10 AND review_state = $11 RETURNING {EVENT_COLUMNS}"
        ))
        .bind(e.kind)
        .bind(&e.reviewer)
        .bind(e.review_state)
        .bind(&e.issue)
        .bind(&e.payload)
        .bind(&e.fingerprint)
        .bind(&e.findings)
        .bind(e.event_time)
        .bind(e.update_time)
        .bind(&e.uid)
        .bind(expected_state)
        .bind(&e.author)
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| db_err("update event", e))?;
        let Some(row) = row else {
            let gone = !lock(&mut tx, "advisory_events", &e.uid, "").await?;
            return Err(if gone {
                Error::not_found(EVENT_TYPE, e.uid.clone())
            } else {
                event_reviewed(&e.uid)
            });
        };
        // New content must still fit the advisory's budget.
        if !room_for(&mut tx, &e.advisory_uid, &[]).await? {
            return Err(too_many_events(&e.advisory_uid));
        }
        touch(&mut tx, &e.advisory_uid, e.update_time).await?;
        refresh_status(&mut tx, &e.advisory_uid).await?;
        log_event(&mut tx, &emit.record(&row)).await?;
        tx.commit().await.map_err(|e| db_err("commit", e))?;
        Ok(row)
    }

    async fn import_advisories(
        &self,
        parent_uid: &str,
        items: &[ImportItem],
        now_ms: i64,
        emit: Emit<Vec<(ImportOutcome, String)>>,
    ) -> Result<Vec<(ImportOutcome, String)>> {
        let mut tx = self.begin().await?;
        if !lock(&mut tx, "groups", parent_uid, "FOR SHARE").await? {
            return Err(Error::not_found(GROUP_TYPE, parent_uid));
        }
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            // A savepoint per advisory: one that fails (an id taken meanwhile)
            // is reported without losing the others.
            let mut sp = sqlx::Connection::begin(&mut *tx)
                .await
                .map_err(|e| db_err("savepoint", e))?;
            match import_one(&mut sp, parent_uid, item, now_ms).await {
                Ok(o) => {
                    sp.commit().await.map_err(|e| db_err("release savepoint", e))?;
                    out.push(o);
                }
                Err(Error::AlreadyExists { name, .. }) => {
                    sp.rollback().await.map_err(|e| db_err("rollback savepoint", e))?;
                    out.push((
                        ImportOutcome::Rejected(format!("advisory id {name} is already in use")),
                        name,
                    ));
                }
                Err(e) => return Err(e),
            }
        }
        log_event(&mut tx, &emit.record(&out)).await?;
        tx.commit().await.map_err(|e| db_err("commit", e))?;
        Ok(out)
    }

    async fn advisory_flags(&self, advisory_uid: &str) -> Result<Vec<FlagRecord>> {
        sqlx::query_as("SELECT code, field, detail FROM advisory_flags WHERE advisory_uid = $1 ORDER BY code, field")
            .bind(advisory_uid)
            .fetch_all(&self.pool)
            .await
            .map_err(|e| db_err("advisory flags", e))
    }

    async fn import_feed_records(
        &self,
        parent_uid: &str,
        records: &[FeedRecord],
        now_ms: i64,
        emit: Emit<Vec<FeedOutcome>>,
    ) -> Result<Vec<FeedOutcome>> {
        let mut tx = self.begin().await?;
        if !lock(&mut tx, "groups", parent_uid, "FOR SHARE").await? {
            return Err(Error::not_found(GROUP_TYPE, parent_uid));
        }
        let mut out = Vec::with_capacity(records.len());
        // The (ecosystem, name) pairs whose feed_name_packages row changes.
        let mut touched: BTreeSet<(String, String)> = BTreeSet::new();
        for r in records {
            let stored: Option<(i64, String)> = sqlx::query_as(
                "SELECT modified, digest FROM feed_records WHERE parent_uid = $1 AND id = $2 FOR UPDATE",
            )
            .bind(parent_uid)
            .bind(&r.id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| db_err("find feed record", e))?;
            let outcome = feed_plan(stored.as_ref().map(|(m, d)| (*m, d.as_str())), r);
            let aliases = serde_json::to_string(&r.aliases).unwrap_or_default();
            match outcome {
                FeedOutcome::Unchanged => {}
                FeedOutcome::Created => {
                    // ON CONFLICT: another replica's import of the same record
                    // committed meanwhile; this one then replaces it.
                    sqlx::query(
                        "INSERT INTO feed_records (parent_uid, id, modified, withdrawn, aliases, ecosystems, body, \
                         digest, create_time, update_time) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) \
                         ON CONFLICT (parent_uid, id) DO UPDATE SET modified = EXCLUDED.modified, \
                         withdrawn = EXCLUDED.withdrawn, aliases = EXCLUDED.aliases, ecosystems = EXCLUDED.ecosystems, \
                         body = EXCLUDED.body, digest = EXCLUDED.digest, update_time = EXCLUDED.update_time",
                    )
                    .bind(parent_uid)
                    .bind(&r.id)
                    .bind(r.modified)
                    .bind(r.withdrawn)
                    .bind(&aliases)
                    .bind(ecosystems_json(&r.packages))
                    .bind(&r.body)
                    .bind(&r.digest)
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| db_err("insert feed record", e))?;
                    feed_index(&mut tx, parent_uid, r, now_ms).await?;
                    touched.extend(r.packages.iter().map(|p| (p.ecosystem.clone(), p.name.clone())));
                }
                FeedOutcome::Updated | FeedOutcome::Withdrawn => {
                    sqlx::query(
                        "UPDATE feed_records SET modified = $3, withdrawn = $4, aliases = $5, ecosystems = $6, \
                         body = $7, digest = $8, update_time = $9 WHERE parent_uid = $1 AND id = $2",
                    )
                    .bind(parent_uid)
                    .bind(&r.id)
                    .bind(r.modified)
                    .bind(r.withdrawn)
                    .bind(&aliases)
                    .bind(ecosystems_json(&r.packages))
                    .bind(&r.body)
                    .bind(&r.digest)
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| db_err("update feed record", e))?;
                    let before: Vec<(String, String)> = sqlx::query_as(
                        "DELETE FROM feed_record_packages WHERE parent_uid = $1 AND record_id = $2 \
                         RETURNING ecosystem, name",
                    )
                    .bind(parent_uid)
                    .bind(&r.id)
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(|e| db_err("reindex feed record", e))?;
                    sqlx::query("DELETE FROM feed_record_aliases WHERE parent_uid = $1 AND record_id = $2")
                        .bind(parent_uid)
                        .bind(&r.id)
                        .execute(&mut *tx)
                        .await
                        .map_err(|e| db_err("reindex feed record", e))?;
                    feed_index(&mut tx, parent_uid, r, now_ms).await?;
                    touched.extend(before);
                    touched.extend(r.packages.iter().map(|p| (p.ecosystem.clone(), p.name.clone())));
                }
            }
            out.push(outcome);
        }
        refresh_feed_names(&mut tx, parent_uid, &touched).await?;
        log_event(&mut tx, &emit.record(&out)).await?;
        tx.commit().await.map_err(|e| db_err("commit", e))?;
        Ok(out)
    }

    async fn feed_record_groups(&self, id: &str) -> Result<Vec<String>> {
        sqlx::query_scalar("SELECT parent_uid FROM feed_records WHERE id = $1 ORDER BY parent_uid")
            .bind(id)
            .fetch_all(&self.pool)
            .await
            .map_err(|e| db_err("feed record groups", e))
    }

    async fn feed_record_body(&self, parent_uid: &str, id: &str) -> Result<Option<String>> {
        sqlx::query_scalar("SELECT body FROM feed_records WHERE parent_uid = $1 AND id = $2")
            .bind(parent_uid)
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| db_err("feed record", e))
    }
}
