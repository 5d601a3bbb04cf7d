//! REST behaviour of Groups: creation, JSON shape, validation, errors, updates,
//! deletion, listing filters, ordering and pagination (page tokens included),
//! body handling. Every test runs once per storage backend.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{TestServer, assert_error, enc, field_violations, is_hex, uid};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const G: &str = "/iam/v2beta1/groups";

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// `?k1=v1&k2=v2` with values encoded (keys are written as given).
fn query(pairs: &[(&str, &str)]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={}", enc(v))).collect();
    format!("?{}", parts.join("&"))
}

fn timestamp_re() -> regex::Regex {
    regex::Regex::new(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$").unwrap()
}

/// 400 / INVALID_ARGUMENT with a BadRequest violation naming `field`.
fn assert_invalid_field(backend: &str, status: StatusCode, body: &Value, field: &str) {
    assert_error(backend, status, body, 400, 3, "INVALID_ARGUMENT");
    let v = field_violations(body);
    assert!(
        v.iter().any(|(f, _)| f == field),
        "[{backend}] expected a field violation for {field:?}; body: {body}"
    );
    let msg = body["message"].as_str().unwrap_or_default();
    assert!(msg.starts_with("Invalid argument: "), "[{backend}] message: {msg}");
}

/// A detail of the given google.rpc type.
fn detail<'a>(body: &'a Value, ty: &str) -> Option<&'a Value> {
    body["details"]
        .as_array()?
        .iter()
        .find(|d| d["@type"] == format!("type.googleapis.com/google.rpc.{ty}"))
}

/// Any AIP-193 error body with the given HTTP status.
fn assert_aip193(backend: &str, status: StatusCode, body: &Value, http: u16) {
    assert_eq!(status.as_u16(), http, "[{backend}] status; body: {body}");
    let code = body["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("[{backend}] no numeric code: {body}"));
    assert!((1..=16).contains(&code), "[{backend}] code {code}: {body}");
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "[{backend}] message: {body}"
    );
    let info = detail(body, "ErrorInfo").unwrap_or_else(|| panic!("[{backend}] no ErrorInfo: {body}"));
    assert_eq!(info["domain"], "iam.chainguard.dev", "[{backend}] {body}");
    assert!(
        info["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "[{backend}] {body}"
    );
}

/// GET that must succeed.
async fn get_ok(s: &TestServer, path: &str) -> Value {
    let (status, body) = s.get(path).await;
    assert_eq!(status, StatusCode::OK, "[{}] GET {path}: {body}", s.backend);
    body
}

/// The uids of a list page, in order.
fn page_uids(page: &Value) -> Vec<String> {
    page["groups"]
        .as_array()
        .expect("groups array")
        .iter()
        .map(uid)
        .collect()
}

/// `nextPageToken`, treating absent and "" as the end.
fn next_token(page: &Value) -> Option<String> {
    page["nextPageToken"]
        .as_str()
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
}

/// Walks every page of a list; `first` params go on the first request only.
async fn walk(s: &TestServer, params: &[(&str, &str)], first: &[(&str, &str)]) -> Vec<Value> {
    let mut pages = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut p: Vec<(&str, &str)> = params.to_vec();
        match &token {
            Some(t) => p.push(("page_token", t.as_str())),
            None => p.extend_from_slice(first),
        }
        let page = get_ok(s, &format!("{G}{}", query(&p))).await;
        token = next_token(&page);
        pages.push(page);
        assert!(pages.len() < 1000, "[{}] runaway pagination", s.backend);
        if token.is_none() {
            return pages;
        }
    }
}

fn walked_uids(pages: &[Value]) -> Vec<String> {
    pages.iter().flat_map(page_uids).collect()
}

/// The uids of `groups` in the order `order_by` names (ties broken by uid in the
/// same direction), computed locally.
fn sorted_uids(groups: &[Value], order_by: &str) -> Vec<String> {
    let mut words = order_by.split_whitespace();
    let field = words.next().unwrap_or("uid");
    let desc = words.next().is_some_and(|d| d.eq_ignore_ascii_case("desc"));
    let key_name = match field {
        "uid" => "uid",
        "name" => "name",
        "create_time" | "created_at" | "createTime" | "createdAt" => "createTime",
        "update_time" | "updated_at" | "updateTime" | "updatedAt" => "updateTime",
        other => panic!("unknown order field {other}"),
    };
    let mut v: Vec<(String, String)> = groups
        .iter()
        .map(|g| (g[key_name].as_str().expect("sort key").to_owned(), uid(g)))
        .collect();
    v.sort();
    if desc {
        v.reverse();
    }
    v.into_iter().map(|(_, u)| u).collect()
}

/// Creates groups under `parent` (8 requests in flight), returned in `names` order.
async fn create_many(s: &TestServer, parent: &str, names: &[String]) -> Vec<Value> {
    let sem = Arc::new(tokio::sync::Semaphore::new(8));
    let mut set = tokio::task::JoinSet::new();
    for (i, name) in names.iter().enumerate() {
        let (http, token, sem) = (s.http.clone(), s.token.clone(), sem.clone());
        let url = format!("{}{G}/{parent}", s.base);
        let name = name.clone();
        set.spawn(async move {
            let _permit = sem.acquire_owned().await.expect("semaphore");
            let resp = http
                .post(url)
                .bearer_auth(token)
                .json(&json!({ "name": name }))
                .send()
                .await
                .expect("send");
            let status = resp.status();
            let body: Value = resp.json().await.expect("json");
            (i, status, body)
        });
    }
    let mut out = vec![Value::Null; names.len()];
    while let Some(r) = set.join_next().await {
        let (i, status, body) = r.expect("task");
        assert_eq!(status, StatusCode::OK, "[{}] create {}: {body}", s.backend, names[i]);
        out[i] = body;
    }
    out
}

/// Sends a raw request with the admin token.
async fn raw(
    s: &TestServer,
    method: Method,
    path: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> (StatusCode, Value) {
    let mut req = s
        .http
        .request(method, format!("{}{path}", s.base))
        .bearer_auth(&s.token);
    if let Some(ct) = content_type {
        req = req.header(reqwest::header::CONTENT_TYPE, ct);
    }
    let resp = req.body(body).send().await.expect("request sent");
    let status = resp.status();
    let text = resp.text().await.expect("body");
    let json = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, json)
}

fn set_of(v: impl IntoIterator<Item = String>) -> BTreeSet<String> {
    v.into_iter().collect()
}

