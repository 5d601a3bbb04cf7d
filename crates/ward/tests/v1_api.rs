//! The v1 API (`/iam/v1/…`, `/registry/v1/…`, `/vulnerabilities/v1/…`,
//! `/advisory/v1/…`, `/ping/v1/…`) served as a translation at the edge onto
//! the v2 service layer, proven through the real server on every backend:
//!
//! 1. round trips for every v1 resource, both ways: created through v1 and
//!    read through v2 (`GET …/v2/…/{uid}`), and created through v2 and listed
//!    through v1 (`?id=` and the `uidp.*` filters), every shared field
//!    compared (id ⇄ uid, createdAt ⇄ createTime, dotted ⇄ enum capability
//!    names, v1 ⇄ v2 catalog tier numbers, …);
//! 2. one test per migration rule of reference §3.9: `id` not `uid`;
//!    `createdAt`/`updatedAt` not `createTime`/`updateTime`; lists are the
//!    whole result set as `{"items": […]}`; `PUT` is a full replacement;
//! 3. v1 over gRPC (groups, roles, registry repos) agreeing with REST;
//! 4. errors and bounds through v1 (unknown parameters, bad JSON, another
//!    organization's ids, no token, unknown paths, wrong methods, creating
//!    an organization with an empty parent);
//! 5. the public v1 endpoints without a token.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{Bearer, TestServer, assert_error, enc, field_violations, is_hex, person, uid, v1_id};
use reqwest::header::{ALLOW, CONTENT_TYPE, HeaderMap};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::Digest as _;
use tonic::Code;
use tonic::transport::Channel;
use ward_core::capability::Capability;
use ward_core::clock::Clock as _;
use ward_proto::common::UidpFilter;
use ward_proto::iam as iam1;
use ward_proto::iam::groups_client::GroupsClient;
use ward_proto::iam::roles_client::RolesClient;
use ward_proto::registry as reg1;
use ward_proto::registry::registry_client::RegistryClient;

// ---------------------------------------------------------------------------
// Paths and fixtures

const G1: &str = "/iam/v1/groups";
const G2: &str = "/iam/v2/groups";
const ID1: &str = "/iam/v1/identities";
const ID2: &str = "/iam/v2/identities";
const R1: &str = "/iam/v1/roles";
const R2: &str = "/iam/v2/roles";
const RB1: &str = "/iam/v1/rolebindings";
const RB2: &str = "/iam/v2/roleBindings";
const IDP1: &str = "/iam/v1/identityProviders";
const IDP2: &str = "/iam/v2/identityProviders";
const AA1: &str = "/iam/v1/account_associations";
const AA2: &str = "/iam/v2/accountAssociations";
const INV1: &str = "/iam/v1/group_invites";
const INV2: &str = "/iam/v2/groupInvites";
const MAP1: &str = "/iam/v1/externalGroupRoleMappings";
const MAP2: &str = "/iam/v2/externalGroupRoleMappings";
const TERMS1: &str = "/iam/v1/terms";
const TERMS2: &str = "/iam/v2/terms";
const REPO1: &str = "/registry/v1/repos";
const REPO2: &str = "/registry/v2/repos";
const TAG1: &str = "/registry/v1/tags";
const TAG2: &str = "/registry/v2/tags";
const ADV1: &str = "/vulnerabilities/v1/advisories";
const ADV2: &str = "/vulnerabilities/v2/advisories";
const EVENTS1: &str = "/vulnerabilities/v1/advisory_events";

/// An Ed25519 public key as a JWKS document (static-keys identities).
const JWKS: &str = r#"{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}"#;
/// The client secret of the identity providers made here: never returned.
const SECRET: &str = "V1-TOPSECRET-4242";
const GUID_A: &str = "0b6a1e3c-5d2f-4a7b-9c8d-1e2f3a4b5c6d";
const GUID_B: &str = "A1B2C3D4-E5F6-4789-ABCD-EF0123456789";
const DAY_MS: i64 = 24 * 60 * 60 * 1000;
const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// v1 CatalogTier names and the v2 names they translate to (the numbers
/// differ: v1 keeps 1-3 for retired tiers).
const TIERS: [(&str, &str); 7] = [
    ("UNKNOWN", "CATALOG_TIER_UNSPECIFIED"),
    ("APPLICATION", "CATALOG_TIER_APPLICATION"),
    ("BASE", "CATALOG_TIER_BASE"),
    ("FIPS", "CATALOG_TIER_FIPS"),
    ("AI", "CATALOG_TIER_AI"),
    ("DEVTOOLS", "CATALOG_TIER_DEVTOOLS"),
    ("COMMERCIAL", "CATALOG_TIER_COMMERCIAL"),
];

// ---------------------------------------------------------------------------
// Requests

/// A request as `token` that must answer 200: its JSON.
async fn ok_as(s: &TestServer, token: &str, method: Method, path: &str, body: Option<Value>) -> Value {
    let (status, reply) = s.call_as(token, method.clone(), path, body).await;
    assert_eq!(status, StatusCode::OK, "[{}] {method} {path}: {reply}", s.backend);
    reply
}

/// A request as the admin that must answer 200: its JSON.
async fn ok(s: &TestServer, method: Method, path: &str, body: Option<Value>) -> Value {
    ok_as(s, &s.token, method, path, body).await
}

async fn get(s: &TestServer, path: &str) -> Value {
    ok(s, Method::GET, path, None).await
}

async fn post(s: &TestServer, path: &str, body: Value) -> Value {
    ok(s, Method::POST, path, Some(body)).await
}

async fn put(s: &TestServer, path: &str, body: Value) -> Value {
    ok(s, Method::PUT, path, Some(body)).await
}

/// A raw request (any body bytes, optional token): status, headers, JSON.
async fn raw(
    s: &TestServer,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> (StatusCode, HeaderMap, Value) {
    let mut req = s.http.request(method, format!("{}{path}", s.base));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(b) = body {
        req = req.header(CONTENT_TYPE, "application/json").body(b.to_owned());
    }
    let resp = req.send().await.expect("request sent");
    let (status, headers) = (resp.status(), resp.headers().clone());
    let text = resp.text().await.expect("body read");
    let json = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, headers, json)
}

/// A v1 List as `token`: the reply must be exactly `{"items": […]}` (no
/// `nextPageToken`, no `totalCount`); its items, each checked for v1 names.
async fn v1_list_as(s: &TestServer, token: &str, path: &str) -> Vec<Value> {
    let body = ok_as(s, token, Method::GET, path, None).await;
    let ctx = format!("[{}] GET {path}", s.backend);
    let keys: Vec<&str> = body
        .as_object()
        .unwrap_or_else(|| panic!("{ctx}: not an object: {body}"))
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["items"], "{ctx}: a v1 list is only its items: {body}");
    assert_v1_names(&ctx, &body);
    body["items"].as_array().cloned().unwrap_or_default()
}

async fn v1_list(s: &TestServer, path: &str) -> Vec<Value> {
    v1_list_as(s, &s.token, path).await
}

/// The one item a v1 List returns.
async fn v1_one(s: &TestServer, path: &str) -> Value {
    let items = v1_list(s, path).await;
    assert_eq!(items.len(), 1, "[{}] GET {path}: one item: {items:?}", s.backend);
    items[0].clone()
}

/// Deletes `id` through the v1 collection at `v1_path`: the v2 collection
/// at `v2_path` then answers NOT_FOUND for it.
async fn delete_through_v1(s: &TestServer, v1_path: &str, v2_path: &str, id: &str) {
    ok(s, Method::DELETE, &format!("{v1_path}/{id}"), None).await;
    let (status, body) = s.get(&format!("{v2_path}/{id}")).await;
    assert_error(s.backend, status, &body, 404, 5, "NOT_FOUND");
}

/// One v2 page holding the whole listing (`pageSize=200`): its `key` items.
async fn v2_all(s: &TestServer, path: &str, key: &str) -> Vec<Value> {
    let sep = if path.contains('?') { '&' } else { '?' };
    let page = get(s, &format!("{path}{sep}pageSize=200")).await;
    assert_eq!(
        page["nextPageToken"], "",
        "[{}] GET {path}: one page: {page}",
        s.backend
    );
    page[key]
        .as_array()
        .unwrap_or_else(|| panic!("[{}] GET {path}: no {key}: {page}", s.backend))
        .clone()
}

// ---------------------------------------------------------------------------
// JSON

/// `v[k]`, absent and null alike.
fn field<'a>(v: &'a Value, k: &str) -> Option<&'a Value> {
    v.get(k).filter(|x| !x.is_null())
}

fn s_of<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str().unwrap_or_else(|| panic!("no string {k} in {v}"))
}

/// The key a v1 resource is named by (`id`; `group` for account associations).
fn v1_key(v: &Value) -> String {
    field(v, "id")
        .or_else(|| field(v, "group"))
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no id in {v}"))
        .to_owned()
}

fn v1_keys(items: &[Value]) -> Vec<String> {
    let mut v: Vec<String> = items.iter().map(v1_key).collect();
    v.sort();
    v
}

fn v2_uids(items: &[Value]) -> Vec<String> {
    let mut v: Vec<String> = items.iter().map(uid).collect();
    v.sort();
    v
}

fn names(items: &[Value]) -> BTreeSet<String> {
    items.iter().map(|i| s_of(i, "name").to_owned()).collect()
}

/// `v1[a] == v2[b]` for each pair (absent and null alike).
fn assert_pairs(ctx: &str, v1: &Value, v2: &Value, pairs: &[(&str, &str)]) {
    for (a, b) in pairs {
        assert_eq!(
            field(v1, a),
            field(v2, b),
            "{ctx}: v1 {a} vs v2 {b}\n  v1: {v1}\n  v2: {v2}"
        );
    }
}

/// The v1 `id` (or `key`) is the v2 `uid`, and is set.
fn assert_id(ctx: &str, v1: &Value, v2: &Value, key: &str) {
    let id = v1[key].as_str().unwrap_or_default();
    assert!(!id.is_empty(), "{ctx}: v1 has an {key}: {v1}");
    assert_eq!(
        Some(id),
        v2["uid"].as_str(),
        "{ctx}: v1 {key} is v2 uid\n  v1: {v1}\n  v2: {v2}"
    );
}

