//! People authorization (identity providers, their external group mappings,
//! group invites), as a generated matrix: every rule of
//! `ward_core::rpc::PEOPLE_RULES` × seven caller relations, on every backend.
//! Outcomes are computed from the table and the built-in roles' capability
//! sets, never written case by case.
//!
//! Fixture: organization `org` with a group `A`, and organization `org2`.
//! Targets: an identity provider in org (they live only in organizations), a
//! mapping under it, an invite in A; org2 holds one of each too, so listings
//! have something to leave out. Callers are root-level identities with
//! built-in role bindings (see `RELATIONS`).
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
//!   provider) models too.
//! - **creates** grant a role (the built-in `viewer` here), so after the rule
//!   they take `rpc::CREATE_ROLE_BINDING` as a step where the role applies
//!   (the organization for providers and mappings, the group for invites),
//!   then: the role visible (built-in: `roles.list` anywhere) else NOT_FOUND
//!   of the role, and its capabilities held there else PERMISSION_DENIED.
//! - **batch delete** is the rule at the provider, then each named mapping
//!   visible (`rpc::GET_GROUP_MAPPING` as a step at the mapping).
//! - **lists** return exactly what the list capability covers.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{Bearer, TestServer, assert_error, enc, uid};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tonic::transport::Channel;
use tonic::{Code, Status};
use ward_core::capability::{BuiltinRole, CapSet, Capability, builtin_role};
use ward_core::rpc::{self, Kind, PEOPLE_RULES, Rule, Scope};
use ward_proto::iam::v2::external_group_role_mappings_service_client::ExternalGroupRoleMappingsServiceClient;
use ward_proto::iam::v2::group_invites_service_client::GroupInvitesServiceClient;
use ward_proto::iam::v2::identity_providers_service_client::IdentityProvidersServiceClient;
use ward_proto::iam::v2::{
    GetExternalGroupRoleMappingRequest, GetGroupInviteRequest, GetIdentityProviderRequest,
    ListExternalGroupRoleMappingsRequest, ListGroupInvitesRequest, ListIdentityProvidersRequest,
};

const PAGE_SIZE: usize = 3;

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
    ]
    .into_iter()
    .find(|(p, _)| method.starts_with(p))
    .unwrap_or_else(|| panic!("{} is not a method this matrix knows", rule.rpc))
    .1;
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

/// The role every create grants (default role, mapped role, invite role).
fn granted_role() -> &'static BuiltinRole {
    builtin_role("viewer").expect("built-in viewer")
}

