//! Registry authorization, as a generated matrix: eight caller relations ×
//! every registry RPC and OCI action, on every backend. Outcomes are computed
//! from the built-in roles' capability sets and the rules below, never
//! written case by case.
//!
//! Fixture: organization A with a subgroup A/team, and organization B. Repo
//! `app` lives directly in A, `svc` in A/team, and another `app` in B. Each
//! holds one image (config + layer), pushed by digest and tagged `v1`.
//! Callers are root-level identities with one binding each (or none):
//! owner, editor, viewer, registry.pull and registry.push at A;
//! registry.pull at A/team only; owner of B only; no bindings.
//!
//! The rule, as derived from the code:
//!
//! - **caps(X)**: the union of the roles bound at X or at an ancestor of X
//!   (a UIDP prefix).
//! - **API** (`ward_core::rpc::REGISTRY_RULES`, `Ward::authorize`): the
//!   rule's capability at its scope (the repo's or tag's uid; the parent group
//!   for CreateRepo; the repo for CreateTag) → 200. Else, if caps there hold
//!   `rule.seen_with().0` (`repo.list`; `tag.list` for GetTag/DeleteTag;
//!   `groups.list` at the parent for CreateRepo) → 403 PERMISSION_DENIED.
//!   Else 404 NOT_FOUND whose ResourceInfo names `seen_with().1` at the scope.
//!   ListRepos/ListTags return exactly what `repo.list`/`tag.list` covers.
//! - **OCI** (`oci_target`, `check_access`, `oci_check`, `oci_push_repo`,
//!   `oci_put_manifest`), checked in this order:
//!   1. no binding at the organization or any group below it → 404
//!      NAME_UNKNOWN (whatever the repo);
//!   2. a registry token whose `access` lacks this repository and action →
//!      403 DENIED;
//!   3. an existing repo, caps at its uid: the first capability needed
//!      missing → 403 DENIED if caps hold `repo.list` or `repo.blobs.get`,
//!      else 404 NAME_UNKNOWN; a further one missing (`tag.create` for a
//!      push by tag) → 403 DENIED;
//!   4. a push to a repo that does not exist, caps at the organization: no
//!      `repo.create` → 403 DENIED if `repo.list` there, else 404
//!      NAME_UNKNOWN; otherwise the repo is created at the organization's
//!      root and (3) applies with `manifest.create`;
//!   5. `_catalog` lists `<org>/<name>` of the repos where `repo.list` holds;
//!      a registry token gets 403 DENIED.
//! - **Token endpoint**: for a repo in an organization where the caller is
//!   bound, `pull` iff `repo.blobs.get`, `push` iff `manifest.create`,
//!   `delete` iff `manifest.delete` at the repo; nothing otherwise. Such a
//!   token is refused by the API (401).

mod common;

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::{TestServer, assert_error, enc, uid};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use ward_core::capability::{CapSet, Capability as C, builtin_role};
use ward_core::clock::Clock as _;
use ward_core::rpc::{self, Rule, Scope};

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const OCI_LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
const OCTET: &str = "application/octet-stream";
const STATIC_ISS: &str = "https://static.example.com";

/// Checks per backend: 8 callers × (3 lists + 6 registry-token checks +
/// 20 cases × 2 repos + 1 push to a new repo), plus 6 pull-token checks.
const EXPECTED_CHECKS: usize = 8 * (3 + 6 + 20 * 2 + 1) + 6;

// ---------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    GetRepo,
    UpdateRepo,
    GetReadme,
    UpdateReadme,
    GetArchitectures,
    GetSize,
    GetTag,
    CreateTag,
    DeleteTag,
    DeleteRepo,
    CreateRepo,
    PullManifest,
    HeadBlob,
    GetBlob,
    TagsList,
    Referrers,
    PushBlob,
    PushTagged,
    DeleteOciTag,
    DeleteManifest,
    PushNewRepo,
}

