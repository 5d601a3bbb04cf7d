//! Regressions for the attack paths and protocol gaps found when IAM was tried
//! as an attacker and as third-party clients would (hardening issue): each
//! test names the rule it protects. Every test runs once per storage backend.
//! Transport-level rules are in `transport.rs`, exchange rules in `sts.rs`.

mod common;

use common::{TestServer, assert_error, enc, servers, uid};
use reqwest::StatusCode;
use serde_json::{Value, json};

const G: &str = "/iam/v2/groups";
const ID: &str = "/iam/v2/identities";
const RB: &str = "/iam/v2/roleBindings";
const ROLES: &str = "/iam/v2/roles";
const IDENTITY_TYPE: &str = "iam.chainguard.dev/Identity";
const ROLE_TYPE: &str = "iam.chainguard.dev/Role";
const ED25519_JWKS: &str =
    r#"{"keys":[{"kty":"OKP","crv":"Ed25519","alg":"EdDSA","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}"#;

fn violations(body: &Value) -> Vec<String> {
    common::field_violations(body).into_iter().map(|(f, _)| f).collect()
}

fn assert_invalid(s: &TestServer, case: &str, status: StatusCode, body: &Value, field: &str) {
    assert_error(s.backend, status, body, 400, 3, "INVALID_ARGUMENT");
    assert!(
        violations(body).iter().any(|f| f == field),
        "[{}] {case}: expected a violation on {field}: {body}",
        s.backend
    );
}

fn assert_not_found(s: &TestServer, case: &str, status: StatusCode, body: &Value, ty: &str) {
    assert_error(s.backend, status, body, 404, 5, "NOT_FOUND");
    let info = body["details"]
        .as_array()
        .and_then(|d| {
            d.iter()
                .find(|d| d["@type"] == "type.googleapis.com/google.rpc.ResourceInfo")
        })
        .unwrap_or_else(|| panic!("[{}] {case}: no ResourceInfo in {body}", s.backend));
    assert_eq!(info["resourceType"], ty, "[{}] {case}: {body}", s.backend);
}

