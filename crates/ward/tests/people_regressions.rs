//! Regression tests for the people review's findings, one per fix, on every
//! backend (`--dev` servers, so Ward may fetch an in-process [`TestIdp`] over
//! plain http on loopback):
//!
//! 1. repointing an identity provider (issuer, client, groups claim) needs
//!    what granting its roles needs, and never sends the stored secret to a
//!    new endpoint;
//! 2. a login by organization name finds the verified organization however
//!    many unverified ones share its name;
//! 3. each provider's first login binds its own default role;
//! 4. a session's mapped roles end when its identity is deleted;
//! 5. a wrong PKCE verifier does not spend a finished headless login;
//! 6. headless logins in progress are capped per provider, not server-wide;
//! 7. the SQLite database and the secret key are readable by their owner only.

mod common;

use std::time::{Duration, Instant};

use common::idp::{TestIdp, s256};
use common::people::{
    ID, IDPS, RB, assert_invalid, assert_oauth_error, bindings_of, claims, create_mapping, create_test_idp,
    custom_role, dev_servers, device_poll, device_start, form, get, login, person_uid, post_device_form, role_uid,
    stored_idp, verified_org, verified_org_at, verifier,
};
use common::{TestServer, assert_error, uid};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use ward_core::uidp::Uidp;

// ---------------------------------------------------------------------------
// Helpers (the shared ones are in common::people)

