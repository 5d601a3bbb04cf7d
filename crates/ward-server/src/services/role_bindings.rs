//! Role bindings: an identity holds a role at a group and everything below it.
//! Every response carries the identity, group and role hydrated.

use ward_core::capability::CapSet;
use ward_core::error::FieldViolation;
use ward_core::fieldmask::Updatable;
use ward_core::listing::FilterValue;
use ward_core::rpc;
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_proto::Timestamp;
use ward_proto::iam::v2::{
    BatchCreateRoleBindingsRequest, BatchCreateRoleBindingsResponse, CreateRoleBindingRequest,
    DeleteRoleBindingRequest, GetRoleBindingRequest, ListRoleBindingsRequest, ListRoleBindingsResponse, RoleBinding,
    RoleBindingGroup, RoleBindingIdentity, RoleBindingRole,
};
use ward_store::events::INTERNAL;
use ward_store::{GROUP_TYPE, HydratedBinding, IDENTITY_TYPE, ROLE_BINDING_TYPE, ROLE_TYPE, RoleBindingRecord};

use super::events;
use super::list::ListParams;
use super::{UpdateMask, parse_uidp};
use crate::authz::Caller;
use crate::ward::Ward;

const COLLECTION: &str = "role_bindings";
/// Most bindings one BatchCreateRoleBindings may create.
pub const MAX_BATCH: usize = 25;

pub const BINDING_FIELDS: Updatable = Updatable {
    mutable: &["role_uid"],
    output_only: &["uid", "identity", "group", "role", "create_time"],
    immutable: &["identity_uid"],
};

fn to_proto(b: HydratedBinding) -> RoleBinding {
    RoleBinding {
        identity: Some(RoleBindingIdentity {
            uid: b.identity_uid.clone(),
            name: b.identity_name,
            description: b.identity_description,
            subject: b.identity_subject,
            issuer: b.identity_issuer,
            email: String::new(),
        }),
        group: Some(RoleBindingGroup {
            uid: b.parent_uid,
            name: b.group_name,
            description: b.group_description,
        }),
        role: Some(RoleBindingRole {
            uid: b.role_uid.clone(),
            name: b.name,
            description: b.role_description,
        }),
        create_time: Some(Timestamp::from_millis(b.create_time)),
        uid: b.uid,
        identity_uid: b.identity_uid,
        role_uid: b.role_uid,
    }
}

/// A person bound before their first login: no relationship and no issuer
/// yet (see `Ward::bindable_identity`).
fn is_pending(r: &ward_store::IdentityRecord) -> bool {
    r.parent_uid.is_none() && r.relationship_type == 0 && r.issuer.is_empty()
}

impl Ward {
    /// The capabilities of a role that may be bound at `group`: a built-in role,
    /// or a custom role defined in `group` or one of its ancestors. A custom role
    /// from elsewhere is INVALID_ARGUMENT to a caller who may see it, and
    /// NOT_FOUND to one who may not (its existence is not revealed).
    async fn bindable_role(&self, caller: &Caller, group: &Uidp, role: &Uidp) -> Result<CapSet> {
        let not_found = || Error::not_found(ROLE_TYPE, role.as_str());
        // Resolved through the caller's view: a custom role the caller may not
        // see (roles.list there) is NOT_FOUND, exactly like one that does not
        // exist. Built-in roles are the same on every installation and public.
        let sees = caller.is_admin || role.is_root() || self.caps_at(caller, role).contains(rpc::GET_ROLE.capability);
        if !sees {
            return Err(not_found());
        }
        let r = self.store.get_role(role).await?.ok_or_else(not_found)?;
        if let Some(home) = &r.parent_uid
            && !group.is_self_or_descendant_of(&Uidp::parse("role", home)?)
        {
            return Err(Error::invalid(
                "role_uid",
                "role_uid must name a built-in role or a role defined in this group or one above it",
            ));
        }
        Ok(CapSet::from_storage(&r.capabilities))
    }