async fn create_identity(s: &TestServer, group: &str, name: &str) -> String {
    let (status, body) = s
        .post(
            &format!("{ID}/{group}"),
            json!({"name": name, "claimMatch": {"issuer": "https://issuer.example.com", "subject": format!("sub-{name}")}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "[{}] create identity {name}: {body}", s.backend);
    uid(&body)
}

async fn builtin(s: &TestServer, name: &str) -> String {
    let (status, list) = s.get(&format!("{ROLES}?uidp.in_root=true&page_size=200")).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    list["roles"]
        .as_array()
        .expect("roles")
        .iter()
        .find(|r| r["name"] == name)
        .map(uid)
        .unwrap_or_else(|| panic!("no built-in role {name}"))
}

async fn bind(s: &TestServer, group: &str, identity: &str, role: &str) -> String {
    let (status, body) = s
        .post(
            &format!("{RB}/{group}"),
            json!({"identityUid": identity, "roleUid": role}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "[{}] bind: {body}", s.backend);
    uid(&body)
}

fn token_for(s: &TestServer, uid: &str) -> String {
    s.ward().tokens.mint(uid).expect("mint")
}

/// An identity bound `role` at `group`, with a token.
async fn member(s: &TestServer, home: &str, group: &str, role: &str, name: &str) -> (String, String) {
    let id = create_identity(s, home, name).await;
    bind(s, group, &id, &builtin(s, role).await).await;
    (id.clone(), token_for(s, &id))
}

/// Rule 1: UIDPs are bounded where they are parsed (32 segments); a huge one
/// costs nothing and never takes the server down, wherever it appears.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_and_huge_uidps_are_refused_cheaply() {
    for s in servers().await {
        let org = uid(&s.create_group(None, "acme").await);
        let (_, viewer) = member(&s, &org, &org, "viewer", "viewer").await;
        let deep = |n: usize| format!("{org}{}", "/0123456789abcdef".repeat(n));
        // 33 segments: one too many, in a path, a filter and a body.
        let (status, body) = s
            .call_as(&viewer, reqwest::Method::GET, &format!("{G}/{}", deep(32)), None)
            .await;
        assert_invalid(&s, "deep path", status, &body, "uid");
        let (status, body) = s.get(&format!("{G}?uidp.ancestors_of={}", enc(&deep(32)))).await;
        assert_invalid(&s, "deep filter", status, &body, "uidp.ancestors_of");
        // 20,000 segments (340 KB) in a body, from a caller with no grants there.
        let huge = deep(20_000);
        let (status, body) = s
            .call_as(
                &viewer,
                reqwest::Method::POST,
                &format!("{RB}/{org}"),
                Some(json!({"identityUid": huge, "roleUid": huge})),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "[{}] {body}", s.backend);
        assert!(
            body.to_string().len() < 20_000,
            "[{}] the error echoes the input",
            s.backend
        );
        // 32 segments is fine (NOT_FOUND: it does not exist).
        let (status, body) = s.get(&format!("{G}/{}", deep(31))).await;
        assert_error(s.backend, status, &body, 404, 5, "NOT_FOUND");
        // Groups nest at most 24 deep.
        let mut parent = org.clone();
        for i in 1..24 {
            parent = uid(&s.create_group(Some(&parent), &format!("level {i}")).await);
        }
        let (status, body) = s.post(&format!("{G}/{parent}"), json!({"name": "too deep"})).await;
        assert_invalid(&s, "nesting", status, &body, "parent");
        let (status, _) = s.get("/healthz").await;
        assert_eq!(status, StatusCode::OK);
    }
}

/// Rule 2: a filter carries at most 1000 ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn id_filters_are_capped() {
    for s in servers().await {
        let org = uid(&s.create_group(None, "acme").await);
        let ids = vec![org.as_str(); 1001].join(",");
        let (status, body) = s.get(&format!("{G}?uidp.ids={ids}")).await;
        assert_invalid(&s, "1001 ids", status, &body, "uidp.ids");
        let ids = vec![org.as_str(); 1000].join(",");
        let (status, body) = s.get(&format!("{G}?uidp.ids={ids}")).await;
        assert_eq!(status, StatusCode::OK, "[{}] {body}", s.backend);
        assert_eq!(body["totalCount"], "1", "[{}] {body}", s.backend);
    }
}

/// Rules 3 and 13: identity bodies are authorized before their patterns are
/// compiled; patterns are bounded in number and size; anchors cannot be
/// escaped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patterns_are_authorized_first_bounded_and_anchored() {
    for s in servers().await {
        let org = uid(&s.create_group(None, "acme").await);
        let other = uid(&s.create_group(None, "other").await);
        let (_, viewer) = member(&s, &org, &org, "viewer", "viewer").await;
        let many: serde_json::Map<String, Value> = (0..33).map(|i| (format!("c{i}"), json!("(a+)+$"))).collect();
        let body = |patterns: Value| json!({"name": "w", "claimMatch": {"issuer": "https://i.example.com", "subjectPattern": "repo:.*", "claimPatterns": patterns}});
        // No grants at all at `other`: NOT_FOUND, before any validation.
        let (status, b) = s
            .call_as(
                &viewer,
                reqwest::Method::POST,
                &format!("{ID}/{other}"),
                Some(body(json!(many))),
            )
            .await;
        assert_error(s.backend, status, &b, 404, 5, "NOT_FOUND");
        // Seen but not allowed: PERMISSION_DENIED, not INVALID_ARGUMENT.
        let (status, b) = s
            .call_as(
                &viewer,
                reqwest::Method::POST,
                &format!("{ID}/{org}"),
                Some(body(json!(many))),
            )
            .await;
        assert_error(s.backend, status, &b, 403, 7, "PERMISSION_DENIED");
        // The admin: too many claims, too many pattern bytes, too long, escaping.
        let (status, b) = s.post(&format!("{ID}/{org}"), body(json!(many))).await;
        assert_invalid(&s, "33 claims", status, &b, "claim_match.claims");
        let big: serde_json::Map<String, Value> = (0..9).map(|i| (format!("c{i}"), json!("a".repeat(1000)))).collect();
        let (status, b) = s.post(&format!("{ID}/{org}"), body(json!(big))).await;
        assert_invalid(&s, "9 KB of patterns", status, &b, "claim_match");
        let (status, b) = s
            .post(&format!("{ID}/{org}"), body(json!({"c": "a".repeat(1025)})))
            .await;
        assert_invalid(&s, "long pattern", status, &b, "claim_match.claim_patterns[c]");
        let escape = json!({"name": "w", "claimMatch": {"issuer": "https://i.example.com", "subjectPattern": "repo:acme/app)|(?:.*"}});
        let (status, b) = s.post(&format!("{ID}/{org}"), escape).await;
        assert_invalid(&s, "escaping pattern", status, &b, "claim_match.subject_pattern");
        let bidi =
            json!({"name": "w", "claimMatch": {"issuer": "https://i.example.com", "subjectPattern": "x\u{202E}y"}});
        let (status, b) = s.post(&format!("{ID}/{org}"), bidi).await;
        assert_invalid(&s, "bidi pattern", status, &b, "claim_match.subject_pattern");
        let (status, b) = s.post(&format!("{ID}/{org}"), body(json!({"c": "a|b"}))).await;
        assert_eq!(status, StatusCode::OK, "[{}] {b}", s.backend);
    }
}

