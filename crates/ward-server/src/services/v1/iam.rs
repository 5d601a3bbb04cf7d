//! v1 ⇄ v2 for the IAM core resources: groups, identities, roles, role
//! bindings and terms. Each v1 RPC is one v2 service call (or a few, for a
//! List's pages and a binding list's hydration); every rule, check and error
//! is the v2 service layer's. The pure `*_in`/`*_out` conversions are kept
//! apart from the async operations so they can be tested alone.

use std::collections::HashMap;
use std::sync::Arc;

use ward_core::capability::Capability;
use ward_core::error::FieldViolation;
use ward_core::{Error, Result};
use ward_proto::common::UidpFilter;
use ward_proto::iam as v1;
use ward_proto::iam::v2;

use super::{ID, V1_PAGE, collect_all, v1_named};
use crate::authz::Caller;
use crate::services::UpdateMask;
use crate::ward::Ward;

/// The v2 fields a v1 `PUT` replaces, per resource. A v1 Update is a full
/// replacement, so it names every field v2 lets an update change *that v1
/// has*: a field v1 lacks (an identity's `company`) is kept, not reset.
pub const GROUP_MASK: &[&str] = &["name", "description"];
pub const IDENTITY_MASK: &[&str] = &["name", "description", "claim_match", "static_keys"];
pub const ROLE_MASK: &[&str] = &["name", "description", "capabilities"];
pub const ROLE_BINDING_MASK: &[&str] = &["role_uid"];

/// Keys every v1 group reports in `resource_limits` (0 when v2 has none).
const RESOURCE_LIMIT_KEYS: [&str; 3] = ["clusters", "idps", "repositories"];

fn mask(paths: &[&str]) -> UpdateMask {
    UpdateMask::Paths(paths.iter().map(|p| (*p).to_owned()).collect())
}

// ---------------------------------------------------------------- groups

pub fn group_in(g: v1::Group) -> v2::Group {
    v2::Group {
        uid: g.id,
        name: g.name,
        description: g.description,
        resource_limits: g.resource_limits,
        verified: g.verified,
        create_time: None,
        update_time: None,
        kind: g.kind,
        status: g.status,
    }
}

/// v1 enum numbers for OrgKind and OrgStatus are v2's, so they pass as is.
pub fn group_out(g: v2::Group) -> v1::Group {
    let mut resource_limits = g.resource_limits;
    for k in RESOURCE_LIMIT_KEYS {
        resource_limits.entry(k.to_owned()).or_insert(0);
    }
    v1::Group {
        id: g.uid,
        name: g.name,
        description: g.description,
        resource_limits,
        verified: g.verified,
        kind: g.kind,
        status: g.status,
    }
}

/// `parent` passes through: v2 already takes a group UIDP, the last 16 hex
/// digits of one, or a visible group's name (empty creates an organization).
pub fn create_group_in(r: v1::CreateGroupRequest) -> v2::CreateGroupRequest {
    v2::CreateGroupRequest {
        parent: r.parent,
        group: r.group.map(group_in),
    }
}

pub async fn create_group(w: Arc<Ward>, c: Caller, req: v1::CreateGroupRequest) -> Result<v1::Group> {
    w.create_group(&c, create_group_in(req)).await.map(group_out)
}

pub async fn update_group(w: Arc<Ward>, c: Caller, req: v1::Group) -> Result<v1::Group> {
    v1_named(
        w.update_group(&c, group_in(req), mask(GROUP_MASK)).await,
        &[("group.uid", "id"), ("group.", "")],
    )
    .map(group_out)
}

pub async fn list_groups(w: Arc<Ward>, c: Caller, req: v1::GroupFilter) -> Result<v1::GroupList> {
    let Some(uidp) = super::narrow_to_id(req.uidp, &req.id)? else {
        return Ok(v1::GroupList::default());
    };
    let groups = all_groups(&w, &c, uidp, req.name).await?;
    Ok(v1::GroupList {
        items: groups.into_iter().map(group_out).collect(),
    })
}

/// Every group matching the filter, through the v2 listing.
async fn all_groups(w: &Ward, c: &Caller, uidp: Option<UidpFilter>, name: String) -> Result<Vec<v2::Group>> {
    collect_all("/iam/v2/groups", move |page_token| {
        w.list_groups(
            c,
            v2::ListGroupsRequest {
                uidp: uidp.clone(),
                name: name.clone(),
                page_size: V1_PAGE,
                page_token,
                ..Default::default()
            },
        )
    })
    .await
}

