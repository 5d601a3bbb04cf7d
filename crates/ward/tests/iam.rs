//! IAM resources over REST (`/iam/v2beta1/…` and `/iam/v2/…`): identities,
//! roles (built-in and custom) and hydrated role bindings, the delete rules
//! between them, live authorization from role bindings, no escalation, and
//! organization creation by identities. A few gRPC checks show the same
//! service (with the same error details) over tonic clients. Every test runs
//! once per storage backend.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{TestServer, assert_error, enc, field_violations, is_hex, uid};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Code, Status};
use tonic_types::StatusExt;

const G: &str = "/iam/v2beta1/groups";
const ID: &str = "/iam/v2beta1/identities";
const RB: &str = "/iam/v2beta1/roleBindings";
const ROLES: &str = "/iam/v2/roles";

const IDENTITY_TYPE: &str = "iam.chainguard.dev/Identity";
const ROLE_TYPE: &str = "iam.chainguard.dev/Role";
const GROUP_TYPE: &str = "iam.chainguard.dev/Group";
const BINDING_TYPE: &str = "iam.chainguard.dev/RoleBinding";
const DOMAIN: &str = "iam.chainguard.dev";

/// An Ed25519 public key as a JWKS document (static-keys identities).
const JWKS: &str = r#"{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}"#;

const BUILTIN_NAMES: [&str; 20] = [
    "actions.viewer",
    "advisories.admin",
    "advisories.approver",
    "advisories.creator",
    "advisories.viewer",
    "apk.pull",
    "argos.osv.reader",
    "auditor",
    "console_viewer",
    "editor",
    "guardener.admin",
    "guardener.user",
    "libraries.java.pull",
    "libraries.javascript.pull",
    "libraries.python.pull",
    "owner",
    "registry.pull",
    "registry.pull_token_creator",
    "registry.push",
    "viewer",
];

/// The IAM capabilities Ward serves.
const IAM_CAPS: [&str; 16] = [
    "CAP_IAM_GROUPS_CREATE",
    "CAP_IAM_GROUPS_UPDATE",
    "CAP_IAM_GROUPS_LIST",
    "CAP_IAM_GROUPS_DELETE",
    "CAP_IAM_ROLES_CREATE",
    "CAP_IAM_ROLES_UPDATE",
    "CAP_IAM_ROLES_LIST",
    "CAP_IAM_ROLES_DELETE",
    "CAP_IAM_ROLE_BINDINGS_CREATE",
    "CAP_IAM_ROLE_BINDINGS_UPDATE",
    "CAP_IAM_ROLE_BINDINGS_LIST",
    "CAP_IAM_ROLE_BINDINGS_DELETE",
    "CAP_IAM_IDENTITY_CREATE",
    "CAP_IAM_IDENTITY_UPDATE",
    "CAP_IAM_IDENTITY_LIST",
    "CAP_IAM_IDENTITY_DELETE",
];

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// Asserts `child` is `parent` + "/" + 16 lowercase hex digits.
fn assert_child_uid(backend: &str, parent: &str, child: &str) {
    let (prefix, seg) = child
        .rsplit_once('/')
        .unwrap_or_else(|| panic!("[{backend}] {child} has no segment"));
    assert_eq!(prefix, parent, "[{backend}] {child} is under {parent}");
    assert!(is_hex(seg, 16), "[{backend}] segment {seg:?} of {child}");
}

/// A detail of the given google.rpc type.
fn detail<'a>(body: &'a Value, ty: &str) -> Option<&'a Value> {
    body["details"]
        .as_array()?
        .iter()
        .find(|d| d["@type"] == format!("type.googleapis.com/google.rpc.{ty}"))
}

/// 400 / INVALID_ARGUMENT with a BadRequest violation naming `field`.
fn assert_invalid_field(backend: &str, status: StatusCode, body: &Value, field: &str) {
    assert_error(backend, status, body, 400, 3, "INVALID_ARGUMENT");
    assert!(
        field_violations(body).iter().any(|(f, _)| f == field),
        "[{backend}] expected a field violation for {field:?}; body: {body}"
    );
}

/// 404 / NOT_FOUND with a ResourceInfo of `ty` naming `name`.
fn assert_not_found(backend: &str, status: StatusCode, body: &Value, ty: &str, name: &str) {
    assert_error(backend, status, body, 404, 5, "NOT_FOUND");
    let ri = detail(body, "ResourceInfo").unwrap_or_else(|| panic!("[{backend}] no ResourceInfo: {body}"));
    assert_eq!(ri["resourceType"], ty, "[{backend}] {body}");
    assert_eq!(ri["resourceName"], name, "[{backend}] {body}");
}

/// 400 / FAILED_PRECONDITION; returns the PreconditionFailure violations.
fn assert_precondition(backend: &str, status: StatusCode, body: &Value) -> Vec<Value> {
    assert_error(backend, status, body, 400, 9, "FAILED_PRECONDITION");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Precondition failed: ")),
        "[{backend}] {body}"
    );
    detail(body, "PreconditionFailure")
        .unwrap_or_else(|| panic!("[{backend}] no PreconditionFailure: {body}"))["violations"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("[{backend}] no violations: {body}"))
}

/// 403 / PERMISSION_DENIED.
fn assert_denied(backend: &str, status: StatusCode, body: &Value) {
    assert_error(backend, status, body, 403, 7, "PERMISSION_DENIED");
}

async fn get_ok(s: &TestServer, path: &str) -> Value {
    let (status, body) = s.get(path).await;
    assert_eq!(status, StatusCode::OK, "[{}] GET {path}: {body}", s.backend);
    body
}

async fn get_as(s: &TestServer, token: &str, path: &str) -> (StatusCode, Value) {
    s.call_as(token, Method::GET, path, None).await
}

async fn post_as(s: &TestServer, token: &str, path: &str, body: Value) -> (StatusCode, Value) {
    s.call_as(token, Method::POST, path, Some(body)).await
}

/// The uids of a list response's `key` array, in order.
fn uids(page: &Value, key: &str) -> Vec<String> {
    page[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} array in {page}"))
        .iter()
        .map(uid)
        .collect()
}

fn set<I: IntoIterator<Item = S>, S: Into<String>>(v: I) -> BTreeSet<String> {
    v.into_iter().map(Into::into).collect()
}