    /// The identity of a new binding, resolved through the caller's view: the
    /// caller must see it (identity.list there, or identity.create where it
    /// lives, as a pull-token creator binds identities it just created);
    /// otherwise it is NOT_FOUND, exactly like one that does not exist. An
    /// identity in a group must live in the binding's organization.
    ///
    /// A root-level identity (a person: the uid `LookupIdentity` names for an
    /// issuer and subject):
    /// - one nobody has yet may be bound by whoever may create the binding,
    ///   before the person's first login: it is recorded as pending (no
    ///   relationship, so it cannot be assumed), the first login fills it
    ///   in, and the binding holds from then on. A uid that is a group or a
    ///   role is no person (NOT_FOUND).
    /// - a pending one, the same;
    /// - a registered person may be bound by the server admin, or in the
    ///   organization whose identity provider they logged in through; to
    ///   anyone else they are NOT_FOUND, as before.
    ///
    /// `Ok(true)`: the pending identity must be recorded with the binding.
    async fn bindable_identity(&self, caller: &Caller, group: &Uidp, identity: &Uidp) -> Result<bool> {
        let not_found = || Error::not_found(IDENTITY_TYPE, identity.as_str());
        if identity.is_root() {
            match self.store.get_identity(identity).await? {
                Some(r) if is_pending(&r) => return Ok(false),
                Some(_) => {
                    let theirs = match self.store.get_person(identity.as_str()).await? {
                        Some(p) => Uidp::parse("identity_provider", &p.identity_provider_uid)
                            .is_ok_and(|idp| idp.root() == group.root()),
                        None => false,
                    };
                    if caller.is_admin || theirs {
                        return Ok(false);
                    }
                    return Err(not_found());
                }
                None => {
                    if self.store.get_group(identity).await?.is_some() || self.store.get_role(identity).await?.is_some()
                    {
                        return Err(not_found());
                    }
                    return Ok(true);
                }
            }
        }
        let sees = caller.is_admin
            || self.caps_at(caller, identity).contains(rpc::GET_IDENTITY.capability)
            || identity
                .parent()
                .is_some_and(|p| self.caps_at(caller, &p).contains(rpc::CREATE_IDENTITY.capability));
        if !sees || self.store.get_identity(identity).await?.is_none() {
            return Err(not_found());
        }
        if !identity.is_root() && identity.root() != group.root() {
            if self.store.get_group(group).await?.is_none() {
                return Err(Error::not_found(GROUP_TYPE, group.as_str()));
            }
            return Err(Error::invalid(
                "identity_uid",
                "identity_uid must name an identity in the same organization as the binding",
            ));
        }
        Ok(false)
    }

    /// Records a person bound before their first login (see
    /// [`Self::bindable_identity`]); a concurrent first record is fine.
    async fn pending_person(&self, caller: &Caller, uid: &Uidp) -> Result<()> {
        let now = self.clock.now_millis();
        let record = ward_store::IdentityRecord {
            uid: uid.as_str().to_owned(),
            parent_uid: None,
            name: String::new(),
            description: "Bound before their first login".into(),
            company: String::new(),
            relationship_type: 0,
            relationship: String::new(),
            issuer: String::new(),
            subject: String::new(),
            last_seen_time: None,
            create_time: now,
            update_time: now,
        };
        // Ward's bookkeeping: an internal event (audited, never delivered).
        let reply = super::identities::to_proto(record.clone());
        let emit = self
            .created(
                caller,
                events::types::IDENTITY_CREATED,
                &record.uid,
                &record.uid,
                &reply,
            )
            .audience(INTERNAL);
        match self.store.create_identity(&record, emit).await {
            Ok(()) => Ok(()),
            Err(e) => match self.store.get_identity(uid).await? {
                Some(_) => Ok(()),
                None => Err(e),
            },
        }
    }

