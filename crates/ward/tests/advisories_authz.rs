//! Advisories authorization on every backend: who may read, write, review and
//! delete, and what stays invisible.
//!
//! Fixture: organization A with a subgroup A/team, and organization B. The
//! server admin creates advisory X in A and T in A/team, each with one pending
//! event the admin wrote. Callers are root-level identities bound to built-in
//! roles (`viewer`, `advisories.viewer`, `advisories.creator`,
//! `advisories.approver`, `advisories.admin`) at A, at A/team only, or at B
//! only.
//!
//! The rule: capabilities held at the advisory (or at the group, for a
//! create) allow the call; a caller who can list the advisory but lacks the
//! capability gets 403 PERMISSION_DENIED; a caller who cannot see it gets 404
//! NOT_FOUND, exactly as for an advisory that does not exist. Nobody reviews
//! an event they wrote (403). No token is 401.

mod common;

use std::collections::BTreeSet;

use common::{TestServer, admin_uid, assert_error, cga, enc, person, servers, total_count, uid, v1_id as id};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use ward_core::clock::Clock as _;

const V1: &str = "/vulnerabilities/v1/advisories";
const V2: &str = "/vulnerabilities/v2/advisories";
const BETA: &str = "/vulnerabilities/v2beta1/advisories";
const EVENTS: &str = "/vulnerabilities/v1/advisory_events";
const HOUR: i64 = 60 * 60 * 1000;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// An RFC 3339 timestamp `offset_ms` from the server's now.
fn ts(s: &TestServer, offset_ms: i64) -> String {
    let t = ward_proto::Timestamp::from_millis(s.clock.now_millis() + offset_ms);
    serde_json::to_value(t)
        .expect("timestamp json")
        .as_str()
        .expect("string")
        .to_owned()
}

/// A valid v1 advisory for artifact `name` with one manual detection.
fn adv(s: &TestServer, name: &str) -> Value {
    json!({
        "artifactName": name, "artifactType": "apk", "artifactArchitecture": "x86_64",
        "componentName": name, "componentType": "apk", "componentLocation": "./PKGINFO",
        "aliases": ["CVE-2024-12345"],
        "events": [{"timestamp": ts(s, -2 * HOUR), "detection": {"manual": {}}}],
    })
}

/// A valid new event.
fn fixed_event(s: &TestServer) -> Value {
    json!({"timestamp": ts(s, -HOUR), "fixed": {"fixedVersion": "1.2.3-r4"}})
}

/// POST an advisory under `group` as `token`.
async fn create(s: &TestServer, token: &str, group: &str, name: &str) -> (StatusCode, Value) {
    let body = json!({ "parentId": group, "advisory": adv(s, name) });
    s.call_as(token, Method::POST, V1, Some(body)).await
}

async fn create_ok(s: &TestServer, token: &str, group: &str, name: &str) -> Value {
    let (st, body) = create(s, token, group, name).await;
    assert_eq!(st, StatusCode::OK, "[{}] create {name}: {body}", s.backend);
    body
}

async fn get(s: &TestServer, token: &str, uid: &str) -> (StatusCode, Value) {
    s.call_as(token, Method::GET, &format!("{V2}/{uid}"), None).await
}

/// A full-replacement update of `advisory` (a v1 advisory) with a new
/// architecture.
async fn update(s: &TestServer, token: &str, advisory: &Value) -> (StatusCode, Value) {
    let mut body = advisory.clone();
    body["artifactArchitecture"] = json!("aarch64");
    s.call_as(token, Method::PUT, &format!("{V1}/{}", id(advisory)), Some(body))
        .await
}

async fn delete(s: &TestServer, token: &str, uid: &str) -> (StatusCode, Value) {
    s.call_as(token, Method::DELETE, &format!("{V1}/{uid}"), None).await
}

async fn add_event(s: &TestServer, token: &str, advisory: &str) -> (StatusCode, Value) {
    let body = json!({ "advisoryEvent": fixed_event(s) });
    s.call_as(token, Method::POST, &format!("{V1}/{advisory}/events"), Some(body))
        .await
}