/// Keys only v2 uses (rules a and b): a v1 reply has none of them anywhere.
/// `createTime` is allowed where v1 itself has it: a registry Repo (the one
/// v1 message with a `catalogTier`).
fn v2_only_keys(v: &Value, path: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            let repo = m.contains_key("catalogTier");
            for (k, x) in m {
                let here = format!("{path}.{k}");
                let v2_style = k == "uid"
                    || k.ends_with("Uid")
                    || k == "updateTime"
                    || k == "expirationTime"
                    || k == "lastSeenTime"
                    || k == "staticKeys"
                    || (k == "createTime" && !repo);
                if v2_style {
                    out.push(here.clone());
                }
                v2_only_keys(x, &here, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                v2_only_keys(x, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// Rules (a) and (b) on one v1 reply: no `uid`, no `…Uid`, no v2 time names.
fn assert_v1_names(ctx: &str, v: &Value) {
    let mut bad = Vec::new();
    v2_only_keys(v, "", &mut bad);
    assert!(bad.is_empty(), "{ctx}: v2 names in a v1 reply: {bad:?}\n  {v}");
}

/// A v2 reply has no v1 names (`id` at the top, `createdAt`, `updatedAt`).
fn assert_v2_names(ctx: &str, v: &Value) {
    for k in ["id", "createdAt", "updatedAt", "items"] {
        assert!(v.get(k).is_none(), "{ctx}: v1 name {k} in a v2 reply: {v}");
    }
}

/// An RFC 3339 time `offset_ms` from the server's now, as Ward writes it.
fn ts(s: &TestServer, offset_ms: i64) -> String {
    let t = ward_proto::Timestamp::from_millis(s.clock.now_millis() + offset_ms);
    serde_json::to_value(t)
        .expect("timestamp json")
        .as_str()
        .expect("string")
        .to_owned()
}

/// The uid of the built-in role `name`.
fn builtin(name: &str) -> String {
    ward_core::capability::builtin_role(name)
        .unwrap_or_else(|| panic!("no built-in role {name}"))
        .uid()
}

/// v2 capability enum names as v1 dotted names (reference §5.4).
fn dotted(caps: &Value) -> Value {
    caps.as_array()
        .unwrap_or_else(|| panic!("capabilities: {caps}"))
        .iter()
        .map(|c| {
            let name = c.as_str().unwrap_or_default();
            let cap = Capability::from_name(name).unwrap_or_else(|| panic!("not a capability: {name}"));
            json!(cap.dotted_name())
        })
        .collect()
}

/// The v2 tier name of a v1 tier name.
fn tier_v2(v1: &Value) -> Value {
    let name = v1.as_str().unwrap_or_else(|| panic!("tier: {v1}"));
    let (_, v2) = TIERS
        .iter()
        .find(|(a, _)| *a == name)
        .unwrap_or_else(|| panic!("not a v1 tier: {name}"));
    json!(v2)
}

/// Asserts `child` is `parent/` + 16 lowercase hex digits.
fn assert_child(ctx: &str, parent: &str, child: &str) {
    let seg = child
        .strip_prefix(parent)
        .and_then(|r| r.strip_prefix('/'))
        .unwrap_or_else(|| panic!("{ctx}: {child} is not under {parent}"));
    assert!(is_hex(seg, 16), "{ctx}: {child} is {parent}/<16 hex>");
}

// ---------------------------------------------------------------------------
// v1 ⇄ v2 agreement, per resource

fn assert_group_same(ctx: &str, v1: &Value, v2: &Value) {
    assert_id(ctx, v1, v2, "id");
    assert_pairs(
        ctx,
        v1,
        v2,
        &[
            ("name", "name"),
            ("description", "description"),
            ("verified", "verified"),
            ("kind", "kind"),
            ("status", "status"),
        ],
    );
    // v1 reports the three documented limits (0 when v2 has none) and v2's own.
    let lim = v1["resourceLimits"]
        .as_object()
        .unwrap_or_else(|| panic!("{ctx}: resourceLimits: {v1}"));
    for k in ["clusters", "idps", "repositories"] {
        assert!(lim.contains_key(k), "{ctx}: resourceLimits.{k}: {v1}");
    }
    for (k, n) in v2["resourceLimits"].as_object().into_iter().flatten() {
        assert_eq!(lim.get(k), Some(n), "{ctx}: resourceLimits.{k}: {v1} vs {v2}");
    }
}

fn assert_identity_same(ctx: &str, v1: &Value, v2: &Value) {
    assert_id(ctx, v1, v2, "id");
    assert_pairs(
        ctx,
        v1,
        v2,
        &[
            ("name", "name"),
            ("description", "description"),
            ("createdAt", "createTime"),
            ("updatedAt", "updateTime"),
            ("lastSeen", "lastSeenTime"),
            ("claimMatch", "claimMatch"),
        ],
    );
    assert!(field(v1, "createdAt").is_some(), "{ctx}: createdAt: {v1}");
    match (field(v1, "static"), field(v2, "staticKeys")) {
        (None, None) => {}
        (Some(a), Some(b)) => assert_pairs(
            &format!("{ctx} static"),
            a,
            b,
            &[
                ("issuer", "issuer"),
                ("subject", "subject"),
                ("issuerKeys", "issuerKeys"),
                ("expiration", "expirationTime"),
                ("audiences", "audiences"),
            ],
        ),
        (a, b) => panic!("{ctx}: static {a:?} vs staticKeys {b:?}"),
    }
}

fn assert_role_same(ctx: &str, v1: &Value, v2: &Value) {
    assert_id(ctx, v1, v2, "id");
    assert_pairs(ctx, v1, v2, &[("name", "name"), ("description", "description")]);
    assert_eq!(
        v1["capabilities"],
        dotted(&v2["capabilities"]),
        "{ctx}: dotted capabilities\n  v1: {v1}\n  v2: {v2}"
    );
}

/// A v1 RoleBinding (create/update reply) against the v2 binding.
fn assert_binding_same(ctx: &str, v1: &Value, v2: &Value) {
    assert_id(ctx, v1, v2, "id");
    assert_pairs(ctx, v1, v2, &[("identity", "identityUid"), ("role", "roleUid")]);
    assert_eq!(v1["group"], v2["group"]["uid"], "{ctx}: group\n  v1: {v1}\n  v2: {v2}");
}

/// A listed v1 Binding (hydrated) against the v2 binding and its v2 role.
fn assert_listed_binding_same(ctx: &str, v1: &Value, v2: &Value, v2_role: &Value) {
    assert_id(ctx, v1, v2, "id");
    assert_pairs(ctx, v1, v2, &[("identity", "identityUid"), ("createdAt", "createTime")]);
    assert_eq!(v1["group"]["id"], v2["group"]["uid"], "{ctx}: group: {v1} vs {v2}");
    assert_eq!(v1["group"]["name"], v2["group"]["name"], "{ctx}: group name");
    assert_eq!(v1["claimMatchIssuer"], v2["identity"]["issuer"], "{ctx}: issuer");
    assert_eq!(v1["claimMatchSubject"], v2["identity"]["subject"], "{ctx}: subject");
    assert_eq!(v1["email"], v2["identity"]["email"], "{ctx}: email");
    assert_eq!(v1["role"]["id"], v2["roleUid"], "{ctx}: role: {v1} vs {v2}");
    assert_role_same(&format!("{ctx} role"), &v1["role"], v2_role);
}

fn assert_idp_same(ctx: &str, v1: &Value, v2: &Value) {
    assert_id(ctx, v1, v2, "id");
    assert_pairs(
        ctx,
        v1,
        v2,
        &[
            ("name", "name"),
            ("description", "description"),
            ("defaultRole", "defaultRole"),
            ("oidc", "oidc"),
            ("scim", "scim"),
        ],
    );
    for (which, v) in [("v1", v1), ("v2", v2)] {
        assert!(
            !v.to_string().contains(SECRET),
            "{ctx}: {which} returns the secret: {v}"
        );
        assert_eq!(
            v["oidc"]["clientSecret"].as_str().unwrap_or_default(),
            "",
            "{ctx}: {which} clientSecret: {v}"
        );
    }
}

fn assert_association_same(ctx: &str, v1: &Value, v2: &Value) {
    assert_id(ctx, v1, v2, "group");
    assert_pairs(
        ctx,
        v1,
        v2,
        &[
            ("name", "name"),
            ("description", "description"),
            ("amazon", "amazon"),
            ("google", "google"),
            ("azure", "azure"),
            ("chainguard", "chainguard"),
            ("github", "github"),
        ],
    );
}

/// The invite Create returns (with its code) against the v2 invite.
fn assert_created_invite_same(ctx: &str, v1: &Value, v2: &Value) {
    assert_id(ctx, v1, v2, "id");
    assert_pairs(ctx, v1, v2, &[("expiration", "expirationTime"), ("keyId", "keyId")]);
    assert_eq!(v1["role"]["id"], v2["roleUid"], "{ctx}: role: {v1} vs {v2}");
    assert_pairs(
        &format!("{ctx} role"),
        &v1["role"],
        &v2["role"],
        &[("name", "name"), ("description", "description")],
    );
    assert_eq!(v1["role"]["capabilities"], dotted(&v2["role"]["capabilities"]), "{ctx}");
}

/// A listed (stored) invite: no code at all.
fn assert_stored_invite_same(ctx: &str, v1: &Value, v2: &Value) {
    assert_created_invite_same(ctx, v1, v2);
    assert_pairs(
        ctx,
        v1,
        v2,
        &[
            ("email", "email"),
            ("createdAt", "createTime"),
            ("singleUse", "singleUse"),
        ],
    );
    assert!(v1.get("code").is_none(), "{ctx}: a listed invite has no code: {v1}");
}

fn assert_mapping_same(ctx: &str, v1: &Value, v2: &Value) {
    assert_id(ctx, v1, v2, "id");
    assert_pairs(
        ctx,
        v1,
        v2,
        &[
            ("identityProviderUidp", "identityProviderUid"),
            ("externalGroupId", "externalGroupId"),
            ("roleUidp", "roleUid"),
            ("scope", "scope"),
            ("createdAt", "createTime"),
        ],
    );
}

fn assert_repo_same(ctx: &str, v1: &Value, v2: &Value) {
    assert_id(ctx, v1, v2, "id");
    assert_pairs(
        ctx,
        v1,
        v2,
        &[
            ("name", "name"),
            ("description", "description"),
            ("bundles", "bundles"),
            ("aliases", "aliases"),
            ("activeTags", "activeTags"),
            ("createTime", "createTime"),
        ],
    );
    assert!(field(v1, "createTime").is_some(), "{ctx}: createTime: {v1}");
    assert_eq!(
        tier_v2(&v1["catalogTier"]),
        v2["catalogTier"],
        "{ctx}: tier: {v1} vs {v2}"
    );
}

fn assert_tag_same(ctx: &str, v1: &Value, v2: &Value) {
    assert_id(ctx, v1, v2, "id");
    assert_pairs(
        ctx,
        v1,
        v2,
        &[("name", "name"), ("digest", "digest"), ("lastUpdated", "updateTime")],
    );
    assert!(field(v1, "lastUpdated").is_some(), "{ctx}: lastUpdated: {v1}");
    assert_pairs(ctx, v1, v2, &[("deprecated", "deprecated"), ("bundles", "bundles")]);
}

fn assert_advisory_same(ctx: &str, v1: &Value, v2: &Value) {
    assert_id(ctx, v1, v2, "id");
    assert_pairs(
        ctx,
        v1,
        v2,
        &[
            ("advisoryId", "advisoryId"),
            ("artifactType", "artifactType"),
            ("artifactName", "artifactName"),
            ("artifactArchitecture", "artifactArchitecture"),
            ("componentName", "componentName"),
            ("componentType", "componentType"),
            ("componentLocation", "componentLocation"),
            ("aliases", "aliases"),
            ("author", "author"),
            ("createdAt", "createTime"),
            ("updatedAt", "updateTime"),
        ],
    );
    let (e1, e2) = (
        v1["events"].as_array().cloned().unwrap_or_default(),
        v2["events"].as_array().cloned().unwrap_or_default(),
    );
    assert_eq!(e1.len(), e2.len(), "{ctx}: events: {v1} vs {v2}");
    for (a, b) in e1.iter().zip(&e2) {
        let ctx = format!("{ctx} event");
        assert_id(&ctx, a, b, "id");
        assert_pairs(
            &ctx,
            a,
            b,
            &[
                ("timestamp", "createTime"),
                ("author", "author"),
                ("reviewer", "reviewer"),
                ("fixed", "fixed"),
                ("detection", "detection"),
            ],
        );
        assert_eq!(
            json!(format!("REVIEW_STATE_{}", s_of(a, "status"))),
            b["reviewState"],
            "{ctx}: status vs reviewState"
        );
    }
}

/// The v1 List at `v1_path?v1_query` and the v2 List at `v2_path?v2_query`
/// name the same resources, each agreeing by `same`; the v1 items.
async fn assert_lists_agree(
    s: &TestServer,
    (v1_path, v1_query): (&str, &str),
    (v2_path, v2_query, v2_key): (&str, &str, &str),
    same: fn(&str, &Value, &Value),
) -> Vec<Value> {
    let ctx = format!("[{}] {v1_path}?{v1_query} vs {v2_path}?{v2_query}", s.backend);
    let mut v1 = v1_list(s, &format!("{v1_path}?{v1_query}")).await;
    let mut v2 = v2_all(s, &format!("{v2_path}?{v2_query}"), v2_key).await;
    v1.sort_by_key(v1_key);
    v2.sort_by_key(uid);
    assert_eq!(v1_keys(&v1), v2_uids(&v2), "{ctx}: the same resources");
    for (a, b) in v1.iter().zip(&v2) {
        same(&ctx, a, b);
    }
    v1
}

// ---------------------------------------------------------------------------
// Setup helpers

/// A root organization made through v2: its uid.
async fn org(s: &TestServer, name: &str) -> String {
    uid(&post(s, G2, json!({ "name": name })).await)
}

/// A group made through v2 under `parent`: its uid.
async fn group(s: &TestServer, parent: &str, name: &str) -> String {
    uid(&post(s, &format!("{G2}/{parent}"), json!({ "name": name })).await)
}

/// A claim-match identity made through v2 in `group`: its uid.
async fn identity(s: &TestServer, group: &str, name: &str) -> String {
    let body = json!({
        "name": name,
        "claimMatch": { "issuer": "https://ci.example.com", "subject": format!("sub-{name}") },
    });
    uid(&post(s, &format!("{ID2}/{group}"), body).await)
}

/// An identity provider body (v1 and v2 share the shape).
fn idp_body(name: &str, description: &str, default_role: &str) -> Value {
    json!({
        "name": name,
        "description": description,
        "defaultRole": default_role,
        "oidc": {
            "issuer": "https://idp.example.com",
            "clientId": "ward",
            "clientSecret": SECRET,
            "additionalScopes": ["groups"],
            "groupsClaim": "groups",
            "pkceEnabled": true,
        },
    })
}

/// An account association body with every cloud section (v1 and v2 share the shape).
fn association_body(name: &str) -> Value {
    json!({
        "name": name,
        "description": "cloud accounts",
        "amazon": { "account": "123456789012" },
        "google": { "projectId": "my-project-1", "projectNumber": "123456789" },
        "azure": { "tenantId": GUID_A, "clientIds": { "CATALOG_SYNCER": GUID_B } },
        "github": { "appInstallations": { "12345": { "installations": [
            { "installationId": "42", "name": "acme" },
        ] } } },
    })
}

/// A v1 advisory create body for `artifact` under `group`, one fixed event.
fn advisory_body(s: &TestServer, group: &str, artifact: &str) -> Value {
    json!({
        "parentId": group,
        "advisory": {
            "artifactName": artifact, "artifactType": "apk", "artifactArchitecture": "x86_64",
            "componentName": artifact, "componentType": "apk", "componentLocation": "/usr/lib/lib.so",
            "aliases": ["CVE-2024-12345"],
            "events": [{ "timestamp": ts(s, -60 * 60 * 1000), "fixed": { "fixedVersion": "1.2.3-r0" } }],
        },
    })
}

fn sha256(b: &[u8]) -> String {
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(b)))
}

/// Pushes `bytes` as a blob of repository `name`: its digest.
async fn push_blob(s: &TestServer, name: &str, bytes: &[u8]) -> String {
    let d = sha256(bytes);
    let r = s
        .http
        .post(format!("{}/v2/{name}/blobs/uploads/?digest={d}", s.base))
        .bearer_auth(&s.token)
        .body(bytes.to_vec())
        .send()
        .await
        .expect("push blob");
    assert_eq!(r.status(), 201, "[{}] push blob to {name}", s.backend);
    d
}

/// Pushes an image (a config and one layer) to `name:tag` through the OCI
/// endpoint: its manifest digest.
async fn push_image(s: &TestServer, name: &str, tag: &str) -> String {
    let config = serde_json::to_vec(&json!({
        "architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []},
    }))
    .expect("config");
    let layer = format!("layer of {tag} {}", rand::random::<u64>()).into_bytes();
    let (c, l) = (push_blob(s, name, &config).await, push_blob(s, name, &layer).await);
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2, "mediaType": MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": c, "size": config.len()},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": l, "size": layer.len()}],
    }))
    .expect("manifest");
    let r = s
        .http
        .put(format!("{}/v2/{name}/manifests/{tag}", s.base))
        .bearer_auth(&s.token)
        .header(CONTENT_TYPE, MANIFEST)
        .body(manifest.clone())
        .send()
        .await
        .expect("push manifest");
    let status = r.status();
    assert_eq!(
        status,
        201,
        "[{}] push {name}:{tag}: {}",
        s.backend,
        r.text().await.unwrap_or_default()
    );
    sha256(&manifest)
}