// ---------------------------------------------------------------------------
// Creation and shape
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_root_and_child_uids() {
    for s in common::servers().await {
        let b = s.backend;
        let (status, org) = s.post(G, json!({ "name": "acme", "verified": true })).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {org}");
        let org_uid = uid(&org);
        assert!(is_hex(&org_uid, 40), "[{b}] root uid {org_uid}");
        assert_eq!(org["verified"], false, "[{b}] verified must be false: {org}");
        assert_eq!(org["name"], "acme", "[{b}]");

        let (status, child) = s
            .post(&format!("{G}/{org_uid}"), json!({ "name": "eng", "verified": true }))
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {child}");
        let child_uid = uid(&child);
        let (prefix, seg) = child_uid.rsplit_once('/').expect("child uid has a segment");
        assert_eq!(prefix, org_uid, "[{b}] child uid {child_uid}");
        assert!(is_hex(seg, 16), "[{b}] child segment {seg}");
        assert_eq!(child["verified"], false, "[{b}] {child}");

        let grandchild = s.create_group(Some(&child_uid), "team").await;
        let gc = uid(&grandchild);
        let (prefix, seg) = gc.rsplit_once('/').unwrap();
        assert_eq!(prefix, child_uid, "[{b}]");
        assert!(is_hex(seg, 16), "[{b}]");

        // Stored as returned.
        let got = get_ok(&s, &format!("{G}/{child_uid}")).await;
        assert_eq!(got, child, "[{b}] GET equals the create response");

        // Same behaviour at /iam/v2/.
        let (status, org2) = s
            .post("/iam/v2/groups", json!({ "name": "v2org", "verified": true }))
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] v2 create: {org2}");
        let org2_uid = uid(&org2);
        assert!(is_hex(&org2_uid, 40), "[{b}] v2 root uid {org2_uid}");
        assert_eq!(org2["verified"], false, "[{b}]");
        let (status, c2) = s
            .post(&format!("/iam/v2/groups/{org2_uid}"), json!({ "name": "sub" }))
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] v2 child: {c2}");
        assert!(uid(&c2).starts_with(&format!("{org2_uid}/")), "[{b}]");
        let (status, got) = s.get(&format!("/iam/v2/groups/{}", uid(&c2))).await;
        assert_eq!(status, StatusCode::OK, "[{b}]");
        assert_eq!(got, c2, "[{b}]");
        // v2 and v2beta1 see the same data.
        let (status, got) = s.get(&format!("/iam/v2/groups/{child_uid}")).await;
        assert_eq!(status, StatusCode::OK, "[{b}]");
        assert_eq!(got, child, "[{b}]");
        let (status, list) = s.get(&format!("/iam/v2/groups?uidp.descendants_of={org2_uid}")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {list}");
        assert_eq!(list["totalCount"], "2", "[{b}] {list}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_shape_is_camel_case_with_every_field() {
    let ts = timestamp_re();
    for s in common::servers().await {
        let b = s.backend;
        let org = s.create_group(None, "shape").await;
        let obj = org.as_object().expect("object");
        for k in obj.keys() {
            assert!(!k.contains('_'), "[{b}] snake_case key {k:?} in {org}");
        }
        for k in [
            "uid",
            "name",
            "description",
            "resourceLimits",
            "verified",
            "createTime",
            "updateTime",
        ] {
            assert!(obj.contains_key(k), "[{b}] missing {k} in {org}");
        }
        assert_eq!(org["description"], "", "[{b}] {org}");
        assert_eq!(org["verified"], false, "[{b}] {org}");
        assert_eq!(org["resourceLimits"], json!({}), "[{b}] {org}");
        for k in ["createTime", "updateTime"] {
            let t = org[k]
                .as_str()
                .unwrap_or_else(|| panic!("[{b}] {k} not a string: {org}"));
            assert!(ts.is_match(t), "[{b}] {k} = {t:?}");
        }
        assert_eq!(org["createTime"], org["updateTime"], "[{b}] fresh group");

        // GET has the same shape.
        let got = get_ok(&s, &format!("{G}/{}", uid(&org))).await;
        assert_eq!(got, org, "[{b}]");

        // List: camelCase; totalCount is a string; skipped is a number echoing skip.
        for (i, n) in ["a", "b", "c"].iter().enumerate() {
            let g = s.create_group(Some(&uid(&org)), n).await;
            assert!(ts.is_match(g["createTime"].as_str().unwrap()), "[{b}] child {i}");
        }
        let list = get_ok(&s, &format!("{G}?uidp.descendants_of={}&skip=1", uid(&org))).await;
        let lobj = list.as_object().expect("object");
        for k in lobj.keys() {
            assert!(!k.contains('_'), "[{b}] snake_case key {k:?} in {list}");
        }
        assert!(lobj.contains_key("groups"), "[{b}] {list}");
        assert_eq!(
            list["totalCount"],
            json!("4"),
            "[{b}] totalCount must be a JSON string: {list}"
        );
        assert_eq!(list["skipped"], json!(1), "[{b}] skipped must be the number 1: {list}");
        assert_eq!(list["groups"].as_array().unwrap().len(), 3, "[{b}] {list}");
        for g in list["groups"].as_array().unwrap() {
            for k in [
                "uid",
                "name",
                "description",
                "resourceLimits",
                "verified",
                "createTime",
                "updateTime",
            ] {
                assert!(g.get(k).is_some(), "[{b}] list item missing {k}: {g}");
            }
        }
        let list = get_ok(&s, &format!("{G}?uidp.descendants_of={}", uid(&org))).await;
        assert_eq!(list["skipped"], json!(0), "[{b}] {list}");
        assert_eq!(list["totalCount"], json!("4"), "[{b}] {list}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_validation() {
    for s in common::servers().await {
        let b = s.backend;
        let (status, body) = s.post(G, json!({})).await;
        assert_error(b, status, &body, 400, 3, "INVALID_ARGUMENT");
        assert_eq!(
            body["message"], r#"Invalid argument: name: name must match "^[a-z0-9 ._-]{1,}$""#,
            "[{b}] {body}"
        );
        let v = field_violations(&body);
        assert_eq!(v.len(), 1, "[{b}] exactly one violation: {body}");
        assert_eq!(v[0].0, "name", "[{b}] {body}");

        for bad in ["Acme", "ac\tme", "ACME", "a/b", "a".repeat(64).as_str()] {
            let (status, body) = s.post(G, json!({ "name": bad })).await;
            assert_invalid_field(b, status, &body, "name");
        }
        for bad in ["line\nbreak", "tab\there", "x".repeat(513).as_str()] {
            let (status, body) = s.post(G, json!({ "name": "ok", "description": bad })).await;
            assert_invalid_field(b, status, &body, "description");
            assert!(
                !field_violations(&body).iter().any(|(f, _)| f == "name"),
                "[{b}] {body}"
            );
        }
        // Both wrong: both reported.
        let (status, body) = s.post(G, json!({ "name": "BAD", "description": "a\nb" })).await;
        assert_invalid_field(b, status, &body, "name");
        assert_invalid_field(b, status, &body, "description");

        // Children are validated too.
        let org = s.create_group(None, "valid").await;
        let (status, body) = s.post(&format!("{G}/{}", uid(&org)), json!({ "name": "Eng" })).await;
        assert_invalid_field(b, status, &body, "name");

        // Nothing invalid was stored.
        let list = get_ok(&s, G).await;
        assert_eq!(list["totalCount"], "1", "[{b}] only the valid org exists: {list}");

        // Limits: a 63-character name and a 512-character description are fine.
        let (status, body) = s
            .post(G, json!({ "name": "a".repeat(63), "description": "é".repeat(512) }))
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] limits: {body}");
        // Allowed characters.
        let ok = s.create_group(None, "a.b_c-d 1").await;
        assert_eq!(ok["name"], "a.b_c-d 1", "[{b}]");
        let (status, body) = s
            .post(G, json!({ "name": "x", "description": "Hello, World! ünïcode" }))
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        assert_eq!(body["description"], "Hello, World! ünïcode", "[{b}]");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_found_and_malformed_uids() {
    for s in common::servers().await {
        let b = s.backend;
        let missing = "0123456789abcdef0123456789abcdef01234567";
        // Create under a missing parent.
        let (status, body) = s.post(&format!("{G}/{missing}"), json!({ "name": "orphan" })).await;
        assert_error(b, status, &body, 404, 5, "NOT_FOUND");
        let info = detail(&body, "ResourceInfo").unwrap_or_else(|| panic!("[{b}] no ResourceInfo: {body}"));
        assert_eq!(info["resourceName"], missing, "[{b}] {body}");
        let list = get_ok(&s, G).await;
        assert_eq!(list["totalCount"], "0", "[{b}] nothing created: {list}");

        // Missing parent one level down.
        let org = s.create_group(None, "org").await;
        let missing_child = format!("{}/0123456789abcdef", uid(&org));
        let (status, body) = s.post(&format!("{G}/{missing_child}"), json!({ "name": "x" })).await;
        assert_error(b, status, &body, 404, 5, "NOT_FOUND");
        assert!(detail(&body, "ResourceInfo").is_some(), "[{b}] {body}");

        // Malformed uids: 400.
        for bad in [
            "xyz",
            "ABCDEF0123456789ABCDEF0123456789ABCDEF01",
            &format!("{}/", uid(&org)),
            &format!("{}/0123", uid(&org)),
        ] {
            let (status, body) = s.get(&format!("{G}/{bad}")).await;
            assert_error(b, status, &body, 400, 3, "INVALID_ARGUMENT");
            assert!(!field_violations(&body).is_empty(), "[{b}] {body}");
        }
        // A create's parent may also be a group name: "xyz" names none.
        let (status, body) = s.post(&format!("{G}/xyz"), json!({ "name": "x" })).await;
        assert_error(b, status, &body, 404, 5, "NOT_FOUND");
        let (status, body) = s.post(&format!("{G}/Not%20a%20name"), json!({ "name": "x" })).await;
        assert_invalid_field(b, status, &body, "parent");
        let (status, body) = s.delete(&format!("{G}/xyz")).await;
        assert_error(b, status, &body, 400, 3, "INVALID_ARGUMENT");
        let (status, body) = s.patch(&format!("{G}/xyz"), json!({ "name": "x" })).await;
        assert_error(b, status, &body, 400, 3, "INVALID_ARGUMENT");

        // Well-formed but absent: 404 with ResourceInfo.
        for path in [format!("{G}/{missing}"), format!("{G}/{missing_child}")] {
            let (status, body) = s.get(&path).await;
            assert_error(b, status, &body, 404, 5, "NOT_FOUND");
            let info = detail(&body, "ResourceInfo").unwrap_or_else(|| panic!("[{b}] no ResourceInfo: {body}"));
            assert_eq!(info["resourceType"], "iam.chainguard.dev/Group", "[{b}] {body}");
        }
        let (status, body) = s.delete(&format!("{G}/{missing}")).await;
        assert_error(b, status, &body, 404, 5, "NOT_FOUND");
        let (status, body) = s.patch(&format!("{G}/{missing}"), json!({ "description": "x" })).await;
        assert_error(b, status, &body, 404, 5, "NOT_FOUND");
    }
}

// ---------------------------------------------------------------------------
// Delete
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_rules() {
    for s in common::servers().await {
        let b = s.backend;
        let org = s.create_group(None, "org").await;
        let child = s.create_group(Some(&uid(&org)), "child").await;
        let (ou, cu) = (uid(&org), uid(&child));

        let (status, body) = s.delete(&format!("{G}/{ou}")).await;
        assert_error(b, status, &body, 400, 9, "FAILED_PRECONDITION");
        assert_eq!(
            body["message"], "Precondition failed: cannot delete group with child groups",
            "[{b}] {body}"
        );
        let pf = detail(&body, "PreconditionFailure").unwrap_or_else(|| panic!("[{b}] no PreconditionFailure: {body}"));
        let violations = pf["violations"].as_array().expect("violations");
        assert!(
            violations.iter().any(|v| v["type"] == "RESOURCE_NOT_EMPTY"),
            "[{b}] RESOURCE_NOT_EMPTY expected: {body}"
        );
        // Still there.
        get_ok(&s, &format!("{G}/{ou}")).await;
        get_ok(&s, &format!("{G}/{cu}")).await;

        let (status, body) = s.delete(&format!("{G}/{cu}")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        assert_eq!(body, json!({}), "[{b}] DELETE returns {{}}");
        let (status, body) = s.delete(&format!("{G}/{ou}")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        assert_eq!(body, json!({}), "[{b}]");

        for u in [&ou, &cu] {
            let (status, body) = s.get(&format!("{G}/{u}")).await;
            assert_error(b, status, &body, 404, 5, "NOT_FOUND");
        }
        // Deleting again: 404.
        let (status, body) = s.delete(&format!("{G}/{ou}")).await;
        assert_error(b, status, &body, 404, 5, "NOT_FOUND");
        let list = get_ok(&s, G).await;
        assert_eq!(list["totalCount"], "0", "[{b}] {list}");
    }
}

// ---------------------------------------------------------------------------
// Update
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_semantics() {
    for s in common::servers().await {
        let b = s.backend;
        let (status, org) = s.post(G, json!({ "name": "orig", "description": "first" })).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {org}");
        let u = uid(&org);
        let path = format!("{G}/{u}");
        let mut last = org.clone();

        // Make sure the clock moves visibly between writes.
        let tick = || s.clock.advance_millis(5);

        // No mask: only the fields in the body change.
        tick();
        let (status, g) = s.patch(&path, json!({ "description": "second" })).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {g}");
        assert_eq!(g["name"], "orig", "[{b}] name unchanged: {g}");
        assert_eq!(g["description"], "second", "[{b}] {g}");
        assert_eq!(g["uid"], u, "[{b}] response is the whole group: {g}");
        assert_eq!(g["createTime"], org["createTime"], "[{b}] createTime fixed");
        assert!(
            g["updateTime"].as_str() > last["updateTime"].as_str(),
            "[{b}] updateTime moves forward: {g} vs {last}"
        );
        assert!(
            g.get("verified").is_some() && g.get("resourceLimits").is_some(),
            "[{b}] whole group: {g}"
        );
        assert_eq!(get_ok(&s, &path).await, g, "[{b}] stored as returned");
        last = g;

        tick();
        let (status, g) = s.patch(&path, json!({ "name": "renamed" })).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {g}");
        assert_eq!(g["name"], "renamed", "[{b}]");
        assert_eq!(g["description"], "second", "[{b}] description unchanged: {g}");
        assert!(g["updateTime"].as_str() > last["updateTime"].as_str(), "[{b}]");
        last = g;

        // Clearing a field by sending it empty (present in the body, so in the mask).
        tick();
        let (status, g) = s.patch(&path, json!({ "description": "" })).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {g}");
        assert_eq!(g["description"], "", "[{b}] explicit empty description clears it: {g}");
        assert_eq!(g["name"], "renamed", "[{b}]");
        assert!(g["updateTime"].as_str() > last["updateTime"].as_str(), "[{b}]");
        last = g;

        // Explicit mask: a name in the body outside it is not written, but one
        // that breaks the schema is refused, as the published schema says.
        let (status, body) = s
            .patch(
                &format!("{path}?updateMask=description"),
                json!({ "name": "IGNORED NAME" }),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "[{b}] {body}");
        for (key, name) in [("updateMask", "ignored"), ("update_mask", "ignored-too")] {
            tick();
            let d = format!("via {key}");
            let (status, g) = s
                .patch(
                    &format!("{path}?{key}=description"),
                    json!({ "name": name, "description": d }),
                )
                .await;
            assert_eq!(status, StatusCode::OK, "[{b}] {key}: {g}");
            assert_eq!(g["name"], "renamed", "[{b}] {key}: name must be ignored: {g}");
            assert_eq!(g["description"], d, "[{b}] {key}: {g}");
            assert!(g["updateTime"].as_str() > last["updateTime"].as_str(), "[{b}]");
            assert_eq!(g["createTime"], org["createTime"], "[{b}]");
            last = g;
        }

        // Mask naming a field absent from the body clears it.
        tick();
        let (status, g) = s
            .patch(&format!("{path}?updateMask=description"), json!({ "name": "nope" }))
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {g}");
        assert_eq!(g["description"], "", "[{b}] masked, absent => default: {g}");
        assert_eq!(g["name"], "renamed", "[{b}]");

        // Comma-separated lists, camelCase/snake_case paths, repeated parameters.
        for q in [
            "updateMask=name,description",
            "update_mask=name%2Cdescription",
            "updateMask=name&updateMask=description",
        ] {
            tick();
            let (status, g) = s
                .patch(
                    &format!("{path}?{q}"),
                    json!({ "name": format!("n {}", q.len()), "description": q }),
                )
                .await;
            assert_eq!(status, StatusCode::OK, "[{b}] {q}: {g}");
            assert_eq!(g["name"], format!("n {}", q.len()), "[{b}] {q}: {g}");
            assert_eq!(g["description"], q, "[{b}] {q}: {g}");
        }
        // The mask still validates what it names.
        let (status, body) = s
            .patch(&format!("{path}?updateMask=name"), json!({ "name": "Bad" }))
            .await;
        assert_invalid_field(b, status, &body, "name");
        let (status, body) = s.patch(&path, json!({ "description": "a\nb" })).await;
        assert_invalid_field(b, status, &body, "description");

        // Unknown mask path.
        let before = get_ok(&s, &path).await;
        for q in ["updateMask=nmae", "update_mask=description,bogus"] {
            let (status, body) = s.patch(&format!("{path}?{q}"), json!({ "description": "zzz" })).await;
            assert_invalid_field(b, status, &body, "update_mask");
        }
        assert_eq!(get_ok(&s, &path).await, before, "[{b}] rejected updates change nothing");

        // Output-only fields in the body are ignored (no mask and with a mask naming them).
        tick();
        let forged = json!({
            "uid": "0123456789abcdef0123456789abcdef01234567",
            "createTime": "2000-01-01T00:00:00.000Z",
            "updateTime": "2000-01-01T00:00:00.000Z",
            "verified": true,
            "resourceLimits": { "children": 5 },
            "description": "with output-only fields",
        });
        let (status, g) = s.patch(&path, forged.clone()).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {g}");
        assert_eq!(g["uid"], u, "[{b}] uid from the path: {g}");
        assert_eq!(g["createTime"], org["createTime"], "[{b}] {g}");
        assert_eq!(g["verified"], false, "[{b}] {g}");
        assert_eq!(g["resourceLimits"], json!({}), "[{b}] {g}");
        assert_eq!(g["description"], "with output-only fields", "[{b}]");
        assert!(g["updateTime"].as_str() > before["updateTime"].as_str(), "[{b}]");
        let (status, g2) = s
            .patch(
                &format!("{path}?updateMask=uid,createTime,verified,resource_limits"),
                forged,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] output-only mask paths are ignored: {g2}");
        assert_eq!(g2["verified"], false, "[{b}] {g2}");
        assert_eq!(g2["createTime"], org["createTime"], "[{b}] {g2}");
        assert_eq!(g2["uid"], u, "[{b}]");
        assert_eq!(g2["name"], g["name"], "[{b}]");
        assert_eq!(g2["description"], g["description"], "[{b}]");
        // updateTime moves forward even when the clock does not (rapid updates)...
        let mut prev = get_ok(&s, &path).await;
        for i in 0..5 {
            let (status, g) = s.patch(&path, json!({ "description": format!("rapid {i}") })).await;
            assert_eq!(status, StatusCode::OK, "[{b}] {g}");
            assert!(
                g["updateTime"].as_str() > prev["updateTime"].as_str(),
                "[{b}] rapid update {i}: {g} vs {prev}"
            );
            assert_eq!(g["createTime"], org["createTime"], "[{b}]");
            prev = g;
        }
        // ...or runs behind: a replica whose clock lags this server's by a second.
        s.clock.advance_millis(1000);
        let (status, g) = s.patch(&path, json!({ "description": "ahead" })).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {g}");
        let r = s.replica().await;
        let (status, g2) = r.patch(&path, json!({ "description": "behind" })).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {g2}");
        assert!(
            g2["updateTime"].as_str() > g["updateTime"].as_str(),
            "[{b}] lagging clock: {g2} vs {g}"
        );
        assert_eq!(g2["createTime"], org["createTime"], "[{b}]");
        drop(r);

        // The forged uid was not touched or created.
        let (status, body) = s.get(&format!("{G}/0123456789abcdef0123456789abcdef01234567")).await;
        assert_error(b, status, &body, 404, 5, "NOT_FOUND");
    }
}

// ---------------------------------------------------------------------------
// Listing: filters and parameters
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_filters() {
    for s in common::servers().await {
        let b = s.backend;
        let a = uid(&s.create_group(None, "alpha").await);
        let a1 = uid(&s.create_group(Some(&a), "eng").await);
        let a2 = uid(&s.create_group(Some(&a), "ops").await);
        let a11 = uid(&s.create_group(Some(&a1), "eng").await);
        let a111 = uid(&s.create_group(Some(&a11), "deep").await);
        let bb = uid(&s.create_group(None, "beta").await);
        let b1 = uid(&s.create_group(Some(&bb), "eng").await);

        let list = |q: String| {
            let s = &s;
            async move {
                let page = get_ok(s, &format!("{G}?{q}")).await;
                let uids = page_uids(&page);
                assert_eq!(
                    page["totalCount"],
                    json!(uids.len().to_string()),
                    "[{}] totalCount for {q}: {page}",
                    s.backend
                );
                set_of(uids)
            }
        };
        let set = |v: &[&String]| v.iter().map(|s| (*s).clone()).collect::<BTreeSet<_>>();

        assert_eq!(
            list(String::new()).await,
            set(&[&a, &a1, &a2, &a11, &a111, &bb, &b1]),
            "[{b}] everything"
        );
        assert_eq!(list("name=eng".into()).await, set(&[&a1, &a11, &b1]), "[{b}] name");
        assert_eq!(list("name=nothing".into()).await, set(&[]), "[{b}] name none");
        // descendants_of includes the group itself.
        let d = list(format!("uidp.descendants_of={a}")).await;
        assert!(
            d.contains(&a),
            "[{b}] descendants_of must include the group itself: {d:?}"
        );
        assert_eq!(d, set(&[&a, &a1, &a2, &a11, &a111]), "[{b}] descendants_of root");
        assert_eq!(
            list(format!("uidp.descendants_of={a1}")).await,
            set(&[&a1, &a11, &a111]),
            "[{b}] descendants_of child"
        );
        assert_eq!(
            list(format!("uidp.descendants_of={a111}")).await,
            set(&[&a111]),
            "[{b}] descendants_of leaf"
        );
        assert_eq!(
            list(format!("uidp.descendantsOf={a1}")).await,
            set(&[&a1, &a11, &a111]),
            "[{b}] camelCase"
        );
        assert_eq!(
            list(format!("uidp.children_of={a}")).await,
            set(&[&a1, &a2]),
            "[{b}] children_of"
        );
        assert_eq!(
            list(format!("uidp.childrenOf={a1}")).await,
            set(&[&a11]),
            "[{b}] childrenOf"
        );
        assert_eq!(
            list(format!("uidp.children_of={a111}")).await,
            set(&[]),
            "[{b}] children_of leaf"
        );
        assert_eq!(
            list(format!("uidp.ancestors_of={a111}")).await,
            set(&[&a, &a1, &a11]),
            "[{b}] ancestors_of (strict)"
        );
        assert_eq!(
            list(format!("uidp.ancestorsOf={a1}")).await,
            set(&[&a]),
            "[{b}] ancestorsOf"
        );
        assert_eq!(
            list(format!("uidp.ancestors_of={a}")).await,
            set(&[]),
            "[{b}] a root has no ancestors"
        );
        assert_eq!(list("uidp.in_root=true".into()).await, set(&[&a, &bb]), "[{b}] in_root");
        assert_eq!(list("uidp.inRoot=true".into()).await, set(&[&a, &bb]), "[{b}] inRoot");
        assert_eq!(
            list(format!("uidp.ids={a1}&uidp.ids={b1}")).await,
            set(&[&a1, &b1]),
            "[{b}] repeated ids"
        );
        assert_eq!(
            list(format!("uidp.ids={a1},{a111}")).await,
            set(&[&a1, &a111]),
            "[{b}] comma ids"
        );
        assert_eq!(list(format!("uidp.ids={a2}")).await, set(&[&a2]), "[{b}] one id");
        // Filters combine with AND.
        assert_eq!(
            list(format!("uidp.descendants_of={a}&name=eng")).await,
            set(&[&a1, &a11]),
            "[{b}] descendants+name"
        );
        assert_eq!(
            list(format!("uidp.descendants_of={bb}&uidp.in_root=true")).await,
            set(&[&bb]),
            "[{b}] desc+root"
        );
        assert_eq!(
            list(format!("uidp.ids={a1}&uidp.ids={b1}&uidp.descendants_of={a}")).await,
            set(&[&a1]),
            "[{b}] ids+desc"
        );
        // Filters on uids that do not exist simply match nothing.
        let ghost = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(
            list(format!("uidp.descendants_of={ghost}")).await,
            set(&[]),
            "[{b}] ghost"
        );

        // Malformed uids in filters name the filter.
        for (k, field) in [
            ("uidp.descendants_of", "uidp.descendants_of"),
            ("uidp.childrenOf", "uidp.children_of"),
            ("uidp.ancestors_of", "uidp.ancestors_of"),
            ("uidp.ids", "uidp.ids"),
        ] {
            let (status, body) = s.get(&format!("{G}?{k}=xyz")).await;
            assert_invalid_field(b, status, &body, field);
        }
        let (status, body) = s.get(&format!("{G}?uidp.in_root=maybe")).await;
        assert_invalid_field(b, status, &body, "uidp.in_root");

        // At most 1000 ids.
        let many: Vec<String> = (0..1000).map(|i| format!("{i:040x}")).collect();
        let page = get_ok(&s, &format!("{G}?uidp.ids={},{a1}", many[..999].join(","))).await;
        assert_eq!(page_uids(&page), vec![a1.clone()], "[{b}] 1000 ids are accepted");
        let (status, body) = s.get(&format!("{G}?uidp.ids={},{a1}", many.join(","))).await;
        assert_invalid_field(b, status, &body, "uidp.ids");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_parameter_validation() {
    for s in common::servers().await {
        let b = s.backend;
        let org = s.create_group(None, "org").await;
        for (q, field) in [
            ("page_size=-1", "page_size"),
            ("pageSize=-5", "page_size"),
            ("page_size=abc", "page_size"),
            ("skip=-1", "skip"),
            ("skip=x", "skip"),
            ("order_by=description", "order_by"),
            ("orderBy=description", "order_by"),
            ("order_by=name%20sideways", "order_by"),
            ("order_by=name%20desc%20extra", "order_by"),
            ("order_by=name,uid", "order_by"),
            ("order_by=verified", "order_by"),
        ] {
            let (status, body) = s.get(&format!("{G}?{q}")).await;
            assert_invalid_field(b, status, &body, field);
        }
        // order_by=description: the violation is exactly about order_by.
        let (status, body) = s.get(&format!("{G}?order_by=description")).await;
        assert_error(b, status, &body, 400, 3, "INVALID_ARGUMENT");
        let v = field_violations(&body);
        assert_eq!(v.len(), 1, "[{b}] {body}");
        assert_eq!(v[0].0, "order_by", "[{b}] {body}");

        // Unknown query parameters are rejected (not silently widened).
        for q in [
            "foo=bar",
            "uidp.descendent_of=x",
            "filter=name%3Dorg",
            "name=org&pagesize=2",
        ] {
            let (status, body) = s.get(&format!("{G}?{q}")).await;
            assert_error(b, status, &body, 400, 3, "INVALID_ARGUMENT");
            assert!(status.as_u16() < 500, "[{b}]");
        }
        // ...on other routes too.
        let (status, body) = s.get(&format!("{G}/{}?foo=bar", uid(&org))).await;
        assert_error(b, status, &body, 400, 3, "INVALID_ARGUMENT");
        let (status, body) = s.post(&format!("{G}?foo=bar"), json!({ "name": "q" })).await;
        assert_error(b, status, &body, 400, 3, "INVALID_ARGUMENT");

        // Accepted order_by forms.
        for o in [
            "name",
            "name desc",
            "name asc",
            "uid",
            "uid desc",
            "create_time",
            "created_at desc",
            "createTime",
            "update_time",
            "updated_at asc",
            "updateTime desc",
        ] {
            let (status, body) = s.get(&format!("{G}?order_by={}", enc(o))).await;
            assert_eq!(status, StatusCode::OK, "[{b}] order_by={o}: {body}");
        }
        // Zero page_size means the default; both spellings.
        let (status, body) = s.get(&format!("{G}?page_size=0&skip=0")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        let (status, body) = s.get(&format!("{G}?pageSize=3&orderBy=name")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn order_by_orders_results() {
    for s in common::servers().await {
        let b = s.backend;
        let org = s.create_group(None, "m").await;
        let ou = uid(&org);
        // Names out of creation order, with duplicates (ties broken by uid).
        let mut members = vec![org];
        for n in ["zeta", "alpha", "mid", "alpha", "b-c", "b.c", "b_c", "b c", "zeta"] {
            s.clock.advance_millis(2);
            members.push(s.create_group(Some(&ou), n).await);
        }
        // Update some so update order differs from create order.
        for i in [2, 5, 1] {
            s.clock.advance_millis(2);
            let (status, g) = s
                .patch(
                    &format!("{G}/{}", uid(&members[i])),
                    json!({ "description": "touched" }),
                )
                .await;
            assert_eq!(status, StatusCode::OK, "[{b}] {g}");
            members[i] = g;
        }
        for o in [
            "",
            "uid",
            "uid desc",
            "name",
            "name desc",
            "create_time",
            "created_at desc",
            "createTime asc",
            "update_time",
            "updated_at asc",
            "update_time desc",
        ] {
            let page = get_ok(&s, &format!("{G}?uidp.descendants_of={ou}&order_by={}", enc(o))).await;
            let expected = sorted_uids(&members, if o.is_empty() { "uid" } else { o });
            assert_eq!(page_uids(&page), expected, "[{b}] order_by={o:?}");
        }
        // camelCase orderBy.
        let page = get_ok(&s, &format!("{G}?uidp.descendantsOf={ou}&orderBy={}", enc("name desc"))).await;
        assert_eq!(page_uids(&page), sorted_uids(&members, "name desc"), "[{b}] orderBy");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_size_default_and_maximum() {
    for s in common::servers().await {
        let b = s.backend;
        let org = s.create_group(None, "big").await;
        let ou = uid(&org);
        let started = Instant::now();
        let names: Vec<String> = (0..60).map(|i| format!("g{i:03}")).collect();
        create_many(&s, &ou, &names).await;
        eprintln!("[{b}] created 60 groups in {:?}", started.elapsed());

        // Default page size: 50.
        let page = get_ok(&s, &format!("{G}?uidp.descendants_of={ou}")).await;
        assert_eq!(page["groups"].as_array().unwrap().len(), 50, "[{b}] default page size");
        assert_eq!(page["totalCount"], "61", "[{b}]");
        let token = next_token(&page).unwrap_or_else(|| panic!("[{b}] nextPageToken expected"));
        let page2 = get_ok(&s, &format!("{G}?uidp.descendants_of={ou}&page_token={}", enc(&token))).await;
        assert_eq!(page2["groups"].as_array().unwrap().len(), 11, "[{b}] rest");
        assert_eq!(next_token(&page2), None, "[{b}] last page");
        // page_size=0 is the default as well.
        let page = get_ok(&s, &format!("{G}?uidp.descendants_of={ou}&page_size=0")).await;
        assert_eq!(page["groups"].as_array().unwrap().len(), 50, "[{b}] page_size=0");

        // Large page sizes are accepted and return everything when fewer than 200 match.
        for q in ["page_size=500", "pageSize=200", "page_size=2147483647"] {
            let page = get_ok(&s, &format!("{G}?uidp.descendants_of={ou}&{q}")).await;
            assert_eq!(page["groups"].as_array().unwrap().len(), 61, "[{b}] {q}");
            assert_eq!(next_token(&page), None, "[{b}] {q}");
        }

        // With more than 200 matches, 500 is coerced to 200. Creating the groups
        // takes well under a second on both backends (measured), so both run it.
        {
            let started = Instant::now();
            let names: Vec<String> = (60..201).map(|i| format!("g{i:03}")).collect();
            create_many(&s, &ou, &names).await;
            eprintln!("[{b}] created 141 more groups in {:?}", started.elapsed());
            let page = get_ok(&s, &format!("{G}?uidp.descendants_of={ou}&page_size=500")).await;
            assert_eq!(page["groups"].as_array().unwrap().len(), 200, "[{b}] coerced to 200");
            assert_eq!(page["totalCount"], "202", "[{b}]");
            let token = next_token(&page).unwrap_or_else(|| panic!("[{b}] more follow"));
            let page2 = get_ok(
                &s,
                &format!("{G}?uidp.descendants_of={ou}&page_size=500&page_token={}", enc(&token)),
            )
            .await;
            assert_eq!(page2["groups"].as_array().unwrap().len(), 2, "[{b}]");
            assert_eq!(next_token(&page2), None, "[{b}]");
        }
    }
}

// ---------------------------------------------------------------------------
// Pagination
// ---------------------------------------------------------------------------

/// An org with a small tree (duplicate names), returned as every member group.
async fn small_tree(s: &TestServer, name: &str) -> (String, Vec<Value>) {
    let org = s.create_group(None, name).await;
    let ou = uid(&org);
    let mut all = vec![org];
    let mut parents = vec![ou.clone()];
    for i in 0..13 {
        let parent = parents[i % parents.len()].clone();
        s.clock.advance_millis(1);
        let g = s.create_group(Some(&parent), &format!("n{}", i % 4)).await;
        parents.push(uid(&g));
        all.push(g);
    }
    (ou, all)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pagination_walks_every_match_once_in_order() {
    for s in common::servers().await {
        let b = s.backend;
        let (ou, members) = small_tree(&s, "pages").await;
        let _noise = small_tree(&s, "noise").await;
        let total = members.len();
        for order in ["", "uid desc", "name", "name desc", "create_time desc", "update_time"] {
            let expected = sorted_uids(&members, if order.is_empty() { "uid" } else { order });
            for size in [1usize, 2, 7] {
                let size_s = size.to_string();
                let mut params = vec![("uidp.descendants_of", ou.as_str()), ("page_size", size_s.as_str())];
                if !order.is_empty() {
                    params.push(("order_by", order));
                }
                let pages = walk(&s, &params, &[]).await;
                let got = walked_uids(&pages);
                assert_eq!(got, expected, "[{b}] order={order:?} size={size}");
                assert_eq!(
                    pages.len(),
                    total.div_ceil(size),
                    "[{b}] page count, order={order:?} size={size}"
                );
                for (i, p) in pages.iter().enumerate() {
                    let n = p["groups"].as_array().unwrap().len();
                    assert!(n <= size, "[{b}] page {i} has {n} > {size}");
                    assert_eq!(p["totalCount"], total.to_string(), "[{b}] totalCount on page {i}");
                    assert_eq!(p["skipped"], 0, "[{b}]");
                }
                // The last page's token is absent or "".
                let last = pages.last().unwrap();
                assert!(
                    last.get("nextPageToken").is_none() || last["nextPageToken"] == "",
                    "[{b}] last page token: {last}"
                );
            }
        }

        // camelCase spelling of the page parameters.
        let expected = sorted_uids(&members, "name");
        let mut got = Vec::new();
        let mut token: Option<String> = None;
        for pages in 0.. {
            assert!(pages < 100, "runaway pagination");
            let mut q = format!("{G}?uidp.descendantsOf={ou}&pageSize=4&orderBy=name");
            if let Some(t) = &token {
                q.push_str(&format!("&pageToken={}", enc(t)));
            }
            let page = get_ok(&s, &q).await;
            got.extend(page_uids(&page));
            token = next_token(&page);
            if token.is_none() {
                break;
            }
        }
        assert_eq!(got, expected, "[{b}] camelCase walk");

        // The page size may change between pages (it is not part of the query).
        let p1 = get_ok(&s, &format!("{G}?uidp.descendants_of={ou}&page_size=3")).await;
        let t = next_token(&p1).unwrap();
        let p2 = get_ok(
            &s,
            &format!("{G}?uidp.descendants_of={ou}&page_size=5&page_token={}", enc(&t)),
        )
        .await;
        let uid_order = sorted_uids(&members, "uid");
        assert_eq!(page_uids(&p1), uid_order[..3], "[{b}]");
        assert_eq!(page_uids(&p2), uid_order[3..8], "[{b}] page size changed mid-walk");

        // skip: two from the cursor position, echoed as `skipped`.
        let order = sorted_uids(&members, "name desc");
        let base = format!("{G}?uidp.descendants_of={ou}&order_by={}&page_size=3", enc("name desc"));
        let p1 = get_ok(&s, &format!("{base}&skip=2")).await;
        assert_eq!(page_uids(&p1), order[2..5], "[{b}] skip=2 on the first page");
        assert_eq!(p1["skipped"], json!(2), "[{b}] {p1}");
        assert_eq!(p1["totalCount"], total.to_string(), "[{b}] totalCount ignores skip");
        let t = next_token(&p1).unwrap();
        let p2 = get_ok(&s, &format!("{base}&skip=2&page_token={}", enc(&t))).await;
        assert_eq!(page_uids(&p2), order[7..10], "[{b}] skip=2 after the cursor");
        assert_eq!(p2["skipped"], json!(4), "[{b}] skipped accumulates across pages");
        let t = next_token(&p2).unwrap();
        let p3 = get_ok(&s, &format!("{base}&page_token={}", enc(&t))).await;
        assert_eq!(page_uids(&p3), order[10..13], "[{b}] no skip after the cursor");
        // Skipping past the end.
        let p = get_ok(&s, &format!("{base}&skip=100")).await;
        assert!(page_uids(&p).is_empty(), "[{b}] {p}");
        assert_eq!(next_token(&p), None, "[{b}]");
        assert_eq!(p["skipped"], json!(100), "[{b}]");
        assert_eq!(p["totalCount"], total.to_string(), "[{b}]");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pagination_is_stable_under_concurrent_inserts() {
    for s in common::servers().await {
        let b = s.backend;
        let names: Vec<String> = (0..24)
            .map(|i| format!("{}{i}", (b'a' + (i % 26) as u8) as char))
            .collect();
        for order in ["uid", "name", "create_time", "update_time desc"] {
            // A fresh organization per order, so earlier writers add no noise.
            let org = s.create_group(None, "busy").await;
            let ou = uid(&org);
            create_many(&s, &ou, &names).await;
            let stop = Arc::new(AtomicBool::new(false));
            let done = Arc::new(AtomicBool::new(false));
            let inserted = Arc::new(AtomicUsize::new(0));
            let writer = {
                let (http, token, url) = (s.http.clone(), s.token.clone(), format!("{}{G}/{ou}", s.base));
                let (stop, done, inserted) = (stop.clone(), done.clone(), inserted.clone());
                tokio::spawn(async move {
                    let mut i = 0u32;
                    while !stop.load(Ordering::SeqCst) && i < 150 {
                        // Names spread across the whole name order.
                        let name = format!("{}w{i}", (b'a' + (i % 26) as u8) as char);
                        let resp = http
                            .post(&url)
                            .bearer_auth(&token)
                            .json(&json!({ "name": name }))
                            .send()
                            .await;
                        let resp = resp.expect("writer request");
                        assert_eq!(resp.status(), StatusCode::OK, "writer create");
                        inserted.fetch_add(1, Ordering::SeqCst);
                        i += 1;
                    }
                    done.store(true, Ordering::SeqCst);
                })
            };
            // Everything that exists before the walk starts.
            let snapshot = get_ok(&s, &format!("{G}?uidp.descendants_of={ou}&page_size=200")).await;
            assert!(next_token(&snapshot).is_none(), "[{b}] snapshot fits in one page");
            let before = set_of(page_uids(&snapshot));

            let mut seen: BTreeMap<String, usize> = BTreeMap::new();
            let mut token: Option<String> = None;
            let mut pages = 0;
            loop {
                // Let the writer insert at least one group between pages.
                let n = inserted.load(Ordering::SeqCst);
                let deadline = Instant::now() + Duration::from_secs(10);
                while inserted.load(Ordering::SeqCst) == n && !done.load(Ordering::SeqCst) && Instant::now() < deadline
                {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                let mut q = format!("{G}?uidp.descendants_of={ou}&page_size=3&order_by={}", enc(order));
                if let Some(t) = &token {
                    q.push_str(&format!("&page_token={}", enc(t)));
                }
                let page = get_ok(&s, &q).await;
                for u in page_uids(&page) {
                    *seen.entry(u).or_default() += 1;
                }
                pages += 1;
                token = next_token(&page);
                if token.is_none() || pages > 500 {
                    break;
                }
            }
            stop.store(true, Ordering::SeqCst);
            writer.await.expect("writer task");
            let n = inserted.load(Ordering::SeqCst);
            eprintln!("[{b}] order={order}: {pages} pages while {n} groups were inserted");
            assert!(n > 0, "[{b}] the writer ran");
            for u in &before {
                assert_eq!(
                    seen.get(u).copied().unwrap_or(0),
                    1,
                    "[{b}] order={order}: pre-existing {u} seen once"
                );
            }
            for (u, n) in &seen {
                assert_eq!(*n, 1, "[{b}] order={order}: {u} seen {n} times");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_tokens_are_bound_signed_durable_and_expire() {
    for mut s in common::servers().await {
        let b = s.backend;
        let (ou, members) = small_tree(&s, "tokens").await;
        let order = sorted_uids(&members, "name");
        let base = format!("{G}?uidp.descendants_of={ou}&order_by=name&page_size=4");
        let p1 = get_ok(&s, &base).await;
        assert_eq!(page_uids(&p1), order[..4], "[{b}]");
        let token = next_token(&p1).expect("token");
        let p2 = get_ok(&s, &format!("{base}&page_token={}", enc(&token))).await;
        assert_eq!(page_uids(&p2), order[4..8], "[{b}]");

        // Tampered: flip one character in the middle.
        let mut chars: Vec<char> = token.chars().collect();
        for pos in [chars.len() / 2, 3, chars.len() - 5] {
            let orig = chars[pos];
            chars[pos] = if orig == 'A' { 'B' } else { 'A' };
            let tampered: String = chars.iter().collect();
            chars[pos] = orig;
            let (status, body) = s.get(&format!("{base}&page_token={}", enc(&tampered))).await;
            assert_invalid_field(b, status, &body, "page_token");
        }
        for garbage in ["garbage", "!!!", "AAAA", "A".repeat(5000).as_str()] {
            let (status, body) = s.get(&format!("{base}&page_token={}", enc(garbage))).await;
            assert_invalid_field(b, status, &body, "page_token");
        }

        // Reuse with another filter or order.
        let child = uid(&members[1]);
        for other in [
            format!("{G}?uidp.descendants_of={child}&order_by=name&page_size=4"),
            format!("{G}?uidp.descendants_of={ou}&name=n1&order_by=name&page_size=4"),
            format!("{G}?order_by=name&page_size=4"),
            format!("{G}?uidp.descendants_of={ou}&order_by={}&page_size=4", enc("name desc")),
            format!("{G}?uidp.descendants_of={ou}&order_by=uid&page_size=4"),
            format!("{G}?uidp.descendants_of={ou}&page_size=4"),
            format!("{G}?uidp.descendants_of={ou}&uidp.in_root=true&order_by=name&page_size=4"),
        ] {
            let (status, body) = s.get(&format!("{other}&page_token={}", enc(&token))).await;
            assert_invalid_field(b, status, &body, "page_token");
        }
        // Same query with a different spelling of the same order is fine.
        let p = get_ok(
            &s,
            &format!(
                "{G}?uidp.descendantsOf={ou}&orderBy={}&pageSize=4&pageToken={}",
                enc("name asc"),
                enc(&token)
            ),
        )
        .await;
        assert_eq!(page_uids(&p), order[4..8], "[{b}] equivalent query");

        // Works on a replica sharing the database.
        {
            let r = s.replica().await;
            let (status, p) = r.get(&format!("{base}&page_token={}", enc(&token))).await;
            assert_eq!(status, StatusCode::OK, "[{b}] replica: {p}");
            assert_eq!(page_uids(&p), order[4..8], "[{b}] replica continues the walk");
            // A replica's token works back on the first server.
            let t = next_token(&p).expect("replica token");
            let p3 = get_ok(&s, &format!("{base}&page_token={}", enc(&t))).await;
            assert_eq!(page_uids(&p3), order[8..12], "[{b}] replica token on the primary");
        }

        // Survives a restart.
        s.restart().await;
        let p = get_ok(&s, &format!("{base}&page_token={}", enc(&token))).await;
        assert_eq!(page_uids(&p), order[4..8], "[{b}] after restart");

        // Older than three days: silently restarts from the first page.
        s.clock.advance_millis(3 * 24 * 60 * 60 * 1000 + 60_000);
        let fresh = s.ward().admin_token().expect("mint");
        let (status, p) = s
            .call_as(&fresh, Method::GET, &format!("{base}&page_token={}", enc(&token)), None)
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] expired token: {p}");
        assert_eq!(page_uids(&p), order[..4], "[{b}] expired token restarts from page one");
        assert_eq!(p["totalCount"], members.len().to_string(), "[{b}]");
        assert!(next_token(&p).is_some(), "[{b}] a new token is issued");
        // And the new token continues normally.
        let t = next_token(&p).unwrap();
        let (status, p) = s
            .call_as(&fresh, Method::GET, &format!("{base}&page_token={}", enc(&t)), None)
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {p}");
        assert_eq!(page_uids(&p), order[4..8], "[{b}]");
    }
}

// ---------------------------------------------------------------------------
// Body handling and routing
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn body_handling() {
    for s in common::servers().await {
        let b = s.backend;
        let org = s.create_group(None, "bodies").await;
        let gpath = format!("{G}/{}", uid(&org));
        let json_ct = Some("application/json");

        // Malformed JSON.
        for (method, path) in [
            (Method::POST, G.to_owned()),
            (Method::POST, gpath.clone()),
            (Method::PATCH, gpath.clone()),
        ] {
            for bad in [
                &b"{\"name\": "[..],
                b"{not json}",
                b"\xff\xfe",
                b"[1,2]",
                b"\"str\"",
                b"{\"name\": 5}",
            ] {
                let (status, body) = raw(&s, method.clone(), &path, json_ct, bad.to_vec()).await;
                assert_error(b, status, &body, 400, 3, "INVALID_ARGUMENT");
            }
        }

        // Wrong content type.
        let good = serde_json::to_vec(&json!({ "name": "plain" })).unwrap();
        for (method, path) in [(Method::POST, G.to_owned()), (Method::PATCH, gpath.clone())] {
            let (status, body) = raw(&s, method, &path, Some("text/plain"), good.clone()).await;
            assert_aip193(b, status, &body, 415);
        }
        // application/json with parameters is fine.
        let (status, body) = raw(
            &s,
            Method::POST,
            G,
            Some("application/json; charset=utf-8"),
            good.clone(),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");

        // Too large.
        let big = serde_json::to_vec(&json!({ "name": "big", "description": "x".repeat(1024 * 1024 + 16) })).unwrap();
        for (method, path) in [(Method::POST, G.to_owned()), (Method::PATCH, gpath.clone())] {
            let (status, body) = raw(&s, method, &path, json_ct, big.clone()).await;
            assert_aip193(b, status, &body, 413);
        }
        // Just under the limit is read (and unknown fields are ignored).
        let near = serde_json::to_vec(&json!({ "name": "near", "padding": "y".repeat(1024 * 1024 - 64) })).unwrap();
        assert!(near.len() <= 1024 * 1024, "test body size");
        let (status, body) = raw(&s, Method::POST, G, json_ct, near).await;
        assert_eq!(status, StatusCode::OK, "[{b}] a body under 1 MiB is accepted: {body}");

        // Unknown fields are ignored.
        let (status, body) = s
            .post(
                G,
                json!({ "name": "extra", "bogus": 1, "nested": { "a": [1, 2] }, "kindOf": "x" }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] unknown fields ignored: {body}");
        assert_eq!(body["name"], "extra", "[{b}]");
        assert!(body.get("bogus").is_none(), "[{b}]");
        let (status, body) = s.patch(&gpath, json!({ "description": "d", "whatever": true })).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        assert_eq!(body["description"], "d", "[{b}]");
        assert_eq!(body["name"], "bodies", "[{b}]");

        // An empty body on create is `{}`: a missing name.
        let (status, body) = raw(&s, Method::POST, G, json_ct, Vec::new()).await;
        assert_invalid_field(b, status, &body, "name");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_routes_and_methods() {
    for s in common::servers().await {
        let b = s.backend;
        let org = s.create_group(None, "routes").await;
        for path in ["/iam/v2beta1/nothing", "/nope", "/iam/v3/groups", "/iam/v2beta1/group"] {
            let (status, body) = s.get(path).await;
            assert_error(b, status, &body, 404, 5, "NOT_FOUND");
            assert!(
                body["message"].as_str().unwrap_or_default().starts_with("Not found: "),
                "[{b}] {body}"
            );
        }
        for path in [
            format!("{G}/{}", uid(&org)),
            G.to_owned(),
            format!("/iam/v2/groups/{}", uid(&org)),
        ] {
            let (status, body) = s.call(Method::PUT, &path, Some(json!({ "name": "x" }))).await;
            assert_aip193(b, status, &body, 405);
            assert_error(b, status, &body, 405, 12, "UNIMPLEMENTED");
        }
        let (status, body) = s.call(Method::DELETE, G, None).await;
        assert_aip193(b, status, &body, 405);
        // Nothing changed.
        let got = get_ok(&s, &format!("{G}/{}", uid(&org))).await;
        assert_eq!(got, org, "[{b}]");
    }
}

// ---------------------------------------------------------------------------
// Property: walked listings of random trees equal a brute-force expectation
// ---------------------------------------------------------------------------

const PROP_ORDERS: &[&str] = &[
    "",
    "uid",
    "uid desc",
    "name",
    "name desc",
    "create_time",
    "create_time desc",
    "update_time desc",
];
const PROP_NAMES: &[&str] = &["a", "b", "ab", "a b", "a.b", "a-b", "a_b", "c", "0"];

#[derive(Debug, Clone)]
struct Case {
    /// For each new group: (parent index into [org, groups...], name index).
    tree: Vec<(proptest::sample::Index, usize)>,
    target: proptest::sample::Index,
    page_size: u32,
    order: usize,
    skip: u32,
}

async fn check_case(s: &TestServer, c: &Case) -> Result<(), proptest::test_runner::TestCaseError> {
    use proptest::{prop_assert, prop_assert_eq};
    let b = s.backend;
    let org = s.create_group(None, "prop").await;
    let mut nodes = vec![org];
    for (parent, name) in &c.tree {
        let p = uid(&nodes[parent.index(nodes.len())]);
        s.clock.advance_millis(1);
        nodes.push(s.create_group(Some(&p), PROP_NAMES[*name]).await);
    }
    let target = uid(&nodes[c.target.index(nodes.len())]);
    let matching: Vec<Value> = nodes
        .iter()
        .filter(|g| {
            let u = uid(g);
            u == target || u.starts_with(&format!("{target}/"))
        })
        .cloned()
        .collect();
    let order = PROP_ORDERS[c.order];
    let full = sorted_uids(&matching, if order.is_empty() { "uid" } else { order });
    let expected: Vec<String> = full.iter().skip(c.skip as usize).cloned().collect();

    let size = c.page_size.to_string();
    let skip = c.skip.to_string();
    let mut params = vec![("uidp.descendants_of", target.as_str()), ("page_size", size.as_str())];
    if !order.is_empty() {
        params.push(("order_by", order));
    }
    let pages = walk(s, &params, &[("skip", skip.as_str())]).await;
    for p in &pages {
        prop_assert_eq!(
            &p["totalCount"],
            &json!(matching.len().to_string()),
            "[{}] totalCount",
            b
        );
        prop_assert!(p["groups"].as_array().unwrap().len() <= c.page_size as usize);
    }
    prop_assert_eq!(&pages[0]["skipped"], &json!(c.skip), "[{}] skipped", b);
    prop_assert_eq!(walked_uids(&pages), expected, "[{}] case {:?}", b, c);
    Ok(())
}

#[test]
fn prop_descendant_listing_matches_brute_force() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let servers = rt.block_on(common::servers());
    let strategy = (
        prop::collection::vec((any::<prop::sample::Index>(), 0..PROP_NAMES.len()), 0..16),
        any::<prop::sample::Index>(),
        1u32..6,
        0..PROP_ORDERS.len(),
        prop_oneof![3 => Just(0u32), 1 => 1u32..4],
    )
        .prop_map(|(tree, target, page_size, order, skip)| Case {
            tree,
            target,
            page_size,
            order,
            skip,
        });
    let mut runner = TestRunner::new(Config {
        cases: 12,
        failure_persistence: None,
        ..Config::default()
    });
    let started = Instant::now();
    runner
        .run(&strategy, |case| {
            rt.block_on(async {
                for s in &servers {
                    check_case(s, &case).await?;
                }
                Ok(())
            })
        })
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "proptest: 12 cases on {} backends in {:?}",
        servers.len(),
        started.elapsed()
    );
    drop(servers);
    rt.shutdown_timeout(Duration::from_secs(5));
}