    /// Removes a pending person no binding names any more (their bindings
    /// failed to be written, or were deleted): pending identities exist only
    /// for the bindings that wait for them. One that is still bound stays
    /// (the store refuses to delete it).
    async fn drop_unbound_pending(&self, caller: &Caller, uid: &str) {
        let Ok(uid) = Uidp::parse("identity", uid) else { return };
        if !uid.is_root() {
            return;
        }
        if let Ok(Some(r)) = self.store.get_identity(&uid).await
            && is_pending(&r)
        {
            let emit = self
                .deleted(caller, events::types::IDENTITY_DELETED, uid.as_str(), uid.as_str())
                .audience(INTERNAL);
            let _ = self.store.delete_identity(&uid, emit).await;
        }
    }

    /// Writes bindings, recording first the pending people they wait for;
    /// if the bindings cannot be written, those pending people go again.
    /// The event is one binding's, or the batch's (its body the batch
    /// response, in request order).
    async fn write_bindings(&self, caller: &Caller, records: &[RoleBindingRecord], pending: &[Uidp]) -> Result<()> {
        for p in pending {
            self.pending_person(caller, p).await?;
        }
        let written = if let [one] = records {
            let emit = self.rendered(
                caller,
                events::types::ROLEBINDING_CREATED,
                &one.uid,
                &one.parent_uid,
                |rows: &Vec<HydratedBinding>| rows.first().cloned().map(to_proto).unwrap_or_default(),
            );
            self.store.create_binding(one, emit).await
        } else {
            let group = records.first().map(|r| r.parent_uid.clone()).unwrap_or_default();
            let order: Vec<String> = records.iter().map(|r| r.uid.clone()).collect();
            let emit = self.rendered(
                caller,
                events::types::ROLEBINDINGS_CREATED,
                &group,
                &group,
                move |rows: &Vec<HydratedBinding>| BatchCreateRoleBindingsResponse {
                    role_bindings: order
                        .iter()
                        .filter_map(|u| rows.iter().find(|r| &r.uid == u).cloned().map(to_proto))
                        .collect(),
                },
            );
            self.store.create_bindings(records, emit).await
        };
        if written.is_err() {
            for p in pending {
                self.drop_unbound_pending(caller, p.as_str()).await;
            }
        }
        written
    }

    /// A new binding at `group` (where the caller is already authorized),
    /// once its role and identity resolve through the caller's view and the
    /// role grants nothing the caller lacks there.
    /// `pending` collects a person the binding waits for (recorded only
    /// once every binding of the request has passed its checks).
    async fn new_binding(
        &self,
        caller: &Caller,
        group: &Uidp,
        identity: Uidp,
        role: Uidp,
        pending: &mut Vec<Uidp>,
    ) -> Result<RoleBindingRecord> {
        let caps = self.bindable_role(caller, group, &role).await?;
        self.check_no_escalation(caller, group, caps)?;
        if self.bindable_identity(caller, group, &identity).await? && !pending.contains(&identity) {
            pending.push(identity.clone());
        }
        let now = self.clock.now_millis();
        Ok(RoleBindingRecord {
            uid: group.new_child().into(),
            parent_uid: group.as_str().into(),
            identity_uid: identity.into(),
            role_uid: role.into(),
            create_time: now,
            update_time: now,
        })
    }

