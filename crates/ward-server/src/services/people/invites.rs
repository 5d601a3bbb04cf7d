//! Group invites. The code is a payload naming the invite, its group, role,
//! key id and expiry, with a MAC by the server's secret key: Ward verifies it
//! without storing it (the database holds no usable code), then checks the
//! stored invite still exists, so deleting an invite revokes its code.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use ward_auth::secret::Purpose;
use ward_core::capability::CapSet;
use ward_core::listing::FilterValue;
use ward_core::rpc;
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_proto::Timestamp;
use ward_proto::auth::{RegistrationRequest, Session};
use ward_proto::iam::v2::{
    CreateGroupInviteRequest, DeleteGroupInviteRequest, GetGroupInviteRequest, GroupInvite, GroupInviteRole,
    ListGroupInvitesRequest, ListGroupInvitesResponse,
};
use ward_store::RoleBindingRecord;
use ward_store::people::{GROUP_INVITE_TYPE, GroupInviteRecord};

use super::violation;
use crate::authz::Caller;
use crate::services::events;
use crate::services::list::ListParams;
use crate::ward::Ward;

const COLLECTION: &str = "group_invites";
/// Longest an invite may be valid.
pub const MAX_TTL_SECS: i64 = 90 * 24 * 3600;
/// Longest email an invite may name.
pub const MAX_EMAIL_LEN: usize = 320;
/// Longest code accepted (real ones are a few hundred bytes).
pub const MAX_CODE_LEN: usize = 2048;

/// What an invite code carries.
#[derive(Serialize, Deserialize)]
struct Code {
    /// The group.
    grp: String,
    /// The invite.
    inv: String,
    kid: String,
    role: String,
    /// Expiry, seconds since the epoch.
    exp: i64,
}

fn invite_with_role(r: GroupInviteRecord, code: Option<String>, role: Option<GroupInviteRole>) -> GroupInvite {
    GroupInvite {
        uid: r.uid,
        role_uid: r.role_uid,
        email: r.email,
        ttl: None,
        expiration_time: Some(Timestamp::from_millis(r.expire_time)),
        single_use: r.single_use,
        code: code.unwrap_or_default(),
        key_id: r.name,
        create_time: Some(Timestamp::from_millis(r.create_time)),
        role,
    }
}

fn invalid_code() -> Error {
    Error::invalid("code", "the invite code is not valid")
}