/// A JSON timestamp `offset_ms` from the server's now.
fn ts(s: &TestServer, offset_ms: i64) -> Value {
    use ward_core::clock::Clock as _;
    serde_json::to_value(ward_proto::Timestamp::from_millis(s.clock.now_millis() + offset_ms)).expect("timestamp json")
}

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// Creates a claim-match identity under `group` (issuer and subject exact).
async fn create_identity(s: &TestServer, group: &str, name: &str) -> Value {
    let (status, body) = s
        .post(
            &format!("{ID}/{group}"),
            json!({
                "name": name,
                "description": format!("the {name} identity"),
                "claimMatch": {
                    "issuer": "https://issuer.example.com",
                    "subject": format!("sub-{name}"),
                },
            }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "[{}] create identity {name}: {body}", s.backend);
    body
}

/// Creates a custom role under `group`.
async fn create_role(s: &TestServer, group: &str, name: &str, caps: &[&str]) -> Value {
    let (status, body) = s
        .post(
            &format!("{ROLES}/{group}"),
            json!({ "name": name, "description": format!("the {name} role"), "capabilities": caps }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "[{}] create role {name}: {body}", s.backend);
    body
}

/// Binds `identity` to `role` at `group` as the admin.
async fn bind(s: &TestServer, group: &str, identity: &str, role: &str) -> Value {
    let (status, body) = s
        .post(
            &format!("{RB}/{group}"),
            json!({ "identityUid": identity, "roleUid": role }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "[{}] bind: {body}", s.backend);
    body
}

/// The built-in roles, by name → uid, as the API lists them.
async fn builtins(s: &TestServer) -> BTreeMap<String, String> {
    let list = get_ok(s, &format!("{ROLES}?uidp.in_root=true")).await;
    list["roles"]
        .as_array()
        .expect("roles")
        .iter()
        .map(|r| (r["name"].as_str().expect("name").to_owned(), uid(r)))
        .collect()
}

async fn builtin(s: &TestServer, name: &str) -> String {
    builtins(s)
        .await
        .remove(name)
        .unwrap_or_else(|| panic!("[{}] no built-in role {name}", s.backend))
}

/// An API token for identity `uid`.
fn token_for(s: &TestServer, uid: &str) -> String {
    s.ward().tokens.mint(uid).expect("mint a token")
}

fn caps_of(role: &Value) -> Vec<String> {
    role["capabilities"]
        .as_array()
        .unwrap_or_else(|| panic!("no capabilities in {role}"))
        .iter()
        .map(|c| c.as_str().expect("capability name").to_owned())
        .collect()
}

// ---------------------------------------------------------------------------
// Identities
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identities_create_get_and_shape() {
    for s in common::servers().await {
        let b = s.backend;
        let org = s.create_group(None, "acme").await;
        let ou = uid(&org);

        let (status, id) = s
            .post(
                &format!("{ID}/{ou}"),
                json!({
                    "name": "ci",
                    "description": "the CI workload",
                    "claimMatch": {
                        "issuer": "https://token.actions.githubusercontent.com",
                        "subject": "repo:acme/app:ref:refs/heads/main",
                        "audience": "ward",
                        "claims": { "repository_owner": "acme" },
                    },
                    // Output-only: ignored.
                    "lastSeenTime": "2020-01-01T00:00:00.000Z",
                    "uid": "0123456789abcdef0123456789abcdef01234567",
                }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {id}");
        let iu = uid(&id);
        assert_child_uid(b, &ou, &iu);
        assert_eq!(id["name"], "ci", "[{b}]");
        assert_eq!(id["description"], "the CI workload", "[{b}]");
        assert_eq!(
            id["claimMatch"]["issuer"], "https://token.actions.githubusercontent.com",
            "[{b}] {id}"
        );
        assert_eq!(
            id["claimMatch"]["subject"], "repo:acme/app:ref:refs/heads/main",
            "[{b}]"
        );
        assert_eq!(id["claimMatch"]["audience"], "ward", "[{b}] {id}");
        assert_eq!(
            id["claimMatch"]["claims"],
            json!({ "repository_owner": "acme" }),
            "[{b}] {id}"
        );
        assert!(
            id.get("staticKeys").is_none_or(Value::is_null),
            "[{b}] one relationship only: {id}"
        );
        assert!(
            id.get("lastSeenTime").is_none_or(Value::is_null),
            "[{b}] lastSeenTime is output-only and unset on create: {id}"
        );
        for k in ["createTime", "updateTime"] {
            assert!(id[k].is_string(), "[{b}] {k}: {id}");
        }
        assert_eq!(id["createTime"], id["updateTime"], "[{b}] fresh identity");
        for k in id.as_object().unwrap().keys() {
            assert!(!k.contains('_'), "[{b}] snake_case key {k:?}: {id}");
        }

        // Stored as returned, on both API versions.
        assert_eq!(get_ok(&s, &format!("{ID}/{iu}")).await, id, "[{b}]");
        assert_eq!(get_ok(&s, &format!("/iam/v2/identities/{iu}")).await, id, "[{b}]");

        // Patterns are stored as given (they are anchored when matched).
        let (status, pat) = s
            .post(
                &format!("/iam/v2/identities/{ou}"),
                json!({
                    "name": "pattern",
                    "claimMatch": {
                        "issuerPattern": "https://issuer\\.example\\.(com|org)",
                        "subjectPattern": "repo:acme/.*",
                        "audiencePattern": "ward|api",
                        "claimPatterns": { "ref": "refs/heads/(main|release-.*)" },
                    },
                }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] v2 create: {pat}");
        assert_child_uid(b, &ou, &uid(&pat));
        let cm = &pat["claimMatch"];
        assert_eq!(
            cm["issuerPattern"], "https://issuer\\.example\\.(com|org)",
            "[{b}] {pat}"
        );
        assert_eq!(cm["subjectPattern"], "repo:acme/.*", "[{b}] {pat}");
        assert_eq!(cm["audiencePattern"], "ward|api", "[{b}] {pat}");
        assert_eq!(
            cm["claimPatterns"]["ref"], "refs/heads/(main|release-.*)",
            "[{b}] {pat}"
        );
        assert!(
            cm.get("issuer").is_none_or(Value::is_null) && cm.get("subject").is_none_or(Value::is_null),
            "[{b}] a oneof holds one value: {pat}"
        );
        assert_eq!(get_ok(&s, &format!("{ID}/{}", uid(&pat))).await, pat, "[{b}]");

        // Static keys.
        let exp = ts(&s, DAY_MS);
        let (status, st) = s
            .post(
                &format!("{ID}/{ou}"),
                json!({
                    "name": "static",
                    "staticKeys": {
                        "issuer": "https://static.example.com",
                        "subject": "robot",
                        "issuerKeys": JWKS,
                        "expirationTime": exp,
                    },
                }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] static keys: {st}");
        assert_child_uid(b, &ou, &uid(&st));
        assert_eq!(st["staticKeys"]["issuer"], "https://static.example.com", "[{b}]");
        assert_eq!(st["staticKeys"]["subject"], "robot", "[{b}]");
        assert_eq!(st["staticKeys"]["issuerKeys"], JWKS, "[{b}] {st}");
        assert_eq!(st["staticKeys"]["expirationTime"], exp, "[{b}] {st}");
        assert!(st.get("claimMatch").is_none_or(Value::is_null), "[{b}] {st}");
        assert_eq!(get_ok(&s, &format!("{ID}/{}", uid(&st))).await, st, "[{b}]");

        // Under a child group too.
        let team = s.create_group(Some(&ou), "team").await;
        let tid = create_identity(&s, &uid(&team), "deep").await;
        assert_child_uid(b, &uid(&team), &uid(&tid));
    }
}

#[test]
fn patterns_are_anchored() {
    // Documented in docs/api-conventions.md ("Patterns are anchored"); this is the
    // compiler the create and update paths validate with.
    let compile_pattern = ward_core::pattern::Pattern::compile;
    let re = compile_pattern("repo:acme/.*").expect("compiles");
    assert!(re.is_match("repo:acme/app"));
    assert!(!re.is_match("xrepo:acme/app"), "anchored at the start");
    let re = compile_pattern("ward|api").expect("compiles");
    assert!(re.is_match("ward") && re.is_match("api"));
    assert!(
        !re.is_match("wardx") && !re.is_match("xapi"),
        "alternation anchored as a whole"
    );
    assert!(compile_pattern("(unclosed").is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identities_create_validation() {
    for s in common::servers().await {
        let b = s.backend;
        let org = s.create_group(None, "acme").await;
        let ou = uid(&org);
        let path = format!("{ID}/{ou}");

        // No relationship.
        let (status, body) = s.post(&path, json!({ "name": "none" })).await;
        assert_invalid_field(b, status, &body, "claim_match");

        // Both relationships: the oneof allows one.
        let (status, body) = s
            .post(
                &path,
                json!({
                    "name": "both",
                    "claimMatch": { "issuer": "i", "subject": "s" },
                    "staticKeys": { "issuer": "i", "subject": "s", "issuerKeys": JWKS },
                }),
            )
            .await;
        assert_error(b, status, &body, 400, 3, "INVALID_ARGUMENT");

        // Incomplete claim match.
        let (status, body) = s
            .post(&path, json!({ "name": "x", "claimMatch": { "subject": "s" } }))
            .await;
        assert_invalid_field(b, status, &body, "claim_match.issuer");
        let (status, body) = s
            .post(&path, json!({ "name": "x", "claimMatch": { "issuer": "i" } }))
            .await;
        assert_invalid_field(b, status, &body, "claim_match.subject");

        // Invalid regular expressions name their field.
        for (cm, field) in [
            (
                json!({ "issuerPattern": "(unclosed", "subject": "s" }),
                "claim_match.issuer_pattern",
            ),
            (
                json!({ "issuer": "i", "subjectPattern": "[z-a]" }),
                "claim_match.subject_pattern",
            ),
            (
                json!({ "issuer": "i", "subject": "s", "audiencePattern": "a(" }),
                "claim_match.audience_pattern",
            ),
            (
                json!({ "issuer": "i", "subject": "s", "claimPatterns": { "ref": "refs/(" } }),
                "claim_match.claim_patterns[ref]",
            ),
            (
                json!({ "issuer": "i", "subjectPattern": "a".repeat(1025) }),
                "claim_match.subject_pattern",
            ),
        ] {
            let (status, body) = s.post(&path, json!({ "name": "x", "claimMatch": cm })).await;
            assert_invalid_field(b, status, &body, field);
        }
        let (status, body) = s
            .post(
                &path,
                json!({ "name": "x", "claimMatch": { "issuer": "i", "subject": "s", "claims": { "": "v" } } }),
            )
            .await;
        assert_invalid_field(b, status, &body, "claim_match.claims");
        // Several at once: each reported, with the name.
        let (status, body) = s
            .post(
                &path,
                json!({
                    "name": "Bad Name",
                    "claimMatch": { "issuerPattern": "(", "subjectPattern": "*" },
                }),
            )
            .await;
        for f in ["name", "claim_match.issuer_pattern", "claim_match.subject_pattern"] {
            assert_invalid_field(b, status, &body, f);
        }

        // Static keys.
        let good = || {
            json!({
                "issuer": "https://static.example.com",
                "subject": "robot",
                "issuerKeys": JWKS,
            })
        };
        // (key, value or None to remove it, field named in the error)
        for (key, value, field) in [
            ("issuerKeys", Some(json!("{}")), "static_keys.issuer_keys"),
            ("issuerKeys", Some(json!(r#"{"keys":[]}"#)), "static_keys.issuer_keys"),
            (
                "issuerKeys",
                Some(json!(r#"{"keys":"nope"}"#)),
                "static_keys.issuer_keys",
            ),
            ("issuerKeys", Some(json!("not json")), "static_keys.issuer_keys"),
            ("issuerKeys", None, "static_keys.issuer_keys"),
            ("issuer", Some(json!("")), "static_keys.issuer"),
            ("subject", None, "static_keys.subject"),
            ("audiences", Some(json!(["a", "b"])), "static_keys.audiences"),
        ] {
            let mut k = good();
            match value {
                Some(v) => k[key] = v,
                None => {
                    k.as_object_mut().unwrap().remove(key);
                }
            }
            let (status, body) = s.post(&path, json!({ "name": "x", "staticKeys": k })).await;
            assert_invalid_field(b, status, &body, field);
        }
        for offset in [-DAY_MS, -1000, 400 * DAY_MS] {
            let mut k = good();
            k["expirationTime"] = ts(&s, offset);
            let (status, body) = s.post(&path, json!({ "name": "x", "staticKeys": k })).await;
            assert_invalid_field(b, status, &body, "static_keys.expiration_time");
        }

        // The parent: malformed is 400, absent is 404.
        let ok = json!({ "name": "x", "claimMatch": { "issuer": "i", "subject": "s" } });
        let (status, body) = s.post(&format!("{ID}/xyz"), ok.clone()).await;
        assert_invalid_field(b, status, &body, "parent");
        let missing = "0123456789abcdef0123456789abcdef01234567";
        let (status, body) = s.post(&format!("{ID}/{missing}"), ok.clone()).await;
        assert_not_found(b, status, &body, GROUP_TYPE, missing);
        let missing_child = format!("{ou}/0123456789abcdef");
        let (status, body) = s.post(&format!("{ID}/{missing_child}"), ok).await;
        assert_not_found(b, status, &body, GROUP_TYPE, &missing_child);

        // Nothing was stored.
        let list = get_ok(&s, ID).await;
        assert_eq!(list["totalCount"], "0", "[{b}] {list}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identities_list_filters() {
    for s in common::servers().await {
        let b = s.backend;
        let org = s.create_group(None, "acme").await;
        let ou = uid(&org);
        let team = s.create_group(Some(&ou), "team").await;
        let tu = uid(&team);
        let other = s.create_group(None, "other").await;

        let a = create_identity(&s, &ou, "alpha").await;
        let t = create_identity(&s, &tu, "beta").await;
        let o = create_identity(&s, &uid(&other), "alpha").await;
        let (status, st) = s
            .post(
                &format!("{ID}/{tu}"),
                json!({
                    "name": "robot",
                    "staticKeys": { "issuer": "https://s.example.com", "subject": "r", "issuerKeys": JWKS },
                }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {st}");

        let check = |q: String, expected: BTreeSet<String>| {
            let s = &s;
            async move {
                for v in ["v2beta1", "v2"] {
                    let path = format!("/iam/{v}/identities{q}");
                    let list = get_ok(s, &path).await;
                    let got = set(uids(&list, "identities"));
                    assert_eq!(got, expected, "[{b}] {path}: {list}");
                    assert_eq!(list["totalCount"], expected.len().to_string(), "[{b}] {path}: {list}");
                }
            }
        };
        let all = set([&a, &t, &o, &st].map(uid));
        check(String::new(), all.clone()).await;
        check(format!("?uidp.descendants_of={ou}"), set([&a, &t, &st].map(uid))).await;
        check(format!("?uidp.children_of={ou}"), set([uid(&a)])).await;
        check(format!("?uidp.childrenOf={tu}"), set([&t, &st].map(uid))).await;
        check(
            format!("?uidp.ids={}&uidp.ids={}", uid(&a), uid(&o)),
            set([&a, &o].map(uid)),
        )
        .await;
        check("?name=alpha".into(), set([&a, &o].map(uid))).await;
        check(format!("?name=alpha&uidp.descendants_of={ou}"), set([uid(&a)])).await;
        for rt in ["RELATIONSHIP_TYPE_STATIC", "2"] {
            check(format!("?relationship_type={rt}"), set([uid(&st)])).await;
        }
        for rt in ["RELATIONSHIP_TYPE_CLAIM_MATCH", "1"] {
            check(format!("?relationshipType={rt}"), set([&a, &t, &o].map(uid))).await;
        }
        check(
            format!(
                "?relationship_type=RELATIONSHIP_TYPE_STATIC&uidp.descendants_of={}",
                uid(&other)
            ),
            BTreeSet::new(),
        )
        .await;
        check("?relationship_type=RELATIONSHIP_TYPE_UNSPECIFIED".into(), all).await;
        for bad in ["RELATIONSHIP_TYPE_NOPE", "99", "static"] {
            let (status, body) = s.get(&format!("{ID}?relationship_type={bad}")).await;
            assert_invalid_field(b, status, &body, "relationship_type");
        }

        // Ordering and pages.
        let list = get_ok(&s, &format!("{ID}?order_by={}&page_size=2", enc("name desc"))).await;
        let names: Vec<&str> = list["identities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["robot", "beta"], "[{b}] {list}");
        assert_eq!(list["totalCount"], "4", "[{b}]");
        let token = list["nextPageToken"].as_str().expect("token").to_owned();
        assert!(!token.is_empty(), "[{b}] {list}");
        let p2 = get_ok(
            &s,
            &format!(
                "{ID}?order_by={}&page_size=2&page_token={}",
                enc("name desc"),
                enc(&token)
            ),
        )
        .await;
        let names: Vec<&str> = p2["identities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["alpha", "alpha"], "[{b}] {p2}");
        assert_eq!(p2["nextPageToken"], "", "[{b}] {p2}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identities_patch_and_delete() {
    for s in common::servers().await {
        let b = s.backend;
        let org = s.create_group(None, "acme").await;
        let ou = uid(&org);
        let id = create_identity(&s, &ou, "ci").await;
        let iu = uid(&id);
        let path = format!("{ID}/{iu}");
        let tick = || s.clock.advance_millis(5);

        // No mask: the body's keys.
        tick();
        let (status, p) = s.patch(&path, json!({ "description": "changed" })).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {p}");
        assert_eq!(p["description"], "changed", "[{b}]");
        assert_eq!(p["name"], id["name"], "[{b}] name unchanged");
        assert_eq!(p["claimMatch"], id["claimMatch"], "[{b}] relationship unchanged");
        assert_eq!(p["createTime"], id["createTime"], "[{b}]");
        assert!(
            p["updateTime"].as_str() > id["updateTime"].as_str(),
            "[{b}] updateTime moves: {p} vs {id}"
        );
        assert_eq!(get_ok(&s, &path).await, p, "[{b}] stored as returned");

        // A mask naming description: everything else in the body is not
        // written (an unparsable pattern outside it is not even compiled); a
        // name that breaks its published schema is refused all the same.
        let (status, bad) = s
            .patch(
                &format!("{path}?updateMask=description"),
                json!({ "name": "BAD NAME", "description": "masked" }),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "[{b}] {bad}");
        tick();
        let (status, p2) = s
            .patch(
                &format!("{path}?updateMask=description"),
                json!({
                    "name": "other",
                    "description": "masked",
                    "claimMatch": { "issuerPattern": "(" },
                }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {p2}");
        assert_eq!(p2["description"], "masked", "[{b}]");
        assert_eq!(p2["name"], "ci", "[{b}]");
        assert_eq!(p2["claimMatch"], id["claimMatch"], "[{b}]");

        // Output-only fields are ignored, in the body and in the mask.
        let (status, p3) = s
            .patch(
                &format!("{path}?updateMask=last_seen_time,uid,create_time"),
                json!({
                    "lastSeenTime": "2020-01-01T00:00:00.000Z",
                    "uid": "0123456789abcdef0123456789abcdef01234567",
                    "createTime": "2020-01-01T00:00:00.000Z",
                }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {p3}");
        assert_eq!(p3, p2, "[{b}] nothing changed");
        let (status, p3) = s
            .patch(&path, json!({ "lastSeenTime": "2020-01-01T00:00:00.000Z" }))
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {p3}");
        assert!(
            p3.get("lastSeenTime").is_none_or(Value::is_null),
            "[{b}] lastSeenTime is output-only: {p3}"
        );
        assert_eq!(p3["updateTime"], p2["updateTime"], "[{b}] empty mask");

        // Unknown mask paths, and validation of what the mask names.
        let (status, body) = s
            .patch(&format!("{path}?updateMask=descriptoin"), json!({ "description": "x" }))
            .await;
        assert_invalid_field(b, status, &body, "update_mask");
        let (status, body) = s
            .patch(
                &format!("{path}?updateMask=claim_match"),
                json!({ "claimMatch": { "issuer": "i", "subjectPattern": "[" } }),
            )
            .await;
        assert_invalid_field(b, status, &body, "claim_match.subject_pattern");
        let (status, body) = s
            .patch(
                &format!("{path}?updateMask=static_keys"),
                json!({ "staticKeys": { "issuer": "i", "subject": "s", "issuerKeys": "{}" } }),
            )
            .await;
        assert_invalid_field(b, status, &body, "static_keys.issuer_keys");
        assert_eq!(get_ok(&s, &path).await, p2, "[{b}] rejected updates change nothing");

        // Replacing the claim match.
        tick();
        let (status, p4) = s
            .patch(
                &format!("{path}?update_mask=claim_match"),
                json!({ "claimMatch": { "issuer": "https://new.example.com", "subjectPattern": "svc-.*" } }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {p4}");
        assert_eq!(p4["claimMatch"]["issuer"], "https://new.example.com", "[{b}]");
        assert_eq!(p4["claimMatch"]["subjectPattern"], "svc-.*", "[{b}] {p4}");
        assert!(p4["claimMatch"].get("subject").is_none_or(Value::is_null), "[{b}] {p4}");

        // Switching claimMatch → staticKeys.
        tick();
        let (status, p5) = s
            .patch(
                &format!("{path}?updateMask=static_keys"),
                json!({ "staticKeys": { "issuer": "https://static.example.com", "subject": "robot", "issuerKeys": JWKS } }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {p5}");
        assert_eq!(p5["staticKeys"]["subject"], "robot", "[{b}] {p5}");
        assert_eq!(p5["staticKeys"]["issuerKeys"], JWKS, "[{b}] {p5}");
        assert!(
            p5.get("claimMatch").is_none_or(Value::is_null),
            "[{b}] the old relationship is gone: {p5}"
        );
        assert_eq!(p5["name"], "ci", "[{b}]");
        assert_eq!(p5["description"], "masked", "[{b}]");
        assert_eq!(get_ok(&s, &path).await, p5, "[{b}]");
        let list = get_ok(&s, &format!("{ID}?relationship_type=RELATIONSHIP_TYPE_STATIC")).await;
        assert_eq!(uids(&list, "identities"), [iu.as_str()], "[{b}] {list}");
        let list = get_ok(&s, &format!("{ID}?relationship_type=RELATIONSHIP_TYPE_CLAIM_MATCH")).await;
        assert_eq!(list["totalCount"], "0", "[{b}] {list}");

        // Both API versions.
        let (status, p6) = s
            .patch(&format!("/iam/v2/identities/{iu}"), json!({ "name": "renamed" }))
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {p6}");
        assert_eq!(p6["name"], "renamed", "[{b}]");
        assert_eq!(p6["staticKeys"], p5["staticKeys"], "[{b}]");

        // Delete.
        let (status, body) = s.delete(&path).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        assert_eq!(body, json!({}), "[{b}]");
        let (status, body) = s.get(&path).await;
        assert_not_found(b, status, &body, IDENTITY_TYPE, &iu);
        let (status, body) = s.delete(&path).await;
        assert_not_found(b, status, &body, IDENTITY_TYPE, &iu);
        let (status, body) = s.patch(&path, json!({ "description": "x" })).await;
        assert_not_found(b, status, &body, IDENTITY_TYPE, &iu);
        let (status, body) = s.get(&format!("{ID}/xyz")).await;
        assert_invalid_field(b, status, &body, "uid");
        // The group is empty again and can go.
        let (status, body) = s.delete(&format!("{G}/{ou}")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
    }
}

// ---------------------------------------------------------------------------
// Roles
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builtin_roles_are_listed_and_stable() {
    let mut servers = common::servers().await;
    // A second, unrelated installation (its own database).
    servers.push(TestServer::start(ward_store::testing::sqlite()).await);
    let mut seen: Option<BTreeMap<String, String>> = None;
    for s in &mut servers {
        let b = s.backend;
        for path in [
            format!("{ROLES}?uidp.in_root=true"),
            "/iam/v2beta1/roles?uidp.inRoot=true".to_owned(),
        ] {
            let list = get_ok(s, &path).await;
            assert_eq!(list["totalCount"], "20", "[{b}] {path}: {list}");
            let roles = list["roles"].as_array().expect("roles");
            let names: BTreeSet<&str> = roles.iter().map(|r| r["name"].as_str().unwrap()).collect();
            assert_eq!(names, BTreeSet::from(BUILTIN_NAMES), "[{b}] {list}");
            for r in roles {
                assert!(is_hex(r["uid"].as_str().unwrap(), 40), "[{b}] {r}");
                assert!(!caps_of(r).is_empty(), "[{b}] {r}");
                assert!(r["description"].as_str().is_some_and(|d| !d.is_empty()), "[{b}] {r}");
                // The full reference bundle, in enum-number order.
                let name = r["name"].as_str().unwrap();
                let bundle: Vec<&str> = ward_core::capability::builtin_role(name)
                    .expect("known")
                    .capabilities
                    .iter()
                    .map(|c| c.enum_name())
                    .collect();
                assert_eq!(caps_of(r), bundle, "[{b}] {name}: {r}");
                let has = |wanted: &[&str]| wanted.iter().all(|w| caps_of(r).iter().any(|c| c == w));
                match name {
                    "owner" => assert!(has(&IAM_CAPS), "[{b}] owner: {r}"),
                    "viewer" | "editor" => assert!(
                        has(&[
                            "CAP_IAM_GROUPS_LIST",
                            "CAP_IAM_ROLES_LIST",
                            "CAP_IAM_ROLE_BINDINGS_LIST",
                            "CAP_IAM_IDENTITY_LIST",
                        ]) && !has(&["CAP_IAM_GROUPS_DELETE"]),
                        "[{b}] {r}"
                    ),
                    "registry.pull" => assert!(has(&["CAP_IAM_GROUPS_LIST", "CAP_REPO_LIST"]), "[{b}]"),
                    _ => {}
                }
            }
        }
        let map = builtins(s).await;
        // Every uid is the documented derivation.
        for (name, u) in &map {
            let expected = ward_core::capability::builtin_role(name).expect("known").uid();
            assert_eq!(*u, expected, "[{b}] {name}");
        }
        match &seen {
            None => seen = Some(map.clone()),
            Some(first) => assert_eq!(&map, first, "[{b}] same uids on every installation"),
        }
        // Gettable by uid.
        let owner = get_ok(s, &format!("/iam/v2beta1/roles/{}", map["owner"])).await;
        assert_eq!(owner["name"], "owner", "[{b}] {owner}");
        // Unchanged by a restart (and not duplicated).
        s.restart().await;
        assert_eq!(builtins(s).await, map, "[{b}] after restart");
        let list = get_ok(s, ROLES).await;
        assert_eq!(list["totalCount"], "20", "[{b}] no custom roles yet: {list}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_roles() {
    for s in common::servers().await {
        let b = s.backend;
        let org = s.create_group(None, "acme").await;
        let ou = uid(&org);
        let team = s.create_group(Some(&ou), "team").await;
        let tu = uid(&team);

        let (status, role) = s
            .post(
                &format!("{ROLES}/{ou}"),
                json!({ "name": "lister", "description": "lists groups", "capabilities": ["CAP_IAM_GROUPS_LIST"] }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {role}");
        let ru = uid(&role);
        assert_child_uid(b, &ou, &ru);
        assert_eq!(role["name"], "lister", "[{b}]");
        assert_eq!(role["description"], "lists groups", "[{b}]");
        assert_eq!(caps_of(&role), ["CAP_IAM_GROUPS_LIST"], "[{b}]");
        assert!(
            role["createTime"].is_string() && role["updateTime"].is_string(),
            "[{b}] {role}"
        );
        assert_eq!(get_ok(&s, &format!("/iam/v2beta1/roles/{ru}")).await, role, "[{b}]");

        // Capabilities come back in enum order, deduplicated.
        let (status, r2) = s
            .post(
                &format!("/iam/v2beta1/roles/{tu}"),
                json!({ "name": "two", "capabilities": ["CAP_IAM_ROLES_LIST", "CAP_IAM_GROUPS_LIST", "CAP_IAM_ROLES_LIST"] }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {r2}");
        assert_child_uid(b, &tu, &uid(&r2));
        assert_eq!(
            caps_of(&r2),
            ["CAP_IAM_GROUPS_LIST", "CAP_IAM_ROLES_LIST"],
            "[{b}] {r2}"
        );

        // Invalid capabilities.
        let path = format!("{ROLES}/{ou}");
        for caps in [json!(["CAP_NOT_A_THING"]), json!([999]), json!(["UNKNOWN"]), json!(0)] {
            let (status, body) = s.post(&path, json!({ "name": "bad", "capabilities": caps })).await;
            assert_error(b, status, &body, 400, 3, "INVALID_ARGUMENT");
        }
        for caps in [json!(["UNKNOWN"]), json!([0])] {
            let (status, body) = s.post(&path, json!({ "name": "bad", "capabilities": caps })).await;
            assert_invalid_field(b, status, &body, "capabilities");
        }
        let (status, body) = s.post(&path, json!({ "name": "empty", "capabilities": [] })).await;
        assert_invalid_field(b, status, &body, "capabilities");
        let (status, body) = s.post(&path, json!({ "name": "none" })).await;
        assert_invalid_field(b, status, &body, "capabilities");
        let (status, body) = s.post(&path, json!({ "name": "Bad", "capabilities": [] })).await;
        assert_invalid_field(b, status, &body, "name");
        assert_invalid_field(b, status, &body, "capabilities");
        let missing = "0123456789abcdef0123456789abcdef01234567";
        let (status, body) = s
            .post(
                &format!("{ROLES}/{missing}"),
                json!({ "name": "x", "capabilities": ["CAP_IAM_GROUPS_LIST"] }),
            )
            .await;
        assert_not_found(b, status, &body, GROUP_TYPE, missing);

        // Listing: custom roles under their group; built-ins at the root.
        let list = get_ok(&s, &format!("{ROLES}?uidp.descendants_of={ou}")).await;
        assert_eq!(set(uids(&list, "roles")), set([ru.clone(), uid(&r2)]), "[{b}] {list}");
        let list = get_ok(&s, &format!("{ROLES}?uidp.children_of={ou}")).await;
        assert_eq!(uids(&list, "roles"), [ru.as_str()], "[{b}] {list}");
        let list = get_ok(&s, &format!("{ROLES}?uidp.in_root=true")).await;
        assert_eq!(list["totalCount"], "20", "[{b}] {list}");
        let list = get_ok(&s, ROLES).await;
        assert_eq!(list["totalCount"], "22", "[{b}] {list}");
        let list = get_ok(&s, &format!("{ROLES}?name=lister")).await;
        assert_eq!(uids(&list, "roles"), [ru.as_str()], "[{b}] {list}");

        // Update a custom role.
        s.clock.advance_millis(5);
        let (status, p) = s
            .patch(
                &format!("{ROLES}/{ru}?updateMask=description,capabilities"),
                json!({ "name": "ignored", "description": "more", "capabilities": ["CAP_IAM_GROUPS_LIST", "CAP_IAM_IDENTITY_LIST"] }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {p}");
        assert_eq!(p["name"], "lister", "[{b}]");
        assert_eq!(p["description"], "more", "[{b}]");
        assert_eq!(caps_of(&p), ["CAP_IAM_GROUPS_LIST", "CAP_IAM_IDENTITY_LIST"], "[{b}]");
        assert!(p["updateTime"].as_str() > role["updateTime"].as_str(), "[{b}] {p}");
        let (status, body) = s.patch(&format!("{ROLES}/{ru}"), json!({ "capabilities": [] })).await;
        assert_invalid_field(b, status, &body, "capabilities");

        // Built-in roles cannot be changed or deleted.
        let owner = builtin(&s, "owner").await;
        let before = get_ok(&s, &format!("{ROLES}/{owner}")).await;
        for (method, body) in [
            (Method::PATCH, Some(json!({ "description": "mine now" }))),
            (Method::PATCH, Some(json!({ "capabilities": ["CAP_IAM_GROUPS_LIST"] }))),
            (Method::DELETE, None),
        ] {
            for v in ["v2", "v2beta1"] {
                let (status, resp) = s
                    .call(method.clone(), &format!("/iam/{v}/roles/{owner}"), body.clone())
                    .await;
                let violations = assert_precondition(b, status, &resp);
                assert!(
                    violations
                        .iter()
                        .any(|v| v["type"] == "BUILT_IN_ROLE" && v["subject"] == owner),
                    "[{b}] {method} built-in: {resp}"
                );
            }
        }
        assert_eq!(get_ok(&s, &format!("{ROLES}/{owner}")).await, before, "[{b}] unchanged");

        // A bound custom role cannot be deleted; the message names the binding.
        let id = create_identity(&s, &ou, "ci").await;
        let binding = bind(&s, &tu, &uid(&id), &ru).await;
        let bu = uid(&binding);
        let (status, body) = s.delete(&format!("{ROLES}/{ru}")).await;
        let violations = assert_precondition(b, status, &body);
        assert!(
            body["message"].as_str().unwrap().contains(&bu),
            "[{b}] message names the binding {bu}: {body}"
        );
        assert!(
            violations.iter().any(|v| v["type"] == "RESOURCE_IN_USE"
                && v["subject"] == ru
                && v["description"].as_str().unwrap().contains(&bu)),
            "[{b}] {body}"
        );
        get_ok(&s, &format!("{ROLES}/{ru}")).await;
        let (status, body) = s.delete(&format!("{RB}/{bu}")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        let (status, body) = s.delete(&format!("/iam/v2beta1/roles/{ru}")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        assert_eq!(body, json!({}), "[{b}]");
        let (status, body) = s.get(&format!("{ROLES}/{ru}")).await;
        assert_not_found(b, status, &body, ROLE_TYPE, &ru);
        let (status, body) = s.delete(&format!("{ROLES}/{ru}")).await;
        assert_not_found(b, status, &body, ROLE_TYPE, &ru);
    }
}

// ---------------------------------------------------------------------------
// Role bindings
// ---------------------------------------------------------------------------

/// Asserts the hydrated shape of a binding.
fn assert_hydrated(b: &str, rb: &Value, identity: &Value, group: &Value, role: &Value) {
    assert_eq!(
        rb["identity"],
        json!({
            "uid": identity["uid"],
            "name": identity["name"],
            "description": identity["description"],
            "subject": identity["claimMatch"]["subject"],
            "issuer": identity["claimMatch"]["issuer"],
            "email": "",
        }),
        "[{b}] hydrated identity: {rb}"
    );
    assert_eq!(
        rb["group"],
        json!({ "uid": group["uid"], "name": group["name"], "description": group["description"] }),
        "[{b}] hydrated group: {rb}"
    );
    assert_eq!(
        rb["role"],
        json!({ "uid": role["uid"], "name": role["name"], "description": role["description"] }),
        "[{b}] hydrated role: {rb}"
    );
    assert_eq!(rb["identityUid"], identity["uid"], "[{b}] {rb}");
    assert_eq!(rb["roleUid"], role["uid"], "[{b}] {rb}");
    assert!(rb["createTime"].is_string(), "[{b}] createTime: {rb}");
    assert!(rb.get("updateTime").is_none(), "[{b}] no updateTime: {rb}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn role_bindings_crud_and_hydration() {
    for s in common::servers().await {
        let b = s.backend;
        let (status, org) = s
            .post(G, json!({ "name": "acme", "description": "the acme org" }))
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {org}");
        let ou = uid(&org);
        let team = s.create_group(Some(&ou), "team").await;
        let tu = uid(&team);
        let alice = create_identity(&s, &ou, "alice").await;
        let bob = create_identity(&s, &tu, "bob").await;
        let roles = builtins(&s).await;
        let viewer = get_ok(&s, &format!("{ROLES}/{}", roles["viewer"])).await;
        let owner = get_ok(&s, &format!("{ROLES}/{}", roles["owner"])).await;
        let custom = create_role(&s, &ou, "lister", &["CAP_IAM_GROUPS_LIST"]).await;

        let (status, rb) = s
            .post(
                &format!("{RB}/{ou}"),
                json!({ "identityUid": uid(&alice), "roleUid": uid(&viewer) }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {rb}");
        let ru = uid(&rb);
        assert_child_uid(b, &ou, &ru);
        assert_hydrated(b, &rb, &alice, &org, &viewer);
        for k in rb.as_object().unwrap().keys() {
            assert!(!k.contains('_'), "[{b}] snake_case key {k}: {rb}");
        }
        assert_eq!(get_ok(&s, &format!("{RB}/{ru}")).await, rb, "[{b}] GET");
        assert_eq!(
            get_ok(&s, &format!("/iam/v2/roleBindings/{ru}")).await,
            rb,
            "[{b}] GET v2"
        );

        // More bindings: bob at team as the org's custom role (defined above the
        // team), alice at team as owner (via /iam/v2).
        let rb2 = bind(&s, &tu, &uid(&bob), &uid(&custom)).await;
        assert_child_uid(b, &tu, &uid(&rb2));
        assert_hydrated(b, &rb2, &bob, &team, &custom);
        let (status, rb3) = s
            .post(
                &format!("/iam/v2/roleBindings/{tu}"),
                json!({ "identityUid": uid(&alice), "roleUid": uid(&owner) }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {rb3}");
        assert_hydrated(b, &rb3, &alice, &team, &owner);

        // Every list item is hydrated the same way.
        let list = get_ok(&s, RB).await;
        assert_eq!(list["totalCount"], "3", "[{b}] {list}");
        let by_uid: BTreeMap<String, Value> = list["roleBindings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| (uid(x), x.clone()))
            .collect();
        for x in [&rb, &rb2, &rb3] {
            assert_eq!(by_uid.get(&uid(x)), Some(x), "[{b}] list item equals GET");
        }

        // Filters.
        let check = |q: String, expected: BTreeSet<String>| {
            let s = &s;
            async move {
                let list = get_ok(s, &format!("{RB}{q}")).await;
                assert_eq!(set(uids(&list, "roleBindings")), expected, "[{b}] {q}: {list}");
                assert_eq!(list["totalCount"], expected.len().to_string(), "[{b}] {q}");
            }
        };
        check(format!("?identity={}", uid(&alice)), set([&rb, &rb3].map(uid))).await;
        check(format!("?identity={}", uid(&bob)), set([uid(&rb2)])).await;
        check(format!("?group={ou}"), set([uid(&rb)])).await;
        check(format!("?group={tu}"), set([&rb2, &rb3].map(uid))).await;
        check(format!("?role={}", uid(&owner)), set([uid(&rb3)])).await;
        check(format!("?role={}&group={tu}", uid(&custom)), set([uid(&rb2)])).await;
        check(format!("?role={}&group={ou}", uid(&custom)), BTreeSet::new()).await;
        check(format!("?uidp.descendants_of={tu}"), set([&rb2, &rb3].map(uid))).await;
        check(format!("?uidp.descendants_of={ou}"), set([&rb, &rb2, &rb3].map(uid))).await;
        for (param, bad) in [("identity", "xyz"), ("group", "nope"), ("role", "1234")] {
            let (status, body) = s.get(&format!("{RB}?{param}={bad}")).await;
            assert_invalid_field(b, status, &body, param);
        }
        // order_by=name sorts by the role's name.
        let list = get_ok(&s, &format!("{RB}?order_by=name")).await;
        let names: Vec<&str> = list["roleBindings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["role"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["lister", "owner", "viewer"], "[{b}] {list}");

        // Update: the role changes; the identity cannot.
        s.clock.advance_millis(5);
        let (status, up) = s
            .patch(
                &format!("{RB}/{ru}?updateMask=role_uid"),
                json!({ "roleUid": uid(&owner), "identityUid": uid(&bob) }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {up}");
        assert_hydrated(b, &up, &alice, &org, &owner);
        assert_eq!(up["uid"], rb["uid"], "[{b}]");
        assert_eq!(up["createTime"], rb["createTime"], "[{b}]");
        assert_eq!(get_ok(&s, &format!("{RB}/{ru}")).await, up, "[{b}]");
        // Without a mask: the body's keys.
        let (status, up) = s
            .patch(
                &format!("/iam/v2/roleBindings/{ru}"),
                json!({ "roleUid": uid(&viewer) }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {up}");
        assert_hydrated(b, &up, &alice, &org, &viewer);
        // identityUid alone changes nothing.
        let (status, same) = s
            .patch(&format!("{RB}/{ru}"), json!({ "identityUid": uid(&bob) }))
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {same}");
        assert_eq!(same, up, "[{b}]");
        let (status, body) = s
            .patch(
                &format!("{RB}/{ru}?updateMask=bogus"),
                json!({ "roleUid": uid(&owner) }),
            )
            .await;
        assert_invalid_field(b, status, &body, "update_mask");
        // The org's custom role is bindable at the org itself.
        let (status, up2) = s.patch(&format!("{RB}/{ru}"), json!({ "roleUid": uid(&custom) })).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {up2}");
        assert_hydrated(b, &up2, &alice, &org, &custom);

        // Create errors.
        let missing_id = format!("{ou}/0123456789abcdef");
        let (status, body) = s
            .post(
                &format!("{RB}/{ou}"),
                json!({ "identityUid": missing_id, "roleUid": uid(&viewer) }),
            )
            .await;
        assert_not_found(b, status, &body, IDENTITY_TYPE, &missing_id);
        let missing_role = format!("{ou}/fedcba9876543210");
        let (status, body) = s
            .post(
                &format!("{RB}/{ou}"),
                json!({ "identityUid": uid(&alice), "roleUid": missing_role }),
            )
            .await;
        assert_not_found(b, status, &body, ROLE_TYPE, &missing_role);
        let missing_group = "0123456789abcdef0123456789abcdef01234567";
        let (status, body) = s
            .post(
                &format!("{RB}/{missing_group}"),
                json!({ "identityUid": uid(&alice), "roleUid": uid(&viewer) }),
            )
            .await;
        assert_not_found(b, status, &body, GROUP_TYPE, missing_group);
        let (status, body) = s
            .post(&format!("{RB}/{ou}"), json!({ "identityUid": "x", "roleUid": "" }))
            .await;
        assert_invalid_field(b, status, &body, "identity_uid");
        assert_invalid_field(b, status, &body, "role_uid");

        // A role from a sibling group (or from below) cannot be bound here.
        let sibling = s.create_group(Some(&ou), "sibling").await;
        let sib_role = create_role(&s, &uid(&sibling), "sib", &["CAP_IAM_GROUPS_LIST"]).await;
        let team_role = create_role(&s, &tu, "teamrole", &["CAP_IAM_GROUPS_LIST"]).await;
        for (group, role) in [(&tu, &sib_role), (&ou, &team_role)] {
            let (status, body) = s
                .post(
                    &format!("{RB}/{group}"),
                    json!({ "identityUid": uid(&bob), "roleUid": uid(role) }),
                )
                .await;
            assert_invalid_field(b, status, &body, "role_uid");
        }
        let (status, body) = s
            .patch(&format!("{RB}/{}", uid(&rb2)), json!({ "roleUid": uid(&sib_role) }))
            .await;
        assert_invalid_field(b, status, &body, "role_uid");
        // Deeper is fine: the team role at a group below the team.
        let sub = s.create_group(Some(&tu), "sub").await;
        let rb4 = bind(&s, &uid(&sub), &uid(&bob), &uid(&team_role)).await;
        assert_hydrated(b, &rb4, &bob, &sub, &team_role);

        // Hydration follows the identity, group and role as they change, and a
        // static-keys identity shows its issuer and subject.
        let (status, renamed) = s
            .patch(
                &format!("{ID}/{}", uid(&alice)),
                json!({ "name": "alice2", "description": "renamed" }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {renamed}");
        let (status, team2) = s
            .patch(&format!("{G}/{tu}"), json!({ "description": "the team" }))
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {team2}");
        let got = get_ok(&s, &format!("{RB}/{}", uid(&rb3))).await;
        assert_hydrated(b, &got, &renamed, &team2, &owner);
        let (status, robot) = s
            .post(
                &format!("{ID}/{ou}"),
                json!({
                    "name": "robot",
                    "staticKeys": { "issuer": "https://static.example.com", "subject": "robot-1", "issuerKeys": JWKS },
                }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {robot}");
        let rb5 = bind(&s, &ou, &uid(&robot), &uid(&viewer)).await;
        assert_eq!(rb5["identity"]["issuer"], "https://static.example.com", "[{b}] {rb5}");
        assert_eq!(rb5["identity"]["subject"], "robot-1", "[{b}] {rb5}");

        // Delete is idempotent.
        for _ in 0..2 {
            let (status, body) = s.delete(&format!("{RB}/{ru}")).await;
            assert_eq!(status, StatusCode::OK, "[{b}] {body}");
            assert_eq!(body, json!({}), "[{b}]");
        }
        let (status, body) = s.delete(&format!("/iam/v2/roleBindings/{ou}/0123456789abcdef")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] never existed: {body}");
        let (status, body) = s.get(&format!("{RB}/{ru}")).await;
        assert_not_found(b, status, &body, BINDING_TYPE, &ru);
        let (status, body) = s.delete(&format!("{RB}/{ou}")).await;
        assert_invalid_field(b, status, &body, "uid");
        let (status, body) = s.patch(&format!("{RB}/{ru}"), json!({ "roleUid": uid(&viewer) })).await;
        assert_error(b, status, &body, 404, 5, "NOT_FOUND");
        let list = get_ok(&s, &format!("{RB}?identity={}", uid(&alice))).await;
        assert_eq!(uids(&list, "roleBindings"), [uid(&rb3)], "[{b}] {list}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_constraints() {
    for s in common::servers().await {
        let b = s.backend;
        let org = s.create_group(None, "acme").await;
        let ou = uid(&org);
        let viewer = builtin(&s, "viewer").await;

        // An identity with bindings.
        let id = create_identity(&s, &ou, "ci").await;
        let iu = uid(&id);
        let team = s.create_group(Some(&ou), "team").await;
        let tu = uid(&team);
        let rb1 = uid(&bind(&s, &ou, &iu, &viewer).await);
        let rb2 = uid(&bind(&s, &tu, &iu, &viewer).await);
        let (status, body) = s.delete(&format!("{ID}/{iu}")).await;
        let violations = assert_precondition(b, status, &body);
        let msg = body["message"].as_str().unwrap();
        assert!(
            msg.contains(&rb1) && msg.contains(&rb2),
            "[{b}] names both bindings: {body}"
        );
        assert!(
            violations
                .iter()
                .any(|v| v["type"] == "RESOURCE_IN_USE" && v["subject"] == iu),
            "[{b}] {body}"
        );
        get_ok(&s, &format!("{ID}/{iu}")).await;

        // A group holding a binding only (its identity lives in the org).
        let (status, body) = s.delete(&format!("{G}/{tu}")).await;
        let violations = assert_precondition(b, status, &body);
        let desc = violations[0]["description"].as_str().unwrap();
        assert!(desc.contains("role bindings"), "[{b}] {body}");
        assert!(!desc.contains("identities") && !desc.contains("groups"), "[{b}] {body}");
        assert_eq!(violations[0]["type"], "RESOURCE_NOT_EMPTY", "[{b}] {body}");
        assert_eq!(violations[0]["subject"], tu, "[{b}] {body}");

        // A group holding an identity, a role, a binding and a child group.
        let g = s.create_group(Some(&ou), "full").await;
        let gu = uid(&g);
        let gid = create_identity(&s, &gu, "member").await;
        let (status, body) = s.delete(&format!("{G}/{gu}")).await;
        let violations = assert_precondition(b, status, &body);
        assert_eq!(
            violations[0]["description"], "cannot delete group with child identities",
            "[{b}] {body}"
        );
        let grole = create_role(&s, &gu, "local", &["CAP_IAM_GROUPS_LIST"]).await;
        let gb = uid(&bind(&s, &gu, &uid(&gid), &uid(&grole)).await);
        let gchild = s.create_group(Some(&gu), "kid").await;
        let (status, body) = s.delete(&format!("/iam/v2/groups/{gu}")).await;
        let violations = assert_precondition(b, status, &body);
        let desc = violations[0]["description"].as_str().unwrap();
        for kind in ["groups", "identities", "roles", "role bindings"] {
            assert!(desc.contains(kind), "[{b}] names {kind}: {body}");
        }
        assert!(body["message"].as_str().unwrap().contains("identities"), "[{b}] {body}");

        // Emptied step by step, it goes.
        for path in [
            format!("{G}/{}", uid(&gchild)),
            format!("{RB}/{gb}"),
            format!("{ROLES}/{}", uid(&grole)),
        ] {
            let (status, body) = s.delete(&path).await;
            assert_eq!(status, StatusCode::OK, "[{b}] {path}: {body}");
        }
        let (status, body) = s.delete(&format!("{G}/{gu}")).await;
        let violations = assert_precondition(b, status, &body);
        assert_eq!(
            violations[0]["description"], "cannot delete group with child identities",
            "[{b}] {body}"
        );
        let (status, body) = s.delete(&format!("{ID}/{}", uid(&gid))).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        let (status, body) = s.delete(&format!("{G}/{gu}")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");

        // Unbound, the identity can go too.
        for rb in [&rb1, &rb2] {
            let (status, body) = s.delete(&format!("{RB}/{rb}")).await;
            assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        }
        let (status, body) = s.delete(&format!("{ID}/{iu}")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
    }
}

// ---------------------------------------------------------------------------
// Live authorization, no escalation, organization creation
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_authorization_smoke() {
    for s in common::servers().await {
        let b = s.backend;
        let org = s.create_group(None, "acme").await;
        let ou = uid(&org);
        let team = s.create_group(Some(&ou), "team").await;
        let other = s.create_group(None, "other").await;
        let x = create_identity(&s, &ou, "x").await;
        let xu = uid(&x);
        let tok = token_for(&s, &xu);

        // Nothing bound: nothing visible.
        let (status, list) = get_as(&s, &tok, G).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {list}");
        assert_eq!(list["totalCount"], "0", "[{b}] {list}");
        let (status, body) = get_as(&s, &tok, &format!("{G}/{ou}")).await;
        assert_not_found(b, status, &body, GROUP_TYPE, &ou);

        // Bound as viewer at the org: the same token sees it on the next request.
        let viewer = builtin(&s, "viewer").await;
        let rb = bind(&s, &ou, &xu, &viewer).await;
        let (status, list) = get_as(&s, &tok, G).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {list}");
        assert_eq!(
            set(uids(&list, "groups")),
            set([ou.clone(), uid(&team)]),
            "[{b}] the org and below: {list}"
        );
        assert_eq!(list["totalCount"], "2", "[{b}] {list}");
        let (status, _) = get_as(&s, &tok, &format!("/iam/v2/groups/{}", uid(&team))).await;
        assert_eq!(status, StatusCode::OK, "[{b}]");
        let (status, list) = get_as(&s, &tok, ID).await;
        assert_eq!(status, StatusCode::OK, "[{b}]");
        assert_eq!(uids(&list, "identities"), [xu.as_str()], "[{b}] {list}");
        let (status, list) = get_as(&s, &tok, RB).await;
        assert_eq!(status, StatusCode::OK, "[{b}]");
        assert_eq!(uids(&list, "roleBindings"), [uid(&rb)], "[{b}] {list}");

        // Seeing is not changing: 403.
        let (status, body) = post_as(&s, &tok, &format!("{G}/{ou}"), json!({ "name": "nope" })).await;
        assert_denied(b, status, &body);
        let (status, body) = s
            .call_as(
                &tok,
                Method::PATCH,
                &format!("{G}/{ou}"),
                Some(json!({ "description": "x" })),
            )
            .await;
        assert_denied(b, status, &body);
        let (status, body) = s
            .call_as(&tok, Method::DELETE, &format!("{RB}/{}", uid(&rb)), None)
            .await;
        assert_denied(b, status, &body);
        // Another organization stays invisible: 404.
        let (status, body) = get_as(&s, &tok, &format!("{G}/{}", uid(&other))).await;
        assert_not_found(b, status, &body, GROUP_TYPE, &uid(&other));
        let (status, body) = post_as(&s, &tok, &format!("{G}/{}", uid(&other)), json!({ "name": "nope" })).await;
        assert_not_found(b, status, &body, GROUP_TYPE, &uid(&other));
        // And nothing was created.
        let list = get_ok(&s, &format!("{G}?uidp.descendants_of={ou}")).await;
        assert_eq!(list["totalCount"], "2", "[{b}] {list}");

        // Unbinding takes effect at once.
        let (status, body) = s.delete(&format!("{RB}/{}", uid(&rb))).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        let (status, list) = get_as(&s, &tok, G).await;
        assert_eq!(status, StatusCode::OK, "[{b}]");
        assert_eq!(list["totalCount"], "0", "[{b}] {list}");
        let (status, body) = get_as(&s, &tok, &format!("{G}/{ou}")).await;
        assert_not_found(b, status, &body, GROUP_TYPE, &ou);

        // A role change is live too: bind as a custom role, then widen it.
        let custom = create_role(&s, &ou, "roles-only", &["CAP_IAM_ROLES_LIST"]).await;
        bind(&s, &ou, &xu, &uid(&custom)).await;
        let (_, list) = get_as(&s, &tok, G).await;
        assert_eq!(list["totalCount"], "0", "[{b}] no groups.list yet: {list}");
        let (status, body) = s
            .patch(
                &format!("{ROLES}/{}", uid(&custom)),
                json!({ "capabilities": ["CAP_IAM_ROLES_LIST", "CAP_IAM_GROUPS_LIST"] }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        let (_, list) = get_as(&s, &tok, G).await;
        assert_eq!(list["totalCount"], "2", "[{b}] widened role applies at once: {list}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_escalation() {
    for s in common::servers().await {
        let b = s.backend;
        let org = s.create_group(None, "acme").await;
        let ou = uid(&org);
        let team = s.create_group(Some(&ou), "team").await;
        let tu = uid(&team);
        let roles = builtins(&s).await;
        let x = uid(&create_identity(&s, &ou, "x").await);
        let y = uid(&create_identity(&s, &ou, "y").await);
        let binder = create_role(
            &s,
            &ou,
            "binder",
            &[
                "CAP_IAM_ROLE_BINDINGS_CREATE",
                "CAP_IAM_GROUPS_LIST",
                // Identities and custom roles X binds must be visible to X.
                "CAP_IAM_IDENTITY_LIST",
                "CAP_IAM_ROLES_LIST",
                "CAP_APK_LIST",
                "CAP_APK_BLOBS_GET",
            ],
        )
        .await;
        bind(&s, &ou, &x, &uid(&binder)).await;
        let tok = token_for(&s, &x);
        let before = get_ok(&s, RB).await["totalCount"].clone();

        // Owner (or viewer: identity.list etc.) is more than X holds, anywhere in the org.
        for (group, who, role) in [
            (&ou, &x, "owner"),
            (&ou, &y, "owner"),
            (&tu, &x, "owner"),
            (&ou, &y, "viewer"),
            (&tu, &y, "registry.push"),
        ] {
            let (status, body) = post_as(
                &s,
                &tok,
                &format!("{RB}/{group}"),
                json!({ "identityUid": who, "roleUid": roles[role] }),
            )
            .await;
            assert_denied(b, status, &body);
            assert!(
                body["message"]
                    .as_str()
                    .unwrap()
                    .contains("cannot grant capabilities you do not hold"),
                "[{b}] {role}: {body}"
            );
        }
        assert_eq!(get_ok(&s, RB).await["totalCount"], before, "[{b}] nothing bound");

        // Within what X holds is fine.
        let (status, body) = post_as(
            &s,
            &tok,
            &format!("{RB}/{tu}"),
            json!({ "identityUid": y, "roleUid": roles["apk.pull"] }),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "[{b}] a subset may be granted: {body}");
        let (status, body) = post_as(
            &s,
            &tok,
            &format!("{RB}/{ou}"),
            json!({ "identityUid": y, "roleUid": uid(&binder) }),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "[{b}] the same role may be granted: {body}");

        // X cannot define roles at all (no roles.create), let alone wider ones.
        for caps in [json!(["CAP_IAM_GROUPS_DELETE"]), json!(["CAP_IAM_GROUPS_LIST"])] {
            let (status, body) = post_as(
                &s,
                &tok,
                &format!("{ROLES}/{ou}"),
                json!({ "name": "mine", "capabilities": caps }),
            )
            .await;
            assert_denied(b, status, &body);
        }

        // Z may create roles, but only with capabilities Z holds there.
        let z = uid(&create_identity(&s, &ou, "z").await);
        let maker = create_role(&s, &ou, "maker", &["CAP_IAM_ROLES_CREATE", "CAP_IAM_GROUPS_LIST"]).await;
        bind(&s, &ou, &z, &uid(&maker)).await;
        let ztok = token_for(&s, &z);
        for (group, caps) in [
            (&ou, vec!["CAP_IAM_GROUPS_DELETE"]),
            (&tu, vec!["CAP_IAM_GROUPS_LIST", "CAP_IAM_ROLE_BINDINGS_CREATE"]),
        ] {
            let (status, body) = post_as(
                &s,
                &ztok,
                &format!("{ROLES}/{group}"),
                json!({ "name": "wider", "capabilities": caps }),
            )
            .await;
            assert_denied(b, status, &body);
            assert!(
                body["message"]
                    .as_str()
                    .unwrap()
                    .contains("cannot grant capabilities you do not hold"),
                "[{b}] {body}"
            );
        }
        let (status, body) = post_as(
            &s,
            &ztok,
            &format!("{ROLES}/{tu}"),
            json!({ "name": "narrow", "capabilities": ["CAP_IAM_GROUPS_LIST"] }),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        let list = get_ok(&s, &format!("{ROLES}?name=wider")).await;
        assert_eq!(list["totalCount"], "0", "[{b}] {list}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn org_creation_by_identities() {
    // Off by default.
    for s in common::servers().await {
        let b = s.backend;
        let org = s.create_group(None, "acme").await;
        let x = uid(&create_identity(&s, &uid(&org), "x").await);
        let tok = token_for(&s, &x);
        for path in ["/iam/v2/groups", G] {
            let (status, body) = post_as(&s, &tok, path, json!({ "name": "mine" })).await;
            assert_denied(b, status, &body);
        }
        // Not even with a binding at some org.
        bind(&s, &uid(&org), &x, &builtin(&s, "owner").await).await;
        let (status, body) = post_as(&s, &tok, "/iam/v2/groups", json!({ "name": "mine" })).await;
        assert_denied(b, status, &body);
        let list = get_ok(&s, &format!("{G}?uidp.in_root=true")).await;
        assert_eq!(list["totalCount"], "1", "[{b}] {list}");
    }

    // Allowed: the creator owns the new organization.
    for db in ward_store::testing::backends().await {
        let s = TestServer::start_with(db, |cfg| cfg.allow_org_creation = true).await;
        let b = s.backend;
        let home = s.create_group(None, "home").await;
        let hu = uid(&home);
        let x = uid(&create_identity(&s, &hu, "x").await);
        let tok = token_for(&s, &x);
        let owner = builtin(&s, "owner").await;

        let (status, mine) = post_as(
            &s,
            &tok,
            "/iam/v2/groups",
            json!({ "name": "mine", "description": "x's org" }),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {mine}");
        let mu = uid(&mine);
        assert!(is_hex(&mu, 40), "[{b}] a root uid: {mu}");
        assert_eq!(mine["verified"], false, "[{b}]");

        let (status, list) = get_as(&s, &tok, &format!("/iam/v2/roleBindings?group={mu}")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {list}");
        let items = list["roleBindings"].as_array().expect("roleBindings");
        assert_eq!(items.len(), 1, "[{b}] one owner binding: {list}");
        let ob = &items[0];
        assert_child_uid(b, &mu, &uid(ob));
        assert_eq!(ob["identity"]["uid"], x, "[{b}] {ob}");
        assert_eq!(ob["role"]["uid"], owner, "[{b}] {ob}");
        assert_eq!(ob["role"]["name"], "owner", "[{b}] {ob}");
        assert_eq!(ob["group"]["uid"], mu, "[{b}] {ob}");
        assert_eq!(ob["group"]["name"], "mine", "[{b}] {ob}");
        // The admin sees the same binding.
        let list = get_ok(&s, &format!("{RB}?identity={x}")).await;
        assert_eq!(list["roleBindings"], json!([ob]), "[{b}] {list}");

        // Owning it, X works inside it at once.
        let (status, kid) = post_as(&s, &tok, &format!("/iam/v2/groups/{mu}"), json!({ "name": "team" })).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {kid}");
        assert_child_uid(b, &mu, &uid(&kid));
        let (status, body) = post_as(
            &s,
            &tok,
            &format!("{ID}/{mu}"),
            json!({ "name": "bot", "claimMatch": { "issuer": "i", "subject": "s" } }),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        let (status, list) = get_as(&s, &tok, G).await;
        assert_eq!(status, StatusCode::OK, "[{b}]");
        assert_eq!(set(uids(&list, "groups")), set([mu.clone(), uid(&kid)]), "[{b}] {list}");
        // But not in the org it lives in.
        let (status, body) = get_as(&s, &tok, &format!("{G}/{hu}")).await;
        assert_not_found(b, status, &body, GROUP_TYPE, &hu);

        // A token whose subject is no identity cannot create organizations.
        let ghost = token_for(&s, "0123456789abcdef0123456789abcdef01234567");
        let (status, body) = post_as(&s, &ghost, "/iam/v2/groups", json!({ "name": "ghost" })).await;
        assert_denied(b, status, &body);
        // Admin-created organizations get no owner binding.
        let list = get_ok(&s, &format!("{RB}?group={hu}")).await;
        assert_eq!(list["totalCount"], "0", "[{b}] {list}");
        let list = get_ok(&s, &format!("{G}?uidp.in_root=true")).await;
        assert_eq!(list["totalCount"], "2", "[{b}] {list}");
    }
}

// ---------------------------------------------------------------------------
// gRPC
// ---------------------------------------------------------------------------

mod grpc {
    use super::*;
    use ward_proto::iam::v2::identities_service_client::IdentitiesServiceClient;
    use ward_proto::iam::v2::identity::Relationship;
    use ward_proto::iam::v2::role_bindings_service_client::RoleBindingsServiceClient;
    use ward_proto::iam::v2::roles_service_client::RolesServiceClient;
    use ward_proto::iam::v2::{
        ClaimMatch, CreateIdentityRequest, CreateRoleBindingRequest, CreateRoleRequest, DeleteIdentityRequest,
        DeleteRoleBindingRequest, DeleteRoleRequest, GetIdentityRequest, GetRoleBindingRequest, Identity,
        ListIdentitiesRequest, ListRoleBindingsRequest, ListRolesRequest, Role, RoleBinding, UpdateRoleBindingRequest,
        UpdateRoleRequest, claim_match,
    };

    pub use common::Bearer;

    type Chan = InterceptedService<Channel, Bearer>;

    pub async fn channel(s: &TestServer, token: &str) -> Chan {
        let ch = Channel::from_shared(format!("http://{}", s.addr()))
            .expect("valid uri")
            .connect()
            .await
            .unwrap_or_else(|e| panic!("[{}] connect: {e}", s.backend));
        InterceptedService::new(ch, Bearer(token.to_owned()))
    }

    fn assert_bad_request(b: &str, st: &Status, field: &str) {
        assert_eq!(st.code(), Code::InvalidArgument, "[{b}] {st:?}");
        let d = st.get_error_details();
        let info = d.error_info().unwrap_or_else(|| panic!("[{b}] ErrorInfo: {st:?}"));
        assert_eq!(info.reason, "INVALID_ARGUMENT", "[{b}]");
        assert_eq!(info.domain, DOMAIN, "[{b}]");
        let br = d.bad_request().unwrap_or_else(|| panic!("[{b}] BadRequest: {st:?}"));
        assert!(
            br.field_violations.iter().any(|v| v.field == field),
            "[{b}] no violation for {field}: {br:?}"
        );
    }

    fn claim_identity(name: &str, sub: claim_match::Sub) -> Identity {
        Identity {
            name: name.into(),
            description: format!("{name} over gRPC"),
            relationship: Some(Relationship::ClaimMatch(ClaimMatch {
                iss: Some(claim_match::Iss::Issuer("https://issuer.example.com".into())),
                sub: Some(sub),
                ..Default::default()
            })),
            ..Default::default()
        }
    }

    /// Hardening rule 12: out-of-range timestamps (1e15 seconds, negative
    /// nanos) are INVALID_ARGUMENT, never a panic; the server keeps serving.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn out_of_range_timestamps_are_invalid_argument() {
        for s in common::servers().await {
            let b = s.backend;
            let mut ids = IdentitiesServiceClient::new(channel(&s, &s.token).await);
            let ou = uid(&s.create_group(None, "acme").await);
            for (seconds, nanos) in [
                (1_000_000_000_000_000, 0),
                (i64::MAX, 0),
                (i64::MIN, 0),
                (4_000_000_000, -5),
            ] {
                let identity = Identity {
                    name: "robot".into(),
                    relationship: Some(Relationship::StaticKeys(ward_proto::iam::v2::StaticKeys {
                        issuer: "https://i.example.com".into(),
                        subject: "robot".into(),
                        issuer_keys: JWKS.into(),
                        expiration_time: Some(ward_proto::Timestamp { seconds, nanos }),
                        audiences: vec![],
                    })),
                    ..Default::default()
                };
                let st = ids
                    .create_identity(CreateIdentityRequest {
                        parent: ou.clone(),
                        identity: Some(identity),
                    })
                    .await
                    .expect_err("out of range");
                assert_bad_request(b, &st, "static_keys.expiration_time");
            }
            let (status, _) = s.get("/healthz").await;
            assert_eq!(status, StatusCode::OK, "[{b}] still serving");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn iam_over_grpc() {
        for s in common::servers().await {
            let b = s.backend;
            let ch = channel(&s, &s.token).await;
            let mut ids = IdentitiesServiceClient::new(ch.clone());
            let mut roles = RolesServiceClient::new(ch.clone());
            let mut rbs = RoleBindingsServiceClient::new(ch);
            let org = s.create_group(None, "acme").await;
            let ou = uid(&org);

            // Identities.
            let id = ids
                .create_identity(CreateIdentityRequest {
                    parent: ou.clone(),
                    identity: Some(claim_identity("ci", claim_match::Sub::Subject("repo:acme/app".into()))),
                })
                .await
                .unwrap_or_else(|e| panic!("[{b}] create identity: {e:?}"))
                .into_inner();
            assert_child_uid(b, &ou, &id.uid);
            assert!(id.last_seen_time.is_none(), "[{b}] {id:?}");
            assert!(id.create_time.is_some(), "[{b}]");
            let got = ids
                .get_identity(GetIdentityRequest { uid: id.uid.clone() })
                .await
                .expect("get identity")
                .into_inner();
            assert_eq!(got, id, "[{b}]");
            // REST sees the same identity.
            let rest = get_ok(&s, &format!("{ID}/{}", id.uid)).await;
            assert_eq!(rest["claimMatch"]["subject"], "repo:acme/app", "[{b}] {rest}");
            assert_eq!(rest["description"], "ci over gRPC", "[{b}]");

            let st = ids
                .create_identity(CreateIdentityRequest {
                    parent: ou.clone(),
                    identity: Some(claim_identity(
                        "bad",
                        claim_match::Sub::SubjectPattern("(unclosed".into()),
                    )),
                })
                .await
                .expect_err("invalid pattern");
            assert_bad_request(b, &st, "claim_match.subject_pattern");
            let st = ids
                .create_identity(CreateIdentityRequest {
                    parent: ou.clone(),
                    identity: Some(Identity {
                        name: "none".into(),
                        ..Default::default()
                    }),
                })
                .await
                .expect_err("no relationship");
            assert_bad_request(b, &st, "claim_match");
            let list = ids
                .list_identities(ListIdentitiesRequest {
                    relationship_type: 1,
                    ..Default::default()
                })
                .await
                .expect("list identities")
                .into_inner();
            assert_eq!(list.total_count, Some(1), "[{b}] {list:?}");
            assert_eq!(list.identities, std::slice::from_ref(&id), "[{b}]");

            // Roles.
            let builtin_list = roles
                .list_roles(ListRolesRequest {
                    uidp: Some(ward_proto::common::UidpFilter {
                        in_root: true,
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .await
                .expect("list roles")
                .into_inner();
            assert_eq!(builtin_list.total_count, Some(20), "[{b}]");
            let owner = builtin_list
                .roles
                .iter()
                .find(|r| r.name == "owner")
                .expect("owner")
                .clone();
            assert_eq!(owner.capabilities.len(), 143, "[{b}] {owner:?}");
            let role = roles
                .create_role(CreateRoleRequest {
                    parent: ou.clone(),
                    role: Some(Role {
                        name: "lister".into(),
                        capabilities: vec![103],
                        ..Default::default()
                    }),
                })
                .await
                .unwrap_or_else(|e| panic!("[{b}] create role: {e:?}"))
                .into_inner();
            assert_child_uid(b, &ou, &role.uid);
            assert_eq!(role.capabilities, [103], "[{b}]");
            let rest = get_ok(&s, &format!("{ROLES}/{}", role.uid)).await;
            assert_eq!(caps_of(&rest), ["CAP_IAM_GROUPS_LIST"], "[{b}] {rest}");
            for caps in [vec![999], vec![0], vec![]] {
                let st = roles
                    .create_role(CreateRoleRequest {
                        parent: ou.clone(),
                        role: Some(Role {
                            name: "bad".into(),
                            capabilities: caps.clone(),
                            ..Default::default()
                        }),
                    })
                    .await
                    .expect_err("bad capabilities");
                assert_bad_request(b, &st, "capabilities");
            }
            let st = roles
                .update_role(UpdateRoleRequest {
                    role: Some(Role {
                        uid: owner.uid.clone(),
                        description: "mine".into(),
                        ..Default::default()
                    }),
                    update_mask: None,
                })
                .await
                .expect_err("built-in");
            assert_eq!(st.code(), Code::FailedPrecondition, "[{b}] {st:?}");
            let d = st.get_error_details();
            let pf = d
                .precondition_failure()
                .unwrap_or_else(|| panic!("[{b}] PreconditionFailure: {st:?}"));
            assert!(
                pf.violations.iter().any(|v| v.r#type == "BUILT_IN_ROLE"),
                "[{b}] {pf:?}"
            );

            // Role bindings, hydrated.
            let rb = rbs
                .create_role_binding(CreateRoleBindingRequest {
                    parent: ou.clone(),
                    role_binding: Some(RoleBinding {
                        identity_uid: id.uid.clone(),
                        role_uid: role.uid.clone(),
                        ..Default::default()
                    }),
                })
                .await
                .unwrap_or_else(|e| panic!("[{b}] create binding: {e:?}"))
                .into_inner();
            assert_child_uid(b, &ou, &rb.uid);
            let hi = rb.identity.as_ref().expect("identity");
            assert_eq!(
                (
                    hi.uid.as_str(),
                    hi.name.as_str(),
                    hi.subject.as_str(),
                    hi.issuer.as_str()
                ),
                (id.uid.as_str(), "ci", "repo:acme/app", "https://issuer.example.com"),
                "[{b}] {rb:?}"
            );
            let hg = rb.group.as_ref().expect("group");
            assert_eq!((hg.uid.as_str(), hg.name.as_str()), (ou.as_str(), "acme"), "[{b}]");
            let hr = rb.role.as_ref().expect("role");
            assert_eq!(
                (hr.uid.as_str(), hr.name.as_str()),
                (role.uid.as_str(), "lister"),
                "[{b}]"
            );
            assert!(rb.create_time.is_some(), "[{b}]");
            let got = rbs
                .get_role_binding(GetRoleBindingRequest { uid: rb.uid.clone() })
                .await
                .expect("get binding")
                .into_inner();
            assert_eq!(got, rb, "[{b}]");
            let list = rbs
                .list_role_bindings(ListRoleBindingsRequest {
                    identity: id.uid.clone(),
                    ..Default::default()
                })
                .await
                .expect("list bindings")
                .into_inner();
            assert_eq!(list.role_bindings, std::slice::from_ref(&rb), "[{b}]");
            let updated = rbs
                .update_role_binding(UpdateRoleBindingRequest {
                    role_binding: Some(RoleBinding {
                        uid: rb.uid.clone(),
                        role_uid: owner.uid.clone(),
                        ..Default::default()
                    }),
                    update_mask: Some(pbjson_types::FieldMask {
                        paths: vec!["role_uid".into()],
                    }),
                })
                .await
                .expect("update binding")
                .into_inner();
            assert_eq!(updated.role.as_ref().map(|r| r.name.as_str()), Some("owner"), "[{b}]");
            let rest = get_ok(&s, &format!("{RB}/{}", rb.uid)).await;
            assert_eq!(rest["role"]["name"], "owner", "[{b}] {rest}");
            let rb2 = rbs
                .create_role_binding(CreateRoleBindingRequest {
                    parent: ou.clone(),
                    role_binding: Some(RoleBinding {
                        identity_uid: id.uid.clone(),
                        role_uid: role.uid.clone(),
                        ..Default::default()
                    }),
                })
                .await
                .expect("second binding")
                .into_inner();

            // Errors carry the same details as over REST.
            let missing = format!("{ou}/0123456789abcdef");
            let st = rbs
                .create_role_binding(CreateRoleBindingRequest {
                    parent: ou.clone(),
                    role_binding: Some(RoleBinding {
                        identity_uid: missing.clone(),
                        role_uid: role.uid.clone(),
                        ..Default::default()
                    }),
                })
                .await
                .expect_err("missing identity");
            assert_eq!(st.code(), Code::NotFound, "[{b}] {st:?}");
            let d = st.get_error_details();
            let ri = d
                .resource_info()
                .unwrap_or_else(|| panic!("[{b}] ResourceInfo: {st:?}"));
            assert_eq!(ri.resource_type, IDENTITY_TYPE, "[{b}]");
            assert_eq!(ri.resource_name, missing, "[{b}]");

            let st = ids
                .delete_identity(DeleteIdentityRequest { uid: id.uid.clone() })
                .await
                .expect_err("bound identity");
            assert_eq!(st.code(), Code::FailedPrecondition, "[{b}] {st:?}");
            let d = st.get_error_details();
            assert_eq!(d.error_info().expect("ErrorInfo").reason, "FAILED_PRECONDITION");
            let pf = d.precondition_failure().expect("PreconditionFailure");
            let v = pf
                .violations
                .iter()
                .find(|v| v.r#type == "RESOURCE_IN_USE")
                .unwrap_or_else(|| panic!("[{b}] {pf:?}"));
            assert_eq!(v.subject, id.uid, "[{b}]");
            assert!(
                v.description.contains(&rb2.uid) && st.message().contains(&rb2.uid),
                "[{b}] names the binding: {st:?}"
            );
            let st = roles
                .delete_role(DeleteRoleRequest { uid: role.uid.clone() })
                .await
                .expect_err("bound role");
            assert_eq!(st.code(), Code::FailedPrecondition, "[{b}] {st:?}");
            assert!(st.message().contains(&rb2.uid), "[{b}] {st:?}");

            // Deletes; a binding delete is idempotent.
            for uid in [&rb.uid, &rb2.uid, &rb2.uid] {
                rbs.delete_role_binding(DeleteRoleBindingRequest { uid: uid.clone() })
                    .await
                    .unwrap_or_else(|e| panic!("[{b}] delete binding: {e:?}"));
            }
            roles
                .delete_role(DeleteRoleRequest { uid: role.uid.clone() })
                .await
                .expect("delete role");
            ids.delete_identity(DeleteIdentityRequest { uid: id.uid.clone() })
                .await
                .expect("delete identity");
            let st = ids
                .get_identity(GetIdentityRequest { uid: id.uid.clone() })
                .await
                .expect_err("gone");
            assert_eq!(st.code(), Code::NotFound, "[{b}]");
            assert_eq!(
                st.get_error_details()
                    .resource_info()
                    .expect("ResourceInfo")
                    .resource_type,
                IDENTITY_TYPE,
                "[{b}]"
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn authorization_over_grpc() {
        for s in common::servers().await {
            let b = s.backend;
            let org = s.create_group(None, "acme").await;
            let ou = uid(&org);
            let x = uid(&create_identity(&s, &ou, "x").await);
            let tok = token_for(&s, &x);
            let ch = channel(&s, &tok).await;
            let mut rbs = RoleBindingsServiceClient::new(ch.clone());
            let mut beta_roles = ward_proto::iam::v2beta1::roles_service_client::RolesServiceClient::new(ch);

            // Nothing bound: the org is invisible.
            let st = rbs
                .create_role_binding(CreateRoleBindingRequest {
                    parent: ou.clone(),
                    role_binding: Some(RoleBinding {
                        identity_uid: x.clone(),
                        role_uid: builtin(&s, "owner").await,
                        ..Default::default()
                    }),
                })
                .await
                .expect_err("invisible");
            assert_eq!(st.code(), Code::NotFound, "[{b}] {st:?}");
            let list = beta_roles
                .list_roles(ListRolesRequest::default())
                .await
                .expect("list roles")
                .into_inner();
            assert_eq!(list.total_count, Some(0), "[{b}] {list:?}");

            // As a binder: escalation is PERMISSION_DENIED.
            let binder = create_role(
                &s,
                &ou,
                "binder",
                &[
                    "CAP_IAM_ROLE_BINDINGS_CREATE",
                    "CAP_IAM_GROUPS_LIST",
                    "CAP_IAM_ROLES_LIST",
                ],
            )
            .await;
            bind(&s, &ou, &x, &uid(&binder)).await;
            let st = rbs
                .create_role_binding(CreateRoleBindingRequest {
                    parent: ou.clone(),
                    role_binding: Some(RoleBinding {
                        identity_uid: x.clone(),
                        role_uid: builtin(&s, "owner").await,
                        ..Default::default()
                    }),
                })
                .await
                .expect_err("escalation");
            assert_eq!(st.code(), Code::PermissionDenied, "[{b}] {st:?}");
            assert_eq!(
                st.get_error_details().error_info().expect("ErrorInfo").reason,
                "PERMISSION_DENIED",
                "[{b}]"
            );
            // roles.list at the org: the built-ins and the org's role are visible.
            let list = beta_roles
                .list_roles(ListRolesRequest::default())
                .await
                .expect("list roles")
                .into_inner();
            assert_eq!(list.total_count, Some(21), "[{b}] {list:?}");
        }
    }
}

/// A mask naming one kind of relationship never switches the identity to the
/// other kind, whatever the body carries.
#[tokio::test]
async fn relationship_mask_must_match_the_body() {
    for s in common::servers().await {
        let b = s.backend;
        let org = uid(&s.create_group(None, "acme").await);
        let id = uid(&create_identity(&s, &org, "ci").await);
        let static_keys =
            json!({ "staticKeys": { "issuer": "https://keys.example.com", "subject": "bot", "issuerKeys": JWKS } });
        let (status, body) = s
            .patch(&format!("{ID}/{id}?updateMask=claim_match"), static_keys.clone())
            .await;
        assert_invalid_field(b, status, &body, "claim_match");
        let kept = get_ok(&s, &format!("{ID}/{id}")).await;
        assert!(kept["claimMatch"].is_object(), "[{b}] unchanged: {kept}");
        // Naming the kind the body carries switches it.
        let (status, body) = s.patch(&format!("{ID}/{id}?updateMask=static_keys"), static_keys).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        assert_eq!(body["staticKeys"]["subject"], "bot", "[{b}] {body}");
    }
}

/// Binding a custom role from outside the group's ancestry is INVALID_ARGUMENT
/// to a caller who may see that role, and NOT_FOUND to one who may not.
#[tokio::test]
async fn foreign_custom_roles_are_not_revealed() {
    for s in common::servers().await {
        let b = s.backend;
        let (org, other) = (
            uid(&s.create_group(None, "acme").await),
            uid(&s.create_group(None, "globex").await),
        );
        let foreign = uid(&create_role(&s, &other, "foreign", &["CAP_IAM_GROUPS_LIST"]).await);
        let target = uid(&create_identity(&s, &org, "target").await);
        let binder = uid(&create_identity(&s, &org, "binder").await);
        let binder_role = create_role(
            &s,
            &org,
            "binder",
            &[
                "CAP_IAM_ROLE_BINDINGS_CREATE",
                "CAP_IAM_GROUPS_LIST",
                "CAP_IAM_ROLES_LIST",
            ],
        )
        .await;
        bind(&s, &org, &binder, &uid(&binder_role)).await;
        let body = json!({ "identityUid": target, "roleUid": foreign });
        let (status, resp) = post_as(&s, &token_for(&s, &binder), &format!("{RB}/{org}"), body.clone()).await;
        assert_not_found(b, status, &resp, ROLE_TYPE, &foreign);
        let (status, resp) = s.post(&format!("{RB}/{org}"), body).await;
        assert_invalid_field(b, status, &resp, "role_uid");
    }
}