pub async fn delete_group(w: Arc<Ward>, c: Caller, req: v1::DeleteGroupRequest) -> Result<()> {
    v1_named(w.delete_group(&c, v2::DeleteGroupRequest { uid: req.id }).await, ID)
}

pub async fn lookup_group(w: Arc<Ward>, c: Caller, _req: v1::LookupGroupRequest) -> Result<v1::LookupGroupResponse> {
    let r = w.lookup_group(&c, v2::LookupGroupRequest {}).await?;
    Ok(v1::LookupGroupResponse {
        group: r.group.map(group_out),
    })
}

pub async fn request_group_access(
    w: Arc<Ward>,
    c: Caller,
    req: v1::RequestGroupAccessRequest,
) -> Result<v1::RequestGroupAccessResponse> {
    w.request_group_access(
        &c,
        v2::RequestGroupAccessRequest {
            group_uid: req.group_id,
        },
    )
    .await?;
    Ok(v1::RequestGroupAccessResponse {})
}

pub async fn check_eligibility(
    w: Arc<Ward>,
    c: Caller,
    _req: v1::CheckEligibilityRequest,
) -> Result<v1::CheckEligibilityResponse> {
    let r = w.check_eligibility(&c, v2::CheckEligibilityRequest {}).await?;
    Ok(v1::CheckEligibilityResponse { eligible: r.eligible })
}

// ---------------------------------------------------------------- identities

fn claim_match_in(m: v1::ClaimMatch) -> v2::ClaimMatch {
    use v1::claim_match as a;
    use v2::claim_match as b;
    v2::ClaimMatch {
        iss: m.iss.map(|x| match x {
            a::Iss::Issuer(s) => b::Iss::Issuer(s),
            a::Iss::IssuerPattern(s) => b::Iss::IssuerPattern(s),
        }),
        sub: m.sub.map(|x| match x {
            a::Sub::Subject(s) => b::Sub::Subject(s),
            a::Sub::SubjectPattern(s) => b::Sub::SubjectPattern(s),
        }),
        aud: m.aud.map(|x| match x {
            a::Aud::Audience(s) => b::Aud::Audience(s),
            a::Aud::AudiencePattern(s) => b::Aud::AudiencePattern(s),
        }),
        claims: m.claims,
        claim_patterns: m.claim_patterns,
    }
}

fn claim_match_out(m: v2::ClaimMatch) -> v1::ClaimMatch {
    use v1::claim_match as a;
    use v2::claim_match as b;
    v1::ClaimMatch {
        iss: m.iss.map(|x| match x {
            b::Iss::Issuer(s) => a::Iss::Issuer(s),
            b::Iss::IssuerPattern(s) => a::Iss::IssuerPattern(s),
        }),
        sub: m.sub.map(|x| match x {
            b::Sub::Subject(s) => a::Sub::Subject(s),
            b::Sub::SubjectPattern(s) => a::Sub::SubjectPattern(s),
        }),
        aud: m.aud.map(|x| match x {
            b::Aud::Audience(s) => a::Aud::Audience(s),
            b::Aud::AudiencePattern(s) => a::Aud::AudiencePattern(s),
        }),
        claims: m.claims,
        claim_patterns: m.claim_patterns,
    }
}

fn aws_in(x: v1::AwsIdentity) -> v2::AwsIdentity {
    use v1::aws_identity as a;
    use v2::aws_identity as b;
    v2::AwsIdentity {
        aws_account: x.aws_account,
        aws_arn: x.aws_arn.map(|v| match v {
            a::AwsArn::Arn(s) => b::AwsArn::Arn(s),
            a::AwsArn::ArnPattern(s) => b::AwsArn::ArnPattern(s),
        }),
        aws_user_id: x.aws_user_id.map(|v| match v {
            a::AwsUserId::UserId(s) => b::AwsUserId::UserId(s),
            a::AwsUserId::UserIdPattern(s) => b::AwsUserId::UserIdPattern(s),
        }),
    }
}

fn aws_out(x: v2::AwsIdentity) -> v1::AwsIdentity {
    use v1::aws_identity as a;
    use v2::aws_identity as b;
    v1::AwsIdentity {
        aws_account: x.aws_account,
        aws_arn: x.aws_arn.map(|v| match v {
            b::AwsArn::Arn(s) => a::AwsArn::Arn(s),
            b::AwsArn::ArnPattern(s) => a::AwsArn::ArnPattern(s),
        }),
        aws_user_id: x.aws_user_id.map(|v| match v {
            b::AwsUserId::UserId(s) => a::AwsUserId::UserId(s),
            b::AwsUserId::UserIdPattern(s) => a::AwsUserId::UserIdPattern(s),
        }),
    }
}

