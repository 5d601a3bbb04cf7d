//! People authorization (identity providers, their external group mappings,
//! group invites), account associations and an organization's directory, as
//! a generated matrix: every rule of `ward_core::rpc::PEOPLE_RULES`,
//! `ACCOUNT_ASSOCIATION_RULES` and `DIRECTORY_RULES` × seven caller relations,
//! on every backend. Outcomes are computed from the tables and the built-in
//! roles' capability sets, never written case by case. The RPCs that need
//! authentication only (LookupGroup, CheckEligibility, RequestGroupAccess,
//! Register) and the ping that needs none are checked for every relation too.
//!
//! Fixture: organization `org` with a group `A`, and organization `org2`.
//! Targets: an identity provider in org (they live only in organizations), a
//! mapping under it, an invite in A, A's account association (one per group,
//! at the group's uid); org2 holds one of each too, so listings have something
//! to leave out. Account associations are created, and delete victims made,
//! at fresh groups under A (the admin makes one per attempt). The directory
//! rules act at A. Callers are root-level identities with built-in role
//! bindings (see `RELATIONS`), none of whom logged in with an email.
//!
//! The model:
//!
//! - **caps(X)**: the union of the roles bound at X or at an ancestor of X (a
//!   UIDP prefix ending at `/`).
//! - **a step** (`Ward::authorize`): `rule.capability` in caps(scope) → go on;
//!   else `rule.seen_with().0` in caps(scope) → PERMISSION_DENIED; else
//!   NOT_FOUND naming `rule.seen_with().1` at the scope. For Get, Update and
//!   Delete this one step is also the visibility check (`seen_with` is the
//!   kind's list capability); creating a mapping first looks the identity
//!   provider up, which the step's `seen_with` (identity_providers.list at the
//!   provider) models too. Account associations are looked up
//!   (`visible_association`: `rpc::GET_ACCOUNT_ASSOCIATION` as a step) before
//!   an update or a delete applies its rule, as the service does.
//! - **creates** of people grant a role (the built-in `viewer` here), so after the rule
//!   they take `rpc::CREATE_ROLE_BINDING` as a step where the role applies
//!   (the organization for providers and mappings, the group for invites),
//!   then: the role visible (built-in: `roles.list` anywhere) else NOT_FOUND
//!   of the role, and its capabilities held there else PERMISSION_DENIED.
//! - **batch delete** is the rule at the provider, then each named mapping
//!   visible (`rpc::GET_GROUP_MAPPING` as a step at the mapping).
//! - **lists** return exactly what the list capability covers.
//! - **the directory rules** (AcceptTerms, ListTermsAcceptances,
//!   ListGroupAccessRequests) and **CheckAccountAssociation** are one step at
//!   the resource (a group: `groups.list` sees it).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{Bearer, TestServer, assert_error, enc, field_violations, uid};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tonic::transport::Channel;
use tonic::{Code, Status};
use ward_core::capability::{BuiltinRole, CapSet, Capability, builtin_role};
use ward_core::rpc::{self, ACCOUNT_ASSOCIATION_RULES, DIRECTORY_RULES, Kind, PEOPLE_RULES, Rule, Scope};
use ward_proto::iam::v2::account_associations_service_client::AccountAssociationsServiceClient;
use ward_proto::iam::v2::external_group_role_mappings_service_client::ExternalGroupRoleMappingsServiceClient;
use ward_proto::iam::v2::group_invites_service_client::GroupInvitesServiceClient;
use ward_proto::iam::v2::identity_providers_service_client::IdentityProvidersServiceClient;
use ward_proto::iam::v2::{
    GetAccountAssociationRequest, GetExternalGroupRoleMappingRequest, GetGroupInviteRequest,
    GetIdentityProviderRequest, ListAccountAssociationsRequest, ListExternalGroupRoleMappingsRequest,
    ListGroupInvitesRequest, ListIdentityProvidersRequest,
};

const PAGE_SIZE: usize = 3;

/// The document the matrix accepts terms for.
const TERMS_DOC: &str = "tos.v1";

/// Every rule the matrix runs, table by table.
fn all_rules() -> impl Iterator<Item = &'static Rule> {
    PEOPLE_RULES
        .iter()
        .chain(ACCOUNT_ASSOCIATION_RULES)
        .chain(DIRECTORY_RULES)
}

// ---------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verb {
    Create,
    Get,
    List,
    Update,
    Delete,
    BatchDelete,
    /// `CheckAccountAssociation`: a read of one resource answering a status.
    Check,
    /// `AcceptTerms`: a write at a group.
    Accept,
    /// A listing inside one resource (`ListTermsAcceptances`,
    /// `ListGroupAccessRequests`): Resource-scoped, refused like a Get.
    ListIn,
}

