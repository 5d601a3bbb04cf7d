//! Importing the documents security teams keep (advisory-schema YAML and OSV,
//! parsed by the client into v1 advisories): a few store transactions per
//! request, a savepoint per advisory; idempotent. An advisory is found by its CGA id (or, without one, by its
//! legacy id in the group); its fields are replaced when they differ and
//! events it does not hold yet (by time, type and content) are added as
//! PENDING. Nothing is removed: an event history only grows.
//!
//! An import keeps what is valid (`lenient`): a value Ward cannot use is
//! kept as written and flagged, an over-long text is shortened and flagged;
//! only what is unsafe or unusable as a whole is refused. An import
//! `reviewed_upstream` (the caller also holds `advisories.approve` there)
//! records its events as approved as imported.

use ward_core::rpc;
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_proto::vulnerabilities::v1::{
    ImportDocument, ImportRequest, ImportResponse, ImportResult, import_result::Outcome,
};
use ward_store::advisories::{ImportApproval, ImportItem, ImportOutcome};

use super::{MAX_NAME, lenient, v1};
use crate::authz::Caller;
use crate::ward::Ward;

/// Most documents one import request may carry.
pub const MAX_DOCUMENTS: usize = 2000;
/// Most advisories one document may carry.
pub const MAX_PER_DOCUMENT: usize = 5000;
/// Advisories per store transaction of an import.
const STORE_CHUNK: usize = 1000;

/// One advisory of an import, checked and ready to store.
struct Prepared {
    source: String,
    /// The id the document gave it, as the report names it.
    shown: String,
    warnings: Vec<String>,
    item: ImportItem,
}

pub(crate) fn result(source: &str, advisory_id: &str, outcome: Outcome, reason: String) -> ImportResult {
    ImportResult {
        source: source.to_owned(),
        advisory_id: advisory_id.to_owned(),
        outcome: outcome as i32,
        reason,
        warnings: Vec::new(),
    }
}

/// Adds up the outcomes of `resp.results` into its counts.
pub(crate) fn count(resp: &mut ImportResponse) {
    for r in &resp.results {
        match Outcome::try_from(r.outcome).unwrap_or_default() {
            Outcome::Created => resp.created += 1,
            Outcome::Updated => resp.updated += 1,
            Outcome::Unchanged => resp.unchanged += 1,
            Outcome::Rejected => resp.rejected += 1,
            Outcome::Withdrawn => resp.withdrawn += 1,
            // A dry run's checked advisory.
            Outcome::Unspecified => {}
        }
        if !r.warnings.is_empty() {
            resp.flagged += 1;
        }
    }
}

/// A rejection's reason: the violations of an InvalidArgument, else the message.
pub(crate) fn reason(e: &Error) -> String {
    match e {
        Error::InvalidArgument(v) => v
            .iter()
            .take(5)
            .map(|f| format!("{}: {}", f.field, f.description))
            .collect::<Vec<_>>()
            .join("; "),
        e => e.message(),
    }
    .chars()
    .take(1024)
    .collect()
}

impl Ward {
    /// Whether `caller` may import anywhere: checked before an import's body
    /// is read, so nobody else makes the server parse megabytes.
    pub fn may_import(&self, caller: &Caller) -> Result<()> {
        if caller.is_admin || caller.grants.anywhere(rpc::IMPORT_ADVISORIES.capability) {
            Ok(())
        } else {
            Err(Error::PermissionDenied("advisories.create is required".into()))
        }
    }

