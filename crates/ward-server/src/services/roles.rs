//! Roles: built-in roles at the root (same uid on every installation, never
//! changed through the API) and custom roles defined in a group.

use ward_core::capability::{BUILTIN_ROLES, CapSet, Capability};
use ward_core::error::{FieldViolation, PreconditionViolation};
use ward_core::fieldmask::Updatable;
use ward_core::names::{check_description, check_name};
use ward_core::rpc;
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_proto::Timestamp;
use ward_proto::iam::v2::{
    CreateRoleRequest, DeleteRoleRequest, GetRoleRequest, ListRolesRequest, ListRolesResponse, Role,
};
use ward_store::{ROLE_TYPE, RolePatch, RoleRecord};

use super::events;
use super::list::ListParams;
use super::{UpdateMask, parse_uidp};
use crate::authz::Caller;
use crate::ward::Ward;

const COLLECTION: &str = "roles";

pub const ROLE_FIELDS: Updatable = Updatable {
    mutable: &["name", "description", "capabilities"],
    output_only: &["uid", "create_time", "update_time"],
    immutable: &[],
};

/// Parses capability enum numbers; every one must be a capability Ward knows.
fn caps_of(numbers: &[i32], bad: &mut Vec<FieldViolation>) -> CapSet {
    let mut set = CapSet::EMPTY;
    for n in numbers {
        match Capability::from_number(*n) {
            Some(c) => set.insert(c),
            None => bad.push(FieldViolation {
                field: "capabilities".into(),
                description: format!("capabilities: {n} is not a capability this server implements"),
            }),
        }
    }
    set
}

pub(crate) fn to_proto(r: RoleRecord) -> Role {
    Role {
        uid: r.uid,
        name: r.name,
        description: r.description,
        capabilities: CapSet::from_storage(&r.capabilities).iter().map(|c| c as i32).collect(),
        create_time: Some(Timestamp::from_millis(r.create_time)),
        update_time: Some(Timestamp::from_millis(r.update_time)),
    }
}

fn built_in(uid: &Uidp) -> Error {
    Error::FailedPrecondition(vec![PreconditionViolation {
        kind: "BUILT_IN_ROLE".into(),
        subject: uid.as_str().into(),
        description: "built-in roles cannot be changed or deleted".into(),
    }])
}

impl Ward {
    /// Finds a role the caller may see: built-in roles need `roles.list`
    /// anywhere, custom roles `roles.list` at the role.
    async fn visible_role(&self, caller: &Caller, uid: &Uidp) -> Result<RoleRecord> {
        let record = self.store.get_role(uid).await?;
        let visible = match &record {
            Some(r) if r.parent_uid.is_none() => caller.is_admin || caller.grants.anywhere(rpc::GET_ROLE.capability),
            _ => self.caps_at(caller, uid).contains(rpc::GET_ROLE.capability),
        };
        match record {
            Some(r) if visible => Ok(r),
            _ => Err(Error::not_found(ROLE_TYPE, uid.as_str())),
        }
    }

    pub async fn create_role(&self, caller: &Caller, req: CreateRoleRequest) -> Result<Role> {
        let role = req.role.unwrap_or_default();
        let mut bad = Vec::new();
        let parent = parse_uidp("parent", &req.parent, &mut bad);
        check_name("name", &role.name, &mut bad);
        check_description("description", &role.description, &mut bad);
        let caps = caps_of(&role.capabilities, &mut bad);
        if role.capabilities.is_empty() {
            bad.push(FieldViolation {
                field: "capabilities".into(),
                description: "a role needs at least one capability".into(),
            });
        }
        let (Some(parent), true) = (parent, bad.is_empty()) else {
            return Err(Error::InvalidArgument(bad));
        };
        self.authorize(caller, &rpc::CREATE_ROLE, &parent)?;
        self.check_no_escalation(caller, &parent, caps)?;
        let now = self.clock.now_millis();
        let record = RoleRecord {
            uid: parent.new_child().into(),
            parent_uid: Some(parent.into()),
            name: role.name,
            description: role.description,
            capabilities: caps.to_storage(),
            create_time: now,
            update_time: now,
        };
        let group = Ward::event_group(&record.uid);
        let emit = self.created(
            caller,
            events::types::ROLE_CREATED,
            &record.uid,
            &group,
            &to_proto(record.clone()),
        );
        self.store.create_role(&record, emit).await?;
        Ok(to_proto(record))
    }

