//! The advisories' storage: advisories, their aliases (a table of their own, so
//! the `aliases` filter is an index lookup) and their events. An advisory's
//! status (the type of its latest approved event, and the fixed version when
//! that is `fixed`) is recomputed in every transaction that changes its events,
//! so status filters never scan events.

use async_trait::async_trait;
use ward_core::listing::{ListQuery, Page};
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};

pub const ADVISORY_TYPE: &str = ward_core::rpc::Kind::Advisory.type_name();
pub const EVENT_TYPE: &str = ward_core::rpc::Kind::AdvisoryEvent.type_name();

/// Most events one advisory may hold, and most bytes of event payloads and
/// findings together: what one advisory can cost a listing that returns it.
pub const MAX_EVENTS_PER_ADVISORY: i64 = 1000;
pub const MAX_EVENT_BYTES_PER_ADVISORY: i64 = 1024 * 1024;

/// `review_state` of an approved event (REVIEW_STATE_APPROVED).
pub const APPROVED: i64 = 2;
/// `review_state` of an event awaiting review (REVIEW_STATE_PENDING).
pub const PENDING: i64 = 1;
/// The EventTypeFilter number of `fixed`.
pub const FIXED: i64 = 3;

/// A stored advisory. `aliases` and `severities` are JSON arrays.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct AdvisoryRecord {
    pub uid: String,
    pub parent_uid: String,
    pub advisory_id: String,
    pub legacy_advisory_id: Option<String>,
    pub origin: String,
    pub author: String,
    pub artifact_name: String,
    pub artifact_type: String,
    pub artifact_architecture: String,
    pub component_name: String,
    pub component_location: String,
    pub component_type: String,
    pub aliases: String,
    pub severities: String,
    /// Output only: the EventTypeFilter number of the latest approved event (0: none).
    pub latest_type: i64,
    /// Output only: the fixed version when `latest_type` is `fixed`.
    pub fixed_version: Option<String>,
    pub create_time: i64,
    pub update_time: i64,
    pub delete_time: Option<i64>,
}

/// An advisory's own fields as a full replacement writes them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AdvisoryFields {
    pub artifact_name: String,
    pub artifact_type: String,
    pub artifact_architecture: String,
    pub component_name: String,
    pub component_location: String,
    pub component_type: String,
    pub aliases: String,
    pub severities: String,
}

impl AdvisoryRecord {
    pub fn fields(&self) -> AdvisoryFields {
        AdvisoryFields {
            artifact_name: self.artifact_name.clone(),
            artifact_type: self.artifact_type.clone(),
            artifact_architecture: self.artifact_architecture.clone(),
            component_name: self.component_name.clone(),
            component_location: self.component_location.clone(),
            component_type: self.component_type.clone(),
            aliases: self.aliases.clone(),
            severities: self.severities.clone(),
        }
    }

    /// The alias list (from its JSON).
    pub fn alias_list(&self) -> Vec<String> {
        alias_list(&self.aliases)
    }
}

pub(crate) fn alias_list(json: &str) -> Vec<String> {
    serde_json::from_str(json).unwrap_or_default()
}

/// What the `query` filter searches: artifact and component names and the
/// aliases, lowercased.
pub(crate) fn search_text(f: &AdvisoryFields) -> String {
    let mut s = format!("{}\n{}", f.artifact_name, f.component_name);
    for a in alias_list(&f.aliases) {
        s.push('\n');
        s.push_str(&a);
    }
    s.to_lowercase()
}

/// A stored event. `payload` is the event's oneof as proto3 JSON (the
/// service layer owns its shape); `kind` its EventTypeFilter number.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct EventRecord {
    pub uid: String,
    pub advisory_uid: String,
    pub event_time: i64,
    pub kind: i64,
    pub author: String,
    pub reviewer: String,
    pub review_state: i64,
    pub issue: Option<String>,
    pub payload: String,
    /// Digest of time, kind and payload: how a re-import recognises an event.
    pub fingerprint: String,
    pub findings: Vec<u8>,
    pub create_time: i64,
    pub update_time: i64,
}

