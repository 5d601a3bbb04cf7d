//! The events Ward's writes emit: their CloudEvent types, and the head of
//! each event (id, subject, group, actor, time) a write hands the store
//! with the change. The store writes the event in the change's transaction
//! (see `ward_store::events`).

use serde::Serialize;
use ward_store::events::{CUSTOMER, Emit, EventRecord};

use crate::authz::Caller;
use crate::ward::Ward;

pub mod delivery;
pub mod log;
pub mod registry;
pub mod subscriptions;

/// CloudEvent types, as the contract's `chainguard.annotations.events` name
/// them.
pub mod types {
    pub const GROUP_CREATED: &str = "dev.chainguard.api.iam.group.created.v1";
    pub const GROUP_UPDATED: &str = "dev.chainguard.api.iam.group.updated.v1";
    pub const GROUP_DELETED: &str = "dev.chainguard.api.iam.group.deleted.v1";
    pub const ROLE_CREATED: &str = "dev.chainguard.api.iam.roles.created.v1";
    pub const ROLE_UPDATED: &str = "dev.chainguard.api.iam.roles.updated.v1";
    pub const ROLE_DELETED: &str = "dev.chainguard.api.iam.roles.deleted.v1";
    pub const IDENTITY_CREATED: &str = "dev.chainguard.api.iam.identity.created.v1";
    pub const IDENTITY_UPDATED: &str = "dev.chainguard.api.iam.identity.updated.v1";
    pub const IDENTITY_DELETED: &str = "dev.chainguard.api.iam.identity.deleted.v1";
    pub const REPO_CREATED: &str = "dev.chainguard.api.platform.registry.repo.created.v1";
    pub const REPO_UPDATED: &str = "dev.chainguard.api.platform.registry.repo.updated.v1";
    pub const REPO_DELETED: &str = "dev.chainguard.api.platform.registry.repo.deleted.v1";
    pub const ROLEBINDING_CREATED: &str = "dev.chainguard.api.iam.rolebindings.created.v1";
    pub const ROLEBINDINGS_CREATED: &str = "dev.chainguard.api.iam.rolebindings.created.batch.v1";
    pub const ROLEBINDING_UPDATED: &str = "dev.chainguard.api.iam.rolebindings.updated.v1";
    pub const ROLEBINDING_DELETED: &str = "dev.chainguard.api.iam.rolebindings.deleted.v1";
    pub const TAG_CREATED: &str = "dev.chainguard.api.platform.registry.tag.created.v1";
    pub const TAG_UPDATED: &str = "dev.chainguard.api.platform.registry.tag.updated.v1";
    pub const TAG_DELETED: &str = "dev.chainguard.api.platform.registry.tag.deleted.v1";
    pub const ADVISORY_CREATED: &str = "dev.chainguard.api.vulnerabilities.advisory.created.v1";
    pub const ADVISORY_UPDATED: &str = "dev.chainguard.api.vulnerabilities.advisory.updated.v1";
    pub const ADVISORY_DELETED: &str = "dev.chainguard.api.vulnerabilities.advisory.deleted.v1";
    pub const ADVISORY_EVENT_CREATED: &str = "dev.chainguard.api.vulnerabilities.advisory_event.created.v1";
    pub const ADVISORY_EVENT_UPDATED: &str = "dev.chainguard.api.vulnerabilities.advisory_event.updated.v1";
    pub const ADVISORY_EVENT_REVIEWED: &str = "dev.chainguard.api.vulnerabilities.advisory_event.reviewed.v1";
    pub const IDENTITY_PROVIDER_CREATED: &str = "dev.chainguard.api.iam.identity_providers.created.v1";
    pub const IDENTITY_PROVIDER_UPDATED: &str = "dev.chainguard.api.iam.identity_providers.updated.v1";
    pub const IDENTITY_PROVIDER_DELETED: &str = "dev.chainguard.api.iam.identity_providers.deleted.v1";
    pub const GROUP_MAPPING_CREATED: &str = "dev.chainguard.api.iam.external_group_role_mappings.created.v1";
    pub const GROUP_MAPPING_DELETED: &str = "dev.chainguard.api.iam.external_group_role_mappings.deleted.v1";
    pub const GROUP_MAPPINGS_DELETED: &str = "dev.chainguard.api.iam.external_group_role_mappings.deleted.batch.v1";
    pub const GROUP_INVITE_CREATED: &str = "dev.chainguard.api.iam.group_invite.created.v1";
    pub const GROUP_INVITE_DELETED: &str = "dev.chainguard.api.iam.group_invite.deleted.v1";
    pub const ACCOUNT_ASSOCIATION_CREATED: &str = "dev.chainguard.api.iam.account_associations.created.v1";
    pub const ACCOUNT_ASSOCIATION_UPDATED: &str = "dev.chainguard.api.iam.account_associations.updated.v1";
    pub const ACCOUNT_ASSOCIATION_DELETED: &str = "dev.chainguard.api.iam.account_associations.deleted.v1";
    pub const REGISTERED: &str = "dev.chainguard.api.auth.registered.v1";
    pub const TERMS_ACCEPTED: &str = "dev.chainguard.api.iam.terms.accepted.v1";
    pub const ADVISORIES_IMPORTED: &str = "dev.chainguard.api.vulnerabilities.advisories.imported.v1";
    pub const OSV_IMPORTED: &str = "dev.chainguard.api.vulnerabilities.osv.imported.v1";
    pub const IDENTITY_METADATA_UPDATED: &str = "dev.chainguard.api.iam.identity.metadata.updated.v1";
    pub const SUBSCRIPTION_CREATED: &str = "dev.chainguard.api.events.subscription.created.v1";
    pub const SUBSCRIPTION_DELETED: &str = "dev.chainguard.api.events.subscription.deleted.v1";
}