async fn add_event_ok(s: &TestServer, token: &str, advisory: &str) -> String {
    let (st, body) = add_event(s, token, advisory).await;
    assert_eq!(st, StatusCode::OK, "[{}] add event: {body}", s.backend);
    id(&body)
}

async fn list_events(s: &TestServer, token: &str, advisory: &str) -> (StatusCode, Value) {
    s.call_as(token, Method::GET, &format!("{V1}/{advisory}/events"), None)
        .await
}

async fn review(s: &TestServer, token: &str, event: &str, status: &str) -> (StatusCode, Value) {
    s.call_as(
        token,
        Method::PUT,
        &format!("{EVENTS}/{event}"),
        Some(json!({ "status": status })),
    )
    .await
}

/// The advisoryIds `token` lists with `query` (one page, totalCount exact).
async fn listed(s: &TestServer, token: &str, query: &str) -> BTreeSet<String> {
    let (st, page) = s.call_as(token, Method::GET, &format!("{V2}?{query}"), None).await;
    assert_eq!(st, StatusCode::OK, "[{}] list ?{query}: {page}", s.backend);
    let ids: Vec<String> = page["advisories"]
        .as_array()
        .unwrap_or_else(|| panic!("no advisories in {page}"))
        .iter()
        .map(cga)
        .collect();
    assert_eq!(
        total_count(&page),
        ids.len() as i64,
        "[{}] totalCount: {page}",
        s.backend
    );
    ids.into_iter().collect()
}

fn set(ids: &[String]) -> BTreeSet<String> {
    ids.iter().cloned().collect()
}

fn ok(ctx: &str, st: StatusCode, body: &Value) {
    assert_eq!(st, StatusCode::OK, "{ctx}: {body}");
}

fn denied(ctx: &str, st: StatusCode, body: &Value) {
    assert_error(ctx, st, body, 403, 7, "PERMISSION_DENIED");
}

fn not_found(ctx: &str, st: StatusCode, body: &Value) {
    assert_error(ctx, st, body, 404, 5, "NOT_FOUND");
}

/// The review state of event `event` of advisory `advisory`, over v2.
async fn review_state(s: &TestServer, advisory: &str, event: &str) -> String {
    let (st, got) = get(s, &s.token, advisory).await;
    assert_eq!(st, StatusCode::OK, "{got}");
    got["events"]
        .as_array()
        .expect("events")
        .iter()
        .find(|e| e["uid"] == event)
        .unwrap_or_else(|| panic!("no event {event} in {got}"))["reviewState"]
        .as_str()
        .expect("reviewState")
        .to_owned()
}

struct Fixture {
    a: String,
    team: String,
    b: String,
    /// X, in A (v1 JSON as created by the admin).
    x: Value,
    /// X's pending event, written by the admin.
    x_event: String,
    /// T, in A/team.
    t: Value,
}

impl Fixture {
    fn x_id(&self) -> String {
        id(&self.x)
    }

    fn t_id(&self) -> String {
        id(&self.t)
    }
}

async fn fixture(s: &TestServer) -> Fixture {
    let a = uid(&s.create_group(None, "org-a").await);
    let team = uid(&s.create_group(Some(&a), "team").await);
    let b = uid(&s.create_group(None, "org-b").await);
    let x = create_ok(s, &s.token, &a, "openssl").await;
    let x_event = id(&x["events"][0]);
    let t = create_ok(s, &s.token, &team, "curl").await;
    Fixture {
        a,
        team,
        b,
        x,
        x_event,
        t,
    }
}