/// Rule 4: uids referenced in a request body resolve through the caller's
/// view, and a binding's identity lives in the binding's organization.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn referenced_uids_resolve_through_the_callers_view() {
    for s in servers().await {
        let a = uid(&s.create_group(None, "a").await);
        let team = uid(&s.create_group(Some(&a), "team").await);
        let b = uid(&s.create_group(None, "b").await);
        let (_, owner_a) = member(&s, &a, &a, "owner", "owner-a").await;
        let (_, team_owner) = member(&s, &team, &team, "owner", "team-owner").await;
        let victim = create_identity(&s, &b, "victim").await;
        let viewer = builtin(&s, "viewer").await;
        let post = |token: &str, group: &str, identity: &str, role: &str| {
            let (token, path) = (token.to_owned(), format!("{RB}/{group}"));
            let body = json!({"identityUid": identity, "roleUid": role});
            let s = &s;
            async move { s.call_as(&token, reqwest::Method::POST, &path, Some(body)).await }
        };
        // Another organization's identity: NOT_FOUND, like one that does not exist.
        let (status, body) = post(&owner_a, &a, &victim, &viewer).await;
        assert_not_found(&s, "foreign identity", status, &body, IDENTITY_TYPE);
        assert!(
            !body.to_string().contains("sub-victim"),
            "[{}] leaked: {body}",
            s.backend
        );
        let missing = format!("{b}/0123456789abcdef");
        let (status, body2) = post(&owner_a, &a, &missing, &viewer).await;
        assert_not_found(&s, "missing identity", status, &body2, IDENTITY_TYPE);
        // The victim was not pinned: its owner can still delete it.
        let (status, body) = s.delete(&format!("{ID}/{victim}")).await;
        assert_eq!(status, StatusCode::OK, "[{}] {body}", s.backend);
        // Even the admin cannot bind another organization's identity.
        let victim = create_identity(&s, &b, "victim2").await;
        let (status, body) = s
            .post(&format!("{RB}/{a}"), json!({"identityUid": victim, "roleUid": viewer}))
            .await;
        assert_invalid(&s, "cross-org binding", status, &body, "identity_uid");
        // An identity above the caller's group is invisible to it.
        let org_level = create_identity(&s, &a, "org-level").await;
        let (status, body) = post(&team_owner, &team, &org_level, &viewer).await;
        assert_not_found(&s, "identity above the caller", status, &body, IDENTITY_TYPE);
        // A custom role of another organization: NOT_FOUND.
        let (status, role_b) = s
            .post(
                &format!("{ROLES}/{b}"),
                json!({"name": "r", "capabilities": ["CAP_IAM_GROUPS_LIST"]}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{role_b}");
        let mine = create_identity(&s, &a, "mine").await;
        let (status, body) = post(&owner_a, &a, &mine, &uid(&role_b)).await;
        assert_not_found(&s, "foreign role", status, &body, ROLE_TYPE);
        let (status, body) = post(&owner_a, &a, &mine, &viewer).await;
        assert_eq!(status, StatusCode::OK, "[{}] {body}", s.backend);
    }
}

/// Rule 5: changing how an identity authenticates needs everything it holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credential_changes_cannot_escalate() {
    for s in servers().await {
        let org = uid(&s.create_group(None, "acme").await);
        let team = uid(&s.create_group(Some(&org), "team").await);
        let (_, team_owner) = member(&s, &team, &team, "owner", "team-owner").await;
        // An identity living in the team that holds owner at the organization.
        let boss = create_identity(&s, &team, "boss").await;
        bind(&s, &org, &boss, &builtin(&s, "owner").await).await;
        let takeover =
            json!({"staticKeys": {"issuer": "https://evil.example.com", "subject": "me", "issuerKeys": ED25519_JWKS}});
        let path = format!("{ID}/{boss}?update_mask=static_keys");
        let (status, body) = s
            .call_as(&team_owner, reqwest::Method::PATCH, &path, Some(takeover.clone()))
            .await;
        assert_error(s.backend, status, &body, 403, 7, "PERMISSION_DENIED");
        let patch = json!({"claimMatch": {"issuer": "https://evil.example.com", "subjectPattern": ".*"}});
        let (status, body) = s
            .call_as(
                &team_owner,
                reqwest::Method::PATCH,
                &format!("{ID}/{boss}"),
                Some(patch),
            )
            .await;
        assert_error(s.backend, status, &body, 403, 7, "PERMISSION_DENIED");
        // Its name is fine to change; and a team-only identity's credentials too.
        let (status, body) = s
            .call_as(
                &team_owner,
                reqwest::Method::PATCH,
                &format!("{ID}/{boss}"),
                Some(json!({"name": "renamed"})),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{}] {body}", s.backend);
        let worker = create_identity(&s, &team, "worker").await;
        bind(&s, &team, &worker, &builtin(&s, "viewer").await).await;
        let (status, body) = s
            .call_as(
                &team_owner,
                reqwest::Method::PATCH,
                &format!("{ID}/{worker}?update_mask=static_keys"),
                Some(takeover),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{}] {body}", s.backend);
    }
}