/// The method an RPC name starts with (`GroupInvitesService.GetGroupInvite`),
/// checked against the rule's scope.
fn verb(rule: &Rule) -> Verb {
    let method = rule.rpc.split_once('.').expect("Service.Method").1;
    let v = [
        ("Create", Verb::Create),
        ("Get", Verb::Get),
        ("List", Verb::List),
        ("Update", Verb::Update),
        ("Delete", Verb::Delete),
        ("BatchDelete", Verb::BatchDelete),
        ("Check", Verb::Check),
        ("Accept", Verb::Accept),
    ]
    .into_iter()
    .find(|(p, _)| method.starts_with(p))
    .unwrap_or_else(|| panic!("{} is not a method this matrix knows", rule.rpc))
    .1;
    // A List at one resource reads inside it; other lists are unscoped.
    let v = if v == Verb::List && rule.scope == Scope::Resource {
        Verb::ListIn
    } else {
        v
    };
    let scope = match v {
        Verb::Create | Verb::BatchDelete => Scope::Parent,
        Verb::List => Scope::Unscoped,
        _ => Scope::Resource,
    };
    assert_eq!(rule.scope, scope, "{}: unexpected scope in the table", rule.rpc);
    v
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    Ok,
    Denied,
    /// (resource type, name) of the ResourceInfo.
    NotFound(&'static str, String),
}

impl Outcome {
    fn label(&self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Denied => "denied",
            Outcome::NotFound(..) => "not found",
        }
    }

    fn grpc(&self) -> Code {
        match self {
            Outcome::Ok => Code::Ok,
            Outcome::Denied => Code::PermissionDenied,
            Outcome::NotFound(..) => Code::NotFound,
        }
    }
}

/// Whether a binding at `scope` covers `uid`: `uid` is `scope` or below it.
fn covers(scope: &str, uid: &str) -> bool {
    uid == scope || (uid.len() > scope.len() && uid.starts_with(scope) && uid.as_bytes()[scope.len()] == b'/')
}

fn org_of(uid: &str) -> &str {
    uid.split('/').next().unwrap_or(uid)
}

/// Whether creating a `kind` grants a role (and so binds one where it
/// applies): identity providers, mappings and invites do; account
/// associations do not.
fn grants_role(kind: Kind) -> bool {
    matches!(kind, Kind::IdentityProvider | Kind::GroupMapping | Kind::GroupInvite)
}

/// The role every people create grants (default role, mapped role, invite role).
fn granted_role() -> &'static BuiltinRole {
    builtin_role("viewer").expect("built-in viewer")
}

struct Caller {
    relation: &'static str,
    /// The identity's uid (who accepted terms).
    identity: String,
    token: String,
    /// (group, capabilities of the role bound there).
    bindings: Vec<(String, CapSet)>,
}

impl Caller {
    fn caps_at(&self, uid: &str) -> CapSet {
        self.bindings
            .iter()
            .filter(|(g, _)| covers(g, uid))
            .fold(CapSet::EMPTY, |a, (_, c)| a.union(*c))
    }

    fn anywhere(&self, cap: Capability) -> bool {
        self.bindings.iter().any(|(_, c)| c.contains(cap))
    }
}

/// One authorization step: `rule` at `at`.
fn step(rule: &Rule, caps: CapSet, at: &str) -> Outcome {
    let (seen_with, type_name) = rule.seen_with();
    if caps.contains(rule.capability) {
        Outcome::Ok
    } else if caps.contains(seen_with) {
        Outcome::Denied
    } else {
        Outcome::NotFound(type_name, at.to_owned())
    }
}

/// Granting the role at `group`: it must be visible, then held there.
fn grant(c: &Caller, group: &str) -> Outcome {
    let role = granted_role();
    if !c.anywhere(rpc::GET_ROLE.capability) {
        Outcome::NotFound(Kind::Role.type_name(), role.uid())
    } else if !role.caps().is_subset(c.caps_at(group)) {
        Outcome::Denied
    } else {
        Outcome::Ok
    }
}

/// Where a create under `parent` grants its role.
fn grant_scope(kind: Kind, parent: &str) -> String {
    match kind {
        Kind::GroupInvite => parent.to_owned(),
        _ => org_of(parent).to_owned(),
    }
}

/// The outcome of `rule` at `at` (the parent for creates and batch deletes);
/// `victim` is the mapping a batch delete names.
fn predict(c: &Caller, rule: &Rule, at: &str, victim: Option<&str>) -> Outcome {
    let v = verb(rule);
    let mut steps = Vec::new();
    if rule.kind == Kind::AccountAssociation && matches!(v, Verb::Update | Verb::Delete) {
        // Looked up (`visible_association`) before the rule is applied.
        steps.push(step(&rpc::GET_ACCOUNT_ASSOCIATION, c.caps_at(at), at));
    }
    steps.push(step(rule, c.caps_at(at), at));
    match v {
        Verb::Create if grants_role(rule.kind) => {
            let g = grant_scope(rule.kind, at);
            steps.push(step(&rpc::CREATE_ROLE_BINDING, c.caps_at(&g), &g));
            steps.push(grant(c, &g));
        }
        Verb::BatchDelete => {
            let m = victim.expect("a batch delete names a mapping");
            steps.push(step(&rpc::GET_GROUP_MAPPING, c.caps_at(m), m));
        }
        _ => {}
    }
    // The first refusal decides.
    steps.into_iter().find(|o| *o != Outcome::Ok).unwrap_or(Outcome::Ok)
}

