//! The advisories API on every backend: writes through v1
//! (`/vulnerabilities/v1/advisories…`, `…/advisory_events/…`), reads through
//! v2 and v2beta1 (`/vulnerabilities/{v2,v2beta1}/advisories…`), over REST and
//! gRPC. Validation, CGA ids, every list filter against a dataset where each
//! filter picks a known subset, pagination, soft delete, every event payload
//! and the review lifecycle.
//!
//! Writers and reviewers other than the server admin are root-level
//! identities bound to `advisories.admin` / `advisories.approver` (`owner`
//! holds no advisories write capability).

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{
    Bearer, TestServer, admin_uid, assert_error, cga, enc, field_violations, is_hex, person, servers, total_count, uid,
    v1_id as id,
};
use regex::Regex;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tonic::transport::Channel;
use ward_core::clock::Clock as _;
use ward_proto::vulnerabilities::v1::advisories_client::AdvisoriesClient;
use ward_proto::vulnerabilities::v2::advisories_service_client::AdvisoriesServiceClient;
use ward_proto::vulnerabilities::v2beta1::advisories_service_client::AdvisoriesServiceClient as BetaAdvisoriesClient;
use ward_proto::vulnerabilities::{v1, v2};

const V1: &str = "/vulnerabilities/v1/advisories";
const V2: &str = "/vulnerabilities/v2/advisories";
const BETA: &str = "/vulnerabilities/v2beta1/advisories";
const EVENTS: &str = "/vulnerabilities/v1/advisory_events";
const HOUR: i64 = 60 * 60 * 1000;
const CGA: &str = r"^CGA(-[23456789cfghjmpqrvwx]{4}){3}$";

/// The v1 (and v2) payload keys of an event: exactly one is set.
const PAYLOADS: &[&str] = &[
    "detection",
    "fixed",
    "falsePositiveDetermination",
    "analysisNotPlanned",
    "fixNotPlanned",
    "pendingUpstreamFix",
    "truePositiveDetermination",
    "patched",
];

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// An RFC 3339 timestamp `offset_ms` from the server's now, in Ward's JSON
/// form (three fractional digits), so that it comes back byte for byte.
fn ts(s: &TestServer, offset_ms: i64) -> String {
    let t = ward_proto::Timestamp::from_millis(s.clock.now_millis() + offset_ms);
    serde_json::to_value(t)
        .expect("timestamp json")
        .as_str()
        .expect("string")
        .to_owned()
}

/// An event at `offset_ms` from now with `payload` (e.g. `{"fixed": {…}}`).
fn event(s: &TestServer, offset_ms: i64, payload: Value) -> Value {
    let mut e = payload;
    e["timestamp"] = json!(ts(s, offset_ms));
    e
}

/// A valid v1 advisory body: `name` as artifact and component, one manual
/// detection an hour ago; the keys of `fields` replace the defaults.
fn adv(s: &TestServer, name: &str, over: Value) -> Value {
    let mut a = json!({
        "artifactName": name, "artifactType": "apk", "artifactArchitecture": "x86_64",
        "componentName": name, "componentType": "apk", "componentLocation": "./PKGINFO",
        "aliases": [],
        "events": [event(s, -HOUR, json!({"detection": {"manual": {}}}))],
    });
    for (k, v) in over.as_object().expect("an object of fields") {
        a[k.as_str()] = v.clone();
    }
    a
}

async fn try_create(s: &TestServer, token: &str, group: &str, advisory: Value) -> (StatusCode, Value) {
    s.call_as(
        token,
        Method::POST,
        V1,
        Some(json!({ "parentId": group, "advisory": advisory })),
    )
    .await
}

/// Creates an advisory under `group` as `token`; the v1 advisory.
async fn create_as(s: &TestServer, token: &str, group: &str, advisory: Value) -> Value {
    let (status, body) = try_create(s, token, group, advisory).await;
    assert_eq!(status, StatusCode::OK, "[{}] create advisory: {body}", s.backend);
    body
}

/// Creates an advisory under `group` as the server admin.
async fn create(s: &TestServer, group: &str, advisory: Value) -> Value {
    create_as(s, &s.token, group, advisory).await
}

/// GET of the v2 advisory as the admin.
async fn get(s: &TestServer, uid: &str) -> (StatusCode, Value) {
    s.get(&format!("{V2}/{uid}")).await
}

/// The v2 advisory, which must exist.
async fn get_ok(s: &TestServer, uid: &str) -> Value {
    let (status, body) = get(s, uid).await;
    assert_eq!(status, StatusCode::OK, "[{}] get {uid}: {body}", s.backend);
    body
}

async fn add_event(s: &TestServer, token: &str, advisory: &str, event: Value) -> (StatusCode, Value) {
    s.call_as(
        token,
        Method::POST,
        &format!("{V1}/{advisory}/events"),
        Some(json!({ "advisoryEvent": event })),
    )
    .await
}

/// Adds an event as `token`; the v1 event.
async fn add_event_ok(s: &TestServer, token: &str, advisory: &str, event: Value) -> Value {
    let (status, body) = add_event(s, token, advisory, event).await;
    assert_eq!(status, StatusCode::OK, "[{}] add event: {body}", s.backend);
    body
}

async fn put_event(s: &TestServer, token: &str, event: &str, body: Value) -> (StatusCode, Value) {
    s.call_as(token, Method::PUT, &format!("{EVENTS}/{event}"), Some(body))
        .await
}

/// Reviews an event (`APPROVED`, `REJECTED`, `REQUEST_CHANGES`) as `token`.
async fn review(s: &TestServer, token: &str, event: &str, status: &str) -> (StatusCode, Value) {
    put_event(s, token, event, json!({ "status": status })).await
}

async fn review_ok(s: &TestServer, token: &str, event: &str, status: &str) -> Value {
    let (st, body) = review(s, token, event, status).await;
    assert_eq!(st, StatusCode::OK, "[{}] review {status}: {body}", s.backend);
    assert_eq!(body["status"], status, "[{}] {body}", s.backend);
    body
}

/// A v2 list page (`query` is the query string without `?`) as `token`.
async fn list_as(s: &TestServer, token: &str, base: &str, query: &str) -> Value {
    let (status, body) = s.call_as(token, Method::GET, &format!("{base}?{query}"), None).await;
    assert_eq!(status, StatusCode::OK, "[{}] list ?{query}: {body}", s.backend);
    body
}

async fn list(s: &TestServer, query: &str) -> Value {
    list_as(s, &s.token, V2, query).await
}

/// The advisoryIds of a v2 list page, in order.
fn advisory_ids(page: &Value) -> Vec<String> {
    page["advisories"]
        .as_array()
        .unwrap_or_else(|| panic!("no advisories in {page}"))
        .iter()
        .map(cga)
        .collect()
}

/// The field names of a BadRequest.
fn fields(body: &Value) -> Vec<String> {
    field_violations(body).into_iter().map(|(f, _)| f).collect()
}

/// Every key of `expected` (recursively) is in `actual` with that value.
fn assert_subset(ctx: &str, expected: &Value, actual: &Value) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, v) in e {
                let got = a.get(k).unwrap_or_else(|| panic!("{ctx}: no {k:?} in {actual}"));
                assert_subset(&format!("{ctx}.{k}"), v, got);
            }
        }
        _ => assert_eq!(expected, actual, "{ctx}"),
    }
}

/// The one payload key set on an event (v1 or v2 JSON).
fn payload_key(ctx: &str, ev: &Value) -> &'static str {
    let set: Vec<&'static str> = PAYLOADS.iter().copied().filter(|k| !ev[*k].is_null()).collect();
    assert_eq!(set.len(), 1, "{ctx}: exactly one payload: {ev}");
    set[0]
}

/// A list case: a query string and the labels it selects.
fn c(query: impl Into<String>, labels: &[&'static str]) -> (String, BTreeSet<&'static str>) {
    (query.into(), labels.iter().copied().collect())
}

/// Whether `s` is `prefix/` + 16 hex digits.
fn child_of(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix)
        .and_then(|r| r.strip_prefix('/'))
        .is_some_and(|r| is_hex(r, 16))
}

