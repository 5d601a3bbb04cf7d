//! The advisories tables on SQLite.

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};
use ward_core::listing::{ListQuery, Page};
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};

use super::events::insert_event as log_event;
use super::{SqliteStore, exists};
use crate::GROUP_TYPE;
use crate::advisories::{
    ADVISORY_TYPE, APPROVED, APPROVED_AS_IMPORTED, AdvisoryFields, AdvisoryRecord, AdvisoryStore, EVENT_TYPE,
    EVENT_USAGE_SQLITE, EventRecord, FeedOutcome, FeedRecord, FlagRecord, ImportApproval, ImportItem, ImportOutcome,
    LATEST_APPROVED, PENDING, Plan, StoredPrint, advisory_exists, alias_list, ecosystems_json, event_reviewed,
    feed_plan, has_room, plan, search_text, status_of, too_many_events,
};
use crate::events::Emit;
use crate::sql::{ADVISORY_COLUMNS, EVENT_COLUMNS};

pub(super) fn advisory_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<AdvisoryRecord> {
    Ok(AdvisoryRecord {
        uid: r.get(0)?,
        parent_uid: r.get(1)?,
        advisory_id: r.get(2)?,
        legacy_advisory_id: r.get(3)?,
        origin: r.get(4)?,
        author: r.get(5)?,
        artifact_name: r.get(6)?,
        artifact_type: r.get(7)?,
        artifact_architecture: r.get(8)?,
        component_name: r.get(9)?,
        component_location: r.get(10)?,
        component_type: r.get(11)?,
        aliases: r.get(12)?,
        severities: r.get(13)?,
        latest_type: r.get(14)?,
        fixed_version: r.get(15)?,
        create_time: r.get(16)?,
        update_time: r.get(17)?,
        delete_time: r.get(18)?,
    })
}

fn event_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<EventRecord> {
    Ok(EventRecord {
        uid: r.get(0)?,
        advisory_uid: r.get(1)?,
        event_time: r.get(2)?,
        kind: r.get(3)?,
        author: r.get(4)?,
        reviewer: r.get(5)?,
        review_state: r.get(6)?,
        issue: r.get(7)?,
        payload: r.get(8)?,
        fingerprint: r.get(9)?,
        findings: r.get(10)?,
        create_time: r.get(11)?,
        update_time: r.get(12)?,
    })
}

fn get_event_row(c: &Connection, uid: &str) -> rusqlite::Result<Option<EventRecord>> {
    c.prepare_cached(&format!("SELECT {EVENT_COLUMNS} FROM advisory_events WHERE uid = ?1"))?
        .query_row([uid], event_from_row)
        .optional()
}

fn get_advisory(c: &Connection, column: &str, key: &str) -> rusqlite::Result<Option<AdvisoryRecord>> {
    c.prepare_cached(&format!(
        "SELECT {ADVISORY_COLUMNS} FROM advisories WHERE {column} = ?1"
    ))?
    .query_row([key], advisory_from_row)
    .optional()
}

fn insert_advisory(c: &Connection, a: &AdvisoryRecord) -> rusqlite::Result<()> {
    c.prepare_cached(
        "INSERT INTO advisories (uid, parent_uid, advisory_id, legacy_advisory_id, origin, author, artifact_name, \
         artifact_type, artifact_architecture, component_name, component_location, component_type, aliases, \
         severities, search, create_time, update_time) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
    )?
    .execute(params![
        a.uid,
        a.parent_uid,
        a.advisory_id,
        a.legacy_advisory_id,
        a.origin,
        a.author,
        a.artifact_name,
        a.artifact_type,
        a.artifact_architecture,
        a.component_name,
        a.component_location,
        a.component_type,
        a.aliases,
        a.severities,
        search_text(&a.fields()),
        a.create_time,
        a.update_time
    ])?;
    insert_aliases(c, &a.uid, &a.aliases)
}

fn insert_aliases(c: &Connection, uid: &str, aliases: &str) -> rusqlite::Result<()> {
    let mut st = c.prepare_cached("INSERT OR IGNORE INTO advisory_aliases (alias, advisory_uid) VALUES (?1, ?2)")?;
    for a in alias_list(aliases) {
        st.execute([a.as_str(), uid])?;
    }
    Ok(())
}