/// A v1 identity as v2's. v1 has no `company`; ServicePrincipal numbers are
/// the same in both versions (only the names differ).
pub fn identity_in(i: v1::Identity) -> v2::Identity {
    use v1::identity::Relationship as A;
    use v2::identity::Relationship as B;
    v2::Identity {
        uid: i.id,
        name: i.name,
        description: i.description,
        relationship: i.relationship.map(|r| match r {
            A::ClaimMatch(m) => B::ClaimMatch(claim_match_in(m)),
            A::Static(k) => B::StaticKeys(v2::StaticKeys {
                issuer: k.issuer,
                subject: k.subject,
                issuer_keys: k.issuer_keys,
                expiration_time: k.expiration,
                audiences: k.audiences,
            }),
            A::ServicePrincipal(p) => B::ServicePrincipal(p),
            A::AwsIdentity(x) => B::AwsIdentity(aws_in(x)),
        }),
        ..Default::default()
    }
}

/// A v2 identity as v1's: `email`, `email_unverified` and `company` have no
/// v1 field and are dropped.
pub fn identity_out(i: v2::Identity) -> v1::Identity {
    use v1::identity::Relationship as A;
    use v2::identity::Relationship as B;
    v1::Identity {
        id: i.uid,
        name: i.name,
        description: i.description,
        created_at: i.create_time,
        updated_at: i.update_time,
        last_seen: i.last_seen_time,
        relationship: i.relationship.map(|r| match r {
            B::ClaimMatch(m) => A::ClaimMatch(claim_match_out(m)),
            B::StaticKeys(k) => A::Static(v1::StaticKeys {
                issuer: k.issuer,
                subject: k.subject,
                issuer_keys: k.issuer_keys,
                expiration: k.expiration_time,
                audiences: k.audiences,
            }),
            B::ServicePrincipal(p) => A::ServicePrincipal(p),
            B::AwsIdentity(x) => A::AwsIdentity(aws_out(x)),
        }),
    }
}

pub async fn create_identity(w: Arc<Ward>, c: Caller, req: v1::CreateIdentityRequest) -> Result<v1::Identity> {
    let req = v2::CreateIdentityRequest {
        parent: req.parent_id,
        identity: req.identity.map(identity_in),
    };
    v1_named(
        w.create_identity(&c, req).await,
        &[("parent", "parent_id"), ("identity.uid", "identity.id")],
    )
    .map(identity_out)
}

/// Both relationship kinds are in the mask, so the body's relationship
/// (whichever kind, or none) replaces the stored one and v2 judges it.
pub async fn update_identity(w: Arc<Ward>, c: Caller, req: v1::Identity) -> Result<v1::Identity> {
    v1_named(
        w.update_identity(&c, identity_in(req), mask(IDENTITY_MASK)).await,
        &[("identity.uid", "id"), ("identity.", "")],
    )
    .map(identity_out)
}

pub async fn list_identities(w: Arc<Ward>, c: Caller, req: v1::IdentityFilter) -> Result<v1::IdentityList> {
    let Some(uidp) = super::narrow_to_id(req.uidp, &req.id)? else {
        return Ok(v1::IdentityList::default());
    };
    let (w, c) = (&*w, &c);
    let items = collect_all("/iam/v2/identities", move |page_token| {
        w.list_identities(
            c,
            v2::ListIdentitiesRequest {
                uidp: uidp.clone(),
                page_size: V1_PAGE,
                page_token,
                ..Default::default()
            },
        )
    })
    .await?;
    Ok(v1::IdentityList {
        items: items.into_iter().map(identity_out).collect(),
    })
}

/// v1 answers with an Identity carrying only the (deterministic) `id`.
pub async fn lookup_identity(w: Arc<Ward>, c: Caller, req: v1::LookupRequest) -> Result<v1::Identity> {
    let r = w
        .lookup_identity(
            &c,
            v2::LookupIdentityRequest {
                issuer: req.issuer,
                subject: req.subject,
            },
        )
        .await?;
    Ok(v1::Identity {
        id: r.uid,
        ..Default::default()
    })
}

pub async fn delete_identity(w: Arc<Ward>, c: Caller, req: v1::DeleteIdentityRequest) -> Result<()> {
    v1_named(
        w.delete_identity(&c, v2::DeleteIdentityRequest { uid: req.id }).await,
        ID,
    )
}

// ---------------------------------------------------------------- roles