fn assert_outcome(ctx: &str, expected: &Outcome, status: StatusCode, body: &Value) {
    match expected {
        Outcome::Ok => assert_eq!(status, StatusCode::OK, "{ctx}: expected success; {body}"),
        Outcome::Denied => assert_error(ctx, status, body, 403, 7, "PERMISSION_DENIED"),
        Outcome::NotFound(type_name, name) => {
            assert_error(ctx, status, body, 404, 5, "NOT_FOUND");
            let info = body["details"]
                .as_array()
                .and_then(|d| {
                    d.iter()
                        .find(|d| d["@type"] == "type.googleapis.com/google.rpc.ResourceInfo")
                })
                .unwrap_or_else(|| panic!("{ctx}: no ResourceInfo in {body}"));
            assert_eq!(info["resourceType"], *type_name, "{ctx}: {body}");
            assert_eq!(info["resourceName"], name.as_str(), "{ctx}: {body}");
        }
    }
}

// ---------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------

fn collection(kind: Kind) -> &'static str {
    match kind {
        Kind::IdentityProvider => "identityProviders",
        Kind::GroupMapping => "externalGroupRoleMappings",
        Kind::GroupInvite => "groupInvites",
        Kind::AccountAssociation => "accountAssociations",
        other => unreachable!("{other:?} has no collection in this matrix"),
    }
}