    /// Up to [`MAX_BATCH`] bindings under one parent, all or none (AIP-233):
    /// a sub-request's parent, when set, must be the batch's; its role
    /// defaults to the batch's `role_uid` and may not contradict it.
    pub async fn batch_create_role_bindings(
        &self,
        caller: &Caller,
        req: BatchCreateRoleBindingsRequest,
    ) -> Result<BatchCreateRoleBindingsResponse> {
        let group = Uidp::parse("parent", &req.parent)?;
        self.authorize(caller, &rpc::CREATE_ROLE_BINDING, &group)?;
        if req.requests.is_empty() || req.requests.len() > MAX_BATCH {
            return Err(Error::invalid(
                "requests",
                format!("requests must hold between 1 and {MAX_BATCH} role bindings"),
            ));
        }
        let mut bad = Vec::new();
        let mut wanted = Vec::new();
        for (i, sub) in req.requests.iter().enumerate() {
            if !sub.parent.is_empty() && sub.parent != req.parent {
                bad.push(FieldViolation {
                    field: format!("requests[{i}].parent"),
                    description: "a sub-request's parent must be empty or the batch's parent".into(),
                });
            }
            let b = sub.role_binding.clone().unwrap_or_default();
            let role = match (b.role_uid.as_str(), req.role_uid.as_str()) {
                ("", top) => top.to_owned(),
                (own, "") => own.to_owned(),
                (own, top) if own == top => own.to_owned(),
                _ => {
                    bad.push(FieldViolation {
                        field: format!("requests[{i}].role_binding.role_uid"),
                        description: "differs from the batch's role_uid".into(),
                    });
                    continue;
                }
            };
            let identity = parse_uidp(
                &format!("requests[{i}].role_binding.identity_uid"),
                &b.identity_uid,
                &mut bad,
            );
            let role = parse_uidp(&format!("requests[{i}].role_binding.role_uid"), &role, &mut bad);
            if let (Some(identity), Some(role)) = (identity, role) {
                wanted.push((identity, role));
            }
        }
        if !bad.is_empty() {
            return Err(Error::InvalidArgument(bad));
        }
        let mut records = Vec::with_capacity(wanted.len());
        let mut pending = Vec::new();
        for (identity, role) in wanted {
            records.push(self.new_binding(caller, &group, identity, role, &mut pending).await?);
        }
        self.write_bindings(caller, &records, &pending).await?;
        self.grants_changed().await;
        let mut role_bindings = Vec::with_capacity(records.len());
        for r in &records {
            let uid = Uidp::parse("uid", &r.uid)?;
            let b = self
                .store
                .get_binding(&uid)
                .await?
                .ok_or_else(|| Error::internal("created binding vanished"))?;
            role_bindings.push(to_proto(b));
        }
        Ok(BatchCreateRoleBindingsResponse { role_bindings })
    }

    pub async fn create_role_binding(&self, caller: &Caller, req: CreateRoleBindingRequest) -> Result<RoleBinding> {
        let b = req.role_binding.unwrap_or_default();
        let mut bad = Vec::new();
        let group = parse_uidp("parent", &req.parent, &mut bad);
        let identity = parse_uidp("identity_uid", &b.identity_uid, &mut bad);
        let role = parse_uidp("role_uid", &b.role_uid, &mut bad);
        let (Some(group), Some(identity), Some(role), true) = (group, identity, role, bad.is_empty()) else {
            return Err(Error::InvalidArgument(bad));
        };
        self.authorize(caller, &rpc::CREATE_ROLE_BINDING, &group)?;
        let mut pending = Vec::new();
        let record = self.new_binding(caller, &group, identity, role, &mut pending).await?;
        let uid = Uidp::parse("uid", &record.uid)?;
        self.write_bindings(caller, std::slice::from_ref(&record), &pending)
            .await?;
        self.grants_changed().await;
        let b = self
            .store
            .get_binding(&uid)
            .await?
            .ok_or_else(|| Error::internal("created binding vanished"))?;
        Ok(to_proto(b))
    }

    pub async fn get_role_binding(&self, caller: &Caller, req: GetRoleBindingRequest) -> Result<RoleBinding> {
        let uid = Uidp::parse("uid", &req.uid)?;
        self.authorize(caller, &rpc::GET_ROLE_BINDING, &uid)?;
        let b = self
            .store
            .get_binding(&uid)
            .await?
            .ok_or_else(|| Error::not_found(ROLE_BINDING_TYPE, uid.as_str()))?;
        Ok(to_proto(b))
    }