/// v1 capability names (dotted, `groups.list`; the v2 enum names are
/// accepted too) as v2 enum numbers. A name no capability has is
/// INVALID_ARGUMENT naming it: it cannot be expressed in v2 at all.
pub fn capabilities_in(names: &[String]) -> Result<Vec<i32>> {
    let mut bad = Vec::new();
    let mut out = Vec::with_capacity(names.len());
    for n in names {
        match Capability::from_name(n) {
            Some(c) => out.push(c as i32),
            None => bad.push(FieldViolation {
                field: "capabilities".into(),
                description: format!("capabilities: \"{n}\" is not a capability (e.g. \"groups.list\")"),
            }),
        }
    }
    if bad.is_empty() {
        Ok(out)
    } else {
        Err(Error::InvalidArgument(bad))
    }
}

/// v2 enum numbers as v1 dotted names.
pub fn capabilities_out(numbers: &[i32]) -> Vec<String> {
    numbers
        .iter()
        .filter_map(|n| Capability::from_number(*n))
        .map(|c| c.dotted_name().to_owned())
        .collect()
}

pub fn role_in(r: v1::Role) -> Result<v2::Role> {
    Ok(v2::Role {
        capabilities: capabilities_in(&r.capabilities)?,
        uid: r.id,
        name: r.name,
        description: r.description,
        create_time: None,
        update_time: None,
    })
}

pub fn role_out(r: v2::Role) -> v1::Role {
    v1::Role {
        capabilities: capabilities_out(&r.capabilities),
        id: r.uid,
        name: r.name,
        description: r.description,
    }
}

/// RoleFilter's `parent` ("/" for the root, else a UIDP whose direct
/// children are wanted) folded into the UIDP filter. `None` when it
/// contradicts a `children_of` already given, so nothing can match.
pub fn role_scope(uidp: Option<UidpFilter>, parent: String) -> Option<Option<UidpFilter>> {
    if parent.is_empty() {
        return Some(uidp);
    }
    let mut f = uidp.unwrap_or_default();
    if parent == "/" {
        f.in_root = true;
    } else if f.children_of.is_empty() || f.children_of == parent {
        f.children_of = parent;
    } else {
        return None;
    }
    Some(Some(f))
}

pub async fn create_role(w: Arc<Ward>, c: Caller, req: v1::CreateRoleRequest) -> Result<v1::Role> {
    let req = v2::CreateRoleRequest {
        parent: req.parent_id,
        role: req.role.map(role_in).transpose()?,
    };
    v1_named(
        w.create_role(&c, req).await,
        &[("parent", "parent_id"), ("role.uid", "role.id")],
    )
    .map(role_out)
}

pub async fn update_role(w: Arc<Ward>, c: Caller, req: v1::Role) -> Result<v1::Role> {
    v1_named(
        w.update_role(&c, role_in(req)?, mask(ROLE_MASK)).await,
        &[("role.uid", "id"), ("role.", "")],
    )
    .map(role_out)
}

/// Every role matching the filter, through the v2 listing (which also
/// decides which built-in roles the caller sees).
async fn all_roles(w: &Ward, c: &Caller, uidp: Option<UidpFilter>, name: String) -> Result<Vec<v2::Role>> {
    collect_all("/iam/v2/roles", move |page_token| {
        w.list_roles(
            c,
            v2::ListRolesRequest {
                uidp: uidp.clone(),
                name: name.clone(),
                page_size: V1_PAGE,
                page_token,
                ..Default::default()
            },
        )
    })
    .await
}

pub async fn list_roles(w: Arc<Ward>, c: Caller, req: v1::RoleFilter) -> Result<v1::RoleList> {
    // A malformed parent is the caller's error, even where the rest of the
    // filter already rules everything out.
    if !req.parent.is_empty() && req.parent != "/" {
        ward_core::uidp::Uidp::parse("parent", &req.parent)?;
    }
    let Some(uidp) = super::narrow_to_id(req.uidp, &req.id)?.and_then(|u| role_scope(u, req.parent)) else {
        return Ok(v1::RoleList::default());
    };
    let roles = all_roles(&w, &c, uidp, req.name).await?;
    Ok(v1::RoleList {
        items: roles.into_iter().map(role_out).collect(),
    })
}

pub async fn delete_role(w: Arc<Ward>, c: Caller, req: v1::DeleteRoleRequest) -> Result<()> {
    v1_named(w.delete_role(&c, v2::DeleteRoleRequest { uid: req.id }).await, ID)
}

// ---------------------------------------------------------------- role bindings

/// A v1 binding as v2's input: the identity and role UIDPs. v1's `group` is
/// ignored (the group is the path parent, or the binding's own id).
pub fn role_binding_in(b: v1::RoleBinding) -> v2::RoleBinding {
    v2::RoleBinding {
        uid: b.id,
        identity_uid: b.identity,
        role_uid: b.role,
        ..Default::default()
    }
}