// ---------------------------------------------------------------------------
// The matrix
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn viewers_read_but_cannot_write() {
    for s in servers().await {
        let fx = fixture(&s).await;
        for role in ["viewer", "advisories.viewer"] {
            let ctx = format!("[{}] {role} at A", s.backend);
            let (_, tok) = person(&s, &format!("reader-{role}"), &[(fx.a.as_str(), role)]).await;

            // Reads: the advisory (both versions), its events, the lists.
            let (st, body) = get(&s, &tok, &fx.x_id()).await;
            ok(&ctx, st, &body);
            assert_eq!(body["advisoryId"], fx.x["advisoryId"], "{ctx}");
            let (st, body) = s
                .call_as(&tok, Method::GET, &format!("{BETA}/{}", fx.x_id()), None)
                .await;
            ok(&ctx, st, &body);
            let (st, body) = get(&s, &tok, &fx.t_id()).await;
            ok(&format!("{ctx}: T in A/team"), st, &body);
            let (st, body) = list_events(&s, &tok, &fx.x_id()).await;
            ok(&ctx, st, &body);
            assert_eq!(body["items"].as_array().map(Vec::len), Some(1), "{ctx}: {body}");
            assert_eq!(listed(&s, &tok, "").await, set(&[cga(&fx.x), cga(&fx.t)]), "{ctx}");

            // Writes: seen, so 403.
            let (st, body) = update(&s, &tok, &fx.x).await;
            denied(&format!("{ctx}: update"), st, &body);
            let (st, body) = delete(&s, &tok, &fx.x_id()).await;
            denied(&format!("{ctx}: delete"), st, &body);
            let (st, body) = add_event(&s, &tok, &fx.x_id()).await;
            denied(&format!("{ctx}: add event"), st, &body);
            for status in ["APPROVED", "REJECTED", "REQUEST_CHANGES"] {
                let (st, body) = review(&s, &tok, &fx.x_event, status).await;
                denied(&format!("{ctx}: review {status}"), st, &body);
            }
            if role == "viewer" {
                let (st, body) = create(&s, &tok, &fx.a, "zlib").await;
                denied(&format!("{ctx}: create"), st, &body);
            }
        }

        // Nothing changed.
        let (_, got) = get(&s, &s.token, &fx.x_id()).await;
        assert!(got["deleteTime"].is_null(), "[{}] {got}", s.backend);
        assert_eq!(got["artifactArchitecture"], "x86_64", "[{}] {got}", s.backend);
        assert_eq!(got["events"].as_array().map(Vec::len), Some(1), "[{}] {got}", s.backend);
        assert_eq!(review_state(&s, &fx.x_id(), &fx.x_event).await, "REVIEW_STATE_PENDING");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn creators_create_and_update_but_cannot_approve_or_delete() {
    for s in servers().await {
        let fx = fixture(&s).await;
        let ctx = format!("[{}] advisories.creator at A", s.backend);
        let (creator, tok) = person(&s, "creator", &[(fx.a.as_str(), "advisories.creator")]).await;

        // Creates in A and below; the caller is the author.
        let own = create_ok(&s, &tok, &fx.a, "zlib").await;
        assert_eq!(own["author"], json!(creator), "{ctx}: {own}");
        let in_team = create_ok(&s, &tok, &fx.team, "busybox").await;
        assert!(id(&in_team).starts_with(&format!("{}/", fx.team)), "{ctx}: {in_team}");

        // Updates.
        let (st, body) = update(&s, &tok, &own).await;
        ok(&format!("{ctx}: update"), st, &body);
        assert_eq!(body["artifactArchitecture"], "aarch64", "{ctx}: {body}");

        // Adds events, to its own advisory and to the admin's.
        let ev = add_event_ok(&s, &tok, &fx.x_id()).await;
        let (_, events) = list_events(&s, &tok, &fx.x_id()).await;
        let authors: Vec<&Value> = events["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|e| &e["author"])
            .collect();
        assert_eq!(authors, [&json!(admin_uid(&s)), &json!(creator)], "{ctx}: {events}");
        add_event_ok(&s, &tok, &id(&own)).await;

        // Cannot review (anyone's event) or delete (anything it sees).
        for event in [&fx.x_event, &ev] {
            let (st, body) = review(&s, &tok, event, "APPROVED").await;
            denied(&format!("{ctx}: approve"), st, &body);
            let (st, body) = review(&s, &tok, event, "REJECTED").await;
            denied(&format!("{ctx}: reject"), st, &body);
        }
        for advisory in [id(&own), fx.x_id()] {
            let (st, body) = delete(&s, &tok, &advisory).await;
            denied(&format!("{ctx}: delete"), st, &body);
        }
        assert_eq!(review_state(&s, &fx.x_id(), &fx.x_event).await, "REVIEW_STATE_PENDING");

        // Nothing in B.
        let (st, body) = create(&s, &tok, &fx.b, "zlib").await;
        not_found(&format!("{ctx}: create in B"), st, &body);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn approvers_review_others_events_but_not_their_own() {
    for s in servers().await {
        let fx = fixture(&s).await;
        let ctx = format!("[{}] advisories.approver at A", s.backend);
        let (approver, tok) = person(&s, "approver", &[(fx.a.as_str(), "advisories.approver")]).await;
        let (_, creator) = person(&s, "creator", &[(fx.a.as_str(), "advisories.creator")]).await;

        // The admin's event.
        let (st, body) = review(&s, &tok, &fx.x_event, "APPROVED").await;
        ok(&format!("{ctx}: approve the admin's event"), st, &body);
        assert_eq!(body["reviewer"], json!(approver), "{ctx}: {body}");
        assert_eq!(review_state(&s, &fx.x_id(), &fx.x_event).await, "REVIEW_STATE_APPROVED");

        // A creator's event, in A/team.
        let theirs = add_event_ok(&s, &creator, &fx.t_id()).await;
        let (st, body) = review(&s, &tok, &theirs, "REQUEST_CHANGES").await;
        ok(&format!("{ctx}: request changes"), st, &body);
        assert_eq!(body["reviewer"], json!(approver), "{ctx}: {body}");

        // Rewriting someone's event after requesting changes makes it the
        // rewriter's own: they cannot then approve it (else one approver
        // could publish content no second person saw).
        let mut rewrite = fixed_event(&s);
        rewrite["fixed"]["fixedVersion"] = json!("0.0.1-r0");
        rewrite["status"] = json!("PENDING");
        let (st, body) = s
            .call_as(&tok, Method::PUT, &format!("{EVENTS}/{theirs}"), Some(rewrite))
            .await;
        ok(&format!("{ctx}: resubmit after request changes"), st, &body);
        assert_eq!(
            body["author"],
            json!(approver),
            "{ctx}: the rewriter is the author: {body}"
        );
        assert_eq!(body["reviewer"], "", "{ctx}: reviewer cleared: {body}");
        let (st, body) = review(&s, &tok, &theirs, "APPROVED").await;
        denied(&format!("{ctx}: approve own rewrite"), st, &body);
        // Another reviewer may approve it.
        let (st, body) = review(&s, &s.token, &theirs, "APPROVED").await;
        ok(&format!("{ctx}: the admin approves the rewrite"), st, &body);

        // `issue` is bounded text on reviews too.
        let pending = add_event_ok(&s, &creator, &fx.x_id()).await;
        for issue in ["x".repeat(513), "a\u{202e}b".to_owned(), "a\u{0007}b".to_owned()] {
            let (st, body) = s
                .call_as(
                    &tok,
                    Method::PUT,
                    &format!("{EVENTS}/{pending}"),
                    Some(json!({ "status": "REQUEST_CHANGES", "issue": issue })),
                )
                .await;
            assert_eq!(st, StatusCode::BAD_REQUEST, "{ctx}: issue {issue:?}: {body}");
        }
        assert_eq!(review_state(&s, &fx.x_id(), &pending).await, "REVIEW_STATE_PENDING");

        // Its own event: never.
        let own = add_event_ok(&s, &tok, &fx.x_id()).await;
        for status in ["APPROVED", "REJECTED", "REQUEST_CHANGES"] {
            let (st, body) = review(&s, &tok, &own, status).await;
            denied(&format!("{ctx}: review own {status}"), st, &body);
        }
        assert_eq!(review_state(&s, &fx.x_id(), &own).await, "REVIEW_STATE_PENDING");
        // Someone else may.
        let (st, body) = review(&s, &s.token, &own, "APPROVED").await;
        ok(&format!("{ctx}: the admin approves it"), st, &body);

        // Approving is not deleting.
        let (st, body) = delete(&s, &tok, &fx.x_id()).await;
        denied(&format!("{ctx}: delete"), st, &body);

        // An approver of A/team only does not see X's events.
        let (_, team_only) = person(&s, "team approver", &[(fx.team.as_str(), "advisories.approver")]).await;
        let other = add_event_ok(&s, &creator, &fx.x_id()).await;
        let (st, body) = review(&s, &team_only, &other, "APPROVED").await;
        not_found(&format!("{ctx}: A/team approver on X"), st, &body);
        let on_t = add_event_ok(&s, &creator, &fx.t_id()).await;
        let (st, body) = review(&s, &team_only, &on_t, "APPROVED").await;
        ok(&format!("{ctx}: A/team approver on T"), st, &body);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn admins_delete() {
    for s in servers().await {
        let fx = fixture(&s).await;
        let ctx = format!("[{}] advisories.admin", s.backend);
        let (_, tok) = person(&s, "advisories admin", &[(fx.a.as_str(), "advisories.admin")]).await;
        let (_, team_admin) = person(&s, "team admin", &[(fx.team.as_str(), "advisories.admin")]).await;
        let (_, creator) = person(&s, "creator", &[(fx.a.as_str(), "advisories.creator")]).await;
        let (_, owner) = person(&s, "owner", &[(fx.a.as_str(), "owner")]).await;
        let (_, editor) = person(&s, "editor", &[(fx.a.as_str(), "editor")]).await;

        // `editor` reads advisories but holds none of their write capabilities.
        let (st, body) = get(&s, &editor, &fx.x_id()).await;
        ok(&format!("{ctx}: editor reads"), st, &body);
        let (st, body) = delete(&s, &editor, &fx.t_id()).await;
        denied(&format!("{ctx}: editor deletes"), st, &body);

        // `owner` holds them (Ward's owner adds the advisories bundle), so an
        // organization's owner can delegate the review without the server admin.
        let (st, identity) = s
            .call_as(
                &owner,
                Method::POST,
                &format!("/iam/v2/identities/{}", fx.a),
                Some(json!({
                    "name": "delegated reviewer",
                    "claimMatch": {"issuer": "https://people.example.com", "subject": "reviewer"}
                })),
            )
            .await;
        ok(&format!("{ctx}: owner creates a reviewer identity"), st, &identity);
        let reviewer = uid(&identity);
        let role_uid = ward_core::capability::builtin_role("advisories.approver")
            .expect("role")
            .uid();
        let (st, body) = s
            .call_as(
                &owner,
                Method::POST,
                &format!("/iam/v2/roleBindings/{}", fx.a),
                Some(json!({ "identityUid": reviewer, "roleUid": role_uid })),
            )
            .await;
        ok(&format!("{ctx}: owner grants advisories.approver"), st, &body);

        // An admin of A/team deletes there, and cannot see X.
        let (st, body) = delete(&s, &team_admin, &fx.x_id()).await;
        not_found(&format!("{ctx}: A/team admin deletes X"), st, &body);
        let (st, body) = delete(&s, &team_admin, &fx.t_id()).await;
        ok(&format!("{ctx}: A/team admin deletes T"), st, &body);

        // An admin of A deletes X (its own creations or anyone's).
        let mine = create_ok(&s, &tok, &fx.a, "zlib").await;
        let (st, body) = delete(&s, &tok, &id(&mine)).await;
        ok(&format!("{ctx}: delete own"), st, &body);
        let theirs = create_ok(&s, &creator, &fx.a, "busybox").await;
        let (st, body) = delete(&s, &tok, &id(&theirs)).await;
        ok(&format!("{ctx}: delete a creator's"), st, &body);
        let (st, body) = delete(&s, &tok, &fx.x_id()).await;
        ok(&format!("{ctx}: delete X"), st, &body);

        // Soft: still readable, with deleteTime; deleting again is 404.
        let (st, got) = get(&s, &tok, &fx.x_id()).await;
        ok(&ctx, st, &got);
        assert!(got["deleteTime"].is_string(), "{ctx}: {got}");
        let (st, body) = delete(&s, &tok, &fx.x_id()).await;
        not_found(&format!("{ctx}: delete twice"), st, &body);
        assert_eq!(listed(&s, &tok, "").await, BTreeSet::<String>::new(), "{ctx}");
        assert_eq!(
            listed(&s, &tok, "showDeleted=true").await,
            set(&[cga(&fx.x), cga(&fx.t), cga(&mine), cga(&theirs)]),
            "{ctx}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn other_organizations_see_nothing() {
    for s in servers().await {
        let fx = fixture(&s).await;
        let b = s.backend;
        let (_, stranger) = person(&s, "stranger", &[(fx.b.as_str(), "advisories.admin")]).await;
        let (_, b_owner) = person(&s, "b owner", &[(fx.b.as_str(), "owner")]).await;
        let (_, nobody) = person(&s, "nobody", &[]).await;
        let (_, team_viewer) = person(&s, "team viewer", &[(fx.team.as_str(), "advisories.viewer")]).await;
        let theirs = create_ok(&s, &stranger, &fx.b, "zlib").await;

        for (who, tok) in [
            ("advisories.admin of B", &stranger),
            ("owner of B", &b_owner),
            ("no bindings", &nobody),
            ("advisories.viewer of A/team", &team_viewer),
        ] {
            let ctx = format!("[{b}] {who}");
            let (st, body) = get(&s, tok, &fx.x_id()).await;
            not_found(&format!("{ctx}: get"), st, &body);
            let (st, body) = s
                .call_as(tok, Method::GET, &format!("{BETA}/{}", fx.x_id()), None)
                .await;
            not_found(&format!("{ctx}: get v2beta1"), st, &body);
            let (st, body) = update(&s, tok, &fx.x).await;
            not_found(&format!("{ctx}: update"), st, &body);
            let (st, body) = delete(&s, tok, &fx.x_id()).await;
            not_found(&format!("{ctx}: delete"), st, &body);
            let (st, body) = add_event(&s, tok, &fx.x_id()).await;
            not_found(&format!("{ctx}: add event"), st, &body);
            let (st, body) = list_events(&s, tok, &fx.x_id()).await;
            not_found(&format!("{ctx}: list events"), st, &body);
            for status in ["APPROVED", "REJECTED", "REQUEST_CHANGES"] {
                let (st, body) = review(&s, tok, &fx.x_event, status).await;
                not_found(&format!("{ctx}: review {status}"), st, &body);
            }
            // A group it cannot see: 404, not 403.
            let (st, body) = create(&s, tok, &fx.a, "zlib").await;
            not_found(&format!("{ctx}: create in A"), st, &body);

            // Lists hold none of A's advisories, whatever the filter.
            for query in [
                String::new(),
                format!("advisoryIds={}", cga(&fx.x)),
                "artifactNames=openssl".to_owned(),
                "query=openssl".to_owned(),
                "aliases=CVE-2024-12345".to_owned(),
                "showDeleted=true".to_owned(),
                format!("uidp.ids={}", enc(&fx.x_id())),
            ] {
                let got = listed(&s, tok, &query).await;
                assert!(!got.contains(&cga(&fx.x)), "{ctx}: ?{query} shows X: {got:?}");
                assert!(
                    got.iter().all(|c| *c == cga(&theirs) || *c == cga(&fx.t)),
                    "{ctx}: ?{query}: {got:?}"
                );
            }
        }

        // What each one does see.
        assert_eq!(listed(&s, &stranger, "").await, set(&[cga(&theirs)]), "[{b}]");
        assert_eq!(listed(&s, &b_owner, "").await, set(&[cga(&theirs)]), "[{b}]");
        assert_eq!(listed(&s, &nobody, "").await, BTreeSet::<String>::new(), "[{b}]");
        assert_eq!(listed(&s, &team_viewer, "").await, set(&[cga(&fx.t)]), "[{b}]");
        let (st, body) = get(&s, &team_viewer, &fx.t_id()).await;
        ok(&format!("[{b}] A/team viewer reads T"), st, &body);
        let (st, body) = get(&s, &stranger, &id(&theirs)).await;
        ok(&format!("[{b}] B's admin reads its own"), st, &body);

        // A's admin does not see B's either.
        let (_, a_admin) = person(&s, "a admin", &[(fx.a.as_str(), "advisories.admin")]).await;
        let (st, body) = get(&s, &a_admin, &id(&theirs)).await;
        not_found(&format!("[{b}] A's admin on B's"), st, &body);
        let (st, body) = create(&s, &a_admin, &fx.b, "zlib").await;
        not_found(&format!("[{b}] A's admin creates in B"), st, &body);

        // X is untouched.
        let (_, got) = get(&s, &s.token, &fx.x_id()).await;
        assert!(got["deleteTime"].is_null(), "[{b}] {got}");
        assert_eq!(got["artifactArchitecture"], "x86_64", "[{b}] {got}");
        assert_eq!(got["events"].as_array().map(Vec::len), Some(1), "[{b}] {got}");
        assert_eq!(review_state(&s, &fx.x_id(), &fx.x_event).await, "REVIEW_STATE_PENDING");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn unauthenticated_calls_are_401() {
    for s in servers().await {
        let fx = fixture(&s).await;
        let ctx = format!("[{}] no token", s.backend);
        let x = fx.x_id();
        let requests = [
            (Method::GET, format!("{V2}/{x}"), None),
            (Method::GET, format!("{BETA}/{x}"), None),
            (Method::GET, V2.to_owned(), None),
            (Method::GET, format!("{V2}?uidp.descendantsOf={}", enc(&fx.a)), None),
            (Method::GET, BETA.to_owned(), None),
            (
                Method::POST,
                V1.to_owned(),
                Some(json!({"parentId": fx.a, "advisory": adv(&s, "zlib")})),
            ),
            (Method::PUT, format!("{V1}/{x}"), Some(fx.x.clone())),
            (Method::DELETE, format!("{V1}/{x}"), None),
            (
                Method::POST,
                format!("{V1}/{x}/events"),
                Some(json!({"advisoryEvent": fixed_event(&s)})),
            ),
            (Method::GET, format!("{V1}/{x}/events"), None),
            (
                Method::PUT,
                format!("{EVENTS}/{}", fx.x_event),
                Some(json!({"status": "APPROVED"})),
            ),
        ];
        for (method, path, body) in requests {
            let (st, resp) = s.call_as("", method.clone(), &path, body).await;
            assert_error(
                &format!("{ctx}: {method} {path}"),
                st,
                &resp,
                401,
                16,
                "UNAUTHENTICATED",
            );
        }
        // A garbage token is no better.
        let (st, resp) = s.call_as("not.a.token", Method::GET, &format!("{V2}/{x}"), None).await;
        assert_error(&ctx, st, &resp, 401, 16, "UNAUTHENTICATED");

        // Nothing changed.
        let (_, got) = get(&s, &s.token, &x).await;
        assert!(got["deleteTime"].is_null(), "{ctx}: {got}");
        assert_eq!(got["events"].as_array().map(Vec::len), Some(1), "{ctx}: {got}");
        assert_eq!(listed(&s, &s.token, "").await.len(), 2, "{ctx}");
    }
}
