//! Groups: organizations (root groups) and the groups beneath them.

use ward_core::fieldmask::Updatable;
use ward_core::listing::{FilterValue, ListQuery};
use ward_core::names::{check_description, check_name};
use ward_core::rpc;
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_proto::Timestamp;
use ward_proto::iam::v2::{
    CreateGroupRequest, DeleteGroupRequest, GetGroupRequest, Group, ListGroupsRequest, ListGroupsResponse,
};
use ward_store::{GROUP_TYPE, GroupPatch, GroupRecord, RoleBindingRecord};

use super::UpdateMask;
use super::events;
use super::list::ListParams;
use crate::authz::Caller;
use crate::ward::Ward;

const COLLECTION: &str = "groups";
/// Deepest a group may sit (segments of its UIDP), leaving room below the
/// deepest group for the resources that live under groups (UIDPs are at most
/// `uidp::MAX_DEPTH` segments).
pub const MAX_GROUP_DEPTH: usize = 24;

/// What an update may change; the rest of Group is output-only.
pub const GROUP_FIELDS: Updatable = Updatable {
    mutable: &["name", "description"],
    output_only: &[
        "uid",
        "resource_limits",
        "verified",
        "create_time",
        "update_time",
        "kind",
        "status",
    ],
    immutable: &[],
};

pub(crate) fn to_proto(r: GroupRecord) -> Group {
    Group {
        uid: r.uid,
        name: r.name,
        description: r.description,
        resource_limits: Default::default(),
        verified: r.verified,
        create_time: Some(Timestamp::from_millis(r.create_time)),
        update_time: Some(Timestamp::from_millis(r.update_time)),
        kind: r.kind,
        status: 0,
    }
}

impl Ward {
    pub async fn create_group(&self, caller: &Caller, req: CreateGroupRequest) -> Result<Group> {
        let group = req.group.unwrap_or_default();
        let mut bad = Vec::new();
        let parent = if req.parent.is_empty() {
            None
        } else {
            match self.resolve_parent(caller, &req.parent).await {
                Ok(p) => Some(p),
                Err(Error::InvalidArgument(v)) => {
                    bad.extend(v);
                    None
                }
                Err(e) => return Err(e),
            }
        };
        if let Some(p) = &parent
            && p.depth() >= MAX_GROUP_DEPTH
        {
            bad.push(ward_core::error::FieldViolation {
                field: "parent".into(),
                description: format!("groups nest at most {MAX_GROUP_DEPTH} deep"),
            });
        }
        check_name("name", &group.name, &mut bad);
        check_description("description", &group.description, &mut bad);
        if ward_proto::iam::v2::OrgKind::try_from(group.kind).is_err() {
            bad.push(ward_core::error::FieldViolation {
                field: "kind".into(),
                description: format!("{} is not an OrgKind", group.kind),
            });
        }
        if !bad.is_empty() {
            return Err(Error::InvalidArgument(bad));
        }
        let now = self.clock.now_millis();
        let (uid, owner) = match &parent {
            Some(p) => {
                self.authorize(caller, &rpc::CREATE_GROUP, p)?;
                (p.new_child(), None)
            }
            None => {
                let uid = Uidp::new_root();
                (uid.clone(), self.authorize_new_org(caller, &uid, now).await?)
            }
        };
        // An organization's kind is set when it is created; its groups
        // inherit it and may only restate it.
        let kind = match &parent {
            None => group.kind,
            Some(p) => {
                let inherited = self
                    .store
                    .get_group(p)
                    .await?
                    .ok_or_else(|| Error::not_found(GROUP_TYPE, p.as_str()))?
                    .kind;
                if group.kind != 0 && group.kind != inherited {
                    return Err(Error::invalid(
                        "kind",
                        "a group inherits its organization's kind; leave kind unset or restate it",
                    ));
                }
                inherited
            }
        };
        let record = GroupRecord {
            uid: uid.into(),
            parent_uid: parent.map(Into::into),
            name: group.name,
            description: group.description,
            verified: false,
            create_time: now,
            update_time: now,
            kind,
        };
        let emit = self.created(
            caller,
            events::types::GROUP_CREATED,
            &record.uid,
            &record.uid,
            &to_proto(record.clone()),
        );
        self.store.create_group(&record, owner.as_ref(), emit).await?;
        if owner.is_some() {
            self.grants_changed().await;
        }
        Ok(to_proto(record))
    }

    /// CreateGroup's `parent`: a group UIDP, the last segment of one (16
    /// hex), or a group's name. The last two are looked up among the groups
    /// the caller may see; none is NOT_FOUND and several is INVALID_ARGUMENT
    /// naming them.
    async fn resolve_parent(&self, caller: &Caller, raw: &str) -> Result<Uidp> {
        if Uidp::is_valid(raw) || raw.contains('/') {
            return Uidp::parse("parent", raw);
        }
        let is_suffix = raw.len() == 16 && raw.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !is_suffix {
            let mut bad = Vec::new();
            check_name("parent", raw, &mut bad);
            if !bad.is_empty() {
                return Err(Error::invalid(
                    "parent",
                    "parent must be a group UIDP, the last 16 hex digits of one, or a group name",
                ));
            }
        }
        let visible = self.visible_scopes(caller, rpc::LIST_GROUPS.capability);
        let by = |suffix: bool| ListQuery {
            name: (!suffix).then(|| raw.to_owned()),
            filters: if suffix {
                vec![("uid", FilterValue::EndsWith(format!("/{raw}")))]
            } else {
                Vec::new()
            },
            page_size: 5,
            visible: visible.clone(),
            ..ListQuery::default()
        };
        let mut page = self.store.list_groups(&by(is_suffix)).await?;
        if is_suffix && page.items.is_empty() {
            // Sixteen hex digits are also a valid group name.
            page = self.store.list_groups(&by(false)).await?;
        }
        match page.items.as_slice() {
            [] => Err(Error::not_found(GROUP_TYPE, raw)),
            [one] => Uidp::parse("parent", &one.uid),
            many => Err(Error::invalid(
                "parent",
                format!(
                    "parent \"{raw}\" is ambiguous: it names {} groups ({}{}); pass the group's UIDP",
                    page.total_count,
                    many.iter().map(|g| g.uid.as_str()).collect::<Vec<_>>().join(", "),
                    if page.total_count > many.len() as i64 {
                        ", …"
                    } else {
                        ""
                    }
                ),
            )),
        }
    }