impl Ward {
    fn invite_code(&self, code: &Code) -> Result<String> {
        let payload = serde_json::to_vec(code).map_err(|e| Error::internal(format_args!("encode invite: {e}")))?;
        let tag = self.secret.sign(Purpose::Invite, &payload);
        Ok(format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(&payload),
            URL_SAFE_NO_PAD.encode(tag)
        ))
    }

    fn open_invite_code(&self, code: &str) -> Result<Code> {
        if code.len() > MAX_CODE_LEN {
            return Err(invalid_code());
        }
        let (payload, tag) = code.trim().split_once('.').ok_or_else(invalid_code)?;
        let payload = URL_SAFE_NO_PAD.decode(payload).map_err(|_| invalid_code())?;
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| invalid_code())?;
        if !self.secret.verify(Purpose::Invite, &payload, &tag) {
            return Err(invalid_code());
        }
        serde_json::from_slice(&payload).map_err(|_| invalid_code())
    }

    /// The invite's role, hydrated (absent once deleted).
    async fn invite_role(&self, role_uid: &str) -> Result<Option<GroupInviteRole>> {
        Ok(match Uidp::parse("role_uid", role_uid) {
            Ok(uid) => self.store.get_role(&uid).await?.map(|role| GroupInviteRole {
                uid: role.uid,
                name: role.name,
                description: role.description,
                capabilities: CapSet::from_storage(&role.capabilities)
                    .iter()
                    .map(|c| c as i32)
                    .collect(),
            }),
            Err(_) => None,
        })
    }

    async fn invite_to_proto(&self, r: GroupInviteRecord, code: Option<String>) -> Result<GroupInvite> {
        let role = self.invite_role(&r.role_uid).await?;
        Ok(invite_with_role(r, code, role))
    }

    async fn visible_invite(&self, caller: &Caller, uid: &Uidp) -> Result<GroupInviteRecord> {
        match self.store.get_group_invite(uid).await? {
            Some(r) if self.caps_at(caller, uid).contains(rpc::GET_GROUP_INVITE.capability) => Ok(r),
            _ => Err(Error::not_found(GROUP_INVITE_TYPE, uid.as_str())),
        }
    }

    pub async fn create_group_invite(&self, caller: &Caller, req: CreateGroupInviteRequest) -> Result<GroupInvite> {
        let inv = req.group_invite.unwrap_or_default();
        let mut bad = Vec::new();
        let parent = crate::services::parse_uidp("parent", &req.parent, &mut bad);
        let ttl_secs = match &inv.ttl {
            Some(d) if d.seconds > 0 && d.seconds <= MAX_TTL_SECS && d.nanos >= 0 => Some(d.seconds),
            Some(_) => {
                bad.push(violation(
                    "ttl",
                    format!("ttl must be between 1s and {MAX_TTL_SECS}s (90 days)"),
                ));
                None
            }
            None => {
                bad.push(violation("ttl", "ttl is required (e.g. \"604800s\")"));
                None
            }
        };
        if !inv.email.is_empty() {
            let ok = inv.email.len() <= MAX_EMAIL_LEN
                && inv
                    .email
                    .split_once('@')
                    .is_some_and(|(l, d)| !l.is_empty() && d.contains('.'))
                && !inv.email.chars().any(|c| c.is_whitespace() || c.is_control());
            if !ok {
                bad.push(violation("email", "email must be an address like name@example.com"));
            }
        }
        let (Some(group), Some(ttl_secs), true) = (parent, ttl_secs, bad.is_empty()) else {
            return Err(Error::InvalidArgument(bad));
        };
        self.authorize(caller, &rpc::CREATE_GROUP_INVITE, &group)?;
        self.authorize(caller, &rpc::CREATE_ROLE_BINDING, &group)?;
        let (role, caps) = self.grantable_role(caller, "role_uid", &inv.role_uid, &group).await?;
        self.check_no_escalation(caller, &group, caps)?;
        let now = self.clock.now_millis();
        let uid = group.new_child();
        let record = GroupInviteRecord {
            uid: uid.as_str().into(),
            parent_uid: group.as_str().into(),
            name: hex::encode(rand::random::<[u8; 8]>()),
            role_uid: role.as_str().into(),
            email: inv.email,
            expire_time: now + ttl_secs * 1000,
            single_use: inv.single_use,
            create_time: now,
            update_time: now,
        };
        let code = self.invite_code(&Code {
            grp: group.into(),
            inv: uid.into(),
            kid: record.name.clone(),
            role: role.into(),
            exp: record.expire_time.div_euclid(1000),
        })?;
        let role = self.invite_role(&record.role_uid).await?;
        // The event shows the invite without its code: the code is a
        // credential, handed to its creator alone.
        let emit = self.created(
            caller,
            events::types::GROUP_INVITE_CREATED,
            &record.uid,
            &record.parent_uid,
            &invite_with_role(record.clone(), None, role.clone()),
        );
        self.store.create_group_invite(&record, emit).await?;
        Ok(invite_with_role(record, Some(code), role))
    }

    pub async fn get_group_invite(&self, caller: &Caller, req: GetGroupInviteRequest) -> Result<GroupInvite> {
        let uid = Uidp::parse("uid", &req.uid)?;
        let r = self.visible_invite(caller, &uid).await?;
        self.invite_to_proto(r, None).await
    }

    pub async fn list_group_invites(
        &self,
        caller: &Caller,
        req: ListGroupInvitesRequest,
    ) -> Result<ListGroupInvitesResponse> {
        let mut filters = Vec::new();
        if !req.key_id.is_empty() {
            filters.push(("name", FilterValue::Text(req.key_id.chars().take(64).collect())));
        }
        let visible = self.visible_scopes(caller, rpc::LIST_GROUP_INVITES.capability);
        let order = if req.order_by.is_empty() {
            "create_time desc"
        } else {
            req.order_by.as_str()
        };
        let params = ListParams {
            uidp: req.uidp.as_ref(),
            name: "",
            page_size: req.page_size,
            page_token: &req.page_token,
            order_by: order,
            skip: req.skip,
            filters,
        };
        let (q, skipped) = self.list_query(COLLECTION, params, visible)?;
        let page = self.store.list_group_invites(&q).await?;
        let next_page_token = self.next_page_token(COLLECTION, &q, skipped, &page);
        // One read per distinct role on the page, not per invite.
        let mut roles: std::collections::HashMap<String, Option<GroupInviteRole>> = Default::default();
        let mut group_invites = Vec::with_capacity(page.items.len());
        for r in page.items {
            if !roles.contains_key(&r.role_uid) {
                let role = self.invite_role(&r.role_uid).await?;
                roles.insert(r.role_uid.clone(), role);
            }
            let role = roles.get(&r.role_uid).cloned().flatten();
            group_invites.push(invite_with_role(r, None, role));
        }
        Ok(ListGroupInvitesResponse {
            group_invites,
            next_page_token,
            total_count: Some(page.total_count),
            skipped,
        })
    }

    pub async fn delete_group_invite(&self, caller: &Caller, req: DeleteGroupInviteRequest) -> Result<()> {
        let uid = Uidp::parse("uid", &req.uid)?;
        self.visible_invite(caller, &uid).await?;
        self.authorize(caller, &rpc::DELETE_GROUP_INVITE, &uid)?;
        let emit = self.deleted(
            caller,
            events::types::GROUP_INVITE_DELETED,
            uid.as_str(),
            &Ward::event_group(uid.as_str()),
        );
        self.store.delete_group_invite(&uid, emit).await
    }

    /// Accepts an invite for the caller: binds them at the invite's group with
    /// its role. The code must verify, be unexpired and name an invite that
    /// still exists; an invite for an email needs the caller's verified email
    /// from their login to be that one.
    pub async fn register(&self, caller: &Caller, req: RegistrationRequest) -> Result<Session> {
        // Invites are for people: root-level identities. A workload lives in
        // a group and is bound only within its organization; the server admin
        // is no stored identity; a narrowed token may not widen its identity.
        if caller.is_admin {
            return Err(Error::PermissionDenied("the server admin does not join groups".into()));
        }
        if caller.subject.contains('/') {
            return Err(Error::PermissionDenied(
                "invites are for people (root-level identities); bind a workload's identity with a role binding".into(),
            ));
        }
        if caller.claims.scopes.is_some() || caller.claims.cap.is_some() {
            return Err(Error::PermissionDenied(
                "a narrowed token (scopes or cap) cannot accept invites".into(),
            ));
        }
        let code = self.open_invite_code(&req.code)?;
        let now = self.clock.now_millis();
        if code.exp.saturating_mul(1000) <= now {
            return Err(Error::precondition(
                "INVITE_EXPIRED",
                code.inv,
                "the invite has expired",
            ));
        }
        let invite = Uidp::parse("code", &code.inv).map_err(|_| invalid_code())?;
        let group = Uidp::parse("code", &code.grp).map_err(|_| invalid_code())?;
        let stored = self.store.get_group_invite(&invite).await?;
        let gone = || Error::precondition("INVITE_GONE", invite.as_str(), "the invite was used or deleted");
        let stored = stored.filter(|s| s.name == code.kid).ok_or_else(gone)?;
        if !stored.email.is_empty() {
            let trusted = self.trusted_email(&caller.subject).await?;
            let matches = trusted
                .as_ref()
                .is_ok_and(|(email, _)| email.eq_ignore_ascii_case(&stored.email));
            if !matches {
                let why = trusted.err().unwrap_or("it names another email address");
                return Err(Error::PermissionDenied(format!(
                    "this invite is for a named email, and yours cannot be trusted for it: {why}"
                )));
            }
        }
        let binding = RoleBindingRecord {
            uid: group.new_child().into(),
            parent_uid: group.as_str().into(),
            identity_uid: caller.subject.clone(),
            role_uid: code.role.clone(),
            create_time: now,
            update_time: now,
        };
        let reply = Session {
            identity: caller.subject.clone(),
            group: group.as_str().to_owned(),
        };
        let emit = self.created(
            caller,
            events::types::REGISTERED,
            &caller.subject,
            group.as_str(),
            &reply,
        );
        let (_, added) = self
            .store
            .accept_group_invite(&invite, &code.kid, now, &binding, emit)
            .await
            .map_err(|e| match e {
                Error::NotFound { .. } => gone(),
                e => e,
            })?;
        self.grants_changed().await;
        tracing::info!(identity = %caller.subject, group = %group, added, "invite accepted");
        Ok(reply)
    }
}