// ---------------------------------------------------------------------------
// Create, get, list, update, delete
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn create_get_update_delete() {
    for s in servers().await {
        let b = s.backend;
        let admin = admin_uid(&s);
        let org = uid(&s.create_group(None, "acme").await);
        let team = uid(&s.create_group(Some(&org), "team").await);
        let t0 = ts(&s, -2 * HOUR);
        let created = create(
            &s,
            &team,
            json!({
                "artifactName": "openssl", "artifactType": "apk", "artifactArchitecture": "x86_64",
                "componentName": "libssl", "componentType": "apk", "componentLocation": "/usr/lib/libssl.so.3",
                "aliases": ["CVE-2024-12345", "GHSA-2345-6789-cfgh", "GO-2024-0001"],
                "events": [{"timestamp": t0, "fixed": {"fixedVersion": "3.3.2-r0"}}],
            }),
        )
        .await;
        let aid = id(&created);
        assert!(child_of(&aid, &team), "[{b}] id is group + 16 hex: {created}");
        let advisory_id = cga(&created);
        assert!(ward_core::advisory::is_cga(&advisory_id), "[{b}] {created}");
        assert_eq!(created["author"], json!(admin), "[{b}] {created}");
        assert_eq!(created["artifactName"], "openssl");
        assert_eq!(created["componentLocation"], "/usr/lib/libssl.so.3");
        assert_eq!(
            created["aliases"],
            json!(["CVE-2024-12345", "GHSA-2345-6789-cfgh", "GO-2024-0001"])
        );
        assert!(
            created["createdAt"].is_string() && created["updatedAt"].is_string(),
            "[{b}] {created}"
        );
        let events = created["events"].as_array().expect("events");
        assert_eq!(events.len(), 1, "[{b}] {created}");
        let ev = &events[0];
        let ev_id = id(ev);
        assert!(child_of(&ev_id, &aid), "[{b}] event id is advisory id + 16 hex: {ev}");
        assert_eq!(ev["timestamp"], json!(t0), "[{b}] {ev}");
        assert_eq!(ev["author"], json!(admin), "[{b}] {ev}");
        assert_eq!(ev["reviewer"], "", "[{b}] {ev}");
        assert_eq!(ev["status"], "PENDING", "[{b}] {ev}");
        assert_eq!(ev["fixed"]["fixedVersion"], "3.3.2-r0", "[{b}] {ev}");

        // The v2 view of the same advisory.
        let got = get_ok(&s, &aid).await;
        assert_eq!(got["uid"], json!(aid), "[{b}] {got}");
        assert_eq!(got["advisoryId"], json!(advisory_id));
        assert_eq!(got["createTime"], created["createdAt"], "[{b}] {got}");
        assert_eq!(got["updateTime"], created["updatedAt"], "[{b}] {got}");
        assert!(got["deleteTime"].is_null(), "[{b}] not deleted: {got}");
        assert!(got["legacyAdvisoryId"].is_null(), "[{b}] {got}");
        assert_eq!(got["author"], json!(admin));
        for (k, v) in [
            ("artifactName", "openssl"),
            ("artifactType", "apk"),
            ("artifactArchitecture", "x86_64"),
            ("componentName", "libssl"),
            ("componentType", "apk"),
            ("componentLocation", "/usr/lib/libssl.so.3"),
        ] {
            assert_eq!(got[k], v, "[{b}] {k}: {got}");
        }
        assert_eq!(got["aliases"], created["aliases"], "[{b}] {got}");
        let gev = &got["events"][0];
        assert_eq!(gev["uid"], json!(ev_id), "[{b}] {got}");
        assert_eq!(gev["createTime"], json!(t0), "[{b}] the event timestamp: {gev}");
        assert_eq!(gev["author"], json!(admin));
        assert_eq!(gev["reviewer"], "");
        assert_eq!(gev["reviewState"], "REVIEW_STATE_PENDING", "[{b}] {gev}");
        assert_eq!(gev["fixed"]["fixedVersion"], "3.3.2-r0", "[{b}] {gev}");
        assert_eq!(payload_key(b, gev), "fixed");

        // v2beta1 answers the same.
        let (st, beta) = s.get(&format!("{BETA}/{aid}")).await;
        assert_eq!((st, &beta), (StatusCode::OK, &got), "[{b}] v2beta1 get");

        // Listed under its organization and its group, not under another.
        let other = uid(&s.create_group(None, "other").await);
        let page = list(&s, &format!("uidp.descendantsOf={}", enc(&org))).await;
        assert_eq!(advisory_ids(&page), std::slice::from_ref(&advisory_id), "[{b}] {page}");
        assert_eq!(total_count(&page), 1, "[{b}] {page}");
        assert_eq!(
            page["advisories"][0], got,
            "[{b}] a listed advisory is the one GET returns"
        );
        let beta = list_as(&s, &s.token, BETA, &format!("uidp.descendantsOf={}", enc(&org))).await;
        assert_eq!(beta, page, "[{b}] v2beta1 list");
        let page = list(&s, &format!("uidp.descendantsOf={}", enc(&other))).await;
        assert_eq!(advisory_ids(&page), Vec::<String>::new(), "[{b}] {page}");
        assert_eq!(total_count(&page), 0, "[{b}] {page}");

        // Missing and malformed uids.
        let (st, body) = get(&s, &format!("{team}/0000000000000000")).await;
        assert_error(b, st, &body, 404, 5, "NOT_FOUND");
        let (st, body) = get(&s, "not-a-uidp").await;
        assert_error(b, st, &body, 400, 3, "INVALID_ARGUMENT");

        // Update: a full replacement of the advisory's own fields; events in
        // the body are ignored, timestamps and ids kept.
        s.clock.advance_millis(5_000);
        let mut replacement = created.clone();
        replacement["artifactArchitecture"] = json!("aarch64");
        replacement["componentName"] = json!("libcrypto");
        replacement["componentType"] = json!("apk");
        replacement["componentLocation"] = json!("/usr/lib/libcrypto.so.3");
        replacement["aliases"] = json!(["CVE-2024-99999"]);
        replacement["events"] = json!([]);
        let (st, updated) = s.put(&format!("{V1}/{aid}"), replacement.clone()).await;
        assert_eq!(st, StatusCode::OK, "[{b}] update: {updated}");
        assert_eq!(id(&updated), aid, "[{b}] {updated}");
        assert_eq!(cga(&updated), advisory_id, "[{b}] {updated}");
        assert_eq!(updated["artifactArchitecture"], "aarch64", "[{b}] {updated}");
        assert_eq!(updated["componentName"], "libcrypto", "[{b}] {updated}");
        assert_eq!(updated["componentLocation"], "/usr/lib/libcrypto.so.3");
        assert_eq!(updated["aliases"], json!(["CVE-2024-99999"]), "[{b}] {updated}");
        assert_eq!(updated["createdAt"], created["createdAt"], "[{b}] {updated}");
        assert!(
            updated["updatedAt"].as_str() > created["updatedAt"].as_str(),
            "[{b}] updatedAt moves: {updated}"
        );
        let got = get_ok(&s, &aid).await;
        assert_eq!(got["componentName"], "libcrypto", "[{b}] {got}");
        assert_eq!(got["aliases"], json!(["CVE-2024-99999"]), "[{b}] {got}");
        assert_eq!(got["updateTime"], updated["updatedAt"], "[{b}] {got}");
        assert_eq!(
            got["events"].as_array().map(Vec::len),
            Some(1),
            "[{b}] events survive an update: {got}"
        );
        assert_eq!(got["events"][0]["uid"], json!(ev_id));

        // An update is validated like a create.
        let mut bad = replacement.clone();
        bad["artifactName"] = json!("");
        bad["aliases"] = json!(["CVE-2024-99999", "nonsense"]);
        let (st, body) = s.put(&format!("{V1}/{aid}"), bad).await;
        assert_error(b, st, &body, 400, 3, "INVALID_ARGUMENT");
        let f = fields(&body);
        assert!(f.iter().any(|f| f.contains("artifact_name")), "[{b}] {body}");
        assert!(f.iter().any(|f| f.contains("aliases[1]")), "[{b}] {body}");
        let (st, body) = s
            .put(&format!("{V1}/{team}/0000000000000000"), replacement.clone())
            .await;
        assert_error(b, st, &body, 404, 5, "NOT_FOUND");

        // Soft delete: still readable with deleteTime, gone from default lists.
        let (st, body) = s.delete(&format!("{V1}/{aid}")).await;
        assert_eq!(st, StatusCode::OK, "[{b}] delete: {body}");
        let got = get_ok(&s, &aid).await;
        assert!(got["deleteTime"].is_string(), "[{b}] deleteTime set: {got}");
        let page = list(&s, &format!("uidp.descendantsOf={}", enc(&org))).await;
        assert_eq!(advisory_ids(&page), Vec::<String>::new(), "[{b}] {page}");
        assert_eq!(total_count(&page), 0, "[{b}] {page}");
        let page = list(&s, &format!("uidp.descendantsOf={}&showDeleted=true", enc(&org))).await;
        assert_eq!(advisory_ids(&page), std::slice::from_ref(&advisory_id), "[{b}] {page}");
        assert_eq!(total_count(&page), 1, "[{b}] {page}");
        assert!(page["advisories"][0]["deleteTime"].is_string(), "[{b}] {page}");

        // A deleted advisory: a second delete, an update and new events are 404.
        let (st, body) = s.delete(&format!("{V1}/{aid}")).await;
        assert_error(b, st, &body, 404, 5, "NOT_FOUND");
        let (st, body) = s.put(&format!("{V1}/{aid}"), replacement).await;
        assert_error(b, st, &body, 404, 5, "NOT_FOUND");
        let (st, body) = add_event(
            &s,
            &s.token,
            &aid,
            event(&s, -HOUR, json!({"fixed": {"fixedVersion": "3.3.3-r0"}})),
        )
        .await;
        assert_error(b, st, &body, 404, 5, "NOT_FOUND");
    }
}