/// What a case needs, and where.
#[derive(Clone, Copy)]
enum Need {
    /// An API RPC: its rule (capability, scope, visibility).
    Api(Rule),
    /// An OCI request on an existing repo: these capabilities at the repo.
    Oci(&'static [C]),
    /// A push creating a repo: `repo.create` at the organization, then
    /// `manifest.create` at the new repo.
    OciNewRepo,
}

struct Case {
    name: &'static str,
    op: Op,
    need: Need,
}

const fn api(name: &'static str, op: Op, rule: Rule) -> Case {
    Case {
        name,
        op,
        need: Need::Api(rule),
    }
}

const fn oci(name: &'static str, op: Op, caps: &'static [C]) -> Case {
    Case {
        name,
        op,
        need: Need::Oci(caps),
    }
}

/// Run against each of A/app and A/team/svc (the push to a new repo, once,
/// in A). Requests are built in `prepare`.
const CASES: &[Case] = &[
    api("GetRepo", Op::GetRepo, rpc::GET_REPO),
    api("UpdateRepo", Op::UpdateRepo, rpc::UPDATE_REPO),
    api("GetRepoReadme", Op::GetReadme, rpc::GET_REPO_README),
    api("UpdateRepoReadme", Op::UpdateReadme, rpc::UPDATE_REPO_README),
    api("GetArchitectures", Op::GetArchitectures, rpc::GET_ARCHITECTURES),
    api("GetSize", Op::GetSize, rpc::GET_SIZE),
    api("GetTag", Op::GetTag, rpc::GET_TAG),
    api("CreateTag", Op::CreateTag, rpc::CREATE_TAG),
    api("DeleteTag", Op::DeleteTag, rpc::DELETE_TAG),
    api("DeleteRepo", Op::DeleteRepo, rpc::DELETE_REPO),
    api("CreateRepo", Op::CreateRepo, rpc::CREATE_REPO),
    oci("GET manifest", Op::PullManifest, &[C::ManifestList]),
    oci("HEAD blob", Op::HeadBlob, &[C::RepoBlobsGet]),
    oci("GET blob", Op::GetBlob, &[C::RepoBlobsGet]),
    oci("GET tags/list", Op::TagsList, &[C::TagList]),
    oci("GET referrers", Op::Referrers, &[C::ReferrersList]),
    oci("POST blob", Op::PushBlob, &[C::ManifestCreate]),
    oci(
        "PUT manifest by tag",
        Op::PushTagged,
        &[C::ManifestCreate, C::TagCreate],
    ),
    oci("DELETE tag", Op::DeleteOciTag, &[C::TagDelete]),
    oci("DELETE manifest", Op::DeleteManifest, &[C::ManifestDelete]),
    Case {
        name: "push to a new repo",
        op: Op::PushNewRepo,
        need: Need::OciNewRepo,
    },
];

fn writes(op: Op) -> bool {
    use Op::*;
    matches!(
        op,
        UpdateRepo
            | UpdateReadme
            | CreateTag
            | DeleteTag
            | DeleteRepo
            | CreateRepo
            | PushBlob
            | PushTagged
            | DeleteOciTag
            | DeleteManifest
            | PushNewRepo
    )
}

fn ok_status(op: Op) -> u16 {
    match op {
        Op::PushBlob | Op::PushTagged | Op::PushNewRepo => 201,
        Op::DeleteOciTag | Op::DeleteManifest => 202,
        _ => 200,
    }
}

#[derive(Clone, Copy)]
enum Place {
    A,
    Team,
    B,
}

/// Caller relations: (place, built-in role) bindings.
const RELATIONS: &[(&str, &[(Place, &str)])] = &[
    ("owner of A", &[(Place::A, "owner")]),
    ("editor at A", &[(Place::A, "editor")]),
    ("viewer at A", &[(Place::A, "viewer")]),
    ("registry.pull at A", &[(Place::A, "registry.pull")]),
    ("registry.push at A", &[(Place::A, "registry.push")]),
    ("registry.pull at A/team only", &[(Place::Team, "registry.pull")]),
    ("owner of B only", &[(Place::B, "owner")]),
    ("no bindings", &[]),
];

// ---------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Ok,
    Denied,
    NotFound,
    /// A registry token that lacks the action: 401 `insufficient_scope`,
    /// so the client asks for a token with it.
    Rechallenged,
}

/// Whether a binding at `scope` covers `uid`: `uid` is `scope` or below it.
fn covers(scope: &str, uid: &str) -> bool {
    uid == scope || (uid.len() > scope.len() && uid.starts_with(scope) && uid.as_bytes()[scope.len()] == b'/')
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

    /// Bound at the organization or anywhere below it.
    fn in_org(&self, org: &str) -> bool {
        self.bindings.iter().any(|(g, _)| covers(org, g))
    }
}

fn predict_api(rule: &Rule, caps: CapSet) -> Outcome {
    if caps.contains(rule.capability) {
        Outcome::Ok
    } else if caps.contains(rule.seen_with().0) {
        Outcome::Denied
    } else {
        Outcome::NotFound
    }
}

/// Steps 1 and 3 of the OCI rule, with `caps` at the repo.
fn predict_oci(c: &Caller, org: &str, caps: CapSet, needs: &[C]) -> Outcome {
    if !c.in_org(org) {
        Outcome::NotFound
    } else if !caps.contains(needs[0]) {
        if caps.contains(C::RepoList) || caps.contains(C::RepoBlobsGet) {
            Outcome::Denied
        } else {
            Outcome::NotFound
        }
    } else if needs.iter().all(|n| caps.contains(*n)) {
        Outcome::Ok
    } else {
        Outcome::Denied
    }
}

fn predict(c: &Caller, need: Need, repo: &Repo, at: &str) -> Outcome {
    match need {
        Need::Api(rule) => predict_api(&rule, c.caps_at(at)),
        Need::Oci(needs) => predict_oci(c, &repo.org, c.caps_at(&repo.uid), needs),
        Need::OciNewRepo => {
            let caps = c.caps_at(&repo.org);
            if c.in_org(&repo.org) && !caps.contains(C::RepoCreate) {
                if caps.contains(C::RepoList) {
                    Outcome::Denied
                } else {
                    Outcome::NotFound
                }
            } else {
                // Created at the organization's root: caps there are the repo's.
                predict_oci(c, &repo.org, caps, &[C::ManifestCreate])
            }
        }
    }
}