    pub async fn import_advisories(&self, caller: &Caller, req: ImportRequest) -> Result<ImportResponse> {
        let parent = Uidp::parse("parent_id", &req.parent_id)?;
        self.authorize(caller, &rpc::IMPORT_ADVISORIES, &parent)?;
        self.authorize(caller, &rpc::IMPORT_ADVISORIES_UPDATE, &parent)?;
        let approval = if req.reviewed_upstream {
            self.authorize(caller, &rpc::IMPORT_REVIEWED_UPSTREAM, &parent)?;
            let when = chrono::DateTime::from_timestamp_millis(self.clock.now_millis())
                .unwrap_or_default()
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            Some(ImportApproval {
                reviewer: caller.subject.clone(),
                detail: format!(
                    "approved as imported by {} at {when}: reviewed upstream, not in Ward",
                    caller.subject
                ),
            })
        } else {
            None
        };
        if req.documents.len() > MAX_DOCUMENTS {
            return Err(Error::invalid(
                "documents",
                format!("at most {MAX_DOCUMENTS} documents per request"),
            ));
        }
        let mut resp = ImportResponse::default();
        let mut prepared = Vec::new();
        for doc in req.documents {
            self.prepare_document(caller, &parent, doc, approval.as_ref(), &mut prepared, &mut resp);
        }
        if req.dry_run {
            for p in prepared {
                resp.results.push(ImportResult {
                    warnings: p.warnings,
                    ..result(&p.source, &p.shown, Outcome::Unspecified, String::new())
                });
            }
        } else {
            // A few store transactions per request, not one per document: each
            // advisory is still all or nothing (a savepoint of its own).
            let mut prepared = prepared.into_iter().peekable();
            while prepared.peek().is_some() {
                let chunk: Vec<Prepared> = prepared.by_ref().take(STORE_CHUNK).collect();
                let items: Vec<ImportItem> = chunk.iter().map(|p| p.item.clone()).collect();
                // One event per transaction: which advisories it created,
                // updated, left or refused, by id.
                let emit = self.rendered(
                    caller,
                    crate::services::events::types::ADVISORIES_IMPORTED,
                    parent.as_str(),
                    parent.as_str(),
                    |outcomes: &Vec<(ImportOutcome, String)>| {
                        let results: Vec<serde_json::Value> = outcomes
                            .iter()
                            .map(|(o, id)| match o {
                                ImportOutcome::Created => serde_json::json!({"advisoryId": id, "outcome": "CREATED"}),
                                ImportOutcome::Updated => serde_json::json!({"advisoryId": id, "outcome": "UPDATED"}),
                                ImportOutcome::Unchanged => {
                                    serde_json::json!({"advisoryId": id, "outcome": "UNCHANGED"})
                                }
                                ImportOutcome::Rejected(why) => {
                                    serde_json::json!({"advisoryId": id, "outcome": "REJECTED", "reason": why})
                                }
                            })
                            .collect();
                        serde_json::json!({ "results": results })
                    },
                );
                let outcomes = self
                    .store
                    .import_advisories(parent.as_str(), &items, self.clock.now_millis(), emit)
                    .await?;
                self.on_advisories_changed(
                    parent.as_str(),
                    items
                        .iter()
                        .flat_map(|i| {
                            [
                                i.record.artifact_name.clone(),
                                i.record.component_name.clone(),
                                i.record.origin.clone(),
                            ]
                        })
                        .collect(),
                )
                .await;
                for ((o, id), p) in outcomes.into_iter().zip(chunk) {
                    let (outcome, why) = match o {
                        ImportOutcome::Created => (Outcome::Created, String::new()),
                        ImportOutcome::Updated => (Outcome::Updated, String::new()),
                        ImportOutcome::Unchanged => (Outcome::Unchanged, String::new()),
                        ImportOutcome::Rejected(why) => (Outcome::Rejected, why),
                    };
                    // A refused advisory kept nothing to warn about.
                    let warnings = if outcome == Outcome::Rejected {
                        Vec::new()
                    } else {
                        p.warnings
                    };
                    resp.results.push(ImportResult {
                        warnings,
                        ..result(&p.source, &id, outcome, why)
                    });
                }
            }
        }
        count(&mut resp);
        if approval.is_some() && !req.dry_run {
            // The audit trail says these decisions were approved as imported.
            tracing::info!(
                target: "ward::audit",
                group = %parent,
                importer = %caller.subject,
                created = resp.created,
                updated = resp.updated,
                "advisory import reviewed upstream: its events are approved as imported, not reviewed in Ward"
            );
        }
        Ok(resp)
    }

    /// Checks one document's advisories: refusals go to `resp`, the rest to
    /// `out`.
    fn prepare_document(
        &self,
        caller: &Caller,
        parent: &Uidp,
        doc: ImportDocument,
        approval: Option<&ImportApproval>,
        out: &mut Vec<Prepared>,
        resp: &mut ImportResponse,
    ) {
        let source: String = doc.source.chars().take(1024).collect();
        if doc.advisories.len() > MAX_PER_DOCUMENT {
            resp.results.push(result(
                &source,
                "",
                Outcome::Rejected,
                format!("at most {MAX_PER_DOCUMENT} advisories per document"),
            ));
            return;
        }
        if doc.package.len() > MAX_NAME {
            resp.results.push(result(
                &source,
                "",
                Outcome::Rejected,
                "the package name is too long".into(),
            ));
            return;
        }
        let mut seen = std::collections::HashSet::new();
        for a in doc.advisories {
            let shown: String = a.advisory_id.chars().take(64).collect();
            let mut flags = Vec::new();
            let checked = v1::advisory_in(a).and_then(|mut a| {
                flags = lenient::keep_what_is_valid(&mut a, "");
                let origin = if doc.package.is_empty() {
                    a.artifact_name.clone()
                } else {
                    doc.package.clone()
                };
                if a.advisory_id.is_empty() && a.legacy_advisory_id.as_deref().unwrap_or_default().is_empty() {
                    return Err(Error::invalid(
                        "advisory_id",
                        "an imported advisory needs its CGA id or a legacy id",
                    ));
                }
                // One advisory per key: its CGA id, else its legacy id.
                let key = if a.advisory_id.is_empty() {
                    format!("legacy:{}", a.legacy_advisory_id.as_deref().unwrap_or_default())
                } else {
                    a.advisory_id.clone()
                };
                if !seen.insert(key) {
                    return Err(Error::invalid("advisory_id", "the document names this advisory twice"));
                }
                let id = a.advisory_id.clone();
                self.new_advisory(caller, parent, &a, &origin, id, true)
            });
            match checked {
                Ok((record, mut events)) => {
                    if let Some(a) = approval {
                        for e in &mut events {
                            e.review_state = ward_store::advisories::APPROVED;
                            e.reviewer = a.reviewer.clone();
                        }
                    }
                    let warnings = flags.iter().map(lenient::describe).collect();
                    // Advisories known only by a legacy id get a CGA id now
                    // (used only if new: the store finds them by that legacy id).
                    let by_legacy_id = record.advisory_id.is_empty();
                    let mut record = record;
                    if by_legacy_id {
                        record.advisory_id = super::write::fresh_cga();
                    }
                    out.push(Prepared {
                        source: source.clone(),
                        shown,
                        warnings,
                        item: ImportItem {
                            record,
                            events,
                            by_legacy_id,
                            flags,
                            approval: approval.cloned(),
                        },
                    });
                }
                Err(e) => resp
                    .results
                    .push(result(&source, &shown, Outcome::Rejected, reason(&e))),
            }
        }
    }
}