// ---------------------------------------------------------------------------
// Validation and CGA ids
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn every_violation_in_one_bad_request() {
    for s in servers().await {
        let b = s.backend;
        let org = uid(&s.create_group(None, "acme").await);
        let own = "CGA-2345-6789-cfgh";

        // Everything wrong at once: one BadRequest names every field.
        let (st, body) = try_create(
            &s,
            &s.token,
            &org,
            json!({
                "advisoryId": own,
                "artifactArchitecture": "x86_64",
                "aliases": [
                    "CVE-2024-0001",       // 0: fine
                    "CVE-24-1",            // 1: not a CVE id
                    "CVE-2024-0001",       // 2: duplicate
                    own,                   // 3: the advisory's own id
                    "GHSA-abcd-efgh-ijkl", // 4: outside the GHSA alphabet
                    "GO-2024-1",           // 5: not a GO id
                    "GHSA-2345-6789-cfgh", // 6: fine
                    "GO-2024-0001",        // 7: fine
                    "CVE-2024-1234567"     // 8: fine (four or more digits)
                ],
                "events": [
                    {"timestamp": "1970-01-01T00:00:00Z", "fixed": {"fixedVersion": "not a version!"}},
                    {"timestamp": ts(&s, 3 * HOUR)},
                    {"detection": {"manual": {}}},
                    {"timestamp": ts(&s, HOUR), "fixed": {"fixedVersion": "1.2.3-r4"}}
                ],
            }),
        )
        .await;
        assert_error(b, st, &body, 400, 3, "INVALID_ARGUMENT");
        let f = fields(&body);
        for want in [
            "advisory.artifact_name",
            "advisory.artifact_type",
            "advisory.aliases[1]",
            "advisory.aliases[2]",
            "advisory.aliases[3]",
            "advisory.aliases[4]",
            "advisory.aliases[5]",
            "advisory.events[0].timestamp",
            "advisory.events[1].timestamp",
            "advisory.events[2].timestamp",
        ] {
            assert!(f.iter().any(|x| x == want), "[{b}] {want} missing in {body}");
        }
        assert!(
            f.iter()
                .any(|x| x.starts_with("advisory.events[0].") && x.contains("fixed_version")),
            "[{b}] the fixed version of events[0]: {body}"
        );
        assert!(
            f.iter()
                .any(|x| x.starts_with("advisory.events[1]") && x != "advisory.events[1].timestamp"),
            "[{b}] events[1] has no payload: {body}"
        );
        for fine in [
            "advisory.aliases[0]",
            "advisory.aliases[6]",
            "advisory.aliases[7]",
            "advisory.aliases[8]",
        ] {
            assert!(!f.iter().any(|x| x == fine), "[{b}] {fine} is valid: {body}");
        }
        assert!(
            !f.iter()
                .any(|x| x.starts_with("advisory.events[3]") || x == "advisory.advisory_id"),
            "[{b}] events[3] and the advisory id are valid: {body}"
        );

        // No events, and a malformed CGA id, together.
        for events in [json!([]), Value::Null] {
            let mut a = adv(&s, "zlib", json!({"advisoryId": "CGA-1111-aaaa-bbbb"}));
            if events.is_null() {
                a.as_object_mut().unwrap().remove("events");
            } else {
                a["events"] = events;
            }
            let (st, body) = try_create(&s, &s.token, &org, a).await;
            assert_error(b, st, &body, 400, 3, "INVALID_ARGUMENT");
            let f = fields(&body);
            for want in ["advisory.events", "advisory.advisory_id"] {
                assert!(f.iter().any(|x| x == want), "[{b}] {want} missing in {body}");
            }
        }

        // Two payloads in one event do not parse as one oneof.
        let (st, body) = try_create(
            &s,
            &s.token,
            &org,
            adv(
                &s,
                "zlib",
                json!({"events": [event(&s, -HOUR, json!({"detection": {"manual": {}}, "fixed": {"fixedVersion": "1.0-r0"}}))]}),
            ),
        )
        .await;
        assert_error(b, st, &body, 400, 3, "INVALID_ARGUMENT");

        // Fixed versions are apk versions.
        for bad in ["", "1.2.3-rx", "v1.2.3", "1.2.3-r"] {
            let a = adv(
                &s,
                "zlib",
                json!({"events": [event(&s, -HOUR, json!({"fixed": {"fixedVersion": bad}}))]}),
            );
            let (st, body) = try_create(&s, &s.token, &org, a).await;
            assert_error(b, st, &body, 400, 3, "INVALID_ARGUMENT");
            assert!(
                fields(&body)
                    .iter()
                    .any(|x| x.starts_with("advisory.events[0].") && x.contains("fixed_version")),
                "[{b}] {bad:?}: {body}"
            );
        }
        for good in ["1.2.3-r4", "0.2.107-r0", "1.0_rc1-r2", "2024.01.02-r0"] {
            let a = adv(
                &s,
                "zlib",
                json!({"events": [event(&s, -HOUR, json!({"fixed": {"fixedVersion": good}}))]}),
            );
            let (st, body) = try_create(&s, &s.token, &org, a).await;
            assert_eq!(st, StatusCode::OK, "[{b}] {good:?}: {body}");
        }

        // Up to two hours in the future is fine.
        let a = adv(
            &s,
            "zlib",
            json!({"events": [event(&s, HOUR + HOUR / 2, json!({"detection": {"manual": {}}}))]}),
        );
        let (st, body) = try_create(&s, &s.token, &org, a).await;
        assert_eq!(st, StatusCode::OK, "[{b}] 1.5 h ahead: {body}");

        // The request itself: no advisory; a malformed or unknown parent.
        let (st, body) = s.post(V1, json!({ "parentId": org })).await;
        assert_error(b, st, &body, 400, 3, "INVALID_ARGUMENT");
        let (st, body) = try_create(&s, &s.token, "not-a-group", adv(&s, "zlib", json!({}))).await;
        assert_error(b, st, &body, 400, 3, "INVALID_ARGUMENT");
        let (st, body) = try_create(&s, &s.token, &"ab".repeat(20), adv(&s, "zlib", json!({}))).await;
        assert_error(b, st, &body, 404, 5, "NOT_FOUND");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn cga_ids_are_generated_and_unique_on_the_server() {
    let re = Regex::new(CGA).unwrap();
    for s in servers().await {
        let b = s.backend;
        let a = uid(&s.create_group(None, "org-a").await);
        let other = uid(&s.create_group(None, "org-b").await);

        let mut seen = BTreeSet::new();
        for i in 0..10 {
            let over = if i % 2 == 0 {
                json!({})
            } else {
                json!({"advisoryId": ""})
            };
            let made = create(&s, &a, adv(&s, &format!("pkg-{i}"), over)).await;
            let id = cga(&made);
            assert!(re.is_match(&id), "[{b}] {id}");
            assert!(seen.insert(id.clone()), "[{b}] {id} generated twice");
            assert_eq!(get_ok(&s, &crate::id(&made)).await["advisoryId"], json!(id));
        }

        // A given id is kept, and taken anywhere on the server.
        let given = "CGA-3g3j-8396-2m48";
        let made = create(&s, &a, adv(&s, "given", json!({"advisoryId": given}))).await;
        assert_eq!(cga(&made), given, "[{b}] {made}");
        for group in [&a, &other] {
            let (st, body) = try_create(&s, &s.token, group, adv(&s, "again", json!({"advisoryId": given}))).await;
            assert_error(b, st, &body, 409, 6, "ALREADY_EXISTS");
        }
        let (st, _) = s.delete(&format!("{V1}/{}", id(&made))).await;
        assert_eq!(st, StatusCode::OK, "[{b}]");
        let page = list(&s, &format!("advisoryIds={given}&showDeleted=true")).await;
        assert_eq!(advisory_ids(&page), [given.to_owned()], "[{b}] {page}");

        // Not CGA ids: wrong case, wrong alphabet, wrong shape.
        for bad in [
            "CGA-3G3J-8396-2M48",
            "cga-3g3j-8396-2m48",
            "CGA-3g3j-8396-2m4",
            "CGA-0000-1111-aaaa",
            "GHSA-3g3j-8396-2m48",
        ] {
            let (st, body) = try_create(&s, &s.token, &a, adv(&s, "bad", json!({"advisoryId": bad}))).await;
            assert_error(b, st, &body, 400, 3, "INVALID_ARGUMENT");
            assert!(
                fields(&body).iter().any(|f| f == "advisory.advisory_id"),
                "[{b}] {bad}: {body}"
            );
        }
    }
}

// ---------------------------------------------------------------------------
// Events and payloads
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn events_are_created_and_listed_oldest_first() {
    for s in servers().await {
        let b = s.backend;
        let admin = admin_uid(&s);
        let org = uid(&s.create_group(None, "acme").await);
        let (writer, wt) = person(&s, "writer", &[(org.as_str(), "advisories.admin")]).await;
        let made = create(
            &s,
            &org,
            adv(
                &s,
                "zlib",
                json!({"events": [event(&s, -3 * HOUR, json!({"detection": {"manual": {}}}))]}),
            ),
        )
        .await;
        let aid = id(&made);
        let first = id(&made["events"][0]);

        let t1 = ts(&s, -HOUR);
        let ev = add_event_ok(
            &s,
            &wt,
            &aid,
            json!({"timestamp": t1, "fixed": {"fixedVersion": "1.3.1-r0", "note": "bumped"}}),
        )
        .await;
        let second = id(&ev);
        assert!(child_of(&second, &aid), "[{b}] {ev}");
        assert_eq!(ev["author"], json!(writer), "[{b}] the caller is the author: {ev}");
        assert_eq!(ev["status"], "PENDING", "[{b}] {ev}");
        assert_eq!(ev["reviewer"], "", "[{b}] {ev}");
        assert_eq!(ev["timestamp"], json!(t1), "[{b}] {ev}");
        assert_eq!(ev["fixed"]["fixedVersion"], "1.3.1-r0");
        assert_eq!(ev["fixed"]["note"], "bumped");

        let (st, listed) = s.get(&format!("{V1}/{aid}/events")).await;
        assert_eq!(st, StatusCode::OK, "[{b}] {listed}");
        assert_eq!(listed["parentId"], json!(aid), "[{b}] {listed}");
        let items: Vec<String> = listed["items"].as_array().expect("items").iter().map(id).collect();
        assert_eq!(items, [first.clone(), second.clone()], "[{b}] oldest first: {listed}");
        assert_eq!(listed["items"][0]["author"], json!(admin));
        assert_eq!(listed["items"][1]["author"], json!(writer));

        let got = get_ok(&s, &aid).await;
        let uids: Vec<&str> = got["events"]
            .as_array()
            .expect("events")
            .iter()
            .map(|e| e["uid"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(uids, [first.as_str(), second.as_str()], "[{b}] {got}");
        assert_eq!(got["events"][1]["createTime"], json!(t1));
        assert_eq!(got["events"][1]["author"], json!(writer));

        // New events are validated like those of a create.
        for bad in [
            json!({"timestamp": "1970-01-01T00:00:00Z", "detection": {"manual": {}}}),
            json!({"detection": {"manual": {}}}),
            json!({"timestamp": ts(&s, 3 * HOUR), "detection": {"manual": {}}}),
            json!({"timestamp": ts(&s, -HOUR)}),
            json!({"timestamp": ts(&s, -HOUR), "fixed": {"fixedVersion": "latest"}}),
        ] {
            let (st, body) = add_event(&s, &wt, &aid, bad.clone()).await;
            assert_error(b, st, &body, 400, 3, "INVALID_ARGUMENT");
            assert!(!fields(&body).is_empty(), "[{b}] {bad}: a field violation: {body}");
        }
        let (_, listed) = s.get(&format!("{V1}/{aid}/events")).await;
        assert_eq!(listed["items"].as_array().map(Vec::len), Some(2), "[{b}] {listed}");

        // Events of an advisory that does not exist.
        let missing = format!("{org}/0000000000000000");
        let (st, body) = s.get(&format!("{V1}/{missing}/events")).await;
        assert_error(b, st, &body, 404, 5, "NOT_FOUND");
        let (st, body) = add_event(
            &s,
            &wt,
            &missing,
            event(&s, -HOUR, json!({"detection": {"manual": {}}})),
        )
        .await;
        assert_error(b, st, &body, 404, 5, "NOT_FOUND");
    }
}

/// Each payload as written over v1, and as v2 reads it.
fn payload_cases() -> Vec<(Value, Value)> {
    vec![
        (
            json!({"detection": {"scanv1": {
                "subpackageName": "py3-foo", "componentId": "a1b2c3", "componentName": "golang.org/x/net",
                "componentVersion": "v0.17.0", "componentType": "go-module", "componentLocation": "/usr/bin/foo",
                "artifactVersion": "1.0-r0", "scanner": "grype", "scannerVersion": "0.80.0",
                "grypeDbBuilt": "2024-06-01T00:00:00Z", "grypeDbChecksum": "sha256:abc"}}}),
            json!({"detection": {"scanv1": {
                "subpackage": "py3-foo", "componentId": "a1b2c3", "component": "golang.org/x/net",
                "componentVersion": "v0.17.0", "componentType": "go-module", "componentLocation": "/usr/bin/foo",
                "artifactVersion": "1.0-r0", "scanner": "grype", "scannerVersion": "0.80.0",
                "grypeDbBuilt": "2024-06-01T00:00:00Z", "grypeDbChecksum": "sha256:abc"}}}),
        ),
        (
            json!({"detection": {"nvdapi": {"cpeSearched": "cpe:2.3:a:foo:foo:*", "cpeFound": "cpe:2.3:a:foo:foo:1.0"}}}),
            json!({"detection": {"nvdapi": {"cpeSearched": "cpe:2.3:a:foo:foo:*", "cpeFound": "cpe:2.3:a:foo:foo:1.0"}}}),
        ),
        (
            json!({"detection": {"manual": {}}}),
            json!({"detection": {"manual": {}}}),
        ),
        (
            json!({"fixed": {"fixedVersion": "1.2.3-r4", "note": "upstream release",
                             "scannerVersion": "0.80.0", "grypeDbChecksum": "sha256:def"}}),
            json!({"fixed": {"fixedVersion": "1.2.3-r4", "note": "upstream release",
                             "scannerVersion": "0.80.0", "grypeDbChecksum": "sha256:def"}}),
        ),
        (
            json!({"falsePositiveDetermination": {"type": "VULNERABLE_CODE_NOT_IN_EXECUTION_PATH", "note": "never called"}}),
            json!({"falsePositiveDetermination": {"type": "TYPE_VULNERABLE_CODE_NOT_IN_EXECUTION_PATH", "note": "never called"}}),
        ),
        (
            json!({"falsePositiveDetermination": {"type": "INLINE_MITIGATIONS_EXIST", "note": ""}}),
            json!({"falsePositiveDetermination": {"type": "TYPE_INLINE_MITIGATIONS_EXIST", "note": ""}}),
        ),
        (
            json!({"truePositiveDetermination": {"note": "reachable"}}),
            json!({"truePositiveDetermination": {"note": "reachable"}}),
        ),
        (
            json!({"pendingUpstreamFix": {"note": "waiting on upstream"}}),
            json!({"pendingUpstreamFix": {"note": "waiting on upstream"}}),
        ),
        (
            json!({"fixNotPlanned": {"note": "end of life"}}),
            json!({"fixNotPlanned": {"note": "end of life"}}),
        ),
        (
            json!({"analysisNotPlanned": {"note": "not shipped"}}),
            json!({"analysisNotPlanned": {"note": "not shipped"}}),
        ),
        (
            json!({"patched": {"patchedVersions": ["1.0-r1", "1.0-r2"], "note": "backported"}}),
            json!({"patched": {"patchedVersions": ["1.0-r1", "1.0-r2"], "note": "backported"}}),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn every_event_payload_round_trips() {
    for s in servers().await {
        let b = s.backend;
        let org = uid(&s.create_group(None, "acme").await);
        let cases = payload_cases();
        let n = cases.len() as i64;

        // All of them in one create, oldest first.
        let events: Vec<Value> = cases
            .iter()
            .enumerate()
            .map(|(i, (v1, _))| event(&s, -(n - i as i64 + 1) * HOUR, v1.clone()))
            .collect();
        let made = create(&s, &org, adv(&s, "everything", json!({ "events": events }))).await;
        let aid = id(&made);

        // Then each one added to a second advisory through the events endpoint.
        let second = create(&s, &org, adv(&s, "one-by-one", json!({}))).await;
        let sid = id(&second);
        for (i, (v1p, _)) in cases.iter().enumerate() {
            let ev = add_event_ok(
                &s,
                &s.token,
                &sid,
                event(&s, -HOUR + (i as i64 + 1) * 60_000, v1p.clone()),
            )
            .await;
            let ctx = format!("[{b}] added event {i} (v1)");
            assert_subset(&ctx, v1p, &ev);
            assert_eq!(payload_key(&ctx, &ev), payload_key(&ctx, v1p));
        }

        for (advisory, skip) in [(&aid, 0usize), (&sid, 1)] {
            // v1: the create response (first advisory) and the events list.
            let (st, listed) = s.get(&format!("{V1}/{advisory}/events")).await;
            assert_eq!(st, StatusCode::OK, "[{b}] {listed}");
            let items = listed["items"].as_array().expect("items");
            assert_eq!(items.len(), cases.len() + skip, "[{b}] {listed}");
            // v2: the names change.
            let got = get_ok(&s, advisory).await;
            let v2_events = got["events"].as_array().expect("events");
            assert_eq!(v2_events.len(), cases.len() + skip, "[{b}] {got}");
            for (i, (v1p, v2p)) in cases.iter().enumerate() {
                let ctx = format!("[{b}] {advisory} event {i}");
                assert_subset(&format!("{ctx} (v1 list)"), v1p, &items[i + skip]);
                assert_subset(&format!("{ctx} (v2)"), v2p, &v2_events[i + skip]);
                assert_eq!(
                    payload_key(&ctx, &v2_events[i + skip]),
                    payload_key(&ctx, v2p),
                    "{ctx}: {got}"
                );
                assert_eq!(v2_events[i + skip]["reviewState"], "REVIEW_STATE_PENDING", "{ctx}");
                assert_eq!(v2_events[i + skip]["uid"], items[i + skip]["id"], "{ctx}");
                assert_eq!(v2_events[i + skip]["createTime"], items[i + skip]["timestamp"], "{ctx}");
            }
        }
        for (i, (v1p, _)) in cases.iter().enumerate() {
            assert_subset(&format!("[{b}] created event {i}"), v1p, &made["events"][i]);
        }
    }
}

// ---------------------------------------------------------------------------
// Review lifecycle
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn review_lifecycle() {
    for s in servers().await {
        let b = s.backend;
        let org = uid(&s.create_group(None, "acme").await);
        let (_writer, wt) = person(&s, "writer", &[(org.as_str(), "advisories.admin")]).await;
        let (reviewer, rt) = person(&s, "reviewer", &[(org.as_str(), "advisories.approver")]).await;
        let t = ts(&s, -HOUR);
        let made = create_as(
            &s,
            &wt,
            &org,
            adv(
                &s,
                "zlib",
                json!({"events": [{"timestamp": t, "fixed": {"fixedVersion": "1.3.0-r0"}}]}),
            ),
        )
        .await;
        let aid = id(&made);
        let ev = id(&made["events"][0]);

        // Nobody reviews their own event, whatever they hold.
        for status in ["APPROVED", "REJECTED", "REQUEST_CHANGES"] {
            let (st, body) = review(&s, &wt, &ev, status).await;
            assert_error(b, st, &body, 403, 7, "PERMISSION_DENIED");
        }

        // PENDING → REQUEST_CHANGES (with an issue).
        let issue = "https://github.com/example/cve-dashboard/issues/42";
        let (st, changed) = put_event(&s, &rt, &ev, json!({"status": "REQUEST_CHANGES", "issue": issue})).await;
        assert_eq!(st, StatusCode::OK, "[{b}] {changed}");
        assert_eq!(changed["status"], "REQUEST_CHANGES", "[{b}] {changed}");
        assert_eq!(changed["reviewer"], json!(reviewer), "[{b}] {changed}");
        assert_eq!(changed["issue"], issue, "[{b}] {changed}");
        assert_eq!(changed["fixed"]["fixedVersion"], "1.3.0-r0", "[{b}] {changed}");
        let got = get_ok(&s, &aid).await;
        assert_eq!(
            got["events"][0]["reviewState"], "REVIEW_STATE_REQUEST_CHANGES",
            "[{b}] {got}"
        );
        assert_eq!(got["events"][0]["reviewer"], json!(reviewer), "[{b}] {got}");
        let page = list(&s, "eventReviewStates=REVIEW_STATE_REQUEST_CHANGES").await;
        assert_eq!(advisory_ids(&page), [cga(&made)], "[{b}] {page}");

        // Resubmitted by the author with a changed payload: PENDING again.
        let (st, resubmitted) = put_event(
            &s,
            &wt,
            &ev,
            json!({"timestamp": t, "fixed": {"fixedVersion": "1.3.1-r0"}, "status": "PENDING"}),
        )
        .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {resubmitted}");
        assert_eq!(resubmitted["status"], "PENDING", "[{b}] {resubmitted}");
        assert_eq!(resubmitted["fixed"]["fixedVersion"], "1.3.1-r0", "[{b}] {resubmitted}");
        assert_eq!(id(&resubmitted), ev, "[{b}] same event: {resubmitted}");

        // PENDING → APPROVED, which is final.
        let approved = review_ok(&s, &rt, &ev, "APPROVED").await;
        assert_eq!(approved["reviewer"], json!(reviewer), "[{b}] {approved}");
        assert_eq!(approved["fixed"]["fixedVersion"], "1.3.1-r0", "[{b}] {approved}");
        for (token, body) in [
            (&rt, json!({"status": "REJECTED"})),
            (&rt, json!({"status": "REQUEST_CHANGES"})),
            (&rt, json!({"status": "PENDING"})),
            (&s.token, json!({"status": "REJECTED"})),
            (
                &wt,
                json!({"timestamp": t, "fixed": {"fixedVersion": "9.9.9-r0"}, "status": "PENDING"}),
            ),
        ] {
            let (st, resp) = put_event(&s, token, &ev, body).await;
            assert_error(b, st, &resp, 400, 9, "FAILED_PRECONDITION");
        }
        let got = get_ok(&s, &aid).await;
        let gev = &got["events"][0];
        assert_eq!(gev["reviewState"], "REVIEW_STATE_APPROVED", "[{b}] {got}");
        assert_eq!(gev["reviewer"], json!(reviewer), "[{b}] {got}");
        assert_eq!(gev["fixed"]["fixedVersion"], "1.3.1-r0", "[{b}] {got}");
        let page = list(&s, "latestEventType=EVENT_TYPE_FILTER_FIXED").await;
        assert_eq!(advisory_ids(&page), [cga(&made)], "[{b}] {page}");

        // REJECTED is final too.
        let second = add_event_ok(
            &s,
            &wt,
            &aid,
            event(&s, -HOUR / 2, json!({"fixNotPlanned": {"note": "eol"}})),
        )
        .await;
        let ev2 = id(&second);
        review_ok(&s, &rt, &ev2, "REJECTED").await;
        for (token, body) in [
            (&rt, json!({"status": "APPROVED"})),
            (&rt, json!({"status": "REQUEST_CHANGES"})),
            (&s.token, json!({"status": "APPROVED"})),
            (
                &wt,
                json!({"timestamp": second["timestamp"], "fixNotPlanned": {"note": "really eol"}, "status": "PENDING"}),
            ),
        ] {
            let (st, resp) = put_event(&s, token, &ev2, body).await;
            assert_error(b, st, &resp, 400, 9, "FAILED_PRECONDITION");
        }
        let got = get_ok(&s, &aid).await;
        assert_eq!(got["events"][1]["reviewState"], "REVIEW_STATE_REJECTED", "[{b}] {got}");
        // A rejected event never counts as the latest approved one.
        let page = list(&s, "latestEventType=EVENT_TYPE_FILTER_FIX_NOT_PLANNED").await;
        assert_eq!(advisory_ids(&page), Vec::<String>::new(), "[{b}] {page}");

        // The server admin may review events others wrote.
        let third = add_event_ok(
            &s,
            &wt,
            &aid,
            event(&s, -HOUR / 4, json!({"pendingUpstreamFix": {"note": "soon"}})),
        )
        .await;
        let by_admin = review_ok(&s, &s.token, &id(&third), "APPROVED").await;
        assert_eq!(by_admin["reviewer"], json!(admin_uid(&s)), "[{b}] {by_admin}");
        let page = list(&s, "latestEventType=EVENT_TYPE_FILTER_PENDING_UPSTREAM_FIX").await;
        assert_eq!(advisory_ids(&page), [cga(&made)], "[{b}] {page}");

        // Unknown events and statuses.
        let (st, body) = review(&s, &rt, &format!("{aid}/0000000000000000"), "APPROVED").await;
        assert_error(b, st, &body, 404, 5, "NOT_FOUND");
        let fourth = add_event_ok(
            &s,
            &wt,
            &aid,
            event(&s, -HOUR / 8, json!({"detection": {"manual": {}}})),
        )
        .await;
        let (st, body) = review(&s, &rt, &id(&fourth), "MAYBE").await;
        assert_error(b, st, &body, 400, 3, "INVALID_ARGUMENT");
    }
}

// ---------------------------------------------------------------------------
// Lists: every filter against a known dataset
// ---------------------------------------------------------------------------

/// Organization A (with A/team) and B, a writer W (`advisories.admin` at A)
/// and a reviewer R (`advisories.approver` at A). Advisories, by label:
///
/// | label | where | artifact (type, arch) | component (type, location) | aliases | events (type, author, state, reviewer) |
/// |---|---|---|---|---|---|
/// | a1 | A | openssl (apk, x86_64) | libssl (apk, /usr/lib/libssl.so.3) | CVE-2024-0001, GHSA-2345-6789-cfgh | scanv1 detection ADMIN PENDING |
/// | a2 | A | openssl-dev (apk, aarch64) | golang.org/x/net (go-module, /usr/bin/tool) | CVE-2024-0002 | nvdapi detection ADMIN APPROVED by R (−10 h); fixed W APPROVED by ADMIN (−5 h; approved first) |
/// | a3 | A | python-3.12 (image, x86_64) | requests (python, /usr/lib/python3.12/site-packages) | GHSA-mmmm-pppp-qqqq | false positive W APPROVED by R (−8 h); fixed W PENDING (−2 h) |
/// | a4 | A/team | curl (apk, aarch64) | curl (apk, ./PKGINFO) | GO-2024-0001 | manual detection W REJECTED by R (−9 h); true positive ADMIN PENDING (−3 h) |
/// | b1 | B | openssl (apk, x86_64) | libssl (apk, /usr/lib/libssl.so.3) | CVE-2024-0001 | pending upstream fix ADMIN PENDING |
///
/// They are created in that order, a second apart.
struct Dataset {
    a: String,
    team: String,
    b: String,
    admin: String,
    writer: String,
    reviewer: String,
    /// label → v1 advisory (as created).
    made: BTreeMap<&'static str, Value>,
    /// advisoryId → label.
    labels: BTreeMap<String, &'static str>,
}

impl Dataset {
    fn uid(&self, label: &str) -> String {
        id(&self.made[label])
    }

    fn cga(&self, label: &str) -> String {
        cga(&self.made[label])
    }

    /// The labels of a v2 list page's advisories, checking `totalCount`.
    fn labels_of(&self, ctx: &str, page: &Value) -> BTreeSet<&'static str> {
        let ids = advisory_ids(page);
        let labels: BTreeSet<&'static str> = ids
            .iter()
            .map(|i| *self.labels.get(i).unwrap_or_else(|| panic!("{ctx}: unknown {i}")))
            .collect();
        assert_eq!(labels.len(), ids.len(), "{ctx}: duplicates: {page}");
        assert_eq!(total_count(page), ids.len() as i64, "{ctx}: totalCount: {page}");
        assert_eq!(page["nextPageToken"], "", "{ctx}: one page: {page}");
        labels
    }
}

/// A v1 advisory: artifact (name, type, architecture), component (name,
/// type, location), aliases and events.
fn spec(artifact: [&str; 3], component: [&str; 3], aliases: &[&str], events: Value) -> Value {
    json!({
        "artifactName": artifact[0], "artifactType": artifact[1], "artifactArchitecture": artifact[2],
        "componentName": component[0], "componentType": component[1], "componentLocation": component[2],
        "aliases": aliases, "events": events,
    })
}

async fn build_dataset(s: &TestServer) -> Dataset {
    let a = uid(&s.create_group(None, "org-a").await);
    let team = uid(&s.create_group(Some(&a), "team").await);
    let b = uid(&s.create_group(None, "org-b").await);
    let admin = admin_uid(s);
    let (writer, wt) = person(s, "writer", &[(a.as_str(), "advisories.admin")]).await;
    let (reviewer, rt) = person(s, "reviewer", &[(a.as_str(), "advisories.approver")]).await;
    let mut made = BTreeMap::new();

    let a1 = create(
        s,
        &a,
        spec(
            ["openssl", "apk", "x86_64"],
            ["libssl", "apk", "/usr/lib/libssl.so.3"],
            &["CVE-2024-0001", "GHSA-2345-6789-cfgh"],
            json!([event(
                s,
                -10 * HOUR,
                json!({"detection": {"scanv1": {
                "subpackageName": "libssl3", "componentName": "libssl", "componentType": "apk",
                "componentLocation": "/usr/lib/libssl.so.3", "scanner": "grype"}}})
            )]),
        ),
    )
    .await;
    made.insert("a1", a1);
    s.clock.advance_millis(1_000);

    let a2 = create(
        s,
        &a,
        spec(
            ["openssl-dev", "apk", "aarch64"],
            ["golang.org/x/net", "go-module", "/usr/bin/tool"],
            &["CVE-2024-0002"],
            json!([event(
                s,
                -10 * HOUR,
                json!({"detection": {"nvdapi": {
                "cpeSearched": "cpe:2.3:a:openssl:openssl:*", "cpeFound": "cpe:2.3:a:openssl:openssl:3.0"}}})
            )]),
        ),
    )
    .await;
    let a2_detection = id(&a2["events"][0]);
    let a2_fixed = add_event_ok(
        s,
        &wt,
        &id(&a2),
        event(s, -5 * HOUR, json!({"fixed": {"fixedVersion": "3.0.1-r0"}})),
    )
    .await;
    // The later event is approved first: "latest" goes by event timestamp.
    review_ok(s, &s.token, &id(&a2_fixed), "APPROVED").await;
    review_ok(s, &rt, &a2_detection, "APPROVED").await;
    made.insert("a2", a2);
    s.clock.advance_millis(1_000);

    let a3 = create_as(
        s,
        &wt,
        &a,
        spec(
            ["python-3.12", "image", "x86_64"],
            ["requests", "python", "/usr/lib/python3.12/site-packages"],
            &["GHSA-mmmm-pppp-qqqq"],
            json!([event(
                s,
                -8 * HOUR,
                json!({"falsePositiveDetermination": {
                "type": "VULNERABLE_CODE_NOT_IN_EXECUTION_PATH", "note": "never imported"}})
            )]),
        ),
    )
    .await;
    review_ok(s, &rt, &id(&a3["events"][0]), "APPROVED").await;
    // A newer fixed event, still pending: it must not become the latest type.
    add_event_ok(
        s,
        &wt,
        &id(&a3),
        event(s, -2 * HOUR, json!({"fixed": {"fixedVersion": "3.12.1-r0"}})),
    )
    .await;
    made.insert("a3", a3);
    s.clock.advance_millis(1_000);

    let a4 = create_as(
        s,
        &wt,
        &team,
        spec(
            ["curl", "apk", "aarch64"],
            ["curl", "apk", "./PKGINFO"],
            &["GO-2024-0001"],
            json!([event(s, -9 * HOUR, json!({"detection": {"manual": {}}}))]),
        ),
    )
    .await;
    review_ok(s, &rt, &id(&a4["events"][0]), "REJECTED").await;
    add_event_ok(
        s,
        &s.token,
        &id(&a4),
        event(
            s,
            -3 * HOUR,
            json!({"truePositiveDetermination": {"note": "reachable"}}),
        ),
    )
    .await;
    made.insert("a4", a4);
    s.clock.advance_millis(1_000);

    let b1 = create(
        s,
        &b,
        spec(
            ["openssl", "apk", "x86_64"],
            ["libssl", "apk", "/usr/lib/libssl.so.3"],
            &["CVE-2024-0001"],
            json!([event(s, -HOUR, json!({"pendingUpstreamFix": {"note": "waiting"}}))]),
        ),
    )
    .await;
    made.insert("b1", b1);

    let labels = made.iter().map(|(l, v)| (cga(v), *l)).collect();
    Dataset {
        a,
        team,
        b,
        admin,
        writer,
        reviewer,
        made,
        labels,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_list_filter_selects_its_subset() {
    for s in servers().await {
        let b = s.backend;
        let d = build_dataset(&s).await;
        let p = format!("uidp.descendantsOf={}", enc(&d.a));
        let (w, r, adm) = (enc(&d.writer), enc(&d.reviewer), enc(&d.admin));
        let cases = [
            // UIDP filters.
            c(p.as_str(), &["a1", "a2", "a3", "a4"]),
            c("", &["a1", "a2", "a3", "a4", "b1"]),
            c(format!("uidp.descendantsOf={}", enc(&d.b)), &["b1"]),
            c(format!("uidp.childrenOf={}", enc(&d.a)), &["a1", "a2", "a3"]),
            c(format!("uidp.descendantsOf={}", enc(&d.team)), &["a4"]),
            c(format!("uidp.childrenOf={}", enc(&d.team)), &["a4"]),
            c(
                format!("uidp.ids={}&uidp.ids={}", enc(&d.uid("a1")), enc(&d.uid("a4"))),
                &["a1", "a4"],
            ),
            // Advisory fields: values of one filter OR together.
            c(
                format!("{p}&advisoryIds={}&advisoryIds={}", d.cga("a1"), d.cga("a3")),
                &["a1", "a3"],
            ),
            c(format!("advisoryIds={}", d.cga("b1")), &["b1"]),
            c(format!("{p}&legacyAdvisoryIds=CGA-2222-3333-4444"), &[]),
            c(format!("{p}&artifactNames=openssl"), &["a1"]),
            c(format!("{p}&artifactNames=openssl&artifactNames=curl"), &["a1", "a4"]),
            c("artifactNames=openssl", &["a1", "b1"]),
            c(format!("{p}&artifactTypes=image"), &["a3"]),
            c(format!("{p}&artifactTypes=apk"), &["a1", "a2", "a4"]),
            c(format!("{p}&artifactArchitectures=aarch64"), &["a2", "a4"]),
            c(format!("{p}&componentNames=curl"), &["a4"]),
            c(
                format!("{p}&componentNames=libssl&componentNames=requests"),
                &["a1", "a3"],
            ),
            c(format!("{p}&componentTypes=go-module"), &["a2"]),
            c(format!("{p}&componentTypes=apk"), &["a1", "a4"]),
            c(format!("{p}&componentLocations={}", enc("./PKGINFO")), &["a4"]),
            c(
                format!(
                    "{p}&componentLocations={}&componentLocations={}",
                    enc("/usr/bin/tool"),
                    enc("/usr/lib/libssl.so.3")
                ),
                &["a1", "a2"],
            ),
            c(format!("{p}&aliases=CVE-2024-0002"), &["a2"]),
            c(format!("{p}&aliases=GHSA-2345-6789-cfgh"), &["a1"]),
            c(format!("{p}&aliases=CVE-2024-0001&aliases=GO-2024-0001"), &["a1", "a4"]),
            c("aliases=CVE-2024-0001", &["a1", "b1"]),
            // Origin: the origin package; artifactNames is then ignored.
            c(format!("{p}&origin=openssl"), &["a1"]),
            c(format!("{p}&origin=openssl&artifactNames=curl"), &["a1"]),
            c(format!("{p}&origin=openssl-dev"), &["a2"]),
            c("origin=openssl", &["a1", "b1"]),
            c(format!("{p}&origin=nothing"), &[]),
            // Query: case-insensitive substring of artifact, component or alias.
            c(format!("{p}&query=SSL"), &["a1", "a2"]),
            c(format!("{p}&query={}", enc("X/NET")), &["a2"]),
            c(format!("{p}&query=Requests"), &["a3"]),
            c(format!("{p}&query=ghsa-MMMM"), &["a3"]),
            c(format!("{p}&query=cve-2024-000"), &["a1", "a2"]),
            c(format!("{p}&query=go-2024"), &["a4"]),
            c(format!("{p}&query=nothing-here"), &[]),
            // Event filters, one at a time.
            c(
                format!("{p}&eventReviewStates=REVIEW_STATE_PENDING"),
                &["a1", "a3", "a4"],
            ),
            c(format!("{p}&eventReviewStates=REVIEW_STATE_APPROVED"), &["a2", "a3"]),
            c(format!("{p}&eventReviewStates=REVIEW_STATE_REJECTED"), &["a4"]),
            c(format!("{p}&eventReviewStates=REVIEW_STATE_REQUEST_CHANGES"), &[]),
            c(
                format!("{p}&eventReviewStates=REVIEW_STATE_APPROVED&eventReviewStates=REVIEW_STATE_REJECTED"),
                &["a2", "a3", "a4"],
            ),
            c(format!("{p}&eventAuthors={w}"), &["a2", "a3", "a4"]),
            c(format!("{p}&eventAuthors={adm}"), &["a1", "a2", "a4"]),
            c(format!("{p}&eventAuthors={r}"), &[]),
            c(format!("{p}&excludeEventAuthors={adm}"), &["a2", "a3", "a4"]),
            c(format!("{p}&excludeEventAuthors={w}"), &["a1", "a2", "a4"]),
            c(format!("{p}&excludeEventAuthors={w}&excludeEventAuthors={adm}"), &[]),
            c(format!("{p}&eventReviewers={r}"), &["a2", "a3", "a4"]),
            c(format!("{p}&eventReviewers={adm}"), &["a2"]),
            c(format!("{p}&eventTypes=EVENT_TYPE_FILTER_FIXED"), &["a2", "a3"]),
            c(
                format!("{p}&eventTypes=EVENT_TYPE_FILTER_DETECTION"),
                &["a1", "a2", "a4"],
            ),
            c(
                format!("{p}&eventTypes=EVENT_TYPE_FILTER_TRUE_POSITIVE_DETERMINATION"),
                &["a4"],
            ),
            c(
                format!("{p}&eventTypes=EVENT_TYPE_FILTER_FALSE_POSITIVE_DETERMINATION"),
                &["a3"],
            ),
            c(
                format!(
                    "{p}&eventTypes=EVENT_TYPE_FILTER_FIXED&eventTypes=EVENT_TYPE_FILTER_TRUE_POSITIVE_DETERMINATION"
                ),
                &["a2", "a3", "a4"],
            ),
            c(format!("{p}&eventTypes=EVENT_TYPE_FILTER_PENDING_UPSTREAM_FIX"), &[]),
            c("eventTypes=EVENT_TYPE_FILTER_PENDING_UPSTREAM_FIX", &["b1"]),
            // Event filters combine on one event.
            c(
                format!("{p}&eventReviewStates=REVIEW_STATE_PENDING&excludeEventAuthors={adm}"),
                &["a3"],
            ),
            c(
                format!("{p}&eventTypes=EVENT_TYPE_FILTER_DETECTION&eventReviewStates=REVIEW_STATE_APPROVED"),
                &["a2"],
            ),
            c(
                format!("{p}&eventTypes=EVENT_TYPE_FILTER_FIXED&eventReviewStates=REVIEW_STATE_PENDING"),
                &["a3"],
            ),
            c(
                format!("{p}&eventTypes=EVENT_TYPE_FILTER_DETECTION&eventReviewers={r}"),
                &["a2", "a4"],
            ),
            c(format!("{p}&eventAuthors={w}&eventReviewers={adm}"), &["a2"]),
            c(format!("{p}&eventAuthors={adm}&eventReviewers={r}"), &["a2"]),
            c(
                format!("{p}&eventAuthors={w}&eventReviewStates=REVIEW_STATE_PENDING"),
                &["a3"],
            ),
            c(
                format!("{p}&eventTypes=EVENT_TYPE_FILTER_TRUE_POSITIVE_DETERMINATION&eventAuthors={w}"),
                &[],
            ),
            // The latest approved event, by event timestamp.
            c(format!("{p}&latestEventType=EVENT_TYPE_FILTER_FIXED"), &["a2"]),
            c(
                format!("{p}&latestEventType=EVENT_TYPE_FILTER_FALSE_POSITIVE_DETERMINATION"),
                &["a3"],
            ),
            c(format!("{p}&latestEventType=EVENT_TYPE_FILTER_DETECTION"), &[]),
            c(
                format!("{p}&latestEventType=EVENT_TYPE_FILTER_TRUE_POSITIVE_DETERMINATION"),
                &[],
            ),
            // Different kinds of filter AND together.
            c(
                format!("{p}&artifactTypes=apk&artifactArchitectures=aarch64"),
                &["a2", "a4"],
            ),
            c(
                format!("{p}&artifactTypes=apk&artifactArchitectures=aarch64&componentTypes=apk"),
                &["a4"],
            ),
            c(
                format!("{p}&artifactTypes=apk&eventReviewStates=REVIEW_STATE_PENDING"),
                &["a1", "a4"],
            ),
            c(
                format!("{p}&latestEventType=EVENT_TYPE_FILTER_FIXED&aliases=CVE-2024-0001"),
                &[],
            ),
            c(format!("{p}&query=openssl&artifactArchitectures=x86_64"), &["a1"]),
            c(
                format!("uidp.descendantsOf={}&artifactNames=openssl", enc(&d.team)),
                &[],
            ),
        ];
        for (query, want) in &cases {
            let ctx = format!("[{b}] ?{query}");
            let page = list(&s, query).await;
            assert_eq!(&d.labels_of(&ctx, &page), want, "{ctx}: {page}");
            // v2beta1 answers the same.
            let beta = list_as(&s, &s.token, BETA, query).await;
            assert_eq!(beta, page, "{ctx}: v2beta1");
        }

        // Unknown filters and values are refused, not ignored.
        for bad in [
            "artifactName=openssl",
            "eventReviewStates=APPROVED",
            "eventTypes=EVENT_TYPE_FILTER_NOPE",
            "orderBy=advisory_id",
            "pageSize=-1",
            "skip=-1",
        ] {
            let (st, body) = s.get(&format!("{V2}?{bad}")).await;
            assert_error(&format!("[{b}] ?{bad}"), st, &body, 400, 3, "INVALID_ARGUMENT");
        }

        // The events of a listed advisory are all there, oldest first.
        let page = list(&s, &format!("advisoryIds={}", d.cga("a2"))).await;
        let kinds: Vec<&str> = page["advisories"][0]["events"]
            .as_array()
            .expect("events")
            .iter()
            .map(|e| payload_key(b, e))
            .collect();
        assert_eq!(kinds, ["detection", "fixed"], "[{b}] {page}");
        let states: Vec<&Value> = page["advisories"][0]["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| &e["reviewState"])
            .collect();
        assert_eq!(
            states,
            [&json!("REVIEW_STATE_APPROVED"), &json!("REVIEW_STATE_APPROVED")],
            "[{b}] {page}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn pagination_ordering_and_deleted_advisories() {
    for s in servers().await {
        let b = s.backend;
        let d = build_dataset(&s).await;
        let mut by_uid: Vec<(String, &str)> = d.made.iter().map(|(l, v)| (id(v), *l)).collect();
        by_uid.sort();
        let uid_order: Vec<&str> = by_uid.iter().map(|(_, l)| *l).collect();

        // Walk every page of two.
        for (order, want) in [
            ("", uid_order.clone()),
            ("&orderBy=uid", uid_order.clone()),
            (
                "&orderBy=uid%20desc",
                uid_order.iter().rev().copied().collect::<Vec<_>>(),
            ),
            ("&orderBy=create_time", vec!["a1", "a2", "a3", "a4", "b1"]),
            ("&orderBy=create_time%20desc", vec!["b1", "a4", "a3", "a2", "a1"]),
        ] {
            let ctx = format!("[{b}] pages{order}");
            let mut walked = Vec::new();
            let mut token = String::new();
            let mut pages = 0;
            loop {
                let mut q = format!("pageSize=2{order}");
                if !token.is_empty() {
                    q.push_str(&format!("&pageToken={}", enc(&token)));
                }
                let page = list(&s, &q).await;
                pages += 1;
                assert_eq!(total_count(&page), 5, "{ctx}: totalCount on every page: {page}");
                let ids = advisory_ids(&page);
                assert!(ids.len() <= 2, "{ctx}: {page}");
                walked.extend(ids.iter().map(|i| d.labels[i]));
                token = page["nextPageToken"].as_str().expect("nextPageToken").to_owned();
                if token.is_empty() {
                    break;
                }
                assert!(pages < 10, "{ctx}: runaway paging");
            }
            assert_eq!(pages, 3, "{ctx}");
            assert_eq!(walked, want, "{ctx}");
        }

        // skip, and a filter that changes under a token.
        let page = list(&s, "pageSize=2&skip=1").await;
        let got: Vec<&str> = advisory_ids(&page).iter().map(|i| d.labels[i]).collect();
        assert_eq!(got, uid_order[1..3], "[{b}] {page}");
        assert_eq!(page["skipped"], 1, "[{b}] {page}");
        let page = list(&s, "pageSize=2").await;
        let token = page["nextPageToken"].as_str().unwrap().to_owned();
        let (st, body) = s
            .get(&format!("{V2}?pageSize=2&artifactTypes=apk&pageToken={}", enc(&token)))
            .await;
        assert_error(b, st, &body, 400, 3, "INVALID_ARGUMENT");

        // Deleted advisories leave listings unless asked for.
        let (st, _) = s.delete(&format!("{V1}/{}", d.uid("a1"))).await;
        assert_eq!(st, StatusCode::OK, "[{b}]");
        let p = format!("uidp.descendantsOf={}", enc(&d.a));
        let page = list(&s, &p).await;
        let want: BTreeSet<&str> = ["a2", "a3", "a4"].into();
        assert_eq!(d.labels_of(b, &page), want, "[{b}] {page}");
        let page = list(&s, &format!("{p}&showDeleted=true")).await;
        let want: BTreeSet<&str> = ["a1", "a2", "a3", "a4"].into();
        assert_eq!(d.labels_of(b, &page), want, "[{b}] {page}");
        let deleted: Vec<&Value> = page["advisories"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["deleteTime"].is_string())
            .collect();
        assert_eq!(deleted.len(), 1, "[{b}] {page}");
        assert_eq!(deleted[0]["advisoryId"], json!(d.cga("a1")), "[{b}] {page}");
        let page = list(&s, &format!("advisoryIds={}", d.cga("a1"))).await;
        assert_eq!(d.labels_of(b, &page), BTreeSet::<&str>::new(), "[{b}] {page}");
        let page = list(&s, &format!("{p}&artifactNames=openssl&showDeleted=true")).await;
        assert_eq!(d.labels_of(b, &page), BTreeSet::from(["a1"]), "[{b}] {page}");
        let page = list(&s, "pageSize=2").await;
        assert_eq!(total_count(&page), 4, "[{b}] {page}");
    }
}

// ---------------------------------------------------------------------------
// gRPC
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn grpc_create_then_get_and_list() {
    use v1::advisory_event::Type as V1Type;
    use v2::advisory_event::Type as V2Type;
    for s in servers().await {
        let b = s.backend;
        let org = uid(&s.create_group(None, "acme").await);
        let ch = Channel::from_shared(format!("http://{}", s.addr()))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let bearer = Bearer(s.token.clone());
        let mut writes = AdvisoriesClient::with_interceptor(ch.clone(), bearer.clone());
        let mut reads = AdvisoriesServiceClient::with_interceptor(ch.clone(), bearer.clone());
        let mut beta = BetaAdvisoriesClient::with_interceptor(ch, bearer);

        let when = ward_proto::Timestamp::from_millis(s.clock.now_millis() - HOUR);
        let created = writes
            .create(v1::CreateAdvisoryRequest {
                parent_id: org.clone(),
                advisory: Some(v1::Advisory {
                    artifact_name: "zlib".into(),
                    artifact_type: "apk".into(),
                    artifact_architecture: "x86_64".into(),
                    component_name: Some("zlib".into()),
                    component_type: Some("apk".into()),
                    component_location: Some("/lib/libz.so.1".into()),
                    aliases: vec!["CVE-2024-12345".into()],
                    events: vec![v1::AdvisoryEvent {
                        timestamp: Some(when),
                        r#type: Some(V1Type::Fixed(v1::Fixed {
                            fixed_version: "1.3.1-r0".into(),
                            ..Default::default()
                        })),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            })
            .await
            .unwrap_or_else(|e| panic!("[{b}] create: {e:?}"))
            .into_inner();
        assert!(child_of(&created.id, &org), "[{b}] {created:?}");
        assert!(ward_core::advisory::is_cga(&created.advisory_id), "[{b}]");
        assert_eq!(created.author, admin_uid(&s));
        assert_eq!(created.events.len(), 1);
        assert_eq!(
            created.events[0].status,
            v1::advisory_event::ReviewStatus::Pending as i32,
            "[{b}]"
        );

        let got = reads
            .get_advisory(v2::GetAdvisoryRequest {
                uid: created.id.clone(),
            })
            .await
            .unwrap_or_else(|e| panic!("[{b}] get: {e:?}"))
            .into_inner();
        assert_eq!(got.uid, created.id);
        assert_eq!(got.advisory_id, created.advisory_id);
        assert_eq!(got.artifact_name, "zlib");
        assert_eq!(got.component_location, "/lib/libz.so.1");
        assert_eq!(got.aliases, ["CVE-2024-12345"]);
        assert_eq!(got.events.len(), 1);
        let ev = &got.events[0];
        assert_eq!(ev.uid, created.events[0].id);
        assert_eq!(ev.create_time, Some(when));
        assert_eq!(ev.review_state, v2::ReviewState::Pending as i32);
        match &ev.r#type {
            Some(V2Type::Fixed(f)) => assert_eq!(f.fixed_version, "1.3.1-r0", "[{b}]"),
            other => panic!("[{b}] not a fixed event: {other:?}"),
        }
        let got_beta = beta
            .get_advisory(v2::GetAdvisoryRequest {
                uid: created.id.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(got_beta, got, "[{b}] v2beta1");

        // The same over REST.
        let rest = get_ok(&s, &created.id).await;
        assert_eq!(rest["advisoryId"], json!(created.advisory_id));

        let listed = reads
            .list_advisories(v2::ListAdvisoriesRequest {
                uidp: Some(ward_proto::common::UidpFilter {
                    descendants_of: org.clone(),
                    ..Default::default()
                }),
                aliases: vec!["CVE-2024-12345".into()],
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(listed.advisories.len(), 1, "[{b}]");
        assert_eq!(listed.advisories[0].uid, created.id);
        assert_eq!(listed.total_count, Some(1));
        assert_eq!(listed.next_page_token, "");
        let none = reads
            .list_advisories(v2::ListAdvisoriesRequest {
                latest_event_type: Some(v2::EventTypeFilter::Fixed as i32),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(none.advisories.len(), 0, "[{b}] nothing approved yet");
        assert_eq!(none.total_count, Some(0));

        let events = writes
            .list_advisory_events(v1::AdvisoryEventFilter {
                parent_id: created.id.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(events.parent_id, created.id);
        assert_eq!(events.items.len(), 1);

        // A bad create and a missing advisory carry their codes.
        let err = writes
            .create(v1::CreateAdvisoryRequest {
                parent_id: org.clone(),
                advisory: Some(v1::Advisory::default()),
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "[{b}] {err:?}");
        let err = reads
            .get_advisory(v2::GetAdvisoryRequest {
                uid: format!("{org}/0000000000000000"),
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::NotFound, "[{b}] {err:?}");
    }
}

/// The import endpoint takes JSON only, within its size bound, and needs
/// `advisories.create` somewhere before it reads the body.
#[tokio::test(flavor = "multi_thread")]
async fn import_endpoint_bounds() {
    for s in common::servers().await {
        let b = s.backend;
        let org = common::uid(&s.create_group(None, "acme").await);
        let url = format!("http://{}/vulnerabilities/v1/advisories:import", s.addr());
        let client = reqwest::Client::new();
        let body = serde_json::json!({"parentId": org, "documents": []}).to_string();
        let r = client
            .post(&url)
            .bearer_auth(&s.token)
            .header("content-type", "text/plain")
            .body(body.clone())
            .send()
            .await
            .expect("send");
        assert_eq!(r.status().as_u16(), 415, "[{b}]");
        let r = client
            .post(&url)
            .bearer_auth(&s.token)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("send");
        assert_eq!(r.status().as_u16(), 200, "[{b}]");
        let big = vec![b' '; 16 * 1024 * 1024 + 1];
        let r = client
            .post(&url)
            .bearer_auth(&s.token)
            .header("content-type", "application/json")
            .body(big)
            .send()
            .await
            .expect("send");
        assert_eq!(r.status().as_u16(), 413, "[{b}]");
        // Someone with no advisory capability anywhere is refused before the body is read.
        let (_, nobody) = common::person(&s, "nobody", &[]).await;
        let r = client
            .post(&url)
            .bearer_auth(&nobody)
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .expect("send");
        assert_eq!(r.status().as_u16(), 403, "[{b}]");
    }
}
