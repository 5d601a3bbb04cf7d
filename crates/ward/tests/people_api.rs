//! People over the API: group invites (REST, gRPC at v2 and v2beta1, the
//! `ward iam invites` CLI and `ward auth login --invite-code`), identity
//! providers keeping their client secrets, and the rules of external group
//! mappings; on every backend.
//!
//! - an invite's code is shown once (at create), verifies with the server's
//!   key, names an invite that must still exist and be unexpired, binds the
//!   caller at the invite's group with its role (idempotently), and a
//!   single-use invite is gone after its first use;
//! - an invite for an email needs the caller's verified email from their
//!   login (an in-process [`TestIdp`] on `--dev` servers);
//! - a client secret is never returned and never stored in the clear (the
//!   SQLite files are searched for it); clearing it needs PKCE;
//! - mappings: unique per (provider, group, role), scoped to the provider's
//!   organization, batch-deleted all or nothing within one provider.

mod common;

use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::idp::TestIdp;
use common::people::{
    ID, IDPS, Login, MAPPINGS, RB, Terminal, assert_invalid, browse, create_mapping, create_test_idp, custom_role,
    dev_servers, login, person_uid, role_uid, stored_idp, verified_org,
};
use common::{Bearer, TestServer, assert_error, is_hex, uid};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tonic::transport::Channel;
use ward_core::clock::Clock as _;
use ward_proto::auth::RegistrationRequest;
use ward_proto::auth::auth_client::AuthClient;
use ward_proto::common::UidpFilter;
use ward_proto::iam::v2::group_invites_service_client::GroupInvitesServiceClient;
use ward_proto::iam::v2::identity_provider::Configuration;
use ward_proto::iam::v2::identity_providers_service_client::IdentityProvidersServiceClient;
use ward_proto::iam::v2::{
    CreateGroupInviteRequest, DeleteGroupInviteRequest, GetGroupInviteRequest, GetIdentityProviderRequest, GroupInvite,
    ListGroupInvitesRequest, ListIdentityProvidersRequest,
};
use ward_proto::iam::v2beta1::group_invites_service_client::GroupInvitesServiceClient as BetaGroupInvitesServiceClient;

const INVITES: &str = "/iam/v2/groupInvites";
const REGISTER: &str = "/auth/v1/register";
/// The client secret of the identity providers made here.
const SECRET: &str = "TOPSECRET-123";

// ---------------------------------------------------------------------------
// Servers, roles, groups

/// A workload identity in `group` (not a person): its uid.
async fn workload(s: &TestServer, group: &str, name: &str) -> String {
    let (status, identity) = s
        .post(
            &format!("{ID}/{group}"),
            json!({
                "name": name,
                "claimMatch": { "issuer": "https://ci.example.com", "subject": name },
            }),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "[{}] create identity {name}: {identity}",
        s.backend
    );
    uid(&identity)
}