/// Rules 7, 17 and 25: stored strings are bounded and printable; useless
/// names are refused; static keys are usable and expire within 365 days;
/// awsIdentity and servicePrincipal are refused by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_strings_and_relationships_are_checked() {
    for s in servers().await {
        let org = uid(&s.create_group(None, "acme").await);
        let cm = |iss: &str, sub: &str| json!({"name": "w", "claimMatch": {"issuer": iss, "subject": sub}});
        for (case, body, field) in [
            ("1 MB issuer", cm(&"i".repeat(1_000_000), "s"), "claim_match.issuer"),
            (
                "bidi subject",
                cm("https://i", "repo:a\u{202E}b"),
                "claim_match.subject",
            ),
            (
                "long claim name",
                json!({"name": "w", "claimMatch": {"issuer": "https://i", "subject": "s", "claims": {"x".repeat(129): "v"}}}),
                "claim_match.claims",
            ),
            (
                "dot name",
                json!({"name": ".", "claimMatch": {"issuer": "https://i", "subject": "s"}}),
                "name",
            ),
            (
                "zero-width description",
                json!({"name": "w", "description": "a\u{200B}b", "claimMatch": {"issuer": "https://i", "subject": "s"}}),
                "description",
            ),
            (
                "aws",
                json!({"name": "w", "awsIdentity": {"awsAccount": "123456789012", "arn": "arn:aws:iam::123456789012:role/x"}}),
                "aws_identity",
            ),
            (
                "service principal",
                json!({"name": "w", "servicePrincipal": "SERVICE_PRINCIPAL_COSIGNED"}),
                "service_principal",
            ),
            (
                "HMAC key",
                json!({"name": "w", "staticKeys": {"issuer": "https://i", "subject": "s", "issuerKeys": r#"{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}"#}}),
                "static_keys.issuer_keys",
            ),
            (
                "broken key",
                json!({"name": "w", "staticKeys": {"issuer": "https://i", "subject": "s", "issuerKeys": r#"{"keys":[{"kty":"OKP","crv":"Ed25519","x":"!!"}]}"#}}),
                "static_keys.issuer_keys",
            ),
            (
                "expiry beyond 365 days",
                json!({"name": "w", "staticKeys": {"issuer": "https://i", "subject": "s", "issuerKeys": ED25519_JWKS, "expirationTime": "2999-01-01T00:00:00Z"}}),
                "static_keys.expiration_time",
            ),
        ] {
            let (status, b) = s.post(&format!("{ID}/{org}"), body).await;
            assert_invalid(&s, case, status, &b, field);
        }
        for name in [" ", "..", " lead", "trail "] {
            let (status, b) = s.post(&format!("{G}/{org}"), json!({"name": name})).await;
            assert_invalid(&s, name, status, &b, "name");
        }
        // Static keys without an expiration get the maximum: 365 days.
        let (status, b) = s
            .post(
                &format!("{ID}/{org}"),
                json!({"name": "w", "staticKeys": {"issuer": "https://i", "subject": "s", "issuerKeys": ED25519_JWKS}}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{}] {b}", s.backend);
        let created = chrono::DateTime::parse_from_rfc3339(b["createTime"].as_str().unwrap()).unwrap();
        let expires =
            chrono::DateTime::parse_from_rfc3339(b["staticKeys"]["expirationTime"].as_str().unwrap()).unwrap();
        assert_eq!((expires - created).num_days(), 365, "[{}] {b}", s.backend);
    }
}

/// Rule 10: a narrowed token is narrowed for every call, organization
/// creation included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn narrowed_tokens_cannot_create_organizations() {
    for db in ward_store::testing::backends().await {
        let s = TestServer::start_with(db, |c| c.allow_org_creation = true).await;
        let org = uid(&s.create_group(None, "acme").await);
        let (me, _) = member(&s, &org, &org, "owner", "me").await;
        let mint = |scopes: Option<Vec<String>>, cap: Option<Vec<String>>| {
            let grant = ward_auth::Grant {
                subject: me.clone(),
                audiences: vec![],
                expires_at: None,
                act: None,
                scopes,
                cap,
                access: None,
                roles: None,
            };
            s.ward().tokens.mint_grant(&grant).expect("mint").0
        };
        for (case, token) in [
            ("scoped", mint(Some(vec![org.clone()]), None)),
            (
                "cap without groups.create",
                mint(None, Some(vec!["groups.list".into()])),
            ),
        ] {
            let (status, body) = s
                .call_as(&token, reqwest::Method::POST, G, Some(json!({"name": "new"})))
                .await;
            assert_error(s.backend, status, &body, 403, 7, "PERMISSION_DENIED");
            assert!(body["message"].as_str().unwrap().contains("narrowed"), "{case}: {body}");
        }
        let token = mint(None, Some(vec!["groups.create".into()]));
        let (status, body) = s
            .call_as(&token, reqwest::Method::POST, G, Some(json!({"name": "new"})))
            .await;
        assert_eq!(status, StatusCode::OK, "[{}] {body}", s.backend);
    }
}

/// Rule 24: CreateGroup's parent may be a UIDP, a uid suffix or a group name
/// in the caller's view; ambiguity is a clear error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_group_parent_by_name_or_suffix() {
    for s in servers().await {
        let org = uid(&s.create_group(None, "acme").await);
        let eng = uid(&s.create_group(Some(&org), "engineering").await);
        let other = uid(&s.create_group(None, "other").await);
        s.create_group(Some(&other), "hidden").await;
        let (_, owner) = member(&s, &org, &org, "owner", "owner").await;
        let post = |parent: &str| {
            let path = format!("{G}/{parent}");
            let (owner, s) = (owner.clone(), &s);
            async move {
                s.call_as(&owner, reqwest::Method::POST, &path, Some(json!({"name": "child"})))
                    .await
            }
        };
        let (status, body) = post("engineering").await;
        assert_eq!(status, StatusCode::OK, "[{}] {body}", s.backend);
        assert!(uid(&body).starts_with(&format!("{eng}/")), "{body}");
        let suffix = eng.rsplit('/').next().unwrap();
        let (status, body) = post(suffix).await;
        assert_eq!(status, StatusCode::OK, "[{}] {body}", s.backend);
        assert!(uid(&body).starts_with(&format!("{eng}/")), "{body}");
        // Another organization's group is not found by name.
        let (status, body) = post("hidden").await;
        assert_error(s.backend, status, &body, 404, 5, "NOT_FOUND");
        // Two "child" groups now exist: ambiguous.
        let (status, body) = post("child").await;
        assert_invalid(&s, "ambiguous", status, &body, "parent");
        assert!(body["message"].as_str().unwrap().contains("ambiguous"), "{body}");
        let (status, body) = post("Not A Name!").await;
        assert_invalid(&s, "garbage", status, &body, "parent");
        // Sixteen hex digits are a name too, when no uid ends with them.
        let hexname = uid(&s.create_group(Some(&org), "0123456789abcdef").await);
        let (status, body) = post("0123456789abcdef").await;
        assert_eq!(status, StatusCode::OK, "[{}] {body}", s.backend);
        assert!(uid(&body).starts_with(&format!("{hexname}/")), "{body}");
    }
}

/// Rules 26 and 27: every reference capability is accepted in a custom role;
/// an update mask naming an immutable field says so; `skipped` accumulates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_masks_and_skipped() {
    for s in servers().await {
        let org = uid(&s.create_group(None, "acme").await);
        let (status, role) = s
            .post(
                &format!("{ROLES}/{org}"),
                json!({"name": "puller", "capabilities": ["CAP_REPO_LIST", "CAP_IAM_GROUPS_LIST", "CAP_ADVISORIES_LIST"]}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{}] {role}", s.backend);
        let id = create_identity(&s, &org, "w").await;
        let rb = bind(&s, &org, &id, &uid(&role)).await;
        let other = create_identity(&s, &org, "other").await;
        let (status, body) = s
            .patch(
                &format!("{RB}/{rb}?update_mask=identity_uid"),
                json!({"identityUid": other}),
            )
            .await;
        assert_invalid(&s, "identity_uid mask", status, &body, "update_mask");
        for i in 0..6 {
            s.create_group(Some(&org), &format!("g{i}")).await;
        }
        let (_, p1) = s.get(&format!("{G}?uidp.children_of={org}&page_size=1&skip=1")).await;
        assert_eq!(p1["skipped"], 1, "{p1}");
        let tok = p1["nextPageToken"].as_str().unwrap();
        let (_, p2) = s
            .get(&format!(
                "{G}?uidp.children_of={org}&page_size=1&skip=2&page_token={tok}"
            ))
            .await;
        assert_eq!(p2["skipped"], 3, "[{}] {p2}", s.backend);
    }
}

/// Rule 28: `ward admin token --data-dir D` mints for the server that runs on
/// D, whatever address it listens on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_token_is_for_the_running_server() {
    for s in servers().await {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ward"));
        cmd.args(["admin", "token", "--data-dir"])
            .arg(&s.config.data_dir)
            .args(["--database", s.config.database.as_deref().unwrap()])
            .env_remove("WARD_LISTEN")
            .env_remove("WARD_API_URL")
            .env_remove("WARD_ISSUER_URL");
        let out = cmd.output().await.expect("run ward admin token");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        let (status, body) = s.call_as(&token, reqwest::Method::GET, G, None).await;
        assert_eq!(status, StatusCode::OK, "[{}] {body}", s.backend);
    }
}

/// Rule 22: BatchCreateRoleBindings (at most 25, all or none, AIP-233) and
/// LookupIdentity, over REST and gRPC.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_create_role_bindings_and_lookup_identity() {
    use ward_proto::iam::v2::identities_service_client::IdentitiesServiceClient;
    use ward_proto::iam::v2::role_bindings_service_client::RoleBindingsServiceClient;
    use ward_proto::iam::v2::{
        BatchCreateRoleBindingsRequest, CreateRoleBindingRequest, LookupIdentityRequest, RoleBinding,
    };
    for s in servers().await {
        let b = s.backend;
        let org = uid(&s.create_group(None, "acme").await);
        let viewer = builtin(&s, "viewer").await;
        let owner = builtin(&s, "owner").await;
        let mut ids = Vec::new();
        for name in ["a", "b", "c", "d"] {
            ids.push(create_identity(&s, &org, name).await);
        }
        let [a, bb, c, d] = <[String; 4]>::try_from(ids).expect("four identities");
        let batch = format!("{RB}:batchCreate");
        let (status, body) = s
            .post(
                &batch,
                json!({"parent": org, "roleUid": viewer, "requests": [
                    {"roleBinding": {"identityUid": a}},
                    {"parent": org, "roleBinding": {"identityUid": bb, "roleUid": viewer}},
                ]}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        let got: Vec<&str> = body["roleBindings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|rb| rb["identity"]["uid"].as_str().unwrap())
            .collect();
        assert_eq!(got, vec![a.as_str(), bb.as_str()], "[{b}] in request order: {body}");
        // All or none: the second sub-request names a missing identity.
        let missing = format!("{org}/0123456789abcdef");
        let (status, body) = s
            .post(
                &batch,
                json!({"parent": org, "roleUid": viewer, "requests": [
                    {"roleBinding": {"identityUid": c}}, {"roleBinding": {"identityUid": missing}},
                ]}),
            )
            .await;
        assert_not_found(&s, "atomic", status, &body, IDENTITY_TYPE);
        let (_, list) = s.get(&format!("{RB}?identity={c}")).await;
        assert_eq!(list["totalCount"], "0", "[{b}] nothing was created: {list}");
        for (case, body, field) in [
            (
                "conflicting role",
                json!({"parent": org, "roleUid": viewer, "requests": [{"roleBinding": {"identityUid": c, "roleUid": owner}}]}),
                "requests[0].role_binding.role_uid",
            ),
            (
                "foreign sub-request parent",
                json!({"parent": org, "roleUid": viewer, "requests": [{"parent": missing, "roleBinding": {"identityUid": c}}]}),
                "requests[0].parent",
            ),
            (
                "26 requests",
                json!({"parent": org, "roleUid": viewer, "requests": vec![json!({"roleBinding": {"identityUid": c}}); 26]}),
                "requests",
            ),
            (
                "empty",
                json!({"parent": org, "roleUid": viewer, "requests": []}),
                "requests",
            ),
        ] {
            let (status, body) = s.post(&batch, body).await;
            assert_invalid(&s, case, status, &body, field);
        }
        // The same checks as a single create: a viewer may not bind anyone.
        let (_, viewer_token) = member(&s, &org, &org, "viewer", "v").await;
        let (status, body) = s
            .call_as(
                &viewer_token,
                reqwest::Method::POST,
                &batch,
                Some(json!({"parent": org, "roleUid": viewer, "requests": [{"roleBinding": {"identityUid": c}}]})),
            )
            .await;
        assert_error(b, status, &body, 403, 7, "PERMISSION_DENIED");

        // gRPC: the same batch, and LookupIdentity agreeing with REST.
        let ch = tonic::transport::Channel::from_shared(format!("http://{}", s.addr()))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let ch = tonic::service::interceptor::InterceptedService::new(ch, common::Bearer(s.token.clone()));
        let sub = |identity: &str| CreateRoleBindingRequest {
            parent: String::new(),
            role_binding: Some(RoleBinding {
                identity_uid: identity.into(),
                ..Default::default()
            }),
        };
        let out = RoleBindingsServiceClient::new(ch.clone())
            .batch_create_role_bindings(BatchCreateRoleBindingsRequest {
                parent: org.clone(),
                requests: vec![sub(&c), sub(&d)],
                role_uid: viewer.clone(),
            })
            .await
            .unwrap_or_else(|e| panic!("[{b}] {e:?}"))
            .into_inner();
        assert_eq!(out.role_bindings.len(), 2, "[{b}]");
        assert_eq!(out.role_bindings[1].identity_uid, d, "[{b}]");

        let q = |sub: &str| {
            format!(
                "{ID}:lookupIdentity?issuer={}&subject={sub}",
                enc("https://accounts.example.com")
            )
        };
        let (status, one) = s.get(&q("alice")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {one}");
        let alice = one["uid"].as_str().unwrap().to_owned();
        assert!(common::is_hex(&alice, 40), "[{b}] {one}");
        let (_, again) = s.get(&q("alice")).await;
        assert_eq!(again["uid"], alice, "[{b}] deterministic");
        let (_, bob) = s.get(&q("bob")).await;
        assert_ne!(bob["uid"], alice, "[{b}]");
        let (status, body) = s.get(&format!("{ID}:lookupIdentity?issuer=x")).await;
        assert_invalid(&s, "no subject", status, &body, "subject");
        let (status, _) = s.call_as("", reqwest::Method::GET, &q("alice"), None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "[{b}]");
        let grpc = IdentitiesServiceClient::new(ch)
            .lookup_identity(LookupIdentityRequest {
                issuer: "https://accounts.example.com".into(),
                subject: "alice".into(),
            })
            .await
            .unwrap_or_else(|e| panic!("[{b}] {e:?}"))
            .into_inner();
        assert_eq!(grpc.uid, alice, "[{b}] REST and gRPC agree");
    }
}

/// A key given with only empty values never widens a filter or a token, and
/// a refused delete names only bindings the caller may see.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_values_and_hidden_bindings() {
    for s in servers().await {
        let b = s.backend;
        let org = uid(&s.create_group(None, "acme").await);
        let (status, body) = s.get(&format!("{G}?uidp.ids=,,,")).await;
        assert_invalid(&s, "empty ids", status, &body, "uidp.ids");
        let (status, body) = s.get("/sts/exchange?scopes=,,&identity=x").await;
        assert_invalid(&s, "empty scopes", status, &body, "scopes");
        // A team identity bound at the organization, out of the team owner's view.
        let team = uid(&s.create_group(Some(&org), "team").await);
        let (_, team_owner) = member(&s, &team, &team, "owner", "team-owner").await;
        let worker = create_identity(&s, &team, "worker").await;
        let binding = bind(&s, &org, &worker, &builtin(&s, "viewer").await).await;
        let (status, body) = s
            .call_as(&team_owner, reqwest::Method::DELETE, &format!("{ID}/{worker}"), None)
            .await;
        assert_error(b, status, &body, 400, 9, "FAILED_PRECONDITION");
        assert!(!body.to_string().contains(&binding), "[{b}] leaked {binding}: {body}");
        assert!(
            body["message"].as_str().unwrap().contains("roleBindings?identity="),
            "{body}"
        );
        let (status, body) = s.delete(&format!("{ID}/{worker}")).await;
        assert_error(b, status, &body, 400, 9, "FAILED_PRECONDITION");
        assert!(
            body.to_string().contains(&binding),
            "[{b}] the admin sees the binding: {body}"
        );
    }
}

/// Rule 18: removing a signing key stops every token it signed, including
/// tokens the server has already verified and cached, over REST and gRPC.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removed_signing_keys_stop_their_tokens() {
    use ward_core::clock::Clock as _;
    use ward_proto::iam::v2::ListGroupsRequest;
    use ward_proto::iam::v2::groups_service_client::GroupsServiceClient;
    for s in servers().await {
        let b = s.backend;
        let old = s.token.clone();
        let (status, body) = s.get(G).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        let ch = tonic::transport::Channel::from_shared(format!("http://{}", s.addr()))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut grpc = GroupsServiceClient::new(tonic::service::interceptor::InterceptedService::new(
            ch,
            common::Bearer(old.clone()),
        ));
        grpc.list_groups(ListGroupsRequest::default())
            .await
            .unwrap_or_else(|e| panic!("[{b}] cached and valid: {e:?}"));
        // Rotate, then remove the key the admin token was signed with.
        let store = s.ward().store.clone();
        let kid = jsonwebtoken::decode_header(&old).unwrap().kid.expect("kid");
        ward_auth::rotate_key(store.as_ref(), &s.ward().secret, s.clock.now_millis())
            .await
            .unwrap();
        store.delete_signing_key(&kid).await.unwrap();
        s.ward().tokens.refresh().await.unwrap();
        let (status, body) = s.get(G).await;
        assert_error(b, status, &body, 401, 16, "UNAUTHENTICATED");
        let st = grpc
            .list_groups(ListGroupsRequest::default())
            .await
            .expect_err("refused");
        assert_eq!(st.code(), tonic::Code::Unauthenticated, "[{b}] {st:?}");
        // A token from the new key works.
        let fresh = s.ward().admin_token().unwrap();
        let (status, body) = s.call_as(&fresh, reqwest::Method::GET, G, None).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
    }
}