fn write_fields(c: &Connection, uid: &str, f: &AdvisoryFields, now_ms: i64) -> rusqlite::Result<()> {
    c.prepare_cached(
        "UPDATE advisories SET artifact_name = ?1, artifact_type = ?2, artifact_architecture = ?3, \
         component_name = ?4, component_location = ?5, component_type = ?6, aliases = ?7, severities = ?8, \
         search = ?9 WHERE uid = ?10",
    )?
    .execute(params![
        f.artifact_name,
        f.artifact_type,
        f.artifact_architecture,
        f.component_name,
        f.component_location,
        f.component_type,
        f.aliases,
        f.severities,
        search_text(f),
        uid
    ])?;
    c.prepare_cached("DELETE FROM advisory_aliases WHERE advisory_uid = ?1")?
        .execute([uid])?;
    insert_aliases(c, uid, &f.aliases)?;
    touch(c, uid, now_ms)
}

/// Moves the advisory's update time forward (strictly, so it orders changes).
fn touch(c: &Connection, uid: &str, now_ms: i64) -> rusqlite::Result<()> {
    c.prepare_cached(
        "UPDATE advisories SET update_time = CASE WHEN ?1 > update_time THEN ?1 ELSE update_time + 1 END \
         WHERE uid = ?2",
    )?
    .execute(params![now_ms, uid])?;
    Ok(())
}