    pub async fn list_role_bindings(
        &self,
        caller: &Caller,
        req: ListRoleBindingsRequest,
    ) -> Result<ListRoleBindingsResponse> {
        let visible = self.visible_scopes(caller, rpc::LIST_ROLE_BINDINGS.capability);
        let mut bad = Vec::new();
        let mut filters = Vec::new();
        for (field, column, raw) in [
            ("identity", "identity_uid", &req.identity),
            ("group", "parent_uid", &req.group),
            ("role", "role_uid", &req.role),
        ] {
            if !raw.is_empty()
                && let Some(u) = parse_uidp(field, raw, &mut bad)
            {
                filters.push((column, FilterValue::Text(u.into())));
            }
        }
        if !bad.is_empty() {
            return Err(Error::InvalidArgument(bad));
        }
        let params = ListParams {
            uidp: req.uidp.as_ref(),
            name: "",
            page_size: req.page_size,
            page_token: &req.page_token,
            order_by: &req.order_by,
            skip: req.skip,
            filters,
        };
        let (q, skipped) = self.list_query(COLLECTION, params, visible)?;
        let page = self.store.list_bindings(&q).await?;
        Ok(ListRoleBindingsResponse {
            next_page_token: self.next_page_token(COLLECTION, &q, skipped, &page),
            total_count: Some(page.total_count),
            skipped,
            role_bindings: page.items.into_iter().map(to_proto).collect(),
        })
    }

    /// Changes the role of a binding (the only mutable field).
    pub async fn update_role_binding(&self, caller: &Caller, b: RoleBinding, mask: UpdateMask) -> Result<RoleBinding> {
        let uid = Uidp::parse("role_binding.uid", &b.uid)?;
        let mask = mask.resolve(&BINDING_FIELDS, &[("role_uid", !b.role_uid.is_empty())])?;
        let role = if mask.contains("role_uid") {
            Some(Uidp::parse("role_uid", &b.role_uid)?)
        } else {
            None
        };
        self.authorize(caller, &rpc::UPDATE_ROLE_BINDING, &uid)?;
        let Some(role) = role else {
            let b = self
                .store
                .get_binding(&uid)
                .await?
                .ok_or_else(|| Error::not_found(ROLE_BINDING_TYPE, uid.as_str()))?;
            return Ok(to_proto(b));
        };
        let group = uid
            .parent()
            .ok_or_else(|| Error::invalid("role_binding.uid", "a role binding uid has a group part"))?;
        let caps = self.bindable_role(caller, &group, &role).await?;
        self.check_no_escalation(caller, &group, caps)?;
        let emit = self.updated(
            caller,
            events::types::ROLEBINDING_UPDATED,
            uid.as_str(),
            group.as_str(),
            to_proto,
        );
        let updated = self
            .store
            .update_binding(&uid, role.as_str(), self.clock.now_millis(), emit)
            .await?;
        self.grants_changed().await;
        Ok(to_proto(updated))
    }

    /// Deletes a binding; deleting one that is already gone succeeds (AIP-135).
    pub async fn delete_role_binding(&self, caller: &Caller, req: DeleteRoleBindingRequest) -> Result<()> {
        let uid = Uidp::parse("uid", &req.uid)?;
        if uid.is_root() {
            return Err(Error::invalid("uid", "a role binding uid has a group part"));
        }
        self.authorize(caller, &rpc::DELETE_ROLE_BINDING, &uid)?;
        let identity = self.store.get_binding(&uid).await?.map(|b| b.identity_uid);
        let group = Ward::event_group(uid.as_str());
        let emit = self.deleted(caller, events::types::ROLEBINDING_DELETED, uid.as_str(), &group);
        if self.store.delete_binding(&uid, emit).await? {
            self.grants_changed().await;
        }
        if let Some(identity) = identity {
            self.drop_unbound_pending(caller, &identity).await;
        }
        Ok(())
    }
}