// ---------------------------------------------------------------------------
// HTTP
// ---------------------------------------------------------------------------

#[derive(Clone)]
enum Cred {
    Bearer(String),
    Basic(String, String),
}

struct Reply {
    status: u16,
    body: Value,
    text: String,
}

async fn send(
    s: &TestServer,
    cred: &Cred,
    method: Method,
    path: &str,
    ct: Option<&str>,
    body: Option<Vec<u8>>,
) -> Reply {
    let mut rb = s.http.request(method.clone(), format!("{}{path}", s.base));
    rb = match cred {
        Cred::Bearer(t) => rb.bearer_auth(t),
        Cred::Basic(u, p) => rb.basic_auth(u, Some(p)),
    };
    if let Some(ct) = ct {
        rb = rb.header("Content-Type", ct);
    }
    if let Some(b) = body {
        rb = rb.body(b);
    }
    let resp = rb
        .send()
        .await
        .unwrap_or_else(|e| panic!("[{}] {method} {path}: {e}", s.backend));
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("body read");
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Reply { status, body, text }
}

fn sha256(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(&Sha256::digest(data)[..]))
}

fn random_bytes(n: usize) -> Vec<u8> {
    (0..n).map(|_| rand::random::<u8>()).collect()
}

fn desc(media_type: &str, data: &[u8]) -> Value {
    json!({ "mediaType": media_type, "digest": sha256(data), "size": data.len() })
}

/// An image manifest over `config` and `layer`; `nonce` makes it distinct.
fn manifest(config: &[u8], layer: &[u8], nonce: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": desc(OCI_CONFIG, config),
        "layers": [desc(OCI_LAYER, layer)],
        "annotations": { "nonce": nonce },
    }))
    .unwrap()
}

async fn post_blob(s: &TestServer, cred: &Cred, name: &str, data: &[u8]) -> Reply {
    let path = format!("/v2/{name}/blobs/uploads/?digest={}", enc(&sha256(data)));
    send(s, cred, Method::POST, &path, Some(OCTET), Some(data.to_vec())).await
}

async fn put_manifest(s: &TestServer, cred: &Cred, name: &str, reference: &str, bytes: Vec<u8>) -> Reply {
    let path = format!("/v2/{name}/manifests/{reference}");
    send(s, cred, Method::PUT, &path, Some(OCI_MANIFEST), Some(bytes)).await
}

fn expect(ctx: &str, r: &Reply, status: u16) {
    assert_eq!(r.status, status, "{ctx}: {}", r.text);
}

fn oci_code(r: &Reply) -> &str {
    r.body["errors"][0]["code"].as_str().unwrap_or("")
}

fn assert_oci(ctx: &str, expected: Outcome, ok: u16, head: bool, r: &Reply) {
    let (status, code) = match expected {
        Outcome::Ok => (ok, ""),
        Outcome::Denied => (403, "DENIED"),
        Outcome::NotFound => (404, "NAME_UNKNOWN"),
        Outcome::Rechallenged => (401, "UNAUTHORIZED"),
    };
    assert_eq!(r.status, status, "{ctx}: expected {expected:?}; {}", r.text);
    if !code.is_empty() && !head {
        assert_eq!(oci_code(r), code, "{ctx}: {}", r.text);
    }
}

fn assert_api(ctx: &str, rule: &Rule, at: &str, expected: Outcome, status: StatusCode, body: &Value) {
    match expected {
        Outcome::Ok => assert_eq!(status, StatusCode::OK, "{ctx}: expected success; {body}"),
        Outcome::Denied => assert_error(ctx, status, body, 403, 7, "PERMISSION_DENIED"),
        Outcome::Rechallenged => unreachable!("{ctx}: only registry tokens are re-challenged"),
        Outcome::NotFound => {
            assert_error(ctx, status, body, 404, 5, "NOT_FOUND");
            let info = body["details"]
                .as_array()
                .and_then(|d| {
                    d.iter()
                        .find(|d| d["@type"] == "type.googleapis.com/google.rpc.ResourceInfo")
                })
                .unwrap_or_else(|| panic!("{ctx}: no ResourceInfo in {body}"));
            assert_eq!(info["resourceType"], rule.seen_with().1, "{ctx}: {body}");
            assert_eq!(info["resourceName"], at, "{ctx}: {body}");
        }
    }
}

/// The (unverified) claims of a JWT.
fn jwt_claims(token: &str) -> Value {
    let part = token.split('.').nth(1).expect("JWT payload");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).expect("base64url")).expect("JSON claims")
}

// ---------------------------------------------------------------------------
// Fixture
// ---------------------------------------------------------------------------