    pub async fn get_role(&self, caller: &Caller, req: GetRoleRequest) -> Result<Role> {
        let uid = Uidp::parse("uid", &req.uid)?;
        Ok(to_proto(self.visible_role(caller, &uid).await?))
    }

    pub async fn list_roles(&self, caller: &Caller, req: ListRolesRequest) -> Result<ListRolesResponse> {
        let visible = self
            .visible_scopes(caller, rpc::LIST_ROLES.capability)
            .map(|mut scopes| {
                if !scopes.is_empty() {
                    // Whoever may list roles somewhere sees the built-in ones.
                    scopes.extend(BUILTIN_ROLES.iter().filter_map(|r| Uidp::parse("uid", &r.uid()).ok()));
                }
                scopes
            });
        let params = ListParams {
            uidp: req.uidp.as_ref(),
            name: &req.name,
            page_size: req.page_size,
            page_token: &req.page_token,
            order_by: &req.order_by,
            skip: req.skip,
            filters: Vec::new(),
        };
        let (q, skipped) = self.list_query(COLLECTION, params, visible)?;
        let page = self.store.list_roles(&q).await?;
        Ok(ListRolesResponse {
            next_page_token: self.next_page_token(COLLECTION, &q, skipped, &page),
            total_count: Some(page.total_count),
            skipped,
            roles: page.items.into_iter().map(to_proto).collect(),
        })
    }

    pub async fn update_role(&self, caller: &Caller, role: Role, mask: UpdateMask) -> Result<Role> {
        let uid = Uidp::parse("role.uid", &role.uid)?;
        let mask = mask.resolve(
            &ROLE_FIELDS,
            &[
                ("name", !role.name.is_empty()),
                ("description", !role.description.is_empty()),
                ("capabilities", !role.capabilities.is_empty()),
            ],
        )?;
        let mut bad = Vec::new();
        let mut patch = RolePatch::default();
        let mut caps = None;
        // A field outside the mask is not written, but a value that breaks
        // its schema is still refused (a strict client expects the 400).
        if mask.contains("name") || !role.name.is_empty() {
            check_name("name", &role.name, &mut bad);
        }
        if mask.contains("name") {
            patch.name = Some(role.name);
        }
        check_description("description", &role.description, &mut bad);
        if mask.contains("description") {
            patch.description = Some(role.description);
        }
        if mask.contains("capabilities") {
            if role.capabilities.is_empty() {
                bad.push(FieldViolation {
                    field: "capabilities".into(),
                    description: "a role needs at least one capability".into(),
                });
            }
            let set = caps_of(&role.capabilities, &mut bad);
            patch.capabilities = Some(set.to_storage());
            caps = Some(set);
        }
        if !bad.is_empty() {
            return Err(Error::InvalidArgument(bad));
        }
        let current = self.visible_role(caller, &uid).await?;
        let Some(group) = current
            .parent_uid
            .as_deref()
            .and_then(|p| Uidp::parse("parent", p).ok())
        else {
            return Err(built_in(&uid));
        };
        self.authorize(caller, &rpc::UPDATE_ROLE, &uid)?;
        if let Some(set) = caps {
            self.check_no_escalation(caller, &group, set)?;
        }
        if mask.is_empty() {
            return Ok(to_proto(current));
        }
        let group = Ward::event_group(uid.as_str());
        let emit = self.updated(caller, events::types::ROLE_UPDATED, uid.as_str(), &group, to_proto);
        let record = self
            .store
            .update_role(&uid, &patch, self.clock.now_millis(), emit)
            .await?;
        self.grants_changed().await;
        Ok(to_proto(record))
    }

    pub async fn delete_role(&self, caller: &Caller, req: DeleteRoleRequest) -> Result<()> {
        let uid = Uidp::parse("uid", &req.uid)?;
        let current = self.visible_role(caller, &uid).await?;
        if current.parent_uid.is_none() {
            return Err(built_in(&uid));
        }
        self.authorize(caller, &rpc::DELETE_ROLE, &uid)?;
        let emit = self.deleted(
            caller,
            events::types::ROLE_DELETED,
            uid.as_str(),
            &Ward::event_group(uid.as_str()),
        );
        self.store
            .delete_role(&uid, emit)
            .await
            .map_err(|e| super::hide_bindings(caller, e, "role"))?;
        self.grants_changed().await;
        Ok(())
    }
}