/// Days the event log keeps an event unless configured otherwise.
pub const DEFAULT_RETENTION_DAYS: u32 = 400;

/// Events one pruning statement deletes at most (a short transaction each).
const PRUNE_BATCH: u32 = 10_000;

/// A new CloudEvent id: a random (version 4) UUID.
fn new_id() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..])
}

/// A message's proto3 JSON, the body of its event.
fn body<T: Serialize>(m: &T) -> String {
    // Ward's messages always serialize; an empty object would still be a
    // well-formed body.
    serde_json::to_string(m).unwrap_or_else(|_| "{}".into())
}

impl Ward {
    /// The event of `caller`'s create of `subject`, answered with `reply`.
    pub(crate) fn created<M: Serialize>(
        &self,
        caller: &Caller,
        event_type: &str,
        subject: &str,
        group: &str,
        reply: &M,
    ) -> Emit<()> {
        Emit::fixed(self.event(caller, event_type, subject, group, body(reply)))
    }

    /// The event of `caller`'s update of `subject`: its body is the updated
    /// record as the API returns it (`reply`), rendered in the write's
    /// transaction.
    pub(crate) fn updated<R: Clone, M: Serialize>(
        &self,
        caller: &Caller,
        event_type: &str,
        subject: &str,
        group: &str,
        reply: impl FnOnce(R) -> M + Send + 'static,
    ) -> Emit<R> {
        self.rendered(caller, event_type, subject, group, move |r: &R| reply(r.clone()))
    }

    /// The event of `caller`'s write of `subject` whose body is the reply
    /// `render` makes from what the store wrote, in the write's transaction
    /// (a create whose reply shows joined data, like a role binding's).
    pub(crate) fn rendered<R, M: Serialize>(
        &self,
        caller: &Caller,
        event_type: &str,
        subject: &str,
        group: &str,
        render: impl FnOnce(&R) -> M + Send + 'static,
    ) -> Emit<R> {
        let head = self.event(caller, event_type, subject, group, String::new());
        Emit::new(head, move |r: &R| body(&render(r)))
    }

    /// The event of `caller`'s delete of `subject` (its body: Empty).
    pub(crate) fn deleted(&self, caller: &Caller, event_type: &str, subject: &str, group: &str) -> Emit<()> {
        Emit::fixed(self.event(caller, event_type, subject, group, "{}".into()))
    }

    /// The group an event about `uid` belongs to: its parent, or itself at
    /// the root (an organization, a registered person).
    pub(crate) fn event_group(uid: &str) -> String {
        match uid.rsplit_once('/') {
            Some((parent, _)) => parent.to_owned(),
            None => uid.to_owned(),
        }
    }

    /// The time (milliseconds) before which events are past the retention.
    fn retention_cutoff(&self) -> i64 {
        let day_ms = 24 * 60 * 60 * 1000;
        self.clock.now_millis() - i64::from(self.event_retention_days) * day_ms
    }

    /// Forgets failed deliveries of events past the retention, and all but
    /// each subscription's newest [`MAX_FAILED_PER_SUBSCRIPTION`] (a sink
    /// that refuses every event adds one a write): the deliverer runs it
    /// every minute.
    ///
    /// [`MAX_FAILED_PER_SUBSCRIPTION`]: ward_store::events::MAX_FAILED_PER_SUBSCRIPTION
    pub async fn trim_failed_deliveries(&self) -> ward_core::Result<u64> {
        let before = self.retention_cutoff();
        self.store
            .trim_failed_deliveries(before, ward_store::events::MAX_FAILED_PER_SUBSCRIPTION)
            .await
    }

    /// Deletes the events older than the retention, in batches; returns how
    /// many went. Every server runs it on its sweep tick (replicas deleting
    /// the same rows is harmless).
    pub async fn prune_events(&self) -> ward_core::Result<u64> {
        let before = self.retention_cutoff();
        let mut total = 0;
        loop {
            let n = self.store.prune_events(before, PRUNE_BATCH).await?;
            total += n;
            if n < u64::from(PRUNE_BATCH) {
                return Ok(total);
            }
        }
    }

    /// The head of the event `caller`'s write of `subject` (in `group`)
    /// emits; its body is `body` unless the store renders it from the
    /// write's result.
    fn event(&self, caller: &Caller, event_type: &str, subject: &str, group: &str, body: String) -> EventRecord {
        let act = caller
            .claims
            .act
            .as_ref()
            .and_then(|a| serde_json::to_string(a).ok())
            .unwrap_or_else(|| "{}".into());
        EventRecord {
            seq: 0,
            id: new_id(),
            event_type: event_type.to_owned(),
            subject: subject.to_owned(),
            group_uid: group.to_owned(),
            actor: caller.subject.clone(),
            act,
            body,
            audience: CUSTOMER.to_owned(),
            time: self.clock.now_millis(),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_version_4_uuids() {
        let a = super::new_id();
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"), "{a}");
        assert_ne!(a, super::new_id());
    }
}