struct Caller {
    relation: &'static str,
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
    let mut steps = vec![step(rule, c.caps_at(at), at)];
    match verb(rule) {
        Verb::Create => {
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
        other => unreachable!("{other:?} is not a people kind"),
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
        other => unreachable!("{other:?} is not a people kind"),
    }
}

/// Creates a `kind` under `parent` with the admin token; returns its uid.
async fn admin_create(s: &TestServer, kind: Kind, parent: &str) -> String {
    let path = format!("/iam/v2/{}/{parent}", collection(kind));
    let (status, body) = s.post(&path, create_body(kind)).await;
    assert_eq!(status, StatusCode::OK, "[{}] admin create {path}: {body}", s.backend);
    uid(&body)
}

/// Every people resource on the server, as the test has tracked it.
#[derive(Default)]
struct Universe(BTreeMap<&'static str, BTreeSet<String>>);

impl Universe {
    fn add(&mut self, kind: Kind, uid: &str) {
        self.0.entry(kind.type_name()).or_default().insert(uid.to_owned());
    }

    fn remove(&mut self, kind: Kind, uid: &str) {
        assert!(
            self.0.entry(kind.type_name()).or_default().remove(uid),
            "{uid} untracked"
        );
    }

    fn of(&self, kind: Kind) -> BTreeSet<String> {
        self.0.get(kind.type_name()).cloned().unwrap_or_default()
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
}

impl Fixture {
    fn place(&self, p: Place) -> &str {
        match p {
            Place::Org => &self.org,
            Place::A => &self.a,
            Place::Org2 => &self.org2,
        }
    }

    /// Where the matrix creates a `kind` (and the victims of deletes).
    fn parent(&self, kind: Kind) -> &str {
        match kind {
            Kind::IdentityProvider => &self.org,
            Kind::GroupMapping => &self.idp,
            Kind::GroupInvite => &self.a,
            other => unreachable!("{other:?} is not a people kind"),
        }
    }

    /// What Gets and Updates act on.
    fn target(&self, kind: Kind) -> &str {
        match kind {
            Kind::IdentityProvider => &self.idp,
            Kind::GroupMapping => &self.mapping,
            Kind::GroupInvite => &self.invite,
            other => unreachable!("{other:?} is not a people kind"),
        }
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
        targets.push((idp, mapping, invite));
    }
    let (idp, mapping, invite) = targets.swap_remove(0);
    Fixture {
        org,
        a,
        org2,
        idp,
        mapping,
        invite,
    }
}

async fn make_callers(s: &TestServer, fx: &Fixture) -> Vec<Caller> {
    let mut callers = Vec::new();
    for (i, (relation, bindings)) in RELATIONS.iter().enumerate() {
        let at: Vec<(&str, &str)> = bindings.iter().map(|(p, r)| (fx.place(*p), *r)).collect();
        let (_, token) = common::person(s, &format!("caller-{i}"), &at).await;
        let bindings = bindings
            .iter()
            .map(|(p, r)| (fx.place(*p).to_owned(), builtin_role(r).expect("built-in role").caps()))
            .collect();
        callers.push(Caller {
            relation,
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
    let base = format!("/iam/v2/{}", collection(rule.kind));
    let parent = fx.parent(rule.kind).to_owned();
    let target = fx.target(rule.kind).to_owned();
    let req = |method, path, body, at: &str| Req {
        method,
        path,
        body,
        at: at.to_owned(),
        victim: None,
    };
    match verb(rule) {
        Verb::Create => req(
            Method::POST,
            format!("{base}/{parent}"),
            Some(create_body(rule.kind)),
            &parent,
        ),
        Verb::Get => req(Method::GET, format!("{base}/{target}"), None, &target),
        // Idempotent: nothing changes, so nothing more is checked.
        Verb::Update => req(
            Method::PATCH,
            format!("{base}/{target}"),
            Some(json!({ "description": "updated by the people matrix" })),
            &target,
        ),
        Verb::Delete | Verb::BatchDelete => {
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

/// One unary call on a people service client, with `token`.
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
        other => unreachable!("{other:?} is not a people kind"),
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
        other => unreachable!("{other:?} is not a people kind"),
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
    if v == Verb::Create && step(rule, c.caps_at(&r.at), &r.at) == Outcome::Ok {
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
                assert_eq!(
                    made.rsplit_once('/').map(|(p, _)| p),
                    Some(r.at.as_str()),
                    "{ctx}: created outside its parent: {resp}"
                );
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
            Verb::BatchDelete => assert_eq!(resp["names"], json!([r.victim]), "{ctx}: {resp}"),
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
        for rule in PEOPLE_RULES {
            if verb(rule) == Verb::List {
                let ctx = format!("[{}] {} as {}", s.backend, rule.rpc, c.relation);
                check_list(s, &ch, c, rule, &u, &ctx).await;
                *tally.entry((rule.rpc, Outcome::Ok.label())).or_default() += 1;
            } else {
                run_case(s, &fx, c, rule, &mut u, tally).await;
            }
        }
        // gRPC Gets agree with the prediction (and so with REST), granted or not.
        for rule in PEOPLE_RULES.iter().filter(|r| verb(r) == Verb::Get) {
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_matrix_follows_the_rpc_table() {
    assert_eq!(PEOPLE_RULES.len(), 14, "the people table changed");
    let mut tally = Tally::new();
    let mut backends = 0;
    for s in common::servers().await {
        matrix_on(&s, &mut tally).await;
        backends += 1;
    }
    assert!(backends >= 1, "no backend ran");
    eprintln!("people matrix on {backends} backends: {tally:?}");
    // Not vacuous: every single-resource rule succeeds and is refused as
    // unseen somewhere, and every write is refused to someone who sees.
    for rule in PEOPLE_RULES.iter().filter(|r| verb(r) != Verb::List) {
        for label in ["ok", "not found"] {
            assert!(
                tally.contains_key(&(rule.rpc, label)),
                "{} never {label}: {tally:?}",
                rule.rpc
            );
        }
        if verb(rule) != Verb::Get {
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