/// `group` reports the binding's parent group (deprecated for input only).
#[allow(deprecated)]
pub fn role_binding_out(b: v2::RoleBinding) -> v1::RoleBinding {
    let pick = |own: String, hydrated: Option<String>| {
        if own.is_empty() {
            hydrated.unwrap_or_default()
        } else {
            own
        }
    };
    v1::RoleBinding {
        identity: pick(b.identity_uid, b.identity.map(|i| i.uid)),
        role: pick(b.role_uid, b.role.map(|r| r.uid)),
        group: b.group.map(|g| g.uid).unwrap_or_default(),
        id: b.uid,
    }
}

/// A listed binding with its group and role in full, as far as the caller
/// may see them (through the v2 listings); otherwise with the uid, name and
/// description v2 hydrates the binding with.
pub fn binding_out(
    b: v2::RoleBinding,
    groups: &HashMap<String, v1::Group>,
    roles: &HashMap<String, v1::Role>,
) -> v1::Binding {
    let group = b.group.map(|g| {
        groups.get(&g.uid).cloned().unwrap_or_else(|| {
            group_out(v2::Group {
                uid: g.uid,
                name: g.name,
                description: g.description,
                ..Default::default()
            })
        })
    });
    let role = b.role.map(|r| {
        roles.get(&r.uid).cloned().unwrap_or(v1::Role {
            id: r.uid,
            name: r.name,
            description: r.description,
            capabilities: Vec::new(),
        })
    });
    let identity = b.identity.unwrap_or_default();
    v1::Binding {
        id: b.uid,
        group,
        identity: if b.identity_uid.is_empty() {
            identity.uid
        } else {
            b.identity_uid
        },
        role,
        email: identity.email,
        claim_match_issuer: identity.issuer,
        claim_match_subject: identity.subject,
        created_at: b.create_time,
        email_unverified: String::new(),
    }
}

pub async fn create_role_binding(
    w: Arc<Ward>,
    c: Caller,
    req: v1::CreateRoleBindingRequest,
) -> Result<v1::RoleBinding> {
    let req = v2::CreateRoleBindingRequest {
        parent: req.parent,
        role_binding: req.role_binding.map(role_binding_in),
    };
    v1_named(
        w.create_role_binding(&c, req).await,
        &[
            ("role_binding.uid", "role_binding.id"),
            ("role_binding.role_uid", "role_binding.role"),
            ("role_binding.identity_uid", "role_binding.identity"),
        ],
    )
    .map(role_binding_out)
}

pub fn create_role_binding_batch_in(req: v1::CreateRoleBindingBatchRequest) -> v2::BatchCreateRoleBindingsRequest {
    v2::BatchCreateRoleBindingsRequest {
        requests: req
            .role_bindings
            .into_iter()
            .map(|b| v2::CreateRoleBindingRequest {
                parent: String::new(),
                role_binding: Some(role_binding_in(b)),
            })
            .collect(),
        parent: req.parent,
        role_uid: String::new(),
    }
}

pub async fn create_role_binding_batch(
    w: Arc<Ward>,
    c: Caller,
    req: v1::CreateRoleBindingBatchRequest,
) -> Result<v1::RoleBindingBatch> {
    let r = w
        .batch_create_role_bindings(&c, create_role_binding_batch_in(req))
        .await?;
    Ok(v1::RoleBindingBatch {
        role_bindings: r.role_bindings.into_iter().map(role_binding_out).collect(),
    })
}

/// Only the role can change; the identity in the body is passed on and v2
/// ignores it (it is immutable there and not in the mask).
pub async fn update_role_binding(w: Arc<Ward>, c: Caller, req: v1::RoleBinding) -> Result<v1::RoleBinding> {
    v1_named(
        w.update_role_binding(&c, role_binding_in(req), mask(ROLE_BINDING_MASK))
            .await,
        &[
            ("role_binding.uid", "id"),
            ("role_binding.role_uid", "role"),
            ("role_binding.identity_uid", "identity"),
            ("role_binding.", ""),
        ],
    )
    .map(role_binding_out)
}

/// Most UIDPs one hydration listing names (the v2 `uidp.ids` limit).
const HYDRATE_CHUNK: usize = 1000;