/// Every binding at exactly `group` (under organization `org`), as the
/// admin sees them: sorted (identity uid, role uid).
async fn bindings_at(s: &TestServer, org: &str, group: &str) -> Vec<(String, String)> {
    let (status, list) = s.get(&format!("{RB}?uidp.descendants_of={org}&page_size=200")).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "[{}] list bindings under {org}: {list}",
        s.backend
    );
    let mut v: Vec<(String, String)> = list["roleBindings"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|x| x["group"]["uid"].as_str() == Some(group))
        .map(|x| {
            (
                x["identity"]["uid"].as_str().unwrap_or_default().to_owned(),
                x["role"]["uid"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    v.sort();
    v
}

/// How many bindings `identity` holds at `group` with `role`.
async fn count_bindings(s: &TestServer, org: &str, group: &str, identity: &str, role: &str) -> usize {
    bindings_at(s, org, group)
        .await
        .iter()
        .filter(|(i, r)| i == identity && r == role)
        .count()
}

// ---------------------------------------------------------------------------
// Error bodies

/// The `type`s of the PreconditionFailure violations of an error body.
fn precondition_kinds(body: &Value) -> Vec<String> {
    body["details"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["@type"] == "type.googleapis.com/google.rpc.PreconditionFailure")
        .flat_map(|d| d["violations"].as_array().cloned().unwrap_or_default())
        .map(|v| v["type"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// A 400 FAILED_PRECONDITION whose violation is of type `kind`.
fn assert_precondition(ctx: &str, status: StatusCode, body: &Value, kind: &str) {
    assert_error(ctx, status, body, 400, 9, "FAILED_PRECONDITION");
    let kinds = precondition_kinds(body);
    assert!(
        kinds.iter().any(|k| k == kind),
        "{ctx}: a {kind} violation in {kinds:?}; body: {body}"
    );
}

fn assert_not_found(ctx: &str, status: StatusCode, body: &Value) {
    assert_error(ctx, status, body, 404, 5, "NOT_FOUND");
}

/// An RFC 3339 timestamp in JSON, as milliseconds since the epoch.
fn millis(ctx: &str, v: &Value) -> i64 {
    let s = v.as_str().unwrap_or_else(|| panic!("{ctx}: not a timestamp: {v}"));
    chrono::DateTime::parse_from_rfc3339(s)
        .unwrap_or_else(|e| panic!("{ctx}: {s} is not RFC 3339: {e}"))
        .timestamp_millis()
}

// ---------------------------------------------------------------------------
// Invites

fn invite_body(role: &str, ttl: &str, single_use: bool) -> Value {
    json!({ "roleUid": role, "ttl": ttl, "singleUse": single_use })
}

/// Creates an invite at `group` with the admin token; panics unless it
/// succeeds with a code. The invite.
async fn create_invite(s: &TestServer, group: &str, body: Value) -> Value {
    let (status, invite) = s.post(&format!("{INVITES}/{group}"), body.clone()).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "[{}] create an invite at {group} with {body}: {invite}",
        s.backend
    );
    code_of(s.backend, &invite);
    invite
}

/// The code of a freshly created invite.
fn code_of(b: &str, invite: &Value) -> String {
    let code = invite["code"].as_str().unwrap_or_default();
    assert!(!code.is_empty(), "[{b}] a created invite carries its code: {invite}");
    assert!(code.contains('.'), "[{b}] a code is payload.mac: {code}");
    code.to_owned()
}

/// Accepts `code` as the holder of `token` ("" for none).
async fn register(s: &TestServer, token: &str, code: &str) -> (StatusCode, Value) {
    s.call_as(token, Method::POST, REGISTER, Some(json!({ "code": code })))
        .await
}

/// Accepts `code` as `identity` (holding `token`); panics unless it binds
/// them at `group`.
async fn register_ok(s: &TestServer, who: &str, identity: &str, token: &str, code: &str, group: &str) {
    let b = s.backend;
    let (status, session) = register(s, token, code).await;
    assert_eq!(status, StatusCode::OK, "[{b}] {who} accepts the invite: {session}");
    assert_eq!(
        session,
        json!({ "identity": identity, "group": group }),
        "[{b}] {who}'s session names them and the invite's group"
    );
}

/// `code` with one character of its MAC (after the '.') changed.
fn tamper_mac(code: &str) -> String {
    let (payload, mac) = code.split_once('.').expect("payload.mac");
    let mut chars: Vec<char> = mac.chars().collect();
    // A middle character: all six of its bits are part of the tag.
    let i = chars.len() / 2;
    chars[i] = if chars[i] == 'A' { 'B' } else { 'A' };
    format!("{payload}.{}", chars.into_iter().collect::<String>())
}

/// `code` with its payload's `role` replaced by `role` and the MAC kept.
fn forge_role(code: &str, role: &str) -> String {
    let (payload, mac) = code.split_once('.').expect("payload.mac");
    let bytes = URL_SAFE_NO_PAD.decode(payload).expect("a base64url payload");
    let mut claims: Value = serde_json::from_slice(&bytes).expect("a JSON payload");
    assert!(claims.get("role").is_some(), "the payload names the role: {claims}");
    claims["role"] = json!(role);
    let forged = serde_json::to_vec(&claims).expect("JSON");
    format!("{}.{mac}", URL_SAFE_NO_PAD.encode(forged))
}

/// The uids of a list of invites (REST).
fn invite_uids(list: &Value) -> Vec<String> {
    let mut v: Vec<String> = list["groupInvites"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|i| i["uid"].as_str().unwrap_or_default().to_owned())
        .collect();
    v.sort();
    v
}

// ---------------------------------------------------------------------------
// Identity providers and mappings

/// An identity provider's create body (issuer https://idp.example.com,
/// secret [`SECRET`]).
fn idp_body(name: &str, default_role: &str) -> Value {
    json!({
        "name": name,
        "defaultRole": default_role,
        "oidc": {
            "issuer": "https://idp.example.com",
            "clientId": "ward",
            "clientSecret": SECRET,
            "groupsClaim": "groups",
        },
    })
}

/// Creates an identity provider at `org` with the admin token: its uid.
async fn create_idp(s: &TestServer, org: &str, name: &str) -> String {
    let (status, created) = s
        .post(&format!("{IDPS}/{org}"), idp_body(name, &role_uid("viewer")))
        .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "[{}] create identity provider {name}: {created}",
        s.backend
    );
    uid(&created)
}

fn contains_bytes(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// The SQLite database files of `s` (the database and its journal files)
/// and every file in its data directory.
fn sqlite_files(s: &TestServer) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(db) = &s.config.database {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let p = PathBuf::from(format!("{db}{suffix}"));
            if p.is_file() {
                v.push(p);
            }
        }
    }
    walk(&s.config.data_dir, &mut v);
    v
}

// ---------------------------------------------------------------------------
// gRPC

async fn channel(s: &TestServer) -> Channel {
    Channel::from_shared(format!("http://{}", s.addr()))
        .expect("valid uri")
        .connect()
        .await
        .unwrap_or_else(|e| panic!("[{}] connect: {e}", s.backend))
}

// ---------------------------------------------------------------------------
// The CLI

/// A finished `ward` run.
#[derive(Debug)]
struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Run {
    fn ok(&self, b: &str, what: &str) -> &str {
        assert!(self.status.success(), "[{b}] `{what}` failed: {self:#?}");
        &self.stdout
    }

    fn json(&self, b: &str, what: &str) -> Value {
        let out = self.ok(b, what);
        serde_json::from_str(out).unwrap_or_else(|e| panic!("[{b}] `{what}` printed non-JSON ({e}): {out}"))
    }

    fn failed(&self, b: &str, what: &str) -> &str {
        assert!(!self.status.success(), "[{b}] `{what}` should have failed: {self:#?}");
        &self.stderr
    }
}

/// `ward <args>` against `s` with `token`.
async fn ward(s: &TestServer, token: &str, args: &[&str]) -> Run {
    let out = common::ward_cli(s, token, args).await;
    Run {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `ward auth login --no-browser --idp <idp_id> --invite-code <code>` in a
/// fresh terminal, the browser played over HTTP as `username`: its exit
/// status and transcript.
async fn cli_login(s: &TestServer, idp: &TestIdp, idp_id: &str, username: &str, code: &str) -> (ExitStatus, String) {
    let b = s.backend;
    let term = Terminal::new();
    let mut login = Login::spawn(term.command(
        s,
        &["auth", "login", "--no-browser", "--idp", idp_id, "--invite-code", code],
    ));
    let url = login.url().await;
    let r = match browse(&url, idp, username, &[]).await {
        Ok(r) => r,
        Err(e) => panic!("[{b}] browsing {url} as {username}: {e}\nward:\n{}", login.kill().await),
    };
    assert!(
        r.status.is_success() || r.status.is_redirection(),
        "[{b}] the CLI's loopback answers the browser: {r:?}"
    );
    login.finish().await
}

// ---------------------------------------------------------------------------
// 1. Invites over REST

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invites_over_rest() {
    for s in common::servers().await {
        invites_over_rest_on(&s).await;
    }
}

async fn invites_over_rest_on(s: &TestServer) {
    let b = s.backend;
    let viewer = role_uid("viewer");
    let org = uid(&s.create_group(None, "acme").await);
    let group = uid(&s.create_group(Some(&org), "team").await);

    // Create: the code once, the key id, the expiry, the hydrated role.
    let before = s.clock.now_millis();
    let invite = create_invite(s, &group, invite_body(&viewer, "3600s", true)).await;
    let after = s.clock.now_millis();
    let code = code_of(b, &invite);
    let invite_uid = uid(&invite);
    assert!(
        invite_uid.starts_with(&format!("{group}/")),
        "[{b}] an invite lives under its group: {invite}"
    );
    assert_eq!(invite["roleUid"], viewer.as_str(), "[{b}] {invite}");
    assert_eq!(
        invite["role"]["uid"],
        viewer.as_str(),
        "[{b}] the role is hydrated: {invite}"
    );
    assert_eq!(invite["role"]["name"], "viewer", "[{b}] the role is hydrated: {invite}");
    assert!(
        invite["role"]["capabilities"].as_array().is_some_and(|c| !c.is_empty()),
        "[{b}] the hydrated role lists its capabilities: {invite}"
    );
    assert_eq!(invite["singleUse"], true, "[{b}] {invite}");
    assert_eq!(invite["email"], "", "[{b}] {invite}");
    assert!(invite.get("ttl").is_none(), "[{b}] ttl is input only: {invite}");
    let key_id = invite["keyId"].as_str().unwrap_or_default().to_owned();
    assert!(is_hex(&key_id, 16), "[{b}] a key id of 16 hex digits: {invite}");
    let exp = millis(b, &invite["expirationTime"]);
    assert!(
        exp >= before + 3_600_000 - 1_000 && exp <= after + 3_600_000 + 1_000,
        "[{b}] expires an hour after its creation ({before}..{after}): {invite}"
    );
    assert!(invite["createTime"].is_string(), "[{b}] {invite}");

    // Get and list: never the code.
    let (status, got) = s.get(&format!("{INVITES}/{invite_uid}")).await;
    assert_eq!(status, StatusCode::OK, "[{b}] get the invite: {got}");
    assert_eq!(
        got["code"].as_str().unwrap_or_default(),
        "",
        "[{b}] no code on get: {got}"
    );
    assert!(!got.to_string().contains(&code), "[{b}] no code on get: {got}");
    assert_eq!(got["keyId"], key_id.as_str(), "[{b}] {got}");
    assert_eq!(got["role"]["name"], "viewer", "[{b}] {got}");
    assert_eq!(got["expirationTime"], invite["expirationTime"], "[{b}] {got}");
    assert!(got.get("ttl").is_none(), "[{b}] {got}");

    let (status, list) = s.get(&format!("{INVITES}?uidp.children_of={group}")).await;
    assert_eq!(status, StatusCode::OK, "[{b}] list the group's invites: {list}");
    assert_eq!(invite_uids(&list), vec![invite_uid.clone()], "[{b}] {list}");
    assert!(!list.to_string().contains(&code), "[{b}] no code in a list: {list}");
    for i in list["groupInvites"].as_array().into_iter().flatten() {
        assert_eq!(
            i["code"].as_str().unwrap_or_default(),
            "",
            "[{b}] no code in a list: {i}"
        );
    }
    let (status, list) = s.get(&format!("{INVITES}?key_id={key_id}")).await;
    assert_eq!(status, StatusCode::OK, "[{b}] list by key id: {list}");
    assert_eq!(
        invite_uids(&list),
        vec![invite_uid.clone()],
        "[{b}] the key id finds exactly its invite: {list}"
    );
    let other_key = if key_id == "0123456789abcdef" {
        "fedcba9876543210"
    } else {
        "0123456789abcdef"
    };
    let (status, list) = s.get(&format!("{INVITES}?key_id={other_key}")).await;
    assert_eq!(status, StatusCode::OK, "[{b}] list by another key id: {list}");
    assert!(
        invite_uids(&list).is_empty(),
        "[{b}] another key id finds nothing: {list}"
    );

    // A person with no bindings accepts and can then see the group.
    let (bob, bob_token) = common::person(s, "bob", &[]).await;
    let (status, body) = s
        .call_as(&bob_token, Method::GET, &format!("/iam/v2/groups/{group}"), None)
        .await;
    assert_not_found(&format!("{b}: bob sees the group before accepting"), status, &body);
    register_ok(s, "bob", &bob, &bob_token, &code, &group).await;
    assert_eq!(
        bindings_at(s, &org, &group).await,
        vec![(bob.clone(), viewer.clone())],
        "[{b}] bob is bound at the group with the invite's role"
    );
    let (status, body) = s
        .call_as(&bob_token, Method::GET, &format!("/iam/v2/groups/{group}"), None)
        .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "[{b}] bob, now a viewer, sees the group: {body}"
    );
    assert_eq!(body["uid"], group.as_str(), "[{b}] {body}");

    // Single use: gone, and its code with it.
    let (status, body) = s.get(&format!("{INVITES}/{invite_uid}")).await;
    assert_not_found(&format!("{b}: the single-use invite after its use"), status, &body);
    let (_, carol_token) = common::person(s, "carol", &[]).await;
    let (status, body) = register(s, &carol_token, &code).await;
    assert_precondition(&format!("{b}: a used single-use code"), status, &body, "INVITE_GONE");
    let (status, body) = register(s, &bob_token, &code).await;
    assert_precondition(
        &format!("{b}: the used code again by its user"),
        status,
        &body,
        "INVITE_GONE",
    );
    assert_eq!(
        bindings_at(s, &org, &group).await,
        vec![(bob.clone(), viewer.clone())],
        "[{b}] nobody else joined with the used code"
    );

    // Codes that do not verify: INVALID_ARGUMENT naming the code, before
    // anything is looked up.
    let live = create_invite(s, &group, invite_body(&viewer, "3600s", false)).await;
    let live_code = code_of(b, &live);
    let owner = role_uid("owner");
    let bad_codes = [
        ("a tampered MAC", tamper_mac(&live_code)),
        ("a payload naming another role", forge_role(&live_code, &owner)),
        ("garbage", "garbage".to_owned()),
        ("two garbage halves", "abc.def".to_owned()),
        ("not base64", "!!!!.????".to_owned()),
        ("empty", String::new()),
        ("far too long", format!("{}.{}", "A".repeat(4000), "B".repeat(100))),
    ];
    for (case, bad) in &bad_codes {
        let (status, body) = register(s, &carol_token, bad).await;
        assert_invalid(&format!("{b}: {case}"), status, &body, "code");
    }
    assert!(
        bindings_at(s, &org, &group).await.iter().all(|(i, _)| *i == bob),
        "[{b}] no bad code bound anyone"
    );

    // Registering needs a caller.
    let (status, body) = register(s, "", &live_code).await;
    assert_error(
        &format!("{b}: register without a token"),
        status,
        &body,
        401,
        16,
        "UNAUTHENTICATED",
    );
    let (status, body) = s
        .call_as(
            "not-a-token",
            Method::POST,
            REGISTER,
            Some(json!({ "code": live_code })),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "[{b}] register with a bad token: {body}"
    );

    // Multi-use: two people; the same person twice is one binding; the
    // invite stays.
    let live_uid = uid(&live);
    let (dave, dave_token) = common::person(s, "dave", &[]).await;
    let (erin, erin_token) = common::person(s, "erin", &[]).await;
    register_ok(s, "dave", &dave, &dave_token, &live_code, &group).await;
    register_ok(s, "erin", &erin, &erin_token, &live_code, &group).await;
    register_ok(s, "erin again", &erin, &erin_token, &live_code, &group).await;
    assert_eq!(
        count_bindings(s, &org, &group, &erin, &viewer).await,
        1,
        "[{b}] accepting twice binds once: {:?}",
        bindings_at(s, &org, &group).await
    );
    assert_eq!(count_bindings(s, &org, &group, &dave, &viewer).await, 1, "[{b}]");
    let (status, body) = s.get(&format!("{INVITES}/{live_uid}")).await;
    assert_eq!(status, StatusCode::OK, "[{b}] a multi-use invite stays: {body}");

    // Someone already bound with the role accepting a single-use invite:
    // no second binding, and the invite is still used up.
    let again = create_invite(s, &group, invite_body(&viewer, "3600s", true)).await;
    register_ok(
        s,
        "dave (already a viewer)",
        &dave,
        &dave_token,
        &code_of(b, &again),
        &group,
    )
    .await;
    assert_eq!(count_bindings(s, &org, &group, &dave, &viewer).await, 1, "[{b}]");
    let (status, body) = s.get(&format!("{INVITES}/{}", uid(&again))).await;
    assert_not_found(&format!("{b}: a single-use invite used by a member"), status, &body);

    // A deleted invite's code stops working.
    let doomed = create_invite(s, &group, invite_body(&viewer, "3600s", false)).await;
    let doomed_uid = uid(&doomed);
    let (status, body) = s.delete(&format!("{INVITES}/{doomed_uid}")).await;
    assert_eq!(status, StatusCode::OK, "[{b}] delete the invite: {body}");
    let (status, body) = s.get(&format!("{INVITES}/{doomed_uid}")).await;
    assert_not_found(&format!("{b}: a deleted invite"), status, &body);
    let (status, body) = s.delete(&format!("{INVITES}/{doomed_uid}")).await;
    assert_not_found(&format!("{b}: deleting it again"), status, &body);
    let (frank, frank_token) = common::person(s, "frank", &[]).await;
    let (status, body) = register(s, &frank_token, &code_of(b, &doomed)).await;
    assert_precondition(&format!("{b}: a deleted invite's code"), status, &body, "INVITE_GONE");

    // Validation: ttl, email, role.
    let org2 = uid(&s.create_group(None, "globex").await);
    let foreign_role = custom_role(s, &org2, "globex-lister", &["CAP_IAM_GROUPS_LIST"]).await;
    let path = format!("{INVITES}/{group}");
    for (case, body, field) in [
        ("no ttl", json!({ "roleUid": viewer }), "ttl"),
        ("a ttl of 0s", invite_body(&viewer, "0s", false), "ttl"),
        ("a negative ttl", invite_body(&viewer, "-60s", false), "ttl"),
        ("a ttl over 90 days", invite_body(&viewer, "7776001s", false), "ttl"),
        ("no role", json!({ "ttl": "3600s" }), "role_uid"),
        (
            "a role of another organization",
            invite_body(&foreign_role, "3600s", false),
            "role_uid",
        ),
        (
            "a malformed email",
            json!({ "roleUid": viewer, "ttl": "3600s", "email": "not-an-email" }),
            "email",
        ),
    ] {
        let (status, resp) = s.post(&path, body).await;
        assert_invalid(&format!("{b}: an invite with {case}"), status, &resp, field);
    }
    let (status, body) = s.post(&path, invite_body(&viewer, "7776000s", false)).await;
    assert_eq!(status, StatusCode::OK, "[{b}] a ttl of exactly 90 days: {body}");

    // Authorization: a viewer may not invite; a group's owner may, there only.
    let (_, vic_token) = common::person(s, "vic", &[(org.as_str(), "viewer")]).await;
    let (status, body) = s
        .call_as(
            &vic_token,
            Method::POST,
            &path,
            Some(invite_body(&viewer, "3600s", false)),
        )
        .await;
    assert!(
        matches!(status.as_u16(), 403 | 404),
        "[{b}] a viewer creates an invite: {status} {body}"
    );
    let (_, olga_token) = common::person(s, "olga", &[(group.as_str(), "owner")]).await;
    let (status, body) = s
        .call_as(
            &olga_token,
            Method::POST,
            &path,
            Some(invite_body(&viewer, "3600s", false)),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "[{b}] the group's owner invites to it: {body}");
    let (status, body) = s
        .call_as(
            &olga_token,
            Method::POST,
            &format!("{INVITES}/{org}"),
            Some(invite_body(&viewer, "3600s", false)),
        )
        .await;
    assert!(
        matches!(status.as_u16(), 403 | 404),
        "[{b}] the group's owner invites to the organization above it: {status} {body}"
    );

    // Expired: the clock moves past a one-second invite.
    let brief = create_invite(s, &group, invite_body(&viewer, "1s", false)).await;
    s.clock.advance_millis(2_500);
    let (status, body) = register(s, &frank_token, &code_of(b, &brief)).await;
    assert_precondition(&format!("{b}: an expired invite"), status, &body, "INVITE_EXPIRED");
    assert_eq!(
        count_bindings(s, &org, &group, &frank, &viewer).await,
        0,
        "[{b}] frank never joined"
    );
}

/// An invite binds its acceptor like a role binding would: a workload
/// identity of another organization cannot be bound in this one (role
/// bindings refuse that: identities in groups are bound only in their own
/// organization), so it cannot join through an invite either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invites_do_not_bind_other_organizations_workloads() {
    for s in common::servers().await {
        let b = s.backend;
        let viewer = role_uid("viewer");
        let org = uid(&s.create_group(None, "acme").await);
        let group = uid(&s.create_group(Some(&org), "team").await);
        let org2 = uid(&s.create_group(None, "globex").await);
        let ci = workload(&s, &org2, "ci").await;

        // The rule, as role bindings apply it.
        let (status, body) = s
            .post(
                &format!("{RB}/{group}"),
                json!({ "identityUid": ci, "roleUid": viewer }),
            )
            .await;
        assert_invalid(
            &format!("{b}: binding another organization's workload"),
            status,
            &body,
            "identity_uid",
        );

        let invite = create_invite(&s, &group, invite_body(&viewer, "3600s", false)).await;
        let ci_token = common::mint(&s, &ci);
        let (status, body) = register(&s, &ci_token, &code_of(b, &invite)).await;
        assert!(
            matches!(status.as_u16(), 400 | 403),
            "[{b}] another organization's workload accepts an invite: {status} {body}"
        );
        assert_eq!(
            count_bindings(&s, &org, &group, &ci, &viewer).await,
            0,
            "[{b}] another organization's workload is not bound: {:?}",
            bindings_at(&s, &org, &group).await
        );
    }
}

// ---------------------------------------------------------------------------
// 2. Invites for an email

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invite_email_must_match() {
    for s in dev_servers().await {
        let b = s.backend;
        let idp = TestIdp::start().await;
        let org = verified_org(&s, "acme").await;
        let team = uid(&s.create_group(Some(&org), "team").await);
        let idp_uid = create_test_idp(&s, &idp, &org, &role_uid("viewer")).await;
        let editor = role_uid("editor");

        let invite = create_invite(
            &s,
            &team,
            json!({ "roleUid": editor, "ttl": "3600s", "singleUse": true, "email": "alice@example.com" }),
        )
        .await;
        assert_eq!(invite["email"], "alice@example.com", "[{b}] {invite}");
        let code = code_of(b, &invite);
        let invite_uid = uid(&invite);

        // Bob (bob@example.com, verified) is refused, and uses nothing up.
        let (bob, bob_token) = login(&s, &idp, &idp_uid, "bob", &[]).await;
        let (status, body) = register(&s, &bob_token, &code).await;
        assert_error(
            &format!("{b}: bob accepts alice's invite"),
            status,
            &body,
            403,
            7,
            "PERMISSION_DENIED",
        );
        // A root identity with no login behind it has no verified email.
        let (nobody, nobody_token) = common::person(&s, "no-email", &[]).await;
        let (status, body) = register(&s, &nobody_token, &code).await;
        assert_error(
            &format!("{b}: an identity without an email accepts alice's invite"),
            status,
            &body,
            403,
            7,
            "PERMISSION_DENIED",
        );
        let (status, body) = s.get(&format!("{INVITES}/{invite_uid}")).await;
        assert_eq!(
            status,
            StatusCode::OK,
            "[{b}] refusals do not use up a single-use invite: {body}"
        );
        let bound = bindings_at(&s, &org, &team).await;
        assert!(
            !bound.iter().any(|(i, _)| *i == bob || *i == nobody),
            "[{b}] nobody refused was bound: {bound:?}"
        );

        // Until the organization owns example.com, no provider's word on an
        // email is trusted, not even its own provider's.
        let (_, alice_token) = login(&s, &idp, &idp_uid, "alice", &[]).await;
        let (status, body) = register(&s, &alice_token, &code).await;
        assert_error(
            &format!("{b}: alice before example.com is verified"),
            status,
            &body,
            403,
            7,
            "PERMISSION_DENIED",
        );
        ward_server::verify_org(&s.config, &org, &["example.com".to_owned()])
            .await
            .expect("verify-org");
        // Another organization's provider claiming alice's email is not trusted.
        let evil_idp = TestIdp::start().await;
        let evil = verified_org(&s, "evil").await;
        let evil_idp_uid = create_test_idp(&s, &evil_idp, &evil, &role_uid("viewer")).await;
        let (_, mallory_token) = login(&s, &evil_idp, &evil_idp_uid, "alice", &[]).await;
        let (status, body) = register(&s, &mallory_token, &code).await;
        assert_error(
            &format!("{b}: another organization's provider vouching for alice"),
            status,
            &body,
            403,
            7,
            "PERMISSION_DENIED",
        );

        // Alice, through her organization's provider, is let in.
        let (alice, alice_token) = login(&s, &idp, &idp_uid, "alice", &[]).await;
        register_ok(&s, "alice", &alice, &alice_token, &code, &team).await;
        assert_eq!(
            bindings_at(&s, &org, &team).await,
            vec![(alice.clone(), editor.clone())],
            "[{b}] alice is bound at the team with the invite's role"
        );
        let (status, body) = s.get(&format!("{INVITES}/{invite_uid}")).await;
        assert_not_found(&format!("{b}: alice's single-use invite after use"), status, &body);

        // Emails compare without regard to ASCII case.
        let invite = create_invite(
            &s,
            &team,
            json!({ "roleUid": editor, "ttl": "3600s", "email": "Carol@Example.COM" }),
        )
        .await;
        let (carol, carol_token) = login(&s, &idp, &idp_uid, "carol", &[]).await;
        register_ok(&s, "carol", &carol, &carol_token, &code_of(b, &invite), &team).await;
        let (status, body) = register(&s, &bob_token, &code_of(b, &invite)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "[{b}] bob on carol's invite: {body}");
    }
}

// ---------------------------------------------------------------------------
// 3. Invites over gRPC

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invites_over_grpc() {
    for s in common::servers().await {
        invites_over_grpc_on(&s).await;
    }
}

async fn invites_over_grpc_on(s: &TestServer) {
    let b = s.backend;
    let viewer = role_uid("viewer");
    let org = uid(&s.create_group(None, "acme").await);
    let group = uid(&s.create_group(Some(&org), "team").await);
    let ch = channel(s).await;
    let mut invites = GroupInvitesServiceClient::with_interceptor(ch.clone(), Bearer(s.token.clone()));

    let before = s.clock.now_millis();
    let created = invites
        .create_group_invite(CreateGroupInviteRequest {
            parent: group.clone(),
            group_invite: Some(GroupInvite {
                role_uid: viewer.clone(),
                ttl: Some(pbjson_types::Duration {
                    seconds: 3600,
                    nanos: 0,
                }),
                single_use: false,
                ..Default::default()
            }),
        })
        .await
        .unwrap_or_else(|e| panic!("[{b}] gRPC create invite: {e:?}"))
        .into_inner();
    assert!(!created.code.is_empty(), "[{b}] the code at create: {created:?}");
    assert!(created.ttl.is_none(), "[{b}] ttl is input only: {created:?}");
    assert!(created.uid.starts_with(&format!("{group}/")), "[{b}] {created:?}");
    assert!(is_hex(&created.key_id, 16), "[{b}] {created:?}");
    assert_eq!(
        created.role.as_ref().map(|r| r.name.as_str()),
        Some("viewer"),
        "[{b}] the role is hydrated: {created:?}"
    );
    let exp = created.expiration_time.expect("an expiration time").to_millis();
    assert!(
        (exp - (before + 3_600_000)).abs() < 60_000,
        "[{b}] expires in an hour: {created:?}"
    );

    let got = invites
        .get_group_invite(GetGroupInviteRequest {
            uid: created.uid.clone(),
        })
        .await
        .unwrap_or_else(|e| panic!("[{b}] gRPC get invite: {e:?}"))
        .into_inner();
    assert_eq!(got.code, "", "[{b}] no code on get: {got:?}");
    assert_eq!(got.key_id, created.key_id, "[{b}]");
    assert_eq!(got.role_uid, viewer, "[{b}]");

    let list = invites
        .list_group_invites(ListGroupInvitesRequest {
            uidp: Some(UidpFilter {
                children_of: group.clone(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("[{b}] gRPC list invites: {e:?}"))
        .into_inner();
    let uids: Vec<&str> = list.group_invites.iter().map(|i| i.uid.as_str()).collect();
    assert_eq!(uids, vec![created.uid.as_str()], "[{b}] {list:?}");
    assert!(
        list.group_invites.iter().all(|i| i.code.is_empty()),
        "[{b}] no code in a list: {list:?}"
    );
    let by_key = invites
        .list_group_invites(ListGroupInvitesRequest {
            key_id: created.key_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("[{b}] gRPC list by key id: {e:?}"))
        .into_inner();
    let uids: Vec<&str> = by_key.group_invites.iter().map(|i| i.uid.as_str()).collect();
    assert_eq!(uids, vec![created.uid.as_str()], "[{b}] by key id: {by_key:?}");

    // ttl required and in range.
    for (case, ttl) in [
        ("no ttl", None),
        ("a zero ttl", Some(pbjson_types::Duration { seconds: 0, nanos: 0 })),
        (
            "a ttl over 90 days",
            Some(pbjson_types::Duration {
                seconds: 90 * 24 * 3600 + 1,
                nanos: 0,
            }),
        ),
    ] {
        let err = invites
            .create_group_invite(CreateGroupInviteRequest {
                parent: group.clone(),
                group_invite: Some(GroupInvite {
                    role_uid: viewer.clone(),
                    ttl,
                    ..Default::default()
                }),
            })
            .await
            .expect_err("refused");
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "[{b}] {case}: {err:?}");
        assert!(err.message().contains("ttl"), "[{b}] {case} names ttl: {err:?}");
    }

    // Registration over gRPC binds the caller, whatever identity_id says.
    let (bob, bob_token) = common::person(s, "bob", &[]).await;
    let (carol, carol_token) = common::person(s, "carol", &[]).await;
    let mut auth = AuthClient::with_interceptor(ch.clone(), Bearer(bob_token.clone()));
    let session = auth
        .register(RegistrationRequest {
            code: created.code.clone(),
            identity_id: String::new(),
        })
        .await
        .unwrap_or_else(|e| panic!("[{b}] gRPC register as bob: {e:?}"))
        .into_inner();
    assert_eq!(session.identity, bob, "[{b}] {session:?}");
    assert_eq!(session.group, group, "[{b}] {session:?}");
    let mut auth_carol = AuthClient::with_interceptor(ch.clone(), Bearer(carol_token.clone()));
    let session = auth_carol
        .register(RegistrationRequest {
            code: created.code.clone(),
            identity_id: bob.clone(),
        })
        .await
        .unwrap_or_else(|e| panic!("[{b}] gRPC register as carol: {e:?}"))
        .into_inner();
    assert_eq!(
        session.identity, carol,
        "[{b}] identity_id is ignored: the caller joins: {session:?}"
    );
    let mut bound = vec![(bob.clone(), viewer.clone()), (carol.clone(), viewer.clone())];
    bound.sort();
    assert_eq!(bindings_at(s, &org, &group).await, bound, "[{b}]");

    let err = auth
        .register(RegistrationRequest {
            code: tamper_mac(&created.code),
            identity_id: String::new(),
        })
        .await
        .expect_err("a tampered code");
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "[{b}] {err:?}");
    let err = AuthClient::new(ch.clone())
        .register(RegistrationRequest {
            code: created.code.clone(),
            identity_id: String::new(),
        })
        .await
        .expect_err("no token");
    assert_eq!(err.code(), tonic::Code::Unauthenticated, "[{b}] {err:?}");

    // The same invite through the v2beta1 service.
    let mut beta = BetaGroupInvitesServiceClient::with_interceptor(ch.clone(), Bearer(s.token.clone()));
    let list = beta
        .list_group_invites(ListGroupInvitesRequest {
            uidp: Some(UidpFilter {
                children_of: group.clone(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("[{b}] v2beta1 list invites: {e:?}"))
        .into_inner();
    let uids: Vec<&str> = list.group_invites.iter().map(|i| i.uid.as_str()).collect();
    assert_eq!(uids, vec![created.uid.as_str()], "[{b}] v2beta1: {list:?}");
    let got = beta
        .get_group_invite(GetGroupInviteRequest {
            uid: created.uid.clone(),
        })
        .await
        .unwrap_or_else(|e| panic!("[{b}] v2beta1 get invite: {e:?}"))
        .into_inner();
    assert_eq!(got.key_id, created.key_id, "[{b}] v2beta1");
    assert_eq!(got.code, "", "[{b}] v2beta1: no code");

    // Delete: gone, and its code refused.
    invites
        .delete_group_invite(DeleteGroupInviteRequest {
            uid: created.uid.clone(),
        })
        .await
        .unwrap_or_else(|e| panic!("[{b}] gRPC delete invite: {e:?}"));
    let err = invites
        .get_group_invite(GetGroupInviteRequest {
            uid: created.uid.clone(),
        })
        .await
        .expect_err("deleted");
    assert_eq!(err.code(), tonic::Code::NotFound, "[{b}] {err:?}");
    let (_, dave_token) = common::person(s, "dave", &[]).await;
    let err = AuthClient::with_interceptor(ch.clone(), Bearer(dave_token))
        .register(RegistrationRequest {
            code: created.code.clone(),
            identity_id: String::new(),
        })
        .await
        .expect_err("a deleted invite's code");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "[{b}] {err:?}");
}

// ---------------------------------------------------------------------------
// 4. Invites with the CLI

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invites_over_the_cli() {
    for s in common::servers().await {
        invites_over_the_cli_on(&s).await;
    }
}

async fn invites_over_the_cli_on(s: &TestServer) {
    let b = s.backend;
    let admin = s.token.clone();
    let viewer = role_uid("viewer");
    let org = uid(&s.create_group(None, "acme").await);
    let group = uid(&s.create_group(Some(&org), "team").await);

    // Create (table): the code on a line of its own.
    let what = "ward iam invites create --single-use";
    let before = s.clock.now_millis();
    let run = ward(
        s,
        &admin,
        &[
            "iam",
            "invites",
            "create",
            "--group",
            &group,
            "--role",
            "viewer",
            "--ttl",
            "1h",
            "--single-use",
        ],
    )
    .await;
    let out = run.ok(b, what);
    let code = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("Invite code (shown once): "))
        .map(|c| c.trim().to_owned())
        .unwrap_or_else(|| panic!("[{b}] `{what}` shows the code:\n{out}"));
    assert!(code.contains('.'), "[{b}] a code: {code}");

    // List (JSON): the invite, without its code.
    let what = "ward iam invites list -o json";
    let run = ward(s, &admin, &["iam", "invites", "list", "--group", &group, "-o", "json"]).await;
    assert!(
        !run.stdout.contains(&code),
        "[{b}] `{what}` never shows the code:\n{}",
        run.stdout
    );
    let list = run.json(b, what);
    let items = list
        .as_array()
        .unwrap_or_else(|| panic!("[{b}] `{what}` prints an array: {list}"));
    assert_eq!(items.len(), 1, "[{b}] one invite: {list}");
    let invite = &items[0];
    let invite_uid = uid(invite);
    assert!(invite_uid.starts_with(&format!("{group}/")), "[{b}] {invite}");
    assert_eq!(invite["code"].as_str().unwrap_or_default(), "", "[{b}] {invite}");
    assert_eq!(invite["roleUid"], viewer.as_str(), "[{b}] --role viewer: {invite}");
    assert_eq!(invite["role"]["name"], "viewer", "[{b}] {invite}");
    assert_eq!(invite["singleUse"], true, "[{b}] --single-use: {invite}");
    let exp = millis(b, &invite["expirationTime"]);
    assert!((exp - (before + 3_600_000)).abs() < 60_000, "[{b}] --ttl 1h: {invite}");
    let key_id = invite["keyId"].as_str().unwrap_or_default().to_owned();
    let run = ward(
        s,
        &admin,
        &["iam", "invites", "list", "--key-id", &key_id, "-o", "json"],
    )
    .await;
    let by_key = run.json(b, "ward iam invites list --key-id");
    assert_eq!(
        by_key.as_array().map(|a| a.len()),
        Some(1),
        "[{b}] --key-id finds the invite: {by_key}"
    );
    assert_eq!(by_key[0]["uid"], invite_uid.as_str(), "[{b}] {by_key}");
    let run = ward(s, &admin, &["iam", "invites", "describe", &invite_uid, "-o", "json"]).await;
    let described = run.json(b, "ward iam invites describe");
    assert_eq!(described["uid"], invite_uid.as_str(), "[{b}] {described}");
    assert_eq!(described["code"].as_str().unwrap_or_default(), "", "[{b}] {described}");

    // Accept as another person.
    let (bob, bob_token) = common::person(s, "bob", &[]).await;
    let what = "ward iam invites accept (bob)";
    let run = ward(s, &bob_token, &["iam", "invites", "accept", &code]).await;
    let out = run.ok(b, what);
    assert!(
        out.contains(&format!("Joined group {group} as {bob}")),
        "[{b}] `{what}` says so:\n{out}"
    );
    assert_eq!(
        bindings_at(s, &org, &group).await,
        vec![(bob.clone(), viewer.clone())],
        "[{b}] bob joined"
    );

    // Used up: describing it is NOT_FOUND; accepting it again fails clearly.
    let run = ward(s, &admin, &["iam", "invites", "describe", &invite_uid]).await;
    let err = run.failed(b, "ward iam invites describe (used)");
    assert!(err.contains("HTTP 404"), "[{b}] describe a used invite:\n{err}");
    let (_, carol_token) = common::person(s, "carol", &[]).await;
    let what = "ward iam invites accept (a used code)";
    let run = ward(s, &carol_token, &["iam", "invites", "accept", &code]).await;
    let err = run.failed(b, what);
    assert!(
        err.contains("used or deleted") && err.contains("HTTP 400"),
        "[{b}] `{what}` explains:\n{err}"
    );
    assert!(
        run.stdout.trim().is_empty(),
        "[{b}] `{what}` prints nothing else:\n{}",
        run.stdout
    );

    // Create (JSON) a multi-use invite, delete it: its code stops working.
    let what = "ward iam invites create -o json";
    let run = ward(
        s,
        &admin,
        &[
            "iam", "invites", "create", "--group", &group, "--role", &viewer, "--ttl", "2h", "-o", "json",
        ],
    )
    .await;
    let created = run.json(b, what);
    let code2 = code_of(b, &created);
    let uid2 = uid(&created);
    assert_eq!(created["singleUse"], false, "[{b}] {created}");
    let what = "ward iam invites delete";
    let run = ward(s, &admin, &["iam", "invites", "delete", &uid2]).await;
    let out = run.ok(b, what);
    assert!(out.contains(&format!("deleted {uid2}")), "[{b}] `{what}`:\n{out}");
    let (status, body) = s.get(&format!("{INVITES}/{uid2}")).await;
    assert_not_found(&format!("{b}: the invite the CLI deleted"), status, &body);
    let what = "ward iam invites accept (a deleted invite's code)";
    let run = ward(s, &carol_token, &["iam", "invites", "accept", &code2]).await;
    let err = run.failed(b, what);
    assert!(err.contains("used or deleted"), "[{b}] `{what}` explains:\n{err}");

    // Bad input.
    let what = "ward iam invites accept (a tampered code)";
    let run = ward(s, &carol_token, &["iam", "invites", "accept", &tamper_mac(&code2)]).await;
    let err = run.failed(b, what);
    assert!(
        err.contains("not valid") && err.contains("HTTP 400"),
        "[{b}] `{what}` explains:\n{err}"
    );
    let what = "ward iam invites create --ttl 0s";
    let run = ward(
        s,
        &admin,
        &[
            "iam", "invites", "create", "--group", &group, "--role", "viewer", "--ttl", "0s",
        ],
    )
    .await;
    let err = run.failed(b, what);
    assert!(err.contains("--ttl"), "[{b}] `{what}` names --ttl:\n{err}");
    let what = "ward iam invites create --ttl 91d";
    let run = ward(
        s,
        &admin,
        &[
            "iam", "invites", "create", "--group", &group, "--role", "viewer", "--ttl", "91d",
        ],
    )
    .await;
    let err = run.failed(b, what);
    assert!(
        err.contains("ttl") && err.contains("HTTP 400"),
        "[{b}] `{what}` relays the server's refusal:\n{err}"
    );
    let (status, list) = s.get(&format!("{INVITES}?uidp.children_of={group}")).await;
    assert_eq!(status, StatusCode::OK, "[{b}] {list}");
    assert!(
        invite_uids(&list).is_empty(),
        "[{b}] refused creates made nothing: {list}"
    );
}

// ---------------------------------------------------------------------------
// 5. Identity providers keep their secrets

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_providers_keep_secrets() {
    for s in common::servers().await {
        identity_providers_keep_secrets_on(&s).await;
    }
}

async fn identity_providers_keep_secrets_on(s: &TestServer) {
    let b = s.backend;
    let viewer = role_uid("viewer");
    let org = uid(&s.create_group(None, "acme").await);
    let a = uid(&s.create_group(Some(&org), "a").await);
    let org2 = uid(&s.create_group(None, "globex").await);

    let (status, created) = s.post(&format!("{IDPS}/{org}"), idp_body("corp", &viewer)).await;
    assert_eq!(status, StatusCode::OK, "[{b}] create the identity provider: {created}");
    assert!(
        !created.to_string().contains("TOPSECRET"),
        "[{b}] the create response keeps the secret: {created}"
    );
    let idp = uid(&created);
    assert!(idp.starts_with(&format!("{org}/")), "[{b}] {created}");
    assert_eq!(created["name"], "corp", "[{b}] {created}");
    assert_eq!(created["defaultRole"], viewer.as_str(), "[{b}] {created}");
    assert_eq!(created["oidc"]["issuer"], "https://idp.example.com", "[{b}] {created}");
    assert_eq!(created["oidc"]["clientId"], "ward", "[{b}] {created}");
    assert_eq!(created["oidc"]["groupsClaim"], "groups", "[{b}] {created}");
    assert_eq!(
        created["oidc"]["clientSecret"].as_str().unwrap_or_default(),
        "",
        "[{b}] {created}"
    );

    let (status, got) = s.get(&format!("{IDPS}/{idp}")).await;
    assert_eq!(status, StatusCode::OK, "[{b}] get: {got}");
    assert!(
        !got.to_string().contains("TOPSECRET"),
        "[{b}] get keeps the secret: {got}"
    );
    assert_eq!(got["oidc"]["issuer"], "https://idp.example.com", "[{b}] {got}");
    let (status, list) = s.get(&format!("{IDPS}?uidp.children_of={org}")).await;
    assert_eq!(status, StatusCode::OK, "[{b}] list: {list}");
    assert!(
        !list.to_string().contains("TOPSECRET"),
        "[{b}] list keeps the secret: {list}"
    );
    assert_eq!(
        list["identityProviders"].as_array().map(|l| l.len()),
        Some(1),
        "[{b}] {list}"
    );

    // Stored sealed.
    let stored = stored_idp(s, &idp).await;
    let sealed = stored
        .client_secret
        .clone()
        .unwrap_or_else(|| panic!("[{b}] a secret is stored: {stored:?}"));
    assert!(
        !contains_bytes(&sealed, SECRET.as_bytes()),
        "[{b}] the stored secret is sealed"
    );
    assert!(
        !stored.oidc.contains("TOPSECRET"),
        "[{b}] the stored oidc holds no secret: {}",
        stored.oidc
    );

    // The organization's owner sees the provider, not the secret.
    let (_, owner) = common::person(s, "owner", &[(org.as_str(), "owner")]).await;
    let (status, got) = s.call_as(&owner, Method::GET, &format!("{IDPS}/{idp}"), None).await;
    assert_eq!(status, StatusCode::OK, "[{b}] the owner gets it: {got}");
    assert!(!got.to_string().contains("TOPSECRET"), "[{b}] {got}");

    // gRPC: the secret is empty there too.
    let ch = channel(s).await;
    let mut idps = IdentityProvidersServiceClient::with_interceptor(ch.clone(), Bearer(s.token.clone()));
    let got = idps
        .get_identity_provider(GetIdentityProviderRequest { uid: idp.clone() })
        .await
        .unwrap_or_else(|e| panic!("[{b}] gRPC get identity provider: {e:?}"))
        .into_inner();
    match &got.configuration {
        Some(Configuration::Oidc(o)) => {
            assert_eq!(o.client_secret, "", "[{b}] gRPC get: {got:?}");
            assert_eq!(o.client_id, "ward", "[{b}] gRPC get: {got:?}");
        }
        other => panic!("[{b}] an OIDC configuration over gRPC: {other:?}"),
    }
    let list = idps
        .list_identity_providers(ListIdentityProvidersRequest {
            uidp: Some(UidpFilter {
                children_of: org.clone(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("[{b}] gRPC list identity providers: {e:?}"))
        .into_inner();
    assert_eq!(list.identity_providers.len(), 1, "[{b}] {list:?}");
    assert!(
        !format!("{list:?}").contains("TOPSECRET"),
        "[{b}] gRPC list keeps the secret: {list:?}"
    );

    // An update that does not name the secret keeps it.
    let (status, patched) = s
        .patch(
            &format!("{IDPS}/{idp}?update_mask=description"),
            json!({ "description": "the corporate SSO" }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "[{b}] patch the description: {patched}");
    assert_eq!(patched["description"], "the corporate SSO", "[{b}] {patched}");
    assert!(!patched.to_string().contains("TOPSECRET"), "[{b}] {patched}");
    assert_eq!(
        stored_idp(s, &idp).await.client_secret.as_deref(),
        Some(sealed.as_slice()),
        "[{b}] the secret is kept as it was"
    );

    // Clearing it makes a public client, which must use PKCE.
    let (status, body) = s
        .patch(
            &format!("{IDPS}/{idp}?update_mask=oidc.client_secret"),
            json!({ "oidc": { "clientSecret": "" } }),
        )
        .await;
    assert_invalid(
        &format!("{b}: clearing the secret without PKCE"),
        status,
        &body,
        "oidc.client_secret",
    );
    assert_eq!(
        stored_idp(s, &idp).await.client_secret.as_deref(),
        Some(sealed.as_slice()),
        "[{b}] a refused update keeps the secret"
    );
    let (status, patched) = s
        .patch(
            &format!("{IDPS}/{idp}?update_mask=oidc.client_secret,oidc.pkce_enabled"),
            json!({ "oidc": { "clientSecret": "", "pkceEnabled": true } }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "[{b}] clear the secret, with PKCE: {patched}");
    assert_eq!(patched["oidc"]["pkceEnabled"], true, "[{b}] {patched}");
    assert_eq!(
        patched["oidc"]["issuer"], "https://idp.example.com",
        "[{b}] the rest of the configuration stays: {patched}"
    );
    assert_eq!(patched["oidc"]["clientId"], "ward", "[{b}] {patched}");
    assert_eq!(
        stored_idp(s, &idp).await.client_secret,
        None,
        "[{b}] the secret is cleared"
    );

    // A new secret is sealed again.
    let (status, patched) = s
        .patch(
            &format!("{IDPS}/{idp}?update_mask=oidc.client_secret"),
            json!({ "oidc": { "clientSecret": "NEWSECRET-456" } }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "[{b}] set a new secret: {patched}");
    assert!(!patched.to_string().contains("NEWSECRET"), "[{b}] {patched}");
    let resealed = stored_idp(s, &idp)
        .await
        .client_secret
        .unwrap_or_else(|| panic!("[{b}] the new secret is stored"));
    assert!(!contains_bytes(&resealed, b"NEWSECRET-456"), "[{b}] sealed");
    assert_ne!(resealed, sealed, "[{b}] a different secret seals differently");

    // Nowhere in SQLite's files.
    if b == "sqlite" {
        let files = sqlite_files(s);
        assert!(
            files.iter().any(|p| p.file_name().is_some_and(|n| n == "ward.db")),
            "[{b}] the database file is among {files:?}"
        );
        let mut seen_issuer = false;
        for f in &files {
            let bytes = std::fs::read(f).unwrap_or_else(|e| panic!("[{b}] read {}: {e}", f.display()));
            for secret in [SECRET, "NEWSECRET-456"] {
                assert!(
                    !contains_bytes(&bytes, secret.as_bytes()),
                    "[{b}] {secret} is written in {}",
                    f.display()
                );
            }
            seen_issuer |= contains_bytes(&bytes, b"https://idp.example.com");
        }
        assert!(
            seen_issuer,
            "[{b}] the search reads the stored providers (their issuer is in {files:?})"
        );
    }

    // Validation.
    let org_role = custom_role(s, &org2, "globex-lister", &["CAP_IAM_GROUPS_LIST"]).await;
    let oidc = |issuer: &str| {
        json!({ "name": "bad", "defaultRole": viewer, "oidc": {
            "issuer": issuer, "clientId": "ward", "clientSecret": SECRET } })
    };
    let at_org = format!("{IDPS}/{org}");
    let cases: Vec<(&str, String, Value, &str)> = vec![
        ("a garbage issuer", at_org.clone(), oidc("not a url"), "oidc.issuer"),
        (
            "an ftp issuer",
            at_org.clone(),
            oidc("ftp://idp.example.com"),
            "oidc.issuer",
        ),
        (
            "an issuer with a query",
            at_org.clone(),
            oidc("https://idp.example.com/?tenant=1"),
            "oidc.issuer",
        ),
        (
            "an issuer with credentials",
            at_org.clone(),
            oidc("https://user:pw@idp.example.com"),
            "oidc.issuer",
        ),
        ("no issuer", at_org.clone(), oidc(""), "oidc.issuer"),
        (
            "no client id",
            at_org.clone(),
            json!({ "name": "bad", "defaultRole": viewer,
                    "oidc": { "issuer": "https://idp.example.com", "clientSecret": SECRET } }),
            "oidc.client_id",
        ),
        (
            "neither a secret nor PKCE",
            at_org.clone(),
            json!({ "name": "bad", "defaultRole": viewer,
                    "oidc": { "issuer": "https://idp.example.com", "clientId": "ward" } }),
            "oidc.client_secret",
        ),
        (
            "no OIDC configuration",
            at_org.clone(),
            json!({ "name": "bad", "defaultRole": viewer }),
            "oidc",
        ),
        (
            "a group that is not an organization",
            format!("{IDPS}/{a}"),
            idp_body("bad", &viewer),
            "parent",
        ),
        (
            "no default role",
            at_org.clone(),
            json!({ "name": "bad",
                    "oidc": { "issuer": "https://idp.example.com", "clientId": "ward", "clientSecret": SECRET } }),
            "default_role",
        ),
        (
            "another organization's role as the default",
            at_org.clone(),
            idp_body("bad", &org_role),
            "default_role",
        ),
    ];
    for (case, path, body, field) in cases {
        let (status, resp) = s.post(&path, body).await;
        assert_invalid(&format!("{b}: an identity provider with {case}"), status, &resp, field);
        assert!(!resp.to_string().contains("TOPSECRET"), "[{b}] {case}: {resp}");
    }
    let (status, list) = s.get(&format!("{IDPS}?uidp.descendants_of={org}")).await;
    assert_eq!(status, StatusCode::OK, "[{b}] {list}");
    assert_eq!(
        list["identityProviders"].as_array().map(|l| l.len()),
        Some(1),
        "[{b}] refused creates made nothing: {list}"
    );

    // Another organization's provider is NOT_FOUND to this one's owner.
    let other = create_idp(s, &org2, "globex-sso").await;
    let (status, body) = s.call_as(&owner, Method::GET, &format!("{IDPS}/{other}"), None).await;
    assert_not_found(&format!("{b}: another organization's provider"), status, &body);
    let (status, body) = s
        .call_as(
            &owner,
            Method::PATCH,
            &format!("{IDPS}/{other}?update_mask=description"),
            Some(json!({ "description": "mine now" })),
        )
        .await;
    assert_not_found(&format!("{b}: updating another organization's provider"), status, &body);
    let (status, body) = s
        .call_as(&owner, Method::DELETE, &format!("{IDPS}/{other}"), None)
        .await;
    assert_not_found(&format!("{b}: deleting another organization's provider"), status, &body);
    let (status, list) = s.call_as(&owner, Method::GET, IDPS, None).await;
    assert_eq!(status, StatusCode::OK, "[{b}] the owner lists providers: {list}");
    let listed: Vec<&str> = list["identityProviders"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["uid"].as_str())
        .collect();
    assert_eq!(
        listed,
        vec![idp.as_str()],
        "[{b}] the owner lists only their own: {list}"
    );

    // An organization with a provider cannot be deleted; deleting the
    // provider deletes its mappings.
    let org3 = uid(&s.create_group(None, "initech").await);
    let idp3 = create_idp(s, &org3, "initech-sso").await;
    let mapping = create_mapping(s, &idp3, json!({ "externalGroupId": "eng", "roleUid": viewer })).await;
    let mapping_uid = uid(&mapping);
    let (status, body) = s.delete(&format!("/iam/v2/groups/{org3}")).await;
    assert_error(
        &format!("{b}: delete an organization with a provider"),
        status,
        &body,
        400,
        9,
        "FAILED_PRECONDITION",
    );
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("identity providers"),
        "[{b}] the refusal names identity providers: {body}"
    );
    let (status, body) = s.delete(&format!("{IDPS}/{idp3}")).await;
    assert_eq!(status, StatusCode::OK, "[{b}] delete the provider: {body}");
    let (status, body) = s.get(&format!("{IDPS}/{idp3}")).await;
    assert_not_found(&format!("{b}: a deleted provider"), status, &body);
    let (status, body) = s.get(&format!("{MAPPINGS}/{mapping_uid}")).await;
    assert_not_found(&format!("{b}: a deleted provider's mapping"), status, &body);
    let (status, body) = s.delete(&format!("/iam/v2/groups/{org3}")).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "[{b}] the organization, now empty, is deleted: {body}"
    );
}

// ---------------------------------------------------------------------------
// 6. Mappings

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mappings_rules() {
    for s in common::servers().await {
        mappings_rules_on(&s).await;
    }
}

async fn mappings_rules_on(s: &TestServer) {
    let b = s.backend;
    let (viewer, editor) = (role_uid("viewer"), role_uid("editor"));
    let org = uid(&s.create_group(None, "acme").await);
    let a = uid(&s.create_group(Some(&org), "a").await);
    let org2 = uid(&s.create_group(None, "globex").await);
    let idp = create_idp(s, &org, "corp").await;
    let idp2 = create_idp(s, &org, "contractors").await;
    let foreign_idp = create_idp(s, &org2, "globex-sso").await;
    let foreign_role = custom_role(s, &org2, "globex-lister", &["CAP_IAM_GROUPS_LIST"]).await;

    let m1 = create_mapping(s, &idp, json!({ "externalGroupId": "eng", "roleUid": viewer })).await;
    let m1_uid = uid(&m1);
    assert!(m1_uid.starts_with(&format!("{idp}/")), "[{b}] {m1}");
    assert_eq!(m1["identityProviderUid"], idp.as_str(), "[{b}] {m1}");
    assert_eq!(m1["externalGroupId"], "eng", "[{b}] {m1}");
    assert_eq!(m1["roleUid"], viewer.as_str(), "[{b}] {m1}");
    assert_eq!(
        m1["scope"],
        org.as_str(),
        "[{b}] the scope defaults to the organization: {m1}"
    );

    // (provider, group, role) is unique.
    let path = format!("{MAPPINGS}/{idp}");
    let (status, body) = s
        .post(&path, json!({ "externalGroupId": "eng", "roleUid": viewer }))
        .await;
    assert_error(
        &format!("{b}: a duplicate mapping"),
        status,
        &body,
        409,
        6,
        "ALREADY_EXISTS",
    );
    let (status, body) = s
        .post(
            &path,
            json!({ "externalGroupId": "eng", "roleUid": viewer, "scope": org }),
        )
        .await;
    assert_error(
        &format!("{b}: a duplicate mapping with the scope spelled out"),
        status,
        &body,
        409,
        6,
        "ALREADY_EXISTS",
    );
    let m2 = create_mapping(s, &idp, json!({ "externalGroupId": "eng", "roleUid": editor })).await;
    let m3 = create_mapping(
        s,
        &idp,
        json!({ "externalGroupId": "ops", "roleUid": viewer, "scope": org }),
    )
    .await;
    assert_eq!(m3["scope"], org.as_str(), "[{b}] {m3}");
    let (m2_uid, m3_uid) = (uid(&m2), uid(&m3));
    // The same group and role at another provider is another mapping.
    let m4 = create_mapping(s, &idp2, json!({ "externalGroupId": "eng", "roleUid": viewer })).await;
    let m4_uid = uid(&m4);
    let foreign = create_mapping(s, &foreign_idp, json!({ "externalGroupId": "eng", "roleUid": viewer })).await;
    let foreign_uid = uid(&foreign);

    // The scope is the organization; the role must apply there.
    for (case, body, field) in [
        (
            "another organization as the scope",
            json!({ "externalGroupId": "qa", "roleUid": viewer, "scope": org2 }),
            "scope",
        ),
        (
            "a group below the organization as the scope",
            json!({ "externalGroupId": "qa", "roleUid": viewer, "scope": a }),
            "scope",
        ),
        (
            "another organization's role",
            json!({ "externalGroupId": "qa", "roleUid": foreign_role }),
            "role_uid",
        ),
        ("no external group", json!({ "roleUid": viewer }), "external_group_id"),
        ("no role", json!({ "externalGroupId": "qa" }), "role_uid"),
    ] {
        let (status, resp) = s.post(&path, body).await;
        assert_invalid(&format!("{b}: a mapping with {case}"), status, &resp, field);
    }

    let (status, list) = s.get(&format!("{MAPPINGS}?identity_provider_uid={idp}")).await;
    assert_eq!(status, StatusCode::OK, "[{b}] list the provider's mappings: {list}");
    let mapping_uids = |list: &Value| -> Vec<String> {
        let mut v: Vec<String> = list["externalGroupRoleMappings"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|m| m["uid"].as_str().unwrap_or_default().to_owned())
            .collect();
        v.sort();
        v
    };
    let mut expected = vec![m1_uid.clone(), m2_uid.clone(), m3_uid.clone()];
    expected.sort();
    assert_eq!(mapping_uids(&list), expected, "[{b}] {list}");

    // Batch delete: all or nothing, within one provider.
    let batch = format!("{MAPPINGS}:batchDelete");
    for (case, names) in [
        ("a mapping of another provider", vec![m3_uid.clone(), m4_uid.clone()]),
        (
            "a mapping of another organization's provider",
            vec![m3_uid.clone(), foreign_uid.clone()],
        ),
        ("no names", vec![]),
        ("the provider itself", vec![idp.clone()]),
    ] {
        let (status, body) = s.post(&batch, json!({ "parent": idp, "names": names })).await;
        assert_invalid(&format!("{b}: batch delete naming {case}"), status, &body, "names");
    }
    for m in [&m1_uid, &m2_uid, &m3_uid, &m4_uid, &foreign_uid] {
        let (status, body) = s.get(&format!("{MAPPINGS}/{m}")).await;
        assert_eq!(
            status,
            StatusCode::OK,
            "[{b}] refused batches delete nothing ({m}): {body}"
        );
    }

    let (status, body) = s
        .post(&batch, json!({ "parent": idp, "names": [m1_uid, m2_uid] }))
        .await;
    assert_eq!(status, StatusCode::OK, "[{b}] batch delete two mappings: {body}");
    assert_eq!(body["parent"], json!(idp), "[{b}] {body}");
    let mut names: Vec<String> = body["externalGroupRoleMappings"]
        .as_array()
        .unwrap_or_else(|| panic!("[{b}] the deleted mappings: {body}"))
        .iter()
        .map(|n| n["uid"].as_str().unwrap_or_default().to_owned())
        .collect();
    names.sort();
    let mut both = vec![m1_uid.clone(), m2_uid.clone()];
    both.sort();
    assert_eq!(names, both, "[{b}] the batch names what it deleted: {body}");
    for m in [&m1_uid, &m2_uid] {
        let (status, body) = s.get(&format!("{MAPPINGS}/{m}")).await;
        assert_not_found(&format!("{b}: a batch-deleted mapping"), status, &body);
    }
    let (status, list) = s.get(&format!("{MAPPINGS}?identity_provider_uid={idp}")).await;
    assert_eq!(status, StatusCode::OK, "[{b}] {list}");
    assert_eq!(
        mapping_uids(&list),
        vec![m3_uid.clone()],
        "[{b}] only ops is left: {list}"
    );

    // Naming one that is already gone: NOT_FOUND, and the rest stays.
    let (status, body) = s
        .post(&batch, json!({ "parent": idp, "names": [m3_uid, m1_uid] }))
        .await;
    assert_not_found(&format!("{b}: batch delete naming a deleted mapping"), status, &body);
    let (status, body) = s.get(&format!("{MAPPINGS}/{m3_uid}")).await;
    assert_eq!(status, StatusCode::OK, "[{b}] all or nothing: {body}");

    // A deleted mapping may be made again.
    create_mapping(s, &idp, json!({ "externalGroupId": "eng", "roleUid": viewer })).await;
}

// ---------------------------------------------------------------------------
// 7. `ward auth login --invite-code`

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_login_with_invite_code() {
    for s in dev_servers().await {
        let b = s.backend;
        let idp = TestIdp::start().await;
        let org = verified_org(&s, "acme").await;
        let team = uid(&s.create_group(Some(&org), "team").await);
        let idp_uid = create_test_idp(&s, &idp, &org, &role_uid("viewer")).await;
        let editor = role_uid("editor");
        let invite = create_invite(&s, &team, invite_body(&editor, "3600s", true)).await;
        let code = code_of(b, &invite);

        let (status, out) = cli_login(&s, &idp, &idp_uid, "carol", &code).await;
        assert!(
            status.success(),
            "[{b}] ward auth login --invite-code: {status}:\n{out}"
        );
        let carol = person_uid(&s, &idp.issuer, "user-carol").await;
        assert!(out.contains(&format!("Logged in as {carol}")), "[{b}] {out}");
        assert!(
            out.contains(&format!("Joined group {team} with the invite")),
            "[{b}] the CLI accepted the invite:\n{out}"
        );
        assert_eq!(
            bindings_at(&s, &org, &team).await,
            vec![(carol.clone(), editor.clone())],
            "[{b}] carol is bound at the invite's group with its role"
        );
        let (status, body) = s.get(&format!("{INVITES}/{}", uid(&invite))).await;
        assert_not_found(&format!("{b}: the single-use invite after the login"), status, &body);

        // The same code again: the login itself works, the invite does not,
        // and the command says so and fails.
        let (status, out) = cli_login(&s, &idp, &idp_uid, "dave", &code).await;
        assert!(!status.success(), "[{b}] a used invite code fails the command:\n{out}");
        let dave = person_uid(&s, &idp.issuer, "user-dave").await;
        assert!(
            out.contains(&format!("Logged in as {dave}")),
            "[{b}] dave is logged in before the invite is tried:\n{out}"
        );
        assert!(out.contains("used or deleted"), "[{b}] the CLI explains:\n{out}");
        assert!(
            !bindings_at(&s, &org, &team).await.iter().any(|(i, _)| *i == dave),
            "[{b}] dave did not join"
        );
    }
}