/// A number for unique names (mappings are unique per external group).
fn serial() -> usize {
    static N: AtomicUsize = AtomicUsize::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

fn create_body(kind: Kind) -> Value {
    let (n, role) = (serial(), granted_role().uid());
    match kind {
        Kind::IdentityProvider => json!({
            "name": format!("m{n}"),
            "defaultRole": role,
            "oidc": { "issuer": "https://idp.example.com", "clientId": "ward", "clientSecret": "s" },
        }),
        Kind::GroupMapping => json!({ "externalGroupId": format!("eng-{n}"), "roleUid": role }),
        Kind::GroupInvite => json!({ "roleUid": role, "ttl": "3600s" }),
        Kind::AccountAssociation => json!({ "name": "m", "amazon": { "account": "123456789012" } }),
        other => unreachable!("{other:?} is not created by this matrix"),
    }
}

/// Creates a `kind` under `parent` with the admin token; returns its uid.
async fn admin_create(s: &TestServer, kind: Kind, parent: &str) -> String {
    let path = format!("/iam/v2/{}/{parent}", collection(kind));
    let (status, body) = s.post(&path, create_body(kind)).await;
    assert_eq!(status, StatusCode::OK, "[{}] admin create {path}: {body}", s.backend);
    uid(&body)
}

/// Every people resource and account association on the server, and who
/// accepted terms at A, as the test has tracked them.
#[derive(Default)]
struct Universe {
    resources: BTreeMap<&'static str, BTreeSet<String>>,
    /// Identities that accepted `TERMS_DOC` at A.
    accepted: BTreeSet<String>,
}

impl Universe {
    fn add(&mut self, kind: Kind, uid: &str) {
        self.resources
            .entry(kind.type_name())
            .or_default()
            .insert(uid.to_owned());
    }

    fn remove(&mut self, kind: Kind, uid: &str) {
        assert!(
            self.resources.entry(kind.type_name()).or_default().remove(uid),
            "{uid} untracked"
        );
    }

    fn of(&self, kind: Kind) -> BTreeSet<String> {
        self.resources.get(kind.type_name()).cloned().unwrap_or_default()
    }
}

#[derive(Clone, Copy)]
enum Place {
    Org,
    A,
    Org2,
}

/// Caller relations: (place, built-in role) bindings.
const RELATIONS: &[(&str, &[(Place, &str)])] = &[
    ("owner at the org", &[(Place::Org, "owner")]),
    ("viewer at the org", &[(Place::Org, "viewer")]),
    ("editor at the org", &[(Place::Org, "editor")]),
    (
        "registry.pull_token_creator at the org",
        &[(Place::Org, "registry.pull_token_creator")],
    ),
    ("owner of A", &[(Place::A, "owner")]),
    ("no bindings", &[]),
    ("org2's owner", &[(Place::Org2, "owner")]),
];

struct Fixture {
    org: String,
    a: String,
    org2: String,
    idp: String,
    mapping: String,
    invite: String,
    /// A's account association (its uid is A's).
    association: String,
}

impl Fixture {
    fn place(&self, p: Place) -> &str {
        match p {
            Place::Org => &self.org,
            Place::A => &self.a,
            Place::Org2 => &self.org2,
        }
    }

    /// Where the matrix creates a `kind` (and the victims of deletes); for
    /// account associations, where it makes a fresh group (`fresh_parent`).
    fn parent(&self, kind: Kind) -> &str {
        match kind {
            Kind::IdentityProvider => &self.org,
            Kind::GroupMapping => &self.idp,
            Kind::GroupInvite | Kind::AccountAssociation => &self.a,
            other => unreachable!("{other:?} is not created by this matrix"),
        }
    }

    /// What Gets and Updates act on.
    fn target(&self, kind: Kind) -> &str {
        match kind {
            Kind::IdentityProvider => &self.idp,
            Kind::GroupMapping => &self.mapping,
            Kind::GroupInvite => &self.invite,
            Kind::AccountAssociation => &self.association,
            other => unreachable!("{other:?} has no target in this matrix"),
        }
    }
}

/// The parent of one create or delete victim: the fixture's, or for an
/// account association (one per group, at the group's uid) a fresh group the
/// admin makes under it.
async fn fresh_parent(s: &TestServer, fx: &Fixture, kind: Kind) -> String {
    let parent = fx.parent(kind);
    if kind == Kind::AccountAssociation {
        uid(&s.create_group(Some(parent), &format!("aa-{}", serial())).await)
    } else {
        parent.to_owned()
    }
}

async fn build_fixture(s: &TestServer, u: &mut Universe) -> Fixture {
    let org = uid(&s.create_group(None, "org").await);
    let a = uid(&s.create_group(Some(&org), "a").await);
    let org2 = uid(&s.create_group(None, "org2").await);
    let mut targets = Vec::new();
    for (org, group) in [(&org, &a), (&org2, &org2)] {
        let idp = admin_create(s, Kind::IdentityProvider, org).await;
        let mapping = admin_create(s, Kind::GroupMapping, &idp).await;
        let invite = admin_create(s, Kind::GroupInvite, group).await;
        u.add(Kind::IdentityProvider, &idp);
        u.add(Kind::GroupMapping, &mapping);
        u.add(Kind::GroupInvite, &invite);
        let association = admin_create(s, Kind::AccountAssociation, group).await;
        u.add(Kind::AccountAssociation, &association);
        targets.push((idp, mapping, invite, association));
    }
    let (idp, mapping, invite, association) = targets.swap_remove(0);
    assert_eq!(
        association, a,
        "[{}] an account association is at its group's uid",
        s.backend
    );
    Fixture {
        org,
        a,
        org2,
        idp,
        mapping,
        invite,
        association,
    }
}

async fn make_callers(s: &TestServer, fx: &Fixture) -> Vec<Caller> {
    let mut callers = Vec::new();
    for (i, (relation, bindings)) in RELATIONS.iter().enumerate() {
        let at: Vec<(&str, &str)> = bindings.iter().map(|(p, r)| (fx.place(*p), *r)).collect();
        let (identity, token) = common::person(s, &format!("caller-{i}"), &at).await;
        let bindings = bindings
            .iter()
            .map(|(p, r)| (fx.place(*p).to_owned(), builtin_role(r).expect("built-in role").caps()))
            .collect();
        callers.push(Caller {
            relation,
            identity,
            token,
            bindings,
        });
    }
    callers
}

/// One request: what is sent, where the prediction is made, and the
/// resource it would delete (made with the admin token just before).
struct Req {
    method: Method,
    path: String,
    body: Option<Value>,
    at: String,
    victim: Option<String>,
}

async fn prepare(s: &TestServer, fx: &Fixture, rule: &Rule, u: &mut Universe) -> Req {
    let req = |method, path, body, at: &str| Req {
        method,
        path,
        body,
        at: at.to_owned(),
        victim: None,
    };
    if rule.kind == Kind::Group {
        // The directory rules act at a group: A.
        let g = fx.a.as_str();
        return if rule.rpc == rpc::ACCEPT_TERMS.rpc {
            req(
                Method::POST,
                format!("/iam/v2/terms/{g}"),
                Some(json!({ "documentIds": [TERMS_DOC] })),
                g,
            )
        } else if rule.rpc == rpc::LIST_TERMS_ACCEPTANCES.rpc {
            req(Method::GET, format!("/iam/v2/terms/{g}"), None, g)
        } else if rule.rpc == rpc::LIST_GROUP_ACCESS_REQUESTS.rpc {
            let path = format!("/iam/v2/groups:accessRequests?group_uid={}", enc(g));
            req(Method::GET, path, None, g)
        } else {
            unreachable!("{} is not a directory rule this matrix knows", rule.rpc)
        };
    }
    let base = format!("/iam/v2/{}", collection(rule.kind));
    let target = fx.target(rule.kind).to_owned();
    match verb(rule) {
        Verb::Create => {
            let parent = fresh_parent(s, fx, rule.kind).await;
            req(
                Method::POST,
                format!("{base}/{parent}"),
                Some(create_body(rule.kind)),
                &parent,
            )
        }
        Verb::Get => req(Method::GET, format!("{base}/{target}"), None, &target),
        Verb::Check => req(
            Method::POST,
            format!("{base}/{target}:checkAccountAssociation"),
            Some(json!({ "providerType": "ACCOUNT_PROVIDER_TYPE_AMAZON" })),
            &target,
        ),
        // Idempotent: nothing changes, so nothing more is checked.
        Verb::Update => req(
            Method::PATCH,
            format!("{base}/{target}"),
            Some(json!({ "description": "updated by the people matrix" })),
            &target,
        ),
        Verb::Delete | Verb::BatchDelete => {
            let parent = fresh_parent(s, fx, rule.kind).await;
            let v = admin_create(s, rule.kind, &parent).await;
            u.add(rule.kind, &v);
            let mut r = if verb(rule) == Verb::Delete {
                req(Method::DELETE, format!("{base}/{v}"), None, &v)
            } else {
                let body = json!({ "parent": parent, "names": [v] });
                req(Method::POST, format!("{base}:batchDelete"), Some(body), &parent)
            };
            r.victim = Some(v);
            r
        }
        Verb::List => unreachable!("lists are walked"),
        Verb::Accept | Verb::ListIn => unreachable!("{}: only the directory has these", rule.rpc),
    }
}

// ---------------------------------------------------------------------------
// Lists and gRPC
// ---------------------------------------------------------------------------

/// Walks a REST listing of `kind` in pages of `PAGE_SIZE`: the uids served
/// and the `totalCount` (a JSON string, the same on every page).
async fn walk(s: &TestServer, token: &str, kind: Kind, ctx: &str) -> (Vec<String>, usize) {
    let base = format!("/iam/v2/{}?page_size={PAGE_SIZE}", collection(kind));
    let (mut uids, mut total, mut page_token) = (Vec::new(), None::<String>, String::new());
    for pages in 1.. {
        let path = if page_token.is_empty() {
            base.clone()
        } else {
            format!("{base}&page_token={}", enc(&page_token))
        };
        let (status, page) = s.call_as(token, Method::GET, &path, None).await;
        assert_eq!(status, StatusCode::OK, "{ctx}: GET {path}: {page}");
        let items = page[collection(kind)].as_array().expect("items array");
        assert!(items.len() <= PAGE_SIZE, "{ctx}: page larger than {PAGE_SIZE}: {page}");
        let t = page["totalCount"]
            .as_str()
            .unwrap_or_else(|| panic!("{ctx}: totalCount is a JSON string: {page}"))
            .to_owned();
        if let Some(prev) = &total {
            assert_eq!(prev, &t, "{ctx}: totalCount changed between pages");
        }
        total = Some(t);
        uids.extend(items.iter().map(uid));
        page_token = page["nextPageToken"].as_str().expect("nextPageToken").to_owned();
        if page_token.is_empty() {
            break;
        }
        assert!(!items.is_empty(), "{ctx}: an empty page before the end");
        assert!(pages < 100, "{ctx}: runaway pagination");
    }
    let total = total.expect("a page").parse().expect("decimal totalCount");
    (uids, total)
}

async fn channel(s: &TestServer) -> Channel {
    Channel::from_shared(format!("http://{}", s.addr()))
        .expect("valid uri")
        .connect()
        .await
        .unwrap_or_else(|e| panic!("[{}] gRPC connect: {e}", s.backend))
}

/// One unary call on a service client, with `token`.
macro_rules! grpc {
    ($ch:expr, $token:expr, $client:ident . $method:ident($req:expr)) => {
        $client::with_interceptor($ch.clone(), Bearer($token.to_owned()))
            .$method($req)
            .await?
            .into_inner()
    };
}

/// A Get over gRPC: the uid answered.
async fn grpc_get(ch: &Channel, token: &str, kind: Kind, uid: &str) -> Result<String, Status> {
    let uid = uid.to_owned();
    Ok(match kind {
        Kind::IdentityProvider => {
            grpc!(
                ch,
                token,
                IdentityProvidersServiceClient.get_identity_provider(GetIdentityProviderRequest { uid })
            )
            .uid
        }
        Kind::GroupMapping => {
            let req = GetExternalGroupRoleMappingRequest { uid };
            grpc!(
                ch,
                token,
                ExternalGroupRoleMappingsServiceClient.get_external_group_role_mapping(req)
            )
            .uid
        }
        Kind::GroupInvite => {
            grpc!(
                ch,
                token,
                GroupInvitesServiceClient.get_group_invite(GetGroupInviteRequest { uid })
            )
            .uid
        }
        Kind::AccountAssociation => {
            let req = GetAccountAssociationRequest { uid };
            grpc!(ch, token, AccountAssociationsServiceClient.get_account_association(req)).uid
        }
        other => unreachable!("{other:?} has no gRPC Get in this matrix"),
    })
}

/// A List over gRPC: its `total_count`.
async fn grpc_total(ch: &Channel, token: &str, kind: Kind) -> Result<Option<i64>, Status> {
    Ok(match kind {
        Kind::IdentityProvider => {
            let req = ListIdentityProvidersRequest::default();
            grpc!(ch, token, IdentityProvidersServiceClient.list_identity_providers(req)).total_count
        }
        Kind::GroupMapping => {
            let req = ListExternalGroupRoleMappingsRequest::default();
            grpc!(
                ch,
                token,
                ExternalGroupRoleMappingsServiceClient.list_external_group_role_mappings(req)
            )
            .total_count
        }
        Kind::GroupInvite => {
            let req = ListGroupInvitesRequest::default();
            grpc!(ch, token, GroupInvitesServiceClient.list_group_invites(req)).total_count
        }
        Kind::AccountAssociation => {
            let req = ListAccountAssociationsRequest::default();
            grpc!(
                ch,
                token,
                AccountAssociationsServiceClient.list_account_associations(req)
            )
            .total_count
        }
        other => unreachable!("{other:?} has no gRPC List in this matrix"),
    })
}

/// A List rule: exactly what the list capability covers, over REST and gRPC.
async fn check_list(s: &TestServer, ch: &Channel, c: &Caller, rule: &Rule, u: &Universe, ctx: &str) {
    let expected: BTreeSet<String> = u
        .of(rule.kind)
        .into_iter()
        .filter(|x| c.caps_at(x).contains(rule.capability))
        .collect();
    let (walked, total) = walk(s, &c.token, rule.kind, ctx).await;
    let got: BTreeSet<String> = walked.iter().cloned().collect();
    assert_eq!(got.len(), walked.len(), "{ctx}: duplicates in {walked:?}");
    assert_eq!(got, expected, "{ctx}: listing");
    assert_eq!(total, expected.len(), "{ctx}: totalCount");
    let grpc = grpc_total(ch, &c.token, rule.kind)
        .await
        .unwrap_or_else(|e| panic!("{ctx}: gRPC list: {e:?}"));
    assert_eq!(grpc, Some(expected.len() as i64), "{ctx}: gRPC total_count");
}

// ---------------------------------------------------------------------------
// The matrix
// ---------------------------------------------------------------------------

/// How often each (rpc, outcome label) was predicted.
type Tally = BTreeMap<(&'static str, &'static str), usize>;

async fn run_case(s: &TestServer, fx: &Fixture, c: &Caller, rule: &Rule, u: &mut Universe, tally: &mut Tally) {
    let r = prepare(s, fx, rule, u).await;
    let v = verb(rule);
    let expected = predict(c, rule, &r.at, r.victim.as_deref());
    *tally.entry((rule.rpc, expected.label())).or_default() += 1;
    let ctx = format!(
        "[{}] {} as {}: {} {}",
        s.backend, rule.rpc, c.relation, r.method, r.path
    );
    if v == Verb::Create && grants_role(rule.kind) && step(rule, c.caps_at(&r.at), &r.at) == Outcome::Ok {
        // Whoever may create holds the granted role where it applies: the
        // escalation check is modelled, but it is not what decides here.
        let g = grant_scope(rule.kind, &r.at);
        assert!(
            granted_role().caps().is_subset(c.caps_at(&g)),
            "{ctx}: the matrix's role grant would escalate"
        );
    }
    let (status, resp) = s.call_as(&c.token, r.method.clone(), &r.path, r.body).await;
    assert_outcome(&ctx, &expected, status, &resp);
    if expected == Outcome::Ok {
        match v {
            Verb::Create => {
                let made = uid(&resp);
                if rule.kind == Kind::AccountAssociation {
                    // One per group, at the group's uid.
                    assert_eq!(made, r.at, "{ctx}: not at its group's uid: {resp}");
                } else {
                    assert_eq!(
                        made.rsplit_once('/').map(|(p, _)| p),
                        Some(r.at.as_str()),
                        "{ctx}: created outside its parent: {resp}"
                    );
                }
                if rule.kind == Kind::GroupInvite {
                    for key in ["code", "keyId"] {
                        assert!(
                            resp[key].as_str().is_some_and(|x| !x.is_empty()),
                            "{ctx}: no {key}: {resp}"
                        );
                    }
                }
                u.add(rule.kind, &made);
            }
            Verb::Get | Verb::Update => assert_eq!(uid(&resp), r.at, "{ctx}: answered another resource: {resp}"),
            Verb::Delete => assert_eq!(resp, json!({}), "{ctx}: DELETE answers {{}}"),
            Verb::BatchDelete => assert_eq!(
                resp["externalGroupRoleMappings"][0]["uid"],
                json!(r.victim),
                "{ctx}: {resp}"
            ),
            Verb::Check => {
                // Ward does not reach AWS: a configured provider is not checked.
                assert_eq!(resp["status"], "CHECK_STATUS_NOT_READY", "{ctx}: {resp}");
                assert_eq!(resp["reason"], "not checked", "{ctx}: {resp}");
            }
            Verb::Accept => {
                assert_eq!(resp["group"], r.at.as_str(), "{ctx}: {resp}");
                assert_eq!(resp["documentIds"], json!([TERMS_DOC]), "{ctx}: {resp}");
                u.accepted.insert(c.identity.clone());
            }
            Verb::ListIn if rule.rpc == rpc::LIST_TERMS_ACCEPTANCES.rpc => {
                // Only the matrix accepts terms, at A: one acceptance each.
                let items = resp["termsAcceptances"]
                    .as_array()
                    .unwrap_or_else(|| panic!("{ctx}: no termsAcceptances: {resp}"));
                let by: BTreeSet<String> = items
                    .iter()
                    .map(|t| t["acceptedBy"].as_str().expect("acceptedBy").to_owned())
                    .collect();
                assert_eq!(items.len(), by.len(), "{ctx}: one acceptance each: {resp}");
                assert_eq!(by, u.accepted, "{ctx}: acceptances: {resp}");
                for t in items {
                    assert_eq!(t["docId"], TERMS_DOC, "{ctx}: {resp}");
                    assert_eq!(t["orgUid"], r.at.as_str(), "{ctx}: {resp}");
                }
            }
            // Nobody here has an email domain, so nobody could ask.
            Verb::ListIn => assert_eq!(resp["requests"], json!([]), "{ctx}: {resp}"),
            Verb::List => unreachable!(),
        }
    }
    if let Some(victim) = &r.victim {
        // Still there iff refused (checked as the admin).
        let (status, body) = s.get(&format!("/iam/v2/{}/{victim}", collection(rule.kind))).await;
        let refused = expected != Outcome::Ok;
        let want = if refused { StatusCode::OK } else { StatusCode::NOT_FOUND };
        assert_eq!(status, want, "{ctx}: victim {victim} after the call: {body}");
        if !refused {
            u.remove(rule.kind, victim);
        }
    }
}

async fn matrix_on(s: &TestServer, tally: &mut Tally) {
    let mut u = Universe::default();
    let fx = build_fixture(s, &mut u).await;
    let callers = make_callers(s, &fx).await;
    let ch = channel(s).await;
    for c in &callers {
        for rule in all_rules() {
            if verb(rule) == Verb::List {
                let ctx = format!("[{}] {} as {}", s.backend, rule.rpc, c.relation);
                check_list(s, &ch, c, rule, &u, &ctx).await;
                *tally.entry((rule.rpc, Outcome::Ok.label())).or_default() += 1;
            } else {
                run_case(s, &fx, c, rule, &mut u, tally).await;
            }
        }
        // gRPC Gets agree with the prediction (and so with REST), granted or not.
        for rule in all_rules().filter(|r| verb(r) == Verb::Get) {
            let at = fx.target(rule.kind);
            let expected = predict(c, rule, at, None);
            let got = grpc_get(&ch, &c.token, rule.kind, at).await;
            let ctx = format!("[{}] gRPC {} as {}: {got:?}", s.backend, rule.rpc, c.relation);
            assert_eq!(
                got.as_ref().err().map_or(Code::Ok, Status::code),
                expected.grpc(),
                "{ctx}"
            );
            if let Ok(answered) = &got {
                assert_eq!(answered, at, "{ctx}");
            }
        }
    }
    check_authn_only(s, &fx, &callers).await;
}

// ---------------------------------------------------------------------------
// Authentication only
// ---------------------------------------------------------------------------

const LOOKUP_GROUP: &str = "/iam/v2/groups:lookupGroup";
const CHECK_ELIGIBILITY: &str = "/iam/v2/groups:checkEligibility";
const REGISTER: &str = "/auth/v1/register";
const PING: &str = "/ping/v2/ping";
const UPDATE_METADATA: &str = "/iam/v2/identities:updateIdentityMetadata";

/// Neither 401 nor 403: the call needs nothing but a token.
fn assert_authenticated(ctx: &str, status: StatusCode, body: &Value) {
    assert!(
        status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN,
        "{ctx}: authentication is all this needs, yet {status}: {body}"
    );
}

/// LookupGroup, CheckEligibility, RequestGroupAccess and Register need a
/// token and no capability; the ping needs nothing. No caller here logged in
/// with an email, so none has a verified domain: nothing to find, not
/// eligible, no group to ask, and "x" is no invite code.
async fn check_authn_only(s: &TestServer, fx: &Fixture, callers: &[Caller]) {
    let request_access = format!("/iam/v2/groups/{}:requestGroupAccess", fx.a);
    let register_body = json!({ "code": "x" });
    for c in callers {
        let ctx = |what: &str| format!("[{}] {what} as {}", s.backend, c.relation);

        let cx = ctx("GroupsService.LookupGroup");
        let (status, body) = s.call_as(&c.token, Method::GET, LOOKUP_GROUP, None).await;
        assert_authenticated(&cx, status, &body);
        assert_error(&cx, status, &body, 404, 5, "NOT_FOUND");

        let cx = ctx("GroupsService.CheckEligibility");
        let (status, body) = s.call_as(&c.token, Method::GET, CHECK_ELIGIBILITY, None).await;
        assert_authenticated(&cx, status, &body);
        assert_eq!(status, StatusCode::OK, "{cx}: {body}");
        assert_eq!(body, json!({"eligible": false}), "{cx}: {body}");

        let cx = ctx("GroupsService.RequestGroupAccess");
        let (status, body) = s
            .call_as(&c.token, Method::POST, &request_access, Some(json!({})))
            .await;
        assert_authenticated(&cx, status, &body);
        let unseen = Outcome::NotFound(Kind::Group.type_name(), fx.a.clone());
        assert_outcome(&cx, &unseen, status, &body);

        let cx = ctx("Registration.Register");
        let (status, body) = s
            .call_as(&c.token, Method::POST, REGISTER, Some(register_body.clone()))
            .await;
        assert_authenticated(&cx, status, &body);
        assert_error(&cx, status, &body, 400, 3, "INVALID_ARGUMENT");
        assert!(
            field_violations(&body).iter().any(|(f, _)| f == "code"),
            "{cx}: the code is what is wrong: {body}"
        );

        let cx = ctx("IdentitiesService.UpdateIdentityMetadata");
        let (status, body) = s
            .call_as(
                &c.token,
                Method::PATCH,
                UPDATE_METADATA,
                Some(json!({ "company": "Acme" })),
            )
            .await;
        assert_authenticated(&cx, status, &body);
        assert_eq!(status, StatusCode::OK, "{cx}: every identity sets its own: {body}");
        assert_eq!(body["uid"], c.identity.as_str(), "{cx}: {body}");

        let cx = ctx("PingService.Ping");
        let (status, body) = s.call_as(&c.token, Method::GET, PING, None).await;
        assert_eq!(status, StatusCode::OK, "{cx}: {body}");
        assert_eq!(body["response"], "pong", "{cx}: {body}");
    }
    let without_token = [
        (Method::GET, LOOKUP_GROUP.to_owned(), None),
        (Method::GET, CHECK_ELIGIBILITY.to_owned(), None),
        (Method::POST, request_access, Some(json!({}))),
        (Method::POST, REGISTER.to_owned(), Some(register_body)),
        (
            Method::PATCH,
            UPDATE_METADATA.to_owned(),
            Some(json!({ "company": "Acme" })),
        ),
    ];
    for (method, path, body) in without_token {
        let ctx = format!("[{}] {method} {path} without a token", s.backend);
        let (status, resp) = s.call_as("", method, &path, body).await;
        assert_error(&ctx, status, &resp, 401, 16, "UNAUTHENTICATED");
    }
    let ctx = format!("[{}] GET {PING} without a token", s.backend);
    let (status, body) = s.call_as("", Method::GET, PING, None).await;
    assert_eq!(status, StatusCode::OK, "{ctx}: {body}");
    assert_eq!(body["response"], "pong", "{ctx}: {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_matrix_follows_the_rpc_table() {
    assert_eq!(PEOPLE_RULES.len(), 14, "the people table changed");
    assert_eq!(
        ACCOUNT_ASSOCIATION_RULES.len(),
        6,
        "the account association table changed"
    );
    assert_eq!(DIRECTORY_RULES.len(), 3, "the directory table changed");
    let mut tally = Tally::new();
    let mut backends = 0;
    for s in common::servers().await {
        matrix_on(&s, &mut tally).await;
        backends += 1;
    }
    assert!(backends >= 1, "no backend ran");
    eprintln!("people matrix on {backends} backends: {tally:?}");
    // Not vacuous: every single-resource rule succeeds and is refused as
    // unseen somewhere, and every rule needing more than seeing (every write,
    // and the directory's lists) is refused to someone who sees.
    for rule in all_rules().filter(|r| verb(r) != Verb::List) {
        for label in ["ok", "not found"] {
            assert!(
                tally.contains_key(&(rule.rpc, label)),
                "{} never {label}: {tally:?}",
                rule.rpc
            );
        }
        if rule.capability != rule.seen_with().0 {
            assert!(
                tally.contains_key(&(rule.rpc, "denied")),
                "{} never denied: {tally:?}",
                rule.rpc
            );
        }
    }
}

/// Mappings and invites have no update: PATCH is 405 (UNIMPLEMENTED) on both
/// API versions and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn immutable_resources_have_no_patch() {
    for s in common::servers().await {
        let org = uid(&s.create_group(None, "org").await);
        let idp = admin_create(&s, Kind::IdentityProvider, &org).await;
        let mapping = admin_create(&s, Kind::GroupMapping, &idp).await;
        let invite = admin_create(&s, Kind::GroupInvite, &org).await;
        for (kind, at) in [(Kind::GroupMapping, &mapping), (Kind::GroupInvite, &invite)] {
            for version in ["v2", "v2beta1"] {
                let path = format!("/iam/{version}/{}/{at}", collection(kind));
                let ctx = format!("[{}] PATCH {path}", s.backend);
                let body = json!({ "roleUid": builtin_role("owner").unwrap().uid() });
                let (status, resp) = s.patch(&path, body).await;
                assert_error(&ctx, status, &resp, 405, 12, "UNIMPLEMENTED");
                let (status, got) = s.get(&path).await;
                assert_eq!(status, StatusCode::OK, "{ctx}: still there: {got}");
                assert_eq!(got["roleUid"], granted_role().uid(), "{ctx}: unchanged: {got}");
            }
        }
    }
}