/// The distinct uids, sorted.
fn distinct(uids: impl Iterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = uids.collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// A filter for exactly these uids.
fn ids_filter(ids: &[String]) -> Option<UidpFilter> {
    Some(UidpFilter {
        ids: ids.to_vec(),
        ..Default::default()
    })
}

pub async fn list_role_bindings(w: Arc<Ward>, c: Caller, req: v1::RoleBindingFilter) -> Result<v1::RoleBindingList> {
    let Some(uidp) = super::narrow_to_id(req.uidp, &req.id)? else {
        return Ok(v1::RoleBindingList::default());
    };
    let (w, c) = (&*w, &c);
    let bindings = collect_all("/iam/v2/roleBindings", move |page_token| {
        w.list_role_bindings(
            c,
            v2::ListRoleBindingsRequest {
                uidp: uidp.clone(),
                page_size: V1_PAGE,
                page_token,
                ..Default::default()
            },
        )
    })
    .await?;

    let group_ids = distinct(bindings.iter().filter_map(|b| b.group.as_ref().map(|g| g.uid.clone())));
    let role_ids = distinct(bindings.iter().filter_map(|b| b.role.as_ref().map(|r| r.uid.clone())));
    let mut groups = HashMap::new();
    for chunk in group_ids.chunks(HYDRATE_CHUNK) {
        let found = all_groups(w, c, ids_filter(chunk), String::new()).await?;
        groups.extend(found.into_iter().map(|g| (g.uid.clone(), group_out(g))));
    }
    let mut roles = HashMap::new();
    for chunk in role_ids.chunks(HYDRATE_CHUNK) {
        let found = all_roles(w, c, ids_filter(chunk), String::new()).await?;
        roles.extend(found.into_iter().map(|r| (r.uid.clone(), role_out(r))));
    }
    Ok(v1::RoleBindingList {
        items: bindings.into_iter().map(|b| binding_out(b, &groups, &roles)).collect(),
    })
}

pub async fn delete_role_binding(w: Arc<Ward>, c: Caller, req: v1::DeleteRoleBindingRequest) -> Result<()> {
    v1_named(
        w.delete_role_binding(&c, v2::DeleteRoleBindingRequest { uid: req.id })
            .await,
        ID,
    )
}

// ---------------------------------------------------------------- terms

pub async fn accept_terms(w: Arc<Ward>, c: Caller, req: v1::AcceptTermsRequest) -> Result<v1::AcceptTermsResponse> {
    let r = w
        .accept_terms(
            &c,
            v2::AcceptTermsRequest {
                group: req.group,
                document_ids: req.document_ids,
            },
        )
        .await?;
    Ok(v1::AcceptTermsResponse {
        group: r.group,
        document_ids: r.document_ids,
    })
}

pub fn terms_out(t: v2::TermsAcceptance) -> v1::TermsDocumentStatus {
    v1::TermsDocumentStatus {
        doc_id: t.doc_id,
        accepted_by: t.accepted_by,
        accepted_at: t.create_time,
    }
}

pub async fn list_accepted_terms(w: Arc<Ward>, c: Caller, req: v1::TermsFilter) -> Result<v1::TermsList> {
    let (w, c, group) = (&*w, &c, &req.group);
    let items = collect_all(&format!("/iam/v2/terms/{group}"), move |page_token| {
        w.list_terms_acceptances(
            c,
            v2::ListTermsAcceptancesRequest {
                group: group.clone(),
                page_size: V1_PAGE,
                page_token,
                ..Default::default()
            },
        )
    })
    .await?;
    Ok(v1::TermsList {
        items: items.into_iter().map(terms_out).collect(),
    })
}

#[cfg(test)]
#[allow(deprecated)]
mod tests {
    use super::*;
    use ward_proto::Timestamp;

    fn ts(ms: i64) -> Option<Timestamp> {
        Some(Timestamp::from_millis(ms))
    }

    #[test]
    fn group_ids_and_limits() {
        let v2g = v2::Group {
            uid: "0123456789abcdef0123456789abcdef01234567".into(),
            name: "eng".into(),
            description: "d".into(),
            create_time: ts(1),
            update_time: ts(2),
            kind: v2::OrgKind::Customer as i32,
            status: v2::OrgStatus::Ready as i32,
            ..Default::default()
        };
        let g = group_out(v2g.clone());
        assert_eq!(g.id, v2g.uid);
        assert_eq!(g.kind, v1::OrgKind::Customer as i32);
        assert_eq!(g.status, v1::OrgStatus::Ready as i32);
        for k in RESOURCE_LIMIT_KEYS {
            assert_eq!(g.resource_limits.get(k), Some(&0), "{k}");
        }
        let back = group_in(g);
        assert_eq!(back.uid, v2g.uid);
        assert_eq!((back.create_time, back.update_time), (None, None));
        assert_eq!((back.name, back.description), (v2g.name, v2g.description));
        // JSON uses v1's names.
        let json = serde_json::to_value(group_out(v2::Group::default())).unwrap();
        assert!(json.get("id").is_some() && json.get("uid").is_none());
        assert_eq!(json["resourceLimits"]["idps"], 0);
    }

    #[test]
    fn identity_times_and_relationship() {
        let v2i = v2::Identity {
            uid: "abc".into(),
            name: "ci".into(),
            email: "x@example.com".into(),
            company: "acme".into(),
            create_time: ts(1_000),
            update_time: ts(2_000),
            last_seen_time: ts(3_000),
            relationship: Some(v2::identity::Relationship::StaticKeys(v2::StaticKeys {
                issuer: "iss".into(),
                subject: "sub".into(),
                issuer_keys: "{}".into(),
                expiration_time: ts(4_000),
                audiences: vec!["aud".into()],
            })),
            ..Default::default()
        };
        let i = identity_out(v2i.clone());
        assert_eq!(i.id, "abc");
        assert_eq!(
            (i.created_at, i.updated_at, i.last_seen),
            (ts(1_000), ts(2_000), ts(3_000))
        );
        let Some(v1::identity::Relationship::Static(k)) = &i.relationship else {
            panic!("static keys expected");
        };
        assert_eq!(k.expiration, ts(4_000));
        let json = serde_json::to_value(&i).unwrap();
        for k in ["createdAt", "updatedAt", "lastSeen", "static", "id"] {
            assert!(json.get(k).is_some(), "{k} in {json}");
        }
        for k in ["createTime", "uid", "email", "company", "staticKeys"] {
            assert!(json.get(k).is_none(), "{k} in {json}");
        }
        // Back to v2: output-only times are dropped, the relationship kept.
        let back = identity_in(i);
        assert_eq!(back.uid, "abc");
        assert_eq!(
            (back.create_time, back.update_time, back.last_seen_time),
            (None, None, None)
        );
        assert_eq!(back.relationship, v2i.relationship);

        let m = v2::ClaimMatch {
            iss: Some(v2::claim_match::Iss::IssuerPattern("https://.*".into())),
            sub: Some(v2::claim_match::Sub::Subject("s".into())),
            aud: None,
            claims: [("k".to_owned(), "v".to_owned())].into(),
            ..Default::default()
        };
        let rel = Some(v2::identity::Relationship::ClaimMatch(m));
        let round = identity_in(identity_out(v2::Identity {
            relationship: rel.clone(),
            ..Default::default()
        }));
        assert_eq!(round.relationship, rel);
        let sp = Some(v2::identity::Relationship::ServicePrincipal(
            v2::ServicePrincipal::Guardener as i32,
        ));
        let out = identity_out(v2::Identity {
            relationship: sp,
            ..Default::default()
        });
        assert_eq!(
            out.relationship,
            Some(v1::identity::Relationship::ServicePrincipal(
                v1::ServicePrincipal::Guardener as i32
            ))
        );
    }

    #[test]
    fn capabilities_by_dotted_name() {
        let caps = capabilities_in(&["groups.list".into(), "CAP_IAM_ROLES_LIST".into()]).unwrap();
        assert_eq!(
            caps,
            vec![Capability::IamGroupsList as i32, Capability::IamRolesList as i32]
        );
        assert_eq!(capabilities_out(&caps), vec!["groups.list", "roles.list"]);
        let e = capabilities_in(&["groups.list".into(), "nope".into(), "".into()]).unwrap_err();
        match e {
            Error::InvalidArgument(v) => assert_eq!(v.len(), 2),
            other => panic!("{other:?}"),
        }
        let r = role_out(v2::Role {
            uid: "r".into(),
            capabilities: vec![Capability::IamGroupsList as i32],
            create_time: ts(1),
            ..Default::default()
        });
        assert_eq!(
            (r.id.as_str(), r.capabilities.as_slice()),
            ("r", &["groups.list".to_owned()][..])
        );
    }

    #[test]
    fn full_replacement_masks() {
        use crate::services::{groups, identities, role_bindings, roles};
        // Every path is one v2 lets an update change.
        for (m, f) in [
            (GROUP_MASK, &groups::GROUP_FIELDS),
            (IDENTITY_MASK, &identities::IDENTITY_FIELDS),
            (ROLE_MASK, &roles::ROLE_FIELDS),
            (ROLE_BINDING_MASK, &role_bindings::BINDING_FIELDS),
        ] {
            let parsed = ward_core::fieldmask::FieldMask::parse(&m.join(","), f).unwrap();
            for p in m {
                assert!(parsed.contains(p), "{p}");
            }
        }
        // Every v2-mutable field v1 has is in the mask: only `company`
        // (absent from v1) is left out.
        assert_eq!(GROUP_MASK, groups::GROUP_FIELDS.mutable);
        assert_eq!(ROLE_MASK, roles::ROLE_FIELDS.mutable);
        assert_eq!(ROLE_BINDING_MASK, role_bindings::BINDING_FIELDS.mutable);
        let missing: Vec<_> = identities::IDENTITY_FIELDS
            .mutable
            .iter()
            .filter(|f| !IDENTITY_MASK.contains(f))
            .collect();
        assert_eq!(missing, vec![&"company"]);
        match mask(GROUP_MASK) {
            UpdateMask::Paths(p) => assert_eq!(p, vec!["name", "description"]),
            _ => panic!("an explicit mask"),
        }
        // An omitted description reaches v2 empty, and the mask names it: reset.
        let g = group_in(v1::Group {
            id: "x".into(),
            name: "n".into(),
            ..Default::default()
        });
        assert!(g.description.is_empty());
    }

    #[test]
    fn id_filters() {
        assert!(role_scope(None, "/".into()).unwrap().unwrap().in_root);
        assert_eq!(role_scope(None, "p".into()).unwrap().unwrap().children_of, "p");
        let f = UidpFilter {
            children_of: "q".into(),
            ..Default::default()
        };
        assert_eq!(role_scope(Some(f), "p".into()), None);
    }

    #[test]
    fn bindings() {
        let v2b = v2::RoleBinding {
            uid: "g/b".into(),
            identity: Some(v2::RoleBindingIdentity {
                uid: "i".into(),
                issuer: "iss".into(),
                subject: "sub".into(),
                ..Default::default()
            }),
            group: Some(v2::RoleBindingGroup {
                uid: "g".into(),
                name: "grp".into(),
                description: String::new(),
            }),
            role: Some(v2::RoleBindingRole {
                uid: "r".into(),
                name: "viewer".into(),
                description: String::new(),
            }),
            create_time: ts(5),
            identity_uid: "i".into(),
            role_uid: "r".into(),
        };
        let b = role_binding_out(v2b.clone());
        assert_eq!(
            (b.id.as_str(), b.identity.as_str(), b.group.as_str(), b.role.as_str()),
            ("g/b", "i", "g", "r")
        );
        let back = role_binding_in(v1::RoleBinding {
            group: "ignored".into(),
            ..b
        });
        assert_eq!(
            (back.uid, back.identity_uid, back.role_uid),
            ("g/b".into(), "i".into(), "r".into())
        );
        assert!(back.group.is_none());

        // Without a visible full role: the hydrated basics, no capabilities.
        let h = binding_out(v2b.clone(), &HashMap::new(), &HashMap::new());
        assert_eq!(h.created_at, ts(5));
        assert_eq!(
            (h.claim_match_issuer.as_str(), h.claim_match_subject.as_str()),
            ("iss", "sub")
        );
        assert_eq!(h.group.as_ref().map(|g| g.name.as_str()), Some("grp"));
        assert!(h.role.as_ref().is_some_and(|r| r.capabilities.is_empty()));
        let roles = HashMap::from([(
            "r".to_owned(),
            v1::Role {
                id: "r".into(),
                name: "viewer".into(),
                description: String::new(),
                capabilities: vec!["groups.list".into()],
            },
        )]);
        let h = binding_out(v2b, &HashMap::new(), &roles);
        assert_eq!(h.role.map(|r| r.capabilities), Some(vec!["groups.list".to_owned()]));

        let batch = create_role_binding_batch_in(v1::CreateRoleBindingBatchRequest {
            parent: "g".into(),
            role_bindings: vec![v1::RoleBinding {
                identity: "i".into(),
                role: "r".into(),
                ..Default::default()
            }],
        });
        assert_eq!(batch.parent, "g");
        assert_eq!(batch.requests.len(), 1);
        assert_eq!(batch.requests[0].parent, "");
    }

    #[test]
    fn terms_times() {
        let t = terms_out(v2::TermsAcceptance {
            doc_id: "tos.v1".into(),
            accepted_by: "me".into(),
            org_uid: "o".into(),
            create_time: ts(7),
        });
        assert_eq!(t.accepted_at, ts(7));
        let json = serde_json::to_value(&t).unwrap();
        assert!(json.get("acceptedAt").is_some() && json.get("createTime").is_none());
    }
}