/// One advisory of an import, ready to store: `record` carries a fresh uid and
/// times (used only if it is new), `events` fresh uids.
#[derive(Clone, Debug)]
pub struct ImportItem {
    pub record: AdvisoryRecord,
    pub events: Vec<EventRecord>,
    /// The record's CGA id was generated for it (its source had none): find
    /// the stored advisory by its legacy id in the group instead.
    pub by_legacy_id: bool,
    /// What the import kept but flagged (added to the advisory's flags).
    pub flags: Vec<FlagRecord>,
    /// Set when the import is reviewed upstream: its events are approved as
    /// imported (new ones arrive approved; stored ones still pending that it
    /// carries too are approved), each with an `APPROVED_AS_IMPORTED` flag.
    pub approval: Option<ImportApproval>,
}

/// Who approved an import's events, and the flag's words for it.
#[derive(Clone, Debug)]
pub struct ImportApproval {
    pub reviewer: String,
    pub detail: String,
}

/// A flag on an advisory: something an import kept that Ward cannot use in
/// its decisions, shortened, or approved as imported.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct FlagRecord {
    pub code: String,
    /// The field concerned (an event's uid for an approval).
    pub field: String,
    pub detail: String,
}

/// The code of the flag an event approved as imported carries.
pub const APPROVED_AS_IMPORTED: &str = "APPROVED_AS_IMPORTED";

/// A stored event as an import matches it.
#[derive(Clone, Debug)]
pub struct StoredPrint {
    pub fingerprint: String,
    pub uid: String,
    pub review_state: i64,
}

/// What an import did with one advisory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImportOutcome {
    Created,
    Updated,
    Unchanged,
    Rejected(String),
}

/// What to do with an incoming advisory, given the stored one.
pub(crate) enum Plan<'a> {
    Create,
    /// Replace the fields (if `fields`) and add `events`.
    Update {
        uid: String,
        fields: Option<Box<AdvisoryFields>>,
        events: Vec<&'a EventRecord>,
        /// Stored pending events an import reviewed upstream approves.
        approve: Vec<String>,
    },
    Unchanged,
    Reject(String),
}

/// Decides an import item against what is stored (`existing`, with its
/// events): events are matched by fingerprint and only added; fields are
/// replaced when they differ; an import reviewed upstream approves the
/// stored events it carries that are still pending.
pub(crate) fn plan<'a>(
    parent_uid: &str,
    existing: Option<(&AdvisoryRecord, &[StoredPrint])>,
    item: &'a ImportItem,
) -> Plan<'a> {
    let Some((cur, prints)) = existing else {
        return Plan::Create;
    };
    if cur.parent_uid != parent_uid {
        return Plan::Reject(format!(
            "advisory id {} is already used by another group's advisory",
            cur.advisory_id
        ));
    }
    if cur.delete_time.is_some() {
        return Plan::Reject(format!("advisory {} was deleted", cur.advisory_id));
    }
    let incoming = item.record.fields();
    let fields = (incoming != cur.fields()).then(|| Box::new(incoming));
    let mut seen: std::collections::HashSet<&str> = prints.iter().map(|p| p.fingerprint.as_str()).collect();
    let events: Vec<&EventRecord> = item
        .events
        .iter()
        .filter(|e| seen.insert(e.fingerprint.as_str()))
        .collect();
    let approve: Vec<String> = if item.approval.is_some() {
        let carried: std::collections::HashSet<&str> = item.events.iter().map(|e| e.fingerprint.as_str()).collect();
        prints
            .iter()
            .filter(|p| p.review_state == PENDING && carried.contains(p.fingerprint.as_str()))
            .map(|p| p.uid.clone())
            .collect()
    } else {
        Vec::new()
    };
    if fields.is_none() && events.is_empty() && approve.is_empty() {
        Plan::Unchanged
    } else {
        Plan::Update {
            uid: cur.uid.clone(),
            fields,
            events,
            approve,
        }
    }
}