fn insert_event(c: &Connection, e: &EventRecord) -> rusqlite::Result<()> {
    c.prepare_cached(
        "INSERT INTO advisory_events (uid, advisory_uid, event_time, type, author, reviewer, review_state, issue, \
         payload, fingerprint, findings, create_time, update_time) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    )?
    .execute(params![
        e.uid,
        e.advisory_uid,
        e.event_time,
        e.kind,
        e.author,
        e.reviewer,
        e.review_state,
        e.issue,
        e.payload,
        e.fingerprint,
        e.findings,
        e.create_time,
        e.update_time
    ])?;
    Ok(())
}

/// Recomputes the advisory's status columns from its approved events.
fn refresh_status(c: &Connection, uid: &str) -> rusqlite::Result<()> {
    let latest = c
        .prepare_cached(&LATEST_APPROVED.replace("{a}", "?1"))?
        .query_row([uid], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
        .optional()?;
    let (kind, fixed) = status_of(latest);
    c.prepare_cached("UPDATE advisories SET latest_type = ?1, fixed_version = ?2 WHERE uid = ?3")?
        .execute(params![kind, fixed, uid])?;
    Ok(())
}

/// The live (not deleted) advisory `uid`, else NOT_FOUND.
fn live(c: &Connection, uid: &str) -> rusqlite::Result<std::result::Result<AdvisoryRecord, Error>> {
    Ok(match get_advisory(c, "uid", uid)? {
        Some(a) if a.delete_time.is_none() => Ok(a),
        _ => Err(Error::not_found(ADVISORY_TYPE, uid)),
    })
}

/// Whether the advisory can take these events (see `has_room`).
fn room_for(c: &Connection, uid: &str, adding: &[&EventRecord]) -> rusqlite::Result<bool> {
    let (count, bytes): (i64, i64) = c
        .prepare_cached(EVENT_USAGE_SQLITE)?
        .query_row([uid], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(has_room(count, bytes, adding))
}

fn fingerprints(c: &Connection, uid: &str) -> rusqlite::Result<Vec<StoredPrint>> {
    c.prepare_cached("SELECT fingerprint, uid, review_state FROM advisory_events WHERE advisory_uid = ?1")?
        .query_map([uid], |r| {
            Ok(StoredPrint {
                fingerprint: r.get(0)?,
                uid: r.get(1)?,
                review_state: r.get(2)?,
            })
        })?
        .collect()
}

fn insert_flag(c: &Connection, advisory_uid: &str, f: &FlagRecord, now_ms: i64) -> rusqlite::Result<()> {
    c.prepare_cached(
        "INSERT OR IGNORE INTO advisory_flags (advisory_uid, code, field, detail, create_time) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![advisory_uid, f.code, f.field, f.detail, now_ms])?;
    Ok(())
}

/// Approves a stored event as imported, with its flag.
fn approve_as_imported(
    c: &Connection,
    advisory_uid: &str,
    event_uid: &str,
    a: &ImportApproval,
    now_ms: i64,
) -> rusqlite::Result<()> {
    c.prepare_cached(
        "UPDATE advisory_events SET review_state = ?1, reviewer = ?2, update_time = ?3 \
         WHERE uid = ?4 AND review_state = ?5",
    )?
    .execute(params![APPROVED, a.reviewer, now_ms, event_uid, PENDING])?;
    insert_flag(c, advisory_uid, &approval_flag(event_uid, a), now_ms)
}

fn approval_flag(event_uid: &str, a: &ImportApproval) -> FlagRecord {
    FlagRecord {
        code: APPROVED_AS_IMPORTED.into(),
        field: event_uid.into(),
        detail: a.detail.clone(),
    }
}

fn is_unique_violation(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
        || f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY)
}

/// Imports one item inside the document's transaction.
fn import_one(
    c: &Connection,
    parent: &str,
    item: &ImportItem,
    now_ms: i64,
) -> rusqlite::Result<(ImportOutcome, String)> {
    let r = &item.record;
    // By CGA id, else (an advisory first imported from a non-CGA source) by
    // its legacy id in the group.
    let mut existing = get_advisory(c, "advisory_id", &r.advisory_id)?;
    if existing.is_none()
        && item.by_legacy_id
        && let Some(legacy) = &r.legacy_advisory_id
    {
        existing = c
            .prepare_cached(&format!(
                "SELECT {ADVISORY_COLUMNS} FROM advisories WHERE legacy_advisory_id = ?1 AND parent_uid = ?2"
            ))?
            .query_row([legacy.as_str(), parent], advisory_from_row)
            .optional()?;
    }
    let prints = match &existing {
        Some(a) => fingerprints(c, &a.uid)?,
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
            insert_advisory(c, r)?;
            for e in &item.events {
                insert_event(c, e)?;
                if let Some(a) = &item.approval {
                    insert_flag(c, &r.uid, &approval_flag(&e.uid, a), now_ms)?;
                }
            }
            for f in &item.flags {
                insert_flag(c, &r.uid, f, now_ms)?;
            }
            refresh_status(c, &r.uid)?;
            ImportOutcome::Created
        }
        Plan::Update {
            uid,
            fields,
            events,
            approve,
        } => {
            if !room_for(c, &uid, &events)? {
                return Ok((ImportOutcome::Rejected(too_many_events(&r.advisory_id).message()), id));
            }
            if let Some(f) = fields {
                write_fields(c, &uid, &f, now_ms)?;
            }
            for e in events {
                let e = EventRecord {
                    advisory_uid: uid.clone(),
                    uid: format!("{uid}/{}", e.uid.rsplit('/').next().unwrap_or_default()),
                    ..e.clone()
                };
                insert_event(c, &e)?;
                if let Some(a) = &item.approval {
                    insert_flag(c, &uid, &approval_flag(&e.uid, a), now_ms)?;
                }
            }
            if let Some(a) = &item.approval {
                for event_uid in &approve {
                    approve_as_imported(c, &uid, event_uid, a, now_ms)?;
                }
            }
            for f in &item.flags {
                insert_flag(c, &uid, f, now_ms)?;
            }
            touch(c, &uid, now_ms)?;
            refresh_status(c, &uid)?;
            ImportOutcome::Updated
        }
        Plan::Unchanged => {
            if let Some(a) = existing.as_ref() {
                for f in &item.flags {
                    insert_flag(c, &a.uid, f, now_ms)?;
                }
            }
            ImportOutcome::Unchanged
        }
        Plan::Reject(why) => ImportOutcome::Rejected(why),
    };
    Ok((outcome, id))
}

#[async_trait]
impl AdvisoryStore for SqliteStore {
    async fn create_advisory(&self, a: &AdvisoryRecord, events: &[EventRecord], emit: Emit<()>) -> Result<()> {
        let (a, events) = (a.clone(), events.to_vec());
        self.write("create advisory", move |c| {
            let tx = c.savepoint()?;
            if !exists(&tx, "groups", &a.parent_uid)? {
                return Ok(Err(Error::not_found(GROUP_TYPE, a.parent_uid.clone())));
            }
            match insert_advisory(&tx, &a) {
                Err(e) if is_unique_violation(&e) => return Ok(Err(advisory_exists(&a.advisory_id))),
                r => r?,
            }
            for e in &events {
                insert_event(&tx, e)?;
            }
            refresh_status(&tx, &a.uid)?;
            log_event(&tx, &emit.record(&()))?;
            tx.commit()?;
            Ok(Ok(()))
        })
        .await?
    }

    async fn get_advisory(&self, uid: &Uidp) -> Result<Option<AdvisoryRecord>> {
        self.get_one("get advisory", "advisories", ADVISORY_COLUMNS, uid, advisory_from_row)
            .await
    }

    async fn update_advisory(
        &self,
        uid: &Uidp,
        f: &AdvisoryFields,
        now_ms: i64,
        emit: Emit<AdvisoryRecord>,
    ) -> Result<AdvisoryRecord> {
        let (key, f) = (uid.as_str().to_owned(), f.clone());
        self.write("update advisory", move |c| {
            let tx = c.savepoint()?;
            if let Err(e) = live(&tx, &key)? {
                return Ok(Err(e));
            }
            write_fields(&tx, &key, &f, now_ms)?;
            let Some(row) = get_advisory(&tx, "uid", &key)? else {
                return Ok(Err(Error::not_found(ADVISORY_TYPE, key)));
            };
            log_event(&tx, &emit.record(&row))?;
            tx.commit()?;
            Ok(Ok(row))
        })
        .await?
    }

    async fn delete_advisory(&self, uid: &Uidp, now_ms: i64, emit: Emit<()>) -> Result<()> {
        let key = uid.as_str().to_owned();
        let n = self
            .write("delete advisory", move |c| {
                let tx = c.savepoint()?;
                let n = tx
                    .prepare_cached(
                        "UPDATE advisories SET delete_time = ?1, \
                         update_time = CASE WHEN ?1 > update_time THEN ?1 ELSE update_time + 1 END \
                         WHERE uid = ?2 AND delete_time IS NULL",
                    )?
                    .execute(params![now_ms, key])?;
                if n > 0 {
                    log_event(&tx, &emit.record(&()))?;
                }
                tx.commit()?;
                Ok(n)
            })
            .await?;
        if n == 0 {
            return Err(Error::not_found(ADVISORY_TYPE, uid.as_str()));
        }
        Ok(())
    }

    async fn list_advisories(&self, q: &ListQuery) -> Result<Page<AdvisoryRecord>> {
        self.list("list advisories", "advisories", ADVISORY_COLUMNS, q, advisory_from_row)
            .await
    }

    async fn events_of(&self, advisory_uids: &[String]) -> Result<Vec<EventRecord>> {
        if advisory_uids.is_empty() {
            return Ok(Vec::new());
        }
        let uids = advisory_uids.to_vec();
        self.read("list events", move |c| {
            let phs = vec!["?"; uids.len()].join(", ");
            c.prepare_cached(&format!(
                "SELECT {EVENT_COLUMNS} FROM advisory_events WHERE advisory_uid IN ({phs}) \
                 ORDER BY advisory_uid, event_time, uid"
            ))?
            .query_map(params_from_iter(uids.iter()), event_from_row)?
            .collect()
        })
        .await
    }

    async fn add_event(&self, e: &EventRecord, emit: Emit<()>) -> Result<()> {
        let e = e.clone();
        self.write("add event", move |c| {
            let tx = c.savepoint()?;
            if let Err(err) = live(&tx, &e.advisory_uid)? {
                return Ok(Err(err));
            }
            if !room_for(&tx, &e.advisory_uid, &[&e])? {
                return Ok(Err(too_many_events(&e.advisory_uid)));
            }
            insert_event(&tx, &e)?;
            touch(&tx, &e.advisory_uid, e.create_time)?;
            refresh_status(&tx, &e.advisory_uid)?;
            log_event(&tx, &emit.record(&()))?;
            tx.commit()?;
            Ok(Ok(()))
        })
        .await?
    }

    async fn get_event(&self, uid: &Uidp) -> Result<Option<EventRecord>> {
        let key = uid.as_str().to_owned();
        self.read("get event", move |c| get_event_row(c, &key)).await
    }

    async fn update_event(&self, e: &EventRecord, expected_state: i64, emit: Emit<EventRecord>) -> Result<EventRecord> {
        let e = e.clone();
        self.write("update event", move |c| {
            let tx = c.savepoint()?;
            if let Err(err) = live(&tx, &e.advisory_uid)? {
                return Ok(Err(err));
            }
            let n = tx
                .prepare_cached(
                    "UPDATE advisory_events SET type = ?1, reviewer = ?2, review_state = ?3, issue = ?4, \
                     payload = ?5, fingerprint = ?6, findings = ?7, event_time = ?8, \
                     update_time = CASE WHEN ?9 > update_time THEN ?9 ELSE update_time + 1 END, author = ?12 \
                     WHERE uid = ?10 AND review_state = ?11",
                )?
                .execute(params![
                    e.kind,
                    e.reviewer,
                    e.review_state,
                    e.issue,
                    e.payload,
                    e.fingerprint,
                    e.findings,
                    e.event_time,
                    e.update_time,
                    e.uid,
                    expected_state,
                    e.author
                ])?;
            if n == 0 {
                let gone = !exists(&tx, "advisory_events", &e.uid)?;
                return Ok(Err(if gone {
                    Error::not_found(EVENT_TYPE, e.uid.clone())
                } else {
                    event_reviewed(&e.uid)
                }));
            }
            // New content must still fit the advisory's budget.
            if !room_for(&tx, &e.advisory_uid, &[])? {
                return Ok(Err(too_many_events(&e.advisory_uid)));
            }
            touch(&tx, &e.advisory_uid, e.update_time)?;
            refresh_status(&tx, &e.advisory_uid)?;
            let Some(row) = get_event_row(&tx, &e.uid)? else {
                return Ok(Err(Error::not_found(EVENT_TYPE, e.uid.clone())));
            };
            log_event(&tx, &emit.record(&row))?;
            tx.commit()?;
            Ok(Ok(row))
        })
        .await?
    }

    async fn import_advisories(
        &self,
        parent_uid: &str,
        items: &[ImportItem],
        now_ms: i64,
        emit: Emit<Vec<(ImportOutcome, String)>>,
    ) -> Result<Vec<(ImportOutcome, String)>> {
        let (parent, items) = (parent_uid.to_owned(), items.to_vec());
        self.write("import advisories", move |c| {
            let mut tx = c.savepoint()?;
            if !exists(&tx, "groups", &parent)? {
                return Ok(Err(Error::not_found(GROUP_TYPE, parent.clone())));
            }
            let mut out = Vec::with_capacity(items.len());
            for item in &items {
                // A savepoint per advisory: one that fails (a duplicate id in the
                // same document, say) is reported without losing the others.
                let sp = tx.savepoint()?;
                match import_one(&sp, &parent, item, now_ms) {
                    Ok(o) => {
                        sp.commit()?;
                        out.push(o);
                    }
                    Err(e) if is_unique_violation(&e) => {
                        drop(sp);
                        let id = item.record.advisory_id.clone();
                        out.push((
                            ImportOutcome::Rejected(format!("advisory id {id} is already in use")),
                            id,
                        ));
                    }
                    Err(e) => return Err(e),
                }
            }
            log_event(&tx, &emit.record(&out))?;
            tx.commit()?;
            Ok(Ok(out))
        })
        .await?
    }

    async fn advisory_flags(&self, advisory_uid: &str) -> Result<Vec<FlagRecord>> {
        let uid = advisory_uid.to_owned();
        self.read("advisory flags", move |c| {
            c.prepare_cached(
                "SELECT code, field, detail FROM advisory_flags WHERE advisory_uid = ?1 ORDER BY code, field",
            )?
            .query_map([uid.as_str()], |r| {
                Ok(FlagRecord {
                    code: r.get(0)?,
                    field: r.get(1)?,
                    detail: r.get(2)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()
        })
        .await
    }

    async fn import_feed_records(
        &self,
        parent_uid: &str,
        records: &[FeedRecord],
        now_ms: i64,
        emit: Emit<Vec<FeedOutcome>>,
    ) -> Result<Vec<FeedOutcome>> {
        let (parent, records) = (parent_uid.to_owned(), records.to_vec());
        self.write("import feed records", move |c| {
            let tx = c.savepoint()?;
            if !exists(&tx, "groups", &parent)? {
                return Ok(Err(Error::not_found(GROUP_TYPE, parent.clone())));
            }
            let mut out = Vec::with_capacity(records.len());
            for r in &records {
                let stored: Option<(i64, String)> = tx
                    .prepare_cached("SELECT modified, digest FROM feed_records WHERE parent_uid = ?1 AND id = ?2")?
                    .query_row([parent.as_str(), r.id.as_str()], |row| Ok((row.get(0)?, row.get(1)?)))
                    .optional()?;
                let outcome = feed_plan(stored.as_ref().map(|(m, d)| (*m, d.as_str())), r);
                match outcome {
                    FeedOutcome::Unchanged => {}
                    FeedOutcome::Created => {
                        tx.prepare_cached(
                            "INSERT INTO feed_records (parent_uid, id, modified, withdrawn, aliases, ecosystems, \
                             body, digest, create_time, update_time) \
                             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)",
                        )?
                        .execute(params![
                            parent,
                            r.id,
                            r.modified,
                            r.withdrawn,
                            serde_json::to_string(&r.aliases).unwrap_or_default(),
                            ecosystems_json(&r.packages),
                            r.body,
                            r.digest,
                            now_ms
                        ])?;
                        feed_index(&tx, &parent, r, now_ms)?;
                    }
                    FeedOutcome::Updated | FeedOutcome::Withdrawn => {
                        tx.prepare_cached(
                            "UPDATE feed_records SET modified = ?3, withdrawn = ?4, aliases = ?5, ecosystems = ?6, \
                             body = ?7, digest = ?8, update_time = ?9 WHERE parent_uid = ?1 AND id = ?2",
                        )?
                        .execute(params![
                            parent,
                            r.id,
                            r.modified,
                            r.withdrawn,
                            serde_json::to_string(&r.aliases).unwrap_or_default(),
                            ecosystems_json(&r.packages),
                            r.body,
                            r.digest,
                            now_ms
                        ])?;
                        for table in ["feed_record_packages", "feed_record_aliases"] {
                            tx.prepare_cached(&format!(
                                "DELETE FROM {table} WHERE parent_uid = ?1 AND record_id = ?2"
                            ))?
                            .execute([parent.as_str(), r.id.as_str()])?;
                        }
                        feed_index(&tx, &parent, r, now_ms)?;
                    }
                }
                out.push(outcome);
            }
            log_event(&tx, &emit.record(&out))?;
            tx.commit()?;
            Ok(Ok(out))
        })
        .await?
    }

    async fn feed_record_groups(&self, id: &str) -> Result<Vec<String>> {
        let id = id.to_owned();
        self.read("feed record groups", move |c| {
            c.prepare_cached("SELECT parent_uid FROM feed_records WHERE id = ?1 ORDER BY parent_uid")?
                .query_map([id.as_str()], |r| r.get(0))?
                .collect::<rusqlite::Result<Vec<String>>>()
        })
        .await
    }

    async fn feed_record_body(&self, parent_uid: &str, id: &str) -> Result<Option<String>> {
        let (parent, id) = (parent_uid.to_owned(), id.to_owned());
        self.read("feed record", move |c| {
            c.prepare_cached("SELECT body FROM feed_records WHERE parent_uid = ?1 AND id = ?2")?
                .query_row([parent.as_str(), id.as_str()], |r| r.get(0))
                .optional()
        })
        .await
    }
}

/// Indexes a feed record's packages and aliases.
fn feed_index(c: &Connection, parent: &str, r: &FeedRecord, now_ms: i64) -> rusqlite::Result<()> {
    let mut st = c.prepare_cached(
        "INSERT OR IGNORE INTO feed_record_packages \
         (parent_uid, record_id, ecosystem, name, affected, digest, withdrawn, update_time) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?;
    for p in &r.packages {
        st.execute(params![
            parent,
            r.id,
            p.ecosystem,
            p.name,
            p.affected,
            r.digest,
            r.withdrawn.is_some(),
            now_ms
        ])?;
    }
    let mut st = c.prepare_cached(
        "INSERT OR IGNORE INTO feed_record_aliases (parent_uid, record_id, alias) VALUES (?1, ?2, ?3)",
    )?;
    for alias in &r.aliases {
        st.execute(params![parent, r.id, alias])?;
    }
    Ok(())
}