    /// Who may create an organization: the server admin always; another
    /// identity only when the server allows it, and then it becomes the new
    /// organization's owner (the binding is returned, to be created with it).
    async fn authorize_new_org(&self, caller: &Caller, org: &Uidp, now: i64) -> Result<Option<RoleBindingRecord>> {
        if caller.is_admin {
            tracing::info!(target: "ward::audit", org = %org, "server admin creates an organization");
            return Ok(None);
        }
        let denied =
            || Error::PermissionDenied("creating organizations is reserved to the server admin on this server".into());
        if !self.allow_org_creation {
            return Err(denied());
        }
        // Narrowing applies to every call: an organization lies outside any
        // scope, and a capability-narrowed token needs groups.create in it.
        let claims = &caller.claims;
        let cap_ok = claims.cap.as_ref().is_none_or(|caps| {
            caps.iter()
                .any(|c| ward_core::capability::Capability::from_name(c) == Some(rpc::CREATE_GROUP.capability))
        });
        if claims.scopes.is_some() || !cap_ok {
            return Err(Error::PermissionDenied(
                "this token is narrowed (scopes or cap) and cannot create organizations".into(),
            ));
        }
        let me = Uidp::parse("subject", &caller.subject).map_err(|_| denied())?;
        if self.store.get_identity(&me).await?.is_none() {
            return Err(denied());
        }
        let owner = ward_core::capability::builtin_role("owner").expect("owner is built in");
        Ok(Some(RoleBindingRecord {
            uid: org.new_child().into(),
            parent_uid: org.as_str().into(),
            identity_uid: caller.subject.clone(),
            role_uid: owner.uid(),
            create_time: now,
            update_time: now,
        }))
    }

    pub async fn get_group(&self, caller: &Caller, req: GetGroupRequest) -> Result<Group> {
        let uid = Uidp::parse("uid", &req.uid)?;
        self.authorize(caller, &rpc::GET_GROUP, &uid)?;
        let record = self
            .store
            .get_group(&uid)
            .await?
            .ok_or_else(|| Error::not_found(GROUP_TYPE, uid.as_str()))?;
        Ok(to_proto(record))
    }

    pub async fn list_groups(&self, caller: &Caller, req: ListGroupsRequest) -> Result<ListGroupsResponse> {
        let visible = self.visible_scopes(caller, rpc::LIST_GROUPS.capability);
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
        let page = self.store.list_groups(&q).await?;
        Ok(ListGroupsResponse {
            next_page_token: self.next_page_token(COLLECTION, &q, skipped, &page),
            total_count: Some(page.total_count),
            skipped,
            groups: page.items.into_iter().map(to_proto).collect(),
        })
    }

    /// Updates the masked fields of a group (the uid comes from `group.uid`).
    pub async fn update_group(&self, caller: &Caller, group: Group, mask: UpdateMask) -> Result<Group> {
        let uid = Uidp::parse("group.uid", &group.uid)?;
        let mask = mask.resolve(
            &GROUP_FIELDS,
            &[
                ("name", !group.name.is_empty()),
                ("description", !group.description.is_empty()),
            ],
        )?;
        let mut bad = Vec::new();
        let mut patch = GroupPatch::default();
        // A field outside the mask is not written, but a value that breaks
        // its schema is still refused (a strict client expects the 400).
        if mask.contains("name") || !group.name.is_empty() {
            check_name("name", &group.name, &mut bad);
        }
        if mask.contains("name") {
            patch.name = Some(group.name);
        }
        check_description("description", &group.description, &mut bad);
        if mask.contains("description") {
            patch.description = Some(group.description);
        }
        if !bad.is_empty() {
            return Err(Error::InvalidArgument(bad));
        }
        self.authorize(caller, &rpc::UPDATE_GROUP, &uid)?;
        if mask.is_empty() {
            // Nothing to change: answer with the group as it is.
            let record = self
                .store
                .get_group(&uid)
                .await?
                .ok_or_else(|| Error::not_found(GROUP_TYPE, uid.as_str()))?;
            return Ok(to_proto(record));
        }
        let emit = self.updated(
            caller,
            events::types::GROUP_UPDATED,
            uid.as_str(),
            uid.as_str(),
            to_proto,
        );
        let record = self
            .store
            .update_group(&uid, &patch, self.clock.now_millis(), emit)
            .await?;
        Ok(to_proto(record))
    }

    pub async fn delete_group(&self, caller: &Caller, req: DeleteGroupRequest) -> Result<()> {
        let uid = Uidp::parse("uid", &req.uid)?;
        self.authorize(caller, &rpc::DELETE_GROUP, &uid)?;
        let emit = self.deleted(caller, events::types::GROUP_DELETED, uid.as_str(), uid.as_str());
        self.store.delete_group(&uid, emit).await?;
        self.grants_changed().await;
        Ok(())
    }
}