/// The digest the registry serves for `name:reference` (HEAD).
async fn served(s: &TestServer, name: &str, reference: &str) -> Option<String> {
    let r = s
        .http
        .head(format!("{}/v2/{name}/manifests/{reference}", s.base))
        .bearer_auth(&s.token)
        .send()
        .await
        .expect("head manifest");
    r.headers()
        .get("docker-content-digest")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

async fn channel(s: &TestServer) -> Channel {
    Channel::from_shared(format!("http://{}", s.addr()))
        .expect("valid uri")
        .connect()
        .await
        .unwrap_or_else(|e| panic!("[{}] gRPC connect: {e}", s.backend))
}

fn children_of(parent: &str) -> Option<UidpFilter> {
    Some(UidpFilter {
        children_of: parent.to_owned(),
        ..Default::default()
    })
}

/// A prost message as proto3 JSON (what REST returns for it).
macro_rules! to_json {
    ($m:expr) => {
        serde_json::to_value(&$m).expect("proto3 JSON")
    };
}

/// A v1 list's items sorted by id, as JSON.
fn sorted_items(list: &Value) -> Vec<Value> {
    let mut items = list["items"].as_array().cloned().unwrap_or_default();
    items.sort_by_key(v1_key);
    items
}

// ===========================================================================
// 1. Round trips, both ways
// ===========================================================================

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_round_trip() {
    for s in common::servers().await {
        let b = s.backend;
        let acme = org(&s, "acme").await;

        // v1 → v2.
        let created = post(
            &s,
            &format!("{G1}/{acme}"),
            json!({ "name": "team", "description": "the team" }),
        )
        .await;
        assert_v1_names(&format!("[{b}] Groups.Create"), &created);
        let team = v1_id(&created);
        assert_child(b, &acme, &team);
        assert_eq!(
            (&created["name"], &created["description"]),
            (&json!("team"), &json!("the team"))
        );
        let v2 = get(&s, &format!("{G2}/{team}")).await;
        assert_v2_names(b, &v2);
        assert_group_same(&format!("[{b}] v1-created group"), &created, &v2);
        assert_eq!(
            v1_one(&s, &format!("{G1}?id={team}")).await,
            created,
            "[{b}] list ?id= is what create returned"
        );

        // The parent may be given by name (v1 passes it to v2 unchanged).
        let by_name = post(&s, &format!("{G1}/acme"), json!({ "name": "by-name" })).await;
        assert_child(b, &acme, &v1_id(&by_name));

        // v2 → v1.
        let ops = post(
            &s,
            &format!("{G2}/{acme}"),
            json!({ "name": "ops", "description": "operations" }),
        )
        .await;
        let listed = v1_one(&s, &format!("{G1}?id={}", uid(&ops))).await;
        assert_group_same(&format!("[{b}] v2-created group"), &listed, &ops);
        let deep = post(&s, &format!("{G2}/{}", uid(&ops)), json!({ "name": "oncall" })).await;
        let deep = uid(&deep);

        // The uidp.* filters (and name) select what v2's do.
        for (v1q, v2q) in [
            (format!("uidp.childrenOf={acme}"), format!("uidp.childrenOf={acme}")),
            (
                format!("uidp.descendantsOf={acme}"),
                format!("uidp.descendantsOf={acme}"),
            ),
            (format!("uidp.ancestorsOf={deep}"), format!("uidp.ancestorsOf={deep}")),
            ("uidp.inRoot=true".to_owned(), "uidp.inRoot=true".to_owned()),
            (
                format!("uidp.ids={team},{deep}"),
                format!("uidp.ids={team}&uidp.ids={deep}"),
            ),
            ("name=ops".to_owned(), "name=ops".to_owned()),
            (format!("id={team}&uidp.childrenOf={acme}"), format!("uidp.ids={team}")),
        ] {
            assert_lists_agree(&s, (G1, &v1q), (G2, &v2q, "groups"), assert_group_same).await;
        }
        let children = v1_list(&s, &format!("{G1}?uidp.childrenOf={acme}")).await;
        let mut want = vec![team.clone(), uid(&ops), v1_id(&by_name)];
        want.sort();
        assert_eq!(v1_keys(&children), want, "[{b}] the org's children");
        // Query names in snake_case work as in camelCase.
        assert_eq!(
            v1_list(&s, &format!("{G1}?uidp.children_of={acme}")).await,
            children,
            "[{b}] uidp.children_of"
        );
        // An id outside the uidp filter's own ids: nothing, not an error.
        assert!(
            v1_list(&s, &format!("{G1}?id={team}&uidp.ids={deep}")).await.is_empty(),
            "[{b}] contradicting id filters list nothing"
        );

        // Delete through v1: gone for v2.
        delete_through_v1(&s, G1, G2, &deep).await;
        assert!(v1_list(&s, &format!("{G1}?id={deep}")).await.is_empty(), "[{b}]");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identities_round_trip() {
    for s in common::servers().await {
        let b = s.backend;
        let acme = org(&s, "acme").await;
        let team = group(&s, &acme, "team").await;

        // v1 → v2: claim match (patterns and claims) and static keys.
        let cm = post(
            &s,
            &format!("{ID1}/{acme}"),
            json!({
                "name": "ci", "description": "the CI",
                "claimMatch": {
                    "issuer": "https://token.actions.githubusercontent.com",
                    "subjectPattern": "repo:acme/.*",
                    "audience": "ward",
                    "claims": { "ref": "refs/heads/main" },
                },
            }),
        )
        .await;
        assert_v1_names(&format!("[{b}] Identities.Create"), &cm);
        assert_child(b, &acme, &v1_id(&cm));
        assert_eq!(cm["claimMatch"]["subjectPattern"], "repo:acme/.*", "[{b}] {cm}");
        assert!(field(&cm, "static").is_none(), "[{b}] one relationship: {cm}");
        let v2 = get(&s, &format!("{ID2}/{}", v1_id(&cm))).await;
        assert_identity_same(&format!("[{b}] v1 claim-match identity"), &cm, &v2);

        let exp = ts(&s, DAY_MS);
        let st = post(
            &s,
            &format!("{ID1}/{team}"),
            json!({
                "name": "robot",
                "static": { "issuer": "https://static.example.com", "subject": "robot",
                            "issuerKeys": JWKS, "expiration": exp, "audiences": ["ward"] },
            }),
        )
        .await;
        assert_eq!(st["static"]["expiration"], json!(exp), "[{b}] {st}");
        assert_eq!(st["static"]["issuerKeys"], JWKS, "[{b}] {st}");
        let v2 = get(&s, &format!("{ID2}/{}", v1_id(&st))).await;
        assert_eq!(v2["staticKeys"]["expirationTime"], json!(exp), "[{b}] {v2}");
        assert_identity_same(&format!("[{b}] v1 static identity"), &st, &v2);

        // v2 → v1.
        let deploy = post(
            &s,
            &format!("{ID2}/{acme}"),
            json!({ "name": "deploy", "description": "deploys",
                    "claimMatch": { "issuerPattern": "https://.*\\.example\\.com", "subject": "deploy" } }),
        )
        .await;
        let listed = v1_one(&s, &format!("{ID1}?id={}", uid(&deploy))).await;
        assert_identity_same(&format!("[{b}] v2 claim-match identity"), &listed, &deploy);
        let keys = post(
            &s,
            &format!("{ID2}/{team}"),
            json!({ "name": "keys", "staticKeys": { "issuer": "https://static.example.com",
                    "subject": "keys", "issuerKeys": JWKS, "expirationTime": exp } }),
        )
        .await;
        let listed = v1_one(&s, &format!("{ID1}?id={}", uid(&keys))).await;
        assert!(field(&listed, "staticKeys").is_none(), "[{b}] v1 says static: {listed}");
        assert_identity_same(&format!("[{b}] v2 static identity"), &listed, &keys);

        for q in [
            format!("uidp.childrenOf={acme}"),
            format!("uidp.childrenOf={team}"),
            format!("uidp.descendantsOf={acme}"),
        ] {
            assert_lists_agree(&s, (ID1, &q), (ID2, &q, "identities"), assert_identity_same).await;
        }
        let all = v1_list(&s, &format!("{ID1}?uidp.descendantsOf={acme}")).await;
        assert_eq!(
            names(&all),
            ["ci", "deploy", "keys", "robot"].map(String::from).into(),
            "[{b}]"
        );

        // Lookup (v1's answer carries only the id).
        let query = format!("issuer={}&subject=deploy", enc("https://ci.example.com"));
        let found = get(&s, &format!("{ID1}/lookup?{query}")).await;
        let v2_found = get(&s, &format!("{ID2}:lookupIdentity?{query}")).await;
        assert_v1_names(&format!("[{b}] Identities.Lookup"), &found);
        assert_eq!(found["id"], v2_found["uid"], "[{b}] lookup: {found} vs {v2_found}");
        assert!(is_hex(s_of(&found, "id"), 40), "[{b}] {found}");

        delete_through_v1(&s, ID1, ID2, &uid(&deploy)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_round_trip() {
    for s in common::servers().await {
        let b = s.backend;
        let acme = org(&s, "acme").await;

        // v1 → v2: dotted names in, enum names in v2 (enum names are accepted by v1 too).
        let created = post(
            &s,
            &format!("{R1}/{acme}"),
            json!({ "name": "lister", "description": "lists things",
                    "capabilities": ["groups.list", "CAP_IAM_ROLES_LIST"] }),
        )
        .await;
        assert_v1_names(&format!("[{b}] Roles.Create"), &created);
        assert_child(b, &acme, &v1_id(&created));
        assert_eq!(
            created["capabilities"],
            json!(["groups.list", "roles.list"]),
            "[{b}] {created}"
        );
        let v2 = get(&s, &format!("{R2}/{}", v1_id(&created))).await;
        assert_eq!(
            v2["capabilities"],
            json!(["CAP_IAM_GROUPS_LIST", "CAP_IAM_ROLES_LIST"]),
            "[{b}] groups.list is CAP_IAM_GROUPS_LIST: {v2}"
        );
        assert_role_same(&format!("[{b}] v1-created role"), &created, &v2);

        // A name that is no capability: INVALID_ARGUMENT naming capabilities, nothing made.
        let (status, body) = s
            .post(
                &format!("{R1}/{acme}"),
                json!({ "name": "bad", "capabilities": ["groups.list", "nope"] }),
            )
            .await;
        assert_error(b, status, &body, 400, 3, "INVALID_ARGUMENT");
        assert!(
            field_violations(&body).iter().any(|(f, _)| f == "capabilities"),
            "[{b}] {body}"
        );
        assert!(v1_list(&s, &format!("{R1}?name=bad")).await.is_empty(), "[{b}]");

        // v2 → v1.
        let puller = post(
            &s,
            &format!("{R2}/{acme}"),
            json!({ "name": "puller", "capabilities": ["CAP_REPO_LIST", "CAP_TAG_LIST"] }),
        )
        .await;
        let listed = v1_one(&s, &format!("{R1}?id={}", uid(&puller))).await;
        assert_eq!(
            listed["capabilities"],
            json!(["repo.list", "tag.list"]),
            "[{b}] {listed}"
        );
        assert_role_same(&format!("[{b}] v2-created role"), &listed, &puller);

        // A built-in role reads the same both ways.
        let viewer = builtin("viewer");
        let v1_viewer = v1_one(&s, &format!("{R1}?id={viewer}")).await;
        let v2_viewer = get(&s, &format!("{R2}/{viewer}")).await;
        assert_role_same(&format!("[{b}] viewer"), &v1_viewer, &v2_viewer);

        // Filters: uidp, name, and RoleFilter.parent (exact parent; "/" the root).
        for (v1q, v2q) in [
            (format!("uidp.childrenOf={acme}"), format!("uidp.childrenOf={acme}")),
            (format!("parent={acme}"), format!("uidp.childrenOf={acme}")),
            ("parent=/".to_owned(), "uidp.inRoot=true".to_owned()),
            ("name=puller".to_owned(), "name=puller".to_owned()),
            (
                format!("uidp.ids={},{viewer}", uid(&puller)),
                format!("uidp.ids={}&uidp.ids={viewer}", uid(&puller)),
            ),
        ] {
            assert_lists_agree(&s, (R1, &v1q), (R2, &v2q, "roles"), assert_role_same).await;
        }
        let mine = v1_list(&s, &format!("{R1}?parent={acme}")).await;
        assert_eq!(names(&mine), ["lister", "puller"].map(String::from).into(), "[{b}]");

        delete_through_v1(&s, R1, R2, &uid(&puller)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn role_bindings_round_trip() {
    for s in common::servers().await {
        let b = s.backend;
        let acme = org(&s, "acme").await;
        let team = group(&s, &acme, "team").await;
        let (alice, bob, carol) = (
            identity(&s, &acme, "alice").await,
            identity(&s, &acme, "bob").await,
            identity(&s, &acme, "carol").await,
        );
        let (viewer, editor) = (builtin("viewer"), builtin("editor"));
        let lister = uid(&post(
            &s,
            &format!("{R2}/{acme}"),
            json!({ "name": "lister", "capabilities": ["CAP_IAM_GROUPS_LIST"] }),
        )
        .await);

        // v1 single create → v2 (the group is the path's, whatever the body says).
        let one = post(
            &s,
            &format!("{RB1}/{team}"),
            json!({ "identity": alice, "role": viewer, "group": acme }),
        )
        .await;
        assert_v1_names(&format!("[{b}] RoleBindings.Create"), &one);
        assert_child(b, &team, &v1_id(&one));
        assert_eq!(
            (&one["identity"], &one["role"], &one["group"]),
            (&json!(alice), &json!(viewer), &json!(team)),
            "[{b}] {one}"
        );
        let v2_one = get(&s, &format!("{RB2}/{}", v1_id(&one))).await;
        assert_binding_same(&format!("[{b}] v1-created binding"), &one, &v2_one);

        // The listed binding is hydrated: the full group and role (dotted capabilities).
        let listed = v1_one(&s, &format!("{RB1}?id={}", v1_id(&one))).await;
        let v2_viewer = get(&s, &format!("{R2}/{viewer}")).await;
        assert_listed_binding_same(&format!("[{b}] listed v1 binding"), &listed, &v2_one, &v2_viewer);
        let v1_team = v1_one(&s, &format!("{G1}?id={team}")).await;
        assert_eq!(
            listed["group"], v1_team,
            "[{b}] the binding's group is the full v1 Group"
        );

        // v1 batch → v2.
        let batch = post(
            &s,
            &format!("{RB1}/batch/{team}"),
            json!([{ "identity": bob, "role": viewer }, { "identity": carol, "role": lister }]),
        )
        .await;
        assert_v1_names(&format!("[{b}] RoleBindings.CreateBatch"), &batch);
        let made = batch["roleBindings"].as_array().cloned().unwrap_or_default();
        assert_eq!(made.len(), 2, "[{b}] {batch}");
        let mut pairs: Vec<(String, String)> = Vec::new();
        for m in &made {
            assert_child(b, &team, &v1_id(m));
            let v2 = get(&s, &format!("{RB2}/{}", v1_id(m))).await;
            assert_binding_same(&format!("[{b}] batch binding"), m, &v2);
            pairs.push((s_of(m, "identity").to_owned(), s_of(m, "role").to_owned()));
        }
        pairs.sort();
        let mut want = vec![(bob.clone(), viewer.clone()), (carol.clone(), lister.clone())];
        want.sort();
        assert_eq!(pairs, want, "[{b}] the batch made what it was given");

        // PUT changes the role (full replacement of the one mutable field).
        let updated = put(
            &s,
            &format!("{RB1}/{}", v1_id(&one)),
            json!({ "identity": alice, "role": editor }),
        )
        .await;
        assert_eq!(updated["role"], json!(editor), "[{b}] {updated}");
        let v2_one = get(&s, &format!("{RB2}/{}", v1_id(&one))).await;
        assert_eq!(v2_one["roleUid"], json!(editor), "[{b}] {v2_one}");
        assert_binding_same(&format!("[{b}] updated binding"), &updated, &v2_one);

        // v2 → v1.
        let v2_made = post(
            &s,
            &format!("{RB2}/{acme}"),
            json!({ "identityUid": bob, "roleUid": lister }),
        )
        .await;
        let listed = v1_one(&s, &format!("{RB1}?id={}", uid(&v2_made))).await;
        let v2_lister = get(&s, &format!("{R2}/{lister}")).await;
        assert_listed_binding_same(&format!("[{b}] v2-created binding"), &listed, &v2_made, &v2_lister);

        // uidp filters: the bindings at the team, and everything under acme.
        for q in [format!("uidp.childrenOf={team}"), format!("uidp.descendantsOf={acme}")] {
            let v1 = v1_list(&s, &format!("{RB1}?{q}")).await;
            let v2 = v2_all(&s, &format!("{RB2}?{q}"), "roleBindings").await;
            assert_eq!(v1_keys(&v1), v2_uids(&v2), "[{b}] ?{q}");
        }
        assert_eq!(
            v1_list(&s, &format!("{RB1}?uidp.childrenOf={team}")).await.len(),
            3,
            "[{b}]"
        );

        delete_through_v1(&s, RB1, RB2, &v1_id(&one)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_providers_round_trip() {
    for s in common::servers().await {
        let b = s.backend;
        let acme = org(&s, "acme").await;
        let viewer = builtin("viewer");

        // v1 → v2: the secret is written, never returned by either version.
        let created = post(&s, &format!("{IDP1}/{acme}"), idp_body("corp", "the corp IdP", &viewer)).await;
        assert_v1_names(&format!("[{b}] IdentityProviders.Create"), &created);
        assert_child(b, &acme, &v1_id(&created));
        assert_eq!(created["oidc"]["clientId"], "ward", "[{b}] {created}");
        assert_eq!(created["oidc"]["pkceEnabled"], true, "[{b}] {created}");
        let v2 = get(&s, &format!("{IDP2}/{}", v1_id(&created))).await;
        assert_idp_same(&format!("[{b}] v1-created provider"), &created, &v2);
        let stored = s
            .ward()
            .store
            .get_identity_provider(&ward_core::uidp::Uidp::parse("uid", &v1_id(&created)).expect("uid"))
            .await
            .expect("read the provider")
            .expect("the provider is stored");
        assert!(
            stored.client_secret.is_some(),
            "[{b}] the secret was written through v1"
        );

        // v2 → v1.
        let v2_made = post(&s, &format!("{IDP2}/{acme}"), idp_body("contractors", "", &viewer)).await;
        let listed = v1_one(&s, &format!("{IDP1}?id={}", uid(&v2_made))).await;
        assert_idp_same(&format!("[{b}] v2-created provider"), &listed, &v2_made);

        for (v1q, v2q) in [
            (format!("uidp.childrenOf={acme}"), format!("uidp.childrenOf={acme}")),
            ("name=corp".to_owned(), "name=corp".to_owned()),
            (format!("id={}", uid(&v2_made)), format!("uidp.ids={}", uid(&v2_made))),
        ] {
            assert_lists_agree(&s, (IDP1, &v1q), (IDP2, &v2q, "identityProviders"), assert_idp_same).await;
        }

        // Writing back what List returned, minus the description: only that changes.
        let mut back = v1_one(&s, &format!("{IDP1}?id={}", v1_id(&created))).await;
        back.as_object_mut().expect("object").remove("description");
        let updated = put(&s, &format!("{IDP1}/{}", v1_id(&created)), back).await;
        let v2 = get(&s, &format!("{IDP2}/{}", v1_id(&created))).await;
        assert_eq!(v2["description"], "", "[{b}] an omitted description is reset: {v2}");
        assert_eq!(v2["oidc"]["clientId"], "ward", "[{b}] {v2}");
        assert_idp_same(&format!("[{b}] updated provider"), &updated, &v2);
        let stored_after = s
            .ward()
            .store
            .get_identity_provider(&ward_core::uidp::Uidp::parse("uid", &v1_id(&created)).expect("uid"))
            .await
            .expect("read the provider")
            .expect("the provider is stored");
        assert_eq!(
            stored_after.client_secret, stored.client_secret,
            "[{b}] a PUT without a secret keeps the stored one"
        );
        // A PUT with a new secret writes it (sealed), and returns none.
        let mut renewed = v1_one(&s, &format!("{IDP1}?id={}", v1_id(&created))).await;
        renewed["oidc"]["clientSecret"] = json!("V1-RENEWED-SECRET-77");
        let reply = put(&s, &format!("{IDP1}/{}", v1_id(&created)), renewed).await;
        assert!(!reply.to_string().contains("V1-RENEWED-SECRET-77"), "[{b}] {reply}");
        assert_eq!(reply["oidc"]["clientSecret"], "", "[{b}] {reply}");
        let stored_renewed = s
            .ward()
            .store
            .get_identity_provider(&ward_core::uidp::Uidp::parse("uid", &v1_id(&created)).expect("uid"))
            .await
            .expect("read the provider")
            .expect("the provider is stored");
        assert!(
            stored_renewed.client_secret.is_some() && stored_renewed.client_secret != stored.client_secret,
            "[{b}] the new secret is stored"
        );

        delete_through_v1(&s, IDP1, IDP2, &uid(&v2_made)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn account_associations_round_trip() {
    for s in common::servers().await {
        let b = s.backend;
        let acme = org(&s, "acme").await;
        let (one, two) = (group(&s, &acme, "one").await, group(&s, &acme, "two").await);

        // v1 → v2 (keyed by the group in the path).
        let created = post(&s, &format!("{AA1}/{one}"), association_body("accounts")).await;
        assert_v1_names(&format!("[{b}] GroupAccountAssociations.Create"), &created);
        assert_eq!(created["group"], json!(one), "[{b}] {created}");
        assert_eq!(created["amazon"]["account"], "123456789012", "[{b}] {created}");
        assert_eq!(
            created["github"]["appInstallations"]["12345"]["installations"][0]["installationId"], "42",
            "[{b}] {created}"
        );
        let v2 = get(&s, &format!("{AA2}/{one}")).await;
        assert_association_same(&format!("[{b}] v1-created association"), &created, &v2);

        // v2 → v1.
        let v2_made = post(&s, &format!("{AA2}/{two}"), association_body("others")).await;
        let listed = v1_one(&s, &format!("{AA1}?group={two}")).await;
        assert_association_same(&format!("[{b}] v2-created association"), &listed, &v2_made);
        assert_lists_agree(
            &s,
            (AA1, "name=others"),
            (AA2, "name=others", "accountAssociations"),
            assert_association_same,
        )
        .await;
        assert_lists_agree(
            &s,
            (AA1, &format!("group={one}")),
            (AA2, &format!("uidp.ids={one}"), "accountAssociations"),
            assert_association_same,
        )
        .await;

        // PUT replaces the whole association: omitted sections and description go.
        let updated = put(
            &s,
            &format!("{AA1}/{one}"),
            json!({ "name": "accounts", "google": { "projectId": "my-project-2", "projectNumber": "2" } }),
        )
        .await;
        let v2 = get(&s, &format!("{AA2}/{one}")).await;
        assert_eq!(v2["description"], "", "[{b}] {v2}");
        assert!(
            field(&v2, "amazon").is_none() && field(&v2, "azure").is_none() && field(&v2, "github").is_none(),
            "[{b}] {v2}"
        );
        assert_eq!(v2["google"]["projectId"], "my-project-2", "[{b}] {v2}");
        assert_association_same(&format!("[{b}] replaced association"), &updated, &v2);

        delete_through_v1(&s, AA1, AA2, &two).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_invites_round_trip() {
    for s in common::servers().await {
        let b = s.backend;
        let acme = org(&s, "acme").await;
        let team = group(&s, &acme, "team").await;
        let (viewer, editor) = (builtin("viewer"), builtin("editor"));

        // v1 → v2: the code only from create.
        let created = post(
            &s,
            &format!("{INV1}/{team}"),
            json!({ "role": viewer, "ttl": "3600s", "singleUse": true }),
        )
        .await;
        assert_v1_names(&format!("[{b}] GroupInvites.Create"), &created);
        assert_child(b, &team, &v1_id(&created));
        let code = s_of(&created, "code").to_owned();
        assert!(!code.is_empty(), "[{b}] create returns the code: {created}");
        let v2 = get(&s, &format!("{INV2}/{}", v1_id(&created))).await;
        assert_created_invite_same(&format!("[{b}] v1-created invite"), &created, &v2);
        assert_eq!(v2["singleUse"], true, "[{b}] {v2}");
        assert!(!v2.to_string().contains(&code), "[{b}] v2 get has no code: {v2}");
        let listed = v1_one(&s, &format!("{INV1}?id={}", v1_id(&created))).await;
        assert_stored_invite_same(&format!("[{b}] listed v1 invite"), &listed, &v2);
        assert!(!listed.to_string().contains(&code), "[{b}] a listed invite has no code");

        // v2 → v1.
        let v2_made = post(
            &s,
            &format!("{INV2}/{team}"),
            json!({ "roleUid": editor, "ttl": "7200s" }),
        )
        .await;
        let listed = v1_one(&s, &format!("{INV1}?id={}", uid(&v2_made))).await;
        let v2_get = get(&s, &format!("{INV2}/{}", uid(&v2_made))).await;
        assert_stored_invite_same(&format!("[{b}] v2-created invite"), &listed, &v2_get);
        assert!(!listed.to_string().contains(s_of(&v2_made, "code")), "[{b}]");

        // The group and key-id filters.
        assert_lists_agree(
            &s,
            (INV1, &format!("group={team}")),
            (INV2, &format!("uidp.childrenOf={team}"), "groupInvites"),
            assert_stored_invite_same,
        )
        .await;
        let key = s_of(&created, "keyId");
        assert_lists_agree(
            &s,
            (INV1, &format!("keyId={key}")),
            (INV2, &format!("keyId={key}"), "groupInvites"),
            assert_stored_invite_same,
        )
        .await;
        assert!(
            v1_list(&s, &format!("{INV1}?group={acme}")).await.is_empty(),
            "[{b}] none directly at acme"
        );

        delete_through_v1(&s, INV1, INV2, &v1_id(&created)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_group_role_mappings_round_trip() {
    for s in common::servers().await {
        let b = s.backend;
        let acme = org(&s, "acme").await;
        let (viewer, editor) = (builtin("viewer"), builtin("editor"));
        let idp = uid(&post(&s, &format!("{IDP2}/{acme}"), idp_body("corp", "", &viewer)).await);

        // v1 → v2 (and the v1 Get).
        let created = post(
            &s,
            &format!("{MAP1}/{idp}"),
            json!({ "externalGroupId": "eng", "roleUidp": viewer }),
        )
        .await;
        assert_v1_names(&format!("[{b}] ExternalGroupRoleMappings.Create"), &created);
        assert_child(b, &idp, &v1_id(&created));
        assert_eq!(
            created["scope"],
            json!(acme),
            "[{b}] the scope defaults to the organization"
        );
        let v2 = get(&s, &format!("{MAP2}/{}", v1_id(&created))).await;
        assert_mapping_same(&format!("[{b}] v1-created mapping"), &created, &v2);
        assert_eq!(
            get(&s, &format!("{MAP1}/{}", v1_id(&created))).await,
            created,
            "[{b}] v1 Get"
        );

        // v2 → v1.
        let v2_made = post(
            &s,
            &format!("{MAP2}/{idp}"),
            json!({ "externalGroupId": "ops", "roleUid": editor }),
        )
        .await;
        let got = get(&s, &format!("{MAP1}/{}", uid(&v2_made))).await;
        assert_mapping_same(&format!("[{b}] v2-created mapping (v1 Get)"), &got, &v2_made);
        for (v1q, v2q) in [
            (
                format!("identityProviderUidp={idp}"),
                format!("identityProviderUid={idp}"),
            ),
            (format!("uidp.childrenOf={idp}"), format!("uidp.childrenOf={idp}")),
            (
                format!("uidp.ids={}", uid(&v2_made)),
                format!("uidp.ids={}", uid(&v2_made)),
            ),
        ] {
            let items = assert_lists_agree(
                &s,
                (MAP1, &v1q),
                (MAP2, &v2q, "externalGroupRoleMappings"),
                assert_mapping_same,
            )
            .await;
            assert!(!items.is_empty(), "[{b}] ?{v1q}");
        }

        // batchDelete: both gone, the reply echoes the parent and names them.
        let (m1, m2) = (v1_id(&created), uid(&v2_made));
        let reply = post(
            &s,
            &format!("{MAP1}:batchDelete"),
            json!({ "parentId": idp, "ids": [m1, m2] }),
        )
        .await;
        assert_v1_names(&format!("[{b}] ExternalGroupRoleMappings.BatchDelete"), &reply);
        assert_eq!(reply["parentId"], json!(idp), "[{b}] {reply}");
        let mut deleted: Vec<String> = reply["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| v["id"].as_str().unwrap_or_default().to_owned())
            .collect();
        deleted.sort();
        let mut want = vec![m1.clone(), m2.clone()];
        want.sort();
        assert_eq!(deleted, want, "[{b}] {reply}");
        for m in [&m1, &m2] {
            let (status, body) = s.get(&format!("{MAP2}/{m}")).await;
            assert_error(b, status, &body, 404, 5, "NOT_FOUND");
        }
        assert!(
            v1_list(&s, &format!("{MAP1}?identityProviderUidp={idp}"))
                .await
                .is_empty(),
            "[{b}]"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terms_round_trip() {
    for s in common::servers().await {
        let b = s.backend;
        let acme = org(&s, "acme").await;
        let team = group(&s, &acme, "team").await;
        let admin = common::admin_uid(&s);

        // Accept through v1, list through both.
        let accepted = post(&s, &format!("{TERMS1}/{acme}"), json!({ "documentIds": ["tos.v1"] })).await;
        assert_eq!(accepted, json!({ "group": acme, "documentIds": ["tos.v1"] }), "[{b}]");
        let v1 = v1_list(&s, &format!("{TERMS1}/{acme}")).await;
        let v2 = get(&s, &format!("{TERMS2}/{acme}")).await["termsAcceptances"].clone();
        assert_eq!(v1.len(), 1, "[{b}] {v1:?}");
        assert_eq!(v1[0]["docId"], "tos.v1", "[{b}] {v1:?}");
        assert_eq!(v1[0]["acceptedBy"], json!(admin), "[{b}] {v1:?}");
        assert_pairs(
            &format!("[{b}] terms"),
            &v1[0],
            &v2[0],
            &[
                ("docId", "docId"),
                ("acceptedBy", "acceptedBy"),
                ("acceptedAt", "createTime"),
            ],
        );
        assert!(field(&v1[0], "acceptedAt").is_some(), "[{b}] {v1:?}");

        // Accept through v2 at the team: v1 lists the team's and its organization's.
        s.clock.advance_millis(1_000);
        post(
            &s,
            &format!("{TERMS2}/{team}"),
            json!({ "documentIds": ["team-tos.v2"] }),
        )
        .await;
        let v1 = v1_list(&s, &format!("{TERMS1}/{team}")).await;
        let v2 = get(&s, &format!("{TERMS2}/{team}")).await["termsAcceptances"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let by_doc = |items: &[Value]| -> BTreeMap<String, Value> {
            items.iter().map(|t| (s_of(t, "docId").to_owned(), t.clone())).collect()
        };
        let (v1, v2) = (by_doc(&v1), by_doc(&v2));
        assert_eq!(v1.keys().collect::<Vec<_>>(), ["team-tos.v2", "tos.v1"], "[{b}] {v1:?}");
        assert_eq!(v1.keys().collect::<Vec<_>>(), v2.keys().collect::<Vec<_>>(), "[{b}]");
        for (doc, a) in &v1 {
            assert_pairs(
                &format!("[{b}] terms {doc}"),
                a,
                &v2[doc],
                &[
                    ("docId", "docId"),
                    ("acceptedBy", "acceptedBy"),
                    ("acceptedAt", "createTime"),
                ],
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repos_round_trip() {
    for s in common::servers().await {
        let b = s.backend;
        let acme = org(&s, "acme").await;

        // v1 → v2: the tier by v1 name (FIPS is 6 in v1, 3 in v2) and the readme.
        let created = post(
            &s,
            &format!("{REPO1}/{acme}"),
            json!({
                "name": "app", "description": "the app", "catalogTier": "FIPS",
                "bundles": ["fips"], "aliases": ["docker.io/library/app:latest"],
                "activeTags": ["latest", "1.2"], "readme": "# App\n\nAn app.",
            }),
        )
        .await;
        assert_v1_names(&format!("[{b}] Registry.CreateRepo"), &created);
        let app = v1_id(&created);
        assert_child(b, &acme, &app);
        assert_eq!(created["catalogTier"], "FIPS", "[{b}] {created}");
        let v2 = get(&s, &format!("{REPO2}/{app}")).await;
        assert_eq!(v2["catalogTier"], "CATALOG_TIER_FIPS", "[{b}] {v2}");
        assert_repo_same(&format!("[{b}] v1-created repo"), &created, &v2);
        let readme = get(&s, &format!("{REPO2}/{app}/readme")).await;
        assert_eq!(readme["content"], created["readme"], "[{b}] the readme: {readme}");
        assert!(s_of(&readme, "content").contains("An app."), "[{b}] {readme}");

        // The tier by v1 number: 5 is BASE (2 in v2); the retired 1-3 are refused.
        let base = post(
            &s,
            &format!("{REPO1}/{acme}"),
            json!({ "name": "base-img", "catalogTier": 5 }),
        )
        .await;
        assert_eq!(base["catalogTier"], "BASE", "[{b}] {base}");
        let v2 = get(&s, &format!("{REPO2}/{}", v1_id(&base))).await;
        assert_eq!(v2["catalogTier"], "CATALOG_TIER_BASE", "[{b}] {v2}");
        let (status, body) = s
            .post(&format!("{REPO1}/{acme}"), json!({ "name": "old", "catalogTier": 2 }))
            .await;
        assert_error(b, status, &body, 400, 3, "INVALID_ARGUMENT");
        assert!(
            v1_list(&s, &format!("{REPO1}?name=old")).await.is_empty(),
            "[{b}] nothing made"
        );

        // v2 → v1 (AI is 4 in v2, 7 in v1).
        let tools = post(
            &s,
            &format!("{REPO2}/{acme}"),
            json!({ "name": "tools", "description": "tools", "catalogTier": "CATALOG_TIER_AI", "bundles": ["base"] }),
        )
        .await;
        let listed = v1_one(&s, &format!("{REPO1}?id={}", uid(&tools))).await;
        assert_eq!(listed["catalogTier"], "AI", "[{b}] {listed}");
        assert_eq!(listed["readme"], "", "[{b}] {listed}");
        assert_repo_same(&format!("[{b}] v2-created repo"), &listed, &tools);

        for (v1q, v2q) in [
            (format!("uidp.childrenOf={acme}"), format!("uidp.childrenOf={acme}")),
            (
                format!("uidp.descendantsOf={acme}"),
                format!("uidp.descendantsOf={acme}"),
            ),
            ("name=app".to_owned(), "name=app".to_owned()),
            (
                format!("uidp.ids={app},{}", uid(&tools)),
                format!("uidp.ids={app}&uidp.ids={}", uid(&tools)),
            ),
        ] {
            assert_lists_agree(&s, (REPO1, &v1q), (REPO2, &v2q, "repos"), assert_repo_same).await;
        }
        let all = v1_list(&s, &format!("{REPO1}?uidp.childrenOf={acme}")).await;
        assert_eq!(
            names(&all),
            ["app", "base-img", "tools"].map(String::from).into(),
            "[{b}]"
        );
        let app_listed = all.iter().find(|r| r["name"] == "app").expect("app");
        assert_eq!(
            app_listed["readme"], readme["content"],
            "[{b}] v1 lists the readme inside the repo"
        );

        // CreateRepo of a name the group already holds replaces that repo
        // (v1's create-or-update), unless preventExisting is set.
        let again = post(
            &s,
            &format!("{REPO1}/{acme}"),
            json!({ "name": "app", "description": "again" }),
        )
        .await;
        assert_eq!(v1_id(&again), app, "[{b}] the same repo: {again}");
        let v2 = get(&s, &format!("{REPO2}/{app}")).await;
        assert_eq!(
            (&v2["description"], &v2["bundles"]),
            (&json!("again"), &json!([])),
            "[{b}] replaced: {v2}"
        );
        let (status, body) = s
            .post(
                &format!("{REPO1}/{acme}?preventExisting=true"),
                json!({ "name": "app", "description": "no" }),
            )
            .await;
        assert_error(b, status, &body, 409, 6, "ALREADY_EXISTS");
        assert_eq!(
            get(&s, &format!("{REPO2}/{app}")).await["description"],
            "again",
            "[{b}]"
        );

        let count = get(&s, &format!("/registry/v1/repocountbysource/{app}")).await;
        assert_eq!(count, json!({ "count": "0" }), "[{b}]");

        delete_through_v1(&s, REPO1, REPO2, &uid(&tools)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_round_trip() {
    for s in common::servers().await {
        let b = s.backend;
        let acme = org(&s, "acme").await;
        let repo = v1_id(&post(&s, &format!("{REPO1}/{acme}"), json!({ "name": "app" })).await);
        let name = format!("{acme}/app");
        let d1 = push_image(&s, &name, "v1").await;
        let d2 = push_image(&s, &name, "v2").await;

        // v1 → v2.
        let stable = post(&s, &format!("{TAG1}/{repo}"), json!({ "name": "stable", "digest": d1 })).await;
        assert_v1_names(&format!("[{b}] Registry.CreateTag"), &stable);
        let sid = v1_id(&stable);
        assert_child(b, &repo, &sid);
        let v2 = get(&s, &format!("{TAG2}/{sid}")).await;
        assert_tag_same(&format!("[{b}] v1-created tag"), &stable, &v2);
        let created_at = stable["lastUpdated"].clone();

        // v2 → v1.
        let edge = post(&s, &format!("{TAG2}/{repo}"), json!({ "name": "edge", "digest": d1 })).await;
        let listed = v1_one(&s, &format!("{TAG1}?id={}", uid(&edge))).await;
        assert_tag_same(&format!("[{b}] v2-created tag"), &listed, &edge);

        // UpdateTag (PUT) re-points the tag; the registry serves the new digest.
        s.clock.advance_millis(1_000);
        let moved = put(&s, &format!("{TAG1}/{sid}"), json!({ "digest": d2 })).await;
        assert_eq!(
            (&moved["id"], &moved["name"], &moved["digest"]),
            (&json!(sid), &json!("stable"), &json!(d2)),
            "[{b}] {moved}"
        );
        assert!(
            moved["lastUpdated"].as_str() > created_at.as_str(),
            "[{b}] lastUpdated moves: {moved}"
        );
        let v2 = get(&s, &format!("{TAG2}/{sid}")).await;
        assert_tag_same(&format!("[{b}] re-pointed tag"), &moved, &v2);
        assert_eq!(
            served(&s, &name, "stable").await,
            Some(d2.clone()),
            "[{b}] the registry serves the move"
        );

        // The tag's history: oldest first, each move with its time.
        let history = v1_list(&s, &format!("{TAG1}/{sid}/history")).await;
        let digests: Vec<&str> = history.iter().map(|h| s_of(h, "digest")).collect();
        assert_eq!(digests, [d1.as_str(), d2.as_str()], "[{b}] {history:?}");
        assert_eq!(history[0]["updateTimestamp"], created_at, "[{b}] {history:?}");
        assert_eq!(history[1]["updateTimestamp"], moved["lastUpdated"], "[{b}] {history:?}");

        // Lists agree (v1 lists every class; these are all plain tags).
        for (v1q, v2q) in [
            (format!("uidp.childrenOf={repo}"), format!("uidp.childrenOf={repo}")),
            (format!("digest={}", enc(&d2)), format!("digest={}", enc(&d2))),
            ("name=edge".to_owned(), "name=edge".to_owned()),
        ] {
            assert_lists_agree(&s, (TAG1, &v1q), (TAG2, &v2q, "tags"), assert_tag_same).await;
        }
        let all = v1_list(&s, &format!("{TAG1}?uidp.childrenOf={repo}")).await;
        assert_eq!(
            names(&all),
            ["edge", "stable", "v1", "v2"].map(String::from).into(),
            "[{b}]"
        );
        let on_d2 = v1_list(&s, &format!("{TAG1}?uidp.childrenOf={repo}&digest={}", enc(&d2))).await;
        assert_eq!(names(&on_d2), ["stable", "v2"].map(String::from).into(), "[{b}]");

        // The summary: no "latest", so the newest tag (stable, on d2); the
        // longest other name on its digest (v2).
        let summary = get(&s, &format!("/registry/v1/repotagssummary/{repo}")).await;
        assert_v1_names(&format!("[{b}] Registry.GetRepoTagsSummary"), &summary);
        assert_eq!(summary["id"], json!(repo), "[{b}] {summary}");
        assert_eq!(summary["tagCount"], "4", "[{b}] {summary}");
        assert_eq!(summary["lastUpdated"], moved["lastUpdated"], "[{b}] {summary}");
        assert_eq!(summary["latestTag"], moved, "[{b}] {summary}");
        assert_eq!(summary["latestVersion"], "v2", "[{b}] {summary}");

        // EOL tags: every tag, active, not grace-eligible (no EOL data).
        let eol = get(&s, &format!("/registry/v1/eoltags?uidp.childrenOf={repo}")).await;
        assert_eq!(eol["nextPageToken"], "", "[{b}] {eol}");
        let items = eol["items"].as_array().cloned().unwrap_or_default();
        let by_name: BTreeMap<String, String> = all.iter().map(|t| (s_of(t, "name").to_owned(), v1_id(t))).collect();
        assert_eq!(names(&items), by_name.keys().cloned().collect(), "[{b}] {eol}");
        for e in &items {
            assert_eq!(e["id"], json!(by_name[s_of(e, "name")]), "[{b}] {e}");
            assert_eq!(e["tagStatus"], "TAG_ACTIVE", "[{b}] {e}");
            assert_eq!(e["graceStatus"], "GRACE_NOT_ELIGIBLE", "[{b}] {e}");
        }

        // Delete through v1: gone for v2 and for the registry.
        delete_through_v1(&s, TAG1, TAG2, &uid(&edge)).await;
        assert_eq!(served(&s, &name, "edge").await, None, "[{b}]");
    }
}

/// What v1 tags do that v2's do not: every class listed unless excluded,
/// UpdateTag (only the digest; no renames, no unkept labels), the history of
/// moves whichever way they were made, and the summary preferring "latest".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_v1_classes_updates_and_history() {
    for s in common::servers().await {
        let b = s.backend;
        let acme = org(&s, "acme").await;
        let repo = v1_id(&post(&s, &format!("{REPO1}/{acme}"), json!({ "name": "app" })).await);
        let name = format!("{acme}/app");
        let d1 = push_image(&s, &name, "1.2").await;
        // A referrer tag (a signature's, on its own manifest) and two on the image.
        push_image(&s, &name, "sha256-abc.sig").await;
        for t in ["1.2-20240101", "latest"] {
            post(&s, &format!("{TAG1}/{repo}"), json!({ "name": t, "digest": d1 })).await;
        }

        // v1 lists referrer and dated tags unless excluded; v2 only when asked.
        let all = v1_list(&s, &format!("{TAG1}?uidp.childrenOf={repo}")).await;
        let every: BTreeSet<String> = ["1.2", "1.2-20240101", "latest", "sha256-abc.sig"]
            .map(String::from)
            .into();
        assert_eq!(names(&all), every, "[{b}] v1 lists every class");
        let plain = v1_list(
            &s,
            &format!("{TAG1}?uidp.childrenOf={repo}&excludeReferrers=true&excludeDates=true"),
        )
        .await;
        assert_eq!(names(&plain), ["1.2", "latest"].map(String::from).into(), "[{b}]");
        let v2 = v2_all(&s, &format!("{TAG2}?uidp.childrenOf={repo}"), "tags").await;
        assert_eq!(names(&v2), names(&plain), "[{b}] v2's default is v1's exclusions");
        let v2 = v2_all(
            &s,
            &format!("{TAG2}?uidp.childrenOf={repo}&includeReferrers=true&includeDates=true"),
            "tags",
        )
        .await;
        assert_eq!(names(&v2), every, "[{b}] and v2 asked for everything is v1's default");
        // EOL tags leave referrers out.
        let eol = get(&s, &format!("/registry/v1/eoltags?uidp.childrenOf={repo}")).await;
        let eol = eol["items"].as_array().cloned().unwrap_or_default();
        assert_eq!(
            names(&eol),
            ["1.2", "1.2-20240101", "latest"].map(String::from).into(),
            "[{b}]"
        );

        // The summary prefers the tag named "latest"; latestVersion is the
        // longest other name on its digest ("latest-dev" never counts).
        let summary = get(&s, &format!("/registry/v1/repotagssummary/{repo}")).await;
        assert_eq!(summary["latestTag"]["name"], "latest", "[{b}] {summary}");
        assert_eq!(summary["latestVersion"], "1.2-20240101", "[{b}] {summary}");
        assert_eq!(summary["tagCount"], "4", "[{b}] {summary}");
        let summary = get(
            &s,
            &format!("/registry/v1/repotagssummary/{repo}?excludeReferrers=true&excludeDates=true"),
        )
        .await;
        assert_eq!(
            (&summary["tagCount"], &summary["latestVersion"]),
            (&json!("2"), &json!("1.2")),
            "[{b}] {summary}"
        );

        // UpdateTag changes the digest and the labels: a rename or a label
        // outside the bundle syntax is refused.
        let tag = all.iter().find(|t| t["name"] == "1.2").expect("1.2").clone();
        let tid = v1_id(&tag);
        for (what, body, field) in [
            ("a rename", json!({ "name": "1.3", "digest": d1 }), "name"),
            (
                "a bad bundle",
                json!({ "digest": d1, "bundles": ["Not A Label!"] }),
                "bundles",
            ),
            (
                "a digest the repo lacks",
                json!({ "digest": sha256(b"nothing") }),
                "digest",
            ),
        ] {
            let (status, reply) = s.put(&format!("{TAG1}/{tid}"), body).await;
            assert_error(
                &format!("{b} UpdateTag with {what}"),
                status,
                &reply,
                400,
                3,
                "INVALID_ARGUMENT",
            );
            assert!(
                field_violations(&reply).iter().any(|(f, _)| f == field),
                "[{b}] {what}: names {field}: {reply}"
            );
        }
        assert_eq!(
            get(&s, &format!("{TAG2}/{tid}")).await["digest"],
            json!(d1),
            "[{b}] unchanged"
        );

        // Re-pointing at the same digest is no move: no history, no new time.
        s.clock.advance_millis(1_000);
        let same = put(&s, &format!("{TAG1}/{tid}"), json!({ "digest": d1 })).await;
        assert_eq!(same, tag, "[{b}] nothing moved");
        // A push to the tag moves it too, and the history records it.
        s.clock.advance_millis(1_000);
        let d2 = push_image(&s, &name, "1.2").await;
        let history = v1_list(&s, &format!("{TAG1}/{tid}/history")).await;
        let digests: Vec<&str> = history.iter().map(|h| s_of(h, "digest")).collect();
        assert_eq!(digests, [d1.as_str(), d2.as_str()], "[{b}] {history:?}");
        let now = get(&s, &format!("{TAG2}/{tid}")).await;
        assert_eq!(history[1]["updateTimestamp"], now["updateTime"], "[{b}] {history:?}");
        // The range filter: from the push on, only the push.
        let start = enc(s_of(&now, "updateTime"));
        let recent = v1_list(&s, &format!("{TAG1}/{tid}/history?start={start}")).await;
        assert_eq!(recent.len(), 1, "[{b}] {recent:?}");
        assert_eq!(recent[0]["digest"], json!(d2), "[{b}] {recent:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advisories_round_trip() {
    for s in common::servers().await {
        let b = s.backend;
        let acme = org(&s, "acme").await;
        let team = group(&s, &acme, "team").await;

        // v1 → v2 (v2 has no advisory writes: the other direction is v1's own list).
        let created = post(&s, ADV1, advisory_body(&s, &team, "openssl")).await;
        assert_v1_names(&format!("[{b}] Advisories.Create"), &created);
        assert_child(b, &team, &v1_id(&created));
        let v2 = get(&s, &format!("{ADV2}/{}", v1_id(&created))).await;
        assert_advisory_same(&format!("[{b}] v1-created advisory"), &created, &v2);
        let second = post(&s, ADV1, advisory_body(&s, &acme, "curl")).await;

        // v1 list by id and by uidp, against v2.
        let list = get(&s, &format!("{ADV1}?id={}", v1_id(&created))).await;
        assert_v1_names(&format!("[{b}] Advisories.List"), &list);
        let items = list["items"].as_array().cloned().unwrap_or_default();
        assert_eq!(items.len(), 1, "[{b}] {list}");
        assert_advisory_same(&format!("[{b}] listed advisory"), &items[0], &v2);
        let list = get(&s, &format!("{ADV1}?uidp.descendantsOf={acme}")).await;
        let mut v1: Vec<Value> = list["items"].as_array().cloned().unwrap_or_default();
        let mut v2s = v2_all(&s, &format!("{ADV2}?uidp.descendantsOf={acme}"), "advisories").await;
        v1.sort_by_key(v1_key);
        v2s.sort_by_key(uid);
        assert_eq!(v1_keys(&v1), v2_uids(&v2s), "[{b}] {list}");
        assert_eq!(v1.len(), 2, "[{b}]");
        for (a, c) in v1.iter().zip(&v2s) {
            assert_advisory_same(&format!("[{b}] descendants"), a, c);
        }
        assert!(v1_keys(&v1).contains(&v1_id(&second)), "[{b}]");
    }
}

// ===========================================================================
// 2. The migration rules (reference §3.9)
// ===========================================================================

/// Creates one of every v1 resource through v1 (and updates and lists
/// them); every v1 reply, labelled.
async fn v1_tour(s: &TestServer) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = Vec::new();
    let acme = org(s, "acme").await;
    let viewer = builtin("viewer");
    macro_rules! keep {
        ($label:expr, $v:expr) => {{
            let v: Value = $v;
            out.push(($label.to_owned(), v.clone()));
            v
        }};
    }
    let team = keep!(
        "Groups.Create",
        post(
            s,
            &format!("{G1}/{acme}"),
            json!({ "name": "team", "description": "d" })
        )
        .await
    );
    let team = v1_id(&team);
    keep!(
        "Groups.Update",
        put(s, &format!("{G1}/{team}"), json!({ "name": "team" })).await
    );
    let ident = keep!(
        "Identities.Create",
        post(
            s,
            &format!("{ID1}/{acme}"),
            json!({ "name": "ci", "claimMatch": { "issuer": "https://ci.example.com", "subject": "ci" } })
        )
        .await
    );
    let ident = v1_id(&ident);
    keep!(
        "Identities.Update",
        put(
            s,
            &format!("{ID1}/{ident}"),
            json!({ "name": "ci", "claimMatch": { "issuer": "https://ci.example.com", "subject": "ci2" } })
        )
        .await
    );
    let role = keep!(
        "Roles.Create",
        post(
            s,
            &format!("{R1}/{acme}"),
            json!({ "name": "r", "capabilities": ["groups.list"] })
        )
        .await
    );
    let role = v1_id(&role);
    keep!(
        "Roles.Update",
        put(
            s,
            &format!("{R1}/{role}"),
            json!({ "name": "r", "capabilities": ["roles.list"] })
        )
        .await
    );
    let rb = keep!(
        "RoleBindings.Create",
        post(
            s,
            &format!("{RB1}/{team}"),
            json!({ "identity": ident, "role": viewer })
        )
        .await
    );
    keep!(
        "RoleBindings.Update",
        put(
            s,
            &format!("{RB1}/{}", v1_id(&rb)),
            json!({ "identity": ident, "role": role })
        )
        .await
    );
    let other = identity(s, &acme, "other").await;
    keep!(
        "RoleBindings.CreateBatch",
        post(
            s,
            &format!("{RB1}/batch/{acme}"),
            json!([{ "identity": other, "role": viewer }])
        )
        .await
    );
    let idp = keep!(
        "IdentityProviders.Create",
        post(s, &format!("{IDP1}/{acme}"), idp_body("corp", "d", &viewer)).await
    );
    let idp = v1_id(&idp);
    keep!(
        "ExternalGroupRoleMappings.Create",
        post(
            s,
            &format!("{MAP1}/{idp}"),
            json!({ "externalGroupId": "eng", "roleUidp": viewer })
        )
        .await
    );
    keep!(
        "GroupAccountAssociations.Create",
        post(s, &format!("{AA1}/{team}"), association_body("a")).await
    );
    keep!(
        "GroupAccountAssociations.Update",
        put(s, &format!("{AA1}/{team}"), association_body("b")).await
    );
    keep!(
        "GroupInvites.Create",
        post(s, &format!("{INV1}/{team}"), json!({ "role": viewer, "ttl": "3600s" })).await
    );
    keep!(
        "Terms.AcceptTerms",
        post(s, &format!("{TERMS1}/{acme}"), json!({ "documentIds": ["tos.v1"] })).await
    );
    let repo = keep!(
        "Registry.CreateRepo",
        post(
            s,
            &format!("{REPO1}/{acme}"),
            json!({ "name": "app", "catalogTier": "BASE" })
        )
        .await
    );
    let repo = v1_id(&repo);
    keep!(
        "Registry.UpdateRepo",
        put(
            s,
            &format!("{REPO1}/{repo}"),
            json!({ "name": "app", "catalogTier": "AI" })
        )
        .await
    );
    let d = push_image(s, &format!("{acme}/app"), "v1").await;
    let tag = keep!(
        "Registry.CreateTag",
        post(s, &format!("{TAG1}/{repo}"), json!({ "name": "stable", "digest": d })).await
    );
    keep!(
        "Registry.UpdateTag",
        put(s, &format!("{TAG1}/{}", v1_id(&tag)), json!({ "digest": d })).await
    );
    keep!(
        "Registry.ListTagHistory",
        get(s, &format!("{TAG1}/{}/history", v1_id(&tag))).await
    );
    keep!(
        "Registry.GetRepoTagsSummary",
        get(s, &format!("/registry/v1/repotagssummary/{repo}")).await
    );
    keep!(
        "Registry.ListEolTags",
        get(s, &format!("/registry/v1/eoltags?uidp.childrenOf={repo}")).await
    );
    keep!(
        "Advisories.Create",
        post(s, ADV1, advisory_body(s, &acme, "openssl")).await
    );
    for (label, path) in [
        ("Groups.List", format!("{G1}?uidp.descendantsOf={acme}")),
        ("Identities.List", format!("{ID1}?uidp.descendantsOf={acme}")),
        ("Roles.List", format!("{R1}?uidp.descendantsOf={acme}")),
        ("RoleBindings.List", format!("{RB1}?uidp.descendantsOf={acme}")),
        ("IdentityProviders.List", format!("{IDP1}?uidp.descendantsOf={acme}")),
        (
            "ExternalGroupRoleMappings.List",
            format!("{MAP1}?identityProviderUidp={idp}"),
        ),
        ("GroupAccountAssociations.List", format!("{AA1}?group={team}")),
        ("GroupInvites.List", format!("{INV1}?group={team}")),
        ("Terms.ListAccepted", format!("{TERMS1}/{acme}")),
        ("Registry.ListRepos", format!("{REPO1}?uidp.descendantsOf={acme}")),
        ("Registry.ListTags", format!("{TAG1}?uidp.descendantsOf={acme}")),
        ("Advisories.List", format!("{ADV1}?uidp.descendantsOf={acme}")),
    ] {
        let v = get(s, &path).await;
        assert!(
            v["items"].as_array().is_some_and(|i| !i.is_empty()),
            "[{}] {label} lists something: {v}",
            s.backend
        );
        out.push((label.to_owned(), v));
    }
    out
}

/// Every resource object in a v1 reply: the objects holding a `name`,
/// `externalGroupId`, `keyId` or `artifactName` (GitHub installations aside).
fn resource_objects<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
    match v {
        Value::Object(m) => {
            if ["name", "externalGroupId", "keyId", "artifactName"]
                .iter()
                .any(|k| m.contains_key(*k))
                && !m.contains_key("installationId")
            {
                out.push(v);
            }
            for x in m.values() {
                resource_objects(x, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| resource_objects(x, out)),
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_a_v1_names_resources_by_id_never_uid() {
    for s in common::servers().await {
        let b = s.backend;
        let tour = v1_tour(&s).await;
        assert!(tour.len() >= 35, "[{b}] the tour covers every resource: {}", tour.len());
        for (label, reply) in &tour {
            let ctx = format!("[{b}] {label}");
            assert_v1_names(&ctx, reply);
            assert!(!reply.to_string().contains("\"uid\""), "{ctx}: \"uid\" in {reply}");
            // Every resource message is named by a non-empty id (account
            // associations by their group).
            let mut objs = Vec::new();
            resource_objects(reply, &mut objs);
            for o in objs {
                let key = if o.get("id").is_some() { "id" } else { "group" };
                let id = o[key].as_str().unwrap_or_default();
                assert!(!id.is_empty(), "{ctx}: a resource without an id: {o}");
            }
        }
        // The same resources through v2 are named by uid, never id.
        let acme = v1_id(&v1_one(&s, &format!("{G1}?uidp.inRoot=true&name=acme")).await);
        for (path, key) in [
            (format!("{G2}?uidp.descendantsOf={acme}"), "groups"),
            (format!("{ID2}?uidp.descendantsOf={acme}"), "identities"),
            (format!("{R2}?uidp.descendantsOf={acme}"), "roles"),
            (format!("{RB2}?uidp.descendantsOf={acme}"), "roleBindings"),
            (format!("{REPO2}?uidp.descendantsOf={acme}"), "repos"),
        ] {
            let items = v2_all(&s, &path, key).await;
            assert!(!items.is_empty(), "[{b}] {path}");
            for i in &items {
                assert!(i["uid"].is_string() && i.get("id").is_none(), "[{b}] {path}: {i}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_b_v1_times_are_created_at_and_updated_at() {
    for s in common::servers().await {
        let b = s.backend;
        let acme = org(&s, "acme").await;

        // An identity: createdAt/updatedAt in v1, createTime/updateTime in v2,
        // the same instants; an update moves both updatedAt and updateTime.
        let created = post(
            &s,
            &format!("{ID1}/{acme}"),
            json!({ "name": "ci", "claimMatch": { "issuer": "https://ci.example.com", "subject": "ci" } }),
        )
        .await;
        let id = v1_id(&created);
        for k in ["createdAt", "updatedAt"] {
            assert!(created[k].is_string(), "[{b}] v1 {k}: {created}");
        }
        s.clock.advance_millis(5_000);
        let updated = put(
            &s,
            &format!("{ID1}/{id}"),
            json!({ "name": "ci", "description": "now described",
                    "claimMatch": { "issuer": "https://ci.example.com", "subject": "ci" } }),
        )
        .await;
        assert_eq!(updated["createdAt"], created["createdAt"], "[{b}] {updated}");
        assert!(
            updated["updatedAt"].as_str() > created["updatedAt"].as_str(),
            "[{b}] updatedAt moves: {updated}"
        );
        let v2 = get(&s, &format!("{ID2}/{id}")).await;
        for (k1, k2) in [("createdAt", "createTime"), ("updatedAt", "updateTime")] {
            assert_eq!(updated[k1], v2[k2], "[{b}] v1 {k1} is v2 {k2}: {updated} vs {v2}");
            assert!(v2.get(k1).is_none(), "[{b}] no {k1} in v2: {v2}");
            assert!(updated.get(k2).is_none(), "[{b}] no {k2} in v1: {updated}");
        }

        // An advisory: the same pair.
        let adv = post(&s, ADV1, advisory_body(&s, &acme, "openssl")).await;
        let v2 = get(&s, &format!("{ADV2}/{}", v1_id(&adv))).await;
        assert_eq!(
            (&adv["createdAt"], &adv["updatedAt"]),
            (&v2["createTime"], &v2["updateTime"]),
            "[{b}]"
        );
        assert!(
            adv.get("createTime").is_none() && v2.get("createdAt").is_none(),
            "[{b}]"
        );

        // Listed bindings, stored invites and mappings: createdAt is v2's createTime.
        let ident = identity(&s, &acme, "alice").await;
        let rb = post(
            &s,
            &format!("{RB2}/{acme}"),
            json!({ "identityUid": ident, "roleUid": builtin("viewer") }),
        )
        .await;
        let listed = v1_one(&s, &format!("{RB1}?id={}", uid(&rb))).await;
        assert_eq!(listed["createdAt"], rb["createTime"], "[{b}] binding: {listed}");
        let inv = post(
            &s,
            &format!("{INV2}/{acme}"),
            json!({ "roleUid": builtin("viewer"), "ttl": "3600s" }),
        )
        .await;
        let listed = v1_one(&s, &format!("{INV1}?id={}", uid(&inv))).await;
        assert_eq!(listed["createdAt"], inv["createTime"], "[{b}] invite: {listed}");
        assert_eq!(listed["expiration"], inv["expirationTime"], "[{b}] invite: {listed}");
        let idp = uid(&post(&s, &format!("{IDP2}/{acme}"), idp_body("corp", "", &builtin("viewer"))).await);
        let m = post(
            &s,
            &format!("{MAP2}/{idp}"),
            json!({ "externalGroupId": "eng", "roleUid": builtin("viewer") }),
        )
        .await;
        let got = get(&s, &format!("{MAP1}/{}", uid(&m))).await;
        assert_eq!(got["createdAt"], m["createTime"], "[{b}] mapping: {got}");

        // Tags: lastUpdated; repos keep v1's own create_time (and have no update time).
        let repo = post(&s, &format!("{REPO2}/{acme}"), json!({ "name": "app" })).await;
        let listed = v1_one(&s, &format!("{REPO1}?id={}", uid(&repo))).await;
        assert_eq!(listed["createTime"], repo["createTime"], "[{b}] {listed}");
        assert!(
            listed.get("updateTime").is_none() && listed.get("updatedAt").is_none(),
            "[{b}] {listed}"
        );
        let d = push_image(&s, &format!("{acme}/app"), "v1").await;
        let tag = v2_all(&s, &format!("{TAG2}?uidp.childrenOf={}&name=v1", uid(&repo)), "tags").await[0].clone();
        let listed = v1_one(&s, &format!("{TAG1}?id={}", uid(&tag))).await;
        assert_eq!(
            (&listed["digest"], &listed["lastUpdated"]),
            (&json!(d), &tag["updateTime"]),
            "[{b}] {listed}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_c_v1_lists_are_the_whole_result_set() {
    const N: usize = 250;
    for s in common::servers().await {
        let b = s.backend;
        let acme = org(&s, "acme").await;
        let mut roles = BTreeSet::new();
        let mut groups = BTreeSet::new();
        for i in 0..N {
            let r = post(
                &s,
                &format!("{R2}/{acme}"),
                json!({ "name": format!("role-{i:03}"), "capabilities": ["CAP_IAM_GROUPS_LIST"] }),
            )
            .await;
            roles.insert(uid(&r));
            groups.insert(group(&s, &acme, &format!("group-{i:03}")).await);
        }

        for (v1, v2, key, made) in [(R1, R2, "roles", &roles), (G1, G2, "groups", &groups)] {
            // v2 pages: 200 at most, then a next page.
            let page = get(&s, &format!("{v2}?uidp.childrenOf={acme}&pageSize=200")).await;
            assert_eq!(
                page[key].as_array().map(Vec::len),
                Some(200),
                "[{b}] one v2 page of {key}"
            );
            assert!(
                !s_of(&page, "nextPageToken").is_empty(),
                "[{b}] v2 has another page of {key}"
            );
            assert_eq!(common::total_count(&page), N as i64, "[{b}] {key}");

            // v1: all of them in one reply of only items.
            let path = format!("{v1}?uidp.childrenOf={acme}");
            let body = get(&s, &path).await;
            let keys: Vec<&String> = body.as_object().expect("object").keys().collect();
            assert_eq!(keys, ["items"], "[{b}] {path}: no nextPageToken, no totalCount");
            let items = body["items"].as_array().cloned().unwrap_or_default();
            assert_eq!(items.len(), N, "[{b}] {path}: every {key} in one v1 list");
            let got: BTreeSet<String> = items.iter().map(v1_id).collect();
            assert_eq!(&got, made, "[{b}] {path}: exactly the {key} made");
        }

        // Unfiltered, too: v1 has all that v2 counts.
        for (v1, v2, key) in [(R1, R2, "roles"), (G1, G2, "groups")] {
            let total = common::total_count(&get(&s, v2).await);
            assert!(total > N as i64, "[{b}] {v2}: {total}");
            let items = v1_list(&s, v1).await;
            assert_eq!(items.len() as i64, total, "[{b}] every {key} in GET {v1}");
        }

        // v1 lists take no paging parameters at all.
        for q in ["pageSize=10", "pageToken=abc", "skip=1", "orderBy=name"] {
            let (status, body) = s.get(&format!("{R1}?{q}")).await;
            assert_error(&format!("{b} ?{q}"), status, &body, 400, 3, "INVALID_ARGUMENT");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_d_put_is_a_full_replacement() {
    for s in common::servers().await {
        let b = s.backend;
        let acme = org(&s, "acme").await;
        let globex = org(&s, "globex").await;
        let (_, stranger) = person(&s, "stranger", &[(globex.as_str(), "owner")]).await;
        const LONG_AGO: &str = "2001-01-01T00:00:00Z";

        // Group: an omitted description is cleared; a different id and a
        // createdAt in the body are ignored (the path names the group).
        let team = v1_id(
            &post(
                &s,
                &format!("{G1}/{acme}"),
                json!({ "name": "team", "description": "the team" }),
            )
            .await,
        );
        let other = post(
            &s,
            &format!("{G2}/{acme}"),
            json!({ "name": "other", "description": "another" }),
        )
        .await;
        let before = get(&s, &format!("{G2}/{team}")).await;
        let replaced = put(
            &s,
            &format!("{G1}/{team}"),
            json!({ "id": uid(&other), "name": "team-2", "createdAt": LONG_AGO }),
        )
        .await;
        assert_eq!(
            (&replaced["id"], &replaced["name"], &replaced["description"]),
            (&json!(team), &json!("team-2"), &json!("")),
            "[{b}] {replaced}"
        );
        let after = get(&s, &format!("{G2}/{team}")).await;
        assert_eq!(
            (&after["name"], &after["description"]),
            (&json!("team-2"), &json!("")),
            "[{b}] {after}"
        );
        assert_eq!(
            after["createTime"], before["createTime"],
            "[{b}] createTime is output only"
        );
        assert_eq!(
            get(&s, &format!("{G2}/{}", uid(&other))).await,
            other,
            "[{b}] the body's id names nothing"
        );

        // Role: description cleared, capabilities replaced (not merged).
        let role = v1_id(
            &post(
                &s,
                &format!("{R1}/{acme}"),
                json!({ "name": "r", "description": "d", "capabilities": ["groups.list", "roles.list"] }),
            )
            .await,
        );
        put(
            &s,
            &format!("{R1}/{role}"),
            json!({ "name": "r", "capabilities": ["repo.list"] }),
        )
        .await;
        let v2 = get(&s, &format!("{R2}/{role}")).await;
        assert_eq!(
            (&v2["description"], &v2["capabilities"]),
            (&json!(""), &json!(["CAP_REPO_LIST"])),
            "[{b}] {v2}"
        );

        // Repo: every field v1 has is replaced, the readme too; createTime and
        // a foreign id in the body are ignored.
        let repo = v1_id(
            &post(
                &s,
                &format!("{REPO1}/{acme}"),
                json!({ "name": "app", "description": "d", "catalogTier": "FIPS", "bundles": ["fips"],
                        "aliases": ["docker.io/library/app:latest"], "activeTags": ["latest"], "readme": "# App" }),
            )
            .await,
        );
        let before = get(&s, &format!("{REPO2}/{repo}")).await;
        put(
            &s,
            &format!("{REPO1}/{repo}"),
            json!({ "id": team, "name": "app", "createTime": LONG_AGO }),
        )
        .await;
        let v2 = get(&s, &format!("{REPO2}/{repo}")).await;
        assert_eq!(v2["description"], "", "[{b}] {v2}");
        assert_eq!(v2["catalogTier"], "CATALOG_TIER_UNSPECIFIED", "[{b}] {v2}");
        for k in ["bundles", "aliases", "activeTags"] {
            assert_eq!(v2[k], json!([]), "[{b}] {k}: {v2}");
        }
        assert_eq!(
            v2["createTime"], before["createTime"],
            "[{b}] createTime is output only"
        );
        assert_eq!(
            get(&s, &format!("{REPO2}/{repo}/readme")).await["content"],
            "",
            "[{b}] the readme is cleared"
        );

        // Identity: description cleared; createdAt/updatedAt in the body ignored.
        let ident = post(
            &s,
            &format!("{ID1}/{acme}"),
            json!({ "name": "ci", "description": "d", "claimMatch": { "issuer": "https://ci.example.com", "subject": "ci" } }),
        )
        .await;
        let iid = v1_id(&ident);
        s.clock.advance_millis(1_000);
        put(
            &s,
            &format!("{ID1}/{iid}"),
            json!({ "name": "ci", "createdAt": LONG_AGO, "updatedAt": LONG_AGO,
                    "claimMatch": { "issuer": "https://ci.example.com", "subject": "ci" } }),
        )
        .await;
        let v2 = get(&s, &format!("{ID2}/{iid}")).await;
        assert_eq!(v2["description"], "", "[{b}] {v2}");
        assert_eq!(v2["createTime"], ident["createdAt"], "[{b}] {v2}");
        assert!(
            v2["updateTime"].as_str() > ident["updatedAt"].as_str(),
            "[{b}] the server's time, not the body's: {v2}"
        );

        // A resource the caller cannot see, or that does not exist: NOT_FOUND, unchanged.
        let missing = format!("{acme}/0000000000000000");
        for (path, body, v2_path) in [
            (format!("{G1}/{team}"), json!({ "name": "x" }), format!("{G2}/{team}")),
            (
                format!("{R1}/{role}"),
                json!({ "name": "x", "capabilities": ["groups.list"] }),
                format!("{R2}/{role}"),
            ),
            (
                format!("{REPO1}/{repo}"),
                json!({ "name": "x" }),
                format!("{REPO2}/{repo}"),
            ),
            (
                format!("{ID1}/{iid}"),
                json!({ "name": "x", "claimMatch": { "issuer": "https://ci.example.com", "subject": "x" } }),
                format!("{ID2}/{iid}"),
            ),
        ] {
            let before = get(&s, &v2_path).await;
            let (status, reply) = s.call_as(&stranger, Method::PUT, &path, Some(body.clone())).await;
            assert_error(&format!("{b} stranger PUT {path}"), status, &reply, 404, 5, "NOT_FOUND");
            assert_eq!(get(&s, &v2_path).await, before, "[{b}] {path} unchanged");
        }
        for path in [
            format!("{G1}/{missing}"),
            format!("{R1}/{missing}"),
            format!("{REPO1}/{missing}"),
        ] {
            let (status, reply) = s
                .put(&path, json!({ "name": "x", "capabilities": ["groups.list"] }))
                .await;
            assert_error(&format!("{b} PUT {path}"), status, &reply, 404, 5, "NOT_FOUND");
        }
    }
}

// ===========================================================================
// 3. v1 over gRPC
// ===========================================================================

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_groups_over_grpc_agree_with_rest() {
    for s in common::servers().await {
        let b = s.backend;
        let acme = org(&s, "acme").await;
        let ch = channel(&s).await;
        let mut groups = GroupsClient::with_interceptor(ch.clone(), Bearer(s.token.clone()));

        let created = groups
            .create(iam1::CreateGroupRequest {
                parent: acme.clone(),
                group: Some(iam1::Group {
                    name: "grpc-team".into(),
                    description: "over gRPC".into(),
                    ..Default::default()
                }),
            })
            .await
            .unwrap_or_else(|e| panic!("[{b}] Groups.Create: {e:?}"))
            .into_inner();
        assert_child(b, &acme, &created.id);
        // REST (v1) answers with the same message; v2 agrees.
        let rest = v1_one(&s, &format!("{G1}?id={}", created.id)).await;
        assert_eq!(to_json!(created), rest, "[{b}] gRPC and REST v1 agree");
        assert_group_same(
            &format!("[{b}] gRPC group"),
            &rest,
            &get(&s, &format!("{G2}/{}", created.id)).await,
        );

        // List: the same items as the REST list with the same filter.
        post(&s, &format!("{G1}/{acme}"), json!({ "name": "rest-team" })).await;
        let list = groups
            .list(iam1::GroupFilter {
                uidp: children_of(&acme),
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("[{b}] Groups.List: {e:?}"))
            .into_inner();
        assert_eq!(list.items.len(), 2, "[{b}] {list:?}");
        let rest = get(&s, &format!("{G1}?uidp.childrenOf={acme}")).await;
        assert_eq!(
            sorted_items(&to_json!(list)),
            sorted_items(&rest),
            "[{b}] gRPC and REST lists agree"
        );

        // Update (full replacement) and delete.
        let updated = groups
            .update(iam1::Group {
                id: created.id.clone(),
                name: "grpc-team-2".into(),
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("[{b}] Groups.Update: {e:?}"))
            .into_inner();
        assert_eq!(
            (updated.name.as_str(), updated.description.as_str()),
            ("grpc-team-2", ""),
            "[{b}]"
        );
        let v2 = get(&s, &format!("{G2}/{}", created.id)).await;
        assert_eq!(
            (&v2["name"], &v2["description"]),
            (&json!("grpc-team-2"), &json!("")),
            "[{b}] {v2}"
        );

        // Another organization's caller: NOT_FOUND, and an empty list.
        let globex = org(&s, "globex").await;
        let (_, stranger) = person(&s, "stranger", &[(globex.as_str(), "owner")]).await;
        let mut theirs = GroupsClient::with_interceptor(ch.clone(), Bearer(stranger));
        let e = theirs
            .delete(iam1::DeleteGroupRequest { id: created.id.clone() })
            .await
            .expect_err("a stranger cannot delete");
        assert_eq!(e.code(), Code::NotFound, "[{b}] {e:?}");
        let seen = theirs
            .list(iam1::GroupFilter {
                id: created.id.clone(),
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("[{b}] stranger list: {e:?}"))
            .into_inner();
        assert!(seen.items.is_empty(), "[{b}] {seen:?}");
        // No token at all: UNAUTHENTICATED.
        let e = GroupsClient::new(ch.clone())
            .list(iam1::GroupFilter::default())
            .await
            .expect_err("a token is required");
        assert_eq!(e.code(), Code::Unauthenticated, "[{b}] {e:?}");

        groups
            .delete(iam1::DeleteGroupRequest { id: created.id.clone() })
            .await
            .unwrap_or_else(|e| panic!("[{b}] Groups.Delete: {e:?}"));
        let (status, body) = s.get(&format!("{G2}/{}", created.id)).await;
        assert_error(b, status, &body, 404, 5, "NOT_FOUND");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_roles_over_grpc_agree_with_rest() {
    for s in common::servers().await {
        let b = s.backend;
        let acme = org(&s, "acme").await;
        let mut roles = RolesClient::with_interceptor(channel(&s).await, Bearer(s.token.clone()));

        let created = roles
            .create(iam1::CreateRoleRequest {
                parent_id: acme.clone(),
                role: Some(iam1::Role {
                    name: "grpc-lister".into(),
                    description: "lists".into(),
                    capabilities: vec!["groups.list".into(), "repo.list".into()],
                    ..Default::default()
                }),
            })
            .await
            .unwrap_or_else(|e| panic!("[{b}] Roles.Create: {e:?}"))
            .into_inner();
        assert_eq!(created.capabilities, ["groups.list", "repo.list"], "[{b}]");
        let v2 = get(&s, &format!("{R2}/{}", created.id)).await;
        assert_eq!(
            v2["capabilities"],
            json!(["CAP_IAM_GROUPS_LIST", "CAP_REPO_LIST"]),
            "[{b}] {v2}"
        );
        let rest = v1_one(&s, &format!("{R1}?id={}", created.id)).await;
        assert_eq!(to_json!(created), rest, "[{b}] gRPC and REST v1 agree");

        let list = roles
            .list(iam1::RoleFilter {
                parent: acme.clone(),
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("[{b}] Roles.List: {e:?}"))
            .into_inner();
        let rest = get(&s, &format!("{R1}?parent={acme}")).await;
        assert_eq!(sorted_items(&to_json!(list)), sorted_items(&rest), "[{b}]");
        assert_eq!(list.items.len(), 1, "[{b}] {list:?}");

        let e = roles
            .create(iam1::CreateRoleRequest {
                parent_id: acme.clone(),
                role: Some(iam1::Role {
                    name: "bad".into(),
                    capabilities: vec!["not.a.capability".into()],
                    ..Default::default()
                }),
            })
            .await
            .expect_err("an unknown capability");
        assert_eq!(e.code(), Code::InvalidArgument, "[{b}] {e:?}");

        let updated = roles
            .update(iam1::Role {
                id: created.id.clone(),
                name: "grpc-lister".into(),
                capabilities: vec!["roles.list".into()],
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("[{b}] Roles.Update: {e:?}"))
            .into_inner();
        assert_eq!(
            to_json!(updated),
            v1_one(&s, &format!("{R1}?id={}", created.id)).await,
            "[{b}]"
        );
        let v2 = get(&s, &format!("{R2}/{}", created.id)).await;
        assert_eq!(
            (&v2["description"], &v2["capabilities"]),
            (&json!(""), &json!(["CAP_IAM_ROLES_LIST"])),
            "[{b}] {v2}"
        );

        roles
            .delete(iam1::DeleteRoleRequest { id: created.id.clone() })
            .await
            .unwrap_or_else(|e| panic!("[{b}] Roles.Delete: {e:?}"));
        assert!(
            v1_list(&s, &format!("{R1}?id={}", created.id)).await.is_empty(),
            "[{b}]"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_registry_repos_over_grpc_agree_with_rest() {
    for s in common::servers().await {
        let b = s.backend;
        let acme = org(&s, "acme").await;
        let mut registry = RegistryClient::with_interceptor(channel(&s).await, Bearer(s.token.clone()));

        let created = registry
            .create_repo(reg1::CreateRepoRequest {
                parent_id: acme.clone(),
                repo: Some(reg1::Repo {
                    name: "grpc-app".into(),
                    description: "over gRPC".into(),
                    catalog_tier: reg1::CatalogTier::Devtools as i32,
                    bundles: vec!["base".into()],
                    readme: "# gRPC".into(),
                    ..Default::default()
                }),
                prevent_existing: true,
            })
            .await
            .unwrap_or_else(|e| panic!("[{b}] Registry.CreateRepo: {e:?}"))
            .into_inner();
        assert_eq!(created.catalog_tier, 8, "[{b}] DEVTOOLS is 8 in v1");
        let v2 = get(&s, &format!("{REPO2}/{}", created.id)).await;
        assert_eq!(v2["catalogTier"], "CATALOG_TIER_DEVTOOLS", "[{b}] {v2}");
        let rest = v1_one(&s, &format!("{REPO1}?id={}", created.id)).await;
        assert_eq!(to_json!(created), rest, "[{b}] gRPC and REST v1 agree");
        assert_repo_same(&format!("[{b}] gRPC repo"), &rest, &v2);

        // prevent_existing: a second create of the name is ALREADY_EXISTS.
        let e = registry
            .create_repo(reg1::CreateRepoRequest {
                parent_id: acme.clone(),
                repo: Some(reg1::Repo {
                    name: "grpc-app".into(),
                    ..Default::default()
                }),
                prevent_existing: true,
            })
            .await
            .expect_err("the name is taken");
        assert_eq!(e.code(), Code::AlreadyExists, "[{b}] {e:?}");

        let list = registry
            .list_repos(reg1::RepoFilter {
                uidp: children_of(&acme),
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("[{b}] Registry.ListRepos: {e:?}"))
            .into_inner();
        let rest = get(&s, &format!("{REPO1}?uidp.childrenOf={acme}")).await;
        assert_eq!(sorted_items(&to_json!(list)), sorted_items(&rest), "[{b}]");
        assert_eq!(list.items.len(), 1, "[{b}]");

        let updated = registry
            .update_repo(reg1::Repo {
                id: created.id.clone(),
                name: "grpc-app".into(),
                catalog_tier: reg1::CatalogTier::Application as i32,
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("[{b}] Registry.UpdateRepo: {e:?}"))
            .into_inner();
        assert_eq!(
            to_json!(updated),
            v1_one(&s, &format!("{REPO1}?id={}", created.id)).await,
            "[{b}]"
        );
        let v2 = get(&s, &format!("{REPO2}/{}", created.id)).await;
        assert_eq!(v2["catalogTier"], "CATALOG_TIER_APPLICATION", "[{b}] {v2}");
        assert_eq!(
            (&v2["description"], &v2["bundles"]),
            (&json!(""), &json!([])),
            "[{b}] {v2}"
        );

        registry
            .delete_repo(reg1::DeleteRepoRequest { id: created.id.clone() })
            .await
            .unwrap_or_else(|e| panic!("[{b}] Registry.DeleteRepo: {e:?}"));
        let (status, body) = s.get(&format!("{REPO2}/{}", created.id)).await;
        assert_error(b, status, &body, 404, 5, "NOT_FOUND");
    }
}

// ===========================================================================
// 4. Errors and bounds through v1
// ===========================================================================

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_refuses_unknown_query_parameters_and_bad_json() {
    for s in common::servers().await {
        let b = s.backend;
        let acme = org(&s, "acme").await;

        for path in [
            format!("{G1}?bogus=1"),
            format!("{G1}?uidp.bogus={acme}"),
            format!("{R1}?pageSize=5"),
            format!("{REPO1}?bogus=x"),
            format!("{ID1}?name=x"),
        ] {
            let (status, body) = s.get(&path).await;
            assert_error(&format!("{b} GET {path}"), status, &body, 400, 3, "INVALID_ARGUMENT");
            assert!(
                !field_violations(&body).is_empty(),
                "[{b}] {path}: names the parameter: {body}"
            );
        }
        let (status, body) = s.get(&format!("{G1}?bogus=1")).await;
        assert!(
            field_violations(&body).iter().any(|(f, _)| f == "bogus"),
            "[{b}] {status} {body}"
        );
        // A body field given as a query parameter of a `body: *` binding.
        let (status, body) = s.put(&format!("{G1}/{acme}?name=x"), json!({ "name": "acme" })).await;
        assert_error(&format!("{b} PUT ?name="), status, &body, 400, 3, "INVALID_ARGUMENT");

        for (method, path, bytes) in [
            (Method::POST, format!("{G1}/{acme}"), "{not json"),
            (Method::PUT, format!("{G1}/{acme}"), "{\"name\": "),
            (Method::POST, format!("{R1}/{acme}"), "[1, 2"),
            (Method::PUT, format!("{G1}/{acme}"), "[1, 2]"),
            (Method::POST, format!("{REPO1}/{acme}"), "{\"name\": 7}"),
        ] {
            let (status, _, body) = raw(&s, method.clone(), &path, Some(&s.token), Some(bytes)).await;
            assert_error(
                &format!("{b} {method} {path} {bytes:?}"),
                status,
                &body,
                400,
                3,
                "INVALID_ARGUMENT",
            );
        }
        assert_eq!(
            v1_keys(&v1_list(&s, &format!("{G1}?uidp.descendantsOf={acme}")).await),
            std::slice::from_ref(&acme),
            "[{b}] nothing was made"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_hides_another_organizations_resources() {
    for s in common::servers().await {
        let b = s.backend;
        let acme = org(&s, "acme").await;
        let globex = org(&s, "globex").await;
        let team = group(&s, &acme, "team").await;
        let role = uid(&post(
            &s,
            &format!("{R2}/{acme}"),
            json!({ "name": "r", "capabilities": ["CAP_IAM_GROUPS_LIST"] }),
        )
        .await);
        let repo = uid(&post(&s, &format!("{REPO2}/{acme}"), json!({ "name": "app" })).await);
        let ident = identity(&s, &acme, "ci").await;
        let (_, stranger) = person(&s, "stranger", &[(globex.as_str(), "owner")]).await;

        // PUT and DELETE of acme's ids: NOT_FOUND, nothing changed.
        for (path, body, v2_path) in [
            (format!("{G1}/{team}"), json!({ "name": "x" }), format!("{G2}/{team}")),
            (
                format!("{R1}/{role}"),
                json!({ "name": "x", "capabilities": ["groups.list"] }),
                format!("{R2}/{role}"),
            ),
            (
                format!("{REPO1}/{repo}"),
                json!({ "name": "x" }),
                format!("{REPO2}/{repo}"),
            ),
            (
                format!("{ID1}/{ident}"),
                json!({ "name": "x" }),
                format!("{ID2}/{ident}"),
            ),
        ] {
            let before = get(&s, &v2_path).await;
            let (status, reply) = s.call_as(&stranger, Method::PUT, &path, Some(body)).await;
            assert_error(&format!("{b} stranger PUT {path}"), status, &reply, 404, 5, "NOT_FOUND");
            let (status, reply) = s.call_as(&stranger, Method::DELETE, &path, None).await;
            assert_error(
                &format!("{b} stranger DELETE {path}"),
                status,
                &reply,
                404,
                5,
                "NOT_FOUND",
            );
            assert_eq!(get(&s, &v2_path).await, before, "[{b}] {path} unchanged");
        }

        // List: an empty list for acme's ids, never the items.
        for path in [
            format!("{G1}?id={team}"),
            format!("{G1}?uidp.descendantsOf={acme}"),
            format!("{R1}?id={role}"),
            format!("{REPO1}?id={repo}"),
            format!("{ID1}?id={ident}"),
            format!("{RB1}?uidp.descendantsOf={acme}"),
        ] {
            let items = v1_list_as(&s, &stranger, &path).await;
            assert!(items.is_empty(), "[{b}] stranger GET {path}: {items:?}");
        }
        // Unfiltered: only their own organization.
        let seen = v1_list_as(&s, &stranger, G1).await;
        assert_eq!(v1_keys(&seen), std::slice::from_ref(&globex), "[{b}] {seen:?}");
        let seen = v1_list_as(&s, &stranger, REPO1).await;
        assert!(seen.is_empty(), "[{b}] {seen:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_needs_a_token_and_routes_strictly() {
    for s in common::servers().await {
        let b = s.backend;
        let acme = org(&s, "acme").await;

        // No token (or a bad one): 401 UNAUTHENTICATED.
        for (method, path) in [
            (Method::GET, G1.to_owned()),
            (Method::GET, format!("{REPO1}?id={acme}")),
            (Method::PUT, format!("{G1}/{acme}")),
            (Method::POST, format!("{R1}/{acme}")),
        ] {
            let body = (method != Method::GET).then(|| json!({ "name": "x" }));
            let (status, reply) = s.call_as("", method.clone(), &path, body.clone()).await;
            assert_error(
                &format!("{b} {method} {path} without a token"),
                status,
                &reply,
                401,
                16,
                "UNAUTHENTICATED",
            );
            let (status, reply) = s.call_as("not-a-token", method.clone(), &path, body).await;
            assert_error(
                &format!("{b} {method} {path} with a bad token"),
                status,
                &reply,
                401,
                16,
                "UNAUTHENTICATED",
            );
        }
        assert_eq!(
            get(&s, &format!("{G2}/{acme}")).await["name"],
            "acme",
            "[{b}] unchanged"
        );

        // Unknown paths under /iam/v1/: 404.
        for path in ["/iam/v1/nonsense", "/iam/v1/groupz", "/registry/v1/nothing"] {
            let (status, body) = s.get(path).await;
            assert_error(&format!("{b} GET {path}"), status, &body, 404, 5, "NOT_FOUND");
        }

        // A v1 path with the wrong method: 405 naming the methods it has.
        for (method, path, allow) in [
            (Method::PATCH, format!("{G1}/{acme}"), "DELETE, POST, PUT"),
            (Method::DELETE, G1.to_owned(), "GET"),
            (Method::GET, format!("{RB1}/{acme}"), "DELETE, POST, PUT"),
            (Method::POST, format!("/registry/v1/repotagssummary/{acme}"), "GET"),
            (Method::PUT, "/ping/v1/ping".to_owned(), "GET"),
        ] {
            let (status, headers, body) = raw(&s, method.clone(), &path, Some(&s.token), None).await;
            assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "[{b}] {method} {path}: {body}");
            let got = headers.get(ALLOW).and_then(|v| v.to_str().ok()).unwrap_or_default();
            let mut got: BTreeSet<&str> = got.split(',').map(str::trim).collect();
            let want: BTreeSet<&str> = allow.split(',').map(str::trim).collect();
            // HEAD may be offered wherever GET is (see v1_head_is_served_where_get_is).
            if got.remove("HEAD") {
                assert!(want.contains("GET"), "[{b}] {method} {path}: HEAD without GET");
            }
            assert_eq!(got, want, "[{b}] {method} {path}: Allow");
        }

        // POST /iam/v1/groups/ with an empty parent creates an organization.
        let made = post(
            &s,
            &format!("{G1}/"),
            json!({ "name": "new-org", "description": "made through v1" }),
        )
        .await;
        let id = v1_id(&made);
        assert!(is_hex(&id, 40), "[{b}] a root uid: {made}");
        let v2 = get(&s, &format!("{G2}/{id}")).await;
        assert_group_same(&format!("[{b}] new organization"), &made, &v2);
        let roots = v1_list(&s, &format!("{G1}?uidp.inRoot=true")).await;
        assert!(v1_keys(&roots).contains(&id), "[{b}] {roots:?}");
        // Which is the server admin's to do: an organization's owner may not.
        let (_, owner) = person(&s, "owner", &[(acme.as_str(), "owner")]).await;
        let (status, body) = s
            .call_as(
                &owner,
                Method::POST,
                &format!("{G1}/"),
                Some(json!({ "name": "owners-org" })),
            )
            .await;
        assert_error(b, status, &body, 403, 7, "PERMISSION_DENIED");
    }
}

/// A 405 on a v1 path advertises HEAD wherever GET is (as HTTP has it, and
/// as the v2 paths serve it): HEAD is then GET without a body, not a 405.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_head_is_served_where_get_is() {
    for s in common::servers().await {
        let b = s.backend;
        let acme = org(&s, "acme").await;
        for (v1, v2) in [
            (format!("{G1}?id={acme}"), format!("{G2}/{acme}")),
            (REPO1.to_owned(), REPO2.to_owned()),
            ("/ping/v1/ping".to_owned(), "/ping/v2/ping".to_owned()),
        ] {
            let (status, _, _) = raw(&s, Method::HEAD, &v2, Some(&s.token), None).await;
            assert_eq!(status, StatusCode::OK, "[{b}] HEAD {v2}");
            let (_, headers, _) = raw(&s, Method::PATCH, &v1, Some(&s.token), None).await;
            let allow = headers
                .get(ALLOW)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            let (status, headers, body) = raw(&s, Method::HEAD, &v1, Some(&s.token), None).await;
            assert_eq!(
                status,
                StatusCode::OK,
                "[{b}] HEAD {v1} (a 405 on this path said Allow: {allow}; this one says {:?}) {body}",
                headers.get(ALLOW)
            );
            assert_eq!(body, json!(""), "[{b}] HEAD {v1} has no body");
        }
    }
}

// ===========================================================================
// 5. Public v1 endpoints
// ===========================================================================

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn public_v1_endpoints_need_no_token() {
    for s in common::servers().await {
        let b = s.backend;

        let (status, _, ping) = raw(&s, Method::GET, "/ping/v1/ping", None, None).await;
        assert_eq!(status, StatusCode::OK, "[{b}] ping: {ping}");
        let keys: Vec<&String> = ping.as_object().map(|m| m.keys().collect()).unwrap_or_default();
        let grpc = ward_proto::ping::ping_service_client::PingServiceClient::new(channel(&s).await)
            .ping(ward_proto::ping::PingRequest {})
            .await
            .unwrap_or_else(|e| panic!("[{b}] gRPC ping without a token: {e:?}"))
            .into_inner();
        assert_eq!(to_json!(grpc), ping, "[{b}] gRPC and REST pings agree");
        assert_eq!(keys, ["response"], "[{b}] ping: {ping}");
        assert!(
            ping["response"].as_str().is_some_and(|r| !r.is_empty()),
            "[{b}] ping: {ping}"
        );

        // An approved advisory: visible to the admin, not to anonymous
        // callers (no group is public); v1 and v2 say the same either way.
        let acme = org(&s, "acme").await;
        let adv = post(&s, ADV1, advisory_body(&s, &acme, "zephyr")).await;
        let (_, approver) = person(&s, "approver", &[(acme.as_str(), "advisories.approver")]).await;
        let event = v1_id(&adv["events"][0]);
        ok_as(
            &s,
            &approver,
            Method::PUT,
            &format!("{EVENTS1}/{event}"),
            Some(json!({ "status": "APPROVED" })),
        )
        .await;

        for (who, token) in [("anonymous", None), ("admin", Some(s.token.as_str()))] {
            let (status, _, v1) = raw(&s, Method::GET, "/advisory/v1/documents?id=zephyr", token, None).await;
            assert_eq!(status, StatusCode::OK, "[{b}] {who} v1 documents: {v1}");
            let keys: Vec<&String> = v1.as_object().map(|m| m.keys().collect()).unwrap_or_default();
            assert_eq!(keys, ["items"], "[{b}] {who}: {v1}");
            let (status, _, v2) = raw(&s, Method::GET, "/advisory/v2/documents?id=zephyr", token, None).await;
            assert_eq!(status, StatusCode::OK, "[{b}] {who} v2 documents: {v2}");
            let (v1d, v2d) = (
                v1["items"].as_array().cloned().unwrap_or_default(),
                v2["documents"].as_array().cloned().unwrap_or_default(),
            );
            assert_eq!(v1d.len(), v2d.len(), "[{b}] {who}: {v1} vs {v2}");
            for (d1, d2) in v1d.iter().zip(&v2d) {
                assert_eq!(d1["id"], d2["id"], "[{b}] {who}");
                let ids = |d: &Value| -> Vec<(Value, Value, usize)> {
                    d["advisories"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|a| {
                            (
                                a["id"].clone(),
                                a["aliases"].clone(),
                                a["events"].as_array().map_or(0, Vec::len),
                            )
                        })
                        .collect()
                };
                assert_eq!(ids(d1), ids(d2), "[{b}] {who}: {d1} vs {d2}");
            }
            let want = usize::from(token.is_some());
            assert_eq!(v1d.len(), want, "[{b}] {who} sees {want} document(s): {v1}");
        }
        // Neither version lists every document at once: an id or cves is required.
        for path in ["/advisory/v1/documents", "/advisory/v2/documents"] {
            let (status, _, body) = raw(&s, Method::GET, path, None, None).await;
            assert_error(&format!("{b} GET {path}"), status, &body, 400, 3, "INVALID_ARGUMENT");
        }
        let (status, _, meta) = raw(&s, Method::GET, "/advisory/v1/metadata", None, None).await;
        assert_eq!(status, StatusCode::OK, "[{b}] metadata: {meta}");
        assert!(meta["items"].is_array(), "[{b}] {meta}");
        // A bad token is refused, not read as anonymous.
        let (status, _, body) = raw(
            &s,
            Method::GET,
            "/advisory/v1/documents?id=zephyr",
            Some("not-a-token"),
            None,
        )
        .await;
        assert_error(b, status, &body, 401, 16, "UNAUTHENTICATED");
    }
}

// ===========================================================================
// Read-modify-write: what a v1 client reads, it can send back
// ===========================================================================

/// Reads a resource as a v1 client does (the one item of the v1 List at
/// `read`, through `pick`), sends it back through `PUT put_path` with
/// `field` set to `value`, as `token`, reads it again, and checks that
/// `field` changed and every other field is as it was (but the ones in
/// `moving`, and update times, which an update may move).
#[allow(clippy::too_many_arguments)]
async fn round_trip(
    s: &TestServer,
    token: &str,
    what: &str,
    read: &str,
    pick: impl Fn(Value) -> Value,
    put_path: &str,
    (field, value): (&str, Value),
    moving: &[&str],
) {
    let b = s.backend;
    let one = |v: Value| {
        let items = v["items"].as_array().cloned().unwrap_or_default();
        assert_eq!(items.len(), 1, "[{}] GET {read}: one item: {v}", s.backend);
        items[0].clone()
    };
    let before = pick(one(get(s, read).await));
    let mut sent = before.clone();
    sent[field] = value.clone();
    let (status, reply) = s.call_as(token, Method::PUT, put_path, Some(sent)).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "[{b}] {what}: PUT {put_path} of what was read: {reply}"
    );
    let after = pick(one(get(s, read).await));
    assert_eq!(after[field], value, "[{b}] {what}: {field} changed: {after}");
    let keys: BTreeSet<&String> = before
        .as_object()
        .expect("object")
        .keys()
        .chain(after.as_object().expect("object").keys())
        .collect();
    for k in keys {
        let updated = ["updatedAt", "updateTime", "lastUpdated"].contains(&k.as_str());
        if k == field || updated || moving.contains(&k.as_str()) {
            continue;
        }
        assert_eq!(
            before.get(k),
            after.get(k),
            "[{b}] {what}: {k} is as it was after a read-modify-write of {field}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_updates_take_back_what_was_read() {
    for s in common::servers().await {
        let t = s.token.clone();
        let acme = org(&s, "acme").await;
        let team = group(&s, &acme, "team").await;
        ok(
            &s,
            Method::PATCH,
            &format!("{G2}/{team}"),
            Some(json!({ "description": "the team" })),
        )
        .await;
        round_trip(
            &s,
            &t,
            "group",
            &format!("{G1}?id={team}"),
            |v| v,
            &format!("{G1}/{team}"),
            ("description", json!("renamed team")),
            &[],
        )
        .await;

        let ident = identity(&s, &team, "ci").await;
        round_trip(
            &s,
            &t,
            "identity",
            &format!("{ID1}?id={ident}"),
            |v| v,
            &format!("{ID1}/{ident}"),
            ("description", json!("the CI")),
            &[],
        )
        .await;

        let role = v1_id(
            &post(
                &s,
                &format!("{R1}/{acme}"),
                json!({ "name": "r", "description": "d", "capabilities": ["groups.list", "roles.list"] }),
            )
            .await,
        );
        round_trip(
            &s,
            &t,
            "role",
            &format!("{R1}?id={role}"),
            |v| v,
            &format!("{R1}/{role}"),
            ("description", json!("d2")),
            &[],
        )
        .await;

        // A binding reads hydrated (group and role as objects); a v1 client
        // sends back their ids, as RoleBinding has them.
        let binding = v1_id(
            &post(
                &s,
                &format!("{RB1}/{team}"),
                json!({ "identity": ident, "role": builtin("viewer") }),
            )
            .await,
        );
        let as_binding = |h: Value| json!({ "id": h["id"], "identity": h["identity"], "group": h["group"]["id"], "role": h["role"]["id"] });
        round_trip(
            &s,
            &t,
            "role binding",
            &format!("{RB1}?id={binding}"),
            as_binding,
            &format!("{RB1}/{binding}"),
            ("role", json!(role)),
            &[],
        )
        .await;

        let viewer = builtin("viewer");
        let idp = v1_id(&post(&s, &format!("{IDP1}/{acme}"), idp_body("corp", "the corp IdP", &viewer)).await);
        round_trip(
            &s,
            &t,
            "identity provider",
            &format!("{IDP1}?id={idp}"),
            |v| v,
            &format!("{IDP1}/{idp}"),
            ("description", json!("IdP")),
            &[],
        )
        .await;

        post(&s, &format!("{AA1}/{team}"), association_body("accounts")).await;
        round_trip(
            &s,
            &t,
            "account association",
            &format!("{AA1}?group={team}"),
            |v| v,
            &format!("{AA1}/{team}"),
            ("description", json!("d2")),
            &[],
        )
        .await;

        let repo = v1_id(
            &post(
                &s,
                &format!("{REPO1}/{acme}"),
                json!({ "name": "app", "description": "d", "catalogTier": "FIPS", "bundles": ["fips"],
                        "aliases": ["docker.io/library/app:latest"], "activeTags": ["latest"], "readme": "# App" }),
            )
            .await,
        );
        round_trip(
            &s,
            &t,
            "repo",
            &format!("{REPO1}?id={repo}"),
            |v| v,
            &format!("{REPO1}/{repo}"),
            ("description", json!("d2")),
            &[],
        )
        .await;

        // A tag moves to another manifest of its repo.
        push_image(&s, "acme/app", "latest").await;
        let second = push_image(&s, "acme/app", "next").await;
        let tag = v1_id(
            &v1_list(&s, &format!("{TAG1}?uidp.childrenOf={repo}"))
                .await
                .into_iter()
                .find(|t| t["name"] == "latest")
                .expect("the latest tag"),
        );
        round_trip(
            &s,
            &t,
            "tag",
            &format!("{TAG1}?id={tag}"),
            |v| v,
            &format!("{TAG1}/{tag}"),
            ("digest", json!(second)),
            &["lastUpdated"],
        )
        .await;

        // An advisory, and its event approved by a second person with the
        // event as read plus the new status.
        let adv = post(&s, ADV1, advisory_body(&s, &acme, "zephyr")).await;
        let adv_id = v1_id(&adv);
        round_trip(
            &s,
            &t,
            "advisory",
            &format!("{ADV1}?id={adv_id}"),
            |v| v,
            &format!("{ADV1}/{adv_id}"),
            ("aliases", json!(["CVE-2024-12345", "GHSA-2345-6789-cfgh"])),
            &["updatedAt"],
        )
        .await;
        let (_, approver) = person(&s, "approver", &[(acme.as_str(), "advisories.approver")]).await;
        let event_id = v1_id(&get(&s, &format!("{ADV1}?id={adv_id}")).await["items"][0]["events"][0]);
        let the_event = |adv: Value| {
            adv["events"]
                .as_array()
                .and_then(|e| e.iter().find(|e| e["id"] == json!(event_id)).cloned())
                .expect("the event")
        };
        round_trip(
            &s,
            &approver,
            "advisory event",
            &format!("{ADV1}?id={adv_id}"),
            the_event,
            &format!("{EVENTS1}/{event_id}"),
            ("status", json!("APPROVED")),
            &["reviewer"],
        )
        .await;
    }
}

/// The Terraform provider's `chainguard_image_tag`, over v1 gRPC as it sends
/// it: CreateTag with a name, bundles and the deprecated flag but no digest
/// (a tag made by name, which a later push points); ListTags by id reads it
/// back; UpdateTag with no digest changes the labels and leaves the digest;
/// a push keeps the labels; an unpointed tag is not pullable and not in the
/// OCI tag list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_made_by_name_carry_labels_until_a_push_points_them() {
    for s in common::servers().await {
        let b = s.backend;
        let acme = org(&s, "acme").await;
        let repo = v1_id(&post(&s, &format!("{REPO1}/{acme}"), json!({ "name": "app" })).await);
        let mut registry = RegistryClient::with_interceptor(channel(&s).await, Bearer(s.token.clone()));
        let created = registry
            .create_tag(reg1::CreateTagRequest {
                repo_id: repo.clone(),
                tag: Some(reg1::Tag {
                    name: "stable".into(),
                    bundles: vec!["fips".into()],
                    deprecated: true,
                    ..Default::default()
                }),
            })
            .await
            .unwrap_or_else(|e| panic!("[{b}] CreateTag without a digest: {e:?}"))
            .into_inner();
        assert!(created.id.starts_with(&format!("{repo}/")), "[{b}] {created:?}");
        assert_eq!(
            (created.digest.as_str(), created.deprecated, created.bundles.as_slice()),
            ("", true, ["fips".to_owned()].as_slice()),
            "[{b}]"
        );
        let reader = registry.clone();
        let read = |id: String| {
            let mut registry = reader.clone();
            async move {
                let items = registry
                    .list_tags(reg1::TagFilter {
                        id,
                        ..Default::default()
                    })
                    .await
                    .expect("ListTags by id")
                    .into_inner()
                    .items;
                assert_eq!(items.len(), 1, "{items:?}");
                items[0].clone()
            }
        };
        assert_eq!(read(created.id.clone()).await, created, "[{b}] read back as created");

        // Not pullable, not listed by the registry, until a push points it.
        let (status, _) = s.get("/v2/acme/app/manifests/stable").await;
        assert_eq!(status, StatusCode::NOT_FOUND, "[{b}]");

        // Labels change; the digest (none) stays.
        let updated = registry
            .update_tag(reg1::Tag {
                id: created.id.clone(),
                name: "stable".into(),
                bundles: vec!["fips".into(), "base".into()],
                deprecated: false,
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("[{b}] UpdateTag of labels: {e:?}"))
            .into_inner();
        assert_eq!(
            (updated.deprecated, updated.bundles.len()),
            (false, 2),
            "[{b}] {updated:?}"
        );

        // A push points it and keeps its labels; an update without a digest
        // leaves it pointed.
        let digest = push_image(&s, "acme/app", "stable").await;
        let pointed = read(created.id.clone()).await;
        assert_eq!(
            (pointed.digest.as_str(), pointed.bundles.as_slice()),
            (digest.as_str(), ["fips".to_owned(), "base".to_owned()].as_slice()),
            "[{b}]"
        );
        assert_eq!(served(&s, "acme/app", "stable").await.as_deref(), Some(digest.as_str()));
        registry
            .update_tag(reg1::Tag {
                id: created.id.clone(),
                name: "stable".into(),
                deprecated: true,
                ..Default::default()
            })
            .await
            .expect("UpdateTag of labels only");
        let after = read(created.id.clone()).await;
        assert_eq!((after.digest, after.deprecated), (digest.clone(), true), "[{b}]");
        let listed = get(&s, "/v2/acme/app/tags/list").await;
        assert_eq!(listed["tags"], json!(["stable"]), "[{b}] {listed}");

        // An unknown bundle label is refused.
        let bad = registry
            .create_tag(reg1::CreateTagRequest {
                repo_id: repo.clone(),
                tag: Some(reg1::Tag {
                    name: "odd".into(),
                    bundles: vec!["Not A Label!".into()],
                    ..Default::default()
                }),
            })
            .await
            .expect_err("a bad bundle");
        assert_eq!(bad.code(), Code::InvalidArgument, "[{b}] {bad:?}");
    }
}