#[async_trait]
pub trait AdvisoryStore: Send + Sync + 'static {
    /// NOT_FOUND if the group is gone; ALREADY_EXISTS if the advisory id is taken.
    async fn create_advisory(
        &self,
        a: &AdvisoryRecord,
        events: &[EventRecord],
        emit: crate::events::Emit<()>,
    ) -> Result<()>;
    async fn get_advisory(&self, uid: &Uidp) -> Result<Option<AdvisoryRecord>>;
    /// Replaces the advisory's own fields; NOT_FOUND if missing or deleted.
    async fn update_advisory(
        &self,
        uid: &Uidp,
        f: &AdvisoryFields,
        now_ms: i64,
        emit: crate::events::Emit<AdvisoryRecord>,
    ) -> Result<AdvisoryRecord>;
    /// Soft delete; NOT_FOUND if missing or already deleted.
    async fn delete_advisory(&self, uid: &Uidp, now_ms: i64, emit: crate::events::Emit<()>) -> Result<()>;
    async fn list_advisories(&self, q: &ListQuery) -> Result<Page<AdvisoryRecord>>;
    /// The events of these advisories, by advisory, oldest first.
    async fn events_of(&self, advisory_uids: &[String]) -> Result<Vec<EventRecord>>;

    /// Adds an event; NOT_FOUND if the advisory is missing or deleted.
    async fn add_event(&self, e: &EventRecord, emit: crate::events::Emit<()>) -> Result<()>;
    async fn get_event(&self, uid: &Uidp) -> Result<Option<EventRecord>>;
    /// Writes the event's review and content if its review state is still
    /// `expected_state` (FAILED_PRECONDITION otherwise: someone reviewed it
    /// meanwhile).
    async fn update_event(
        &self,
        e: &EventRecord,
        expected_state: i64,
        emit: crate::events::Emit<EventRecord>,
    ) -> Result<EventRecord>;

    /// Imports one document's advisories in one transaction; each outcome
    /// with the CGA id of the advisory it concerns (the stored one's when an
    /// import matched it).
    /// `emit` is the import's event, rendered from the outcomes.
    async fn import_advisories(
        &self,
        parent_uid: &str,
        items: &[ImportItem],
        now_ms: i64,
        emit: crate::events::Emit<Vec<(ImportOutcome, String)>>,
    ) -> Result<Vec<(ImportOutcome, String)>>;

    /// The advisory's flags, by code and field.
    async fn advisory_flags(&self, advisory_uid: &str) -> Result<Vec<FlagRecord>>;

    /// Imports OSV feed records into the group in one transaction, one
    /// outcome each. NOT_FOUND if the group is gone.
    async fn import_feed_records(
        &self,
        parent_uid: &str,
        records: &[FeedRecord],
        now_ms: i64,
        emit: crate::events::Emit<Vec<FeedOutcome>>,
    ) -> Result<Vec<FeedOutcome>>;
    /// The groups holding a record with this id, by uid.
    async fn feed_record_groups(&self, id: &str) -> Result<Vec<String>>;
    /// The body of one group's record, as imported.
    async fn feed_record_body(&self, parent_uid: &str, id: &str) -> Result<Option<String>>;
}

/// One package an imported record affects, indexed for reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeedPackage {
    pub ecosystem: String,
    pub name: String,
    /// The record's `affected` entries for this package, only their
    /// `ranges` and `versions`, as a JSON array: a report decides whether
    /// the record can apply from these few bytes, and reads the record's
    /// body only when it does.
    pub affected: String,
}

/// An imported OSV record: `body` is the record exactly as sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeedRecord {
    pub parent_uid: String,
    pub id: String,
    /// Milliseconds since the epoch.
    pub modified: i64,
    pub withdrawn: Option<i64>,
    pub aliases: Vec<String>,
    /// Each affected package, each (ecosystem, name) once.
    pub packages: Vec<FeedPackage>,
    pub body: String,
    /// SHA-256 of `body`'s content (its JSON with sorted keys), hex.
    pub digest: String,
}