/// Binds `role` (a uid) to `identity` at `group`, as the admin.
async fn bind(s: &TestServer, group: &str, identity: &str, role: &str) {
    let (status, body) = s
        .post(
            &format!("{RB}/{group}"),
            json!({ "identityUid": identity, "roleUid": role }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "[{}] bind {role}: {body}", s.backend);
}

/// A 403 PERMISSION_DENIED whose message contains `says`.
fn assert_denied(ctx: &str, status: StatusCode, body: &Value, says: &str) {
    assert_error(ctx, status, body, 403, 7, "PERMISSION_DENIED");
    assert!(
        body["message"].as_str().unwrap_or_default().contains(says),
        "{ctx}: the refusal says {says:?}: {body}"
    );
}

// ---------------------------------------------------------------------------
// 1. Repointing a provider

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repointing_a_provider_needs_what_granting_needs() {
    for s in dev_servers().await {
        let b = s.backend;
        let idp = TestIdp::start().await;
        let org = verified_org(&s, "acme").await;
        let ia = create_test_idp(&s, &idp, &org, &role_uid("viewer")).await;
        create_mapping(
            &s,
            &ia,
            json!({ "externalGroupId": "admins", "roleUid": role_uid("owner") }),
        )
        .await;
        let at = |mask: &str| format!("{IDPS}/{ia}?update_mask={mask}");
        let new_endpoint = json!({ "oidc": { "issuer": "http://127.0.0.1:1", "clientSecret": "x" } });
        let new_claim = json!({ "oidc": { "groupsClaim": "roles" } });
        let before = stored_idp(&s, &ia).await;

        // Bob may update and list providers, and is a viewer: he may not
        // decide who receives the provider's roles.
        let tweaker = custom_role(
            &s,
            &org,
            "idp-tweaker",
            &["CAP_IAM_IDENTITY_PROVIDERS_UPDATE", "CAP_IAM_IDENTITY_PROVIDERS_LIST"],
        )
        .await;
        let (bob, bob_token) = common::person(&s, "bob", &[(org.as_str(), "viewer")]).await;
        bind(&s, &org, &bob, &tweaker).await;
        for (case, mask, body) in [
            (
                "a new issuer (with a secret)",
                "oidc.issuer,oidc.client_secret",
                &new_endpoint,
            ),
            ("a new groups claim", "oidc.groups_claim", &new_claim),
        ] {
            let (status, resp) = s
                .call_as(&bob_token, Method::PATCH, &at(mask), Some(body.clone()))
                .await;
            assert_denied(
                &format!("{b}: bob repoints the provider: {case}"),
                status,
                &resp,
                "role_bindings.create",
            );
        }

        // Dana may also bind roles, but does not hold what the provider's
        // mapping grants (owner).
        let binder = custom_role(
            &s,
            &org,
            "idp-binder",
            &[
                "CAP_IAM_IDENTITY_PROVIDERS_UPDATE",
                "CAP_IAM_IDENTITY_PROVIDERS_LIST",
                "CAP_IAM_ROLE_BINDINGS_CREATE",
            ],
        )
        .await;
        let (dana, dana_token) = common::person(&s, "dana", &[(org.as_str(), "viewer")]).await;
        bind(&s, &org, &dana, &binder).await;
        let (status, resp) = s
            .call_as(
                &dana_token,
                Method::PATCH,
                &at("oidc.groups_claim"),
                Some(new_claim.clone()),
            )
            .await;
        assert_denied(
            &format!("{b}: dana repoints a provider that grants owner"),
            status,
            &resp,
            "cannot grant",
        );

        let after = stored_idp(&s, &ia).await;
        assert_eq!(after.issuer, before.issuer, "[{b}] refused repoints change nothing");
        assert_eq!(after.oidc, before.oidc, "[{b}] refused repoints change nothing");
        assert_eq!(
            after.client_secret, before.client_secret,
            "[{b}] refused repoints keep the secret"
        );

        // What does not repoint still needs only identity_providers.update.
        let (status, resp) = s
            .call_as(
                &bob_token,
                Method::PATCH,
                &at("description"),
                Some(json!({ "description": "tweaked" })),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] bob updates the description: {resp}");
        assert_eq!(resp["description"], "tweaked", "[{b}] {resp}");

        // The owner may repoint it, but gives the secret again: the stored
        // one is never sent to a new endpoint.
        let (_, owner) = common::person(&s, "olive", &[(org.as_str(), "owner")]).await;
        let issuer = "https://idp2.example.com";
        let (status, resp) = s
            .call_as(
                &owner,
                Method::PATCH,
                &at("oidc.issuer"),
                Some(json!({ "oidc": { "issuer": issuer } })),
            )
            .await;
        assert_invalid(
            &format!("{b}: a new issuer without the secret"),
            status,
            &resp,
            "oidc.client_secret",
        );
        assert_eq!(
            stored_idp(&s, &ia).await.issuer,
            before.issuer,
            "[{b}] refused: unchanged"
        );

        let new_secret = "NEW-SECRET-456";
        let (status, resp) = s
            .call_as(
                &owner,
                Method::PATCH,
                &at("oidc.issuer,oidc.client_secret"),
                Some(json!({ "oidc": { "issuer": issuer, "clientSecret": new_secret } })),
            )
            .await;
        assert_eq!(
            status,
            StatusCode::OK,
            "[{b}] the owner repoints with a new secret: {resp}"
        );
        assert_eq!(resp["oidc"]["issuer"], issuer, "[{b}] {resp}");
        assert!(
            !resp.to_string().contains(new_secret),
            "[{b}] the secret is never returned: {resp}"
        );
        let after = stored_idp(&s, &ia).await;
        assert_eq!(after.issuer, issuer, "[{b}] the new issuer is stored");
        assert!(after.client_secret.is_some(), "[{b}] a secret is stored");
        assert_ne!(
            after.client_secret, before.client_secret,
            "[{b}] the stored (sealed) secret is the new one"
        );
    }
}

// ---------------------------------------------------------------------------
// 2. Logins by organization name

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_by_name_ignores_unverified_namesakes() {
    for s in dev_servers().await {
        let b = s.backend;
        let viewer = role_uid("viewer");
        let idp = TestIdp::start().await;
        // The verified organization sorts after its namesakes (listings are
        // by uid): a lookup that took the first few by name and then kept
        // the verified ones would never see it.
        let late = format!("ffff{}", &Uidp::new_root().as_str()[4..]);
        let org = verified_org_at(&s, "acme", &late).await;
        create_test_idp(&s, &idp, &org, &viewer).await;
        let mut namesakes = Vec::new();
        for _ in 0..3 {
            let (status, group) = s.post("/iam/v2/groups", json!({ "name": "acme" })).await;
            assert_eq!(status, StatusCode::OK, "[{b}] an unverified acme: {group}");
            namesakes.push(uid(&group));
        }
        // One namesake even has a provider of its own.
        let impostor = TestIdp::start().await;
        create_test_idp(&s, &impostor, &namesakes[0], &viewer).await;
        assert!(
            namesakes.iter().filter(|n| n.as_str() < org.as_str()).count() >= 2,
            "[{b}] the namesakes sort first: {namesakes:?} vs {org}"
        );

        let challenge = s256(&verifier());
        let url = format!(
            "{}/oauth?{}",
            s.base,
            form(&[
                ("idp_id", "acme"),
                ("redirect", "http://127.0.0.1:9/cb"),
                ("state", "s"),
                ("code_challenge", &challenge),
                ("code_challenge_method", "S256"),
            ])
        );
        let r = get(&url).await;
        let to = r
            .redirect()
            .unwrap_or_else(|| panic!("[{b}] /oauth?idp_id=acme redirects to the IdP: {r:?}"));
        assert!(
            to.starts_with(&format!("{}?", idp.authorize_endpoint())),
            "[{b}] to the verified acme's IdP: {to}"
        );
        // A headless login by name finds it too.
        let r = device_start(&s, "acme", &challenge).await;
        assert_eq!(r.status, StatusCode::OK, "[{b}] a headless login at acme: {r:?}");
    }
}

// ---------------------------------------------------------------------------
// 3. Default roles of several providers

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_providers_first_login_binds_its_default_role() {
    for s in dev_servers().await {
        let b = s.backend;
        let (viewer, editor) = (role_uid("viewer"), role_uid("editor"));
        // Two organizations whose providers are one IdP.
        let idp = TestIdp::start().await;
        let a = verified_org(&s, "acme").await;
        let c = verified_org(&s, "contoso").await;
        let ia = create_test_idp(&s, &idp, &a, &viewer).await;
        let ic = create_test_idp(&s, &idp, &c, &editor).await;

        let (via_a, _) = login(&s, &idp, &ia, "carol", &[]).await;
        let (via_c, _) = login(&s, &idp, &ic, "carol", &[]).await;
        let carol = person_uid(&s, &idp.issuer, "user-carol").await;
        assert_eq!(via_a, carol, "[{b}] the login at acme is carol's");
        assert_eq!(via_c, carol, "[{b}] the login at contoso is the same person");

        let mut expected = vec![(a.clone(), viewer.clone()), (c.clone(), editor.clone())];
        expected.sort();
        assert_eq!(
            bindings_of(&s, &carol).await,
            expected,
            "[{b}] viewer at acme and editor at contoso, one first login each"
        );
        for idp_id in [&ia, &ic, &ia] {
            login(&s, &idp, idp_id, "carol", &[]).await;
        }
        assert_eq!(
            bindings_of(&s, &carol).await,
            expected,
            "[{b}] later logins bind nothing new"
        );
    }
}

// ---------------------------------------------------------------------------
// 4. Session roles and deleted identities

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_roles_end_with_the_identity() {
    for s in dev_servers().await {
        let b = s.backend;
        let editor = role_uid("editor");
        let idp = TestIdp::start().await;
        let org = verified_org(&s, "acme").await;
        let i = create_test_idp(&s, &idp, &org, &role_uid("viewer")).await;
        create_mapping(&s, &i, json!({ "externalGroupId": "eng", "roleUid": editor })).await;

        let (dave, token) = login(&s, &idp, &i, "dave", &["eng"]).await;
        let c = claims(&token);
        assert_eq!(
            c["roles"],
            json!([{ "scope": org, "role": editor }]),
            "[{b}] the session holds the mapped role: {c}"
        );
        let group = format!("/iam/v2/groups/{org}");
        let (status, body) = s.call_as(&token, Method::GET, &group, None).await;
        assert_eq!(status, StatusCode::OK, "[{b}] the session works: {body}");

        // The person's bindings go: the session's roles still hold.
        let (status, list) = s.get(&format!("{RB}?identity={dave}&page_size=100")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] dave's bindings: {list}");
        let bindings: Vec<String> = list["roleBindings"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(uid)
            .collect();
        assert!(
            !bindings.is_empty(),
            "[{b}] the first login bound the default role: {list}"
        );
        for binding in &bindings {
            let (status, body) = s.delete(&format!("{RB}/{binding}")).await;
            assert_eq!(status, StatusCode::OK, "[{b}] delete binding {binding}: {body}");
        }
        let (status, body) = s.call_as(&token, Method::GET, &group, None).await;
        assert_eq!(
            status,
            StatusCode::OK,
            "[{b}] session roles outlive the bindings: {body}"
        );

        // The identity goes: the session ends (grant caches live at most 2 s).
        let (status, body) = s.delete(&format!("{ID}/{dave}")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] delete dave: {body}");
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let (status, body) = s.call_as(&token, Method::GET, &group, None).await;
            if status == StatusCode::UNAUTHORIZED {
                break;
            }
            assert_eq!(status, StatusCode::OK, "[{b}] until then the session works: {body}");
            assert!(
                Instant::now() < deadline,
                "[{b}] the session still works 5 s after its identity was deleted: {body}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

// ---------------------------------------------------------------------------
// 5. Headless logins and wrong verifiers

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_verifier_does_not_spend_a_headless_login() {
    for s in dev_servers().await {
        let b = s.backend;
        let idp = TestIdp::start().await;
        let org = verified_org(&s, "acme").await;
        let i = create_test_idp(&s, &idp, &org, &role_uid("viewer")).await;

        let right = verifier();
        let r = device_start(&s, &i, &s256(&right)).await;
        assert_eq!(r.status, StatusCode::OK, "[{b}] start a headless login: {r:?}");
        let start = r.json();
        let device_code = start["device_code"]
            .as_str()
            .unwrap_or_else(|| panic!("[{b}] a device code: {start}"))
            .to_owned();
        let user_code = start["user_code"]
            .as_str()
            .unwrap_or_else(|| panic!("[{b}] a user code: {start}"))
            .to_owned();
        let r = device_poll(&s, &device_code, &right).await;
        assert_oauth_error(
            b,
            "a poll before the person finished",
            &r,
            StatusCode::BAD_REQUEST,
            "authorization_pending",
        );

        // The person confirms the code and logs in at the IdP.
        let r = post_device_form(&s, &user_code, &s.base).await;
        let authorize = r
            .redirect()
            .unwrap_or_else(|| panic!("[{b}] the code page sends the person to the IdP: {r:?}"));
        let callback = idp.approve(&authorize, "erin", &[]).await;
        let done = get(&callback).await;
        assert_eq!(
            done.status,
            StatusCode::OK,
            "[{b}] the callback finishes the login: {done:?}"
        );

        // A wrong verifier is refused and leaves the login for the right one,
        // which gets it once.
        let r = device_poll(&s, &device_code, &verifier()).await;
        assert_oauth_error(b, "a wrong verifier", &r, StatusCode::BAD_REQUEST, "invalid_grant");
        let r = device_poll(&s, &device_code, &right).await;
        assert_eq!(
            r.status,
            StatusCode::OK,
            "[{b}] the right verifier after a wrong one: {r:?}"
        );
        let resp = r.json();
        assert!(
            resp["token"].as_str().is_some_and(|t| !t.is_empty()),
            "[{b}] a token: {resp}"
        );
        let erin = person_uid(&s, &idp.issuer, "user-erin").await;
        assert_eq!(resp["identity"], erin.as_str(), "[{b}] erin's token: {resp}");
        let r = device_poll(&s, &device_code, &right).await;
        assert_oauth_error(b, "the device code again", &r, StatusCode::BAD_REQUEST, "invalid_grant");
    }
}

// ---------------------------------------------------------------------------
// 6. Headless logins in progress, per client and per provider

/// Rule: one client address holds at most MAX_DEVICE_LOGINS_PER_CLIENT
/// pending headless logins; others (another address, another provider)
/// still start theirs, so anonymous starts from one place cannot block a
/// provider's logins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headless_logins_are_capped_per_client() {
    for s in dev_servers().await {
        let b = s.backend;
        let viewer = role_uid("viewer");
        let idp = TestIdp::start().await;
        let x_org = verified_org(&s, "acme").await;
        let y_org = verified_org(&s, "contoso").await;
        let x = create_test_idp(&s, &idp, &x_org, &viewer).await;
        let y = create_test_idp(&s, &idp, &y_org, &viewer).await;
        let challenge = s256(&verifier());
        let attacker: std::net::IpAddr = [127, 0, 0, 2].into();
        let person: std::net::IpAddr = [127, 0, 0, 3].into();
        let cap = ward_store::people::MAX_DEVICE_LOGINS_PER_CLIENT;

        for n in 1..=cap {
            let r = common::people::device_start_from(&s, &x, &challenge, attacker).await;
            assert_eq!(r.status, StatusCode::OK, "[{b}] headless login {n} at acme: {r:?}");
        }
        for provider in [&x, &y] {
            let r = common::people::device_start_from(&s, provider, &challenge, attacker).await;
            assert_oauth_error(
                b,
                "one more headless login from the same client",
                &r,
                StatusCode::TOO_MANY_REQUESTS,
                "temporarily_unavailable",
            );
        }
        let r = common::people::device_start_from(&s, &x, &challenge, person).await;
        assert_eq!(r.status, StatusCode::OK, "[{b}] acme's people still log in: {r:?}");
        assert!(r.json()["device_code"].is_string(), "[{b}] {r:?}");
    }
}

/// Rule: a provider holds at most MAX_DEVICE_LOGINS pending headless logins
/// however many clients start them; other providers are unaffected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headless_logins_are_capped_per_provider() {
    use ward_store::people::{DeviceLoginRecord, MAX_DEVICE_LOGINS};
    for s in dev_servers().await {
        let b = s.backend;
        let viewer = role_uid("viewer");
        let idp = TestIdp::start().await;
        let x_org = verified_org(&s, "acme").await;
        let y_org = verified_org(&s, "contoso").await;
        let x = create_test_idp(&s, &idp, &x_org, &viewer).await;
        let y = create_test_idp(&s, &idp, &y_org, &viewer).await;
        let challenge = s256(&verifier());
        // Fill acme's pending logins straight in the store, each from its own
        // client (the API route would take thousands of addresses).
        let now = s.ward().clock.now_millis();
        for n in 0..MAX_DEVICE_LOGINS {
            let record = DeviceLoginRecord {
                id: format!("{n:064x}"),
                user_code: format!("FILL-{n:05}"),
                idp_uid: x.clone(),
                challenge: challenge.clone(),
                handoff: None,
                expire_time: now + 600_000,
            };
            s.ward()
                .store
                .create_device_login(&record, &format!("client-{n}"), 10, now)
                .await
                .unwrap_or_else(|e| panic!("[{b}] pending login {n}: {e:?}"));
        }
        let r = device_start(&s, &x, &challenge).await;
        assert_oauth_error(
            b,
            "a headless login past acme's cap",
            &r,
            StatusCode::TOO_MANY_REQUESTS,
            "temporarily_unavailable",
        );
        let r = device_start(&s, &y, &challenge).await;
        assert_eq!(r.status, StatusCode::OK, "[{b}] contoso's people still log in: {r:?}");
        assert!(r.json()["device_code"].is_string(), "[{b}] {r:?}");
    }
}

// ---------------------------------------------------------------------------
// 7. Files

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlite_database_is_private() {
    use std::os::unix::fs::PermissionsExt as _;
    let s = TestServer::start(ward_store::testing::sqlite()).await;
    let b = s.backend;
    let mode = |p: &std::path::Path| {
        std::fs::metadata(p)
            .unwrap_or_else(|e| panic!("[{b}] {}: {e}", p.display()))
            .permissions()
            .mode()
            & 0o777
    };
    let db = s.config.database_url();
    assert_eq!(mode(std::path::Path::new(&db)), 0o600, "[{b}] the database {db}");
    // SQLite makes its journal files with the database's permissions.
    for suffix in ["-wal", "-shm"] {
        let p = std::path::PathBuf::from(format!("{db}{suffix}"));
        if p.exists() {
            assert_eq!(mode(p.as_path()), 0o600, "[{b}] {}", p.display());
        }
    }
    let key = s.config.data_dir.join("secret.key");
    assert_eq!(mode(key.as_path()), 0o600, "[{b}] {}", key.display());
}