struct Repo {
    label: &'static str,
    org: String,
    /// The group it lives in.
    group: String,
    uid: String,
    /// `<org uid>/<name>`.
    oci: String,
    config: Vec<u8>,
    layer: Vec<u8>,
    /// The image's manifest digest, tagged `v1`.
    digest: String,
    tag_uid: String,
}

struct Fixture {
    a: String,
    team: String,
    b: String,
    /// A/app and A/team/svc: the matrix's targets.
    repos: Vec<Repo>,
    /// B/app.
    other: Repo,
}

impl Fixture {
    fn place(&self, p: Place) -> &str {
        match p {
            Place::A => &self.a,
            Place::Team => &self.team,
            Place::B => &self.b,
        }
    }
}

/// Creates a tag with the admin token; returns its uid.
async fn admin_tag(s: &TestServer, repo_uid: &str, name: &str, digest: &str) -> String {
    let (status, body) = s
        .post(
            &format!("/registry/v2/tags/{repo_uid}"),
            json!({ "name": name, "digest": digest }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "[{}] admin tag {name}: {body}", s.backend);
    uid(&body)
}

/// Creates a repo with the admin token; returns its uid.
async fn admin_repo(s: &TestServer, group: &str, name: &str) -> String {
    let (status, body) = s
        .post(&format!("/registry/v2/repos/{group}"), json!({ "name": name }))
        .await;
    assert_eq!(status, StatusCode::OK, "[{}] admin repo {name}: {body}", s.backend);
    uid(&body)
}

async fn make_repo(s: &TestServer, label: &'static str, org: &str, group: &str, name: &str) -> Repo {
    let ctx = format!("[{}] fixture {label}", s.backend);
    let uid = admin_repo(s, group, name).await;
    let oci = format!("{org}/{name}");
    let admin = Cred::Bearer(s.token.clone());
    let config = serde_json::to_vec(&json!({
        "architecture": "amd64", "os": "linux", "rootfs": { "type": "layers", "diff_ids": [] },
    }))
    .unwrap();
    let layer = random_bytes(256);
    expect(&ctx, &post_blob(s, &admin, &oci, &config).await, 201);
    expect(&ctx, &post_blob(s, &admin, &oci, &layer).await, 201);
    let m = manifest(&config, &layer, label);
    let digest = sha256(&m);
    expect(&ctx, &put_manifest(s, &admin, &oci, &digest, m).await, 201);
    let tag_uid = admin_tag(s, &uid, "v1", &digest).await;
    Repo {
        label,
        org: org.to_owned(),
        group: group.to_owned(),
        uid,
        oci,
        config,
        layer,
        digest,
        tag_uid,
    }
}

async fn build_fixture(s: &TestServer) -> Fixture {
    let a = uid(&s.create_group(None, "org-a").await);
    let team = uid(&s.create_group(Some(&a), "team").await);
    let b = uid(&s.create_group(None, "org-b").await);
    let app = make_repo(s, "A/app", &a, &a, "app").await;
    let svc = make_repo(s, "A/team/svc", &a, &team, "svc").await;
    let other = make_repo(s, "B/app", &b, &b, "app").await;
    Fixture {
        a,
        team,
        b,
        repos: vec![app, svc],
        other,
    }
}

/// A root-level identity made in the store (as authz.rs does).
async fn root_identity(s: &TestServer, name: &str) -> String {
    let now = s.clock.now_millis();
    let uid = ward_core::uidp::Uidp::new_root().as_str().to_owned();
    let record = ward_store::IdentityRecord {
        uid: uid.clone(),
        parent_uid: None,
        name: name.to_owned(),
        description: String::new(),
        company: String::new(),
        relationship_type: 1,
        relationship: json!({"issuer": "https://people.example.com", "subject": name}).to_string(),
        issuer: "https://people.example.com".into(),
        subject: name.to_owned(),
        last_seen_time: None,
        create_time: now,
        update_time: now,
    };
    s.ward()
        .store
        .create_identity(&record, ward_store::testing::emit())
        .await
        .expect("root identity");
    uid
}

async fn admin_bind(s: &TestServer, group: &str, identity: &str, role: &str) {
    let role_uid = builtin_role(role)
        .unwrap_or_else(|| panic!("no built-in role {role}"))
        .uid();
    let (status, body) = s
        .post(
            &format!("/iam/v2/roleBindings/{group}"),
            json!({ "identityUid": identity, "roleUid": role_uid }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "[{}] bind {role}: {body}", s.backend);
}

async fn make_callers(s: &TestServer, fx: &Fixture) -> Vec<Caller> {
    let mut callers = Vec::new();
    for (i, (relation, bindings)) in RELATIONS.iter().enumerate() {
        let identity = root_identity(s, &format!("caller-{i}")).await;
        let mut model = Vec::new();
        for (place, role) in *bindings {
            admin_bind(s, fx.place(*place), &identity, role).await;
            model.push((fx.place(*place).to_owned(), builtin_role(role).unwrap().caps()));
        }
        let token = s.ward().tokens.mint(&identity).expect("mint a token");
        callers.push(Caller {
            relation,
            token,
            bindings: model,
        });
    }
    callers
}

// ---------------------------------------------------------------------------
// Lists, registry tokens and pull tokens
// ---------------------------------------------------------------------------

/// One page (page_size=100) of an API listing: the uids, checked against
/// `totalCount` and a single page.
async fn list_uids(s: &TestServer, token: &str, path: &str, key: &str, ctx: &str) -> BTreeSet<String> {
    let (status, page) = s.call_as(token, Method::GET, path, None).await;
    assert_eq!(status, StatusCode::OK, "{ctx}: {page}");
    assert_eq!(
        page["nextPageToken"].as_str().unwrap_or(""),
        "",
        "{ctx}: one page: {page}"
    );
    let items: Vec<String> = page[key].as_array().into_iter().flatten().map(uid).collect();
    let total = match &page["totalCount"] {
        Value::String(t) => t.parse::<usize>().expect("decimal totalCount"),
        t => t.as_u64().expect("totalCount") as usize,
    };
    assert_eq!(total, items.len(), "{ctx}: totalCount: {page}");
    let set: BTreeSet<String> = items.iter().cloned().collect();
    assert_eq!(set.len(), items.len(), "{ctx}: duplicates: {page}");
    set
}

/// ListRepos, ListTags and `_catalog`, before the matrix changes anything.
async fn check_lists(s: &TestServer, fx: &Fixture, c: &Caller) -> usize {
    let all: Vec<&Repo> = fx.repos.iter().chain([&fx.other]).collect();
    let ctx = format!("[{}] lists as {}", s.backend, c.relation);
    let sees = |cap: C, uid: &str| c.caps_at(uid).contains(cap);
    let want: BTreeSet<String> = all
        .iter()
        .filter(|r| sees(rpc::LIST_REPOS.capability, r.uid.as_str()))
        .map(|r| r.uid.clone())
        .collect();
    let got = list_uids(s, &c.token, "/registry/v2/repos?page_size=100", "repos", &ctx).await;
    assert_eq!(got, want, "{ctx}: ListRepos");
    let want: BTreeSet<String> = all
        .iter()
        .filter(|r| sees(rpc::LIST_TAGS.capability, r.tag_uid.as_str()))
        .map(|r| r.tag_uid.clone())
        .collect();
    let got = list_uids(s, &c.token, "/registry/v2/tags?page_size=100", "tags", &ctx).await;
    assert_eq!(got, want, "{ctx}: ListTags");
    let want: Vec<String> = all
        .iter()
        .filter(|r| sees(C::RepoList, r.uid.as_str()))
        .map(|r| r.oci.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let r = send(
        s,
        &Cred::Bearer(c.token.clone()),
        Method::GET,
        "/v2/_catalog",
        None,
        None,
    )
    .await;
    expect(&ctx, &r, 200);
    let got: Vec<String> = r.body["repositories"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    assert_eq!(got, want, "{ctx}: _catalog: {}", r.text);
    3
}

/// A registry token for `A/app` with every action asked for: it holds what
/// the caller may do there, works for that only, and nowhere on the API.
async fn check_registry_token(s: &TestServer, fx: &Fixture, c: &Caller) -> usize {
    let (app, svc) = (&fx.repos[0], &fx.repos[1]);
    let ctx = format!("[{}] registry token as {}", s.backend, c.relation);
    let host = s.base.trim_start_matches("http://");
    let scope = format!("repository:{}:pull,push,delete", app.oci);
    let path = format!("/token?service={}&scope={}", enc(host), enc(&scope));
    let r = send(
        s,
        &Cred::Basic("_token".into(), c.token.clone()),
        Method::GET,
        &path,
        None,
        None,
    )
    .await;
    expect(&ctx, &r, 200);
    let token = r.body["token"].as_str().expect("token").to_owned();
    let caps = c.caps_at(&app.uid);
    let granted: Vec<&str> = [
        ("pull", C::RepoBlobsGet),
        ("push", C::ManifestCreate),
        ("delete", C::ManifestDelete),
    ]
    .into_iter()
    .filter(|(_, cap)| c.in_org(&app.org) && caps.contains(*cap))
    .map(|(a, _)| a)
    .collect();
    let want = if granted.is_empty() {
        json!([])
    } else {
        json!([{ "type": "repository", "name": app.oci, "actions": granted }])
    };
    assert_eq!(jwt_claims(&token)["access"], want, "{ctx}: access claim");

    let rt = Cred::Bearer(token.clone());
    let refused = if c.in_org(&app.org) {
        Outcome::Rechallenged
    } else {
        Outcome::NotFound
    };
    let pick = |action: &str| {
        if granted.contains(&action) {
            Outcome::Ok
        } else {
            refused
        }
    };
    let layer = sha256(&app.layer);
    let r = send(
        s,
        &rt,
        Method::GET,
        &format!("/v2/{}/blobs/{layer}", app.oci),
        None,
        None,
    )
    .await;
    assert_oci(&format!("{ctx}: pull"), pick("pull"), 200, false, &r);
    let r = post_blob(s, &rt, &app.oci, &random_bytes(32)).await;
    assert_oci(&format!("{ctx}: push"), pick("push"), 201, false, &r);
    let other_layer = sha256(&svc.layer);
    let r = send(
        s,
        &rt,
        Method::GET,
        &format!("/v2/{}/blobs/{other_layer}", svc.oci),
        None,
        None,
    )
    .await;
    assert_oci(&format!("{ctx}: another repo of A"), refused, 200, false, &r);
    let r = send(s, &rt, Method::GET, "/v2/_catalog", None, None).await;
    assert_oci(&format!("{ctx}: _catalog"), Outcome::Rechallenged, 200, false, &r);
    let (status, body) = s.call_as(&token, Method::GET, "/registry/v2/repos", None).await;
    assert_eq!(status.as_u16(), 401, "{ctx}: the API refuses registry tokens: {body}");
    6
}

/// A pull token: Basic `<identity uid>:<identity token>` for a static-keys
/// identity in A bound `registry.pull` at A.
async fn check_pull_token(s: &TestServer, fx: &Fixture) -> usize {
    let ctx = format!("[{}] pull token", s.backend);
    let key = ward_auth::generate_key(0).expect("an Ed25519 key");
    let jwks = json!({ "keys": [{
        "kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig",
        "kid": key.kid, "x": URL_SAFE_NO_PAD.encode(&key.public_key),
    }] })
    .to_string();
    let (status, id) = s
        .post(
            &format!("/iam/v2/identities/{}", fx.a),
            json!({ "name": "puller", "staticKeys": { "issuer": STATIC_ISS, "subject": "puller", "issuerKeys": jwks } }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{ctx}: create identity: {id}");
    let robot = uid(&id);
    admin_bind(s, &fx.a, &robot, "registry.pull").await;
    let now = s.clock.now_secs();
    let claims = json!({ "iss": STATIC_ISS, "sub": "puller", "aud": s.base, "iat": now, "nbf": now, "exp": now + 600 });
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some(key.kid.clone());
    let upstream = jsonwebtoken::encode(&header, &claims, &EncodingKey::from_ed_der(&key.private_key)).expect("sign");
    let cred = Cred::Basic(robot.clone(), upstream);
    let (app, svc) = (&fx.repos[0], &fx.repos[1]);
    for repo in [app, svc] {
        let r = send(
            s,
            &cred,
            Method::GET,
            &format!("/v2/{}/manifests/v1", repo.oci),
            None,
            None,
        )
        .await;
        assert_oci(&format!("{ctx}: pull {}", repo.label), Outcome::Ok, 200, false, &r);
    }
    let r = post_blob(s, &cred, &app.oci, &random_bytes(32)).await;
    assert_oci(&format!("{ctx}: push"), Outcome::Denied, 201, false, &r);
    let path = format!("/v2/{}/manifests/v1", fx.other.oci);
    let r = send(s, &cred, Method::GET, &path, None, None).await;
    assert_oci(&format!("{ctx}: org B"), Outcome::NotFound, 200, false, &r);
    let r = send(s, &cred, Method::GET, "/v2/_catalog", None, None).await;
    expect(&ctx, &r, 200);
    let mut want = vec![app.oci.clone(), svc.oci.clone()];
    want.sort();
    assert_eq!(r.body["repositories"], json!(want), "{ctx}: _catalog");
    let bad = Cred::Basic(robot, "not-a-token".into());
    let r = send(
        s,
        &bad,
        Method::GET,
        &format!("/v2/{}/manifests/v1", app.oci),
        None,
        None,
    )
    .await;
    assert_eq!(r.status, 401, "{ctx}: a bad identity token: {}", r.text);
    6
}

// ---------------------------------------------------------------------------
// The matrix
// ---------------------------------------------------------------------------

/// Something a request deletes: afterwards it exists iff the call was refused.
enum Victim {
    Repo(String),
    Tag(String),
    /// (OCI name, reference).
    Manifest(String, String),
}

async fn exists(s: &TestServer, v: &Victim) -> bool {
    let status = match v {
        Victim::Repo(u) => s.get(&format!("/registry/v2/repos/{u}")).await.0.as_u16(),
        Victim::Tag(u) => s.get(&format!("/registry/v2/tags/{u}")).await.0.as_u16(),
        Victim::Manifest(name, r) => {
            let admin = Cred::Bearer(s.token.clone());
            send(s, &admin, Method::GET, &format!("/v2/{name}/manifests/{r}"), None, None)
                .await
                .status
        }
    };
    assert!(status == 200 || status == 404, "[{}] admin check: {status}", s.backend);
    status == 200
}

enum Payload {
    Empty,
    Json(Value),
    Bytes(Vec<u8>, &'static str),
}

/// One request: what is sent, the scope the prediction is made at, and what
/// it would delete.
struct Req {
    method: Method,
    path: String,
    payload: Payload,
    at: String,
    victim: Option<Victim>,
}

fn req(method: Method, path: String, payload: Payload, at: &str) -> Req {
    Req {
        method,
        path,
        payload,
        at: at.to_owned(),
        victim: None,
    }
}

/// Builds `op` on `repo` for caller `ci` (names made unique by `ci` and
/// `ri`), creating with the admin token whatever it acts on.
async fn prepare(s: &TestServer, fx: &Fixture, repo: &Repo, ci: usize, ri: usize, op: Op) -> Req {
    use Payload::{Bytes, Empty, Json};
    use reqwest::Method as M;
    let admin = Cred::Bearer(s.token.clone());
    let ctx = format!("[{}] prepare {op:?}", s.backend);
    let rest = format!("/registry/v2/repos/{}", repo.uid);
    let v2 = format!("/v2/{}", repo.oci);
    let at = repo.uid.as_str();
    let blob = format!("{v2}/blobs/{}", sha256(&repo.layer));
    match op {
        Op::GetRepo => req(M::GET, rest, Empty, at),
        Op::UpdateRepo => req(M::PATCH, rest, Json(json!({ "description": format!("by {ci}") })), at),
        Op::GetReadme => req(M::GET, format!("{rest}/readme"), Empty, at),
        Op::UpdateReadme => req(
            M::PATCH,
            format!("{rest}/readme"),
            Json(json!({ "content": format!("# by {ci}") })),
            at,
        ),
        Op::GetArchitectures => req(
            M::GET,
            format!("{rest}/digests/{}/architectures", repo.digest),
            Empty,
            at,
        ),
        Op::GetSize => req(M::GET, format!("{rest}/digests/{}/size", repo.digest), Empty, at),
        Op::GetTag => req(
            M::GET,
            format!("/registry/v2/tags/{}", repo.tag_uid),
            Empty,
            &repo.tag_uid,
        ),
        Op::CreateTag => req(
            M::POST,
            format!("/registry/v2/tags/{}", repo.uid),
            Json(json!({ "name": format!("ct{ci}"), "digest": repo.digest })),
            at,
        ),
        Op::DeleteTag => {
            let t = admin_tag(s, &repo.uid, &format!("dt{ci}"), &repo.digest).await;
            let mut r = req(M::DELETE, format!("/registry/v2/tags/{t}"), Empty, &t);
            r.victim = Some(Victim::Tag(t));
            r
        }
        Op::DeleteRepo => {
            let u = admin_repo(s, &repo.group, &format!("tmp-{ci}-{ri}")).await;
            let mut r = req(M::DELETE, format!("/registry/v2/repos/{u}"), Empty, &u);
            r.victim = Some(Victim::Repo(u));
            r
        }
        Op::CreateRepo => req(
            M::POST,
            format!("/registry/v2/repos/{}", repo.group),
            Json(json!({ "name": format!("made-{ci}-{ri}") })),
            &repo.group,
        ),
        Op::PullManifest => req(M::GET, format!("{v2}/manifests/v1"), Empty, at),
        Op::HeadBlob => req(M::HEAD, blob, Empty, at),
        Op::GetBlob => req(M::GET, blob, Empty, at),
        Op::TagsList => req(M::GET, format!("{v2}/tags/list"), Empty, at),
        Op::Referrers => req(M::GET, format!("{v2}/referrers/{}", repo.digest), Empty, at),
        Op::PushBlob | Op::PushNewRepo => {
            let data = random_bytes(64);
            let (name, at) = if op == Op::PushNewRepo {
                (format!("{}/fresh-{ci}", fx.a), fx.a.as_str())
            } else {
                (repo.oci.clone(), at)
            };
            let path = format!("/v2/{name}/blobs/uploads/?digest={}", enc(&sha256(&data)));
            req(M::POST, path, Bytes(data, OCTET), at)
        }
        Op::PushTagged => {
            let m = manifest(&repo.config, &repo.layer, &format!("pt-{ci}-{ri}"));
            req(M::PUT, format!("{v2}/manifests/pt{ci}"), Bytes(m, OCI_MANIFEST), at)
        }
        Op::DeleteOciTag => {
            admin_tag(s, &repo.uid, &format!("ot{ci}"), &repo.digest).await;
            let mut r = req(M::DELETE, format!("{v2}/manifests/ot{ci}"), Empty, at);
            r.victim = Some(Victim::Manifest(repo.oci.clone(), format!("ot{ci}")));
            r
        }
        Op::DeleteManifest => {
            let m = manifest(&repo.config, &repo.layer, &format!("dm-{ci}-{ri}"));
            let d = sha256(&m);
            expect(&ctx, &put_manifest(s, &admin, &repo.oci, &d, m).await, 201);
            let mut r = req(M::DELETE, format!("{v2}/manifests/{d}"), Empty, at);
            r.victim = Some(Victim::Manifest(repo.oci.clone(), d));
            r
        }
    }
}

/// What a successful API call answers.
fn check_api_answer(ctx: &str, op: Op, at: &str, resp: &Value) {
    let got = resp["uid"].as_str().unwrap_or("");
    match op {
        Op::CreateRepo | Op::CreateTag => {
            assert_eq!(
                got.rsplit_once('/').map(|(p, _)| p),
                Some(at),
                "{ctx}: made elsewhere: {resp}"
            )
        }
        Op::DeleteRepo | Op::DeleteTag => assert_eq!(resp, &json!({}), "{ctx}: {resp}"),
        Op::GetArchitectures => assert_eq!(resp["architectures"], json!(["amd64"]), "{ctx}: {resp}"),
        Op::GetSize => assert_eq!(resp["architecture"], "amd64", "{ctx}: {resp}"),
        _ => assert_eq!(got, at, "{ctx}: answered another resource: {resp}"),
    }
}

type Tally = BTreeMap<(&'static str, Outcome), usize>;

async fn run_case(s: &TestServer, fx: &Fixture, c: &Caller, (ci, ri): (usize, usize), case: &Case, tally: &mut Tally) {
    let repo = &fx.repos[ri];
    let r = prepare(s, fx, repo, ci, ri, case.op).await;
    let expected = predict(c, case.need, repo, &r.at);
    *tally.entry((case.name, expected)).or_default() += 1;
    let ctx = format!(
        "[{}] {} as {} on {}: {} {}",
        s.backend, case.name, c.relation, repo.label, r.method, r.path
    );
    match case.need {
        Need::Api(rule) => {
            let body = match r.payload {
                Payload::Json(v) => Some(v),
                _ => None,
            };
            let (status, resp) = s.call_as(&c.token, r.method.clone(), &r.path, body).await;
            assert_api(&ctx, &rule, &r.at, expected, status, &resp);
            if expected == Outcome::Ok {
                check_api_answer(&ctx, case.op, &r.at, &resp);
            }
        }
        Need::Oci(_) | Need::OciNewRepo => {
            let (bytes, ct) = match r.payload {
                Payload::Bytes(b, ct) => (Some(b), Some(ct)),
                _ => (None, None),
            };
            let head = r.method == Method::HEAD;
            let resp = send(s, &Cred::Bearer(c.token.clone()), r.method.clone(), &r.path, ct, bytes).await;
            assert_oci(&ctx, expected, ok_status(case.op), head, &resp);
        }
    }
    if let Some(v) = &r.victim {
        let refused = expected != Outcome::Ok;
        assert_eq!(exists(s, v).await, refused, "{ctx}: still there iff refused");
    }
}

async fn matrix_on(s: &TestServer, tally: &mut Tally) -> usize {
    let fx = build_fixture(s).await;
    let callers = make_callers(s, &fx).await;
    let mut checks = 0;
    for c in &callers {
        checks += check_lists(s, &fx, c).await;
    }
    checks += check_pull_token(s, &fx).await;
    for c in &callers {
        checks += check_registry_token(s, &fx, c).await;
    }
    for (ci, c) in callers.iter().enumerate() {
        for ri in 0..fx.repos.len() {
            for case in CASES {
                // A new repo is pushed at the organization: once per caller.
                if matches!(case.need, Need::OciNewRepo) && ri > 0 {
                    continue;
                }
                run_case(s, &fx, c, (ci, ri), case, tally).await;
                checks += 1;
            }
        }
    }
    checks
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_matrix_follows_the_rules() {
    // The table covers every single-resource registry RPC.
    assert_eq!(rpc::REGISTRY_RULES.len(), 13, "the registry table changed");
    for rule in rpc::REGISTRY_RULES.iter().filter(|r| r.scope != Scope::Unscoped) {
        assert!(
            CASES
                .iter()
                .any(|c| matches!(c.need, Need::Api(r) if r.rpc == rule.rpc)),
            "{} has no case",
            rule.rpc
        );
    }
    assert_eq!(CASES.len(), 21);
    assert_eq!(RELATIONS.len(), 8);

    let mut tally = Tally::new();
    let mut backends = 0;
    for s in common::servers().await {
        let checks = matrix_on(&s, &mut tally).await;
        assert_eq!(checks, EXPECTED_CHECKS, "[{}] checks run", s.backend);
        backends += 1;
    }
    assert!(backends >= 1, "no backend ran");
    eprintln!("registry matrix: {EXPECTED_CHECKS} checks × {backends} backends; {tally:?}");
    // Not vacuous: every case succeeds and is refused as unseen somewhere,
    // and every write is also refused to someone who sees the repo.
    for case in CASES {
        for o in [Outcome::Ok, Outcome::NotFound] {
            assert!(
                tally.contains_key(&(case.name, o)),
                "{} never {o:?}: {tally:?}",
                case.name
            );
        }
        if writes(case.op) {
            assert!(
                tally.contains_key(&(case.name, Outcome::Denied)),
                "{} never denied: {tally:?}",
                case.name
            );
        }
    }
}