/// What an import did with one feed record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeedOutcome {
    Created,
    /// Replaced by a newer (or same-dated but different) version.
    Updated,
    /// Replaced by a version that withdraws it.
    Withdrawn,
    /// The same record, or an older version than the stored one.
    Unchanged,
}

/// Decides an incoming feed record against the stored `(modified, digest)`.
pub(crate) fn feed_plan(stored: Option<(i64, &str)>, r: &FeedRecord) -> FeedOutcome {
    match stored {
        None => FeedOutcome::Created,
        Some((modified, digest)) if r.modified < modified || (r.modified == modified && r.digest == digest) => {
            FeedOutcome::Unchanged
        }
        Some(_) if r.withdrawn.is_some() => FeedOutcome::Withdrawn,
        Some(_) => FeedOutcome::Updated,
    }
}

/// The JSON list of a feed record's ecosystems (for display and filters).
pub(crate) fn ecosystems_json(packages: &[FeedPackage]) -> String {
    let mut e: Vec<&str> = packages.iter().map(|p| p.ecosystem.as_str()).collect();
    e.sort_unstable();
    e.dedup();
    serde_json::to_string(&e).unwrap_or_else(|_| "[]".into())
}

/// Whether an advisory holding `count` events of `bytes` may take `adding`.
pub(crate) fn has_room(count: i64, bytes: i64, adding: &[&EventRecord]) -> bool {
    let more: i64 = adding.iter().map(|e| event_bytes(e)).sum();
    count + adding.len() as i64 <= MAX_EVENTS_PER_ADVISORY && bytes + more <= MAX_EVENT_BYTES_PER_ADVISORY
}

/// What an event counts against its advisory's budget.
pub fn event_bytes(e: &EventRecord) -> i64 {
    (e.payload.len() + e.findings.len()) as i64
}

pub(crate) fn too_many_events(uid: &str) -> Error {
    Error::ResourceExhausted(format!(
        "advisory {uid} would hold more than {MAX_EVENTS_PER_ADVISORY} events or \
         {MAX_EVENT_BYTES_PER_ADVISORY} bytes of event payloads and findings"
    ))
}

/// Counts an advisory's events and their bytes (dialect placeholder `{a}`).
pub(crate) const EVENT_USAGE_SQLITE: &str = "SELECT COUNT(*), COALESCE(SUM(length(CAST(payload AS BLOB)) + \
     length(findings)), 0) FROM advisory_events WHERE advisory_uid = ?1";
pub(crate) const EVENT_USAGE_POSTGRES: &str = "SELECT COUNT(*), COALESCE(SUM(octet_length(payload) + \
     octet_length(findings)), 0)::BIGINT FROM advisory_events WHERE advisory_uid = $1";

pub(crate) fn advisory_exists(id: &str) -> Error {
    Error::AlreadyExists {
        resource_type: ADVISORY_TYPE,
        name: id.to_owned(),
    }
}

pub(crate) fn event_reviewed(uid: &str) -> Error {
    Error::precondition(
        "REVIEW_STATE_CHANGED",
        uid,
        "the event was reviewed by someone else meanwhile; read it again",
    )
}

/// The fixed version in a `fixed` event's payload JSON.
pub(crate) fn fixed_version_of(payload: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(payload).ok()?;
    v.get("fixed")?.get("fixedVersion")?.as_str().map(str::to_owned)
}

/// The status columns from the latest approved event `(kind, payload)`, if any.
pub(crate) fn status_of(latest: Option<(i64, String)>) -> (i64, Option<String>) {
    match latest {
        Some((kind, payload)) if kind == FIXED => (kind, fixed_version_of(&payload)),
        Some((kind, _)) => (kind, None),
        None => (0, None),
    }
}

/// The latest approved event of an advisory: by event time, then uid.
pub(crate) const LATEST_APPROVED: &str = "SELECT type, payload FROM advisory_events \
     WHERE advisory_uid = {a} AND review_state = 2 ORDER BY event_time DESC, uid DESC LIMIT 1";
